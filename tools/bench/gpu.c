// SPDX-License-Identifier: MIT
/*
 * rsd-bench: the GPU cases (group "gpu"), run on the CUDA driver against a
 * real runtime and device; tools/build/gpu-check runs them and tabulates them.
 * Without CUDA in the build, or without a device, each figure is skipped
 * with the reason.
 *
 *   gpu_h2d / gpu_d2h   a 256 MiB value moved pinned-host -> cuda:0 and back
 *                       with rsd_move (pooled pinned and device memory, the
 *                       driver's transfer stream, an event wait), against a
 *                       bare cudaMemcpyAsync + cudaStreamSynchronize loop on
 *                       buffers from the same pools (a 256 MiB request is
 *                       larger than a pool chunk, so each is a chunk of its
 *                       own: the move's figure includes what that costs);
 *   gpu_lease           rsd_acquire + rsd_lease_release (no wait) of a cuda:0
 *                       lease with a consumer stream, whose completion events
 *                       come from the driver's pool, against creating,
 *                       recording and destroying one event per release;
 *   gpu_ensure_pageable an ensure of a 64 MiB pageable value to cuda:0 (and
 *                       its drop), against a bare cudaMemcpyAsync from the
 *                       same pageable buffer;
 *   gpu_ensure256       the steady state of a 256 MiB pinned value: an
 *                       ensure to cuda:0 and its drop (pooled oversize
 *                       blocks, no allocator call), against the bare loop;
 *   gpu_k               K threads on K GPUs (K = 2 and every visible GPU, up
 *                       to 8) through one manager, each an ensure+drop loop
 *                       of its own 64 MiB pinned value to its own device,
 *                       aggregate bytes/s against K threads each running a
 *                       bare cudaMemcpyAsync loop on its own device and
 *                       stream at once (the node's ceiling);
 *   gpu_peer            an ensure at cuda:1 of a 256 MiB value resident at
 *                       cuda:0 (and its drop), against a bare
 *                       cudaMemcpyPeerAsync loop with peer access enabled;
 *   gpu_staged_h2d /    an ensure pageable -> cuda:0 of 256 MiB, and
 *   gpu_staged_d2h      cuda:0 -> pageable of 64 MiB (a size whose pageable
 *                       destination the block cache keeps warm), through
 *                       the device's staging pair, against the same ensure
 *                       of a pinned value (target: 0.8 of its rate); and
 *                       the unstaged copy (a manager with staging off, the
 *                       runtime's pageable cudaMemcpyAsync) against the
 *                       same (pipeline.c's pipe_measure()).
 *
 * gpu_k and gpu_peer need two GPUs (gpu_peer also peer access between
 * cuda:0 and cuda:1); with fewer they are skipped with a reason that
 * tools/build/gpu-check recognises ("needs 2 GPUs", "no peer access").
 *
 * Each figure's baseline is also printed as "<metric>_base", so the figures
 * can be read back by a script.
 */
#if RSD_HAVE_CUDA
#include <pthread.h>

#include <cuda_runtime.h>
#endif

#define GPU_MAX_K 8

/* 0 when the GPU cases can run here, else why not. */
static const char *gpu_unavailable(void)
{
	const struct rsd_device_ops *ops = rsd_cuda_driver();

	if (!rsd_cuda_built() || !ops)
		return "librsd built without CUDA (CUDA=0)";
	if (ops->device_count(NULL) <= 0)
		return "the CUDA driver sees no device";
	return NULL;
}

#if RSD_HAVE_CUDA
static void gpu_fig(const char *cs, const char *metric, double value, const char *unit,
		    const char *base_name, double base, enum bench_tkind kind, double x)
{
	struct bench_fig *f = bench_fig(cs, metric, value, unit);
	char m[40];

	bench_fig_base(f, base_name, base);
	if (kind != TGT_NONE)
		bench_fig_target(f, kind, x);
	snprintf(m, sizeof(m), "%s_base", metric);
	bench_line(cs, m, base, unit);
	bench_note("%s %s baseline: %s", cs, metric, base_name);
}

static void cuda_ck(const char *what, cudaError_t e)
{
	if (e != cudaSuccess) {
		fprintf(stderr, "rsd-bench: %s: %s\n", what, cudaGetErrorString(e));
		bench_fail(what, -RSD_EDEVICE);
	}
}

static struct rsd_manager *gpu_manager(void)
{
	struct rsd_manager_config cfg = { 0 };
	struct rsd_manager *m;

	cfg.driver = rsd_cuda_driver();
	CK(rsd_manager_create(&cfg, &m));
	return m;
}

/* GB/s of nbytes in ns. */
static double gbps(uint64_t nbytes, double ns)
{
	return ns > 0 ? (double)nbytes / ns : 0;
}

/* One bare copy, as an application would write it without librsd. */
struct gpu_copy {
	void *dst;
	const void *src;
	uint64_t n;
	enum cudaMemcpyKind kind;
	int dst_dev, src_dev; /* peer: cudaMemcpyPeerAsync between these */
	bool peer;
	cudaStream_t s;
};

static void gpu_copy_once(const struct gpu_copy *c)
{
	if (c->peer)
		cuda_ck("cudaMemcpyPeerAsync", cudaMemcpyPeerAsync(c->dst, c->dst_dev, c->src,
								   c->src_dev, (size_t)c->n, c->s));
	else
		cuda_ck("cudaMemcpyAsync",
			cudaMemcpyAsync(c->dst, c->src, (size_t)c->n, c->kind, c->s));
	cuda_ck("cudaStreamSynchronize", cudaStreamSynchronize(c->s));
}

/* Median ns of reps bare copies (after one to warm up). */
static double bare_copy_ns(const struct gpu_copy *c, size_t reps)
{
	double t[32];

	for (size_t i = 0; i < reps + 1; i++) {
		uint64_t t0 = bench_now_ns();

		gpu_copy_once(c);
		if (i)
			t[i - 1] = (double)(bench_now_ns() - t0);
	}
	return bench_median(t, reps);
}

/* A stream of device d (the thread's current device is left at 0). */
static cudaStream_t gpu_stream(int d)
{
	cudaStream_t s;

	cuda_ck("cudaSetDevice", cudaSetDevice(d));
	cuda_ck("cudaStreamCreate", cudaStreamCreate(&s));
	cuda_ck("cudaSetDevice", cudaSetDevice(0));
	return s;
}

static void gpu_moves(void)
{
	const uint64_t nb = 256ull << 20;
	size_t reps = QF(3, 9);
	struct rsd_location dev0, pin = RSD_LOC_PINNED_HOST;
	struct rsd_resident *r, *pr, *dr;
	double h2d[32], d2h[32], bare_h2d, bare_d2h;
	struct rsd_manager *m = gpu_manager();
	struct rsd_handle h;
	cudaStream_t s;

	CK(rsd_cuda_location(0, &dev0));
	CK(rsd_resident_alloc(m, &rsd_resident_type, pin, 1, &nb, NULL, 0, &r));
	memset(rsd_resident_data(r, 0), 0x5a, (size_t)nb);
	CK(rsd_adopt(m, r, &pin, RSD_REPLICABLE, &h));
	for (size_t i = 0; i < reps + 1; i++) {
		uint64_t t0 = bench_now_ns(), t1, t2;

		CK(rsd_move(m, h, dev0, &pin, NULL, NULL));
		t1 = bench_now_ns();
		CK(rsd_move(m, h, pin, &dev0, NULL, NULL));
		t2 = bench_now_ns();
		if (i) { /* the first round warms the pools */
			h2d[i - 1] = (double)(t1 - t0);
			d2h[i - 1] = (double)(t2 - t1);
		}
	}
	CK(rsd_discard(m, h, NULL));
	/* The bare loop on buffers from the same pools. */
	CK(rsd_resident_alloc(m, &rsd_resident_type, pin, 1, &nb, NULL, 0, &pr));
	CK(rsd_resident_alloc(m, &rsd_resident_type, dev0, 1, &nb, NULL, 0, &dr));
	s = gpu_stream(0);
	bare_h2d = bare_copy_ns(&(struct gpu_copy){ .dst = rsd_resident_data(dr, 0),
						    .src = rsd_resident_data(pr, 0),
						    .n = nb,
						    .kind = cudaMemcpyHostToDevice,
						    .s = s },
				reps);
	bare_d2h = bare_copy_ns(&(struct gpu_copy){ .dst = rsd_resident_data(pr, 0),
						    .src = rsd_resident_data(dr, 0),
						    .n = nb,
						    .kind = cudaMemcpyDeviceToHost,
						    .s = s },
				reps);
	cudaStreamDestroy(s);
	rsd_resident_free(pr);
	rsd_resident_free(dr);
	gpu_fig("gpu_h2d", "move_256MiB_GBps", gbps(nb, bench_median(h2d, reps)), "GB/s",
		"cudaMemcpyAsync", gbps(nb, bare_h2d), TGT_RATIO_MIN, 0.9);
	gpu_fig("gpu_d2h", "move_256MiB_GBps", gbps(nb, bench_median(d2h, reps)), "GB/s",
		"cudaMemcpyAsync", gbps(nb, bare_d2h), TGT_RATIO_MIN, 0.9);
	bench_manager_end(m);
}

static void gpu_lease(void)
{
	const uint64_t nb = 1u << 20;
	size_t n = QF(2000, 20000);
	struct rsd_location dev0;
	struct rsd_manager *m = gpu_manager();
	struct rsd_resident *r;
	struct rsd_handle h;
	cudaStream_t cs;
	double lease_ns, bare_ns;
	uint64_t t0;

	CK(rsd_cuda_location(0, &dev0));
	CK(rsd_resident_alloc(m, &rsd_resident_type, dev0, 1, &nb, NULL, 0, &r));
	CK(rsd_adopt(m, r, &dev0, RSD_REPLICABLE, &h));
	cuda_ck("cudaStreamCreate", cudaStreamCreate(&cs));
	for (int warm = 0; warm < 2; warm++) {
		t0 = bench_now_ns();
		for (size_t i = 0; i < n; i++) {
			struct rsd_lease *l;

			CK(rsd_acquire(m, &h, 1, dev0, cs, &l));
			CK(rsd_lease_release(l, 0));
			rsd_lease_free(l);
		}
		lease_ns = (double)(bench_now_ns() - t0) / (double)n;
		cuda_ck("cudaStreamSynchronize", cudaStreamSynchronize(cs));
		CK(rsd_manager_reap(m));
	}
	t0 = bench_now_ns();
	for (size_t i = 0; i < n; i++) {
		cudaEvent_t e;

		cuda_ck("cudaEventCreateWithFlags",
			cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
		cuda_ck("cudaEventRecord", cudaEventRecord(e, cs));
		cudaEventDestroy(e);
	}
	bare_ns = (double)(bench_now_ns() - t0) / (double)n;
	cuda_ck("cudaStreamSynchronize", cudaStreamSynchronize(cs));
	CK(rsd_manager_reap(m));
	cudaStreamDestroy(cs);
	gpu_fig("gpu_lease", "acquire_release_ns", lease_ns, "ns", "event create+record+destroy",
		bare_ns, TGT_NONE, 0);
	bench_manager_end(m);
}

static void gpu_ensure_pageable(void)
{
	const uint64_t nb = 64ull << 20;
	size_t reps = QF(3, 9);
	struct rsd_location dev0, page = RSD_LOC_PAGEABLE_HOST;
	struct rsd_manager *m = gpu_manager();
	struct rsd_resident *r, *dr;
	struct rsd_handle h;
	double ens, bare;
	cudaStream_t s;

	CK(rsd_cuda_location(0, &dev0));
	CK(rsd_resident_alloc(m, &rsd_resident_type, page, 1, &nb, NULL, 0, &r));
	memset(rsd_resident_data(r, 0), 0x3c, (size_t)nb);
	CK(rsd_adopt(m, r, &page, RSD_REPLICABLE, &h));
	ens = bench_ensure_ns(m, h, dev0, reps);
	CK(rsd_resident_alloc(m, &rsd_resident_type, dev0, 1, &nb, NULL, 0, &dr));
	s = gpu_stream(0);
	bare = bare_copy_ns(&(struct gpu_copy){ .dst = rsd_resident_data(dr, 0),
						.src = rsd_resident_data(r, 0),
						.n = nb,
						.kind = cudaMemcpyHostToDevice,
						.s = s },
			    reps);
	cudaStreamDestroy(s);
	rsd_resident_free(dr);
	gpu_fig("gpu_ensure_pageable", "ensure_64MiB_GBps", gbps(nb, ens), "GB/s",
		"cudaMemcpyAsync", gbps(nb, bare), TGT_RATIO_MIN, 0.8);
	bench_manager_end(m);
}
/* A replicable value of nb bytes adopted at at (its bytes written where the
 * host can reach them). */
static struct rsd_handle gpu_value(struct rsd_manager *m, struct rsd_location at, uint64_t nb)
{
	struct rsd_resident *r;
	struct rsd_handle h;

	CK(rsd_resident_alloc(m, &rsd_resident_type, at, 1, &nb, NULL, 0, &r));
	if (at.kind != RSD_CUDA)
		memset(rsd_resident_data(r, 0), 0x5a, (size_t)nb);
	CK(rsd_adopt(m, r, &at, RSD_REPLICABLE, &h));
	return h;
}

static void gpu_ensure256(void)
{
	const uint64_t nb = 256ull << 20;
	size_t reps = QF(3, 9);
	struct rsd_location dev0, pin = RSD_LOC_PINNED_HOST;
	struct rsd_manager *m = gpu_manager();
	struct rsd_resident *pr, *dr;
	double ens, bare;
	cudaStream_t s;

	CK(rsd_cuda_location(0, &dev0));
	ens = bench_ensure_ns(m, gpu_value(m, pin, nb), dev0, reps);
	CK(rsd_resident_alloc(m, &rsd_resident_type, pin, 1, &nb, NULL, 0, &pr));
	CK(rsd_resident_alloc(m, &rsd_resident_type, dev0, 1, &nb, NULL, 0, &dr));
	s = gpu_stream(0);
	bare = bare_copy_ns(&(struct gpu_copy){ .dst = rsd_resident_data(dr, 0),
						.src = rsd_resident_data(pr, 0),
						.n = nb,
						.kind = cudaMemcpyHostToDevice,
						.s = s },
			    reps);
	cudaStreamDestroy(s);
	rsd_resident_free(pr);
	rsd_resident_free(dr);
	gpu_fig("gpu_ensure256", "ensure_drop_GBps", gbps(nb, ens), "GB/s", "cudaMemcpyAsync",
		gbps(nb, bare), TGT_RATIO_MIN, 0.9);
	bench_manager_end(m);
}

/* ---- K threads on K GPUs ------------------------------------------------ */

/* One thread of gpu_k: ensure+drop of h at device dev through m, or (m
 * NULL) the bare copy c on its own device and stream. */
struct gpu_worker {
	struct rsd_manager *m;
	struct rsd_handle h;
	struct rsd_location dev;
	struct gpu_copy c;
	unsigned iters;
	pthread_barrier_t *start;
};

static void gpu_worker_round(struct gpu_worker *w)
{
	if (w->m) {
		CK(rsd_ensure(w->m, w->h, w->dev, NULL, NULL));
		CK(rsd_drop(w->m, w->h, w->dev, NULL));
	} else {
		gpu_copy_once(&w->c);
	}
}

static void *gpu_worker_main(void *p)
{
	struct gpu_worker *w = p;

	/* The runtime's current device is per thread. */
	cuda_ck("cudaSetDevice", cudaSetDevice(w->dev.device));
	gpu_worker_round(w); /* warm: the figure is the steady state */
	pthread_barrier_wait(w->start);
	for (unsigned i = 0; i < w->iters; i++)
		gpu_worker_round(w);
	return NULL;
}

/* Aggregate bytes/s of k workers run at once, from their common start to
 * the last one's end. */
static double gpu_run_workers(struct gpu_worker *w, int k)
{
	pthread_t t[GPU_MAX_K];
	pthread_barrier_t start;
	uint64_t t0, t1;

	pthread_barrier_init(&start, NULL, (unsigned)k + 1);
	for (int i = 0; i < k; i++) {
		w[i].start = &start;
		if (pthread_create(&t[i], NULL, gpu_worker_main, &w[i]))
			bench_fail("pthread_create", -RSD_ENOMEM);
	}
	pthread_barrier_wait(&start);
	t0 = bench_now_ns();
	for (int i = 0; i < k; i++)
		pthread_join(t[i], NULL);
	t1 = bench_now_ns();
	pthread_barrier_destroy(&start);
	return (double)k * w[0].iters * (double)w[0].c.n / ((double)(t1 - t0) / 1e9);
}

/* GB/s of k threads on cuda:0..k-1 through m, and of k bare loops. */
static void gpu_k_one(struct rsd_manager *m, int k, double *mgr, double *bare)
{
	const uint64_t nb = 64ull << 20;
	unsigned iters = QF(3, 8);
	struct rsd_location pin = RSD_LOC_PINNED_HOST;
	struct gpu_worker w[GPU_MAX_K];
	struct rsd_resident *pr[GPU_MAX_K], *dr[GPU_MAX_K];

	for (int i = 0; i < k; i++) {
		w[i] = (struct gpu_worker){ .m = m, .h = gpu_value(m, pin, nb), .iters = iters };
		w[i].c.n = nb;
		CK(rsd_cuda_location(i, &w[i].dev));
	}
	*mgr = gpu_run_workers(w, k) / 1e9;
	for (int i = 0; i < k; i++) {
		CK(rsd_discard(m, w[i].h, NULL));
		CK(rsd_resident_alloc(m, &rsd_resident_type, pin, 1, &nb, NULL, 0, &pr[i]));
		CK(rsd_resident_alloc(m, &rsd_resident_type, w[i].dev, 1, &nb, NULL, 0, &dr[i]));
		w[i].m = NULL;
		w[i].c = (struct gpu_copy){ .dst = rsd_resident_data(dr[i], 0),
					    .src = rsd_resident_data(pr[i], 0),
					    .n = nb,
					    .kind = cudaMemcpyHostToDevice,
					    .s = gpu_stream(i) };
	}
	*bare = gpu_run_workers(w, k) / 1e9;
	for (int i = 0; i < k; i++) {
		cudaStreamDestroy(w[i].c.s);
		rsd_resident_free(pr[i]);
		rsd_resident_free(dr[i]);
	}
}

static void gpu_k(int ndev)
{
	int ks[2] = { 2, ndev < GPU_MAX_K ? ndev : GPU_MAX_K };
	struct rsd_manager *m;

	if (ndev < 2) {
		bench_skip("gpu_k", "k2_GBps", "%d GPU visible: K threads x K GPUs needs 2 GPUs",
			   ndev);
		return;
	}
	m = gpu_manager();
	for (int j = 0; j < 2; j++) {
		char metric[32];
		double mgr, bare;

		if (j && ks[1] == ks[0])
			break;
		gpu_k_one(m, ks[j], &mgr, &bare);
		snprintf(metric, sizeof(metric), "k%d_GBps", ks[j]);
		gpu_fig("gpu_k", metric, mgr, "GB/s", "K bare cudaMemcpyAsync loops", bare,
			TGT_RATIO_MIN, 0.9);
	}
	bench_manager_end(m);
}

/* ---- cuda:0 -> cuda:1 ---------------------------------------------------- */

/* Enable access from device to peer, as an application would; already
 * enabled (by the driver) is as good. */
static void gpu_peer_enable(int device, int peer)
{
	cudaError_t e;

	cuda_ck("cudaSetDevice", cudaSetDevice(device));
	e = cudaDeviceEnablePeerAccess(peer, 0);
	if (e == cudaErrorPeerAccessAlreadyEnabled) {
		(void)cudaGetLastError();
		e = cudaSuccess;
	}
	cuda_ck("cudaDeviceEnablePeerAccess", e);
	cuda_ck("cudaSetDevice", cudaSetDevice(0));
}

static void gpu_peer(int ndev)
{
	const uint64_t nb = 256ull << 20;
	size_t reps = QF(3, 9);
	struct rsd_location dev0, dev1;
	struct rsd_resident *sr, *dr;
	struct rsd_manager *m;
	int can01 = 0, can10 = 0;
	double ens, bare;
	cudaStream_t s;

	if (ndev < 2) {
		bench_skip("gpu_peer", "peer_256MiB_GBps",
			   "%d GPU visible: cuda:0 -> cuda:1 needs 2 GPUs", ndev);
		return;
	}
	cuda_ck("cudaDeviceCanAccessPeer", cudaDeviceCanAccessPeer(&can01, 0, 1));
	cuda_ck("cudaDeviceCanAccessPeer", cudaDeviceCanAccessPeer(&can10, 1, 0));
	if (!can01 || !can10) {
		bench_skip("gpu_peer", "peer_256MiB_GBps",
			   "no peer access between cuda:0 and cuda:1 (cudaDeviceCanAccessPeer)");
		return;
	}
	m = gpu_manager();
	CK(rsd_cuda_location(0, &dev0));
	CK(rsd_cuda_location(1, &dev1));
	ens = bench_ensure_ns(m, gpu_value(m, dev0, nb), dev1, reps);
	gpu_peer_enable(0, 1);
	gpu_peer_enable(1, 0);
	CK(rsd_resident_alloc(m, &rsd_resident_type, dev0, 1, &nb, NULL, 0, &sr));
	CK(rsd_resident_alloc(m, &rsd_resident_type, dev1, 1, &nb, NULL, 0, &dr));
	s = gpu_stream(0);
	bare = bare_copy_ns(&(struct gpu_copy){ .dst = rsd_resident_data(dr, 0),
						.src = rsd_resident_data(sr, 0),
						.n = nb,
						.dst_dev = 1,
						.src_dev = 0,
						.peer = true,
						.s = s },
			    reps);
	cudaStreamDestroy(s);
	rsd_resident_free(sr);
	rsd_resident_free(dr);
	gpu_fig("gpu_peer", "peer_256MiB_GBps", gbps(nb, ens), "GB/s", "cudaMemcpyPeerAsync",
		gbps(nb, bare), TGT_RATIO_MIN, 0.9);
	bench_manager_end(m);
}

static void gpu_staging_pair(void)
{
	const uint64_t h2d_nb = 256ull << 20, d2h_nb = 64ull << 20;
	struct rsd_manager_config cfg = { .driver = rsd_cuda_driver(),
					  .staging_nbytes = RSD_STAGING_OFF };
	double h2d[PIPE_NWAYS], d2h[PIPE_NWAYS];
	struct rsd_manager *m = gpu_manager(), *direct;
	size_t reps = QF(3, 9);
	struct rsd_location dev0;

	CK(rsd_cuda_location(0, &dev0));
	CK(rsd_manager_create(&cfg, &direct));
	pipe_measure(m, direct, dev0, h2d_nb, reps, h2d, NULL);
	pipe_measure(m, direct, dev0, d2h_nb, reps, NULL, d2h);
	gpu_fig("gpu_staged_h2d", "pageable_256MiB_GBps", gbps(h2d_nb, h2d[PIPE_STAGED]), "GB/s",
		"pinned ensure", gbps(h2d_nb, h2d[PIPE_PINNED]), TGT_RATIO_MIN, 0.8);
	gpu_fig("gpu_staged_h2d", "unstaged_256MiB_GBps", gbps(h2d_nb, h2d[PIPE_UNSTAGED]), "GB/s",
		"pinned ensure", gbps(h2d_nb, h2d[PIPE_PINNED]), TGT_NONE, 0);
	gpu_fig("gpu_staged_d2h", "pageable_64MiB_GBps", gbps(d2h_nb, d2h[PIPE_STAGED]), "GB/s",
		"pinned ensure", gbps(d2h_nb, d2h[PIPE_PINNED]), TGT_RATIO_MIN, 0.8);
	gpu_fig("gpu_staged_d2h", "unstaged_64MiB_GBps", gbps(d2h_nb, d2h[PIPE_UNSTAGED]), "GB/s",
		"pinned ensure", gbps(d2h_nb, d2h[PIPE_PINNED]), TGT_NONE, 0);
	bench_manager_end(direct);
	bench_manager_end(m);
}
#endif

static void case_gpu(void)
{
	const char *why = gpu_unavailable();

	if (why) {
		bench_skip("gpu_h2d", "move_256MiB_GBps", "%s", why);
		bench_skip("gpu_d2h", "move_256MiB_GBps", "%s", why);
		bench_skip("gpu_lease", "acquire_release_ns", "%s", why);
		bench_skip("gpu_ensure_pageable", "ensure_64MiB_GBps", "%s", why);
		bench_skip("gpu_ensure256", "ensure_drop_GBps", "%s", why);
		bench_skip("gpu_k", "k2_GBps", "%s", why);
		bench_skip("gpu_peer", "peer_256MiB_GBps", "%s", why);
		bench_skip("gpu_staged_h2d", "pageable_256MiB_GBps", "%s", why);
		bench_skip("gpu_staged_d2h", "pageable_64MiB_GBps", "%s", why);
		return;
	}
#if RSD_HAVE_CUDA
	gpu_moves();
	gpu_lease();
	gpu_ensure_pageable();
	gpu_ensure256();
	gpu_k(rsd_cuda_driver()->device_count(NULL));
	gpu_peer(rsd_cuda_driver()->device_count(NULL));
	gpu_staging_pair();
	bench_note("gpu: rsd_move pinned<->cuda:0 of 256 MiB, a pageable->cuda:0 ensure of 64 MiB "
		   "and a pinned->cuda:0 ensure+drop of 256 MiB vs bare "
		   "cudaMemcpyAsync+cudaStreamSynchronize on buffers of the same pools; "
		   "cuda:0 lease acquire+release with pooled events vs one event "
		   "create+record+destroy; K threads x K GPUs, 64 MiB ensure+drop each through "
		   "one manager, vs K bare H2D loops at once; a cuda:0->cuda:1 ensure of 256 MiB "
		   "vs bare cudaMemcpyPeerAsync with peer access enabled; staged pageable "
		   "ensures (256 MiB to cuda:0, 64 MiB back) and unstaged ones vs the same of a "
		   "pinned value");
#endif
}
