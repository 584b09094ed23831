// SPDX-License-Identifier: MIT
/*
 * The simulated device through its ops table and control API: memory at
 * simulated devices and pinned host, allocator metrics, streams and the
 * event life cycle (pending until completed, auto-complete), stream
 * identification, fault injection and call counters, and concurrent event
 * traffic. The stream model itself (work queues, progress modes, blocking
 * syncs, host functions) is t_simdev_streams.c.
 */
#include <atf-c.h>
#include "../check.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rsd/rsd.h>

#include "../simwait.h"

static const struct rsd_device_ops *S;

static struct rsd_simdev *make(int ndevices, bool auto_complete, bool pooled)
{
	struct rsd_simdev_config cfg = { .ndevices = ndevices,
					 .auto_complete = auto_complete,
					 .pooled = pooled };
	struct rsd_simdev *sd = NULL;

	S = rsd_simdev_ops();
	ATF_REQUIRE(S != NULL);
	RSD_REQUIRE_OK(rsd_simdev_create(&cfg, &sd));
	ATF_REQUIRE(sd != NULL);
	return sd;
}

static struct rsd_location cuda(int d)
{
	struct rsd_location l = { RSD_CUDA, d };

	return l;
}

static bool msg_has(const char *s)
{
	return strstr(rsd_last_error()->message, s) != NULL;
}

ATF_TC_WITHOUT_HEAD(create_validates_config);
ATF_TC_BODY(create_validates_config, tc)
{
	struct rsd_simdev_config cfg = { .ndevices = 2, .auto_complete = false, .pooled = true };
	struct rsd_simdev *sd = (void *)1;

	/* Failures leave *out as it was. */
	RSD_CHECK_ERR(RSD_ETYPE, rsd_simdev_create(NULL, &sd));
	ATF_CHECK_EQ(sd, (void *)1);
	RSD_CHECK_ERR(RSD_ETYPE, rsd_simdev_create(&cfg, NULL));
	cfg.ndevices = -1;
	RSD_CHECK_ERR(RSD_EINVAL, rsd_simdev_create(&cfg, &sd));
	ATF_CHECK(msg_has("-1"));
	ATF_CHECK_EQ(sd, (void *)1);
	cfg.ndevices = 129;
	RSD_CHECK_ERR(RSD_EINVAL, rsd_simdev_create(&cfg, &sd));
	ATF_CHECK_EQ(sd, (void *)1);
	cfg.ndevices = 2;
	cfg.progress = (enum rsd_simdev_progress)3;
	RSD_CHECK_ERR(RSD_EINVAL, rsd_simdev_create(&cfg, &sd));
	ATF_CHECK(msg_has("progress mode 3"));
	ATF_CHECK_EQ(sd, (void *)1);
	/* auto_complete wins over progress, as before progress existed. */
	cfg.auto_complete = true;
	RSD_REQUIRE_OK(rsd_simdev_create(&cfg, &sd));
	rsd_simdev_destroy(sd);
	cfg.auto_complete = false;
	cfg.progress = RSD_SIMDEV_ON_COMMAND;
	cfg.ndevices = 128;
	RSD_REQUIRE_OK(rsd_simdev_create(&cfg, &sd));
	ATF_CHECK_EQ(rsd_simdev_ops()->device_count(sd), 128);
	ATF_CHECK(rsd_simdev_ops()->default_stream(sd, 127) != NULL);
	ATF_CHECK_EQ(rsd_simdev_ops()->default_stream(sd, 128), NULL);
	rsd_simdev_destroy(sd);
	cfg.ndevices = 0;
	RSD_REQUIRE_OK(rsd_simdev_create(&cfg, &sd));
	ATF_CHECK_EQ(rsd_simdev_ops()->device_count(sd), 0);
	ATF_CHECK_STREQ(rsd_simdev_ops()->name, "simdev");
	rsd_simdev_destroy(sd);
	rsd_simdev_destroy(NULL);
}

ATF_TC_WITHOUT_HEAD(alloc_and_metrics_pooled);
ATF_TC_BODY(alloc_and_metrics_pooled, tc)
{
	struct rsd_simdev *sd = make(2, false, true);
	uint64_t a = 0, r = 0;
	void *p, *q, *pin;

	ATF_REQUIRE_EQ(S->alloc(sd, cuda(0), 1000, &p), 0);
	ATF_REQUIRE_EQ(S->alloc(sd, cuda(0), 3000, &q), 0);
	ATF_REQUIRE_EQ(S->alloc(sd, RSD_LOC_PINNED_HOST, 5000, &pin), 0);
	memset(p, 1, 1000);
	memset(q, 2, 3000);
	memset(pin, 3, 5000);
	ATF_CHECK_EQ(rsd_simdev_allocated_bytes(sd, 0), 4000);
	ATF_CHECK_EQ(rsd_simdev_allocated_bytes(sd, 1), 0);
	ATF_REQUIRE_EQ(S->metrics(sd, 0, &a, &r), 0);
	ATF_CHECK_EQ(a, 4000);
	ATF_CHECK_EQ(r, 64ull << 20); /* one pool chunk */
	ATF_REQUIRE_EQ(S->metrics(sd, 1, &a, &r), 0);
	ATF_CHECK_EQ(a, 0);
	ATF_CHECK_EQ(r, 0);
	S->free(sd, cuda(0), p, 1000);
	ATF_CHECK_EQ(rsd_simdev_allocated_bytes(sd, 0), 3000);
	S->free(sd, cuda(0), q, 3000);
	ATF_REQUIRE_EQ(S->metrics(sd, 0, &a, &r), 0);
	ATF_CHECK_EQ(a, 0);
	ATF_CHECK_EQ(r, 64ull << 20); /* the idle chunk stays */
	ATF_CHECK_EQ(S->metrics(sd, 2, &a, &r), -RSD_EINVAL);
	ATF_CHECK_EQ(S->metrics(sd, -1, &a, &r), -RSD_EINVAL);
	ATF_CHECK_EQ(S->metrics(sd, 0, NULL, &r), -RSD_ETYPE);
	ATF_CHECK_EQ(rsd_simdev_calls(sd, RSD_SIMDEV_METRICS), 6);
	ATF_CHECK_EQ(rsd_simdev_calls(sd, RSD_SIMDEV_ALLOC), 3);
	S->free(sd, RSD_LOC_PINNED_HOST, pin, 5000);
	rsd_simdev_destroy(sd);
}

ATF_TC_WITHOUT_HEAD(alloc_unpooled_reserved_equals_allocated);
ATF_TC_BODY(alloc_unpooled_reserved_equals_allocated, tc)
{
	struct rsd_simdev *sd = make(1, false, false);
	uint64_t a, r;
	void *p[3];

	for (int i = 0; i < 3; i++)
		ATF_REQUIRE_EQ(S->alloc(sd, cuda(0), 1000 + (uint64_t)i, &p[i]), 0);
	ATF_CHECK(p[0] != p[1] && p[1] != p[2]);
	ATF_REQUIRE_EQ(S->metrics(sd, 0, &a, &r), 0);
	ATF_CHECK_EQ(a, 3003);
	ATF_CHECK_EQ(r, 3003);
	for (int i = 0; i < 3; i++)
		S->free(sd, cuda(0), p[i], 1000 + (uint64_t)i);
	ATF_REQUIRE_EQ(S->metrics(sd, 0, &a, &r), 0);
	ATF_CHECK_EQ(a, 0);
	ATF_CHECK_EQ(r, 0);
	ATF_CHECK_EQ(rsd_simdev_calls(sd, RSD_SIMDEV_ALLOC), 3);
	rsd_simdev_destroy(sd);
}

ATF_TC_WITHOUT_HEAD(alloc_rejects_bad_locations);
ATF_TC_BODY(alloc_rejects_bad_locations, tc)
{
	struct rsd_simdev *sd = make(2, false, true);
	struct rsd_location bad = { (enum rsd_location_kind)9, -1 };
	void *p = NULL;

	ATF_CHECK_EQ(S->alloc(sd, cuda(2), 16, &p), -RSD_EINVAL);
	ATF_CHECK(msg_has("cuda:2"));
	ATF_CHECK_EQ(S->alloc(sd, RSD_LOC_PAGEABLE_HOST, 16, &p), -RSD_EINVAL);
	ATF_CHECK_EQ(S->alloc(sd, bad, 16, &p), -RSD_ETYPE);
	ATF_CHECK_EQ(S->alloc(sd, cuda(0), 16, NULL), -RSD_ETYPE);
	ATF_CHECK_EQ(p, NULL);
	/* Every alloc call is counted, failed ones included. */
	ATF_CHECK_EQ(rsd_simdev_calls(sd, RSD_SIMDEV_ALLOC), 4);
	ATF_CHECK_EQ(rsd_simdev_allocated_bytes(sd, 0), 0);
	rsd_simdev_destroy(sd);
}

/* A copy takes effect when its stream's work runs: until then the
 * destination holds its old bytes, and the source is read then, not when
 * the copy is queued. */
ATF_TC_WITHOUT_HEAD(copies_run_when_their_work_runs);
ATF_TC_BODY(copies_run_when_their_work_runs, tc)
{
	struct rsd_simdev *sd = make(2, false, true);
	char src[64], out[64], old[64];
	void *d0, *d1, *pin, *s1;
	int x;

	for (int i = 0; i < 64; i++)
		src[i] = (char)(i * 3);
	memset(out, 0x5a, sizeof(out));
	memcpy(old, out, sizeof(old));
	ATF_REQUIRE_EQ(S->alloc(sd, cuda(0), 64, &d0), 0);
	ATF_REQUIRE_EQ(S->alloc(sd, cuda(1), 64, &d1), 0);
	ATF_REQUIRE_EQ(S->alloc(sd, RSD_LOC_PINNED_HOST, 64, &pin), 0);
	memset(pin, 0x11, 64);
	memset(d0, 0x22, 64);
	RSD_REQUIRE_OK(rsd_simdev_stream_create(sd, 1, &s1));
	/* Host to host without a stream involves no device: done at once. */
	ATF_REQUIRE_EQ(S->copy(sd, pin, RSD_LOC_PINNED_HOST, src, RSD_LOC_PAGEABLE_HOST, 64, NULL),
		       0);
	ATF_CHECK_EQ(memcmp(pin, src, 64), 0);
	/* NULL: cuda:0's transfer stream. Queued, not run. */
	ATF_REQUIRE_EQ(S->copy(sd, d0, cuda(0), pin, RSD_LOC_PINNED_HOST, 64, NULL), 0);
	ATF_CHECK_EQ(((unsigned char *)d0)[0], 0x22);
	ATF_CHECK_EQ(((unsigned char *)d0)[63], 0x22);
	rsd_simdev_stream_complete(sd, S->default_stream(sd, 1)); /* another device's */
	ATF_CHECK_EQ(((unsigned char *)d0)[0], 0x22);
	rsd_simdev_stream_complete(sd, NULL);
	ATF_CHECK_EQ(memcmp(d0, src, 64), 0);
	/* The source is read when the work runs: a later change shows. */
	ATF_REQUIRE_EQ(S->copy(sd, d1, cuda(1), d0, cuda(0), 64, s1), 0);
	ATF_REQUIRE_EQ(S->copy(sd, out, RSD_LOC_PAGEABLE_HOST, d1, cuda(1), 64, s1), 0);
	((char *)d0)[5] = 'Q';
	ATF_CHECK_EQ(memcmp(out, old, 64), 0);
	rsd_simdev_stream_complete(sd, s1);
	ATF_CHECK_EQ(out[5], 'Q');
	ATF_CHECK_EQ(memcmp(out, src, 5), 0);
	ATF_CHECK_EQ(memcmp(out + 6, src + 6, 58), 0);
	/* Nothing was recorded, so nothing is pending. */
	ATF_CHECK_EQ(rsd_simdev_pending_events(sd, NULL), 0);
	ATF_CHECK_EQ(S->copy(sd, out, RSD_LOC_PAGEABLE_HOST, d1, cuda(1), 64, &x), -RSD_ETYPE);
	ATF_CHECK_EQ(S->copy(sd, out, RSD_LOC_PAGEABLE_HOST, d1, cuda(2), 64, NULL), -RSD_EINVAL);
	ATF_CHECK_EQ(S->copy(sd, NULL, RSD_LOC_PAGEABLE_HOST, d1, cuda(1), 64, NULL), -RSD_ETYPE);
	ATF_CHECK_EQ(rsd_simdev_calls(sd, RSD_SIMDEV_COPY), 7);
	rsd_simdev_stream_destroy(sd, s1);
	rsd_simdev_destroy(sd); /* frees the live allocations too */
}

ATF_TC_WITHOUT_HEAD(stream_device_identifies_streams);
ATF_TC_BODY(stream_device_identifies_streams, tc)
{
	struct rsd_simdev *sd = make(3, false, true), *other = make(3, false, true);
	void *s2, *foreign;
	int dev = -1, local;

	RSD_REQUIRE_OK(rsd_simdev_stream_create(sd, 2, &s2));
	ATF_REQUIRE_EQ(S->stream_device(sd, s2, &dev), 0);
	ATF_CHECK_EQ(dev, 2);
	ATF_REQUIRE_EQ(S->stream_device(sd, S->default_stream(sd, 1), &dev), 0);
	ATF_CHECK_EQ(dev, 1);
	ATF_CHECK(S->default_stream(sd, 1) != S->default_stream(sd, 0));
	ATF_CHECK_EQ(S->default_stream(sd, 1), S->default_stream(sd, 1));
	dev = -1;
	ATF_CHECK_EQ(S->stream_device(sd, &local, &dev), -RSD_ETYPE);
	ATF_CHECK_EQ(rsd_last_error()->code, RSD_ETYPE);
	ATF_CHECK(msg_has("not a stream"));
	ATF_CHECK_EQ(S->stream_device(sd, (void *)0x10, &dev), -RSD_ETYPE);
	ATF_CHECK_EQ(S->stream_device(sd, NULL, &dev), -RSD_ETYPE);
	ATF_CHECK_EQ(dev, -1);
	/* Another simulator's stream is not this one's. */
	RSD_REQUIRE_OK(rsd_simdev_stream_create(other, 0, &foreign));
	ATF_CHECK_EQ(S->stream_device(sd, foreign, &dev), -RSD_ETYPE);
	{
		void *keep = foreign;

		/* A failed create leaves *stream as it was. */
		RSD_CHECK_ERR(RSD_EINVAL, rsd_simdev_stream_create(sd, 3, &foreign));
		ATF_CHECK_EQ(foreign, keep);
		RSD_CHECK_ERR(RSD_ETYPE, rsd_simdev_stream_create(NULL, 0, &foreign));
		ATF_CHECK_EQ(foreign, keep);
	}
	rsd_simdev_stream_destroy(sd, s2);
	ATF_CHECK_EQ(S->stream_device(sd, s2, &dev), -RSD_ETYPE);
	rsd_simdev_destroy(other);
	rsd_simdev_destroy(sd);
}

ATF_TC_WITHOUT_HEAD(events_pending_until_stream_complete);
ATF_TC_BODY(events_pending_until_stream_complete, tc)
{
	struct rsd_simdev *sd = make(1, false, true);
	void *s, *e1, *e2, *e3;

	RSD_REQUIRE_OK(rsd_simdev_stream_create(sd, 0, &s));
	ATF_REQUIRE_EQ(S->event_record(sd, s, &e1), 0);
	ATF_REQUIRE_EQ(S->event_record(sd, s, &e2), 0);
	ATF_CHECK(e1 != e2);
	ATF_CHECK_EQ(S->event_query(sd, e1), 0);
	ATF_CHECK_EQ(S->event_query(sd, e2), 0);
	ATF_CHECK_EQ(rsd_simdev_pending_events(sd, s), 2);
	ATF_CHECK_EQ(rsd_simdev_pending_events(sd, S->default_stream(sd, 0)), 0);
	rsd_simdev_stream_complete(sd, s);
	ATF_CHECK_EQ(S->event_query(sd, e1), 1);
	ATF_CHECK_EQ(S->event_query(sd, e2), 1);
	ATF_CHECK_EQ(rsd_simdev_pending_events(sd, s), 0);
	/* Completion covers what was recorded so far, not what comes later. */
	ATF_REQUIRE_EQ(S->event_record(sd, s, &e3), 0);
	ATF_CHECK_EQ(S->event_query(sd, e3), 0);
	ATF_CHECK_EQ(rsd_simdev_pending_events(sd, NULL), 1);
	rsd_simdev_complete_all(sd);
	ATF_CHECK_EQ(S->event_query(sd, e3), 1);
	ATF_CHECK_EQ(rsd_simdev_pending_events(sd, NULL), 0);
	ATF_CHECK_EQ(rsd_simdev_calls(sd, RSD_SIMDEV_EVENT_RECORD), 3);
	ATF_CHECK_EQ(rsd_simdev_calls(sd, RSD_SIMDEV_EVENT_QUERY), 6);
	S->event_destroy(sd, e1);
	S->event_destroy(sd, e2);
	S->event_destroy(sd, e3);
	rsd_simdev_stream_destroy(sd, s);
	rsd_simdev_destroy(sd);
}

/* Syncs wait (they complete nothing themselves) until another thread has
 * run the work they wait for; each waits for its own scope only. */
ATF_TC_WITHOUT_HEAD(syncs_wait_for_their_scope);
ATF_TC_BODY(syncs_wait_for_their_scope, tc)
{
	struct rsd_simdev *sd = make(2, false, true);
	void *s, *t, *e[3], *f, *g, *d1;
	struct simwait w;

	RSD_REQUIRE_OK(rsd_simdev_stream_create(sd, 0, &s));
	RSD_REQUIRE_OK(rsd_simdev_stream_create(sd, 0, &t));
	for (int i = 0; i < 3; i++)
		ATF_REQUIRE_EQ(S->event_record(sd, s, &e[i]), 0);
	ATF_REQUIRE_EQ(S->event_record(sd, t, &f), 0);
	/* event_sync on e[1] blocks until s is completed. */
	ATF_REQUIRE(simwait_start(&w, sd, s, 100));
	ATF_REQUIRE_EQ(S->event_sync(sd, e[1]), 0);
	ATF_CHECK_MSG(simwait_blocked(&w), "event_sync returned before its stream ran");
	ATF_CHECK_EQ(S->event_query(sd, e[0]), 1);
	ATF_CHECK_EQ(S->event_query(sd, e[2]), 1);
	ATF_CHECK_EQ(S->event_query(sd, f), 0);	  /* t is not s */
	ATF_CHECK_EQ(S->event_sync(sd, e[0]), 0); /* complete: returns at once */
	/* stream_sync with nothing queued returns at once too. */
	ATF_REQUIRE_EQ(S->stream_sync(sd, s), 0);
	/* device_sync waits for every stream of that device only. */
	d1 = S->default_stream(sd, 1);
	ATF_REQUIRE_EQ(S->event_record(sd, d1, &g), 0);
	ATF_REQUIRE(simwait_start(&w, sd, t, 100));
	ATF_REQUIRE_EQ(S->device_sync(sd, 0), 0);
	ATF_CHECK_MSG(simwait_blocked(&w), "device_sync returned before cuda:0's stream ran");
	ATF_CHECK_EQ(S->event_query(sd, f), 1);
	ATF_CHECK_EQ(S->event_query(sd, g), 0);
	/* A NULL stream stands for every device's transfer stream. */
	ATF_REQUIRE(simwait_start(&w, sd, NULL, 100));
	ATF_REQUIRE_EQ(S->stream_sync(sd, NULL), 0);
	ATF_CHECK_MSG(simwait_blocked(&w), "stream_sync(NULL) returned before the transfers ran");
	ATF_CHECK_EQ(S->event_query(sd, g), 1);
	ATF_CHECK_EQ(S->device_sync(sd, 2), -RSD_EINVAL);
	ATF_CHECK_EQ(S->stream_sync(sd, &g), -RSD_ETYPE);
	/* event_sync, stream_sync and device_sync all count as EVENT_SYNC. */
	ATF_CHECK_EQ(rsd_simdev_calls(sd, RSD_SIMDEV_EVENT_SYNC), 7);
	rsd_simdev_destroy(sd); /* frees streams and live events */
}

ATF_TC_WITHOUT_HEAD(auto_complete);
ATF_TC_BODY(auto_complete, tc)
{
	struct rsd_simdev *sd = make(1, true, true);
	void *s = S->default_stream(sd, 0), *e1, *e2, *e3;

	ATF_REQUIRE_EQ(S->event_record(sd, s, &e1), 0);
	ATF_CHECK_EQ(S->event_query(sd, e1), 1);
	ATF_CHECK_EQ(rsd_simdev_pending_events(sd, NULL), 0);
	rsd_simdev_set_auto_complete(sd, false);
	ATF_REQUIRE_EQ(S->event_record(sd, s, &e2), 0);
	ATF_CHECK_EQ(S->event_query(sd, e2), 0);
	ATF_CHECK_EQ(rsd_simdev_pending_events(sd, s), 1);
	/* Turning it back on lets the queued work run at once. */
	rsd_simdev_set_auto_complete(sd, true);
	ATF_CHECK_EQ(S->event_query(sd, e2), 1);
	ATF_CHECK_EQ(rsd_simdev_pending_events(sd, NULL), 0);
	ATF_REQUIRE_EQ(S->event_record(sd, s, &e3), 0);
	ATF_CHECK_EQ(S->event_query(sd, e3), 1);
	ATF_CHECK_EQ(S->event_query(sd, e2), 1);
	S->event_destroy(sd, e1);
	S->event_destroy(sd, e2);
	S->event_destroy(sd, e3);
	rsd_simdev_destroy(sd);
}

ATF_TC_WITHOUT_HEAD(events_are_pooled);
ATF_TC_BODY(events_are_pooled, tc)
{
	struct rsd_simdev *sd = make(1, false, true);
	void *s = S->default_stream(sd, 0), *e1, *e2;
	int x;

	ATF_REQUIRE_EQ(S->event_record(sd, s, &e1), 0);
	S->event_destroy(sd, e1);
	/* A destroyed event is no longer an event... */
	ATF_CHECK_EQ(S->event_query(sd, e1), -RSD_ETYPE);
	ATF_CHECK_EQ(S->event_sync(sd, e1), -RSD_ETYPE);
	S->event_destroy(sd, e1); /* twice is harmless */
	ATF_CHECK_EQ(rsd_simdev_pending_events(sd, NULL), 0);
	/* ...and its object is reused, pending again. */
	ATF_REQUIRE_EQ(S->event_record(sd, s, &e2), 0);
	ATF_CHECK_EQ(e2, e1);
	ATF_CHECK_EQ(S->event_query(sd, e2), 0);
	ATF_CHECK_EQ(S->event_record(sd, &x, &e2), -RSD_ETYPE);
	ATF_CHECK_EQ(S->event_record(sd, NULL, &e2), -RSD_ETYPE);
	ATF_CHECK_EQ(S->event_record(sd, s, NULL), -RSD_ETYPE);
	ATF_CHECK_EQ(S->event_query(sd, NULL), -RSD_ETYPE);
	S->event_destroy(sd, e1);
	rsd_simdev_destroy(sd);
}

/* Like cudaStreamDestroy: the handle goes at once, the queued work still
 * runs, and events recorded on the stream stay valid. */
ATF_TC_WITHOUT_HEAD(stream_destroy_lets_work_finish);
ATF_TC_BODY(stream_destroy_lets_work_finish, tc)
{
	struct rsd_simdev *sd = make(1, false, true);
	char src[16] = "fifteen bytes..", dst[16] = { 0 };
	void *s, *e;
	int dev = -1;

	RSD_REQUIRE_OK(rsd_simdev_stream_create(sd, 0, &s));
	ATF_REQUIRE_EQ(S->copy(sd, dst, RSD_LOC_PAGEABLE_HOST, src, RSD_LOC_PAGEABLE_HOST, 16, s),
		       0);
	ATF_REQUIRE_EQ(S->event_record(sd, s, &e), 0);
	ATF_CHECK_EQ(rsd_simdev_pending_events(sd, NULL), 1);
	rsd_simdev_stream_destroy(sd, s);
	ATF_CHECK_EQ(S->stream_device(sd, s, &dev), -RSD_ETYPE);
	ATF_CHECK_EQ(S->event_record(sd, s, &e), -RSD_ETYPE);
	ATF_CHECK_EQ(S->event_query(sd, e), 0); /* still queued, on command */
	ATF_CHECK_EQ(dst[0], 0);
	rsd_simdev_complete_all(sd);
	ATF_CHECK_EQ(S->event_query(sd, e), 1);
	ATF_CHECK_STREQ(dst, src);
	ATF_CHECK_EQ(S->event_sync(sd, e), 0);
	ATF_CHECK_EQ(rsd_simdev_pending_events(sd, NULL), 0);
	S->event_destroy(sd, e);
	/* Destroyed with nothing queued: gone at once; its events complete. */
	RSD_REQUIRE_OK(rsd_simdev_stream_create(sd, 0, &s));
	ATF_REQUIRE_EQ(S->event_record(sd, s, &e), 0);
	rsd_simdev_stream_complete(sd, s);
	rsd_simdev_stream_destroy(sd, s);
	ATF_CHECK_EQ(S->event_query(sd, e), 1);
	S->event_destroy(sd, e);
	/* The default streams are not the caller's to destroy. */
	rsd_simdev_stream_destroy(sd, S->default_stream(sd, 0));
	ATF_CHECK(S->default_stream(sd, 0) != NULL);
	ATF_REQUIRE_EQ(S->event_record(sd, S->default_stream(sd, 0), &e), 0);
	ATF_CHECK_EQ(rsd_simdev_pending_events(sd, NULL), 1);
	rsd_simdev_destroy(sd); /* drops the queued record */
}

ATF_TC_WITHOUT_HEAD(fail_nth);
ATF_TC_BODY(fail_nth, tc)
{
	struct rsd_simdev *sd = make(1, false, true);
	char a[8] = "abcdefg", b[8] = { 0 };

	rsd_simdev_fail_nth(sd, RSD_SIMDEV_COPY, 3, RSD_EDEVICE);
	ATF_CHECK_EQ(S->copy(sd, b, RSD_LOC_PAGEABLE_HOST, a, RSD_LOC_PAGEABLE_HOST, 8, NULL), 0);
	ATF_CHECK_EQ(S->copy(sd, b, RSD_LOC_PAGEABLE_HOST, a, RSD_LOC_PAGEABLE_HOST, 8, NULL), 0);
	memset(b, 0, 8);
	ATF_CHECK_EQ(S->copy(sd, b, RSD_LOC_PAGEABLE_HOST, a, RSD_LOC_PAGEABLE_HOST, 8, NULL),
		     -RSD_EDEVICE);
	ATF_CHECK_EQ(b[0], 0); /* a failed copy copies nothing */
	ATF_CHECK_EQ(rsd_last_error()->code, RSD_EDEVICE);
	ATF_CHECK_MSG(msg_has("injected failure of copy call 3"), "message: %s",
		      rsd_last_error()->message);
	ATF_CHECK_EQ(S->copy(sd, b, RSD_LOC_PAGEABLE_HOST, a, RSD_LOC_PAGEABLE_HOST, 8, NULL), 0);
	ATF_CHECK_EQ(rsd_simdev_calls(sd, RSD_SIMDEV_COPY), 4);
	/* "From now": counted from the arming, not from creation. */
	rsd_simdev_fail_nth(sd, RSD_SIMDEV_COPY, 1, -RSD_ENOMEM);
	ATF_CHECK_EQ(S->copy(sd, b, RSD_LOC_PAGEABLE_HOST, a, RSD_LOC_PAGEABLE_HOST, 8, NULL),
		     -RSD_ENOMEM);
	ATF_CHECK(msg_has("copy call 5"));
	/* n = 0 disarms. */
	rsd_simdev_fail_nth(sd, RSD_SIMDEV_COPY, 2, RSD_EDEVICE);
	rsd_simdev_fail_nth(sd, RSD_SIMDEV_COPY, 0, RSD_EDEVICE);
	for (int i = 0; i < 3; i++)
		ATF_CHECK_EQ(S->copy(sd, b, RSD_LOC_PAGEABLE_HOST, a, RSD_LOC_PAGEABLE_HOST, 8,
				     NULL),
			     0);
	/* Other ops are untouched by a copy injection. */
	rsd_simdev_fail_nth(sd, RSD_SIMDEV_EVENT_RECORD, 1, RSD_EDEVICE);
	{
		void *e = NULL;

		ATF_CHECK_EQ(S->event_record(sd, S->default_stream(sd, 0), &e), -RSD_EDEVICE);
		ATF_CHECK(msg_has("event_record call 1"));
		ATF_CHECK_EQ(rsd_simdev_pending_events(sd, NULL), 0);
		ATF_CHECK_EQ(S->event_record(sd, S->default_stream(sd, 0), &e), 0);
		ATF_CHECK_EQ(S->event_query(sd, e), 0);
	}
	rsd_simdev_destroy(sd);
}

ATF_TC_WITHOUT_HEAD(fail_all_and_sync_ops);
ATF_TC_BODY(fail_all_and_sync_ops, tc)
{
	struct rsd_simdev *sd = make(1, false, true);
	void *s = S->default_stream(sd, 0), *e;
	struct simwait w;
	uint64_t a, r;

	ATF_REQUIRE_EQ(S->event_record(sd, s, &e), 0);
	rsd_simdev_fail_all(sd, RSD_SIMDEV_EVENT_QUERY, RSD_EDEVICE);
	for (int i = 0; i < 3; i++)
		ATF_CHECK_EQ(S->event_query(sd, e), -RSD_EDEVICE);
	ATF_CHECK(msg_has("event_query call 3"));
	rsd_simdev_fail_all(sd, RSD_SIMDEV_EVENT_QUERY, 0);
	ATF_CHECK_EQ(S->event_query(sd, e), 0);

	/* A failed sync completes nothing. */
	rsd_simdev_fail_all(sd, RSD_SIMDEV_EVENT_SYNC, RSD_EDEVICE);
	ATF_CHECK_EQ(S->event_sync(sd, e), -RSD_EDEVICE);
	ATF_CHECK_EQ(S->stream_sync(sd, s), -RSD_EDEVICE);
	ATF_CHECK_EQ(S->device_sync(sd, 0), -RSD_EDEVICE);
	ATF_CHECK_EQ(S->event_query(sd, e), 0);
	rsd_simdev_fail_all(sd, RSD_SIMDEV_EVENT_SYNC, 0);
	ATF_REQUIRE(simwait_start(&w, sd, s, 50));
	ATF_CHECK_EQ(S->event_sync(sd, e), 0);
	ATF_CHECK(simwait_blocked(&w));
	ATF_CHECK_EQ(S->event_query(sd, e), 1);
	ATF_CHECK_EQ(rsd_simdev_calls(sd, RSD_SIMDEV_EVENT_SYNC), 4);

	rsd_simdev_fail_all(sd, RSD_SIMDEV_METRICS, RSD_EDEVICE);
	ATF_CHECK_EQ(S->metrics(sd, 0, &a, &r), -RSD_EDEVICE);
	ATF_CHECK(msg_has("metrics call 1"));
	rsd_simdev_fail_all(sd, RSD_SIMDEV_METRICS, 0);
	ATF_CHECK_EQ(S->metrics(sd, 0, &a, &r), 0);
	rsd_simdev_destroy(sd);
}

ATF_TC_WITHOUT_HEAD(fail_location);
ATF_TC_BODY(fail_location, tc)
{
	struct rsd_simdev *sd = make(2, false, true);
	void *p = NULL;

	rsd_simdev_fail_location(sd, cuda(1), RSD_ENOMEM);
	ATF_CHECK_EQ(S->alloc(sd, cuda(1), 100, &p), -RSD_ENOMEM);
	ATF_CHECK_EQ(p, NULL);
	ATF_CHECK_MSG(msg_has("alloc call 1 at cuda:1"), "message: %s", rsd_last_error()->message);
	ATF_CHECK_EQ(S->alloc(sd, cuda(1), 100, &p), -RSD_ENOMEM);
	ATF_CHECK_EQ(rsd_simdev_allocated_bytes(sd, 1), 0);
	ATF_REQUIRE_EQ(S->alloc(sd, cuda(0), 100, &p), 0);
	S->free(sd, cuda(0), p, 100);
	rsd_simdev_fail_location(sd, RSD_LOC_PINNED_HOST, RSD_EDEVICE);
	ATF_CHECK_EQ(S->alloc(sd, RSD_LOC_PINNED_HOST, 100, &p), -RSD_EDEVICE);
	rsd_simdev_fail_location(sd, cuda(1), 0);
	ATF_REQUIRE_EQ(S->alloc(sd, cuda(1), 100, &p), 0);
	ATF_CHECK_EQ(rsd_simdev_allocated_bytes(sd, 1), 100);
	S->free(sd, cuda(1), p, 100);
	ATF_CHECK_EQ(rsd_simdev_calls(sd, RSD_SIMDEV_ALLOC), 5);
	rsd_simdev_destroy(sd);
}

ATF_TC_WITHOUT_HEAD(pinned_memory_is_locked);
ATF_TC_BODY(pinned_memory_is_locked, tc)
{
	struct rsd_simdev *sd = make(1, false, false);
	char line[256];
	unsigned long long before = 0, after = 0, kib;
	void *p;
	FILE *f;

	f = fopen("/proc/self/status", "r");
	ATF_REQUIRE(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmLck: %llu kB", &kib) == 1)
			before = kib;
	fclose(f);
	ATF_REQUIRE_EQ(S->alloc(sd, RSD_LOC_PINNED_HOST, 1 << 20, &p), 0);
	f = fopen("/proc/self/status", "r");
	ATF_REQUIRE(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmLck: %llu kB", &kib) == 1)
			after = kib;
	fclose(f);
	ATF_CHECK_EQ(after - before, 1024); /* unpooled: exactly the request */
	S->free(sd, RSD_LOC_PINNED_HOST, p, 1 << 20);
	rsd_simdev_destroy(sd);
}

struct thr {
	struct rsd_simdev *sd;
	void *stream;
	unsigned long done;
	atomic_int *running; /* recorders still at work */
};

static void *recorder(void *arg)
{
	struct thr *t = arg;

	for (int i = 0; i < 5000; i++) {
		void *e;
		int q;

		if (S->event_record(t->sd, t->stream, &e))
			return (void *)1;
		q = S->event_query(t->sd, e);
		if (q < 0)
			return (void *)2;
		if (i % 3 == 0 && S->event_sync(t->sd, e)) {
			atomic_fetch_sub(t->running, 1);
			return (void *)3;
		}
		if (i % 3 == 0 && S->event_query(t->sd, e) != 1)
			return (void *)4;
		S->event_destroy(t->sd, e);
		t->done++;
	}
	atomic_fetch_sub(t->running, 1);
	return NULL;
}

static void *completer(void *arg)
{
	struct thr *t = arg;
	uint64_t a, r;

	/* At least 5000 rounds, and on until no recorder waits any more. */
	for (int i = 0; i < 5000 || atomic_load(t->running); i++) {
		rsd_simdev_complete_all(t->sd);
		if (i < 5000 && S->metrics(t->sd, 0, &a, &r))
			return (void *)1;
		(void)rsd_simdev_pending_events(t->sd, NULL);
	}
	return NULL;
}

ATF_TC_WITHOUT_HEAD(threads);
ATF_TC_BODY(threads, tc)
{
	struct rsd_simdev *sd = make(2, false, true);
	atomic_int running = 2;
	struct thr t[3] = { { sd, NULL, 0, &running },
			    { sd, NULL, 0, &running },
			    { sd, NULL, 0, &running } };
	pthread_t th[3];
	void *ret;

	RSD_REQUIRE_OK(rsd_simdev_stream_create(sd, 0, &t[0].stream));
	t[1].stream = S->default_stream(sd, 1);
	ATF_REQUIRE_EQ(pthread_create(&th[0], NULL, recorder, &t[0]), 0);
	ATF_REQUIRE_EQ(pthread_create(&th[1], NULL, recorder, &t[1]), 0);
	ATF_REQUIRE_EQ(pthread_create(&th[2], NULL, completer, &t[2]), 0);
	for (int i = 0; i < 3; i++) {
		ATF_REQUIRE_EQ(pthread_join(th[i], &ret), 0);
		ATF_CHECK_EQ(ret, NULL);
	}
	ATF_CHECK_EQ(t[0].done + t[1].done, 10000);
	ATF_CHECK_EQ(rsd_simdev_calls(sd, RSD_SIMDEV_EVENT_RECORD), 10000);
	ATF_CHECK_EQ(rsd_simdev_calls(sd, RSD_SIMDEV_METRICS), 5000);
	ATF_CHECK_EQ(rsd_simdev_pending_events(sd, NULL), 0);
	rsd_simdev_destroy(sd);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, create_validates_config);
	ATF_TP_ADD_TC(tp, alloc_and_metrics_pooled);
	ATF_TP_ADD_TC(tp, alloc_unpooled_reserved_equals_allocated);
	ATF_TP_ADD_TC(tp, alloc_rejects_bad_locations);
	ATF_TP_ADD_TC(tp, copies_run_when_their_work_runs);
	ATF_TP_ADD_TC(tp, stream_device_identifies_streams);
	ATF_TP_ADD_TC(tp, events_pending_until_stream_complete);
	ATF_TP_ADD_TC(tp, syncs_wait_for_their_scope);
	ATF_TP_ADD_TC(tp, auto_complete);
	ATF_TP_ADD_TC(tp, events_are_pooled);
	ATF_TP_ADD_TC(tp, stream_destroy_lets_work_finish);
	ATF_TP_ADD_TC(tp, fail_nth);
	ATF_TP_ADD_TC(tp, fail_all_and_sync_ops);
	ATF_TP_ADD_TC(tp, fail_location);
	ATF_TP_ADD_TC(tp, pinned_memory_is_locked);
	ATF_TP_ADD_TC(tp, threads);
	return atf_no_error();
}
