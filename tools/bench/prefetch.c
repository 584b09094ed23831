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
 *  - the host time of one not-waiting 64 MiB ensure to a device, beside
 *    the waiting ensure's.
 */
#include <string.h>

#include "common.h"

#define PF_SCALE 100.0
#define PF_MIB (1ull << 20)
#define PF_BATCHES 32u

struct pf_env {
	struct rsd_simdev *sd;
	struct rsd_manager *m;
	struct rsd_controller *c;
	struct rsd_policy *pol;
	void *cs; /* the consumer ("compute") stream on cuda:0 */
	struct rsd_handle *h;
	unsigned n;
	uint64_t nbytes, kernel_ns;
};

static const struct rsd_location PF_CUDA0 = { RSD_CUDA, 0 };

static void pf_open(struct pf_env *e, unsigned n, uint64_t nbytes, uint64_t kernel_ns)
{
	struct rsd_simdev_config cfg = {
		.ndevices = 1,
		.pooled = true,
		.progress = RSD_SIMDEV_BACKGROUND,
		.links = true,
		.time_scale = PF_SCALE,
	};
	/* Room for three batches: the one computing, the one arriving, and
	 * the one whose kernel may still run. */
	struct rsd_budget b = { PF_CUDA0, 3 * nbytes };
	struct rsd_manager_config mc = { .budgets = &b, .nbudgets = 1, .driver = rsd_simdev_ops() };

	memset(e, 0, sizeof(*e));
	e->n = n;
	e->nbytes = nbytes;
	e->kernel_ns = kernel_ns;
	CK(rsd_simdev_create(&cfg, &e->sd));
	mc.driver_ctx = e->sd;
	CK(rsd_manager_create(&mc, &e->m));
	CK(rsd_simdev_stream_create(e->sd, 0, &e->cs));
	CK(rsd_tiered_lru_create(NULL, 0, &e->pol));
	CK(rsd_controller_create(e->m, e->pol, 0, &e->c));
	e->h = calloc(n, sizeof(*e->h));
	if (!e->h)
		bench_fail("calloc", -RSD_ENOMEM);
	for (unsigned i = 0; i < n; i++) {
		struct rsd_resident *r;

		CK(rsd_resident_alloc(e->m, &rsd_resident_type, RSD_LOC_PINNED_HOST, 1, &nbytes,
				      NULL, 0, &r));
		memset(rsd_resident_data(r, 0), (int)(i + 1), nbytes);
		CK(rsd_adopt(e->m, r, NULL, RSD_REPLICABLE, &e->h[i]));
	}
}

static void pf_close(struct pf_env *e)
{
	rsd_simdev_stream_complete(e->sd, e->cs);
	rsd_controller_free(e->c);
	rsd_policy_free(e->pol);
	CK(rsd_manager_close(e->m, RSD_CLOSE_FORCE));
	rsd_manager_destroy(e->m);
	rsd_simdev_stream_destroy(e->sd, e->cs);
	rsd_simdev_destroy(e->sd);
	free(e->h);
}

/* A kernel of known length on the consumer stream reading batch i. */
static void pf_kernel(struct pf_env *e, unsigned i, const struct rsd_use *u)
{
	const struct rsd_resident *r;
	struct rsd_simdev_access acc;

	CK(rsd_use_value((struct rsd_use *)u, e->h[i], PF_CUDA0, &r));
	memset(&acc, 0, sizeof(acc));
	acc.ptr = rsd_resident_data(r, 0);
	acc.nbytes = e->nbytes;
	CK(rsd_simdev_launch_kernel(e->sd, e->cs, e->kernel_ns, &acc, 1, NULL, NULL));
}

/* An event after the work queued on the consumer stream so far. */
static void *pf_mark(struct pf_env *e)
{
	void *ev;

	CK(rsd_simdev_ops()->event_record(e->sd, e->cs, &ev));
	return ev;
}

static void pf_wait(struct pf_env *e, void *ev)
{
	CK(rsd_simdev_ops()->event_sync(e->sd, ev));
	rsd_simdev_ops()->event_destroy(e->sd, ev);
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
	if (async)
		CK(rsd_controller_use_async(e->c, &r, &e->cs, 1, NULL, 0, u));
	else
		CK(rsd_controller_use(e->c, &r, &e->cs, 1, NULL, 0, u));
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

static void pf_pipeline(void)
{
	const uint64_t nbytes = QF(4, 8) * PF_MIB;
	const unsigned n = QF(8u, PF_BATCHES);
	uint64_t copy, compute, waiting, prefetching, kernel_ns;
	struct bench_fig *f;
	struct pf_env e;

	/* A kernel as long as one batch's modelled copy. */
	pf_open(&e, n, nbytes, 0);
	copy = pf_copies_alone(&e);
	kernel_ns = copy / n;
	pf_close(&e);

	pf_open(&e, n, nbytes, kernel_ns);
	compute = pf_kernels_alone(&e);
	pf_close(&e);
	pf_open(&e, n, nbytes, kernel_ns);
	waiting = pf_waiting(&e);
	pf_close(&e);
	pf_open(&e, n, nbytes, kernel_ns);
	prefetching = pf_prefetching(&e);
	pf_close(&e);

	bench_note("pipeline: %u batches of %llu MiB, copies alone %.1f ms, kernels alone %.1f ms, "
		   "waiting %.1f ms, prefetching %.1f ms",
		   n, (unsigned long long)(nbytes / PF_MIB), copy / 1e6, compute / 1e6,
		   waiting / 1e6, prefetching / 1e6);
	f = bench_fig("pf_pipeline", "prefetch_vs_max", (double)prefetching /
			      (double)(copy > compute ? copy : compute), "x");
	bench_fig_base(f, "waiting", (double)waiting / (double)(copy > compute ? copy : compute));
	bench_fig_target(f, TGT_MAX, 1.1);
}

/* ---- host time of one not-waiting 64 MiB ensure -------------------------- */

static void pf_host_time(void)
{
	const uint64_t nbytes = 64 * PF_MIB;
	const unsigned reps = QF(5u, 15u);
	double async_ns[15], wait_ns[15];
	struct bench_fig *f;
	struct pf_env e;

	pf_open(&e, 1, nbytes, 0);
	/* Warm the device pool: steady state allocates nothing. */
	CK(rsd_ensure(e.m, e.h[0], PF_CUDA0, NULL, NULL));
	CK(rsd_drop(e.m, e.h[0], PF_CUDA0, NULL));
	for (unsigned i = 0; i < reps; i++) {
		uint64_t t0 = bench_now_ns();

		CK(rsd_ensure_async(e.m, e.h[0], PF_CUDA0, NULL, NULL));
		async_ns[i] = (double)(bench_now_ns() - t0);
		rsd_simdev_complete_all(e.sd);
		CK(rsd_manager_reap(e.m));
		CK(rsd_drop(e.m, e.h[0], PF_CUDA0, NULL));
		t0 = bench_now_ns();
		CK(rsd_ensure(e.m, e.h[0], PF_CUDA0, NULL, NULL));
		wait_ns[i] = (double)(bench_now_ns() - t0);
		CK(rsd_drop(e.m, e.h[0], PF_CUDA0, NULL));
	}
	pf_close(&e);
	f = bench_fig("pf_host", "ensure_async_64MiB", bench_median(async_ns, reps) / 1e3, "us");
	bench_fig_base(f, "waiting ensure", bench_median(wait_ns, reps) / 1e3);
	bench_fig_target(f, TGT_MAX, 10);
}

static void case_prefetch(void)
{
	bench_note("pipeline: simulated device, link model on, durations x%.0f", PF_SCALE);
	pf_host_time();
	pf_pipeline();
}
