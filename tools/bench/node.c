// SPDX-License-Identifier: MIT
/*
 * One manager for a whole GPU node (group "node"), on the simulated device
 * with its link model on (Documentation/drivers.md): per device one copy
 * engine per direction at H200 PCIe Gen5 rates, peer links, timed backing
 * allocations. Every modelled duration is stretched by NODE_SCALE so that
 * the modelled link time, not this machine's memcpy, decides each figure;
 * ratios do not depend on the scale.
 *
 *  - K threads on K devices through one manager (64 MiB ensure+drop each),
 *    aggregate against one thread, and against K managers (the ceiling);
 *  - a pageable lease acquire+release beside another thread's 64 MiB copy;
 *  - one plan copying a value to 4 devices against a plan copying it to 1;
 *  - other threads' writer calls during a 200 ms source load;
 *  - an eviction to host and a load to the device at once on one device;
 *  - backing allocations per steady-state ensure+drop of 256 MiB;
 *  - event queries per reap with 1,000 pending leases on one stream.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define NODE_SCALE 100.0
#define NODE_DEVICES 4
#define NODE_MIB (1ull << 20)

struct node_env {
	struct rsd_simdev *sd;
	struct rsd_manager *m;
};

static struct rsd_simdev *node_simdev(uint64_t oversize_keep)
{
	struct rsd_simdev_config cfg = {
		.ndevices = NODE_DEVICES,
		.pooled = true,
		.progress = RSD_SIMDEV_BACKGROUND,
		.links = true,
		.time_scale = NODE_SCALE,
		.oversize_keep = oversize_keep,
	};
	struct rsd_simdev *sd;

	CK(rsd_simdev_create(&cfg, &sd));
	return sd;
}

static struct rsd_manager *node_manager(struct rsd_simdev *sd)
{
	struct rsd_manager_config cfg = { .driver = rsd_simdev_ops(), .driver_ctx = sd };
	struct rsd_manager *m;

	CK(rsd_manager_create(&cfg, &m));
	return m;
}

static struct rsd_location node_cuda(int d)
{
	return (struct rsd_location){ RSD_CUDA, d };
}

/* A replicable value of nbytes adopted at pinned host, its bytes written. */
static struct rsd_handle node_pinned(struct rsd_manager *m, uint64_t nbytes)
{
	struct rsd_resident *r;
	struct rsd_handle h;

	CK(rsd_resident_alloc(m, &rsd_resident_type, RSD_LOC_PINNED_HOST, 1, &nbytes, NULL, 0, &r));
	memset(rsd_resident_data(r, 0), 0x5a, nbytes);
	CK(rsd_adopt(m, r, NULL, RSD_REPLICABLE, &h));
	return h;
}

static void node_end(struct rsd_manager *m, struct rsd_simdev *sd)
{
	CK(rsd_manager_close(m, RSD_CLOSE_FORCE));
	rsd_manager_destroy(m);
	rsd_simdev_destroy(sd);
}

/* ---- K threads on K devices -------------------------------------------- */

struct node_worker {
	struct rsd_manager *m;
	struct rsd_handle h;
	int device;
	unsigned iters;
	pthread_barrier_t *start;
};

static void *node_worker_main(void *p)
{
	struct node_worker *w = p;

	pthread_barrier_wait(w->start);
	for (unsigned i = 0; i < w->iters; i++) {
		CK(rsd_ensure(w->m, w->h, node_cuda(w->device), NULL, NULL));
		CK(rsd_drop(w->m, w->h, node_cuda(w->device), NULL));
	}
	return NULL;
}

/* Bytes per second of k threads, thread i on device i; one manager for all
 * (shared) or one each. */
static double node_aggregate(int k, bool shared, unsigned iters)
{
	struct rsd_simdev *sd = node_simdev(0);
	struct rsd_manager *ms[NODE_DEVICES];
	struct node_worker w[NODE_DEVICES];
	pthread_t t[NODE_DEVICES];
	pthread_barrier_t start;
	uint64_t t0, t1;

	pthread_barrier_init(&start, NULL, (unsigned)k + 1);
	for (int i = 0; i < k; i++) {
		ms[i] = (shared && i) ? ms[0] : node_manager(sd);
		w[i] = (struct node_worker){ ms[i], node_pinned(ms[i], 64 * NODE_MIB), i, iters,
					     &start };
		/* Warm the pools: the figure is the steady state. */
		CK(rsd_ensure(ms[i], w[i].h, node_cuda(i), NULL, NULL));
		CK(rsd_drop(ms[i], w[i].h, node_cuda(i), NULL));
	}
	for (int i = 0; i < k; i++)
		pthread_create(&t[i], NULL, node_worker_main, &w[i]);
	pthread_barrier_wait(&start);
	t0 = bench_now_ns();
	for (int i = 0; i < k; i++)
		pthread_join(t[i], NULL);
	t1 = bench_now_ns();
	pthread_barrier_destroy(&start);
	for (int i = 0; i < k; i++) {
		if (!shared || !i) {
			CK(rsd_manager_close(ms[i], RSD_CLOSE_FORCE));
			rsd_manager_destroy(ms[i]);
		}
	}
	rsd_simdev_destroy(sd);
	return (double)k * iters * 64.0 * NODE_MIB / ((double)(t1 - t0) / 1e9);
}

static void node_k_devices(void)
{
	unsigned iters = QF(3, 8);
	double one = node_aggregate(1, true, iters);

	bench_line("node_k", "one_thread", one / 1e9, "GB/s");
	for (int k = 2; k <= NODE_DEVICES; k += 2) {
		double shared = node_aggregate(k, true, iters);
		double apart = node_aggregate(k, false, iters);
		char metric[32];
		struct bench_fig *f;

		snprintf(metric, sizeof(metric), "k%d_vs_one", k);
		f = bench_fig("node_k", metric, shared / one, "x");
		bench_fig_base(f, "one thread", 1.0);
		bench_fig_target(f, TGT_MIN, 0.9 * k);
		snprintf(metric, sizeof(metric), "k%d_vs_k_managers", k);
		f = bench_fig("node_k", metric, shared / apart, "x");
		bench_fig_base(f, "k managers", 1.0);
		bench_fig_target(f, TGT_MIN, 0.9);
	}
}

/* ---- a lease beside a copy ---------------------------------------------- */

struct node_copier {
	struct rsd_manager *m;
	struct rsd_handle h;
	atomic_bool stop;
};

static void *node_copier_main(void *p)
{
	struct node_copier *c = p;

	while (!atomic_load(&c->stop)) {
		CK(rsd_ensure(c->m, c->h, node_cuda(0), NULL, NULL));
		CK(rsd_drop(c->m, c->h, node_cuda(0), NULL));
	}
	return NULL;
}

/* p99 ns of a pageable lease acquire+release. */
static double node_lease_p99(struct rsd_manager *m, struct rsd_handle v, size_t n)
{
	double *lat = calloc(n, sizeof(*lat));
	double p99;

	for (size_t i = 0; i < n; i++) {
		struct rsd_lease *l;
		uint64_t t0 = bench_now_ns();

		CK(rsd_acquire(m, &v, 1, RSD_LOC_PAGEABLE_HOST, NULL, &l));
		CK(rsd_lease_release(l, 0));
		lat[i] = (double)(bench_now_ns() - t0);
		rsd_lease_free(l);
		bench_sleep_ns(20000);
	}
	p99 = bench_pct(lat, n, 99);
	free(lat);
	return p99;
}

static void node_lease_beside_copy(void)
{
	struct rsd_simdev *sd = node_simdev(0);
	struct rsd_manager *m = node_manager(sd);
	struct node_copier c = { m, node_pinned(m, 64 * NODE_MIB), false };
	struct rsd_handle v = bench_adopt(m, 4096, RSD_REPLICABLE, true);
	size_t n = QF(500, 3000);
	double alone, beside;
	struct bench_fig *f;
	pthread_t t;

	alone = node_lease_p99(m, v, n);
	pthread_create(&t, NULL, node_copier_main, &c);
	bench_sleep_ns(5000000);
	beside = node_lease_p99(m, v, n);
	atomic_store(&c.stop, true);
	pthread_join(t, NULL);
	f = bench_fig("node_lease", "p99_beside_copy", beside / 1e3, "us");
	bench_fig_base(f, "alone", alone / 1e3);
	bench_fig_target(f, TGT_MAX, 50);
	node_end(m, sd);
}

/* ---- one plan, four devices --------------------------------------------- */

static double node_plan_ns(struct rsd_manager *m, struct rsd_handle h, int ndev, unsigned reps)
{
	struct rsd_action up[NODE_DEVICES], down[NODE_DEVICES];
	double *v = calloc(reps, sizeof(*v)), med;

	for (int d = 0; d < ndev; d++) {
		up[d] = rsd_action_ensure(h, node_cuda(d));
		down[d] = rsd_action_drop(h, node_cuda(d));
	}
	for (unsigned r = 0; r < reps; r++) {
		uint64_t t0 = bench_now_ns();

		CK(rsd_execute_actions(m, up, (size_t)ndev, "node-up", NULL, 0, NULL, NULL));
		v[r] = (double)(bench_now_ns() - t0);
		CK(rsd_execute_actions(m, down, (size_t)ndev, "node-down", NULL, 0, NULL, NULL));
	}
	med = bench_median(v, reps);
	free(v);
	return med;
}

static void node_plan_four(void)
{
	struct rsd_simdev *sd = node_simdev(0);
	struct rsd_manager *m = node_manager(sd);
	struct rsd_handle h = node_pinned(m, 64 * NODE_MIB);
	unsigned reps = QF(3, 7);
	double one, four;
	struct bench_fig *f;

	node_plan_ns(m, h, NODE_DEVICES, 1); /* warm every device's pool */
	one = node_plan_ns(m, h, 1, reps);
	four = node_plan_ns(m, h, NODE_DEVICES, reps);
	f = bench_fig("node_plan", "four_devices_vs_one", four / one, "x");
	bench_fig_base(f, "one device", 1.0);
	bench_fig_target(f, TGT_MAX, 1.3);
	bench_line("node_plan", "one_device_ms", one / 1e6, "ms");
	node_end(m, sd);
}

/* ---- writer calls during a source load ---------------------------------- */

struct node_loader {
	struct rsd_manager *m;
	struct rsd_handle h;
	atomic_bool loading;
};

static int node_slow_load(void *ctx, struct rsd_resident **out)
{
	struct node_loader *l = ctx;
	uint64_t n = 4096;

	atomic_store(&l->loading, true);
	bench_sleep_ns(200000000);
	atomic_store(&l->loading, false);
	return rsd_resident_alloc(l->m, &rsd_resident_type, RSD_LOC_PAGEABLE_HOST, 1, &n, NULL, 0,
				  out);
}

static void *node_loader_main(void *p)
{
	struct node_loader *l = p;

	CK(rsd_ensure(l->m, l->h, RSD_LOC_PAGEABLE_HOST, NULL, NULL));
	return NULL;
}

static void node_load_beside(void)
{
	struct rsd_value_spec spec = { &rsd_resident_type, 4096, 4096, RSD_REPLICABLE,
				       RSD_RECONSTRUCTIBLE };
	struct rsd_manager *m = bench_manager(NULL, 0);
	struct node_loader l = { .m = m };
	struct rsd_source src = { node_slow_load, NULL, &l };
	struct rsd_handle v = bench_adopt(m, 4096, RSD_REPLICABLE, true);
	double lat[4096];
	size_t n = 0, refused = 0;
	struct bench_fig *f;
	pthread_t t;

	CK(rsd_register_source(m, &spec, &src, RSD_LOC_PAGEABLE_HOST, &l.h));
	pthread_create(&t, NULL, node_loader_main, &l);
	while (!atomic_load(&l.loading))
		bench_sleep_ns(100000);
	while (atomic_load(&l.loading) && n < 4096) {
		uint64_t t0 = bench_now_ns();
		int rc = rsd_ensure(m, v, RSD_LOC_PINNED_HOST, NULL, NULL);

		if (!rc)
			rc = rsd_drop(m, v, RSD_LOC_PINNED_HOST, NULL);
		lat[n++] = (double)(bench_now_ns() - t0);
		refused += rc != 0;
		bench_sleep_ns(100000);
	}
	pthread_join(t, NULL);
	bench_line("node_load", "calls_during_load", (double)n, "calls");
	f = bench_fig("node_load", "refused_during_load", (double)refused, "calls");
	bench_fig_base(f, "calls made", (double)n);
	bench_fig_target(f, TGT_MAX, 0);
	f = bench_fig("node_load", "p99_during_load", bench_pct(lat, n, 99) / 1e3, "us");
	bench_fig_target(f, TGT_MAX, 1000);
	bench_manager_end(m);
}

/* ---- eviction and load at once on one device ---------------------------- */

struct node_mover {
	struct rsd_manager *m;
	struct rsd_handle h;
	struct rsd_location to;
	pthread_barrier_t *start;
	uint64_t ns;
};

static void *node_mover_main(void *p)
{
	struct node_mover *w = p;
	uint64_t t0;

	pthread_barrier_wait(w->start);
	t0 = bench_now_ns();
	CK(rsd_move(w->m, w->h, w->to, NULL, NULL, NULL));
	w->ns = bench_now_ns() - t0;
	return NULL;
}

static void node_evict_and_load(void)
{
	struct rsd_simdev *sd = node_simdev(0);
	struct rsd_manager *m = node_manager(sd);
	struct rsd_handle x = node_pinned(m, 64 * NODE_MIB), y = node_pinned(m, 64 * NODE_MIB);
	struct node_mover out = { m, x, RSD_LOC_PINNED_HOST, NULL, 0 };
	struct node_mover in = { m, y, node_cuda(0), NULL, 0 };
	unsigned reps = QF(3, 7);
	double both[8], alone[8];
	pthread_barrier_t start;
	struct bench_fig *f;

	for (unsigned r = 0; r < reps; r++) {
		pthread_t a, b;
		uint64_t t0, t_out, t_in;

		/* Alone: x back to the device and out, y in and back. */
		CK(rsd_move(m, x, node_cuda(0), NULL, NULL, NULL));
		t0 = bench_now_ns();
		CK(rsd_move(m, x, RSD_LOC_PINNED_HOST, NULL, NULL, NULL));
		t_out = bench_now_ns() - t0;
		t0 = bench_now_ns();
		CK(rsd_move(m, y, node_cuda(0), NULL, NULL, NULL));
		t_in = bench_now_ns() - t0;
		CK(rsd_move(m, y, RSD_LOC_PINNED_HOST, NULL, NULL, NULL));
		alone[r] = (double)(t_out > t_in ? t_out : t_in);
		/* Together. */
		CK(rsd_move(m, x, node_cuda(0), NULL, NULL, NULL));
		pthread_barrier_init(&start, NULL, 3);
		out.start = in.start = &start;
		pthread_create(&a, NULL, node_mover_main, &out);
		pthread_create(&b, NULL, node_mover_main, &in);
		pthread_barrier_wait(&start);
		t0 = bench_now_ns();
		pthread_join(a, NULL);
		pthread_join(b, NULL);
		both[r] = (double)(bench_now_ns() - t0);
		pthread_barrier_destroy(&start);
		CK(rsd_move(m, y, RSD_LOC_PINNED_HOST, NULL, NULL, NULL));
	}
	f = bench_fig("node_duplex", "evict_and_load_vs_longer",
		      bench_median(both, reps) / bench_median(alone, reps), "x");
	bench_fig_base(f, "the longer alone", 1.0);
	bench_fig_target(f, TGT_MAX, 1.2);
	node_end(m, sd);
}

/* ---- backing allocations per steady-state transition -------------------- */

static double node_allocs_per_cycle(uint64_t keep)
{
	struct rsd_simdev *sd = node_simdev(keep);
	struct rsd_manager *m = node_manager(sd);
	struct rsd_handle h = node_pinned(m, 256 * NODE_MIB);
	unsigned n = QF(3, 6);
	unsigned long before;

	CK(rsd_ensure(m, h, node_cuda(0), NULL, NULL));
	CK(rsd_drop(m, h, node_cuda(0), NULL));
	before = rsd_simdev_calls(sd, RSD_SIMDEV_BACKING_ALLOC) +
		 rsd_simdev_calls(sd, RSD_SIMDEV_BACKING_FREE);
	for (unsigned i = 0; i < n; i++) {
		CK(rsd_ensure(m, h, node_cuda(0), NULL, NULL));
		CK(rsd_drop(m, h, node_cuda(0), NULL));
	}
	before = rsd_simdev_calls(sd, RSD_SIMDEV_BACKING_ALLOC) +
		 rsd_simdev_calls(sd, RSD_SIMDEV_BACKING_FREE) - before;
	node_end(m, sd);
	return (double)before / n;
}

static void node_alloc_calls(void)
{
	/* The baseline keeps no freed oversize block: every move allocates
	 * and frees its own, as before the pools kept them. */
	double none = node_allocs_per_cycle(1);
	double kept = node_allocs_per_cycle(0);
	struct bench_fig *f;

	f = bench_fig("node_alloc", "backing_calls_256MiB", kept, "calls");
	bench_fig_base(f, "oversize blocks not kept", none);
	bench_fig_target(f, TGT_MAX, 0);
}

/* ---- event queries per reap --------------------------------------------- */

static void node_reap_queries(void)
{
	struct rsd_simdev_config cfg = { .ndevices = 1, .pooled = true };
	struct rsd_manager_config mc = { .driver = rsd_simdev_ops() };
	struct rsd_lease *l;
	struct rsd_simdev *sd;
	struct rsd_manager *m;
	struct rsd_resident *r;
	struct rsd_handle h;
	uint64_t n = 64;
	unsigned long q0;
	const unsigned nleases = 1000;
	struct bench_fig *f;
	void *st;

	CK(rsd_simdev_create(&cfg, &sd));
	mc.driver_ctx = sd;
	CK(rsd_manager_create(&mc, &m));
	CK(rsd_simdev_stream_create(sd, 0, &st));
	CK(rsd_resident_alloc(m, &rsd_resident_type, node_cuda(0), 1, &n, NULL, 0, &r));
	CK(rsd_adopt(m, r, NULL, RSD_REPLICABLE, &h));
	/* On command: nothing completes until asked, so every lease stays
	 * pending behind the first. */
	for (unsigned i = 0; i < nleases; i++) {
		CK(rsd_acquire(m, &h, 1, node_cuda(0), st, &l));
		CK(rsd_lease_release(l, 0));
		rsd_lease_free(l);
	}
	q0 = rsd_simdev_calls(sd, RSD_SIMDEV_EVENT_QUERY);
	CK(rsd_manager_reap(m));
	f = bench_fig("node_reap", "queries_1000_pending",
		      (double)(rsd_simdev_calls(sd, RSD_SIMDEV_EVENT_QUERY) - q0), "queries");
	bench_fig_base(f, "one per pending lease", nleases);
	bench_fig_target(f, TGT_MAX, 2);
	rsd_simdev_complete_all(sd);
	CK(rsd_manager_close(m, 0));
	rsd_manager_destroy(m);
	rsd_simdev_stream_destroy(sd, st);
	rsd_simdev_destroy(sd);
}

static void case_node(void)
{
	bench_note("node: simulated device, link model on, durations x%.0f", NODE_SCALE);
	node_k_devices();
	node_lease_beside_copy();
	node_plan_four();
	node_load_beside();
	node_evict_and_load();
	node_alloc_calls();
	node_reap_queries();
}
