/* SPDX-License-Identifier: MIT */
/*
 * The state of one run of the rsd-demo workload, shared by workload.c (the
 * values, the ring step, the checks) and stages.c (the stages and their
 * kernels). Not part of demo.h: rsd-bench and rsd-demo-mpi see only runs.
 */
#ifndef RSD_DEMO_WORKLOAD_H
#define RSD_DEMO_WORKLOAD_H

#include "demo.h"

struct keysrc {
	struct rsd_manager *m;
	unsigned seed;
	uint64_t nbytes;
	unsigned loads;
};

/* A ciphertext's metadata; it travels with the value between ranks. */
struct ct_meta {
	uint32_t gid;	 /* job-wide id: the seed of its contents */
	uint32_t level;	 /* what a real scheme would keep: the modulus level */
	uint32_t origin; /* the rank that created it */
	uint32_t hops;	 /* ranks it has left */
};

struct demo {
	const struct demo_opts *o;
	enum demo_policy pol;
	struct demo_ring *ring;
	FILE *out;
	struct rsd_manager *m;
	struct rsd_controller *c;
	struct rsd_policy *policy; /* outlives c */
	struct rsd_simdev *sd;
	const struct rsd_device_ops *ops; /* the simulated device's or CUDA's */
	struct rsd_location dev;
	void *stream;
	struct rsd_handle *ct, *key, *w;
	struct ct_meta *meta; /* per ciphertext slot */
	struct keysrc *ks;
	/* What a stage's kernel checks each value's bytes against: the
	 * demo_window_sum() of its contents, per ciphertext slot, key and
	 * weight block. */
	uint64_t *ct_sum, *key_sum, *w_sum;
	/* Totals: moved[why][from][to] bytes and transition counts. */
	uint64_t moved[NWHY][NTIERS][NTIERS];
	unsigned nmoved[NWHY][NTIERS][NTIERS];
	unsigned evictions, spills, drops;
	uint64_t explored;
	unsigned sent, received;
	/* The stages' kernels: values they read, and read wrong. */
	unsigned kernel_reads, kernel_faults;
	/* Stages decided again after waiting for the running kernel: the
	 * device could not hold two stages' values at once. */
	unsigned room_waits;
	uint64_t stages_ns; /* from the first stage's use to its last kernel */
	bool progress;	    /* stage counts on stderr */
};

/* The command line into *o; ring: an MPI job. 0, or -1 after printing the
 * usage. */
int demo_parse(int argc, char **argv, struct demo_opts *o, bool ring);

/* The bytes a kernel checks: the first and the last DEMO_WINDOW bytes of a
 * buffer (enough to tell any two values, or stale bytes, apart). */
#define DEMO_WINDOW 4096
uint64_t demo_window_sum(const unsigned char *p, uint64_t n);

/* The requirements of stage s: its values on the device. */
void demo_stage_handles(struct demo *dm, unsigned s, struct rsd_requirement *req);

/* Adds a decision's evictions and a report's copies to the totals and to
 * the stage's row (either may be NULL). */
void demo_account(struct demo *dm, struct row *r, enum phase ph, const struct rsd_decision *d,
		  const struct rsd_plan_report *rep, const struct rsd_handle *outgoing, size_t n);

/* The ring step of stage s (ring runs only). 0, or an error code. */
int demo_exchange(struct demo *dm, unsigned s, struct row *row);

/*
 * Every stage in order, each row added to tab: waiting for each stage's
 * copies, or prefetching the next stage while this one's kernel runs
 * (dm->o->prefetch). Returns 0, or -1 after saying why on stderr.
 */
int demo_stages(struct demo *dm, struct table *tab);

#endif
