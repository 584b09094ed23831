/* SPDX-License-Identifier: MIT */
/*
 * The interpreter: runs one random sequence of public operations against
 * librsd (on a simulated two-GPU device) and the reference model, and
 * compares result codes, reports and snapshots after every step.
 *
 * The sequence comes from a seed (replayable: the same seed and step count
 * give the same run) or, for the fuzzer, from a byte string (each decision
 * consumes bytes; the run ends when they run out).
 */
#ifndef RSD_TEST_INTERP_H
#define RSD_TEST_INTERP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <rsd/rsd.h>

struct ip_opts {
	uint64_t seed;
	unsigned steps;
	const uint8_t *data; /* non-NULL: decisions come from these bytes */
	size_t len;
	FILE *log; /* non-NULL: every operation is written here */
	/* Nonzero: the alloc_fault-th bookkeeping allocation librsd makes
	 * after the simulated device is set up fails (the "alloc" fault point
	 * of rsd/fault.h). The call that reports it must return -RSD_ENOMEM
	 * (or -RSD_EEXEC caused by it) and change nothing beyond a committed
	 * plan prefix; the model is rolled back to match, the snapshot is
	 * compared, and the operation is replayed with the point disarmed. */
	uint64_t alloc_fault;
};

struct ip_stats {
	unsigned long runs, ops, snapshots, divergences;
	unsigned long per_op[32];
	unsigned long codes[32]; /* results compared: [0] successes, [e] -e */
	/* alloc_fault runs: the fault fired; a call reported it (the rest were
	 * absorbed: every call still succeeded). */
	unsigned long faults_fired, faults_reported;
};

/*
 * One run. Returns 0 when librsd and the model agreed on every step, else -1
 * with a description (seed, step, operation, field, the last operations) in
 * why.
 */
int ip_run(const struct ip_opts *o, struct ip_stats *st, char *why, size_t len);

/* Names of the operation kinds counted in ip_stats.per_op. */
const char *ip_op_name(unsigned op);
unsigned ip_nops(void);

/*
 * Invariants every snapshot must satisfy on its own (reference.md §7.2,
 * §14.6 and the must-preserve rule). Returns true, or false with why.
 */
bool ip_snapshot_invariants(const struct rsd_snapshot *s, char *why, size_t len);

#endif
