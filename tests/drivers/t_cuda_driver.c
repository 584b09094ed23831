// SPDX-License-Identifier: MIT
/*
 * The CUDA runtime driver. Without a usable GPU (or without CUDA at build
 * time) it must report zero devices and refuse cleanly, never crash; with a
 * GPU, memory, copies, streams and pooled events work and the pools stop
 * calling cudaMalloc once warm, and a manager stages copies between
 * pageable memory and a device.
 */
#include <atf-c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rsd/rsd.h>

#ifndef RSD_CUDASIM
#define RSD_CUDASIM 0
#endif
#if RSD_CUDASIM
#include "../cudasim/cudasim.h"
#endif

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

/* Skip unless n CUDA devices are usable, quoting why they are not. */
static void need_devices(int n)
{
	void *p = NULL;

	C = rsd_cuda_driver();
	ATF_REQUIRE(C != NULL);
	if (C->device_count(NULL) >= n)
		return;
	if (C->device_count(NULL) == 0 && C->alloc(NULL, cuda(0), 1, &p) < 0)
		atf_tc_skip("no CUDA device: %s", rsd_last_error()->message);
	atf_tc_skip("needs %d CUDA devices, %d present", n, C->device_count(NULL));
}

ATF_TC_WITHOUT_HEAD(no_device_fails_cleanly);
ATF_TC_BODY(no_device_fails_cleanly, tc)
{
	char a[16] = "fifteen chars..", b[16];
	uint64_t al = 7, re = 7;
	void *p = NULL, *ev = NULL;
	int x, dev = -5, rc;

#if RSD_CUDASIM
	/* On the CUDA runtime double: a machine whose runtime sees no GPU. */
	ATF_REQUIRE_EQ(rsd_cudasim_configure(0, 0), cudaSuccess);
#endif
	C = rsd_cuda_driver();
	ATF_REQUIRE(C != NULL);
	ATF_CHECK_STREQ(C->name, "cuda");
	if (C->device_count(NULL) > 0)
		atf_tc_skip("a CUDA device is present: the gpu_* cases cover it");
	ATF_CHECK_EQ(C->device_count(NULL), 0);
	rc = C->alloc(NULL, cuda(0), 1024, &p);
	ATF_CHECK_MSG(rc == -RSD_EDEVICE || rc == -RSD_EINVAL, "alloc at cuda:0 returned %d", rc);
	ATF_CHECK_EQ(rsd_last_error()->code, -rc);
	ATF_CHECK_EQ(p, NULL);
	if (rsd_cuda_built())
		ATF_CHECK_MSG(msg_has("cuda:0 is not available"), "message: %s",
			      rsd_last_error()->message);
	else
		ATF_CHECK(msg_has("built without CUDA"));
	ATF_CHECK(C->metrics(NULL, 0, &al, &re) < 0);
	ATF_CHECK_EQ(al, 7);
	ATF_CHECK_EQ(C->default_stream(NULL, 0), NULL);
	ATF_CHECK(C->device_sync(NULL, 0) < 0);
	rc = C->stream_device(NULL, &x, &dev);
	ATF_CHECK(rc == -RSD_ETYPE || rc == -RSD_EDEVICE);
	ATF_CHECK_EQ(dev, -5);
	ATF_CHECK(C->event_record(NULL, &x, &ev) < 0);
	ATF_CHECK_EQ(ev, NULL);
	ATF_CHECK(C->copy(NULL, b, cuda(0), a, RSD_LOC_PAGEABLE_HOST, 16, NULL) < 0);
	/* Pinned memory needs the CUDA driver too: refused, or served. */
	rc = C->alloc(NULL, RSD_LOC_PINNED_HOST, 4096, &p);
	ATF_CHECK_MSG(rc == 0 || rc == -RSD_EDEVICE, "pinned alloc returned %d", rc);
	if (rc == 0)
		C->free(NULL, RSD_LOC_PINNED_HOST, p, 4096);
	else
		ATF_CHECK(msg_has("cudaHostRegister") || msg_has("built without CUDA"));
	if (rsd_cuda_built()) {
		/* Host to host needs no GPU: a plain copy. */
		ATF_REQUIRE_EQ(C->copy(NULL, b, RSD_LOC_PAGEABLE_HOST, a, RSD_LOC_PAGEABLE_HOST, 16,
				       NULL),
			       0);
		ATF_CHECK_EQ(memcmp(a, b, 16), 0);
	}
}

ATF_TC_WITHOUT_HEAD(not_built_refuses_everything);
ATF_TC_BODY(not_built_refuses_everything, tc)
{
	uint64_t al, re;
	void *p = (void *)1, *ev = (void *)1;
	int x, dev;

	if (rsd_cuda_built())
		atf_tc_skip("librsd was built with CUDA");
	C = rsd_cuda_driver();
	ATF_CHECK_EQ(C->device_count(NULL), 0);
	ATF_CHECK_EQ(C->alloc(NULL, RSD_LOC_PINNED_HOST, 16, &p), -RSD_EDEVICE);
	ATF_CHECK(msg_has("librsd was built without CUDA"));
	ATF_CHECK_EQ(p, NULL);
	ATF_CHECK_EQ(C->copy(NULL, &x, RSD_LOC_PAGEABLE_HOST, &dev, RSD_LOC_PAGEABLE_HOST,
			     sizeof(int), NULL),
		     -RSD_EDEVICE);
	ATF_CHECK_EQ(C->stream_device(NULL, &x, &dev), -RSD_EDEVICE);
	ATF_CHECK_EQ(C->stream_sync(NULL, NULL), -RSD_EDEVICE);
	ATF_CHECK_EQ(C->device_sync(NULL, 0), -RSD_EDEVICE);
	ATF_CHECK_EQ(C->event_record(NULL, &x, &ev), -RSD_EDEVICE);
	ATF_CHECK_EQ(ev, NULL);
	ATF_CHECK_EQ(C->event_query(NULL, &x), -RSD_EDEVICE);
	ATF_CHECK_EQ(C->event_sync(NULL, &x), -RSD_EDEVICE);
	ATF_CHECK_EQ(C->metrics(NULL, 0, &al, &re), -RSD_EDEVICE);
	C->free(NULL, RSD_LOC_PINNED_HOST, &x, 4);
	C->event_destroy(NULL, &x);
}

ATF_TC_WITHOUT_HEAD(gpu_roundtrip_and_pool_reuse);
ATF_TC_BODY(gpu_roundtrip_and_pool_reuse, tc)
{
	const uint64_t n = 3 << 20;
	unsigned char *pin, *back;
	uint64_t a0, r0, a1, r1;
	void *dev, *dev2, *s, *ev;

	need_devices(1);
	ATF_REQUIRE_EQ(C->alloc(NULL, RSD_LOC_PINNED_HOST, n, (void **)&pin), 0);
	ATF_REQUIRE_EQ(C->alloc(NULL, RSD_LOC_PINNED_HOST, n, (void **)&back), 0);
	for (uint64_t i = 0; i < n; i++)
		pin[i] = (unsigned char)(i * 7);
	memset(back, 0, n);
	ATF_REQUIRE_EQ(C->alloc(NULL, cuda(0), n, &dev), 0);
	ATF_REQUIRE_EQ(C->metrics(NULL, 0, &a0, &r0), 0);
	ATF_CHECK_EQ(a0, n);
	ATF_CHECK(r0 >= n);
	ATF_REQUIRE_EQ(C->copy(NULL, dev, cuda(0), pin, RSD_LOC_PINNED_HOST, n, NULL), 0);
	s = C->default_stream(NULL, 0);
	ATF_REQUIRE(s != NULL);
	ATF_REQUIRE_EQ(C->copy(NULL, back, RSD_LOC_PINNED_HOST, dev, cuda(0), n, s), 0);
	ATF_REQUIRE_EQ(C->event_record(NULL, s, &ev), 0);
	ATF_REQUIRE_EQ(C->event_sync(NULL, ev), 0);
	ATF_CHECK_EQ(C->event_query(NULL, ev), 1);
	ATF_CHECK_EQ(memcmp(pin, back, n), 0);
	C->event_destroy(NULL, ev);
	/* Warm: the same size comes back from the pool, nothing new reserved. */
	C->free(NULL, cuda(0), dev, n);
	ATF_REQUIRE_EQ(C->alloc(NULL, cuda(0), n, &dev2), 0);
	ATF_CHECK_EQ(dev2, dev);
	ATF_REQUIRE_EQ(C->metrics(NULL, 0, &a1, &r1), 0);
	ATF_CHECK_EQ(a1, n);
	ATF_CHECK_EQ(r1, r0);
	C->free(NULL, cuda(0), dev2, n);
	C->free(NULL, RSD_LOC_PINNED_HOST, pin, n);
	C->free(NULL, RSD_LOC_PINNED_HOST, back, n);
	ATF_CHECK_EQ(C->stream_sync(NULL, NULL), 0);
	ATF_CHECK_EQ(C->device_sync(NULL, 0), 0);
	ATF_CHECK_EQ(C->alloc(NULL, cuda(C->device_count(NULL)), 1, &dev), -RSD_EINVAL);
}

ATF_TC_WITHOUT_HEAD(gpu_streams_and_events);
ATF_TC_BODY(gpu_streams_and_events, tc)
{
	void *s, *e1, *e2;
	int dev = -1;

	need_devices(1);
	s = C->default_stream(NULL, 0);
	ATF_REQUIRE(s != NULL);
	ATF_CHECK_EQ(C->default_stream(NULL, 0), s);
	ATF_REQUIRE_EQ(C->stream_device(NULL, s, &dev), 0);
	ATF_CHECK_EQ(dev, 0);
	ATF_REQUIRE_EQ(C->event_record(NULL, s, &e1), 0);
	ATF_REQUIRE_EQ(C->stream_sync(NULL, s), 0);
	ATF_CHECK_EQ(C->event_query(NULL, e1), 1);
	C->event_destroy(NULL, e1);
	ATF_CHECK_EQ(C->event_query(NULL, e1), -RSD_ETYPE);
	/* Events are pooled: the destroyed one is reused. */
	ATF_REQUIRE_EQ(C->event_record(NULL, s, &e2), 0);
	ATF_CHECK_EQ(e2, e1);
	ATF_REQUIRE_EQ(C->event_sync(NULL, e2), 0);
	C->event_destroy(NULL, e2);
}

ATF_TC_WITHOUT_HEAD(gpu_peer_copy);
ATF_TC_BODY(gpu_peer_copy, tc)
{
	const uint64_t n = 1 << 20;
	unsigned char *pin;
	void *d0, *d1;

	need_devices(2);
	ATF_REQUIRE_EQ(C->alloc(NULL, RSD_LOC_PINNED_HOST, n, (void **)&pin), 0);
	memset(pin, 0x3c, n);
	ATF_REQUIRE_EQ(C->alloc(NULL, cuda(0), n, &d0), 0);
	ATF_REQUIRE_EQ(C->alloc(NULL, cuda(1), n, &d1), 0);
	ATF_REQUIRE_EQ(C->copy(NULL, d0, cuda(0), pin, RSD_LOC_PINNED_HOST, n, NULL), 0);
	ATF_REQUIRE_EQ(C->stream_sync(NULL, NULL), 0);
	ATF_REQUIRE_EQ(C->copy(NULL, d1, cuda(1), d0, cuda(0), n, NULL), 0);
	ATF_REQUIRE_EQ(C->stream_sync(NULL, NULL), 0);
	memset(pin, 0, n);
	ATF_REQUIRE_EQ(C->copy(NULL, pin, RSD_LOC_PINNED_HOST, d1, cuda(1), n, NULL), 0);
	ATF_REQUIRE_EQ(C->stream_sync(NULL, NULL), 0);
	for (uint64_t i = 0; i < n; i++)
		ATF_REQUIRE_EQ(pin[i], 0x3c);
	C->free(NULL, cuda(0), d0, n);
	C->free(NULL, cuda(1), d1, n);
	C->free(NULL, RSD_LOC_PINNED_HOST, pin, n);
}

/* Calls of cudaMemcpyAsync so far (the double counts them; -1 on a GPU). */
static long memcpy_calls(void)
{
#if RSD_CUDASIM
	return (long)rsd_cudasim_calls("cudaMemcpyAsync");
#else
	return -1;
#endif
}

/*
 * Through a manager: a pageable value to cuda:0 and back, staged in 64 KiB
 * chunks (6 copies each way for 5 chunks and a bit) and unstaged (one
 * copy each way), the bytes exact both times.
 */
ATF_TC_WITHOUT_HEAD(gpu_pageable_copies_are_staged);
ATF_TC_BODY(gpu_pageable_copies_are_staged, tc)
{
	const uint64_t chunk = 64 << 10, n = 5 * chunk + 321;
	struct rsd_location page = RSD_LOC_PAGEABLE_HOST;

	need_devices(1);
	for (int off = 0; off < 2; off++) {
		struct rsd_manager_config mc = { .driver = C,
						 .staging_nbytes = off ? RSD_STAGING_OFF : chunk };
		const struct rsd_resident *back;
		const unsigned char *b;
		struct rsd_manager *m;
		struct rsd_resident *r;
		struct rsd_lease *l;
		struct rsd_handle h;
		unsigned char *p;
		long c0, c1, c2;

		ATF_REQUIRE_EQ(rsd_manager_create(&mc, &m), 0);
		ATF_REQUIRE_EQ(rsd_resident_alloc(m, &rsd_resident_type, page, 1, &n, NULL, 0, &r),
			       0);
		p = rsd_resident_data(r, 0);
		for (uint64_t i = 0; i < n; i++)
			p[i] = (unsigned char)(i * 13 + off + (i >> 16));
		ATF_REQUIRE_EQ(rsd_adopt(m, r, NULL, RSD_REPLICABLE, &h), 0);
		c0 = memcpy_calls();
		ATF_REQUIRE_EQ_MSG(rsd_ensure(m, h, cuda(0), NULL, NULL), 0, "%s",
				   rsd_last_error()->message);
		c1 = memcpy_calls();
		ATF_REQUIRE_EQ(rsd_drop(m, h, page, NULL), 0);
		ATF_REQUIRE_EQ_MSG(rsd_ensure(m, h, page, NULL, NULL), 0, "%s",
				   rsd_last_error()->message);
		c2 = memcpy_calls();
		if (c0 >= 0) {
			ATF_CHECK_EQ(c1 - c0, off ? 1 : 6);
			ATF_CHECK_EQ(c2 - c1, off ? 1 : 6);
		}
		ATF_REQUIRE_EQ(rsd_acquire(m, &h, 1, page, NULL, &l), 0);
		ATF_REQUIRE_EQ(rsd_lease_value(l, h, &back), 0);
		b = rsd_resident_data(back, 0);
		for (uint64_t i = 0; i < n; i++)
			if (b[i] != (unsigned char)(i * 13 + off + (i >> 16)))
				atf_tc_fail("staging %s: byte %llu differs", off ? "off" : "on",
					    (unsigned long long)i);
		ATF_CHECK_EQ(rsd_lease_release(l, 0), 0);
		rsd_lease_free(l);
		ATF_CHECK_EQ(rsd_manager_close(m, 0), 0);
		rsd_manager_destroy(m);
	}
}

/* Calls of cudaStreamWaitEvent so far (the double counts them; -1 on a
 * GPU). */
static long wait_calls(void)
{
#if RSD_CUDASIM
	return (long)rsd_cudasim_calls("cudaStreamWaitEvent");
#else
	return -1;
#endif
}

/*
 * Through a manager: a not-waiting peer copy from cuda:0 while a queued
 * copy still fills it is ordered after that copy on the device (one
 * cudaStreamWaitEvent, the host does not wait), and cuda:1 gets the bytes.
 */
ATF_TC_WITHOUT_HEAD(gpu_copy_after_filling_source);
ATF_TC_BODY(gpu_copy_after_filling_source, tc)
{
	const uint64_t n = 1 << 20;
	struct rsd_location pin = RSD_LOC_PINNED_HOST;
	struct rsd_manager_config mc = { 0 };
	const struct rsd_resident *back;
	const unsigned char *b;
	struct rsd_manager *m;
	struct rsd_resident *r;
	struct rsd_transition rep;
	struct rsd_lease *l;
	struct rsd_handle h;
	long w0;

	need_devices(2);
	mc.driver = C;
	ATF_REQUIRE_EQ(rsd_manager_create(&mc, &m), 0);
	ATF_REQUIRE_EQ(rsd_resident_alloc(m, &rsd_resident_type, pin, 1, &n, NULL, 0, &r), 0);
	memset(rsd_resident_data(r, 0), 0x4b, n);
	ATF_REQUIRE_EQ(rsd_adopt(m, r, NULL, RSD_REPLICABLE, &h), 0);
	ATF_REQUIRE_EQ(rsd_move_async(m, h, cuda(0), NULL, NULL, NULL), 0);
	w0 = wait_calls();
	ATF_REQUIRE_EQ_MSG(rsd_ensure_async(m, h, cuda(1), NULL, &rep), 0, "%s",
			   rsd_last_error()->message);
	ATF_CHECK(rsd_location_equal(rep.source, cuda(0)));
	if (w0 >= 0)
		ATF_CHECK_EQ(wait_calls() - w0, 1);
	ATF_REQUIRE_EQ(C->stream_sync(NULL, NULL), 0);
	ATF_REQUIRE_EQ(rsd_manager_reap(m), 0);
	/* cuda:1's bytes, copied back through pinned memory. */
	ATF_REQUIRE_EQ(rsd_drop(m, h, cuda(0), NULL), 0);
	ATF_REQUIRE_EQ(rsd_ensure(m, h, pin, NULL, &rep), 0);
	ATF_CHECK(rsd_location_equal(rep.source, cuda(1)));
	ATF_REQUIRE_EQ(rsd_acquire(m, &h, 1, pin, NULL, &l), 0);
	ATF_REQUIRE_EQ(rsd_lease_value(l, h, &back), 0);
	b = rsd_resident_data(back, 0);
	for (uint64_t i = 0; i < n; i++)
		if (b[i] != 0x4b)
			atf_tc_fail("byte %llu differs", (unsigned long long)i);
	ATF_CHECK_EQ(rsd_lease_release(l, 0), 0);
	rsd_lease_free(l);
	ATF_CHECK_EQ(rsd_manager_close(m, 0), 0);
	rsd_manager_destroy(m);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, no_device_fails_cleanly);
	ATF_TP_ADD_TC(tp, not_built_refuses_everything);
	ATF_TP_ADD_TC(tp, gpu_roundtrip_and_pool_reuse);
	ATF_TP_ADD_TC(tp, gpu_streams_and_events);
	ATF_TP_ADD_TC(tp, gpu_peer_copy);
	ATF_TP_ADD_TC(tp, gpu_pageable_copies_are_staged);
	ATF_TP_ADD_TC(tp, gpu_copy_after_filling_source);
	return atf_no_error();
}
