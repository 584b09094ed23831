/* SPDX-License-Identifier: MIT */
/*
 * The rsd-demo workload, shared by rsd-demo (one process) and rsd-demo-mpi
 * (one rank of an MPI job): workload.c runs it, report.c prints its tables.
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
