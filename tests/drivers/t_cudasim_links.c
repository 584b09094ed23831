// SPDX-License-Identifier: MIT
/*
 * The link model in the CUDA runtime double, and the CUDA driver's copy
 * paths on it: peer copies bounce through host until peer access is
 * enabled, cudaStreamWaitEvent orders a stream after another without
 * blocking the host, cudaMalloc and cudaMallocHost are counted and timed,
 * pageable copies hold the caller at the pageable rate; the driver keeps
 * oversize blocks (no cudaMalloc per steady-state transition), enables
 * peer access once per pair and hands out transfer streams per direction
 * and pair, and its stream_wait_event is cudaStreamWaitEvent.
 *
 * Each case runs in its own process and sets the link model's variables
 * before its first runtime call, which starts the double. Built against a
 * real runtime (CUDA=1) or without CUDA, every case skips.
 */
#include <atf-c.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rsd/rsd.h>

#include "../gate.h"
#include "../stall.h"

#ifndef RSD_CUDASIM
#define RSD_CUDASIM 0
#endif

#define MB 1000000ull

#if RSD_CUDASIM
#include "../cudasim/cudasim.h"

static const struct rsd_location PAGEABLE = { RSD_PAGEABLE_HOST, -1 };
static const struct rsd_location PINNED = { RSD_PINNED_HOST, -1 };
static const struct rsd_location CUDA0 = { RSD_CUDA, 0 };
static const struct rsd_location CUDA1 = { RSD_CUDA, 1 };

static void ok(int line, cudaError_t e, const char *what)
{
	if (e != cudaSuccess)
		atf_tc_fail("line %d: %s: %s (%s)", line, what, cudaGetErrorName(e),
			    cudaGetErrorString(e));
}
#define OK(call) ok(__LINE__, (call), #call)

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The link model on with slow, exact figures; before the first call. */
static struct rsd_simdev *links(void)
{
	struct rsd_simdev *sd;

	setenv("RSD_SIMDEV_LINKS", "1", 1);
	setenv("RSD_SIMDEV_H2D_GBPS", "0.01", 1);
	setenv("RSD_SIMDEV_D2H_GBPS", "0.01", 1);
	setenv("RSD_SIMDEV_PAGEABLE_GBPS", "0.005", 1);
	setenv("RSD_SIMDEV_PEER_GBPS", "1", 1);
	setenv("RSD_SIMDEV_BOUNCE_GBPS", "0.1", 1);
	setenv("RSD_SIMDEV_PCIE_LATENCY_NS", "1", 1);
	setenv("RSD_SIMDEV_PEER_LATENCY_NS", "1", 1);
	sd = rsd_cudasim_simdev();
	ATF_REQUIRE(sd != NULL);
	ATF_REQUIRE(rsd_simdev_links_on(sd));
	return sd;
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

ATF_TC_WITHOUT_HEAD(peer_copies_bounce_until_peer_access);
ATF_TC_BODY(peer_copies_bounce_until_peer_access, tc)
{
	need_sim();
#if RSD_CUDASIM
	struct rsd_simdev *sd = links();
	int can = 0;

	/* A fresh context: no peer access, the copy bounces through host. */
	ATF_CHECK_EQ(rsd_simdev_copy_ns(sd, CUDA1, CUDA0, MB), 10000002ull);
	OK(cudaDeviceCanAccessPeer(&can, 1, 0));
	ATF_CHECK_EQ(can, 1);
	OK(cudaSetDevice(1));
	OK(cudaDeviceEnablePeerAccess(0, 0));
	ATF_CHECK_EQ(rsd_simdev_copy_ns(sd, CUDA1, CUDA0, MB), 1000001ull);
	ATF_CHECK_EQ(rsd_simdev_copy_ns(sd, CUDA0, CUDA1, MB), 1000001ull);
	ATF_CHECK_EQ(cudaDeviceEnablePeerAccess(0, 0), cudaErrorPeerAccessAlreadyEnabled);
	ATF_CHECK_EQ(cudaDeviceEnablePeerAccess(1, 0), cudaErrorInvalidDevice);
	ATF_CHECK_EQ(cudaDeviceEnablePeerAccess(0, 1), cudaErrorInvalidValue);
	(void)cudaGetLastError();
	OK(cudaDeviceDisablePeerAccess(0));
	ATF_CHECK_EQ(rsd_simdev_copy_ns(sd, CUDA1, CUDA0, MB), 10000002ull);
	ATF_CHECK_EQ(cudaDeviceDisablePeerAccess(0), cudaErrorPeerAccessNotEnabled);
	(void)cudaGetLastError();
#endif
}

ATF_TC_WITHOUT_HEAD(no_peer_access_node);
ATF_TC_BODY(no_peer_access_node, tc)
{
	need_sim();
#if RSD_CUDASIM
	const struct rsd_device_ops *ops = rsd_cuda_driver();
	int can = 1;

	setenv("RSD_SIMDEV_NO_PEER_ACCESS", "1", 1);
	OK(cudaDeviceCanAccessPeer(&can, 0, 1));
	ATF_CHECK_EQ(can, 0);
	ATF_CHECK_EQ(cudaDeviceEnablePeerAccess(1, 0), cudaErrorPeerAccessUnsupported);
	(void)cudaGetLastError();
	/* The driver asks, does not enable, and still copies (slowly). */
	ATF_CHECK(ops->transfer_stream(NULL, CUDA1, CUDA0) != NULL);
	ATF_CHECK_EQ(rsd_cudasim_calls("cudaDeviceEnablePeerAccess"), 1);
	ATF_CHECK_EQ(cudaPeekAtLastError(), cudaSuccess);
#endif
}

ATF_TC_WITHOUT_HEAD(stream_wait_event_orders_without_blocking_the_host);
ATF_TC_BODY(stream_wait_event_orders_without_blocking_the_host, tc)
{
	need_sim();
#if RSD_CUDASIM
	struct gate g = GATE_INIT;
	struct timespec ms50 = { 0, 50000000L };
	unsigned char *h, *back;
	cudaStream_t a, b;
	cudaEvent_t e;
	void *d;

	/* a (cuda:1) is held by a gate before its event; b (cuda:0) waits
	 * for the event, then copies. */
	OK(cudaSetDevice(1));
	OK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
	OK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
	OK(cudaLaunchHostFunc(a, gate_hold, &g));
	OK(cudaEventRecord(e, a));
	OK(cudaSetDevice(0));
	OK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
	OK(cudaMalloc(&d, 4096));
	OK(cudaMallocHost((void **)&h, 4096));
	OK(cudaMallocHost((void **)&back, 4096));
	memset(h, 0x6b, 4096);
	memset(back, 0, 4096);
	/* Returns with the gate shut: the host does not wait. */
	OK(cudaStreamWaitEvent(b, e, 0));
	OK(cudaMemcpyAsync(d, h, 4096, cudaMemcpyHostToDevice, b));
	OK(cudaMemcpyAsync(back, d, 4096, cudaMemcpyDeviceToHost, b));
	nanosleep(&ms50, NULL);
	ATF_CHECK_EQ(cudaStreamQuery(b), cudaErrorNotReady);
	ATF_CHECK_EQ(back[0], 0);
	gate_open(&g);
	OK(cudaStreamSynchronize(b));
	ATF_CHECK_EQ(cudaEventQuery(e), cudaSuccess);
	ATF_CHECK_EQ(back[0], 0x6b);
	ATF_CHECK_EQ(back[4095], 0x6b);
	/* Refusals, as the runtime's. */
	ATF_CHECK_EQ(cudaStreamWaitEvent(b, (cudaEvent_t)&g, 0), cudaErrorInvalidResourceHandle);
	ATF_CHECK_EQ(cudaStreamWaitEvent((cudaStream_t)&g, e, 0), cudaErrorInvalidResourceHandle);
	ATF_CHECK_EQ(cudaStreamWaitEvent(b, e, 4), cudaErrorInvalidValue);
	(void)cudaGetLastError();
	OK(cudaFree(d));
	OK(cudaFreeHost(h));
	OK(cudaFreeHost(back));
	OK(cudaEventDestroy(e));
	OK(cudaStreamDestroy(a));
	OK(cudaStreamDestroy(b));
#endif
}

ATF_TC_WITHOUT_HEAD(allocations_are_counted_and_timed);
ATF_TC_BODY(allocations_are_counted_and_timed, tc)
{
	need_sim();
#if RSD_CUDASIM
	struct rsd_simdev *sd;
	uint64_t t0;
	void *d, *h;

	setenv("RSD_SIMDEV_ALLOC_NS", "30000000", 1);
	setenv("RSD_SIMDEV_PINNED_ALLOC_NS", "20000000", 1);
	sd = links();
	t0 = now_ns();
	OK(cudaMalloc(&d, 4096));
	ATF_CHECK(now_ns() - t0 >= 30000000ull);
	ATF_CHECK_EQ(rsd_simdev_calls(sd, RSD_SIMDEV_BACKING_ALLOC), 1);
	t0 = now_ns();
	OK(cudaMallocHost(&h, 4096));
	ATF_CHECK(now_ns() - t0 >= 20000000ull);
	ATF_CHECK_EQ(rsd_simdev_calls(sd, RSD_SIMDEV_BACKING_ALLOC), 2);
	OK(cudaFree(d));
	OK(cudaFreeHost(h));
	ATF_CHECK_EQ(rsd_simdev_calls(sd, RSD_SIMDEV_BACKING_FREE), 2);
#endif
}

ATF_TC_WITHOUT_HEAD(pageable_copies_hold_at_the_pageable_rate);
ATF_TC_BODY(pageable_copies_hold_at_the_pageable_rate, tc)
{
	need_sim();
#if RSD_CUDASIM
	struct rsd_simdev *sd = links();
	unsigned char *pg = malloc(MB), *pin;
	uint64_t t = rsd_simdev_copy_ns(sd, CUDA0, PAGEABLE, MB / 2), t0;
	cudaStream_t s;
	void *d;

	ATF_REQUIRE(pg != NULL);
	/* 0.5 MB at 5 MB/s. */
	ATF_CHECK_EQ(t, 100000001ull);
	OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	OK(cudaMalloc(&d, MB));
	OK(cudaMallocHost((void **)&pin, MB));
	memset(pg, 0x19, MB);
	t0 = now_ns();
	OK(cudaMemcpyAsync(d, pg, MB / 2, cudaMemcpyHostToDevice, s));
	ATF_CHECK(now_ns() - t0 >= t);
	memset(pg, 0, MB);
	t0 = now_ns();
	OK(cudaMemcpyAsync(pg, d, MB / 2, cudaMemcpyDeviceToHost, s));
	ATF_CHECK(now_ns() - t0 >= t);
	ATF_CHECK_EQ(pg[MB / 2 - 1], 0x19);
	/* Pinned: 1 MB at 10 MB/s, 100 ms, returns before it is done. */
	OK(cudaMemcpyAsync(d, pin, MB, cudaMemcpyHostToDevice, s));
	ATF_CHECK_EQ(cudaStreamQuery(s), cudaErrorNotReady);
	OK(cudaStreamSynchronize(s));
	OK(cudaFree(d));
	OK(cudaFreeHost(pin));
	OK(cudaStreamDestroy(s));
	free(pg);
#endif
}

ATF_TC_WITHOUT_HEAD(driver_reuses_oversize_blocks);
ATF_TC_BODY(driver_reuses_oversize_blocks, tc)
{
	need_sim();
#if RSD_CUDASIM
	const struct rsd_device_ops *ops = rsd_cuda_driver();
	struct rsd_simdev *sd = links();
	unsigned long m0, f0;

	ATF_REQUIRE(ops->device_count(NULL) >= 2);
	m0 = rsd_cudasim_calls("cudaMalloc");
	f0 = rsd_cudasim_calls("cudaFree");
	for (int i = 0; i < 5; i++) {
		void *p = NULL;

		ATF_REQUIRE_EQ(ops->alloc(NULL, CUDA0, 256ull << 20, &p), 0);
		ops->free(NULL, CUDA0, p, 256ull << 20);
	}
	/* The first block is allocated; the next four reuse it. */
	ATF_CHECK_EQ(rsd_cudasim_calls("cudaMalloc") - m0, 1);
	ATF_CHECK_EQ(rsd_cudasim_calls("cudaFree") - f0, 0);
	ATF_CHECK_EQ(rsd_simdev_calls(sd, RSD_SIMDEV_BACKING_ALLOC), 1);
#endif
}

ATF_TC_WITHOUT_HEAD(driver_transfer_streams_peer_access_and_waits);
ATF_TC_BODY(driver_transfer_streams_peer_access_and_waits, tc)
{
	need_sim();
#if RSD_CUDASIM
	const struct rsd_device_ops *ops = rsd_cuda_driver();
	struct rsd_simdev *sd = links();
	void *h2d, *d2h, *p01, *ev = NULL, *d0 = NULL, *d1 = NULL;
	unsigned char *h = NULL;
	int dev = -1;

	ATF_REQUIRE(ops->device_count(NULL) >= 2);
	h2d = ops->transfer_stream(NULL, CUDA0, PINNED);
	d2h = ops->transfer_stream(NULL, PINNED, CUDA0);
	ATF_REQUIRE(h2d && d2h);
	ATF_CHECK(h2d != d2h && h2d != ops->default_stream(NULL, 0));
	ATF_CHECK_EQ(ops->transfer_stream(NULL, CUDA0, PAGEABLE), h2d);
	ATF_CHECK(ops->transfer_stream(NULL, PINNED, PAGEABLE) == NULL);
	ATF_CHECK_EQ(rsd_cudasim_calls("cudaDeviceEnablePeerAccess"), 0);
	/* The first peer stream enables access both ways, once. */
	p01 = ops->transfer_stream(NULL, CUDA1, CUDA0);
	ATF_REQUIRE(p01 != NULL);
	ATF_CHECK_EQ(rsd_cudasim_calls("cudaDeviceEnablePeerAccess"), 2);
	ATF_CHECK_EQ(rsd_simdev_copy_ns(sd, CUDA1, CUDA0, MB), 1000001ull);
	ATF_CHECK_EQ(ops->transfer_stream(NULL, CUDA1, CUDA0), p01);
	ATF_CHECK(ops->transfer_stream(NULL, CUDA0, CUDA1) != p01);
	ATF_CHECK_EQ(rsd_cudasim_calls("cudaDeviceEnablePeerAccess"), 2);
	ATF_CHECK_EQ(ops->stream_device(NULL, p01, &dev), 0);
	ATF_CHECK_EQ(dev, 1);
	ATF_CHECK_EQ(ops->stream_device(NULL, d2h, &dev), 0);
	ATF_CHECK_EQ(dev, 0);

	/* A copy in, then a peer copy that waits for its event. */
	ATF_REQUIRE_EQ(ops->alloc(NULL, PINNED, 4096, (void **)&h), 0);
	ATF_REQUIRE_EQ(ops->alloc(NULL, CUDA0, 4096, &d0), 0);
	ATF_REQUIRE_EQ(ops->alloc(NULL, CUDA1, 4096, &d1), 0);
	memset(h, 0x2e, 4096);
	ATF_REQUIRE_EQ(ops->copy(NULL, d0, CUDA0, h, PINNED, 4096, h2d), 0);
	ATF_REQUIRE_EQ(ops->event_record(NULL, h2d, &ev), 0);
	ATF_CHECK_EQ(ops->stream_wait_event(NULL, p01, ev), 0);
	ATF_REQUIRE_EQ(ops->copy(NULL, d1, CUDA1, d0, CUDA0, 4096, p01), 0);
	ATF_REQUIRE_EQ(ops->stream_wait_event(NULL, d2h, ev), 0);
	ATF_REQUIRE_EQ(ops->stream_sync(NULL, p01), 0);
	memset(h, 0, 4096);
	ATF_REQUIRE_EQ(ops->copy(NULL, h, PINNED, d1, CUDA1, 4096, NULL), 0);
	ATF_REQUIRE_EQ(ops->stream_sync(NULL, NULL), 0);
	ATF_CHECK_EQ(h[4095], 0x2e);
	ATF_CHECK_EQ(rsd_cudasim_calls("cudaStreamWaitEvent"), 2);
	ATF_CHECK_EQ(ops->stream_wait_event(NULL, NULL, ev), -RSD_ETYPE);
	ATF_CHECK_EQ(ops->stream_wait_event(NULL, p01, h), -RSD_ETYPE);
	ops->event_destroy(NULL, ev);
	ops->free(NULL, PINNED, h, 4096);
	ops->free(NULL, CUDA0, d0, 4096);
	ops->free(NULL, CUDA1, d1, 4096);
#endif
}

/*
 * A host function that waits holds its own stream only: another stream of
 * the same device copies meanwhile (the double runs host functions on the
 * held stream's engine, as the runtime occupies no copy engine with them),
 * and the held stream's later copy waits for it, the copy before it done.
 */
ATF_TC_WITHOUT_HEAD(held_host_function_holds_its_stream_only);
ATF_TC_BODY(held_host_function_holds_its_stream_only, tc)
{
	need_sim();
#if RSD_CUDASIM
	struct gate g = GATE_INIT;
	struct timespec ms30 = { 0, 30000000L };
	unsigned char *h, *back_a, *back_b;
	cudaStream_t a, b;
	void *d;

	(void)links();
	OK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
	OK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
	OK(cudaMalloc(&d, 8192));
	OK(cudaMallocHost((void **)&h, 4096));
	OK(cudaMallocHost((void **)&back_a, 4096));
	OK(cudaMallocHost((void **)&back_b, 4096));
	memset(h, 0x3c, 4096);
	memset(back_a, 0, 4096);
	memset(back_b, 0, 4096);
	OK(cudaMemcpyAsync(d, h, 4096, cudaMemcpyHostToDevice, a));
	OK(cudaLaunchHostFunc(a, gate_hold, &g));
	OK(cudaMemcpyAsync(back_a, d, 4096, cudaMemcpyDeviceToHost, a));
	gate_wait_entered(&g);
	OK(cudaMemcpyAsync((char *)d + 4096, h, 4096, cudaMemcpyHostToDevice, b));
	OK(cudaMemcpyAsync(back_b, (char *)d + 4096, 4096, cudaMemcpyDeviceToHost, b));
	OK(cudaStreamSynchronize(b));
	ATF_CHECK_EQ(back_b[4095], 0x3c);
	nanosleep(&ms30, NULL);
	ATF_CHECK_EQ(cudaStreamQuery(a), cudaErrorNotReady);
	ATF_CHECK_EQ(back_a[0], 0);
	gate_open(&g);
	OK(cudaStreamSynchronize(a));
	ATF_CHECK_EQ(back_a[0], 0x3c);
	ATF_CHECK_EQ(back_a[4095], 0x3c);
	OK(cudaFree(d));
	OK(cudaFreeHost(h));
	OK(cudaFreeHost(back_a));
	OK(cudaFreeHost(back_b));
	OK(cudaStreamDestroy(a));
	OK(cudaStreamDestroy(b));
#endif
}

#if RSD_CUDASIM
/* The driver's ops: a copy of n bytes of byte v from pinned to dev, on s. */
static void *pinned_block(const struct rsd_device_ops *C, uint64_t n, int v)
{
	void *p = NULL;

	ATF_REQUIRE_EQ(C->alloc(NULL, PINNED, n, &p), 0);
	memset(p, v, (size_t)n);
	return p;
}
#endif

/*
 * The CUDA driver's gates: a closed gate holds the copies queued after it
 * (their event stays incomplete, the host does not wait), opening it lets
 * them run. A gate opened as failed lets its stream pass (a host function
 * cannot fail a stream) but every driver event recorded after it on that
 * stream reports the gate's error once the work before it is done; one
 * recorded before it, and another stream's, complete as usual.
 */
ATF_TC_WITHOUT_HEAD(driver_gates_hold_and_fail_their_stream);
ATF_TC_BODY(driver_gates_hold_and_fail_their_stream, tc)
{
	need_sim();
#if RSD_CUDASIM
	const struct rsd_device_ops *C = rsd_cuda_driver();
	struct timespec ms30 = { 0, 30000000L };
	void *g1, *g2, *e0, *e1, *e2, *eo, *s, *o, *d = NULL, *p, *q;
	const uint64_t n = 4096;

	(void)links();
	s = C->transfer_stream(NULL, CUDA0, PINNED);
	o = C->transfer_stream(NULL, PINNED, CUDA0);
	ATF_REQUIRE(s != NULL && o != NULL && s != o);
	ATF_REQUIRE_EQ(C->alloc(NULL, CUDA0, 2 * n, &d), 0);
	p = pinned_block(C, n, 0x51);
	q = pinned_block(C, n, 0);
	/* Refusals: no stream, no gate pointer. */
	ATF_CHECK_EQ(C->gate_queue(NULL, NULL, &g1), -RSD_ETYPE);
	ATF_CHECK_EQ(C->gate_queue(NULL, s, NULL), -RSD_ETYPE);

	ATF_REQUIRE_EQ(C->event_record(NULL, s, &e0), 0);
	ATF_REQUIRE_EQ(C->gate_queue(NULL, s, &g1), 0);
	ATF_REQUIRE_EQ(C->copy(NULL, d, CUDA0, p, PINNED, n, s), 0);
	ATF_REQUIRE_EQ(C->event_record(NULL, s, &e1), 0);
	nanosleep(&ms30, NULL);
	ATF_CHECK_EQ(C->event_query(NULL, e1), 0);
	ATF_CHECK_EQ(C->event_sync(NULL, e0), 0);
	C->gate_open(NULL, g1, 0);
	ATF_CHECK_EQ(C->event_sync(NULL, e1), 0);
	ATF_CHECK_EQ(C->event_query(NULL, e1), 1);
	ATF_REQUIRE_EQ(C->copy(NULL, q, PINNED, d, CUDA0, n, o), 0);
	ATF_REQUIRE_EQ(C->stream_sync(NULL, o), 0);
	ATF_CHECK_EQ(((unsigned char *)q)[n - 1], 0x51);

	/* Opened as failed: later events on s fail, the copy still ran. */
	ATF_REQUIRE_EQ(C->gate_queue(NULL, s, &g2), 0);
	ATF_REQUIRE_EQ(C->copy(NULL, (char *)d + n, CUDA0, p, PINNED, n, s), 0);
	ATF_REQUIRE_EQ(C->event_record(NULL, s, &e2), 0);
	ATF_REQUIRE_EQ(C->event_record(NULL, o, &eo), 0);
	C->gate_open(NULL, g2, -RSD_EDEVICE);
	ATF_CHECK_EQ(C->event_sync(NULL, e2), -RSD_EDEVICE);
	ATF_CHECK(strstr(rsd_last_error()->message, "gate opened as failed") != NULL);
	ATF_CHECK_EQ(C->event_query(NULL, e2), -RSD_EDEVICE);
	ATF_CHECK_EQ(C->event_query(NULL, e1), 1);
	ATF_CHECK_EQ(C->event_sync(NULL, eo), 0);
	/* The stream stays failed for later events, as after a sticky error. */
	C->event_destroy(NULL, e2);
	ATF_REQUIRE_EQ(C->event_record(NULL, s, &e2), 0);
	ATF_CHECK_EQ(C->event_sync(NULL, e2), -RSD_EDEVICE);
	for (void **e = (void *[]){ e0, e1, e2, eo, NULL }; *e; e++)
		C->event_destroy(NULL, *e);
	C->free(NULL, CUDA0, d, 2 * n);
	C->free(NULL, PINNED, p, n);
	C->free(NULL, PINNED, q, n);
#endif
}

/*
 * A gate's failure is its stream's, not its handle's: a caller's stream
 * failed by a gate and destroyed leaves nothing behind, and a new stream
 * that gets the same handle (the runtime double reuses it here) has events
 * that complete, and a failure of its own.
 */
ATF_TC_WITHOUT_HEAD(driver_gate_failure_ends_with_its_stream);
ATF_TC_BODY(driver_gate_failure_ends_with_its_stream, tc)
{
	need_sim();
#if RSD_CUDASIM
	const struct rsd_device_ops *C = rsd_cuda_driver();
	cudaStream_t s = NULL, t = NULL, spare[7];
	unsigned long long sid = 0, tid = 0;
	void *g, *e1, *e2;

	(void)links();
	/* Seven streams made before s and destroyed just before it fill
	 * glibc's per-thread caches of the sizes a stream allocates, so
	 * that s's memory, freed next, is what the next stream's calloc
	 * finds: the handle comes back, as the runtime's may. */
	for (int i = 0; i < 7; i++)
		OK(cudaStreamCreate(&spare[i]));
	OK(cudaStreamCreate(&s));
	OK(cudaStreamGetId(s, &sid));
	ATF_REQUIRE_EQ(C->gate_queue(NULL, s, &g), 0);
	ATF_REQUIRE_EQ(C->event_record(NULL, s, &e1), 0);
	C->gate_open(NULL, g, -RSD_EDEVICE);
	ATF_CHECK_EQ(C->event_sync(NULL, e1), -RSD_EDEVICE);
	C->event_destroy(NULL, e1);
	OK(cudaStreamSynchronize(s));
	for (int i = 0; i < 7; i++)
		OK(cudaStreamDestroy(spare[i]));
	OK(cudaStreamDestroy(s));
	OK(cudaStreamCreate(&t));
	if (t != s) {
		OK(cudaStreamDestroy(t));
		atf_tc_skip("the runtime double gave no stream the destroyed one's handle");
	}
	OK(cudaStreamGetId(t, &tid));
	ATF_CHECK(tid != sid);
	ATF_REQUIRE_EQ(C->event_record(NULL, t, &e2), 0);
	ATF_CHECK_EQ_MSG(C->event_sync(NULL, e2), 0, "%s", rsd_last_error()->message);
	ATF_CHECK_EQ(C->event_query(NULL, e2), 1);
	/* t's own failure is its own again. */
	ATF_REQUIRE_EQ(C->gate_queue(NULL, t, &g), 0);
	C->gate_open(NULL, g, -RSD_EINVAL);
	C->event_destroy(NULL, e2);
	ATF_REQUIRE_EQ(C->event_record(NULL, t, &e2), 0);
	ATF_CHECK_EQ(C->event_sync(NULL, e2), -RSD_EINVAL);
	C->event_destroy(NULL, e2);
	OK(cudaStreamSynchronize(t));
	OK(cudaStreamDestroy(t));
#endif
}

#if RSD_CUDASIM
/* A manager on the CUDA driver with staging chunks of chunk bytes, and a
 * pageable value of n bytes of pattern v adopted into it. */
static struct rsd_manager *staged_manager(uint64_t chunk, uint64_t n, int v, struct rsd_handle *h)
{
	struct rsd_manager_config mc = { .driver = rsd_cuda_driver(), .staging_nbytes = chunk };
	struct rsd_manager *m;
	struct rsd_resident *r;
	unsigned char *p;

	ATF_REQUIRE_EQ(rsd_manager_create(&mc, &m), 0);
	ATF_REQUIRE_EQ(rsd_resident_alloc(m, &rsd_resident_type, PAGEABLE, 1, &n, NULL, 0, &r), 0);
	p = rsd_resident_data(r, 0);
	for (uint64_t i = 0; i < n; i++)
		p[i] = (unsigned char)(i * 7 + v + (i >> 12));
	ATF_REQUIRE_EQ(rsd_adopt(m, r, NULL, RSD_REPLICABLE, h), 0);
	return m;
}

/* The value's bytes at where, through a lease (which waits for its copy). */
static void value_bytes_are(struct rsd_manager *m, struct rsd_handle h, struct rsd_location where,
			    uint64_t n, int v)
{
	const struct rsd_resident *r;
	const unsigned char *b;
	unsigned char *host = malloc((size_t)n);
	cudaStream_t s = NULL;
	struct rsd_lease *l;

	ATF_REQUIRE(host != NULL);
	if (where.kind == RSD_CUDA) {
		OK(cudaSetDevice(where.device));
		OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
		OK(cudaSetDevice(0));
	}
	ATF_REQUIRE_EQ_MSG(rsd_acquire(m, &h, 1, where, s, &l), 0, "%s", rsd_last_error()->message);
	ATF_REQUIRE_EQ(rsd_lease_value(l, h, &r), 0);
	b = rsd_resident_data(r, 0);
	if (s) {
		/* Behind the copy on the consumer stream, as a kernel. */
		OK(cudaMemcpyAsync(host, b, (size_t)n, cudaMemcpyDeviceToHost, s));
		OK(cudaStreamSynchronize(s));
		b = host;
	}
	for (uint64_t i = 0; i < n; i++)
		if (b[i] != (unsigned char)(i * 7 + v + (i >> 12)))
			atf_tc_fail("byte %llu differs", (unsigned long long)i);
	ATF_CHECK_EQ(rsd_lease_release(l, 0), 0);
	rsd_lease_free(l);
	if (s)
		OK(cudaStreamDestroy(s));
	free(host);
}
#endif

/*
 * Through a manager on the CUDA driver: a not-waiting ensure of a pageable
 * value queues the whole staged copy behind gates and returns; its host
 * time is far below the link model's time for the copy's DMAs (a caller
 * staging it would wait for all but the last two), and the copy is still
 * pending. The bytes arrive exact; back to pageable memory the same.
 */
ATF_TC_WITHOUT_HEAD(driver_async_pageable_returns_before_its_copy);
ATF_TC_BODY(driver_async_pageable_returns_before_its_copy, tc)
{
	need_sim();
#if RSD_CUDASIM
	const uint64_t chunk = 64 << 10, n = 16 * chunk + 99;
	struct rsd_simdev *sd = links();
	uint64_t model = rsd_simdev_copy_ns(sd, CUDA0, PINNED, n), t0, host;
	unsigned long gates0;
	struct rsd_manager *m;
	struct rsd_handle h;

	m = staged_manager(chunk, n, 17, &h);
	/* Warm: the pair and the device block exist. */
	ATF_REQUIRE_EQ(rsd_ensure(m, h, CUDA0, NULL, NULL), 0);
	ATF_REQUIRE_EQ(rsd_drop(m, h, CUDA0, NULL), 0);
	gates0 = rsd_cudasim_calls("cudaLaunchHostFunc");
	t0 = now_ns();
	ATF_REQUIRE_EQ_MSG(rsd_ensure_async(m, h, CUDA0, NULL, NULL), 0, "%s",
			   rsd_last_error()->message);
	host = now_ns() - t0;
	ATF_CHECK(rsd_simdev_pending_events(sd, NULL) > 0);
	ATF_CHECK_MSG(host < model / 4, "the call took %llu ns; the copy is modelled at %llu ns",
		      (unsigned long long)host, (unsigned long long)model);
	/* One gate per chunk: 17 chunks. */
	ATF_CHECK_EQ(rsd_cudasim_calls("cudaLaunchHostFunc") - gates0, 17);
	value_bytes_are(m, h, CUDA0, n, 17);
	ATF_REQUIRE_EQ(rsd_drop(m, h, PAGEABLE, NULL), 0);
	t0 = now_ns();
	ATF_REQUIRE_EQ_MSG(rsd_ensure_async(m, h, PAGEABLE, NULL, NULL), 0, "%s",
			   rsd_last_error()->message);
	host = now_ns() - t0;
	ATF_CHECK(rsd_simdev_pending_events(sd, NULL) > 0);
	ATF_CHECK_MSG(host < model / 4, "the call took %llu ns; the copy is modelled at %llu ns",
		      (unsigned long long)host, (unsigned long long)model);
	value_bytes_are(m, h, PAGEABLE, n, 17);
	ATF_CHECK_EQ(rsd_manager_close(m, 0), 0);
	rsd_manager_destroy(m);
#endif
}

/*
 * close(FORCE) while staged copies through the CUDA driver are in flight
 * both ways: close returns (every gate was opened: the staging workers
 * end only then), and nothing is left pending on the device.
 */
ATF_TC_WITHOUT_HEAD(driver_forced_close_mid_copy);
ATF_TC_BODY(driver_forced_close_mid_copy, tc)
{
	need_sim();
#if RSD_CUDASIM
	const uint64_t chunk = 64 << 10, n = 16 * chunk;
	struct rsd_simdev *sd = links();
	struct rsd_resident *r;
	struct rsd_manager *m;
	struct rsd_handle h, k;

	m = staged_manager(chunk, n, 5, &h);
	ATF_REQUIRE_EQ(rsd_resident_alloc(m, &rsd_resident_type, PAGEABLE, 1, &n, NULL, 0, &r), 0);
	memset(rsd_resident_data(r, 0), 0x2d, (size_t)n);
	ATF_REQUIRE_EQ(rsd_adopt(m, r, NULL, RSD_REPLICABLE, &k), 0);
	ATF_REQUIRE_EQ(rsd_ensure(m, k, CUDA0, NULL, NULL), 0);
	ATF_REQUIRE_EQ(rsd_drop(m, k, PAGEABLE, NULL), 0);
	ATF_REQUIRE_EQ(rsd_ensure_async(m, h, CUDA0, NULL, NULL), 0);
	ATF_REQUIRE_EQ(rsd_ensure_async(m, k, PAGEABLE, NULL, NULL), 0);
	ATF_CHECK(rsd_simdev_pending_events(sd, NULL) > 0);
	ATF_CHECK_EQ(rsd_manager_close(m, RSD_CLOSE_FORCE), 0);
	ATF_CHECK_EQ(rsd_simdev_pending_events(sd, NULL), 0);
	rsd_manager_destroy(m);
#endif
}

/*
 * cuda:0 is lost while a staged copy to it waits behind its gates: the
 * waiting ensure fails once with RSD_EDEVLOST (the worker's waits answer at
 * once, every gate is opened), no thread is left stuck, and the value
 * stays in pageable memory with its bytes.
 */
ATF_TC_WITHOUT_HEAD(driver_device_lost_mid_staged_copy);
ATF_TC_BODY(driver_device_lost_mid_staged_copy, tc)
{
	need_sim();
#if RSD_CUDASIM
	const uint64_t chunk = 64 << 10, n = 16 * chunk;
	struct rsd_manager *m;
	struct rsd_handle h;

	(void)links();
	m = staged_manager(chunk, n, 9, &h);
	ATF_REQUIRE_EQ(rsd_ensure_async(m, h, CUDA0, NULL, NULL), 0);
	OK(rsd_cudasim_lose_device(0, cudaErrorIllegalAddress));
	ATF_CHECK_EQ(rsd_ensure(m, h, CUDA0, NULL, NULL), -RSD_EDEVLOST);
	value_bytes_are(m, h, PAGEABLE, n, 9);
	ATF_CHECK_EQ(rsd_manager_close(m, RSD_CLOSE_FORCE), 0);
	rsd_manager_destroy(m);
#endif
}

/*
 * cuda:0 is lost while its staging worker is held in the middle of a
 * staged copy, about to read the pageable source (tests/stall.h); then the
 * caller discards the value. The CUDA driver answers the copy's event with
 * RSD_EDEVLOST at once, but the source is freed only after the worker
 * opened the chunk's gate (under ASan the worker's read would otherwise be
 * a use after free), and the discard after the copy's failure succeeds.
 */
ATF_TC_WITHOUT_HEAD(driver_device_lost_source_freed_after_worker);
ATF_TC_BODY(driver_device_lost_source_freed_after_worker, tc)
{
	need_sim();
#if RSD_CUDASIM
	const uint64_t chunk = 64 << 10, n = 9 * chunk + 5;
	static struct rsd_device_ops ops;
	struct rsd_manager_config mc = { .driver = &ops, .staging_nbytes = chunk };
	struct rsd_buffer_view v;
	struct rsd_manager *m;
	struct rsd_resident *r;
	struct rsd_handle h;
	char *src = malloc(n);

	(void)links();
	ATF_REQUIRE(src != NULL);
	memset(src, 0x3c, (size_t)n);
	ops = *rsd_cuda_driver();
	stall_wrap(&ops, rsd_cuda_driver());
	ATF_REQUIRE_EQ(rsd_manager_create(&mc, &m), 0);
	v = (struct rsd_buffer_view){ src, n, src, n, PAGEABLE };
	ATF_REQUIRE_EQ(
		rsd_resident_wrap(&rsd_resident_type, 1, &v, NULL, 0, stall_release, src, &r), 0);
	ATF_REQUIRE_EQ(rsd_adopt(m, r, &PAGEABLE, RSD_REPLICABLE, &h), 0);
	stall_arm();
	ATF_REQUIRE_EQ(rsd_ensure_async(m, h, CUDA0, NULL, NULL), 0);
	stall_wait_held();
	OK(rsd_cudasim_lose_device(0, cudaErrorIllegalAddress));
	ATF_CHECK_EQ(rsd_discard(m, h, NULL), -RSD_EDEVLOST);
	ATF_CHECK_EQ(rsd_discard(m, h, NULL), 0);
	ATF_CHECK_EQ(atomic_load(&stall.releases), 1);
	ATF_CHECK_EQ_MSG(atomic_load(&stall.freed_in_use), 0,
			 "the source was freed while the staging worker could still read it");
	ATF_CHECK(!atomic_load(&stall.armed));
	ATF_CHECK_EQ(rsd_manager_close(m, 0), 0);
	rsd_manager_destroy(m);
#endif
}

/*
 * The DMA of one chunk fails on the device, either way: the worker's wait
 * for that buffer gives no answer, it opens the next gates as failed, and
 * the waiting ensure fails once with the device's code; the value stays
 * where it was with its bytes.
 */
ATF_TC_WITHOUT_HEAD(driver_chunk_failure_fails_the_copy_once);
ATF_TC_BODY(driver_chunk_failure_fails_the_copy_once, tc)
{
	need_sim();
#if RSD_CUDASIM
	const uint64_t chunk = 64 << 10, n = 7 * chunk + 5;
	struct rsd_simdev *sd = links();

	for (int out = 0; out < 2; out++) {
		/* A failed copy leaves its stream failed: each way on its own
		 * device. */
		struct rsd_location dev = out ? CUDA1 : CUDA0;
		struct rsd_location to = out ? PAGEABLE : dev, from = out ? dev : PAGEABLE;
		struct rsd_manager *m;
		struct rsd_handle h;
		int rc;

		m = staged_manager(chunk, n, 23 + out, &h);
		if (out) {
			ATF_REQUIRE_EQ(rsd_ensure(m, h, dev, NULL, NULL), 0);
			ATF_REQUIRE_EQ(rsd_drop(m, h, PAGEABLE, NULL), 0);
		}
		rsd_simdev_fail_nth(sd, RSD_SIMDEV_COPY_EXEC, 3, RSD_EDEVICE);
		rc = rsd_ensure(m, h, to, NULL, NULL);
		ATF_CHECK_MSG(rc == -RSD_EDEVICE, "%s ensure: %d (%s)", out ? "out" : "in", rc,
			      rsd_last_error()->message);
		ATF_CHECK_EQ(rsd_simdev_pending_events(sd, NULL), 0);
		value_bytes_are(m, h, from, n, 23 + out);
		ATF_CHECK_EQ(rsd_manager_close(m, RSD_CLOSE_FORCE), 0);
		rsd_manager_destroy(m);
	}
#endif
}

#if RSD_CUDASIM
/* Threads ensuring one value to cuda:0 together; each takes its slot. */
struct waiters {
	struct rsd_manager *m;
	struct rsd_handle h;
	pthread_barrier_t start;
	atomic_int next;
	int rc[4];
};

static void *waiter_main(void *p)
{
	struct waiters *w = p;
	int i = atomic_fetch_add(&w->next, 1);

	pthread_barrier_wait(&w->start);
	w->rc[i] = rsd_ensure(w->m, w->h, CUDA0, NULL, NULL);
	return NULL;
}
#endif

/* Four threads ensure one pageable value to cuda:0 at once through the
 * CUDA driver: each returns 0 once it is there, it is staged once (a gate
 * per chunk, 9 chunks), and the bytes are exact. */
ATF_TC_WITHOUT_HEAD(driver_several_waiters_one_staged_copy);
ATF_TC_BODY(driver_several_waiters_one_staged_copy, tc)
{
	need_sim();
#if RSD_CUDASIM
	const uint64_t chunk = 64 << 10, n = 8 * chunk + 1;
	struct waiters w = { .next = 0 };
	unsigned long gates0;
	struct rsd_manager *m;
	pthread_t t[4];

	(void)links();
	m = staged_manager(chunk, n, 31, &w.h);
	w.m = m;
	gates0 = rsd_cudasim_calls("cudaLaunchHostFunc");
	ATF_REQUIRE_EQ(pthread_barrier_init(&w.start, NULL, 4), 0);
	for (int i = 0; i < 4; i++)
		ATF_REQUIRE_EQ(pthread_create(&t[i], NULL, waiter_main, &w), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < 4; i++)
		ATF_CHECK_EQ_MSG(w.rc[i], 0, "thread %d: %d", i, w.rc[i]);
	pthread_barrier_destroy(&w.start);
	ATF_CHECK_EQ(rsd_cudasim_calls("cudaLaunchHostFunc") - gates0, 9);
	value_bytes_are(m, w.h, CUDA0, n, 31);
	ATF_CHECK_EQ(rsd_manager_close(m, 0), 0);
	rsd_manager_destroy(m);
#endif
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, peer_copies_bounce_until_peer_access);
	ATF_TP_ADD_TC(tp, no_peer_access_node);
	ATF_TP_ADD_TC(tp, stream_wait_event_orders_without_blocking_the_host);
	ATF_TP_ADD_TC(tp, allocations_are_counted_and_timed);
	ATF_TP_ADD_TC(tp, pageable_copies_hold_at_the_pageable_rate);
	ATF_TP_ADD_TC(tp, driver_reuses_oversize_blocks);
	ATF_TP_ADD_TC(tp, driver_transfer_streams_peer_access_and_waits);
	ATF_TP_ADD_TC(tp, held_host_function_holds_its_stream_only);
	ATF_TP_ADD_TC(tp, driver_gates_hold_and_fail_their_stream);
	ATF_TP_ADD_TC(tp, driver_gate_failure_ends_with_its_stream);
	ATF_TP_ADD_TC(tp, driver_async_pageable_returns_before_its_copy);
	ATF_TP_ADD_TC(tp, driver_forced_close_mid_copy);
	ATF_TP_ADD_TC(tp, driver_device_lost_mid_staged_copy);
	ATF_TP_ADD_TC(tp, driver_device_lost_source_freed_after_worker);
	ATF_TP_ADD_TC(tp, driver_chunk_failure_fails_the_copy_once);
	ATF_TP_ADD_TC(tp, driver_several_waiters_one_staged_copy);
	return atf_no_error();
}
