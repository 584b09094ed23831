// SPDX-License-Identifier: MIT
/*
 * The simulated device's stream model: work queued per stream and run in
 * order, the three progress modes (on command, immediate, background with a
 * per-item delay) and switching between them, host functions, what a
 * simulator being destroyed does with queued work, the abort on freeing
 * memory a queued copy still uses, the unpinned-host switch that makes
 * the driver's pinned check refuse pinned allocations, and gates.
 */
#include <atf-c.h>
#include "../check.h"
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rsd/rsd.h>

#include "../simwait.h"
#include "drivers/simdev.h" /* rsd__sim_kicks() */

static const struct rsd_device_ops *S;

static struct rsd_simdev *make_mode(int ndevices, enum rsd_simdev_progress mode, uint64_t delay_ns,
				    bool pooled)
{
	struct rsd_simdev_config cfg = { .ndevices = ndevices,
					 .pooled = pooled,
					 .progress = mode,
					 .delay_ns = delay_ns };
	struct rsd_simdev *sd = NULL;

	S = rsd_simdev_ops();
	RSD_REQUIRE_OK(rsd_simdev_create(&cfg, &sd));
	return sd;
}

static struct rsd_location cuda(int d)
{
	struct rsd_location l = { RSD_CUDA, d };

	return l;
}

/* A host function's record of its calls. */
struct trail {
	pthread_mutex_t lock;
	int order[16];
	int n;
	pthread_t thread[16];
	const unsigned char *watch; /* a byte it reads when it runs */
	unsigned char seen[16];
};

struct mark {
	struct trail *t;
	int id;
};

static void note_call(void *arg)
{
	struct mark *m = arg;
	struct trail *t = m->t;

	pthread_mutex_lock(&t->lock);
	if (t->n < 16) {
		t->thread[t->n] = pthread_self();
		t->seen[t->n] = t->watch ? *t->watch : 0;
		t->order[t->n++] = m->id;
	}
	pthread_mutex_unlock(&t->lock);
}

static int calls_of(struct trail *t)
{
	int n;

	pthread_mutex_lock(&t->lock);
	n = t->n;
	pthread_mutex_unlock(&t->lock);
	return n;
}

static void trail_init(struct trail *t)
{
	memset(t, 0, sizeof(*t));
	pthread_mutex_init(&t->lock, NULL);
}

/* On command: a host function runs in stream order, only when the stream is
 * completed, on the completing thread; it sees the copy queued before it
 * done and the one queued after it not yet. */
ATF_TC_WITHOUT_HEAD(host_func_on_command);
ATF_TC_BODY(host_func_on_command, tc)
{
	struct rsd_simdev *sd = make_mode(1, RSD_SIMDEV_ON_COMMAND, 0, true);
	unsigned char a = 1, b = 2, c = 3, d = 4;
	struct trail t;
	struct mark m1, m2;
	void *s;

	trail_init(&t);
	m1 = (struct mark){ &t, 1 };
	m2 = (struct mark){ &t, 2 };
	t.watch = &b;
	RSD_REQUIRE_OK(rsd_simdev_stream_create(sd, 0, &s));
	ATF_REQUIRE_EQ(S->copy(sd, &b, RSD_LOC_PAGEABLE_HOST, &a, RSD_LOC_PAGEABLE_HOST, 1, s), 0);
	RSD_REQUIRE_OK(rsd_simdev_launch_host_func(sd, s, note_call, &m1));
	ATF_REQUIRE_EQ(S->copy(sd, &b, RSD_LOC_PAGEABLE_HOST, &c, RSD_LOC_PAGEABLE_HOST, 1, s), 0);
	RSD_REQUIRE_OK(rsd_simdev_launch_host_func(sd, s, note_call, &m2));
	ATF_REQUIRE_EQ(S->copy(sd, &d, RSD_LOC_PAGEABLE_HOST, &b, RSD_LOC_PAGEABLE_HOST, 1, s), 0);
	ATF_CHECK_EQ(calls_of(&t), 0);
	ATF_CHECK_EQ(b, 2);
	rsd_simdev_stream_complete(sd, S->default_stream(sd, 0)); /* not s */
	ATF_CHECK_EQ(calls_of(&t), 0);
	rsd_simdev_stream_complete(sd, s);
	ATF_REQUIRE_EQ(calls_of(&t), 2);
	ATF_CHECK_EQ(t.order[0], 1);
	ATF_CHECK_EQ(t.order[1], 2);
	ATF_CHECK_EQ(t.seen[0], 1); /* a had been copied into b */
	ATF_CHECK_EQ(t.seen[1], 3); /* then c */
	ATF_CHECK(pthread_equal(t.thread[0], pthread_self()));
	ATF_CHECK_EQ(d, 3); /* the last copy read b after both */
	rsd_simdev_stream_destroy(sd, s);
	rsd_simdev_destroy(sd);
}

ATF_TC_WITHOUT_HEAD(host_func_errors);
ATF_TC_BODY(host_func_errors, tc)
{
	struct rsd_simdev *sd = make_mode(1, RSD_SIMDEV_IMMEDIATE, 0, true);
	struct trail t;
	struct mark m;
	int x;

	trail_init(&t);
	m = (struct mark){ &t, 1 };
	RSD_CHECK_ERR(RSD_ETYPE,
		      rsd_simdev_launch_host_func(NULL, S->default_stream(sd, 0), note_call, &m));
	RSD_CHECK_ERR(RSD_ETYPE,
		      rsd_simdev_launch_host_func(sd, S->default_stream(sd, 0), NULL, &m));
	RSD_CHECK_ERR(RSD_ETYPE, rsd_simdev_launch_host_func(sd, &x, note_call, &m));
	ATF_CHECK(strstr(rsd_last_error()->message, "not a stream") != NULL);
	RSD_CHECK_ERR(RSD_ETYPE, rsd_simdev_launch_host_func(sd, NULL, note_call, &m));
	ATF_CHECK_EQ(calls_of(&t), 0);
	rsd_simdev_destroy(sd);
}

/* Immediate: the work has run when the queueing call returns, on the
 * queueing thread. */
ATF_TC_WITHOUT_HEAD(immediate_mode);
ATF_TC_BODY(immediate_mode, tc)
{
	struct rsd_simdev *sd = make_mode(1, RSD_SIMDEV_IMMEDIATE, 0, true);
	char src[32] = "immediate copy", *dst;
	struct trail t;
	struct mark m;
	void *e;

	trail_init(&t);
	m = (struct mark){ &t, 7 };
	ATF_REQUIRE_EQ(S->alloc(sd, cuda(0), 32, (void **)&dst), 0);
	memset(dst, 0, 32);
	ATF_REQUIRE_EQ(S->copy(sd, dst, cuda(0), src, RSD_LOC_PAGEABLE_HOST, 32, NULL), 0);
	ATF_CHECK_STREQ(dst, src);
	ATF_REQUIRE_EQ(S->event_record(sd, S->default_stream(sd, 0), &e), 0);
	ATF_CHECK_EQ(S->event_query(sd, e), 1);
	RSD_REQUIRE_OK(rsd_simdev_launch_host_func(sd, S->default_stream(sd, 0), note_call, &m));
	ATF_REQUIRE_EQ(calls_of(&t), 1);
	ATF_CHECK(pthread_equal(t.thread[0], pthread_self()));
	ATF_CHECK_EQ(rsd_simdev_pending_events(sd, NULL), 0);
	S->event_destroy(sd, e);
	S->free(sd, cuda(0), dst, 32);
	rsd_simdev_destroy(sd);
}

/* A host function queueing more work on its own stream (immediate mode):
 * that work runs after it, not inside it, and nothing deadlocks. */
struct nested {
	struct rsd_simdev *sd;
	void *stream;
	struct trail *t;
	struct mark inner;
	int rc;
	int calls_inside;
};

static void queue_more(void *arg)
{
	struct nested *n = arg;

	n->rc = rsd_simdev_launch_host_func(n->sd, n->stream, note_call, &n->inner);
	n->calls_inside = calls_of(n->t);
}

ATF_TC_WITHOUT_HEAD(host_func_queues_on_own_stream);
ATF_TC_BODY(host_func_queues_on_own_stream, tc)
{
	struct rsd_simdev *sd = make_mode(1, RSD_SIMDEV_IMMEDIATE, 0, true);
	struct trail t;
	struct nested n;

	trail_init(&t);
	n = (struct nested){ sd, S->default_stream(sd, 0), &t, { &t, 9 }, -1, -1 };
	RSD_REQUIRE_OK(rsd_simdev_launch_host_func(sd, n.stream, queue_more, &n));
	ATF_CHECK_EQ(n.rc, 0);
	ATF_CHECK_EQ(n.calls_inside, 0); /* not run inside the outer function */
	ATF_REQUIRE_EQ(calls_of(&t), 1); /* run before the launch returned */
	ATF_CHECK_EQ(t.order[0], 9);
	rsd_simdev_destroy(sd);
}

/* Background: a worker runs each item delay_ns after it became runnable;
 * waiting blocks for it, on another thread than the caller's. */
ATF_TC_WITHOUT_HEAD(background_mode);
ATF_TC_BODY(background_mode, tc)
{
	const uint64_t delay = 40 * 1000000ull;
	struct rsd_simdev *sd = make_mode(2, RSD_SIMDEV_BACKGROUND, delay, true);
	char src[16] = "in background", dst[16] = { 0 };
	struct mark m[3];
	struct trail t;
	uint64_t t0, t1;
	void *s, *e, *e1;

	trail_init(&t);
	for (int i = 0; i < 3; i++)
		m[i] = (struct mark){ &t, i };
	RSD_REQUIRE_OK(rsd_simdev_stream_create(sd, 1, &s));
	t0 = simwait_now_ns();
	ATF_REQUIRE_EQ(S->copy(sd, dst, RSD_LOC_PAGEABLE_HOST, src, RSD_LOC_PAGEABLE_HOST, 16, s),
		       0);
	ATF_REQUIRE_EQ(S->event_record(sd, s, &e), 0);
	ATF_CHECK_EQ(S->event_query(sd, e), 0); /* not yet: the delay */
	ATF_CHECK_EQ(dst[0], 0);
	ATF_REQUIRE_EQ(S->event_sync(sd, e), 0);
	t1 = simwait_now_ns();
	ATF_CHECK_STREQ(dst, src);
	ATF_CHECK_EQ(S->event_query(sd, e), 1);
	/* Two items, each a full delay after the one before it finished. */
	ATF_CHECK_MSG(t1 - t0 >= 2 * delay, "event_sync returned after %llu ns",
		      (unsigned long long)(t1 - t0));
	/* Host functions run in order on the worker. */
	for (int i = 0; i < 3; i++)
		RSD_REQUIRE_OK(rsd_simdev_launch_host_func(sd, s, note_call, &m[i]));
	ATF_REQUIRE_EQ(S->stream_sync(sd, s), 0);
	ATF_REQUIRE_EQ(calls_of(&t), 3);
	for (int i = 0; i < 3; i++) {
		ATF_CHECK_EQ(t.order[i], i);
		ATF_CHECK(!pthread_equal(t.thread[i], pthread_self()));
	}
	/* Back to on command: new work waits for the test again. */
	rsd_simdev_set_progress(sd, RSD_SIMDEV_ON_COMMAND, 0);
	ATF_REQUIRE_EQ(S->event_record(sd, s, &e1), 0);
	usleep(20000);
	ATF_CHECK_EQ(S->event_query(sd, e1), 0);
	rsd_simdev_stream_complete(sd, s);
	ATF_CHECK_EQ(S->event_query(sd, e1), 1);
	S->event_destroy(sd, e);
	S->event_destroy(sd, e1);
	rsd_simdev_stream_destroy(sd, s);
	rsd_simdev_destroy(sd);
}

/* Switching from on command to background or immediate lets work already
 * queued proceed without anybody completing it. */
ATF_TC_WITHOUT_HEAD(switching_mode_releases_queued_work);
ATF_TC_BODY(switching_mode_releases_queued_work, tc)
{
	struct rsd_simdev *sd = make_mode(1, RSD_SIMDEV_ON_COMMAND, 0, false);
	void *s = NULL, *e, *e2;

	S = rsd_simdev_ops();
	RSD_REQUIRE_OK(rsd_simdev_stream_create(sd, 0, &s));
	ATF_REQUIRE_EQ(S->event_record(sd, s, &e), 0);
	usleep(10000);
	ATF_CHECK_EQ(S->event_query(sd, e), 0);
	rsd_simdev_set_progress(sd, RSD_SIMDEV_BACKGROUND, 1000000);
	ATF_REQUIRE_EQ(S->event_sync(sd, e), 0); /* the worker completes it */
	ATF_CHECK_EQ(S->event_query(sd, e), 1);
	rsd_simdev_set_auto_complete(sd, false);
	ATF_REQUIRE_EQ(S->event_record(sd, s, &e2), 0);
	ATF_CHECK_EQ(S->event_query(sd, e2), 0);
	rsd_simdev_set_progress(sd, RSD_SIMDEV_IMMEDIATE, 0);
	ATF_CHECK_EQ(S->event_query(sd, e2), 1);
	/* Out-of-range modes are ignored. */
	rsd_simdev_set_progress(sd, (enum rsd_simdev_progress)7, 0);
	rsd_simdev_set_progress(NULL, RSD_SIMDEV_ON_COMMAND, 0);
	ATF_REQUIRE_EQ(S->event_record(sd, s, &e), 0);
	ATF_CHECK_EQ(S->event_query(sd, e), 1);
	S->event_destroy(sd, e);
	S->event_destroy(sd, e2);
	rsd_simdev_stream_destroy(sd, s);
	rsd_simdev_destroy(sd);
}

/* A destroyed stream's work still runs in background mode, and a waiting
 * event on it returns. */
ATF_TC_WITHOUT_HEAD(background_drains_destroyed_stream);
ATF_TC_BODY(background_drains_destroyed_stream, tc)
{
	struct rsd_simdev *sd = make_mode(1, RSD_SIMDEV_BACKGROUND, 5000000, true);
	struct trail t;
	struct mark m;
	void *s, *e;

	trail_init(&t);
	m = (struct mark){ &t, 3 };
	RSD_REQUIRE_OK(rsd_simdev_stream_create(sd, 0, &s));
	RSD_REQUIRE_OK(rsd_simdev_launch_host_func(sd, s, note_call, &m));
	ATF_REQUIRE_EQ(S->event_record(sd, s, &e), 0);
	rsd_simdev_stream_destroy(sd, s);
	ATF_REQUIRE_EQ(S->event_sync(sd, e), 0);
	ATF_CHECK_EQ(calls_of(&t), 1);
	ATF_CHECK_EQ(S->event_query(sd, e), 1);
	S->event_destroy(sd, e);
	rsd_simdev_destroy(sd);
}

/* Destroying the simulator drops work still queued: it is never run. */
ATF_TC_WITHOUT_HEAD(destroy_drops_queued_work);
ATF_TC_BODY(destroy_drops_queued_work, tc)
{
	struct rsd_simdev *sd = make_mode(1, RSD_SIMDEV_ON_COMMAND, 0, true);
	struct trail t;
	struct mark m;
	void *s;

	trail_init(&t);
	m = (struct mark){ &t, 1 };
	RSD_REQUIRE_OK(rsd_simdev_stream_create(sd, 0, &s));
	RSD_REQUIRE_OK(rsd_simdev_launch_host_func(sd, s, note_call, &m));
	RSD_REQUIRE_OK(rsd_simdev_launch_host_func(sd, S->default_stream(sd, 0), note_call, &m));
	rsd_simdev_destroy(sd);
	ATF_CHECK_EQ(calls_of(&t), 0);
}

/* Freeing simulated memory a queued copy still reads is the caller's bug,
 * which a GPU would turn into corruption: the simulator aborts. */
ATF_TC_WITHOUT_HEAD(free_under_queued_copy_aborts);
ATF_TC_BODY(free_under_queued_copy_aborts, tc)
{
	int status = 0;
	pid_t pid;

	pid = fork();
	ATF_REQUIRE(pid >= 0);
	if (pid == 0) {
		struct rsd_simdev *sd = make_mode(1, RSD_SIMDEV_ON_COMMAND, 0, true);
		char out[64];
		void *d;

		if (!freopen("/dev/null", "w", stderr))
			_exit(3);
		if (S->alloc(sd, cuda(0), 64, &d))
			_exit(2);
		if (S->copy(sd, out, RSD_LOC_PAGEABLE_HOST, (char *)d + 8, cuda(0), 16, NULL))
			_exit(2);
		S->free(sd, cuda(0), d, 64);
		_exit(0);
	}
	ATF_REQUIRE_EQ(waitpid(pid, &status, 0), pid);
	ATF_CHECK_MSG(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "child status %#x",
		      status);

	/* Once the copy has run, the same free is fine. */
	{
		struct rsd_simdev *sd = make_mode(1, RSD_SIMDEV_ON_COMMAND, 0, true);
		char out[64];
		void *d;

		ATF_REQUIRE_EQ(S->alloc(sd, cuda(0), 64, &d), 0);
		ATF_REQUIRE_EQ(S->copy(sd, out, RSD_LOC_PAGEABLE_HOST, d, cuda(0), 16, NULL), 0);
		rsd_simdev_complete_all(sd);
		S->free(sd, cuda(0), d, 64);
		ATF_CHECK_EQ(rsd_simdev_allocated_bytes(sd, 0), 0);
		rsd_simdev_destroy(sd);
	}
}

/* While unpinned_host is on, pinned memory comes back pageable and the
 * driver's own check refuses it: -RSD_EDEVICE, nothing returned. */
ATF_TC_WITHOUT_HEAD(unpinned_host_is_refused);
ATF_TC_BODY(unpinned_host_is_refused, tc)
{
	for (int pooled = 0; pooled < 2; pooled++) {
		struct rsd_simdev *sd = make_mode(1, RSD_SIMDEV_IMMEDIATE, 0, pooled);
		void *p = (void *)1, *q;

		rsd_simdev_set_unpinned_host(sd, true);
		ATF_CHECK_EQ(S->alloc(sd, RSD_LOC_PINNED_HOST, 64 << 10, &p), -RSD_EDEVICE);
		ATF_CHECK_EQ(p, (void *)1);
		ATF_CHECK_EQ(rsd_last_error()->code, RSD_EDEVICE);
		ATF_CHECK_MSG(strstr(rsd_last_error()->message,
				     "pinned host storage is unavailable: simulated device") !=
				      NULL,
			      "message: %s", rsd_last_error()->message);
		ATF_CHECK(strstr(rsd_last_error()->message, "not page-locked") != NULL);
		/* Device memory is not affected. */
		ATF_REQUIRE_EQ(S->alloc(sd, cuda(0), 64, &q), 0);
		S->free(sd, cuda(0), q, 64);
		rsd_simdev_set_unpinned_host(sd, false);
		ATF_REQUIRE_EQ(S->alloc(sd, RSD_LOC_PINNED_HOST, 64 << 10, &p), 0);
		memset(p, 1, 64 << 10);
		S->free(sd, RSD_LOC_PINNED_HOST, p, 64 << 10);
		ATF_CHECK_EQ(rsd_simdev_calls(sd, RSD_SIMDEV_ALLOC), 3);
		rsd_simdev_set_unpinned_host(NULL, true);
		rsd_simdev_destroy(sd);
	}
}

/* ---- gates (gate_queue, gate_open) ------------------------------------------ */

/* A closed gate, a copy of 64 bytes from pinned host to cuda:0 and an
 * event behind it, on a new stream. */
struct gated {
	void *s, *gate, *ev, *src, *dst;
};

static void gated_queue(struct rsd_simdev *sd, struct gated *g)
{
	RSD_REQUIRE_OK(rsd_simdev_stream_create(sd, 0, &g->s));
	RSD_REQUIRE_OK(S->alloc(sd, RSD_LOC_PINNED_HOST, 64, &g->src));
	RSD_REQUIRE_OK(S->alloc(sd, cuda(0), 64, &g->dst));
	memset(g->src, 0xab, 64);
	memset(g->dst, 0, 64);
	ATF_REQUIRE_EQ(S->gate_queue(sd, g->s, &g->gate), 0);
	RSD_REQUIRE_OK(S->copy(sd, g->dst, cuda(0), g->src, RSD_LOC_PINNED_HOST, 64, g->s));
	RSD_REQUIRE_OK(S->event_record(sd, g->s, &g->ev));
}

static void gated_free(struct rsd_simdev *sd, struct gated *g)
{
	/* A failed stream's events fail before its later copies are skipped:
	 * drain it before freeing what they name (its answer is the fault). */
	(void)S->stream_sync(sd, g->s);
	S->event_destroy(sd, g->ev);
	S->free(sd, RSD_LOC_PINNED_HOST, g->src, 64);
	S->free(sd, cuda(0), g->dst, 64);
	rsd_simdev_stream_destroy(sd, g->s);
	rsd_simdev_destroy(sd);
}

/*
 * Background mode: the stream stops at a closed gate (its copy does not
 * run, its event stays pending however long the workers run) while another
 * stream's copy completes; opened, the copy runs and the event completes.
 */
ATF_TC_WITHOUT_HEAD(gate_holds_its_stream);
ATF_TC_BODY(gate_holds_its_stream, tc)
{
	struct rsd_simdev *sd = make_mode(1, RSD_SIMDEV_BACKGROUND, 0, true);
	unsigned char other[64];
	struct gated g;
	void *ev2, *d2, *t;

	gated_queue(sd, &g);
	RSD_REQUIRE_OK(S->alloc(sd, cuda(0), 64, &d2));
	memset(other, 0x5a, sizeof(other));
	t = S->default_stream(sd, 0);
	RSD_REQUIRE_OK(S->copy(sd, d2, cuda(0), other, RSD_LOC_PAGEABLE_HOST, 64, t));
	RSD_REQUIRE_OK(S->event_record(sd, t, &ev2));
	ATF_CHECK_EQ(S->event_sync(sd, ev2), 0);
	ATF_CHECK_EQ(memcmp(d2, other, 64), 0);
	usleep(20000);
	ATF_CHECK_EQ(S->event_query(sd, g.ev), 0);
	ATF_CHECK_EQ(((unsigned char *)g.dst)[0], 0);
	ATF_CHECK_EQ(rsd_simdev_pending_events(sd, g.s), 1);
	S->gate_open(sd, g.gate, 0);
	ATF_CHECK_EQ(S->event_sync(sd, g.ev), 0);
	ATF_CHECK_EQ(memcmp(g.dst, g.src, 64), 0);
	S->event_destroy(sd, ev2);
	S->free(sd, cuda(0), d2, 64);
	gated_free(sd, &g);
}

/*
 * Background mode: a wait for an event still to come (behind a closed gate
 * on another stream) wakes no worker when it is queued, nor does a copy
 * queued behind it, as neither can run; the event's completion wakes the
 * waiting stream's worker, and its copy reads what the awaited copy wrote.
 */
ATF_TC_WITHOUT_HEAD(pending_wait_wakes_no_worker);
ATF_TC_BODY(pending_wait_wakes_no_worker, tc)
{
	struct rsd_simdev *sd = make_mode(1, RSD_SIMDEV_BACKGROUND, 0, true);
	unsigned char *out;
	void *b, *ev2, *h2;
	struct gated g;
	uint64_t k0;

	gated_queue(sd, &g);
	RSD_REQUIRE_OK(rsd_simdev_stream_create(sd, 0, &b));
	RSD_REQUIRE_OK(S->alloc(sd, RSD_LOC_PINNED_HOST, 64, &h2));
	memset(h2, 0, 64);
	k0 = rsd__sim_kicks(sd);
	RSD_REQUIRE_OK(S->stream_wait_event(sd, b, g.ev));
	RSD_REQUIRE_OK(S->copy(sd, h2, RSD_LOC_PINNED_HOST, g.dst, cuda(0), 64, b));
	RSD_REQUIRE_OK(S->event_record(sd, b, &ev2));
	ATF_CHECK_EQ(rsd__sim_kicks(sd), k0);
	usleep(20000);
	ATF_CHECK_EQ(S->event_query(sd, ev2), 0);
	S->gate_open(sd, g.gate, 0);
	ATF_CHECK_EQ(S->event_sync(sd, ev2), 0);
	ATF_CHECK(rsd__sim_kicks(sd) > k0);
	out = h2;
	for (int i = 0; i < 64; i++)
		ATF_CHECK_EQ(out[i], 0xab);
	S->event_destroy(sd, ev2);
	S->free(sd, RSD_LOC_PINNED_HOST, h2, 64);
	rsd_simdev_stream_destroy(sd, b);
	gated_free(sd, &g);
}

struct opener {
	struct rsd_simdev *sd;
	void *gate;
	atomic_bool opened;
};

static void *opener_main(void *arg)
{
	struct opener *o = arg;

	usleep(20000);
	atomic_store(&o->opened, true);
	S->gate_open(o->sd, o->gate, 0);
	return NULL;
}

/* On command: completing the stream waits for the gate; opened (by
 * another thread, while the completer waits), the work behind it runs. */
ATF_TC_WITHOUT_HEAD(gate_on_command_waits_for_opening);
ATF_TC_BODY(gate_on_command_waits_for_opening, tc)
{
	struct rsd_simdev *sd = make_mode(1, RSD_SIMDEV_ON_COMMAND, 0, true);
	struct opener o = { .sd = sd };
	struct gated g;
	pthread_t t;

	gated_queue(sd, &g);
	o.gate = g.gate;
	ATF_REQUIRE_EQ(pthread_create(&t, NULL, opener_main, &o), 0);
	rsd_simdev_stream_complete(sd, g.s);
	ATF_CHECK(atomic_load(&o.opened));
	ATF_CHECK_EQ(S->event_query(sd, g.ev), 1);
	ATF_CHECK_EQ(memcmp(g.dst, g.src, 64), 0);
	pthread_join(t, NULL);
	gated_free(sd, &g);
}

/* Opened as failed: the copy behind it does not run and every later event
 * of the stream reports the opener's error, as after a copy that failed on
 * the device. */
ATF_TC_WITHOUT_HEAD(gate_opened_failed_fails_stream);
ATF_TC_BODY(gate_opened_failed_fails_stream, tc)
{
	struct rsd_simdev *sd = make_mode(1, RSD_SIMDEV_BACKGROUND, 0, true);
	struct gated g;
	void *ev2;

	gated_queue(sd, &g);
	S->gate_open(sd, g.gate, -RSD_EDEVICE);
	ATF_CHECK_EQ(S->event_sync(sd, g.ev), -RSD_EDEVICE);
	ATF_CHECK_MSG(strstr(rsd_last_error()->message, "gate opened as failed"), "%s",
		      rsd_last_error()->message);
	ATF_CHECK_EQ(((unsigned char *)g.dst)[0], 0);
	RSD_REQUIRE_OK(S->event_record(sd, g.s, &ev2));
	ATF_CHECK_EQ(S->event_sync(sd, ev2), -RSD_EDEVICE);
	S->event_destroy(sd, ev2);
	gated_free(sd, &g);
}

/* Immediate mode runs work as it is queued: gate_queue answers 1 and
 * queues nothing; a NULL or foreign stream is refused. */
ATF_TC_WITHOUT_HEAD(gate_queue_answers);
ATF_TC_BODY(gate_queue_answers, tc)
{
	struct rsd_simdev *sd = make_mode(1, RSD_SIMDEV_IMMEDIATE, 0, true);
	void *s, *gate = NULL;
	int junk;

	RSD_REQUIRE_OK(rsd_simdev_stream_create(sd, 0, &s));
	ATF_CHECK_EQ(S->gate_queue(sd, s, &gate), 1);
	ATF_CHECK(gate == NULL);
	ATF_CHECK_EQ(rsd_simdev_pending_events(sd, NULL), 0);
	ATF_CHECK_EQ(S->gate_queue(sd, NULL, &gate), -RSD_ETYPE);
	ATF_CHECK_EQ(S->gate_queue(sd, &junk, &gate), -RSD_ETYPE);
	rsd_simdev_stream_destroy(sd, s);
	rsd_simdev_destroy(sd);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, host_func_on_command);
	ATF_TP_ADD_TC(tp, host_func_errors);
	ATF_TP_ADD_TC(tp, immediate_mode);
	ATF_TP_ADD_TC(tp, host_func_queues_on_own_stream);
	ATF_TP_ADD_TC(tp, background_mode);
	ATF_TP_ADD_TC(tp, switching_mode_releases_queued_work);
	ATF_TP_ADD_TC(tp, background_drains_destroyed_stream);
	ATF_TP_ADD_TC(tp, destroy_drops_queued_work);
	ATF_TP_ADD_TC(tp, free_under_queued_copy_aborts);
	ATF_TP_ADD_TC(tp, unpinned_host_is_refused);
	ATF_TP_ADD_TC(tp, gate_holds_its_stream);
	ATF_TP_ADD_TC(tp, pending_wait_wakes_no_worker);
	ATF_TP_ADD_TC(tp, gate_on_command_waits_for_opening);
	ATF_TP_ADD_TC(tp, gate_opened_failed_fails_stream);
	ATF_TP_ADD_TC(tp, gate_queue_answers);
	return atf_no_error();
}
