// SPDX-License-Identifier: MIT
/*
 * The data plane at memory speed: the controller cycles 64 values of 4 MiB
 * through a pinned-host budget of 16 of them, spilling to pageable host.
 * Each request uses 8 values at pinned-host, round robin, so once the
 * budget is full every request evicts 8 (moved pinned -> pageable by the
 * tiered LRU's fallback tier) and loads 8 (moved pageable -> pinned).
 *
 * Bytes moved are counted from each use's decision (one value's bytes per
 * move or ensure it plans) and set against single-thread memcpy doing the
 * same copies (same sizes, same round robin, same 320 MiB footprint)
 * between buffers already faulted in, in the same run, repetitions
 * interleaved.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"

#define DP_VALUES 64u
#define DP_BUDGET_VALUES 16u
#define DP_REQ_VALUES 8u
#define DP_BYTES (4u << 20)

struct dp_env {
	struct rsd_manager *m;
	struct rsd_policy *pol;
	struct rsd_controller *c;
	struct rsd_handle h[DP_VALUES];
	size_t next;
};

static void dp_env_init(struct dp_env *e)
{
	const struct rsd_location to[] = { RSD_LOC_PAGEABLE_HOST };
	struct rsd_budget b = { RSD_LOC_PINNED_HOST, (uint64_t)DP_BUDGET_VALUES * DP_BYTES };
	struct rsd_fallback_tier tier = { RSD_LOC_PINNED_HOST, to, 1 };

	memset(e, 0, sizeof(*e));
	e->m = bench_manager(&b, 1);
	for (size_t i = 0; i < DP_VALUES; i++)
		e->h[i] = bench_adopt(e->m, DP_BYTES, RSD_EXCLUSIVE, true);
	CK(rsd_tiered_lru_create(&tier, 1, &e->pol));
	CK(rsd_controller_create(e->m, e->pol, 0, &e->c));
}

static void dp_env_fini(struct dp_env *e)
{
	rsd_controller_free(e->c);
	bench_manager_end(e->m);
	rsd_policy_free(e->pol);
}

static size_t dp_copies(const struct rsd_action *a, size_t n)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		k += a[i].kind == RSD_ACT_MOVE || a[i].kind == RSD_ACT_ENSURE;
	return k;
}

/* One request; returns the number of 4 MiB copies its decision planned. */
static size_t dp_use_once(struct dp_env *e)
{
	struct rsd_requirement req[DP_REQ_VALUES];
	struct rsd_request rq = { .name = "dataplane",
				  .requirements = req,
				  .nrequirements = DP_REQ_VALUES };
	const struct rsd_plan *p;
	struct rsd_use *u;
	size_t k;

	for (size_t i = 0; i < DP_REQ_VALUES; i++)
		req[i] = (struct rsd_requirement){ e->h[(e->next + i) % DP_VALUES],
						   RSD_LOC_PINNED_HOST };
	e->next = (e->next + DP_REQ_VALUES) % DP_VALUES;
	CK(rsd_controller_use(e->c, &rq, NULL, 0, NULL, 0, &u));
	p = rsd_use_decision(u)->plan;
	k = dp_copies(p->reclaim, p->nreclaim) + dp_copies(p->enter, p->nenter);
	CK(rsd_use_close(u, NULL));
	rsd_use_free(u);
	return k;
}

/*
 * The same copies with memcpy, over the same footprint: 64 "pageable" and
 * 16 "pinned" buffers of 4 MiB, all faulted in. Request j spills the 8
 * values its slots held (pinned -> pageable) and loads its own 8 (pageable
 * -> pinned), as the controller's round robin does. Returns the copies.
 */
static size_t dp_memcpy_requests(char **pg, char **pin, size_t first, size_t nreq)
{
	size_t k = 0;

	for (size_t j = first; j < first + nreq; j++)
		for (size_t i = 0; i < DP_REQ_VALUES; i++) {
			size_t v = (j * DP_REQ_VALUES + i) % DP_VALUES;
			size_t victim = (v + DP_VALUES - DP_BUDGET_VALUES) % DP_VALUES;
			char *slot = pin[(j * DP_REQ_VALUES + i) % DP_BUDGET_VALUES];

			memcpy(pg[victim], slot, DP_BYTES);
			memcpy(slot, pg[v], DP_BYTES);
			k += 2;
		}
	return k;
}

static char *dp_buffer(void)
{
	char *p = malloc(DP_BYTES);

	if (!p)
		bench_fail("malloc(4 MiB)", -RSD_ENOMEM);
	memset(p, 1, DP_BYTES);
	return p;
}

/* CPU time of the whole process (the reclaimer's frees included). */
static uint64_t dp_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void case_dataplane(void)
{
	size_t uses = QF(8, 32), reps = QF(3, 7), ncopy = 0, mreq = 0;
	struct dp_env e;
	char *pg[DP_VALUES], *pin[DP_BUDGET_VALUES];
	double ctl[16], cpy[16], ctl_cpu[16], cpy_cpu[16];
	struct bench_fig *f;

	dp_env_init(&e);
	for (size_t i = 0; i < DP_VALUES; i++)
		pg[i] = dp_buffer();
	for (size_t i = 0; i < DP_BUDGET_VALUES; i++)
		pin[i] = dp_buffer();
	/* Fill the budget and go round once: the pinned pool is warm after. */
	for (size_t i = 0; i < DP_VALUES / DP_REQ_VALUES + 2; i++)
		dp_use_once(&e);
	mreq += DP_VALUES / DP_REQ_VALUES;
	dp_memcpy_requests(pg, pin, 0, mreq);
	for (size_t r = 0; r < reps; r++) {
		uint64_t t0 = bench_now_ns(), c0 = dp_cpu_ns(), t;
		size_t k = 0;

		for (size_t i = 0; i < uses; i++)
			k += dp_use_once(&e);
		t = bench_now_ns() - t0;
		ctl_cpu[r] = (double)k * DP_BYTES / (double)(dp_cpu_ns() - c0);
		if (k < uses * 2 * DP_REQ_VALUES)
			bench_fail("dataplane: a request moved fewer than 16 values", -RSD_EUSAGE);
		ctl[r] = (double)k * DP_BYTES / (double)t; /* bytes/ns = GB/s */
		ncopy = k;
		t0 = bench_now_ns();
		c0 = dp_cpu_ns();
		k = dp_memcpy_requests(pg, pin, mreq, uses);
		cpy[r] = (double)k * DP_BYTES / (double)(bench_now_ns() - t0);
		cpy_cpu[r] = (double)k * DP_BYTES / (double)(dp_cpu_ns() - c0);
		mreq += uses;
	}
	for (size_t i = 0; i < DP_VALUES; i++)
		free(pg[i]);
	for (size_t i = 0; i < DP_BUDGET_VALUES; i++)
		free(pin[i]);
	dp_env_fini(&e);
	bench_line("dataplane", "memcpy_GBps", bench_median(cpy, reps), "GB/s");
	bench_line("dataplane", "copies_per_use", (double)ncopy / (double)uses, "count");
	f = bench_fig("dataplane", "ctrl_GBps", bench_median(ctl, reps), "GB/s");
	bench_fig_base(f, "memcpy", bench_median(cpy, reps));
	bench_fig_target(f, TGT_RATIO_MIN, 0.8);
	/* Per second of process CPU time: what a loaded machine does not move. */
	f = bench_fig("dataplane", "ctrl_GB_per_cpu_s", bench_median(ctl_cpu, reps), "GB/cpu-s");
	bench_fig_base(f, "memcpy", bench_median(cpy_cpu, reps));
	bench_note("dataplane: %u values of 4 MiB, pinned budget %u values, fallback pinned -> "
		   "pageable; rsd_controller_use + close of %u values at pinned, round robin (each "
		   "spills %u and loads %u); GB/s = 4 MiB x planned copies / time; memcpy does "
		   "the same copies over as many faulted buffers",
		   DP_VALUES, DP_BUDGET_VALUES, DP_REQ_VALUES, DP_REQ_VALUES, DP_REQ_VALUES);
}
