// SPDX-License-Identifier: MIT
/*
 * Lifetimes: leases, holds and reservations on the CPU, and pinned
 * allocation from the warm pool against the allocator it replaces.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#if RSD_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include "common.h"

#define VAL_BYTES 4096u

enum life_kind {
	LIFE_LEASE,
	LIFE_HOLD,
	LIFE_RESERVE
};

static void life_once(struct rsd_manager *m, struct rsd_handle h, enum life_kind k)
{
	struct rsd_lease *l;
	struct rsd_hold *hd;
	struct rsd_reservation *r;

	switch (k) {
	case LIFE_LEASE:
		CK(rsd_acquire(m, &h, 1, RSD_LOC_PAGEABLE_HOST, NULL, &l));
		CK(rsd_lease_release(l, 0));
		rsd_lease_free(l);
		break;
	case LIFE_HOLD:
		CK(rsd_hold(m, &h, 1, RSD_LOC_PAGEABLE_HOST, &hd));
		CK(rsd_hold_release(hd));
		rsd_hold_free(hd);
		break;
	case LIFE_RESERVE:
		CK(rsd_reserve(m, RSD_LOC_PAGEABLE_HOST, VAL_BYTES, "bench", &r));
		CK(rsd_reservation_release(r));
		rsd_reservation_free(r);
		break;
	}
}

static double life_ns(enum life_kind k)
{
	size_t n = QF(50000, 500000), reps = QF(3, 7);
	struct rsd_manager *m = bench_manager(NULL, 0);
	struct rsd_handle h = bench_adopt(m, VAL_BYTES, RSD_REPLICABLE, true);
	double v[16];

	for (size_t i = 0; i < n / 10; i++)
		life_once(m, h, k);
	for (size_t r = 0; r < reps; r++) {
		uint64_t t0 = bench_now_ns();

		for (size_t i = 0; i < n; i++)
			life_once(m, h, k);
		v[r] = (double)(bench_now_ns() - t0) / (double)n;
	}
	bench_manager_end(m);
	return bench_median(v, reps);
}

static void case_lifetimes(void)
{
	struct bench_fig *f;

	f = bench_fig("lease", "acquire_release_ns", life_ns(LIFE_LEASE), "ns");
	bench_fig_py(f, 5400);
	bench_fig_target(f, TGT_MAX, 200);
	bench_fig("hold", "hold_release_ns", life_ns(LIFE_HOLD), "ns");
	bench_fig("reserve", "reserve_release_ns", life_ns(LIFE_RESERVE), "ns");
	bench_note("lease/hold/reserve: one value (4 KiB, pageable); each figure is the call, "
		   "its release and its free");
}

/* Cold: what a pinned allocation costs without a pool (mlock faults in). */
static double cold_mlock_ns(uint64_t nb, size_t n)
{
	uint64_t t0 = bench_now_ns();

	for (size_t i = 0; i < n; i++) {
		void *p =
			mmap(NULL, nb, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED || mlock(p, nb))
			bench_fail("mmap+mlock", -RSD_ENOMEM);
		munlock(p, nb);
		munmap(p, nb);
	}
	return (double)(bench_now_ns() - t0) / (double)n;
}

static double warm_alloc_ns(struct rsd_manager *m, struct rsd_location at, uint64_t nb, size_t n)
{
	struct rsd_resident *r;
	uint64_t t0;

	CK(rsd_resident_alloc(m, &rsd_resident_type, at, 1, &nb, NULL, 0, &r)); /* warm */
	rsd_resident_free(r);
	t0 = bench_now_ns();
	for (size_t i = 0; i < n; i++) {
		CK(rsd_resident_alloc(m, &rsd_resident_type, at, 1, &nb, NULL, 0, &r));
		rsd_resident_free(r);
	}
	return (double)(bench_now_ns() - t0) / (double)n;
}

static void case_pinned_alloc(void)
{
	static const uint64_t sizes[] = { 4096, 1u << 20 };
	size_t reps = QF(3, 7);
	struct rsd_manager *m = bench_manager(NULL, 0);

	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		uint64_t nb = sizes[s];
		size_t n = nb > 65536 ? QF(200, 2000) : QF(2000, 20000);
		double warm[16], cold[16];
		char metric[32];
		struct bench_fig *f;

		for (size_t r = 0; r < reps; r++) {
			warm[r] = warm_alloc_ns(m, RSD_LOC_PINNED_HOST, nb, n);
			cold[r] = cold_mlock_ns(nb, n);
		}
		snprintf(metric, sizeof(metric), "warm_%s_ns", nb >= (1u << 20) ? "1MiB" : "4KiB");
		f = bench_fig("pinned_alloc", metric, bench_median(warm, reps), "ns");
		bench_fig_base(f, "mlock", bench_median(cold, reps));
	}
	bench_manager_end(m);
	bench_note("pinned_alloc: rsd_resident_alloc + rsd_resident_free at pinned-host on a "
		   "host-only manager (warm pool) vs mmap+mlock+munlock+munmap of the same size");
}

/* The CUDA driver's pinned and device allocations (a GPU machine only). */
static void case_cuda(void)
{
	const struct rsd_device_ops *ops = rsd_cuda_driver();
	int ndev = rsd_cuda_built() && ops ? ops->device_count(NULL) : 0;

	if (!rsd_cuda_built() || ndev <= 0) {
		const char *why = rsd_cuda_built() ? "the CUDA driver sees no device" :
						     "librsd built without CUDA (CUDA=0)";

		bench_skip("cuda_pinned_alloc", "warm_1MiB_ns", "%s", why);
		bench_skip("cuda_device_alloc", "warm_1MiB_ns", "%s", why);
		return;
	}
#if RSD_HAVE_CUDA
	{
		struct rsd_manager_config cfg = { 0 };
		struct rsd_location dev0;
		struct rsd_manager *m;
		uint64_t nb = 1u << 20;
		size_t n = QF(200, 2000);
		double host_cold, dev_cold, host_warm, dev_warm;
		struct bench_fig *f;
		uint64_t t0;
		void *p;

		cfg.driver = ops;
		CK(rsd_manager_create(&cfg, &m));
		CK(rsd_cuda_location(0, &dev0));
		host_warm = warm_alloc_ns(m, RSD_LOC_PINNED_HOST, nb, n);
		dev_warm = warm_alloc_ns(m, dev0, nb, n);
		t0 = bench_now_ns();
		for (size_t i = 0; i < n; i++) {
			if (cudaHostAlloc(&p, nb, cudaHostAllocDefault) != cudaSuccess)
				bench_fail("cudaHostAlloc", -RSD_EDEVICE);
			cudaFreeHost(p);
		}
		host_cold = (double)(bench_now_ns() - t0) / (double)n;
		t0 = bench_now_ns();
		for (size_t i = 0; i < n; i++) {
			if (cudaMalloc(&p, nb) != cudaSuccess)
				bench_fail("cudaMalloc", -RSD_EDEVICE);
			cudaFree(p);
		}
		dev_cold = (double)(bench_now_ns() - t0) / (double)n;
		f = bench_fig("cuda_pinned_alloc", "warm_1MiB_ns", host_warm, "ns");
		bench_fig_base(f, "cudaHostAlloc", host_cold);
		f = bench_fig("cuda_device_alloc", "warm_1MiB_ns", dev_warm, "ns");
		bench_fig_base(f, "cudaMalloc", dev_cold);
		bench_manager_end(m);
	}
#endif
}

#if RSD_HAVE_CUDA
/* ns per allocate + free of nb pinned bytes, the CUDA driver's way (an
 * anonymous mapping registered with cudaHostRegister) or today's
 * (cudaHostAlloc), over n rounds; a page is written each round so the
 * mapping is used as a pool chunk would be. */
static double pinned_round_ns(uint64_t nb, size_t n, bool reg)
{
	uint64_t t0 = bench_now_ns();
	void *p;

	for (size_t i = 0; i < n; i++) {
		if (reg) {
			p = mmap(NULL, nb, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
				 0);
			if (p == MAP_FAILED)
				bench_fail("mmap", -RSD_ENOMEM);
			if (cudaHostRegister(p, nb, cudaHostRegisterPortable) != cudaSuccess)
				bench_fail("cudaHostRegister", -RSD_EDEVICE);
			((volatile char *)p)[0] = 1;
			cudaHostUnregister(p);
			munmap(p, nb);
		} else {
			if (cudaHostAlloc(&p, nb, cudaHostAllocPortable) != cudaSuccess)
				bench_fail("cudaHostAlloc", -RSD_EDEVICE);
			((volatile char *)p)[0] = 1;
			cudaFreeHost(p);
		}
	}
	return (double)(bench_now_ns() - t0) / (double)n;
}
#endif

/*
 * The CUDA driver's pinned chunks: mmap + cudaHostRegister (what it does,
 * so they outlive a lost context) against cudaHostAlloc (what it did), per
 * allocate + free, at 1 MiB and at the driver's 64 MiB chunk, in one run.
 * Needs the CUDA runtime or its double (CUDA=sim, where both are page
 * locking of host memory and the figure says little about a GPU).
 */
static void case_pinned_register(void)
{
	const struct rsd_device_ops *ops = rsd_cuda_driver();
	int ndev = rsd_cuda_built() && ops ? ops->device_count(NULL) : 0;

	if (!rsd_cuda_built() || ndev <= 0) {
		const char *why = rsd_cuda_built() ? "the CUDA driver sees no device" :
						     "librsd built without CUDA (CUDA=0)";

		bench_skip("pinned_register", "reg_1MiB_ns", "%s", why);
		bench_skip("pinned_register", "reg_64MiB_ns", "%s", why);
		return;
	}
#if RSD_HAVE_CUDA
	{
		static const uint64_t sizes[] = { 1u << 20, 64u << 20 };
		size_t reps = QF(3, 5);

		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			uint64_t nb = sizes[s];
			size_t n = nb > (1u << 20) ? QF(4, 16) : QF(50, 200);
			double reg[8], alloc[8];
			char metric[32];
			struct bench_fig *f;

			for (size_t r = 0; r < reps; r++) {
				reg[r] = pinned_round_ns(nb, n, true);
				alloc[r] = pinned_round_ns(nb, n, false);
			}
			snprintf(metric, sizeof(metric), "reg_%s_ns",
				 nb > (1u << 20) ? "64MiB" : "1MiB");
			f = bench_fig("pinned_register", metric, bench_median(reg, reps), "ns");
			bench_fig_base(f, "cudaHostAlloc", bench_median(alloc, reps));
		}
#ifdef RSD_CUDASIM
		bench_note("pinned_register: on the CUDA runtime double (CUDA=sim): both sides "
			   "page-lock host memory; figures for a GPU need a GPU");
#endif
		bench_note("pinned_register: mmap + cudaHostRegister(portable) + "
			   "cudaHostUnregister + munmap vs cudaHostAlloc(portable) + cudaFreeHost, "
			   "per allocation");
	}
#endif
}
