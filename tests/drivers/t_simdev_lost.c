// SPDX-License-Identifier: MIT
/*
 * A simulated device that fails for good (rsd_simdev_lose_device): the exact
 * code of every op on the lost device, its streams, events and memory; its
 * pending events, which never complete but report the loss; waiters that
 * return when the device is lost under them; copies queued elsewhere that
 * touch its memory; streams ordered after its events; and the other device
 * and pinned host memory, which work as before.
 */
#include <atf-c.h>
#include "../check.h"
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include <rsd/rsd.h>

static const struct rsd_device_ops *S;

static struct rsd_simdev *make(void)
{
	struct rsd_simdev_config cfg = { .ndevices = 2, .pooled = true };
	struct rsd_simdev *sd = NULL;

	/* Two devices, on command: nothing runs unless a test completes it. */
	S = rsd_simdev_ops();
	RSD_REQUIRE_OK(rsd_simdev_create(&cfg, &sd));
	return sd;
}

static const struct rsd_location CUDA0 = { RSD_CUDA, 0 }, CUDA1 = { RSD_CUDA, 1 };

#define CHECK_MSG(s)                                                                             \
	ATF_CHECK_MSG(strstr(rsd_last_error()->message, s) != NULL, "message lacks '%s': %s", s, \
		      rsd_last_error()->message)

/* call fails with -RSD_EDEVLOST naming cuda:0. */
#define CHECK_LOST(call)                           \
	do {                                       \
		RSD_CHECK_ERR(RSD_EDEVLOST, call); \
		CHECK_MSG("cuda:0");               \
	} while (0)

static void noop(void *arg)
{
	(void)arg;
}

ATF_TC_WITHOUT_HEAD(every_op_on_the_lost_device_fails);
ATF_TC_BODY(every_op_on_the_lost_device_fails, tc)
{
	struct rsd_simdev *sd = make();
	struct rsd_simdev_access acc = { 0 };
	unsigned char *h, *p0, *p1, *q = NULL;
	void *s0, *s1, *e0, *e1, *ev = (void *)1, *x = (void *)1;
	uint64_t al = 7, re = 7, before;
	int dev = -1;

	RSD_REQUIRE_OK(S->alloc(sd, RSD_LOC_PINNED_HOST, 4096, (void **)&h));
	RSD_REQUIRE_OK(S->alloc(sd, CUDA0, 4096, (void **)&p0));
	RSD_REQUIRE_OK(S->alloc(sd, CUDA1, 4096, (void **)&p1));
	RSD_REQUIRE_OK(rsd_simdev_stream_create(sd, 0, &s0));
	RSD_REQUIRE_OK(rsd_simdev_stream_create(sd, 1, &s1));
	memset(h, 0xab, 4096);
	memset(p0, 0x11, 4096);
	/* Queued on cuda:0 and never run (on-command mode). */
	RSD_REQUIRE_OK(S->copy(sd, p0, CUDA0, h, RSD_LOC_PINNED_HOST, 4096, s0));
	RSD_REQUIRE_OK(S->event_record(sd, s0, &e0));
	ATF_REQUIRE_EQ(S->event_query(sd, e0), 0);
	RSD_REQUIRE_OK(S->event_record(sd, s1, &e1));
	ATF_CHECK(!S->device_lost(sd, 0));

	RSD_REQUIRE_OK(rsd_simdev_lose_device(sd, 0));
	ATF_CHECK(S->device_lost(sd, 0));
	ATF_CHECK(!S->device_lost(sd, 1));
	ATF_CHECK(rsd_simdev_device_lost(sd, 0));
	ATF_CHECK(!rsd_simdev_device_lost(sd, 1));

	CHECK_LOST(S->alloc(sd, CUDA0, 64, (void **)&q));
	ATF_CHECK(q == NULL);
	CHECK_LOST(S->copy(sd, p0, CUDA0, h, RSD_LOC_PINNED_HOST, 64, NULL));
	/* Its memory is unreadable: a copy from it fails, to host or peer. */
	CHECK_LOST(S->copy(sd, h, RSD_LOC_PINNED_HOST, p0, CUDA0, 64, NULL));
	CHECK_LOST(S->copy(sd, p1, CUDA1, p0, CUDA0, 64, s1));
	/* A copy between sound memories on a stream of the lost device. */
	CHECK_LOST(S->copy(sd, p1, CUDA1, h, RSD_LOC_PINNED_HOST, 64, s0));
	ATF_CHECK(S->transfer_stream(sd, CUDA0, RSD_LOC_PINNED_HOST) == NULL);
	ATF_CHECK_EQ(rsd_last_error()->code, RSD_EDEVLOST);
	ATF_CHECK(S->transfer_stream(sd, RSD_LOC_PINNED_HOST, CUDA0) == NULL);
	ATF_CHECK(S->transfer_stream(sd, CUDA1, CUDA0) == NULL);
	CHECK_LOST(S->stream_device(sd, s0, &dev));
	ATF_CHECK_EQ(dev, -1);
	CHECK_LOST(S->stream_sync(sd, s0));
	CHECK_LOST(S->device_sync(sd, 0));
	CHECK_LOST(S->event_record(sd, s0, &ev));
	ATF_CHECK(ev == (void *)1);
	/* The pending event never completes: it reports the loss, and its
	 * sync returns at once. */
	CHECK_LOST(S->event_query(sd, e0));
	CHECK_LOST(S->event_sync(sd, e0));
	CHECK_LOST(S->stream_wait_event(sd, s1, e0));
	CHECK_LOST(S->stream_wait_event(sd, s0, e1));
	CHECK_LOST(S->metrics(sd, 0, &al, &re));
	ATF_CHECK_EQ(al, 7);
	CHECK_LOST(rsd_simdev_stream_create(sd, 0, &x));
	ATF_CHECK(x == (void *)1);
	CHECK_LOST(rsd_simdev_launch_host_func(sd, s0, noop, NULL));
	CHECK_LOST(rsd_simdev_launch_kernel(sd, s0, 1000, &acc, 0, NULL, NULL));
	/* The queued copy no longer counts as reading h: freeing h does not
	 * abort, and once its stream drains the copy never ran. */
	S->free(sd, RSD_LOC_PINNED_HOST, h, 4096);
	rsd_simdev_complete_all(sd);
	ATF_CHECK_EQ(p0[0], 0x11);
	ATF_CHECK_EQ(p0[4095], 0x11);
	CHECK_LOST(S->event_query(sd, e0));
	/* Its memory is never given back. */
	before = rsd_simdev_allocated_bytes(sd, 0);
	ATF_CHECK(before >= 4096);
	S->free(sd, CUDA0, p0, 4096);
	ATF_CHECK_EQ(rsd_simdev_allocated_bytes(sd, 0), before);
	/* The transfer streams of every device: the sound ones drained, then
	 * the loss. */
	CHECK_LOST(S->stream_sync(sd, NULL));
	S->event_destroy(sd, e0);
	S->event_destroy(sd, e1);
	rsd_simdev_stream_destroy(sd, s0);
	rsd_simdev_stream_destroy(sd, s1);
	S->free(sd, CUDA1, p1, 4096);
	rsd_simdev_destroy(sd);
}

ATF_TC_WITHOUT_HEAD(the_other_device_works_as_before);
ATF_TC_BODY(the_other_device_works_as_before, tc)
{
	struct rsd_simdev *sd = make();
	unsigned char *h, *g, *p1;
	uint64_t al = 0, re = 0;
	void *s1, *e1;
	int dev = -1;

	RSD_REQUIRE_OK(rsd_simdev_lose_device(sd, 0));
	RSD_REQUIRE_OK(S->alloc(sd, RSD_LOC_PINNED_HOST, 4096, (void **)&h));
	RSD_REQUIRE_OK(S->alloc(sd, RSD_LOC_PINNED_HOST, 4096, (void **)&g));
	RSD_REQUIRE_OK(S->alloc(sd, CUDA1, 4096, (void **)&p1));
	RSD_REQUIRE_OK(rsd_simdev_stream_create(sd, 1, &s1));
	memset(h, 0x5a, 4096);
	memset(g, 0, 4096);
	RSD_CHECK_OK(S->copy(sd, p1, CUDA1, h, RSD_LOC_PINNED_HOST, 4096, s1));
	RSD_CHECK_OK(S->copy(sd, g, RSD_LOC_PINNED_HOST, p1, CUDA1, 4096, s1));
	RSD_REQUIRE_OK(S->event_record(sd, s1, &e1));
	ATF_CHECK_EQ(S->event_query(sd, e1), 0);
	rsd_simdev_stream_complete(sd, s1);
	ATF_CHECK_EQ(S->event_query(sd, e1), 1);
	RSD_CHECK_OK(S->event_sync(sd, e1));
	RSD_CHECK_OK(S->stream_sync(sd, s1));
	RSD_CHECK_OK(S->device_sync(sd, 1));
	RSD_CHECK_OK(S->stream_device(sd, s1, &dev));
	ATF_CHECK_EQ(dev, 1);
	RSD_CHECK_OK(S->metrics(sd, 1, &al, &re));
	ATF_CHECK_EQ(al, 4096);
	ATF_CHECK(S->transfer_stream(sd, CUDA1, RSD_LOC_PINNED_HOST) != NULL);
	ATF_CHECK_EQ(g[0], 0x5a);
	ATF_CHECK_EQ(g[4095], 0x5a);
	S->event_destroy(sd, e1);
	rsd_simdev_stream_destroy(sd, s1);
	S->free(sd, CUDA1, p1, 4096);
	ATF_CHECK_EQ(rsd_simdev_allocated_bytes(sd, 1), 0);
	S->free(sd, RSD_LOC_PINNED_HOST, h, 4096);
	S->free(sd, RSD_LOC_PINNED_HOST, g, 4096);
	rsd_simdev_destroy(sd);
}

/* As a CUDA context after a sticky error: an event that had completed
 * before the loss reports it too. */
ATF_TC_WITHOUT_HEAD(complete_events_report_the_loss_too);
ATF_TC_BODY(complete_events_report_the_loss_too, tc)
{
	struct rsd_simdev *sd = make();
	void *s0, *e0;

	RSD_REQUIRE_OK(rsd_simdev_stream_create(sd, 0, &s0));
	RSD_REQUIRE_OK(S->event_record(sd, s0, &e0));
	rsd_simdev_complete_all(sd);
	ATF_REQUIRE_EQ(S->event_query(sd, e0), 1);
	RSD_REQUIRE_OK(rsd_simdev_lose_device(sd, 0));
	CHECK_LOST(S->event_query(sd, e0));
	CHECK_LOST(S->event_sync(sd, e0));
	/* Its stream is destroyed and drained: the event still reports it. */
	rsd_simdev_stream_destroy(sd, s0);
	CHECK_LOST(S->event_query(sd, e0));
	S->event_destroy(sd, e0);
	rsd_simdev_destroy(sd);
}

/* A copy queued on cuda:1's stream before the loss, reading cuda:0: it
 * fails when it runs, writes nothing, and cuda:1's later events on that
 * stream report the loss; events before it do not. */
ATF_TC_WITHOUT_HEAD(copy_queued_elsewhere_from_lost_memory_fails);
ATF_TC_BODY(copy_queued_elsewhere_from_lost_memory_fails, tc)
{
	struct rsd_simdev *sd = make();
	unsigned char *p0, *p1;
	void *s1, *before, *after;

	RSD_REQUIRE_OK(S->alloc(sd, CUDA0, 4096, (void **)&p0));
	RSD_REQUIRE_OK(S->alloc(sd, CUDA1, 4096, (void **)&p1));
	memset(p0, 0x77, 4096);
	memset(p1, 0x22, 4096);
	RSD_REQUIRE_OK(rsd_simdev_stream_create(sd, 1, &s1));
	RSD_REQUIRE_OK(S->event_record(sd, s1, &before));
	RSD_REQUIRE_OK(S->copy(sd, p1, CUDA1, p0, CUDA0, 4096, s1));
	RSD_REQUIRE_OK(S->event_record(sd, s1, &after));
	RSD_REQUIRE_OK(rsd_simdev_lose_device(sd, 0));
	rsd_simdev_stream_complete(sd, s1);
	ATF_CHECK_EQ(S->event_query(sd, before), 1);
	CHECK_LOST(S->event_query(sd, after));
	CHECK_MSG("touched");
	CHECK_LOST(S->event_sync(sd, after));
	ATF_CHECK_EQ(p1[0], 0x22);
	ATF_CHECK_EQ(p1[4095], 0x22);
	/* cuda:1 itself is sound: new work on a new stream goes on. */
	ATF_CHECK(!S->device_lost(sd, 1));
	RSD_CHECK_OK(S->device_sync(sd, 1));
	S->event_destroy(sd, before);
	S->event_destroy(sd, after);
	rsd_simdev_stream_destroy(sd, s1);
	S->free(sd, CUDA1, p1, 4096);
	rsd_simdev_destroy(sd);
}

/* cuda:1's stream ordered after a pending event of cuda:0: the loss does
 * not block it for ever; its later events report the loss. A wait for an
 * event that completed before the loss passes nothing on. */
ATF_TC_WITHOUT_HEAD(stream_waiting_on_a_lost_event_inherits_the_loss);
ATF_TC_BODY(stream_waiting_on_a_lost_event_inherits_the_loss, tc)
{
	struct rsd_simdev *sd = make();
	void *s0, *s1, *t1, *done0, *pend0, *e1, *f1;

	RSD_REQUIRE_OK(rsd_simdev_stream_create(sd, 0, &s0));
	RSD_REQUIRE_OK(rsd_simdev_stream_create(sd, 1, &s1));
	RSD_REQUIRE_OK(rsd_simdev_stream_create(sd, 1, &t1));
	RSD_REQUIRE_OK(S->event_record(sd, s0, &done0));
	rsd_simdev_complete_all(sd);
	RSD_REQUIRE_OK(S->event_record(sd, s0, &pend0));
	RSD_REQUIRE_OK(S->stream_wait_event(sd, s1, pend0));
	RSD_REQUIRE_OK(S->event_record(sd, s1, &e1));
	/* done0 completed: cudaStreamWaitEvent on it queues nothing. */
	RSD_REQUIRE_OK(S->stream_wait_event(sd, t1, done0));
	RSD_REQUIRE_OK(S->event_record(sd, t1, &f1));
	RSD_REQUIRE_OK(rsd_simdev_lose_device(sd, 0));
	rsd_simdev_stream_complete(sd, s1);
	rsd_simdev_stream_complete(sd, t1);
	CHECK_LOST(S->event_query(sd, e1));
	ATF_CHECK_EQ(S->event_query(sd, f1), 1);
	ATF_CHECK_EQ(rsd_simdev_pending_events(sd, s1), 0);
	S->event_destroy(sd, done0);
	S->event_destroy(sd, pend0);
	S->event_destroy(sd, e1);
	S->event_destroy(sd, f1);
	rsd_simdev_stream_destroy(sd, s0);
	rsd_simdev_stream_destroy(sd, s1);
	rsd_simdev_stream_destroy(sd, t1);
	rsd_simdev_destroy(sd);
}

struct waiter {
	struct rsd_simdev *sd;
	void *event; /* NULL: device_sync of cuda:0 */
	int rc, code;
	atomic_bool returned;
};

static void *wait_thread(void *p)
{
	struct waiter *w = p;

	w->rc = w->event ? S->event_sync(w->sd, w->event) : S->device_sync(w->sd, 0);
	w->code = rsd_last_error()->code;
	atomic_store(&w->returned, true);
	return NULL;
}

/* Threads waiting on cuda:0's work (which nobody completes, on command)
 * return when the device is lost under them, with the loss. */
ATF_TC_WITHOUT_HEAD(waiters_return_when_the_device_is_lost);
ATF_TC_BODY(waiters_return_when_the_device_is_lost, tc)
{
	struct rsd_simdev *sd = make();
	struct waiter w[3] = { { .sd = sd }, { .sd = sd }, { .sd = sd } };
	struct timespec ms50 = { 0, 50 * 1000 * 1000 };
	pthread_t t[3];
	void *s0, *e0;

	RSD_REQUIRE_OK(rsd_simdev_stream_create(sd, 0, &s0));
	RSD_REQUIRE_OK(S->event_record(sd, s0, &e0));
	w[0].event = w[1].event = e0;
	for (int i = 0; i < 3; i++)
		ATF_REQUIRE_EQ(pthread_create(&t[i], NULL, wait_thread, &w[i]), 0);
	nanosleep(&ms50, NULL);
	for (int i = 0; i < 3; i++)
		ATF_CHECK(!atomic_load(&w[i].returned));
	RSD_REQUIRE_OK(rsd_simdev_lose_device(sd, 0));
	for (int i = 0; i < 3; i++) {
		pthread_join(t[i], NULL);
		ATF_CHECK_EQ(w[i].rc, -RSD_EDEVLOST);
		ATF_CHECK_EQ(w[i].code, RSD_EDEVLOST);
	}
	S->event_destroy(sd, e0);
	rsd_simdev_stream_destroy(sd, s0);
	rsd_simdev_destroy(sd);
}

ATF_TC_WITHOUT_HEAD(bad_arguments_and_losing_twice);
ATF_TC_BODY(bad_arguments_and_losing_twice, tc)
{
	struct rsd_simdev *sd = make();

	RSD_CHECK_ERR(RSD_ETYPE, rsd_simdev_lose_device(NULL, 0));
	RSD_CHECK_ERR(RSD_EINVAL, rsd_simdev_lose_device(sd, 2));
	CHECK_MSG("no device 2");
	RSD_CHECK_ERR(RSD_EINVAL, rsd_simdev_lose_device(sd, -1));
	ATF_CHECK(!rsd_simdev_device_lost(sd, 0));
	RSD_CHECK_OK(rsd_simdev_lose_device(sd, 1));
	RSD_CHECK_OK(rsd_simdev_lose_device(sd, 1));
	ATF_CHECK(rsd_simdev_device_lost(sd, 1));
	ATF_CHECK(!rsd_simdev_device_lost(sd, 0));
	ATF_CHECK(!rsd_simdev_device_lost(sd, 2));
	ATF_CHECK(!rsd_simdev_device_lost(NULL, 0));
	ATF_CHECK(!S->device_lost(sd, -1));
	rsd_simdev_destroy(sd);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, every_op_on_the_lost_device_fails);
	ATF_TP_ADD_TC(tp, the_other_device_works_as_before);
	ATF_TP_ADD_TC(tp, complete_events_report_the_loss_too);
	ATF_TP_ADD_TC(tp, copy_queued_elsewhere_from_lost_memory_fails);
	ATF_TP_ADD_TC(tp, stream_waiting_on_a_lost_event_inherits_the_loss);
	ATF_TP_ADD_TC(tp, waiters_return_when_the_device_is_lost);
	ATF_TP_ADD_TC(tp, bad_arguments_and_losing_twice);
	return atf_no_error();
}
