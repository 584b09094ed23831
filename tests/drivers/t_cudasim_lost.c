// SPDX-License-Identifier: MIT
/*
 * A CUDA device whose context fails for good, in the runtime double
 * (rsd_cudasim_lose_device) and through the CUDA driver (lib/drivers/cuda.c):
 * the exact code of every runtime call in the lost context, the ones that
 * still work, the other device's context untouched; cudaHostRegister and
 * cudaHostUnregister as the runtime does them; and the driver marking the
 * device lost at its first sticky error, failing every later op on it with
 * RSD_EDEVLOST, never calling cudaFree there, and keeping its pinned memory
 * (registered, not cudaHostAlloc'ed) usable and freeable.
 *
 * Each case runs in its own process (a fresh double). Without the double
 * every case skips.
 */
#include <atf-c.h>
#include "../check.h"
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <rsd/rsd.h>

#ifndef RSD_CUDASIM
#define RSD_CUDASIM 0
#endif

#if RSD_CUDASIM
#include "../cudasim/cudasim.h"

#define N 4096
#define ECC cudaErrorECCUncorrectable

static void ok(int line, cudaError_t e, const char *what)
{
	if (e != cudaSuccess)
		atf_tc_fail("line %d: %s: %s (%s)", line, what, cudaGetErrorName(e),
			    cudaGetErrorString(e));
}
#define OK(call) ok(__LINE__, (call), #call)

static void noop(void *arg)
{
	(void)arg;
}

static void need_sim(void)
{
}
#else
static void need_sim(void)
{
	atf_tc_skip("needs the CUDA runtime double: make check CUDA=sim");
}
#endif

ATF_TC_WITHOUT_HEAD(runtime_calls_in_a_lost_context);
ATF_TC_BODY(runtime_calls_in_a_lost_context, tc)
{
	need_sim();
#if RSD_CUDASIM
	struct cudaPointerAttributes attr;
	cudaStream_t s0, s1, x = NULL;
	cudaEvent_t e0, e1, ex = NULL;
	unsigned char *h0, *h1, *reg0;
	void *p0, *p1, *q = NULL;
	size_t fr, tot;
	unsigned flags;
	int dev = -1;

	ATF_REQUIRE_EQ(rsd_cudasim_set_progress(RSD_SIMDEV_ON_COMMAND, 0), cudaSuccess);
	OK(cudaSetDevice(0));
	OK(cudaMalloc(&p0, N));
	OK(cudaHostAlloc((void **)&h0, N, cudaHostAllocPortable));
	OK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
	OK(cudaEventCreateWithFlags(&e0, cudaEventDisableTiming));
	reg0 = mmap(NULL, N, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ATF_REQUIRE(reg0 != MAP_FAILED);
	OK(cudaHostRegister(reg0, N, cudaHostRegisterPortable));
	OK(cudaSetDevice(1));
	OK(cudaMalloc(&p1, N));
	OK(cudaHostAlloc((void **)&h1, N, cudaHostAllocPortable));
	OK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
	OK(cudaEventCreateWithFlags(&e1, cudaEventDisableTiming));
	/* A copy and an event queued on cuda:0, never run (on command). */
	OK(cudaMemcpyAsync(p0, h0, N, cudaMemcpyHostToDevice, s0));
	OK(cudaEventRecord(e0, s0));
	ATF_REQUIRE_EQ(cudaEventQuery(e0), cudaErrorNotReady);

	ATF_CHECK_EQ(rsd_cudasim_lose_device(2, ECC), cudaErrorInvalidValue);
	ATF_CHECK_EQ(rsd_cudasim_lose_device(0, cudaErrorInvalidValue), cudaErrorInvalidValue);
	OK(rsd_cudasim_lose_device(0, ECC));
	ATF_CHECK(rsd_simdev_device_lost(rsd_cudasim_simdev(), 0));
	ATF_CHECK(!rsd_simdev_device_lost(rsd_cudasim_simdev(), 1));

	/* Current device cuda:1: its calls work; those naming cuda:0's
	 * memory, streams, events or host allocations do not. */
	ATF_CHECK_EQ(cudaFree(p0), ECC);
	ATF_CHECK_EQ(cudaPointerGetAttributes(&attr, p0), ECC);
	ATF_CHECK_EQ(cudaMemcpyAsync(p0, h1, N, cudaMemcpyHostToDevice, s1), ECC);
	ATF_CHECK_EQ(cudaMemcpyAsync(h1, p0, N, cudaMemcpyDeviceToHost, s1), ECC);
	ATF_CHECK_EQ(cudaMemcpyPeerAsync(p1, 1, p0, 0, N, s1), ECC);
	ATF_CHECK_EQ(cudaMemcpyAsync(p1, h1, N, cudaMemcpyHostToDevice, s0), ECC);
	ATF_CHECK_EQ(cudaStreamQuery(s0), ECC);
	ATF_CHECK_EQ(cudaStreamSynchronize(s0), ECC);
	ATF_CHECK_EQ(cudaStreamGetDevice(s0, &dev), ECC);
	ATF_CHECK_EQ(dev, -1);
	ATF_CHECK_EQ(cudaStreamGetFlags(s0, &flags), ECC);
	ATF_CHECK_EQ(cudaLaunchHostFunc(s0, noop, NULL), ECC);
	ATF_CHECK_EQ(cudaEventRecord(e0, s0), ECC);
	/* The pending event never completes: it reports the error at once. */
	ATF_CHECK_EQ(cudaEventQuery(e0), ECC);
	ATF_CHECK_EQ(cudaEventSynchronize(e0), ECC);
	ATF_CHECK_EQ(cudaStreamWaitEvent(s1, e0, 0), ECC);
	ATF_CHECK_EQ(cudaEventDestroy(e0), ECC);
	ATF_CHECK_EQ(cudaStreamDestroy(s0), ECC);
	/* cudaHostAlloc memory dies with its context; a registration is
	 * dropped (the memory stays the caller's). */
	ATF_CHECK_EQ(cudaFreeHost(h0), ECC);
	ATF_CHECK_EQ(cudaHostUnregister(reg0), ECC);
	ATF_CHECK_EQ(cudaHostUnregister(reg0), cudaErrorHostMemoryNotRegistered);
	reg0[0] = 1;
	ATF_CHECK_EQ(munmap(reg0, N), 0);
	/* The last error of a thread on cuda:1 clears. */
	ATF_CHECK_EQ(cudaGetLastError(), cudaErrorHostMemoryNotRegistered);
	ATF_CHECK_EQ(cudaGetLastError(), cudaSuccess);

	/* cuda:1 works: a copy, an event, memory, peer queries. */
	memset(h1, 0x3c, N);
	OK(cudaMemcpyAsync(p1, h1, N, cudaMemcpyHostToDevice, s1));
	OK(cudaEventRecord(e1, s1));
	rsd_simdev_stream_complete(rsd_cudasim_simdev(), s1);
	OK(cudaEventSynchronize(e1));
	OK(cudaMemGetInfo(&fr, &tot));
	OK(cudaStreamGetDevice(s1, &dev));
	ATF_CHECK_EQ(dev, 1);
	OK(cudaMalloc(&q, N));
	OK(cudaFree(q));
	OK(cudaDeviceSynchronize());

	/* Current device cuda:0: every call in its context fails, and the
	 * error sticks; selecting a device and the queries still work. */
	OK(cudaSetDevice(0));
	OK(cudaGetDevice(&dev));
	ATF_CHECK_EQ(dev, 0);
	q = NULL;
	ATF_CHECK_EQ(cudaMalloc(&q, N), ECC);
	ATF_CHECK(q == NULL);
	ATF_CHECK_EQ(cudaHostAlloc(&q, N, 0), ECC);
	ATF_CHECK_EQ(cudaHostRegister(h1, N, 0), ECC);
	ATF_CHECK_EQ(cudaStreamCreate(&x), ECC);
	ATF_CHECK(x == NULL);
	ATF_CHECK_EQ(cudaEventCreate(&ex), ECC);
	ATF_CHECK(ex == NULL);
	ATF_CHECK_EQ(cudaMemGetInfo(&fr, &tot), ECC);
	ATF_CHECK_EQ(cudaDeviceSynchronize(), ECC);
	ATF_CHECK_EQ(cudaGetLastError(), ECC);
	ATF_CHECK_EQ(cudaGetLastError(), ECC);
	ATF_CHECK_EQ(cudaPeekAtLastError(), ECC);
	OK(cudaSetDevice(1));
	OK(cudaFree(p1));
	OK(cudaFreeHost(h1));
	OK(cudaEventDestroy(e1));
	OK(cudaStreamDestroy(s1));
#endif
}

ATF_TC_WITHOUT_HEAD(host_register_as_the_runtime);
ATF_TC_BODY(host_register_as_the_runtime, tc)
{
	need_sim();
#if RSD_CUDASIM
	struct cudaPointerAttributes attr;
	unsigned char *m, *back, *h;
	cudaStream_t s;
	void *d;

	ATF_REQUIRE_EQ(rsd_cudasim_set_progress(RSD_SIMDEV_ON_COMMAND, 0), cudaSuccess);
	m = mmap(NULL, 2 * N, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ATF_REQUIRE(m != MAP_FAILED);
	back = m + N;
	ATF_CHECK_EQ(cudaHostRegister(NULL, N, 0), cudaErrorInvalidValue);
	ATF_CHECK_EQ(cudaHostRegister(m, 0, 0), cudaErrorInvalidValue);
	ATF_CHECK_EQ(cudaHostRegister(m, N, 0x80), cudaErrorInvalidValue);
	OK(cudaPointerGetAttributes(&attr, m));
	ATF_CHECK_EQ(attr.type, cudaMemoryTypeUnregistered);
	OK(cudaHostRegister(m, 2 * N, cudaHostRegisterPortable));
	OK(cudaPointerGetAttributes(&attr, m + N + 5));
	ATF_CHECK_EQ(attr.type, cudaMemoryTypeHost);
	ATF_CHECK(attr.hostPointer == m + N + 5);
	/* Overlapping a registration, or a cudaHostAlloc block. */
	ATF_CHECK_EQ(cudaHostRegister(m + N, N, 0), cudaErrorHostMemoryAlreadyRegistered);
	OK(cudaHostAlloc((void **)&h, N, 0));
	ATF_CHECK_EQ(cudaHostRegister(h, N, 0), cudaErrorHostMemoryAlreadyRegistered);
	OK(cudaFreeHost(h));
	/* Registered memory is pinned to copies: asynchronous both ways. */
	OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	OK(cudaMalloc(&d, N));
	memset(m, 0x6b, N);
	memset(back, 0, N);
	OK(cudaMemcpyAsync(d, m, N, cudaMemcpyHostToDevice, s));
	OK(cudaMemcpyAsync(back, d, N, cudaMemcpyDeviceToHost, s));
	ATF_CHECK_EQ(back[0], 0);
	ATF_CHECK_EQ(cudaStreamQuery(s), cudaErrorNotReady);
	rsd_simdev_stream_complete(rsd_cudasim_simdev(), s);
	ATF_CHECK_EQ(back[0], 0x6b);
	ATF_CHECK_EQ(back[N - 1], 0x6b);
	/* Not the start of a registration; not freeable as cudaHostAlloc. */
	ATF_CHECK_EQ(cudaHostUnregister(m + N), cudaErrorHostMemoryNotRegistered);
	ATF_CHECK_EQ(cudaFreeHost(m), cudaErrorInvalidValue);
	OK(cudaHostUnregister(m));
	OK(cudaPointerGetAttributes(&attr, m));
	ATF_CHECK_EQ(attr.type, cudaMemoryTypeUnregistered);
	ATF_CHECK_EQ(cudaHostUnregister(m), cudaErrorHostMemoryNotRegistered);
	ATF_CHECK_EQ(munmap(m, 2 * N), 0);
	OK(cudaFree(d));
	OK(cudaStreamDestroy(s));
	(void)cudaGetLastError();
#endif
}

#if RSD_CUDASIM
static struct rsd_location cuda(int d)
{
	struct rsd_location l = { RSD_CUDA, d };

	return l;
}

#define CHECK_MSG(s)                                                                             \
	ATF_CHECK_MSG(strstr(rsd_last_error()->message, s) != NULL, "message lacks '%s': %s", s, \
		      rsd_last_error()->message)
#endif

/*
 * The CUDA driver on a device lost under it: it learns at its first call
 * that meets the sticky error, marks that device (not the other) lost, and
 * from then on fails every op there with RSD_EDEVLOST, frees nothing there
 * (no cudaFree in the dead context), and its pinned memory, registered
 * while cuda:0 was current, stays readable, is still allocated (registered
 * in cuda:1's context) and is unmapped when freed.
 */
ATF_TC_WITHOUT_HEAD(cuda_driver_quarantines_a_lost_device);
ATF_TC_BODY(cuda_driver_quarantines_a_lost_device, tc)
{
	need_sim();
#if RSD_CUDASIM
	const struct rsd_device_ops *C = rsd_cuda_driver();
	const uint64_t big = 80ull << 20; /* past a 64 MiB chunk: freed at once */
	unsigned char *pin, *pin2, *big_pin;
	void *p0, *p1, *big0, *big1, *s0, *s1, *e0, *e1;
	unsigned long frees, unreg;
	uint64_t al, re;

	/* Oversize blocks are not kept: their frees reach the runtime. */
	ATF_REQUIRE_EQ(setenv("RSD_CUDA_OVERSIZE_KEEP", "0", 1), 0);
	ATF_REQUIRE_EQ(C->device_count(NULL), 2);
	OK(cudaSetDevice(0));
	RSD_REQUIRE_OK(C->alloc(NULL, RSD_LOC_PINNED_HOST, N, (void **)&pin));
	RSD_REQUIRE_OK(C->alloc(NULL, RSD_LOC_PINNED_HOST, big, (void **)&big_pin));
	RSD_REQUIRE_OK(C->alloc(NULL, cuda(0), N, &p0));
	RSD_REQUIRE_OK(C->alloc(NULL, cuda(1), N, &p1));
	RSD_REQUIRE_OK(C->alloc(NULL, cuda(0), big, &big0));
	RSD_REQUIRE_OK(C->alloc(NULL, cuda(1), big, &big1));
	ATF_CHECK_EQ(rsd_cudasim_calls("cudaHostAlloc"), 0);
	memset(pin, 0x42, N);
	s0 = C->transfer_stream(NULL, cuda(0), RSD_LOC_PINNED_HOST);
	s1 = C->transfer_stream(NULL, cuda(1), RSD_LOC_PINNED_HOST);
	ATF_REQUIRE(s0 && s1);
	RSD_REQUIRE_OK(C->copy(NULL, p0, cuda(0), pin, RSD_LOC_PINNED_HOST, N, s0));
	RSD_REQUIRE_OK(C->event_record(NULL, s0, &e0));
	ATF_CHECK(!C->device_lost(NULL, 0));

	OK(rsd_cudasim_lose_device(0, cudaErrorIllegalAddress));
	/* The first call that meets it: the driver asks both contexts. */
	RSD_CHECK_ERR(RSD_EDEVLOST, C->copy(NULL, p0, cuda(0), pin, RSD_LOC_PINNED_HOST, N, s0));
	CHECK_MSG("cudaErrorIllegalAddress");
	CHECK_MSG("lost cuda:0 ");
	ATF_CHECK(C->device_lost(NULL, 0));
	ATF_CHECK(!C->device_lost(NULL, 1));
	ATF_CHECK(!C->device_lost(NULL, 2));
	/* From now on, without asking the runtime. */
	RSD_CHECK_ERR(RSD_EDEVLOST, C->alloc(NULL, cuda(0), N, &s0));
	CHECK_MSG("cuda:0 was lost");
	RSD_CHECK_ERR(RSD_EDEVLOST, C->copy(NULL, pin, RSD_LOC_PINNED_HOST, p0, cuda(0), N, s1));
	RSD_CHECK_ERR(RSD_EDEVLOST, C->copy(NULL, p1, cuda(1), p0, cuda(0), N, NULL));
	RSD_CHECK_ERR(RSD_EDEVLOST, C->event_query(NULL, e0));
	RSD_CHECK_ERR(RSD_EDEVLOST, C->event_sync(NULL, e0));
	RSD_CHECK_ERR(RSD_EDEVLOST, C->stream_wait_event(NULL, s1, e0));
	RSD_CHECK_ERR(RSD_EDEVLOST, C->device_sync(NULL, 0));
	RSD_CHECK_ERR(RSD_EDEVLOST, C->metrics(NULL, 0, &al, &re));
	ATF_CHECK(C->transfer_stream(NULL, cuda(0), RSD_LOC_PINNED_HOST) == NULL);
	ATF_CHECK_EQ(rsd_last_error()->code, RSD_EDEVLOST);
	RSD_CHECK_ERR(RSD_EDEVLOST, C->stream_sync(NULL, NULL));
	C->event_destroy(NULL, e0);
	/* Nothing is freed in the dead context. */
	frees = rsd_cudasim_calls("cudaFree");
	C->free(NULL, cuda(0), big0, big);
	C->free(NULL, cuda(0), p0, N);
	ATF_CHECK_EQ(rsd_cudasim_calls("cudaFree"), frees);
	C->free(NULL, cuda(1), big1, big);
	ATF_CHECK_EQ(rsd_cudasim_calls("cudaFree"), frees + 1);

	/* cuda:1 and pinned memory work; pinned bytes stay readable. */
	ATF_CHECK_EQ(pin[0], 0x42);
	RSD_CHECK_OK(C->copy(NULL, p1, cuda(1), pin, RSD_LOC_PINNED_HOST, N, s1));
	RSD_CHECK_OK(C->event_record(NULL, s1, &e1));
	RSD_CHECK_OK(C->event_sync(NULL, e1));
	C->event_destroy(NULL, e1);
	RSD_CHECK_OK(C->device_sync(NULL, 1));
	RSD_CHECK_OK(C->metrics(NULL, 1, &al, &re));
	/* A new pinned chunk, registered though cuda:0 is current. */
	RSD_CHECK_OK(C->alloc(NULL, RSD_LOC_PINNED_HOST, big, (void **)&pin2));
	memset(pin2, 1, 64);
	C->free(NULL, RSD_LOC_PINNED_HOST, pin2, big);
	/* The oversize pinned block registered in cuda:0's context: its
	 * unregistration fails, its memory is unmapped all the same. */
	unreg = rsd_cudasim_calls("cudaHostUnregister");
	C->free(NULL, RSD_LOC_PINNED_HOST, big_pin, big);
	ATF_CHECK_EQ(rsd_cudasim_calls("cudaHostUnregister"), unreg + 1);
	ATF_CHECK_EQ(rsd_cudasim_calls("cudaFreeHost"), 0);
	C->free(NULL, cuda(1), p1, N);
	C->free(NULL, RSD_LOC_PINNED_HOST, pin, N);
#endif
}

#if RSD_CUDASIM
/* A value adopted at `at` (n bytes). */
static struct rsd_handle adopt_at(struct rsd_manager *m, struct rsd_location at, uint64_t n)
{
	struct rsd_resident *r = NULL;
	struct rsd_handle h;

	RSD_REQUIRE_OK(rsd_resident_alloc(m, &rsd_resident_type, at, 1, &n, NULL, 0, &r));
	RSD_REQUIRE_OK(rsd_adopt(m, r, &at, RSD_REPLICABLE, &h));
	return h;
}

/* The value's snapshot: lost flag and copy count. */
static void check_value(struct rsd_manager *m, struct rsd_handle h, bool lost, size_t nmats)
{
	struct rsd_snapshot *snap = NULL;

	RSD_REQUIRE_OK(rsd_snapshot_take(m, &snap));
	for (size_t i = 0; i < snap->nvalues; i++) {
		if (!rsd_handle_equal(snap->values[i].handle, h))
			continue;
		ATF_CHECK_EQ(snap->values[i].lost, lost);
		ATF_CHECK_EQ(snap->values[i].nmaterializations, nmats);
	}
	rsd_snapshot_free(snap);
}
#endif

/*
 * A manager on the CUDA driver over the double: the first call that meets
 * cuda:0's sticky error quarantines it; the value with a pinned copy keeps
 * it, the one whose only copy was there is lost; settling the location
 * calls no cudaFree in the dead context; close(0) closes and a new
 * manager works on cuda:1.
 */
ATF_TC_WITHOUT_HEAD(manager_survives_a_lost_device);
ATF_TC_BODY(manager_survives_a_lost_device, tc)
{
	need_sim();
#if RSD_CUDASIM
	const uint64_t big = 80ull << 20; /* past a 64 MiB chunk: freed at once */
	struct rsd_manager_config mc;
	struct rsd_handle kept, only, again;
	struct rsd_manager *m;
	unsigned long frees;

	ATF_REQUIRE_EQ(setenv("RSD_CUDA_OVERSIZE_KEEP", "0", 1), 0);
	memset(&mc, 0, sizeof(mc));
	mc.driver = rsd_cuda_driver();
	RSD_REQUIRE_OK(rsd_manager_create(&mc, &m));
	kept = adopt_at(m, RSD_LOC_PINNED_HOST, big);
	only = adopt_at(m, RSD_LOC_PINNED_HOST, big);
	RSD_REQUIRE_OK(rsd_ensure(m, kept, cuda(0), NULL, NULL));
	RSD_REQUIRE_OK(rsd_move(m, only, cuda(0), NULL, NULL, NULL));
	RSD_REQUIRE_OK(rsd_manager_reap(m));

	OK(rsd_cudasim_lose_device(0, cudaErrorIllegalAddress));
	frees = rsd_cudasim_calls("cudaFree");
	RSD_CHECK_ERR(RSD_EDEVLOST, rsd_ensure(m, only, RSD_LOC_PINNED_HOST, NULL, NULL));
	ATF_CHECK_EQ(rsd_cudasim_calls("cudaFree"), frees);
	check_value(m, kept, false, 1);
	check_value(m, only, true, 0);
	RSD_CHECK_ERR(RSD_EDEVLOST, rsd_ensure(m, only, cuda(1), NULL, NULL));
	ATF_CHECK(strstr(rsd_last_error()->message, "was lost with its device"));
	ATF_CHECK(strstr(rsd_last_error()->message, "cuda:0"));
	RSD_CHECK_ERR(RSD_EDEVLOST, rsd_ensure(m, kept, cuda(0), NULL, NULL));
	RSD_CHECK_OK(rsd_ensure(m, kept, cuda(1), NULL, NULL));
	RSD_CHECK_OK(rsd_discard(m, only, NULL));
	RSD_CHECK_OK(rsd_manager_close(m, 0));
	rsd_manager_destroy(m);
	ATF_CHECK_EQ(rsd_cudasim_calls("cudaFree"), frees + 1); /* kept's cuda:1 copy */

	RSD_REQUIRE_OK(rsd_manager_create(&mc, &m));
	again = adopt_at(m, RSD_LOC_PINNED_HOST, N);
	RSD_CHECK_OK(rsd_ensure(m, again, cuda(1), NULL, NULL));
	RSD_CHECK_ERR(RSD_EDEVLOST, rsd_ensure(m, again, cuda(0), NULL, NULL));
	RSD_CHECK_OK(rsd_move(m, again, RSD_LOC_PAGEABLE_HOST, NULL, NULL, NULL));
	RSD_CHECK_OK(rsd_manager_close(m, 0));
	rsd_manager_destroy(m);
#endif
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, runtime_calls_in_a_lost_context);
	ATF_TP_ADD_TC(tp, host_register_as_the_runtime);
	ATF_TP_ADD_TC(tp, cuda_driver_quarantines_a_lost_device);
	ATF_TP_ADD_TC(tp, manager_survives_a_lost_device);
	return atf_no_error();
}
