// SPDX-License-Identifier: MIT
/*
 * trace_cycle, the hook of the tracing comparison, and the scaling sweep:
 * how the ensure/drop cycle, a snapshot and explain grow with the number of
 * values registered.
 */
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

/*
 * The ensure(pinned)+drop(pinned) cycle of one 4 KiB value in this build.
 * The three-way comparison (compiled out / compiled in, no session /
 * recording) runs this case in different builds and sessions.
 */
static void case_trace_cycle(void)
{
	struct rsd_manager *m = bench_manager(NULL, 0);
	struct rsd_handle h = bench_adopt(m, 4096, RSD_REPLICABLE, true);

	bench_line("trace_cycle", "rsd_trace_compiled", RSD_TRACE ? 1 : 0, "flag");
	bench_fig("trace_cycle", "cycle_ns", bench_cycle_ns(m, h, QF(20000, 200000), QF(3, 7)),
		  "ns");
	bench_manager_end(m);
}

/*
 * The scaling table. At each N, one manager holds the plan environment (10
 * adopted replicable values) plus N - 10 registered sources, never loaded
 * until the controller asks for them; the pageable budget holds the 10 plus
 * 64 sources, so every controller request of 8 evicts 8 and loads 8. All
 * managers live side by side and each repetition measures every row at
 * every N in turn, so a change of load on the machine falls on all of them.
 *
 * Rows: ensure(pinned)+drop(pinned) of one adopted value; a host lease
 * (acquire + release + free); explain of the 100-action plan; decide and
 * use (+ close) of the 8-value request; a snapshot (linear in N by
 * definition: printed per value too).
 */
#define SCALE_COUNTS 4u
#define SCALE_ROWS 6u

enum scale_row {
	SR_CYCLE,
	SR_LEASE,
	SR_EXPLAIN,
	SR_DECIDE,
	SR_USE,
	SR_SNAPSHOT
};

static const char *const scale_row_name[SCALE_ROWS] = { "cycle_ns",  "lease_ns", "explain_us",
							"decide_us", "use_us",	 "snapshot_ms" };

struct scale_env {
	size_t n;
	struct plan_env pe;
	struct ctrl_env ce;
	double setup_s;
	double rss_per_value;  /* bytes of resident-set growth per value */
	double heap_per_value; /* bytes of malloc'ed memory in use per value */
	double v[SCALE_ROWS][8];
};

static uint64_t scale_rss_bytes(void)
{
	unsigned long size = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f) {
		if (fscanf(f, "%lu %lu", &size, &resident) != 2)
			resident = 0;
		fclose(f);
	}
	return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* Bytes malloc has handed out and not had back, over all arenas. */
static uint64_t scale_heap_bytes(void)
{
	struct mallinfo2 mi = mallinfo2();

	return (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
}

static void scale_env_init(struct scale_env *se, size_t n)
{
	struct rsd_budget b = { RSD_LOC_PAGEABLE_HOST,
				(uint64_t)(PLAN_VALUES + BUDGET_VALUES) * VAL_BYTES };
	size_t nsrc = n - PLAN_VALUES;
	struct rsd_handle *h = calloc(nsrc, sizeof(*h));
	uint64_t t0, rss0, heap0;

	if (!h)
		bench_fail("calloc", -RSD_ENOMEM);
	memset(h, 0, nsrc * sizeof(*h)); /* fault the bench's array in before rss0 */
	memset(se, 0, sizeof(*se));
	se->n = n;
	rss0 = scale_rss_bytes();
	heap0 = scale_heap_bytes();
	t0 = bench_now_ns();
	plan_env_init_in(&se->pe, bench_manager(&b, 1), n, true, h);
	se->setup_s = (double)(bench_now_ns() - t0) / 1e9;
	se->rss_per_value = ((double)scale_rss_bytes() - (double)rss0) / (double)n;
	/* Less the benchmark's own context of each source: malloc(16), a
	 * 32-byte chunk. */
	se->heap_per_value =
		((double)scale_heap_bytes() - (double)heap0 - 32.0 * (double)nsrc) / (double)n;
	se->ce.m = se->pe.m;
	se->ce.h = h;
	se->ce.n = nsrc;
	CK(rsd_controller_create(se->ce.m, NULL, 0, &se->ce.c));
}

static void scale_env_fini(struct scale_env *se)
{
	rsd_controller_free(se->ce.c);
	bench_manager_end(se->pe.m);
	free(se->ce.h);
}

static double scale_lease_ns(struct rsd_manager *m, struct rsd_handle h, size_t iters)
{
	uint64_t t0 = bench_now_ns();

	for (size_t i = 0; i < iters; i++)
		life_once(m, h, LIFE_LEASE);
	return (double)(bench_now_ns() - t0) / (double)iters;
}

static double scale_snapshot_ms(struct rsd_manager *m, size_t n)
{
	struct rsd_snapshot *s;
	uint64_t t0 = bench_now_ns();
	double ms;

	CK(rsd_snapshot_take(m, &s));
	ms = (double)(bench_now_ns() - t0) / 1e6;
	if (s->nvalues != n)
		bench_fail("snapshot value count", -RSD_EUSAGE);
	rsd_snapshot_free(s);
	return ms;
}

/* One repetition of every row at one N. */
static void scale_measure(struct scale_env *se, size_t r)
{
	struct rsd_handle h = se->pe.acts[0].handle;
	size_t iters = QF(2000, 20000);
	uint64_t explored, nevict;
	double use[1], dec[1];
	const char *what;
	int rc;

	se->v[SR_CYCLE][r] = bench_cycle_ns(se->pe.m, h, iters, 1);
	se->v[SR_LEASE][r] = scale_lease_ns(se->pe.m, h, iters * 4);
	se->v[SR_EXPLAIN][r] = explain_us(&se->pe, QF(20, 200), 1);
	rc = ctrl_measure(&se->ce, QF(10, 40), 1, use, dec, &explored, &nevict, &what);
	if (rc)
		bench_fail(what, rc);
	if (nevict != REQ_VALUES)
		bench_fail("scaling: the request does not evict 8", -RSD_EUSAGE);
	se->v[SR_USE][r] = use[0];
	se->v[SR_DECIDE][r] = dec[0];
	se->v[SR_SNAPSHOT][r] = scale_snapshot_ms(se->pe.m, se->n);
}

static void case_scaling(void)
{
	static const size_t counts[SCALE_COUNTS] = { 1000, 10000, 100000, 1000000 };
	static const char *const units[SCALE_ROWS] = { "ns", "ns", "us", "us", "us", "ms" };
	size_t nc = bench_opts.quick ? 3 : 4, reps = QF(3, 5), last;
	struct scale_env *se = calloc(SCALE_COUNTS, sizeof(*se));
	double med[SCALE_COUNTS][SCALE_ROWS];
	char metric[64];

	if (!se)
		bench_fail("calloc", -RSD_ENOMEM);
	last = nc - 1;
	for (size_t c = 0; c < nc; c++)
		scale_env_init(&se[c], counts[c]);
	for (size_t r = 0; r < reps; r++)
		for (size_t c = 0; c < nc; c++)
			scale_measure(&se[c], r);
	for (size_t c = 0; c < nc; c++) {
		snprintf(metric, sizeof(metric), "setup_%zuk_s", counts[c] / 1000);
		bench_line("scaling", metric, se[c].setup_s, "s");
		snprintf(metric, sizeof(metric), "rss_%zuk_B_per_value", counts[c] / 1000);
		bench_line("scaling", metric, se[c].rss_per_value, "B");
		snprintf(metric, sizeof(metric), "heap_%zuk_B_per_value", counts[c] / 1000);
		bench_line("scaling", metric, se[c].heap_per_value, "B");
		for (size_t k = 0; k < SCALE_ROWS; k++) {
			med[c][k] = bench_median(se[c].v[k], reps);
			snprintf(metric, sizeof(metric), "%zuk_%s", counts[c] / 1000,
				 scale_row_name[k]);
			bench_line("scaling", metric, med[c][k], units[k]);
		}
		snprintf(metric, sizeof(metric), "%zuk_snapshot_ns_per_value", counts[c] / 1000);
		bench_line("scaling", metric, med[c][SR_SNAPSHOT] * 1e6 / (double)counts[c], "ns");
	}
	bench_note("scaling: N | setup s | cycle ns | lease ns | explain us | decide us | use us | "
		   "snapshot ms (ns/value) | heap B/value | RSS B/value");
	for (size_t c = 0; c < nc; c++)
		bench_note(
			"scaling: %7zu | %.3f | %.0f | %.0f | %.1f | %.1f | %.1f | %.2f (%.0f) | "
			"%.0f | %.0f",
			counts[c], se[c].setup_s, med[c][SR_CYCLE], med[c][SR_LEASE],
			med[c][SR_EXPLAIN], med[c][SR_DECIDE], med[c][SR_USE], med[c][SR_SNAPSHOT],
			med[c][SR_SNAPSHOT] * 1e6 / (double)counts[c], se[c].heap_per_value,
			se[c].rss_per_value);
	/* The table: the largest N against 1k; every row but snapshot <= 2x. */
	for (size_t k = 0; k < SCALE_ROWS; k++) {
		struct bench_fig *f;
		char cs[32];

		snprintf(cs, sizeof(cs), "scale_%s", scale_row_name[k]);
		snprintf(metric, sizeof(metric), "at_%zuk", counts[last] / 1000);
		f = bench_fig(cs, metric, med[last][k], units[k]);
		bench_fig_base(f, "1k", med[0][k]);
		if (k != SR_SNAPSHOT)
			bench_fig_target(f, TGT_RATIO_MAX, 2);
	}
	bench_fig("scale_snapshot", "ns_per_value",
		  med[last][SR_SNAPSHOT] * 1e6 / (double)counts[last], "ns");
	snprintf(metric, sizeof(metric), "heap_B_per_value_%zuk", counts[last] / 1000);
	bench_fig("scale_memory", metric, se[last].heap_per_value, "B");
	snprintf(metric, sizeof(metric), "rss_B_per_value_%zuk", counts[last] / 1000);
	bench_fig("scale_memory", metric, se[last].rss_per_value, "B");
	for (size_t c = 0; c < nc; c++)
		scale_env_fini(&se[c]);
	free(se);
	bench_note("scaling: bytes per value while the N values were registered, divided by N: "
		   "heap = growth of malloc's bytes in use (mallinfo2), less the benchmark's own "
		   "32-byte context of each source; RSS = resident-set growth, which undercounts "
		   "when earlier cases left freed memory for malloc to reuse");
}

/*
 * Lifetimes, GPU leases, the controller and plans with many live objects:
 * each row runs its workload at a small and a large count in the same run
 * (every repetition measures both) and prints the cost per call (per
 * candidate ranked for decide, per action for explain) at both, their
 * ratio and the target (<= 2x). Times are the process's CPU time.
 *
 *   reserve_ns   rsd_reserve of N reservations kept live, then the release
 *                and free of each: per reserve + release;
 *   hold_ns      the same with N holds of one value;
 *   gpu_lease_ns N cuda:0 leases of one value on a simulated device, each
 *                acquired with one consumer stream and released without
 *                waiting: all N stay pending on that stream (the device
 *                runs nothing until told): per acquire + release;
 *   reap_ns      then the stream completes and one rsd_manager_reap folds
 *                the N completed leases in: per lease;
 *   decide_ns    rsd_controller_decide of a request for one of the N
 *                values that fill cuda:0's budget and an output of N/2
 *                values' bytes there: the tiered LRU spills N/2 of the
 *                other N - 1 to pageable host: per value at cuda:0;
 *   streams_ns   N rsd_lease_add_consumer_stream calls of distinct streams
 *                on one lease acquired with another: per call;
 *   explain_ns   rsd_explain of an N-action plan (ensure + drop pairs at
 *                pinned host over 10 values): per action.
 */
#define SL_VAL 4096u
#define SL_REPS 8u

/*
 * The process's CPU time, all threads (the reclaimer's frees included):
 * on a machine shared with other jobs the wall clock of these rows
 * measured mostly how long the process waited for a CPU.
 */
static uint64_t sl_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct sl_gpu {
	struct rsd_simdev *sd;
	struct rsd_manager *m;
	struct rsd_handle h;
};

static void sl_gpu_init(struct sl_gpu *g, uint64_t budget)
{
	const struct rsd_location c0 = { RSD_CUDA, 0 };
	struct rsd_budget b = { c0, budget };
	struct rsd_simdev_config sc = { .ndevices = 1, .pooled = true };
	struct rsd_manager_config mc = { .budgets = &b, .nbudgets = budget ? 1 : 0 };

	CK(rsd_simdev_create(&sc, &g->sd));
	mc.driver = rsd_simdev_ops();
	mc.driver_ctx = g->sd;
	CK(rsd_manager_create(&mc, &g->m));
}

/* blocked.c: a 4 KiB replicable value adopted at `at`. */
static struct rsd_handle blk_adopt(struct rsd_manager *m, struct rsd_location at);

static struct rsd_handle sl_gpu_adopt(struct sl_gpu *g)
{
	return blk_adopt(g->m, (struct rsd_location){ RSD_CUDA, 0 });
}

/* Close and destroy, then the n streams st (NULL when n is 0) and the device. */
static void sl_gpu_fini(struct sl_gpu *g, void *const *st, size_t n)
{
	rsd_simdev_complete_all(g->sd);
	CK(rsd_manager_close(g->m, RSD_CLOSE_FORCE));
	rsd_manager_destroy(g->m);
	for (size_t i = 0; i < n; i++)
		rsd_simdev_stream_destroy(g->sd, st[i]);
	rsd_simdev_destroy(g->sd);
}

static void *sl_alloc(size_t n, size_t size)
{
	void *p = calloc(n, size);

	if (!p)
		bench_fail("calloc", -RSD_ENOMEM);
	return p;
}

static double sl_reserve_ns(size_t n, double *unused)
{
	struct rsd_manager *m = bench_manager(NULL, 0);
	struct rsd_reservation **r = sl_alloc(n, sizeof(*r));
	uint64_t t0 = sl_now_ns();

	(void)unused;
	for (size_t i = 0; i < n; i++)
		CK(rsd_reserve(m, RSD_LOC_PAGEABLE_HOST, 64, "out", &r[i]));
	for (size_t i = 0; i < n; i++) {
		CK(rsd_reservation_release(r[i]));
		rsd_reservation_free(r[i]);
	}
	t0 = sl_now_ns() - t0;
	free(r);
	bench_manager_end(m);
	return (double)t0 / (double)n;
}

static double sl_hold_ns(size_t n, double *unused)
{
	struct rsd_manager *m = bench_manager(NULL, 0);
	struct rsd_handle h = bench_adopt(m, SL_VAL, RSD_REPLICABLE, true);
	struct rsd_hold **hd = sl_alloc(n, sizeof(*hd));
	uint64_t t0 = sl_now_ns();

	(void)unused;
	for (size_t i = 0; i < n; i++)
		CK(rsd_hold(m, &h, 1, RSD_LOC_PAGEABLE_HOST, &hd[i]));
	for (size_t i = 0; i < n; i++) {
		CK(rsd_hold_release(hd[i]));
		rsd_hold_free(hd[i]);
	}
	t0 = sl_now_ns() - t0;
	free(hd);
	bench_manager_end(m);
	return (double)t0 / (double)n;
}

/* Per acquire + release; *reap_ns: per lease of the one reap after. */
static double sl_gpu_lease_ns(size_t n, double *reap_ns)
{
	const struct rsd_location c0 = { RSD_CUDA, 0 };
	struct sl_gpu g;
	uint64_t t0, t1;
	void *st;

	sl_gpu_init(&g, 0);
	g.h = sl_gpu_adopt(&g);
	CK(rsd_simdev_stream_create(g.sd, 0, &st));
	t0 = sl_now_ns();
	for (size_t i = 0; i < n; i++) {
		struct rsd_lease *l;

		CK(rsd_acquire(g.m, &g.h, 1, c0, st, &l));
		CK(rsd_lease_release(l, 0));
		rsd_lease_free(l);
	}
	t0 = sl_now_ns() - t0;
	if (rsd_simdev_pending_events(g.sd, st) != n)
		bench_fail("scaling: the leases are not all pending", -RSD_EUSAGE);
	rsd_simdev_stream_complete(g.sd, st);
	t1 = sl_now_ns();
	CK(rsd_manager_reap(g.m));
	*reap_ns = (double)(sl_now_ns() - t1) / (double)n;
	sl_gpu_fini(&g, &st, 1);
	return (double)t0 / (double)n;
}

static double sl_streams_ns(size_t n, double *unused)
{
	const struct rsd_location c0 = { RSD_CUDA, 0 };
	void **st = sl_alloc(n + 1, sizeof(*st));
	struct rsd_lease *l;
	struct sl_gpu g;
	uint64_t t0;

	(void)unused;
	sl_gpu_init(&g, 0);
	g.h = sl_gpu_adopt(&g);
	for (size_t i = 0; i <= n; i++)
		CK(rsd_simdev_stream_create(g.sd, 0, &st[i]));
	CK(rsd_acquire(g.m, &g.h, 1, c0, st[n], &l));
	t0 = sl_now_ns();
	for (size_t i = 0; i < n; i++)
		CK(rsd_lease_add_consumer_stream(l, st[i]));
	t0 = sl_now_ns() - t0;
	CK(rsd_lease_release(l, 0));
	rsd_lease_free(l);
	rsd_simdev_complete_all(g.sd);
	CK(rsd_manager_reap(g.m));
	sl_gpu_fini(&g, st, n + 1);
	free(st);
	return (double)t0 / (double)n;
}

static double sl_decide_ns(size_t n, double *unused)
{
	const struct rsd_location c0 = { RSD_CUDA, 0 }, host = RSD_LOC_PAGEABLE_HOST;
	struct rsd_fallback_tier t = { c0, &host, 1 };
	struct rsd_reservation_spec out = { c0, (uint64_t)(n / 2) * SL_VAL, "out" };
	struct rsd_requirement q;
	struct rsd_request rq = { "spill", &q, 1, &out, 1 };
	struct rsd_controller *c;
	struct rsd_decision *d;
	struct rsd_policy *pol;
	struct sl_gpu g;
	uint64_t t0;

	(void)unused;
	sl_gpu_init(&g, (uint64_t)n * SL_VAL);
	q = (struct rsd_requirement){ sl_gpu_adopt(&g), c0 };
	for (size_t i = 1; i < n; i++)
		sl_gpu_adopt(&g);
	CK(rsd_tiered_lru_create(&t, 1, &pol));
	CK(rsd_controller_create(g.m, pol, 0, &c));
	t0 = sl_now_ns();
	CK(rsd_controller_decide(c, &rq, &d));
	t0 = sl_now_ns() - t0;
	if (d->nevictions != n / 2)
		bench_fail("scaling: decide does not spill N/2", -RSD_EUSAGE);
	rsd_decision_free(d);
	rsd_controller_free(c);
	rsd_policy_free(pol);
	sl_gpu_fini(&g, NULL, 0);
	return (double)t0 / (double)n;
}

static double sl_explain_ns(size_t n, double *unused)
{
	struct rsd_manager *m = bench_manager(NULL, 0);
	struct rsd_action *a = sl_alloc(n, sizeof(*a));
	struct rsd_handle h[PLAN_VALUES];
	struct rsd_explanation *e;
	struct rsd_plan p = { .name = "bench", .enter = a, .nenter = n };
	uint64_t t0;

	(void)unused;
	for (size_t i = 0; i < PLAN_VALUES; i++)
		h[i] = bench_adopt(m, SL_VAL, RSD_REPLICABLE, true);
	for (size_t i = 0; i + 1 < n; i += 2) {
		a[i] = rsd_action_ensure(h[(i / 2) % PLAN_VALUES], RSD_LOC_PINNED_HOST);
		a[i + 1] = rsd_action_drop(h[(i / 2) % PLAN_VALUES], RSD_LOC_PINNED_HOST);
	}
	t0 = sl_now_ns();
	CK(rsd_explain(m, &p, NULL, &e));
	t0 = sl_now_ns() - t0;
	if (!e->feasible || e->nactions != n)
		bench_fail("scaling: explain of the N-action plan", -RSD_EPLAN);
	rsd_explanation_free(e);
	free(a);
	bench_manager_end(m);
	return (double)t0 / (double)n;
}

enum sl_row {
	SL_RESERVE,
	SL_HOLD,
	SL_GPU_LEASE,
	SL_REAP,
	SL_DECIDE,
	SL_STREAMS,
	SL_EXPLAIN,
	SL_NROWS
};

static const struct {
	const char *name;
	size_t small, large;
	/* The row's ns per call at n; a second figure (the reap) to *also. */
	double (*run)(size_t n, double *also);
} sl_rows[SL_NROWS] = {
	[SL_RESERVE] = { "reserve_ns", 1000, 64000, sl_reserve_ns },
	[SL_HOLD] = { "hold_ns", 1000, 64000, sl_hold_ns },
	[SL_GPU_LEASE] = { "gpu_lease_ns", 1000, 64000, sl_gpu_lease_ns },
	[SL_REAP] = { "reap_ns", 1000, 64000, NULL }, /* measured with the lease row */
	[SL_DECIDE] = { "decide_ns", 1000, 32000, sl_decide_ns },
	[SL_STREAMS] = { "streams_ns", 1000, 4000, sl_streams_ns },
	[SL_EXPLAIN] = { "explain_ns", 1000, 4000, sl_explain_ns },
};

static void case_scaling_lifetimes(void)
{
	size_t reps = QF(3, 5);
	double v[SL_NROWS][2][SL_REPS], med[SL_NROWS][2], warm;
	char metric[32], cs[32];

	/* Warm up: one run of each row at its small count, not counted (the
	 * first managers and devices of a process pay for page faults and
	 * malloc's growth). */
	for (size_t k = 0; k < SL_NROWS; k++)
		if (sl_rows[k].run)
			sl_rows[k].run(sl_rows[k].small, &warm);
	for (size_t r = 0; r < reps; r++)
		for (size_t k = 0; k < SL_NROWS; k++) {
			if (!sl_rows[k].run)
				continue;
			v[k][0][r] = sl_rows[k].run(sl_rows[k].small, &v[SL_REAP][0][r]);
			v[k][1][r] = sl_rows[k].run(sl_rows[k].large, &v[SL_REAP][1][r]);
		}
	for (size_t k = 0; k < SL_NROWS; k++) {
		struct bench_fig *f;

		med[k][0] = bench_median(v[k][0], reps);
		med[k][1] = bench_median(v[k][1], reps);
		snprintf(cs, sizeof(cs), "scale_%s", sl_rows[k].name);
		snprintf(metric, sizeof(metric), "at_%zuk", sl_rows[k].small / 1000);
		bench_line(cs, metric, med[k][0], "ns");
		snprintf(metric, sizeof(metric), "at_%zuk", sl_rows[k].large / 1000);
		f = bench_fig(cs, metric, med[k][1], "ns");
		snprintf(metric, sizeof(metric), "%zuk", sl_rows[k].small / 1000);
		bench_fig_base(f, metric, med[k][0]);
		bench_fig_target(f, TGT_RATIO_MAX, 2);
	}
	bench_note("scaling: row | N small | ns per call | N large | ns per call | ratio");
	for (size_t k = 0; k < SL_NROWS; k++)
		bench_note("scaling: %-12s | %6zu | %9.0f | %6zu | %9.0f | %.2f", sl_rows[k].name,
			   sl_rows[k].small, med[k][0], sl_rows[k].large, med[k][1],
			   med[k][1] / med[k][0]);
	bench_note("scaling: per call of reserve+release, hold+release, GPU lease "
		   "acquire+release (all pending on one stream), per lease of one reap of them "
		   "all, per candidate of decide (N/2 spills), per consumer stream added to one "
		   "lease, per action of explain");
}
