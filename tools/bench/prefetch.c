// SPDX-License-Identifier: MIT
/*
 * Stream-ordered transitions (group "pipeline", case "prefetch"), on the
 * simulated device with its link model on, durations stretched by
 * PF_SCALE as in the node group:
 *
 *  - one host thread, PF_BATCHES batches: each batch's value is brought to
 *    the device by the controller and read by a kernel of known length on
 *    the consumer stream. Waiting (rsd_controller_use, then the kernel,
 *    then wait for it) takes the sum of copy and compute; prefetching
 *    (rsd_controller_use_async of batch i + 1 queued behind kernel i) takes
 *    about the larger of the two. The figure is the prefetching wall time
 *    over max(total copy, total compute), each measured alone in the same
 *    run; the waiting wall time is printed beside it.
 *  - the host time of not-waiting 64 MiB ensures to a device, queued back
 *    to back as a prefetching thread queues a batch, and of the first one
 *    after the host slept, beside the waiting ensure's: from pinned sources
 *    (pf_host) and from pageable ones (pf_host_pageable).
 */
#include <string.h>

#include "common.h"

#define PF_SCALE 100.0
#define PF_MIB (1ull << 20)
#define PF_BATCHES 32u

struct pf_env;
/* Queue a kernel of e->kernel_ns on e->cs reading nbytes at ptr. */
typedef void pf_kernel_fn(struct pf_env *e, void *ptr, uint64_t nbytes);

struct pf_env {
	const struct rsd_device_ops *ops;
	void *ctx;
	struct rsd_simdev *sd; /* NULL on a real GPU */
	struct rsd_manager *m;
	struct rsd_controller *c;
	struct rsd_policy *pol;
	void *cs; /* the consumer ("compute") stream on cuda:0 */
	pf_kernel_fn *kernel;
	bool pageable; /* the values' source is pageable host (else pinned) */
	struct rsd_handle *h;
	unsigned n;
	uint64_t nbytes, kernel_ns;
};

static const struct rsd_location PF_CUDA0 = { RSD_CUDA, 0 };

/* Everything but the driver: a manager with room for three batches on
 * cuda:0 (the one computing, the one arriving, the one whose kernel may
 * still run), a tiered-LRU controller, n pinned values of nbytes. */
static void pf_open_on(struct pf_env *e, unsigned n, uint64_t nbytes, uint64_t kernel_ns)
{
	struct rsd_budget b = { PF_CUDA0, 3 * nbytes };
	struct rsd_manager_config mc = { .budgets = &b, .nbudgets = 1 };

	mc.driver = e->ops;
	mc.driver_ctx = e->ctx;
	e->n = n;
	e->nbytes = nbytes;
	e->kernel_ns = kernel_ns;
	CK(rsd_manager_create(&mc, &e->m));
	CK(rsd_tiered_lru_create(NULL, 0, &e->pol));
	CK(rsd_controller_create(e->m, e->pol, 0, &e->c));
	e->h = calloc(n, sizeof(*e->h));
	if (!e->h)
		bench_fail("calloc", -RSD_ENOMEM);
	for (unsigned i = 0; i < n; i++) {
		struct rsd_resident *r;

		CK(rsd_resident_alloc(e->m, &rsd_resident_type,
				      e->pageable ? RSD_LOC_PAGEABLE_HOST : RSD_LOC_PINNED_HOST, 1,
				      &nbytes, NULL, 0, &r));
		memset(rsd_resident_data(r, 0), (int)(i + 1), nbytes);
		CK(rsd_adopt(e->m, r, NULL, RSD_REPLICABLE, &e->h[i]));
	}
	/* Steady state, as a long pipeline runs: the device pool holds three
	 * batches and the streams exist, so no timed backing allocation or
	 * first use is measured. */
	for (unsigned i = 0; i < 3 && i < n; i++)
		CK(rsd_ensure(e->m, e->h[i], PF_CUDA0, NULL, NULL));
	for (unsigned i = 0; i < 3 && i < n; i++)
		CK(rsd_drop(e->m, e->h[i], PF_CUDA0, NULL));
}

/* The simulated device's kernel: it occupies cuda:0's compute engine. */
static void pf_sim_kernel(struct pf_env *e, void *ptr, uint64_t nbytes)
{
	struct rsd_simdev_access acc;

	memset(&acc, 0, sizeof(acc));
	acc.ptr = ptr;
	acc.nbytes = nbytes;
	CK(rsd_simdev_launch_kernel(e->sd, e->cs, e->kernel_ns, &acc, 1, NULL, NULL));
}

/* The simulated device with its link model, and its consumer stream. */
static void pf_sim(struct pf_env *e)
{
	struct rsd_simdev_config cfg = {
		.ndevices = 1,
		.pooled = true,
		.progress = RSD_SIMDEV_BACKGROUND,
		.links = true,
		.time_scale = PF_SCALE,
	};

	memset(e, 0, sizeof(*e));
	CK(rsd_simdev_create(&cfg, &e->sd));
	CK(rsd_simdev_stream_create(e->sd, 0, &e->cs));
	e->ops = rsd_simdev_ops();
	e->ctx = e->sd;
	e->kernel = pf_sim_kernel;
}

static void pf_open_src(struct pf_env *e, unsigned n, uint64_t nbytes, uint64_t kernel_ns,
			bool pageable)
{
	pf_sim(e);
	e->pageable = pageable;
	pf_open_on(e, n, nbytes, kernel_ns);
}

static void pf_open(struct pf_env *e, unsigned n, uint64_t nbytes, uint64_t kernel_ns)
{
	pf_open_src(e, n, nbytes, kernel_ns, false);
}

/* Everything pf_open_on made; the driver's streams are the caller's. */
static void pf_close_on(struct pf_env *e)
{
	e->ops->stream_sync(e->ctx, e->cs);
	rsd_controller_free(e->c);
	rsd_policy_free(e->pol);
	CK(rsd_manager_close(e->m, RSD_CLOSE_FORCE));
	rsd_manager_destroy(e->m);
	free(e->h);
}

static void pf_close(struct pf_env *e)
{
	pf_close_on(e);
	rsd_simdev_stream_destroy(e->sd, e->cs);
	rsd_simdev_destroy(e->sd);
}

/* A kernel of known length on the consumer stream reading batch i. */
static void pf_kernel(struct pf_env *e, unsigned i, const struct rsd_use *u)
{
	const struct rsd_resident *r;

	CK(rsd_use_value((struct rsd_use *)u, e->h[i], PF_CUDA0, &r));
	e->kernel(e, rsd_resident_data(r, 0), e->nbytes);
}

/* An event after the work queued on the consumer stream so far. */
static void *pf_mark(struct pf_env *e)
{
	void *ev;

	CK(e->ops->event_record(e->ctx, e->cs, &ev));
	return ev;
}

static void pf_wait(struct pf_env *e, void *ev)
{
	CK(e->ops->event_sync(e->ctx, ev));
	e->ops->event_destroy(e->ctx, ev);
}

static void pf_request(struct pf_env *e, unsigned i, struct rsd_request *r,
		       struct rsd_requirement *req)
{
	memset(req, 0, sizeof(*req));
	req->handle = e->h[i];
	req->location = PF_CUDA0;
	memset(r, 0, sizeof(*r));
	r->name = "batch";
	r->requirements = req;
	r->nrequirements = 1;
}

static void pf_use(struct pf_env *e, unsigned i, bool async, struct rsd_use **u)
{
	struct rsd_requirement req;
	struct rsd_request r;

	pf_request(e, i, &r, &req);
	for (unsigned tries = 1;; tries++) {
		int rc = async ? rsd_controller_use_async(e->c, &r, &e->cs, 1, NULL, 0, u) :
				 rsd_controller_use(e->c, &r, &e->cs, 1, NULL, 0, u);

		/* A kernel's lease event completing between the decision and
		 * the entry makes the entry stale (the entry reaps it): the
		 * caller decides again, as the controller never re-plans. */
		if (rc == -RSD_ESTALE && tries < 8)
			continue;
		if (rc)
			bench_fail("rsd_controller_use", rc);
		return;
	}
}

static void pf_done(struct rsd_use *u)
{
	CK(rsd_use_close(u, NULL));
	rsd_use_free(u);
}

/* Every batch: bring it, compute on it, wait for the kernel. */
static uint64_t pf_waiting(struct pf_env *e)
{
	uint64_t t0 = bench_now_ns();

	for (unsigned i = 0; i < e->n; i++) {
		struct rsd_use *u;

		pf_use(e, i, false, &u);
		pf_kernel(e, i, u);
		pf_wait(e, pf_mark(e));
		pf_done(u);
	}
	return bench_now_ns() - t0;
}

/*
 * Batch i + 1 is used without waiting right after kernel i is queued (in
 * that order: the consumer stream's wait for copy i + 1 must come after
 * kernel i). The host waits only for kernel i - 1, whose batch the next
 * decision must evict.
 */
static uint64_t pf_prefetching(struct pf_env *e)
{
	struct rsd_use **u = calloc(e->n, sizeof(*u));
	void **done = calloc(e->n, sizeof(*done));
	uint64_t t0;

	if (!u || !done)
		bench_fail("calloc", -RSD_ENOMEM);
	t0 = bench_now_ns();
	pf_use(e, 0, true, &u[0]);
	for (unsigned i = 0; i < e->n; i++) {
		pf_kernel(e, i, u[i]);
		done[i] = pf_mark(e);
		pf_done(u[i]);
		if (i >= 1)
			pf_wait(e, done[i - 1]);
		if (i + 1 < e->n)
			pf_use(e, i + 1, true, &u[i + 1]);
	}
	pf_wait(e, done[e->n - 1]);
	t0 = bench_now_ns() - t0;
	free(u);
	free(done);
	return t0;
}

/* The copies alone: every batch ensured and dropped, waiting. */
static uint64_t pf_copies_alone(struct pf_env *e)
{
	uint64_t t0 = bench_now_ns();

	for (unsigned i = 0; i < e->n; i++) {
		CK(rsd_ensure(e->m, e->h[i], PF_CUDA0, NULL, NULL));
		CK(rsd_drop(e->m, e->h[i], PF_CUDA0, NULL));
	}
	return bench_now_ns() - t0;
}

/* The kernels alone, on bytes already there. */
static uint64_t pf_kernels_alone(struct pf_env *e)
{
	struct rsd_requirement req;
	struct rsd_request r;
	struct rsd_use *u;
	uint64_t t0;

	pf_request(e, 0, &r, &req);
	CK(rsd_controller_use(e->c, &r, &e->cs, 1, NULL, 0, &u));
	t0 = bench_now_ns();
	for (unsigned i = 0; i < e->n; i++)
		pf_kernel(e, 0, u);
	pf_wait(e, pf_mark(e));
	t0 = bench_now_ns() - t0;
	pf_done(u);
	return t0;
}

/*
 * The four runs of the pipeline figure on fresh environments made by open
 * and ended by close: copies alone (which sets the kernel's length to one
 * batch's copy; scale: the device's time scale), kernels alone, waiting,
 * prefetching.
 */
struct pf_runs {
	uint64_t copy, compute, waiting, prefetching;
};

static void pf_measure(void (*open)(struct pf_env *, unsigned, uint64_t, uint64_t),
		       void (*close)(struct pf_env *), unsigned n, uint64_t nbytes, double scale,
		       struct pf_runs *r)
{
	uint64_t kernel_ns;
	struct pf_env e;

	open(&e, n, nbytes, 0);
	r->copy = pf_copies_alone(&e);
	/* The device stretches a kernel's length by its time scale too. */
	kernel_ns = (uint64_t)((double)r->copy / n / scale);
	close(&e);
	open(&e, n, nbytes, kernel_ns);
	r->compute = pf_kernels_alone(&e);
	close(&e);
	open(&e, n, nbytes, kernel_ns);
	r->waiting = pf_waiting(&e);
	close(&e);
	open(&e, n, nbytes, kernel_ns);
	r->prefetching = pf_prefetching(&e);
	close(&e);
}

/* The figure: prefetching over max(copy, compute), waiting beside it. */
static void pf_report(const char *cs, unsigned n, uint64_t nbytes, const struct pf_runs *r)
{
	double bound = (double)(r->copy > r->compute ? r->copy : r->compute);
	struct bench_fig *f;

	bench_note("%s: %u batches of %llu MiB, copies alone %.1f ms, kernels alone %.1f ms, "
		   "waiting %.1f ms, prefetching %.1f ms",
		   cs, n, (unsigned long long)(nbytes / PF_MIB), r->copy / 1e6, r->compute / 1e6,
		   r->waiting / 1e6, r->prefetching / 1e6);
	f = bench_fig(cs, "prefetch_vs_max", (double)r->prefetching / bound, "x");
	bench_fig_base(f, "waiting", (double)r->waiting / bound);
	bench_fig_target(f, TGT_MAX, 1.1);
}

static void pf_pipeline(void)
{
	const uint64_t nbytes = QF(4, 8) * PF_MIB;
	const unsigned n = QF(8u, PF_BATCHES);
	struct pf_runs r;

	pf_measure(pf_open, pf_close, n, nbytes, PF_SCALE, &r);
	pf_report("pf_pipeline", n, nbytes, &r);
}

/* ---- host time of not-waiting 64 MiB ensures ----------------------------- */

/*
 * A prefetching thread makes room and queues the values of its next batch:
 * rounds over PF_HOST_PER 64 MiB values resident on cuda:0, each dropped
 * and at once ensured again without waiting (the pool's block is reused:
 * no backing allocation is timed), then the device is drained. The first
 * call of a round comes after the host slept through the previous round's
 * copies (about 120 ms of modelled time): cold caches and the wake-up of an
 * idle simulator worker, which on a small VM costs an inter-processor
 * interrupt, are in it. The others follow their drop at once. The figure
 * (with the target) is the median of those; the first calls' median is
 * printed beside it, with the waiting ensure's, measured in the same rounds.
 */
#define PF_HOST_PER 3u

/* Medians of one source kind's rounds, in ns. */
struct pf_host {
	double next, first, wait;
};

static void pf_host_rounds(bool pageable, unsigned rounds, struct pf_host *out)
{
	const uint64_t nbytes = 64 * PF_MIB;
	double first_ns[15], next_ns[15 * (PF_HOST_PER - 1)], wait_ns[15];
	struct pf_env e;

	pf_open_src(&e, PF_HOST_PER, nbytes, 0, pageable);
	for (unsigned i = 0; i < PF_HOST_PER; i++)
		CK(rsd_ensure(e.m, e.h[i], PF_CUDA0, NULL, NULL));
	for (unsigned r = 0; r < rounds; r++) {
		uint64_t t0;

		for (unsigned i = 0; i < PF_HOST_PER; i++) {
			CK(rsd_drop(e.m, e.h[i], PF_CUDA0, NULL));
			t0 = bench_now_ns();
			CK(rsd_ensure_async(e.m, e.h[i], PF_CUDA0, NULL, NULL));
			if (i)
				next_ns[r * (PF_HOST_PER - 1) + i - 1] =
					(double)(bench_now_ns() - t0);
			else
				first_ns[r] = (double)(bench_now_ns() - t0);
		}
		CK(e.ops->device_sync(e.ctx, 0));
		CK(rsd_manager_reap(e.m));
		CK(rsd_drop(e.m, e.h[0], PF_CUDA0, NULL));
		t0 = bench_now_ns();
		CK(rsd_ensure(e.m, e.h[0], PF_CUDA0, NULL, NULL));
		wait_ns[r] = (double)(bench_now_ns() - t0);
	}
	pf_close(&e);
	out->next = bench_median(next_ns, (size_t)rounds * (PF_HOST_PER - 1));
	out->first = bench_median(first_ns, rounds);
	out->wait = bench_median(wait_ns, rounds);
}

/*
 * The rounds with pinned sources (pf_host) and with pageable ones
 * (pf_host_pageable): a pageable source's chunks are staged by librsd's
 * staging worker behind gates on the copy's stream, so the not-waiting
 * call returns after admission as a pinned one does.
 */
static void pf_host_time(void)
{
	static const char *const row[2] = { "pf_host", "pf_host_pageable" };
	const unsigned rounds = QF(5u, 15u);
	struct bench_fig *f;
	struct pf_host h[2];

	for (int k = 0; k < 2; k++)
		pf_host_rounds(k == 1, rounds, &h[k]);
	for (int k = 0; k < 2; k++) {
		bench_note("%s: %u rounds of %u, %s sources; first call of a round (after the "
			   "host slept) %.1f us median, the calls after it %.1f us, a waiting "
			   "ensure %.0f us",
			   row[k], rounds, PF_HOST_PER, k ? "pageable" : "pinned", h[k].first / 1e3,
			   h[k].next / 1e3, h[k].wait / 1e3);
		f = bench_fig(row[k], "ensure_async_64MiB", h[k].next / 1e3, "us");
		bench_fig_base(f, "waiting ensure", h[k].wait / 1e3);
		bench_fig_target(f, TGT_MAX, 10);
		f = bench_fig(row[k], "ensure_async_first", h[k].first / 1e3, "us");
		bench_fig_base(f, "waiting ensure", h[k].wait / 1e3);
	}
}

/*
 * The host time of a not-waiting use whose plan spills: cuda:0 holds two
 * 64 MiB values and has room for no more; each round asks for the third
 * (exclusive values, spilled to pinned memory by the fallback tier), so
 * the plan moves the least recent one off the device and brings the
 * requested one in. Its admission needs the room the queued spill frees:
 * the figure is the median host time of rsd_controller_use_async(), beside
 * the waiting rsd_controller_use() of the same plan in the same rounds.
 */
static double pf_spill_use(struct pf_env *e, unsigned i, bool async)
{
	uint64_t t0;
	struct rsd_use *u;

	t0 = bench_now_ns();
	pf_use(e, i, async, &u);
	t0 = bench_now_ns() - t0;
	pf_done(u);
	CK(e->ops->device_sync(e->ctx, 0));
	CK(rsd_manager_reap(e->m));
	return (double)t0;
}

static void pf_host_spill(void)
{
	const struct rsd_location to_pinned[] = { RSD_LOC_PINNED_HOST };
	const struct rsd_fallback_tier tier = { PF_CUDA0, to_pinned, 1 };
	const uint64_t nbytes = 64 * PF_MIB;
	const unsigned rounds = QF(4u, 10u);
	struct rsd_budget b = { PF_CUDA0, 2 * nbytes };
	struct rsd_manager_config mc = { .budgets = &b, .nbudgets = 1 };
	double async_ns[10], wait_ns[10];
	struct bench_fig *f;
	struct pf_env e;
	unsigned next = 2;

	pf_sim(&e);
	e.n = 3;
	e.nbytes = nbytes;
	mc.driver = e.ops;
	mc.driver_ctx = e.ctx;
	CK(rsd_manager_create(&mc, &e.m));
	CK(rsd_tiered_lru_create(&tier, 1, &e.pol));
	CK(rsd_controller_create(e.m, e.pol, 0, &e.c));
	e.h = calloc(e.n, sizeof(*e.h));
	if (!e.h)
		bench_fail("calloc", -RSD_ENOMEM);
	for (unsigned i = 0; i < e.n; i++) {
		struct rsd_resident *r;

		CK(rsd_resident_alloc(e.m, &rsd_resident_type, RSD_LOC_PINNED_HOST, 1, &nbytes,
				      NULL, 0, &r));
		memset(rsd_resident_data(r, 0), (int)(i + 1), nbytes);
		CK(rsd_adopt(e.m, r, NULL, RSD_EXCLUSIVE, &e.h[i]));
	}
	/* cuda:0 full, its pool holding both blocks: no backing allocation
	 * is timed. */
	for (unsigned i = 0; i < 2; i++)
		CK(rsd_move(e.m, e.h[i], PF_CUDA0, NULL, NULL, NULL));
	for (unsigned r = 0; r < rounds; r++) {
		async_ns[r] = pf_spill_use(&e, next, true);
		next = (next + 1) % e.n;
		wait_ns[r] = pf_spill_use(&e, next, false);
		next = (next + 1) % e.n;
	}
	pf_close(&e);
	bench_note("pf_host_spill: %u rounds; a not-waiting use whose plan spills %.1f us "
		   "median, the waiting use %.0f us",
		   rounds, bench_median(async_ns, rounds) / 1e3,
		   bench_median(wait_ns, rounds) / 1e3);
	f = bench_fig("pf_host_spill", "use_async_spilling_64MiB",
		      bench_median(async_ns, rounds) / 1e3, "us");
	bench_fig_base(f, "waiting use", bench_median(wait_ns, rounds) / 1e3);
	bench_fig_target(f, TGT_MAX, 100);
}

static void case_prefetch(void)
{
	bench_note("pipeline: simulated device, link model on, durations x%.0f", PF_SCALE);
	pf_host_time();
	pf_host_spill();
	pf_pipeline();
}
