/* SPDX-License-Identifier: MIT */
/*
 * The rsd-demo workload, shared by rsd-demo (one process) and rsd-demo-mpi
 * (one rank of an MPI job): workload.c runs it, stages.c runs its stages,
 * report.c and compare.c print its tables, options.c reads its options.
 */
#ifndef RSD_DEMO_H
#define RSD_DEMO_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <rsd/rsd.h>

#define MiB (1024ull * 1024)

/*
 * What an MPI job lends the workload; every call is collective (all ranks
 * make it, in the same order). Each returns 0, or -1 after printing why.
 */
struct demo_ring {
	int rank, nranks;
	int local_rank; /* among the ranks of this node: picks cuda:<local_rank> */
	/* Send n blocks of len bytes to rank + 1 while receiving n blocks
	 * from rank - 1 (modulo nranks) into in[]. */
	int (*shift)(struct demo_ring *ring, const void *const *out, void *const *in, size_t n,
		     uint64_t len);
	/* v[i] becomes the sum of v[i] over every rank. */
	int (*sum)(struct demo_ring *ring, uint64_t *v, size_t n);
	/* Rank 0 writes every rank's text to stdout in rank order. */
	int (*print_all)(struct demo_ring *ring, const char *text, size_t len);
	/* End the whole job at once (a rank that fails cannot leave the others
	 * waiting in a collective call). */
	void (*abort)(struct demo_ring *ring, int status);
};

enum tier {
	T_PAGEABLE,
	T_PINNED,
	T_DEVICE,
	NTIERS
};

/* Why bytes moved: the phase of the run and what the transition served. */
enum why {
	W_LOAD,
	W_SPILL_DEV,
	W_SPILL_PIN,
	W_SEND,
	W_ROOM,
	W_VERIFY,
	W_OTHER,
	NWHY
};

enum phase {
	PH_STAGE,
	PH_EXCHANGE,
	PH_VERIFY
};

/* One row of the per-stage table. Every field is a uint64_t, so two rows
 * compare with memcmp. */
struct row {
	uint64_t evict, spills, drops, h2d, d2h, h2h, peak, explored;
};

/* The compact per-stage table: DEMO_FULL_STAGES rows in full, then one
 * row per run of consecutive stages with the same figures, a repeating
 * cycle of stages said once, then the totals. */
struct table {
	struct row *rows;
	unsigned n;
};

struct demo_opts {
	unsigned ciphertexts, keys, weights, stages, share;
	uint64_t ct_bytes, key_bytes, weight_bytes, workspace;
	uint64_t device_budget, pinned_budget;
	unsigned policies; /* bit (1 << enum demo_policy) per policy to run */
	uint64_t near;	   /* the next-use policy's near_steps */
	bool near_set;	   /* else derived from the budgets (demo_default_near) */
	bool quiet;
	bool prefetch;	    /* use the next stage while this one's kernel runs */
	bool links;	    /* the simulated device's link model, in the background */
	bool compare;	    /* run each policy waiting, then prefetching, with links */
	uint64_t kernel_ns; /* each stage's kernel (simulated device only) */
};

/* The time scale of the simulated device's link model under --links (the
 * environment's RSD_SIMDEV_TIME_SCALE instead when set): each copy takes
 * this many times what it would on an H200 node, so that the modelled
 * copies, not this machine's memcpy, decide the stages' elapsed time. */
#define DEMO_TIME_SCALE 100.0

/* The options rsd-demo runs with when given none (ring: an MPI job). */
void demo_opts_default(struct demo_opts *o, bool ring);

enum demo_policy {
	DP_LRU,
	DP_NEXT_USE,
	NPOLICIES
};

extern const char *const demo_policy_name[NPOLICIES];

/* The values of stage s as indices: ciphertexts 0.., keys after them,
 * weights last (DEMO_NSTAGE_VALUES of them, the order compute uses). */
#define DEMO_NSTAGE_VALUES 4
void demo_stage_values(const struct demo_opts *o, unsigned s, uint32_t idx[DEMO_NSTAGE_VALUES]);
/* near_steps for the next-use policy: the stages whose spilled
 * ciphertexts fill the pinned budget. */
uint64_t demo_default_near(const struct demo_opts *o);
/* The offline bound on bytes brought to the device for the workload. */
int demo_bound(const struct demo_opts *o, uint64_t *h2d, bool *exact);

/* What one run moved in its stages (not the final checks), per pair. */
struct demo_result {
	bool ran;
	uint64_t moved[NTIERS][NTIERS]; /* [from tier][to tier] */
	unsigned evictions, spills, drops;
	uint64_t explored;
	uint64_t stages_ns; /* the stages' elapsed time, to the last kernel's end */
	unsigned kernel_reads, kernel_faults; /* values the kernels read; read wrong */
	unsigned lost;			      /* kernel faults included */
};

/*
 * One run of the workload under policy pol, printed to out (NULL: nothing
 * is printed). ring NULL for a single process. Returns 0 (losses are
 * counted in res->lost), or -1 after a failure (rsd_last_error says why).
 */
int demo_workload(const struct demo_opts *o, enum demo_policy pol, struct demo_ring *ring,
		  FILE *out, struct demo_result *res);
/* Both runs side by side with the bound. */
void demo_print_compare(FILE *out, const struct demo_opts *o, const struct demo_result *r);
/* --compare-prefetch: each policy's stages' elapsed time, waiting
 * (wait[p]) and prefetching (pre[p]), side by side. */
void demo_print_prefetch(FILE *out, const struct demo_opts *o, const struct demo_result *wait,
			 const struct demo_result *pre);

/* Bytes as MiB for printing. */
double demo_mib(uint64_t nbytes);

extern const char *const demo_tier_name[NTIERS];
extern const char *const demo_why_text[NWHY];
enum tier demo_tier(struct rsd_location at);
/* outgoing: the handles an exchange sends (n of them), else NULL. */
enum why demo_why_of(enum phase ph, const struct rsd_transition *t,
		     const struct rsd_handle *outgoing, size_t n);

int demo_table_begin(struct table *t, unsigned nstages);
void demo_table_add(struct table *t, const struct row *r);
/* Prints the table and frees its rows. */
void demo_table_end(struct table *t, FILE *out);

uint64_t demo_device_peak(struct rsd_manager *m, struct rsd_location dev);
void demo_print_snapshot(FILE *out, struct rsd_manager *m);

/*
 * The whole run; ring NULL for a single process. Returns the exit status:
 * 0, 1 on any loss, 2 on bad usage.
 */
int demo_run(int argc, char **argv, struct demo_ring *ring);

#endif
