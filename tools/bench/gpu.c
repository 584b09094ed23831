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
 *                       same pageable buffer.
 *
 * Each figure's baseline is also printed as "<metric>_base", so the figures
 * can be read back by a script.
 */
#if RSD_HAVE_CUDA
#include <cuda_runtime.h>
#endif

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

/* Median ns of reps bare copies of n bytes from src to dst on stream. */
static double bare_copy_ns(void *dst, const void *src, uint64_t n, enum cudaMemcpyKind kind,
			   cudaStream_t s, size_t reps)
{
	double t[32];

	for (size_t i = 0; i < reps + 1; i++) {
		uint64_t t0 = bench_now_ns();

		cuda_ck("cudaMemcpyAsync", cudaMemcpyAsync(dst, src, (size_t)n, kind, s));
		cuda_ck("cudaStreamSynchronize", cudaStreamSynchronize(s));
		if (i)
			t[i - 1] = (double)(bench_now_ns() - t0);
	}
	return bench_median(t, reps);
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
	cuda_ck("cudaStreamCreate", cudaStreamCreate(&s));
	bare_h2d = bare_copy_ns(rsd_resident_data(dr, 0), rsd_resident_data(pr, 0), nb,
				cudaMemcpyHostToDevice, s, reps);
	bare_d2h = bare_copy_ns(rsd_resident_data(pr, 0), rsd_resident_data(dr, 0), nb,
				cudaMemcpyDeviceToHost, s, reps);
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
	double t[32], bare;
	cudaStream_t s;

	CK(rsd_cuda_location(0, &dev0));
	CK(rsd_resident_alloc(m, &rsd_resident_type, page, 1, &nb, NULL, 0, &r));
	memset(rsd_resident_data(r, 0), 0x3c, (size_t)nb);
	CK(rsd_adopt(m, r, &page, RSD_REPLICABLE, &h));
	for (size_t i = 0; i < reps + 1; i++) {
		uint64_t t0 = bench_now_ns();

		CK(rsd_ensure(m, h, dev0, NULL, NULL));
		if (i)
			t[i - 1] = (double)(bench_now_ns() - t0);
		CK(rsd_drop(m, h, dev0, NULL));
	}
	CK(rsd_resident_alloc(m, &rsd_resident_type, dev0, 1, &nb, NULL, 0, &dr));
	cuda_ck("cudaStreamCreate", cudaStreamCreate(&s));
	bare = bare_copy_ns(rsd_resident_data(dr, 0), rsd_resident_data(r, 0), nb,
			    cudaMemcpyHostToDevice, s, reps);
	cudaStreamDestroy(s);
	rsd_resident_free(dr);
	gpu_fig("gpu_ensure_pageable", "ensure_64MiB_GBps", gbps(nb, bench_median(t, reps)), "GB/s",
		"cudaMemcpyAsync", gbps(nb, bare), TGT_RATIO_MIN, 0.8);
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
		return;
	}
#if RSD_HAVE_CUDA
	gpu_moves();
	gpu_lease();
	gpu_ensure_pageable();
	bench_note(
		"gpu: rsd_move pinned<->cuda:0 of 256 MiB and a pageable->cuda:0 ensure of 64 "
		"MiB vs bare cudaMemcpyAsync+cudaStreamSynchronize on buffers of the same pools; "
		"cuda:0 lease acquire+release with pooled events vs one event "
		"create+record+destroy");
#endif
}
