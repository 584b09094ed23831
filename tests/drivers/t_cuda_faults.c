// SPDX-License-Identifier: MIT
/*
 * The CUDA runtime driver (lib/drivers/cuda.c) where only the CUDA runtime
 * double can take it: runtime failures injected into each call it makes,
 * device switching with the caller's device restored, per-device event
 * pools, its pinned-memory check, device memory running out, and a
 * corrupted (sticky-error) context. Each case runs in a fresh process, so
 * the driver's one-time start-up runs in each.
 *
 * Without the double (CUDA=0, or CUDA=1 on a real runtime) every case
 * skips: none of this can be provoked on a real GPU on demand.
 */
#include <atf-c.h>
#include "../check.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rsd/rsd.h>

#ifndef RSD_CUDASIM
#define RSD_CUDASIM 0
#endif

#if RSD_CUDASIM
#include "../cudasim/cudasim.h"

static const struct rsd_device_ops *C;

static struct rsd_location cuda(int d)
{
	struct rsd_location l = { RSD_CUDA, d };

	return l;
}

static bool msg_has(const char *s)
{
	return strstr(rsd_last_error()->message, s) != NULL;
}

#define CHECK_MSG(s) \
	ATF_CHECK_MSG(msg_has(s), "message lacks '%s': %s", s, rsd_last_error()->message)

static void need_sim(void)
{
	C = rsd_cuda_driver();
}

/* The device a pointer is on, by the runtime's account. */
static int device_of(const void *p)
{
	struct cudaPointerAttributes a;

	ATF_REQUIRE_EQ(cudaPointerGetAttributes(&a, p), cudaSuccess);
	ATF_REQUIRE_EQ(a.type, cudaMemoryTypeDevice);
	return a.device;
}

static int current(void)
{
	int d = -1;

	ATF_REQUIRE_EQ(cudaGetDevice(&d), cudaSuccess);
	return d;
}
#else
static void need_sim(void)
{
	atf_tc_skip("needs the CUDA runtime double: make check CUDA=sim");
}
#endif

ATF_TC_WITHOUT_HEAD(pinned_alloc_as_first_call);
ATF_TC_BODY(pinned_alloc_as_first_call, tc)
{
	need_sim();
#if RSD_CUDASIM
	void *p = NULL;

	/* Nothing asked for the device count first: the driver's start-up
	 * must still have run before its pinned pool is used. */
	ATF_REQUIRE_EQ(C->alloc(NULL, RSD_LOC_PINNED_HOST, 4096, &p), 0);
	ATF_CHECK(p != NULL);
	memset(p, 1, 4096);
	C->free(NULL, RSD_LOC_PINNED_HOST, p, 4096);
#endif
}

ATF_TC_WITHOUT_HEAD(pinned_check_refuses_pageable);
ATF_TC_BODY(pinned_check_refuses_pageable, tc)
{
	need_sim();
#if RSD_CUDASIM
	struct rsd_manager_config cfg = { 0 };
	struct rsd_resident *r = (struct rsd_resident *)1;
	struct rsd_manager *m;
	struct rsd_handle h;
	struct rsd_location at = RSD_LOC_PAGEABLE_HOST;
	struct rsd_snapshot *s;
	unsigned long ha, fh;
	uint64_t n = 4096, v;
	void *p = (void *)1;

	ATF_REQUIRE_EQ(C->device_count(NULL), 2);
	rsd_cudasim_set_unpinned_host(true);
	ha = rsd_cudasim_calls("cudaHostRegister");
	fh = rsd_cudasim_calls("cudaHostUnregister");
	ATF_CHECK_EQ(C->alloc(NULL, RSD_LOC_PINNED_HOST, 4096, &p), -RSD_EDEVICE);
	CHECK_MSG("pinned host storage is unavailable: ");
	CHECK_MSG("not page-locked");
	ATF_CHECK_EQ(p, (void *)1);
	/* Each block the runtime handed out (a chunk, then one of the
	 * request's own size) was checked and given back. */
	ATF_CHECK_EQ(rsd_cudasim_calls("cudaHostRegister"), ha + 2);
	ATF_CHECK_EQ(rsd_cudasim_calls("cudaHostUnregister"), fh + 2);
	ATF_CHECK_EQ(rsd_cudasim_calls("cudaHostAlloc"), 0);
	ATF_CHECK(rsd_cudasim_calls("cudaPointerGetAttributes") >= 1);

	/* Through a manager: the allocation and the transition fail with
	 * nothing returned and nothing changed. */
	cfg.driver = C;
	RSD_REQUIRE_OK(rsd_manager_create(&cfg, &m));
	v = rsd_manager_state_version(m);
	RSD_CHECK_ERR(RSD_EDEVICE, rsd_resident_alloc(m, &rsd_resident_type, RSD_LOC_PINNED_HOST, 1,
						      &n, NULL, 0, &r));
	CHECK_MSG("pinned host storage is unavailable");
	ATF_CHECK_EQ(r, (struct rsd_resident *)1);
	r = NULL;
	RSD_REQUIRE_OK(rsd_resident_alloc(m, &rsd_resident_type, at, 1, &n, NULL, 0, &r));
	RSD_REQUIRE_OK(rsd_adopt(m, r, &at, RSD_REPLICABLE, &h));
	v = rsd_manager_state_version(m);
	RSD_CHECK_ERR(RSD_EDEVICE, rsd_ensure(m, h, RSD_LOC_PINNED_HOST, NULL, NULL));
	CHECK_MSG("pinned host storage is unavailable");
	ATF_CHECK_EQ(rsd_manager_state_version(m), v);
	RSD_REQUIRE_OK(rsd_snapshot_take(m, &s));
	ATF_CHECK_EQ(s->state_version, v);
	rsd_snapshot_free(s);

	/* Real pinned memory again: both work. */
	rsd_cudasim_set_unpinned_host(false);
	RSD_CHECK_OK(rsd_ensure(m, h, RSD_LOC_PINNED_HOST, NULL, NULL));
	ATF_CHECK(rsd_manager_state_version(m) > v);
	rsd_manager_destroy(m);
#endif
}

ATF_TC_WITHOUT_HEAD(device_switching_restores_the_caller);
ATF_TC_BODY(device_switching_restores_the_caller, tc)
{
	need_sim();
#if RSD_CUDASIM
	void *d0, *d1, *s0, *s1, *e0, *e1, *e2;
	int dev = -1;

	ATF_REQUIRE_EQ(C->device_count(NULL), 2);
	ATF_REQUIRE_EQ(C->alloc(NULL, cuda(1), 1 << 20, &d1), 0);
	ATF_CHECK_EQ(device_of(d1), 1);
	ATF_CHECK_EQ(current(), 0);
	ATF_REQUIRE_EQ(cudaSetDevice(1), cudaSuccess);
	ATF_REQUIRE_EQ(C->alloc(NULL, cuda(0), 1 << 20, &d0), 0);
	ATF_CHECK_EQ(device_of(d0), 0);
	ATF_CHECK_EQ(current(), 1);

	/* Transfer streams and events are made on their own device whatever
	 * the caller's is; a pooled event never moves to another device. */
	s0 = C->default_stream(NULL, 0);
	ATF_REQUIRE(s0 != NULL);
	ATF_CHECK_EQ(current(), 1);
	ATF_REQUIRE_EQ(C->stream_device(NULL, s0, &dev), 0);
	ATF_CHECK_EQ(dev, 0);
	ATF_REQUIRE_EQ(cudaSetDevice(0), cudaSuccess);
	s1 = C->default_stream(NULL, 1);
	ATF_REQUIRE(s1 != NULL);
	ATF_REQUIRE_EQ(C->stream_device(NULL, s1, &dev), 0);
	ATF_CHECK_EQ(dev, 1);
	ATF_REQUIRE_EQ(C->event_record(NULL, s1, &e1), 0);
	ATF_CHECK_EQ(current(), 0);
	ATF_REQUIRE_EQ(C->event_sync(NULL, e1), 0);
	C->event_destroy(NULL, e1);
	ATF_REQUIRE_EQ(C->event_record(NULL, s0, &e0), 0);
	ATF_CHECK(e0 != e1);
	ATF_REQUIRE_EQ(C->event_record(NULL, s1, &e2), 0);
	ATF_CHECK_EQ(e2, e1);
	ATF_REQUIRE_EQ(C->event_sync(NULL, e0), 0);
	ATF_REQUIRE_EQ(C->event_sync(NULL, e2), 0);
	C->event_destroy(NULL, e0);
	C->event_destroy(NULL, e2);

	/* A peer copy on the caller's stream of the source's device. */
	ATF_REQUIRE_EQ(C->copy(NULL, d0, cuda(0), d1, cuda(1), 1 << 20, s1), 0);
	ATF_REQUIRE_EQ(C->stream_sync(NULL, s1), 0);
	ATF_CHECK_EQ(C->device_sync(NULL, 1), 0);
	ATF_CHECK_EQ(current(), 0);
	C->free(NULL, cuda(0), d0, 1 << 20);
	C->free(NULL, cuda(1), d1, 1 << 20);
#endif
}

ATF_TC_WITHOUT_HEAD(runtime_failures_are_reported_and_cleared);
ATF_TC_BODY(runtime_failures_are_reported_and_cleared, tc)
{
	need_sim();
#if RSD_CUDASIM
	void *p = (void *)1, *s, *ev = (void *)1, *ev2;
	char host[64] = { 0 };
	int dev = -1;

	ATF_REQUIRE_EQ(C->device_count(NULL), 2);
	/* cudaMalloc out of memory: an allocation failure (a request above
	 * the chunk size, so the pool makes one cudaMalloc and no retry). */
	ATF_REQUIRE_EQ(rsd_cudasim_fail("cudaMalloc", 1, cudaErrorMemoryAllocation), cudaSuccess);
	ATF_CHECK_EQ(C->alloc(NULL, cuda(0), 65 << 20, &p), -RSD_ENOMEM);
	CHECK_MSG("cudaMalloc(68157440) on cuda:0 failed");
	CHECK_MSG("cudaErrorMemoryAllocation");
	ATF_CHECK_EQ(p, (void *)1);
	/* The driver does not leave its failure as the caller's last error. */
	ATF_CHECK_EQ(cudaPeekAtLastError(), cudaSuccess);
	ATF_REQUIRE_EQ(C->alloc(NULL, cuda(0), 4096, &p), 0);

	/* cudaSetDevice fails: nothing allocated on the wrong device. */
	ATF_REQUIRE_EQ(rsd_cudasim_fail("cudaSetDevice", 1, cudaErrorInvalidDevice), cudaSuccess);
	ATF_CHECK_EQ(C->alloc(NULL, cuda(1), 64 << 20, &s), -RSD_EDEVICE);
	CHECK_MSG("cudaSetDevice");
	ATF_CHECK_EQ(rsd_cudasim_calls("cudaMalloc"), 2);

	/* The transfer stream cannot be made: no stream, and a later call
	 * makes it. */
	ATF_REQUIRE_EQ(rsd_cudasim_fail("cudaStreamCreateWithFlags", 1, cudaErrorUnknown),
		       cudaSuccess);
	ATF_CHECK_EQ(C->copy(NULL, p, cuda(0), host, RSD_LOC_PAGEABLE_HOST, 64, NULL),
		     -RSD_EDEVICE);
	CHECK_MSG("cudaStreamCreateWithFlags");
	s = C->default_stream(NULL, 0);
	ATF_REQUIRE(s != NULL);
	ATF_REQUIRE_EQ(C->stream_device(NULL, s, &dev), 0);
	ATF_CHECK_EQ(dev, 0);

	/* Events: a failed create hands out nothing; a failed record gives
	 * its event back to the pool. */
	ATF_REQUIRE_EQ(rsd_cudasim_fail("cudaEventCreateWithFlags", 1, cudaErrorMemoryAllocation),
		       cudaSuccess);
	ATF_CHECK_EQ(C->event_record(NULL, s, &ev), -RSD_ENOMEM);
	CHECK_MSG("cudaEventCreateWithFlags");
	ATF_CHECK_EQ(ev, NULL);
	ATF_REQUIRE_EQ(C->event_record(NULL, s, &ev), 0);
	ATF_REQUIRE_EQ(C->event_sync(NULL, ev), 0);
	C->event_destroy(NULL, ev);
	ATF_REQUIRE_EQ(rsd_cudasim_fail("cudaEventRecord", 1, cudaErrorInvalidResourceHandle),
		       cudaSuccess);
	ev2 = (void *)1;
	ATF_CHECK_EQ(C->event_record(NULL, s, &ev2), -RSD_EDEVICE);
	CHECK_MSG("cudaEventRecord");
	ATF_CHECK_EQ(ev2, NULL);
	ATF_REQUIRE_EQ(C->event_record(NULL, s, &ev2), 0);
	ATF_CHECK_EQ(ev2, ev);
	ATF_CHECK_EQ(C->event_query(NULL, ev2) >= 0, true);
	ATF_REQUIRE_EQ(rsd_cudasim_fail("cudaEventQuery", 1, cudaErrorUnknown), cudaSuccess);
	ATF_CHECK_EQ(C->event_query(NULL, ev2), -RSD_EDEVICE);
	ATF_REQUIRE_EQ(rsd_cudasim_fail("cudaEventSynchronize", 1, cudaErrorUnknown), cudaSuccess);
	ATF_CHECK_EQ(C->event_sync(NULL, ev2), -RSD_EDEVICE);
	ATF_REQUIRE_EQ(C->event_sync(NULL, ev2), 0);
	C->event_destroy(NULL, ev2);

	/* A copy and a sync that fail. */
	ATF_REQUIRE_EQ(rsd_cudasim_fail("cudaMemcpyAsync", 1, cudaErrorInvalidValue), cudaSuccess);
	ATF_CHECK_EQ(C->copy(NULL, p, cuda(0), host, RSD_LOC_PAGEABLE_HOST, 64, s), -RSD_EDEVICE);
	CHECK_MSG("cudaMemcpyAsync");
	ATF_REQUIRE_EQ(rsd_cudasim_fail("cudaStreamSynchronize", 1, cudaErrorUnknown), cudaSuccess);
	ATF_CHECK_EQ(C->stream_sync(NULL, NULL), -RSD_EDEVICE);
	ATF_CHECK_EQ(C->stream_sync(NULL, NULL), 0);
	ATF_CHECK_EQ(cudaPeekAtLastError(), cudaSuccess);
	C->free(NULL, cuda(0), p, 4096);
#endif
}

ATF_TC_WITHOUT_HEAD(device_memory_runs_out);
ATF_TC_BODY(device_memory_runs_out, tc)
{
	need_sim();
#if RSD_CUDASIM
	uint64_t al = 0, re = 0;
	void *a, *b = (void *)1;

	ATF_REQUIRE_EQ(rsd_cudasim_configure(1, 96ull << 20), cudaSuccess);
	ATF_REQUIRE_EQ(C->device_count(NULL), 1);
	/* One 64 MiB chunk fits; a second does not. */
	ATF_REQUIRE_EQ(C->alloc(NULL, cuda(0), 40 << 20, &a), 0);
	ATF_CHECK_EQ(C->alloc(NULL, cuda(0), 40 << 20, &b), -RSD_ENOMEM);
	CHECK_MSG("cuda:0");
	ATF_CHECK_EQ(b, (void *)1);
	ATF_REQUIRE_EQ(C->metrics(NULL, 0, &al, &re), 0);
	ATF_CHECK_EQ(al, 40 << 20);
	ATF_CHECK_EQ(re, 64 << 20);
	C->free(NULL, cuda(0), a, 40 << 20);
	ATF_CHECK_EQ(C->alloc(NULL, cuda(1), 16, &b), -RSD_EINVAL);
#endif
}

ATF_TC_WITHOUT_HEAD(sticky_error_poisons_every_later_call);
ATF_TC_BODY(sticky_error_poisons_every_later_call, tc)
{
	need_sim();
#if RSD_CUDASIM
	char host[64] = { 0 };
	void *p, *s;

	ATF_REQUIRE_EQ(C->device_count(NULL), 2);
	ATF_REQUIRE_EQ(C->alloc(NULL, cuda(0), 4096, &p), 0);
	s = C->default_stream(NULL, 0);
	ATF_REQUIRE(s != NULL);
	ATF_REQUIRE_EQ(rsd_cudasim_fail("cudaMemcpyAsync", 1, cudaErrorIllegalAddress),
		       cudaSuccess);
	ATF_CHECK_EQ(C->copy(NULL, p, cuda(0), host, RSD_LOC_PAGEABLE_HOST, 64, s), -RSD_EDEVLOST);
	CHECK_MSG("illegal memory access");
	/* The injected error corrupts the process's one context: the driver
	 * asks each device's and finds both dead. */
	CHECK_MSG("lost cuda:0, cuda:1");
	ATF_CHECK(C->device_lost(NULL, 0));
	ATF_CHECK(C->device_lost(NULL, 1));
	/* Everything after fails too, each reported, without asking the
	 * runtime where the driver knows the device. */
	ATF_CHECK_EQ(C->stream_sync(NULL, s), -RSD_EDEVLOST);
	CHECK_MSG("cudaErrorIllegalAddress");
	ATF_CHECK_EQ(C->alloc(NULL, cuda(1), 64 << 20, &p), -RSD_EDEVLOST);
	CHECK_MSG("cuda:1 was lost");
	ATF_CHECK_EQ(cudaGetLastError(), cudaErrorIllegalAddress);
#endif
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, pinned_alloc_as_first_call);
	ATF_TP_ADD_TC(tp, pinned_check_refuses_pageable);
	ATF_TP_ADD_TC(tp, device_switching_restores_the_caller);
	ATF_TP_ADD_TC(tp, runtime_failures_are_reported_and_cleared);
	ATF_TP_ADD_TC(tp, device_memory_runs_out);
	ATF_TP_ADD_TC(tp, sticky_error_poisons_every_later_call);
	return atf_no_error();
}
