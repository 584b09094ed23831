// SPDX-License-Identifier: MIT
/*
 * The simulated device's link model: copies on one engine follow one
 * another, the two directions of a device and different devices overlap,
 * pageable copies hold their caller, backing allocations are counted and
 * timed, oversize blocks are reused, peer access picks the peer link or the
 * bounce through host, the figures come from the config or the environment;
 * and the driver's transfer streams and stream_wait_event.
 *
 * Times are checked from below (a copy never ends before its modelled
 * time); overlap is shown by order (a short copy on another engine ends
 * while a long one is still pending), and one case bounds a total from
 * above with a wide margin.
 */
#include <atf-c.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rsd/rsd.h>

#include "../gate.h"

#define MB 1000000ull

static const struct rsd_location PINNED = { RSD_PINNED_HOST, -1 };
static const struct rsd_location PAGEABLE = { RSD_PAGEABLE_HOST, -1 };
static const struct rsd_location CUDA0 = { RSD_CUDA, 0 };
static const struct rsd_location CUDA1 = { RSD_CUDA, 1 };

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Links on, background progress with no per-item delay, slow links so
 * that modelled time dominates (1 ns latencies: exact durations). */
static struct rsd_simdev_config slow_links(void)
{
	struct rsd_simdev_config c = { .ndevices = 2,
				       .pooled = true,
				       .progress = RSD_SIMDEV_BACKGROUND,
				       .links = true,
				       .h2d_bps = 10 * MB,
				       .d2h_bps = 10 * MB,
				       .pageable_bps = 5 * MB,
				       .peer_bps = 1000 * MB,
				       .bounce_bps = 100 * MB,
				       .pcie_latency_ns = 1,
				       .peer_latency_ns = 1,
				       .dev_alloc_ns = 1,
				       .pinned_alloc_ns = 1,
				       .free_ns = 1 };
	return c;
}

static struct rsd_simdev *mk(const struct rsd_simdev_config *c)
{
	struct rsd_simdev *sd = NULL;

	ATF_REQUIRE_EQ(rsd_simdev_create(c, &sd), 0);
	return sd;
}

static void *mem(struct rsd_simdev *sd, struct rsd_location at, uint64_t n)
{
	void *p = NULL;

	ATF_REQUIRE_EQ(rsd_simdev_ops()->alloc(sd, at, n, &p), 0);
	return p;
}

static void *stream(struct rsd_simdev *sd, int dev)
{
	void *s = NULL;

	ATF_REQUIRE_EQ(rsd_simdev_stream_create(sd, dev, &s), 0);
	return s;
}

/* Queue a copy on s and record an event behind it. */
static void *copy_ev(struct rsd_simdev *sd, void *dst, struct rsd_location dat, const void *src,
		     struct rsd_location sat, uint64_t n, void *s)
{
	const struct rsd_device_ops *ops = rsd_simdev_ops();
	void *ev = NULL;

	ATF_REQUIRE_EQ(ops->copy(sd, dst, dat, src, sat, n, s), 0);
	ATF_REQUIRE_EQ(ops->event_record(sd, s, &ev), 0);
	return ev;
}

ATF_TC_WITHOUT_HEAD(one_engine_runs_copies_one_after_another);
ATF_TC_BODY(one_engine_runs_copies_one_after_another, tc)
{
	struct rsd_simdev_config c = slow_links();
	struct rsd_simdev *sd = mk(&c);
	const struct rsd_device_ops *ops = rsd_simdev_ops();
	void *h = mem(sd, PINNED, MB), *d = mem(sd, CUDA0, MB);
	void *s1 = stream(sd, 0), *s2 = stream(sd, 0);
	uint64_t ta = rsd_simdev_copy_ns(sd, CUDA0, PINNED, MB);
	uint64_t tb = rsd_simdev_copy_ns(sd, CUDA0, PINNED, MB / 10);
	uint64_t t0;
	void *ea, *eb;

	/* 1 MB at 10 MB/s: exactly 100 ms plus 1 ns latency. */
	ATF_CHECK_EQ(ta, 100000001ull);
	ATF_CHECK_EQ(tb, 10000001ull);
	memset(h, 0x5a, MB);
	t0 = now_ns();
	ea = copy_ev(sd, d, CUDA0, h, PINNED, MB, s1);
	eb = copy_ev(sd, (char *)d + MB / 2, CUDA0, h, PINNED, MB / 10, s2);
	ATF_REQUIRE_EQ(ops->event_sync(sd, eb), 0);
	/* The short copy queued second on the same engine (H2D of cuda:0,
	 * another stream) ended after the long one, and no earlier than the
	 * sum of their modelled times. */
	ATF_CHECK_EQ(ops->event_query(sd, ea), 1);
	ATF_CHECK(now_ns() - t0 >= ta + tb);
	ATF_CHECK_EQ(((unsigned char *)d)[0], 0x5a);
	ops->event_destroy(sd, ea);
	ops->event_destroy(sd, eb);
	ops->free(sd, PINNED, h, MB);
	ops->free(sd, CUDA0, d, MB);
	rsd_simdev_destroy(sd);
}

ATF_TC_WITHOUT_HEAD(directions_and_devices_overlap);
ATF_TC_BODY(directions_and_devices_overlap, tc)
{
	struct rsd_simdev_config c = slow_links();
	const struct rsd_device_ops *ops = rsd_simdev_ops();
	struct rsd_simdev *sd;
	void *d1, *s0, *s0b, *s1, *elong, *eshort;
	uint64_t t0, tlong, tshort;
	char *h, *d0;

	c.d2h_bps = 1 * MB; /* 1 MB device to host: 1 s */
	sd = mk(&c);
	h = mem(sd, PINNED, 2 * MB);
	d0 = mem(sd, CUDA0, 2 * MB);
	d1 = mem(sd, CUDA1, MB);
	s0 = stream(sd, 0);
	s0b = stream(sd, 0);
	s1 = stream(sd, 1);
	tlong = rsd_simdev_copy_ns(sd, PINNED, CUDA0, MB);
	tshort = rsd_simdev_copy_ns(sd, CUDA0, PINNED, MB / 10);
	ATF_CHECK_EQ(tlong, 1000000001ull);

	/* D2H on cuda:0 for 1 s, then H2D on cuda:0 (10 ms): the short one
	 * ends while the long one is pending (other engine, same device). */
	t0 = now_ns();
	elong = copy_ev(sd, h, PINNED, d0, CUDA0, MB, s0);
	eshort = copy_ev(sd, d0 + MB, CUDA0, h + MB, PINNED, MB / 10, s0b);
	ATF_REQUIRE_EQ(ops->event_sync(sd, eshort), 0);
	ATF_CHECK(now_ns() - t0 >= tshort);
	ATF_CHECK_EQ(ops->event_query(sd, elong), 0);
	ATF_REQUIRE_EQ(ops->event_sync(sd, elong), 0);
	ATF_CHECK(now_ns() - t0 >= tlong);
	ops->event_destroy(sd, elong);
	ops->event_destroy(sd, eshort);

	/* cuda:0 D2H again for 1 s; cuda:1 H2D (another device) ends first. */
	t0 = now_ns();
	elong = copy_ev(sd, h, PINNED, d0, CUDA0, MB, s0);
	eshort = copy_ev(sd, d1, CUDA1, h + MB, PINNED, MB / 10, s1);
	ATF_REQUIRE_EQ(ops->event_sync(sd, eshort), 0);
	ATF_CHECK_EQ(ops->event_query(sd, elong), 0);
	ATF_REQUIRE_EQ(ops->event_sync(sd, elong), 0);
	ATF_CHECK(now_ns() - t0 >= tlong);
	ops->event_destroy(sd, elong);
	ops->event_destroy(sd, eshort);
	ops->free(sd, PINNED, h, 2 * MB);
	ops->free(sd, CUDA0, d0, 2 * MB);
	ops->free(sd, CUDA1, d1, MB);
	rsd_simdev_destroy(sd);
}

/* The one upper bound: three 200 ms copies on three engines (cuda:0 H2D,
 * cuda:0 D2H, cuda:1 H2D) take less than 1.7 x one of them. */
ATF_TC_WITHOUT_HEAD(three_engines_overlap_in_wall_time);
ATF_TC_BODY(three_engines_overlap_in_wall_time, tc)
{
	struct rsd_simdev_config c = slow_links();
	const struct rsd_device_ops *ops = rsd_simdev_ops();
	struct rsd_simdev *sd = mk(&c);
	char *h = mem(sd, PINNED, 6 * MB);
	char *d0 = mem(sd, CUDA0, 4 * MB);
	void *d1 = mem(sd, CUDA1, 2 * MB);
	void *s[3] = { stream(sd, 0), stream(sd, 0), stream(sd, 1) };
	uint64_t t = rsd_simdev_copy_ns(sd, CUDA0, PINNED, 2 * MB), t0, el;
	void *ev[3];

	ATF_CHECK_EQ(t, 200000001ull);
	t0 = now_ns();
	ev[0] = copy_ev(sd, d0, CUDA0, h, PINNED, 2 * MB, s[0]);
	ev[1] = copy_ev(sd, h + 2 * MB, PINNED, d0 + 2 * MB, CUDA0, 2 * MB, s[1]);
	ev[2] = copy_ev(sd, d1, CUDA1, h + 4 * MB, PINNED, 2 * MB, s[2]);
	for (int i = 0; i < 3; i++)
		ATF_REQUIRE_EQ(ops->event_sync(sd, ev[i]), 0);
	el = now_ns() - t0;
	ATF_CHECK(el >= t);
	/* One after another they take 3 t: anything clearly below is overlap.
	 * The margin is wide because a loaded machine (sanitizers, parallel
	 * builds) delays the worker that lands each parked copy. */
	ATF_CHECK_MSG(el < t * 27 / 10, "three overlapping 200 ms copies took %llu ms",
		      (unsigned long long)(el / MB));
	for (int i = 0; i < 3; i++)
		ops->event_destroy(sd, ev[i]);
	rsd_simdev_destroy(sd);
}

static void check_pageable_holds(enum rsd_simdev_progress mode)
{
	struct rsd_simdev_config c = slow_links();
	const struct rsd_device_ops *ops = rsd_simdev_ops();
	struct rsd_simdev *sd;
	unsigned char *pg = malloc(MB), *back = malloc(MB);
	uint64_t t, t0;
	void *d, *s;

	c.progress = mode;
	sd = mk(&c);
	d = mem(sd, CUDA0, MB);
	s = stream(sd, 0);
	ATF_REQUIRE(pg && back);
	t = rsd_simdev_copy_ns(sd, CUDA0, PAGEABLE, MB / 2);
	/* Pageable runs at its own rate: 0.5 MB at 5 MB/s. */
	ATF_CHECK_EQ(t, 100000001ull);
	memset(pg, 0x3c, MB);
	memset(back, 0, MB);
	t0 = now_ns();
	ATF_REQUIRE_EQ(ops->copy(sd, d, CUDA0, pg, PAGEABLE, MB / 2, s), 0);
	/* Held until done: the bytes are there without a sync. */
	ATF_CHECK(now_ns() - t0 >= t);
	ATF_CHECK_EQ(((unsigned char *)d)[MB / 2 - 1], 0x3c);
	t0 = now_ns();
	ATF_REQUIRE_EQ(ops->copy(sd, back, PAGEABLE, d, CUDA0, MB / 2, s), 0);
	ATF_CHECK(now_ns() - t0 >= t);
	ATF_CHECK_EQ(back[0], 0x3c);
	ATF_CHECK_EQ(back[MB / 2 - 1], 0x3c);
	ops->free(sd, CUDA0, d, MB);
	rsd_simdev_destroy(sd);
	free(pg);
	free(back);
}

ATF_TC_WITHOUT_HEAD(pageable_copy_holds_the_caller);
ATF_TC_BODY(pageable_copy_holds_the_caller, tc)
{
	check_pageable_holds(RSD_SIMDEV_BACKGROUND);
	check_pageable_holds(RSD_SIMDEV_ON_COMMAND);
}

ATF_TC_WITHOUT_HEAD(pinned_copy_does_not_hold_the_caller);
ATF_TC_BODY(pinned_copy_does_not_hold_the_caller, tc)
{
	struct rsd_simdev_config c = slow_links();
	const struct rsd_device_ops *ops = rsd_simdev_ops();
	struct rsd_simdev *sd;
	void *h, *d, *ev;

	c.h2d_bps = 1 * MB; /* 1 s */
	sd = mk(&c);
	h = mem(sd, PINNED, MB);
	d = mem(sd, CUDA0, MB);
	ev = copy_ev(sd, d, CUDA0, h, PINNED, MB, rsd_simdev_ops()->default_stream(sd, 0));
	ATF_CHECK_EQ(ops->event_query(sd, ev), 0);
	ATF_REQUIRE_EQ(ops->event_sync(sd, ev), 0);
	ops->event_destroy(sd, ev);
	rsd_simdev_destroy(sd);
}

ATF_TC_WITHOUT_HEAD(backing_allocations_are_counted_and_timed);
ATF_TC_BODY(backing_allocations_are_counted_and_timed, tc)
{
	struct rsd_simdev_config c = slow_links();
	const struct rsd_device_ops *ops = rsd_simdev_ops();
	struct rsd_simdev *sd;
	void *a = NULL, *b = NULL, *p = NULL;
	uint64_t t0;

	c.dev_alloc_ns = 30 * MB; /* 30 ms */
	sd = mk(&c);
	t0 = now_ns();
	ATF_REQUIRE_EQ(ops->alloc(sd, CUDA0, 4096, &a), 0);
	ATF_CHECK(now_ns() - t0 >= 30 * MB);
	ATF_CHECK_EQ(rsd_simdev_calls(sd, RSD_SIMDEV_BACKING_ALLOC), 1);
	/* A pool hit is not a backing allocation. */
	ATF_REQUIRE_EQ(ops->alloc(sd, CUDA0, 4096, &b), 0);
	ATF_CHECK_EQ(rsd_simdev_calls(sd, RSD_SIMDEV_BACKING_ALLOC), 1);
	ATF_REQUIRE_EQ(ops->alloc(sd, PINNED, 4096, &p), 0);
	ATF_CHECK_EQ(rsd_simdev_calls(sd, RSD_SIMDEV_BACKING_ALLOC), 2);
	ops->free(sd, CUDA0, a, 4096);
	ops->free(sd, CUDA0, b, 4096);
	ops->free(sd, PINNED, p, 4096);
	/* The pool keeps its one idle chunk: nothing is given back. */
	ATF_CHECK_EQ(rsd_simdev_calls(sd, RSD_SIMDEV_BACKING_FREE), 0);
	/* Injected failures of the backing fail the alloc: the chunk, then
	 * the pool's fallback of a block of its own. */
	rsd_simdev_fail_all(sd, RSD_SIMDEV_BACKING_ALLOC, RSD_ENOMEM);
	ATF_CHECK_EQ(ops->alloc(sd, CUDA1, 4096, &a), -RSD_ENOMEM);
	ATF_CHECK(strstr(rsd_last_error()->message, "backing alloc call 4") != NULL);
	ATF_CHECK_EQ(rsd_simdev_calls(sd, RSD_SIMDEV_BACKING_ALLOC), 4);
	rsd_simdev_fail_all(sd, RSD_SIMDEV_BACKING_ALLOC, 0);
	rsd_simdev_destroy(sd);
}

/* alloc + free of a 256 MiB block n times; the backing calls made. */
static void oversize_cycles(const struct rsd_simdev_config *c, int n, unsigned long *allocs,
			    unsigned long *frees, uint64_t *reserved)
{
	const struct rsd_device_ops *ops = rsd_simdev_ops();
	struct rsd_simdev *sd = mk(c);
	uint64_t allocated = 0;

	for (int i = 0; i < n; i++) {
		void *p = NULL;

		ATF_REQUIRE_EQ(ops->alloc(sd, CUDA0, 256ull << 20, &p), 0);
		ops->free(sd, CUDA0, p, 256ull << 20);
	}
	*allocs = rsd_simdev_calls(sd, RSD_SIMDEV_BACKING_ALLOC);
	*frees = rsd_simdev_calls(sd, RSD_SIMDEV_BACKING_FREE);
	ATF_REQUIRE_EQ(ops->metrics(sd, 0, &allocated, reserved), 0);
	ATF_CHECK_EQ(allocated, 0);
	rsd_simdev_destroy(sd);
}

ATF_TC_WITHOUT_HEAD(oversize_blocks_are_reused_in_steady_state);
ATF_TC_BODY(oversize_blocks_are_reused_in_steady_state, tc)
{
	struct rsd_simdev_config c = slow_links();
	unsigned long allocs, frees;
	uint64_t reserved;

	/* Links on: 1 GiB kept per device by default: one backing call for
	 * the first block, none for the next four. */
	oversize_cycles(&c, 5, &allocs, &frees, &reserved);
	ATF_CHECK_EQ(allocs, 1);
	ATF_CHECK_EQ(frees, 0);
	ATF_CHECK_EQ(reserved, 256ull << 20);
	/* A bound below the block keeps nothing. */
	c.oversize_keep = 128ull << 20;
	oversize_cycles(&c, 3, &allocs, &frees, &reserved);
	ATF_CHECK_EQ(allocs, 3);
	ATF_CHECK_EQ(frees, 3);
	ATF_CHECK_EQ(reserved, 0);
	/* Links off: nothing kept unless asked (existing users unchanged). */
	c = (struct rsd_simdev_config){ .ndevices = 1, .pooled = true };
	oversize_cycles(&c, 3, &allocs, &frees, &reserved);
	ATF_CHECK_EQ(allocs, 3);
	ATF_CHECK_EQ(frees, 3);
	c.oversize_keep = 512ull << 20;
	oversize_cycles(&c, 3, &allocs, &frees, &reserved);
	ATF_CHECK_EQ(allocs, 1);
	ATF_CHECK_EQ(frees, 0);
}

ATF_TC_WITHOUT_HEAD(stream_wait_event_orders_streams_without_blocking_the_host);
ATF_TC_BODY(stream_wait_event_orders_streams_without_blocking_the_host, tc)
{
	struct rsd_simdev_config c = { .ndevices = 2,
				       .pooled = true,
				       .progress = RSD_SIMDEV_BACKGROUND };
	const struct rsd_device_ops *ops = rsd_simdev_ops();
	struct gate g = GATE_INIT;
	struct rsd_simdev *sd = mk(&c);
	void *a = stream(sd, 1), *b = stream(sd, 0);
	void *h = mem(sd, PINNED, 4096), *d = mem(sd, CUDA0, 4096);
	void *ea = NULL, *eb;
	struct timespec ms50 = { 0, 50000000L };

	memset(h, 0x77, 4096);
	memset(d, 0, 4096);
	/* a (cuda:1) is held by a gate before its event; b (cuda:0) waits
	 * for that event, then copies. */
	ATF_REQUIRE_EQ(rsd_simdev_launch_host_func(sd, a, gate_hold, &g), 0);
	ATF_REQUIRE_EQ(ops->event_record(sd, a, &ea), 0);
	/* Returns with the gate shut: the host does not wait. */
	ATF_REQUIRE_EQ(ops->stream_wait_event(sd, b, ea), 0);
	ATF_CHECK_EQ(rsd_simdev_calls(sd, RSD_SIMDEV_STREAM_WAIT), 1);
	eb = copy_ev(sd, d, CUDA0, h, PINNED, 4096, b);
	nanosleep(&ms50, NULL);
	ATF_CHECK_EQ(ops->event_query(sd, eb), 0);
	ATF_CHECK_EQ(((unsigned char *)d)[0], 0);
	gate_open(&g);
	ATF_REQUIRE_EQ(ops->event_sync(sd, eb), 0);
	ATF_CHECK_EQ(ops->event_query(sd, ea), 1);
	ATF_CHECK_EQ(((unsigned char *)d)[4095], 0x77);
	/* A complete event, or one of the stream itself, queues nothing. */
	ATF_CHECK_EQ(ops->stream_wait_event(sd, b, ea), 0);
	ATF_CHECK_EQ(ops->stream_wait_event(sd, b, eb), 0);
	/* Refusals. */
	ATF_CHECK_EQ(ops->stream_wait_event(sd, NULL, ea), -RSD_ETYPE);
	ATF_CHECK_EQ(ops->stream_wait_event(sd, &g, ea), -RSD_ETYPE);
	ATF_CHECK_EQ(ops->stream_wait_event(sd, b, &g), -RSD_ETYPE);
	ops->event_destroy(sd, ea);
	ATF_CHECK_EQ(ops->stream_wait_event(sd, b, ea), -RSD_ETYPE);
	ops->event_destroy(sd, eb);
	rsd_simdev_fail_nth(sd, RSD_SIMDEV_STREAM_WAIT, 1, RSD_EDEVICE);
	ATF_CHECK_EQ(ops->stream_wait_event(sd, b, NULL), -RSD_EDEVICE);
	rsd_simdev_stream_destroy(sd, a);
	rsd_simdev_stream_destroy(sd, b);
	rsd_simdev_destroy(sd);
}

ATF_TC_WITHOUT_HEAD(stream_wait_event_on_command);
ATF_TC_BODY(stream_wait_event_on_command, tc)
{
	struct rsd_simdev_config c = { .ndevices = 1, .pooled = true };
	const struct rsd_device_ops *ops = rsd_simdev_ops();
	struct rsd_simdev *sd = mk(&c);
	void *a = stream(sd, 0), *b = stream(sd, 0);
	unsigned char *h = mem(sd, PINNED, 4096), *back = mem(sd, PINNED, 4096);
	void *d = mem(sd, CUDA0, 4096), *ea = NULL, *eb;

	memset(h, 0x42, 4096);
	memset(back, 0, 4096);
	ea = copy_ev(sd, d, CUDA0, h, PINNED, 4096, a);
	ATF_REQUIRE_EQ(ops->stream_wait_event(sd, b, ea), 0);
	eb = copy_ev(sd, back, PINNED, d, CUDA0, 4096, b);
	ATF_CHECK_EQ(rsd_simdev_pending_events(sd, NULL), 2);
	/* Completing b runs a's work up to the event b waits for first. */
	rsd_simdev_stream_complete(sd, b);
	ATF_CHECK_EQ(ops->event_query(sd, ea), 1);
	ATF_CHECK_EQ(ops->event_query(sd, eb), 1);
	ATF_CHECK_EQ(back[0], 0x42);
	ATF_CHECK_EQ(back[4095], 0x42);
	/* The waited-on stream destroyed before the wait runs stays until it
	 * has. */
	ea = copy_ev(sd, d, CUDA0, h, PINNED, 4096, a);
	ATF_REQUIRE_EQ(ops->stream_wait_event(sd, b, ea), 0);
	ops->event_destroy(sd, ea);
	rsd_simdev_stream_destroy(sd, a);
	rsd_simdev_complete_all(sd);
	ATF_CHECK_EQ(rsd_simdev_pending_events(sd, NULL), 0);
	ops->event_destroy(sd, eb);
	rsd_simdev_stream_destroy(sd, b);
	rsd_simdev_destroy(sd);
}

ATF_TC_WITHOUT_HEAD(transfer_streams_per_direction_and_pair);
ATF_TC_BODY(transfer_streams_per_direction_and_pair, tc)
{
	struct rsd_simdev_config c = { .ndevices = 2, .pooled = true, .auto_complete = true };
	const struct rsd_device_ops *ops = rsd_simdev_ops();
	struct rsd_simdev *sd = mk(&c);
	void *h2d = ops->transfer_stream(sd, CUDA0, PINNED);
	void *d2h = ops->transfer_stream(sd, PAGEABLE, CUDA0);
	void *p01 = ops->transfer_stream(sd, CUDA1, CUDA0);
	void *p10 = ops->transfer_stream(sd, CUDA0, CUDA1);
	struct rsd_location bad = { RSD_CUDA, 2 };
	int dev = -1;

	ATF_REQUIRE(h2d && d2h && p01 && p10);
	ATF_CHECK(h2d != d2h && h2d != p01 && p01 != p10);
	ATF_CHECK(h2d != ops->default_stream(sd, 0) && d2h != ops->default_stream(sd, 0));
	/* One per direction: pageable or pinned host, the same stream. */
	ATF_CHECK_EQ(ops->transfer_stream(sd, CUDA0, PAGEABLE), h2d);
	ATF_CHECK_EQ(ops->transfer_stream(sd, PINNED, CUDA0), d2h);
	ATF_CHECK_EQ(ops->transfer_stream(sd, CUDA1, CUDA0), p01);
	ATF_CHECK(ops->transfer_stream(sd, CUDA1, PINNED) != h2d);
	/* Within one device: the device's transfer stream. */
	ATF_CHECK_EQ(ops->transfer_stream(sd, CUDA1, CUDA1), ops->default_stream(sd, 1));
	ATF_CHECK_EQ(ops->stream_device(sd, h2d, &dev), 0);
	ATF_CHECK_EQ(dev, 0);
	ATF_CHECK_EQ(ops->stream_device(sd, d2h, &dev), 0);
	ATF_CHECK_EQ(dev, 0);
	ATF_CHECK_EQ(ops->stream_device(sd, p01, &dev), 0);
	ATF_CHECK_EQ(dev, 1); /* the destination's */
	ATF_CHECK(ops->transfer_stream(sd, PINNED, PAGEABLE) == NULL);
	ATF_CHECK(ops->transfer_stream(sd, bad, PINNED) == NULL);
	ATF_CHECK_EQ(rsd_last_error()->code, RSD_EINVAL);
	/* Driver streams: never destroyed by a caller. */
	rsd_simdev_stream_destroy(sd, h2d);
	ATF_CHECK_EQ(ops->stream_device(sd, h2d, &dev), 0);
	ATF_CHECK_EQ(ops->stream_sync(sd, NULL), 0);
	rsd_simdev_destroy(sd);
}

ATF_TC_WITHOUT_HEAD(peer_access_picks_the_link);
ATF_TC_BODY(peer_access_picks_the_link, tc)
{
	struct rsd_simdev_config c = slow_links();
	struct rsd_simdev *sd = mk(&c);

	ATF_CHECK(rsd_simdev_links_on(sd));
	ATF_CHECK(rsd_simdev_peer_capable(sd));
	/* Enabled at creation: 1 MB at 1000 MB/s. */
	ATF_CHECK_EQ(rsd_simdev_copy_ns(sd, CUDA1, CUDA0, MB), 1000001ull);
	ATF_CHECK_EQ(rsd_simdev_peer_access(sd, 1, 0, false), 0);
	/* Bounced through host on both devices' engines: 100 MB/s, two
	 * latencies; both directions (access is per pair). */
	ATF_CHECK_EQ(rsd_simdev_copy_ns(sd, CUDA1, CUDA0, MB), 10000002ull);
	ATF_CHECK_EQ(rsd_simdev_copy_ns(sd, CUDA0, CUDA1, MB), 10000002ull);
	ATF_CHECK_EQ(rsd_simdev_peer_access(sd, 0, 1, true), 0);
	ATF_CHECK_EQ(rsd_simdev_copy_ns(sd, CUDA0, CUDA1, MB), 1000001ull);
	/* No engine: within a device, host to host. */
	ATF_CHECK_EQ(rsd_simdev_copy_ns(sd, CUDA0, CUDA0, MB), 0);
	ATF_CHECK_EQ(rsd_simdev_copy_ns(sd, PINNED, PAGEABLE, MB), 0);
	ATF_CHECK_EQ(rsd_simdev_peer_access(sd, 0, 0, true), -RSD_EINVAL);
	ATF_CHECK_EQ(rsd_simdev_peer_access(sd, 0, 2, true), -RSD_EINVAL);
	ATF_CHECK_EQ(rsd_simdev_peer_access(NULL, 0, 1, true), -RSD_ETYPE);
	rsd_simdev_destroy(sd);

	c.no_peer_access = true;
	sd = mk(&c);
	ATF_CHECK(!rsd_simdev_peer_capable(sd));
	ATF_CHECK_EQ(rsd_simdev_copy_ns(sd, CUDA1, CUDA0, MB), 10000002ull);
	ATF_CHECK_EQ(rsd_simdev_peer_access(sd, 0, 1, true), -RSD_EDEVICE);
	ATF_CHECK_EQ(rsd_simdev_peer_access(sd, 0, 1, false), 0);
	rsd_simdev_destroy(sd);
}

ATF_TC_WITHOUT_HEAD(figures_from_config_environment_and_defaults);
ATF_TC_BODY(figures_from_config_environment_and_defaults, tc)
{
	struct rsd_simdev_config c = { .ndevices = 1 };
	struct rsd_simdev *sd;

	/* Off: no modelled time. */
	sd = mk(&c);
	ATF_CHECK(!rsd_simdev_links_on(sd));
	ATF_CHECK_EQ(rsd_simdev_copy_ns(sd, CUDA0, PINNED, MB), 0);
	rsd_simdev_destroy(sd);

	/* Defaults: 55 GB/s pinned, 27 GB/s pageable, 8 us latency. */
	c.links = true;
	sd = mk(&c);
	ATF_CHECK_EQ(rsd_simdev_copy_ns(sd, CUDA0, PINNED, 55000 * MB), 1000008000ull);
	ATF_CHECK_EQ(rsd_simdev_copy_ns(sd, PAGEABLE, CUDA0, 27000 * MB), 1000008000ull);
	rsd_simdev_destroy(sd);

	/* The environment turns it on and sets figures; a config field wins
	 * over its variable. */
	c.links = false;
	setenv("RSD_SIMDEV_LINKS", "1", 1);
	setenv("RSD_SIMDEV_H2D_GBPS", "2", 1);
	setenv("RSD_SIMDEV_PCIE_LATENCY_NS", "1000", 1);
	setenv("RSD_SIMDEV_TIME_SCALE", "3", 1);
	setenv("RSD_SIMDEV_D2H_GBPS", "fast", 1); /* ignored: default */
	sd = mk(&c);
	ATF_CHECK(rsd_simdev_links_on(sd));
	ATF_CHECK_EQ(rsd_simdev_copy_ns(sd, CUDA0, PINNED, 2000 * MB), 3000003000ull);
	ATF_CHECK_EQ(rsd_simdev_copy_ns(sd, PINNED, CUDA0, 55000 * MB), 3000003000ull);
	rsd_simdev_destroy(sd);
	c.h2d_bps = 1000 * MB;
	c.time_scale = 0.5;
	sd = mk(&c);
	ATF_CHECK_EQ(rsd_simdev_copy_ns(sd, CUDA0, PINNED, 2000 * MB), 1000000500ull);
	rsd_simdev_destroy(sd);
	setenv("RSD_SIMDEV_NO_PEER_ACCESS", "1", 1);
	c.ndevices = 2;
	sd = mk(&c);
	ATF_CHECK(!rsd_simdev_peer_capable(sd));
	rsd_simdev_destroy(sd);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, one_engine_runs_copies_one_after_another);
	ATF_TP_ADD_TC(tp, directions_and_devices_overlap);
	ATF_TP_ADD_TC(tp, three_engines_overlap_in_wall_time);
	ATF_TP_ADD_TC(tp, pageable_copy_holds_the_caller);
	ATF_TP_ADD_TC(tp, pinned_copy_does_not_hold_the_caller);
	ATF_TP_ADD_TC(tp, backing_allocations_are_counted_and_timed);
	ATF_TP_ADD_TC(tp, oversize_blocks_are_reused_in_steady_state);
	ATF_TP_ADD_TC(tp, stream_wait_event_orders_streams_without_blocking_the_host);
	ATF_TP_ADD_TC(tp, stream_wait_event_on_command);
	ATF_TP_ADD_TC(tp, transfer_streams_per_direction_and_pair);
	ATF_TP_ADD_TC(tp, peer_access_picks_the_link);
	ATF_TP_ADD_TC(tp, figures_from_config_environment_and_defaults);
	return atf_no_error();
}
