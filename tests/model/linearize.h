/* SPDX-License-Identifier: MIT */
/*
 * Linearizability against the model (reference.md §21): several threads
 * run random operations on one manager whose simulated device progresses in
 * the background, every call is logged with the writer sections it ran in
 * (rsd__lin_log_set), and the history is replayed in the order of those
 * sections against the sequential model (model.h), which must agree on
 * every result, report and state_version and on the final snapshot.
 */
#ifndef RSD_TEST_LINEARIZE_H
#define RSD_TEST_LINEARIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/*
 * The hostile mode (hostile.inc): what it arms (LZF_*, bits of
 * lz_opts.faults) and what it checks (LZC_*, bits of lz_opts.checks). The
 * names, in this order, are what lz_parse_set() takes and
 * Documentation/fault-injection.md lists.
 */
enum lz_fault {
	LZF_COPY,	    /* a queued copy fails on the device (sticky on its stream) */
	LZF_QUERY,	    /* an event query fails */
	LZF_SYNC,	    /* an event sync fails */
	LZF_RECORD,	    /* an event record fails */
	LZF_DEVALLOC,	    /* a device or pinned allocation fails */
	LZF_ALLOC,	    /* a bookkeeping allocation fails (fault point "alloc") */
	LZF_RESIDENT,	    /* a value's storage allocation fails ("resident") */
	LZF_STREAM_DESTROY, /* a GPU lease's consumer stream is destroyed before its release */
	LZF_CLOSE_RACE,	    /* at the end, close(FORCE|NOWAIT) beside a waiter on a stalled copy */
	LZF_USES,	    /* controller uses (rsd_controller_use, with LZF_ASYNC _use_async) */
	LZF_ASYNC,	    /* not-waiting calls (to a device; with LZF_WAITERS also to host) */
	LZF_WAITERS,	    /* several host waiters on one queued copy */
	LZF_DEVLOSS,	    /* cuda:1 is lost for good once, at a random call */
	LZF_N
};

enum lz_check {
	LZC_BUDGET,   /* every snapshot: used + reserved <= budget, used = its charges */
	LZC_LEDGER,   /* a snapshot's free bytes are what admission then accepts */
	LZC_PRESERVE, /* leased bytes and, at the end, every value's copies hold its pattern */
	LZC_RECOVER,  /* after the faults, a value's second call does not fail for the device */
	LZC_CLOSE,    /* rsd_manager_close(0) returns 0 at the end */
	LZC_N
};

struct lz_opts {
	uint64_t seed;
	unsigned nthreads;    /* 1..8 */
	unsigned ops;	      /* per thread */
	uint64_t delay_ns;    /* the simulated device's per-item delay */
	unsigned load_max_us; /* a source load sleeps up to this long */
	FILE *log;	      /* non-NULL: the replayed history is written here */
	/* The hostile mode: not-waiting calls, GPU leases with consumer
	 * streams, kernels reading leased bytes, faults armed at random. */
	bool hostile;
	unsigned faults;	 /* 1u << LZF_* armed (hostile only) */
	unsigned fault_permille; /* per call: chance of arming one of them */
	unsigned checks;	 /* 1u << LZC_* on (hostile only) */
	unsigned watchdog_ms;	 /* a call running longer is a hang (0: 20000) */
	bool roomy;		 /* budgets 8 times larger: admissions rarely wait for room */
};

struct lz_stats {
	unsigned long runs, ops, events;
	/* Concurrent-only outcomes, each confirmed against the history:
	 * -RSD_EINUSE "a transfer is in flight", a budget or plan refused for
	 * charges in flight; calls that waited for another's transfer. */
	unsigned long inflight_inuse, inflight_budget, inflight_plan;
	/* Plans whose queued copy committed after a later action of theirs. */
	unsigned long plan_reordered;
	unsigned long codes[32]; /* [0] successes, [e] -e */
	/* The hostile mode: runs with its calls; runs replayed against the
	 * model (no fault fired, no hostile call or only not-waiting calls,
	 * waits and reaps), of which with hostile calls; runs given the end
	 * checks instead; queued copies whose completion was replayed; runs
	 * in which each class fired; calls. */
	unsigned long hostile_runs, replayed, replayed_hostile, end_checked, handover_runs, qdone,
		async_reloads, qread_done, fired[LZF_N], async_calls, waits, gpu_leases, kernels,
		uses, probes;
};

/* One run; 0, or -1 with a description (seed, event, the history around it). */
int lz_run(const struct lz_opts *o, struct lz_stats *st, char *why, size_t len);

/*
 * Parse a comma-separated list of LZF_* (checks false) or LZC_* (checks
 * true) names into bits: "all", "none", NAME adds, -NAME removes; a list
 * starting with -NAME starts from *out, any other from none. 0, or -1
 * naming the bad word in why.
 */
int lz_parse_set(const char *list, bool checks, unsigned *out, char *why, size_t len);
const char *lz_set_name(bool checks, unsigned bit);

#endif
