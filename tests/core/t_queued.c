// SPDX-License-Identifier: MIT
/*
 * Calls that do not wait for their copies (reference.md §22): exact state,
 * reports and versions while a queued copy runs and after a reap folds it
 * in; protections of its source and destination; consumers ordered on the
 * device or waited for on the host; a failed move put back; close. The
 * failures of queued copies have their own program, t_queued_fail.c.
 *
 * The simulated device runs on command here unless a test says otherwise:
 * a queued copy stays queued until the test completes the device's work.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <atf-c.h>

#include "cfx.h"

static const struct rsd_location CUDA0 = { RSD_CUDA, 0 };
static const struct rsd_location CUDA1 = { RSD_CUDA, 1 };

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts))
		;
}

static void setup(struct cfx *f, const struct rsd_budget *b, size_t nb, int ndev)
{
	cfx_sim(f, b, nb, ndev);
	rsd_simdev_set_progress(f->sd, RSD_SIMDEV_ON_COMMAND, 0);
}

/*
 * The call returns with the copy queued: the destination is resident and
 * arriving, state_version stepped once as for the waited copy, the source
 * counts a pending event; neither can be dropped. The reap that sees the
 * event clears both marks without a version step.
 */
ATF_TC_WITHOUT_HEAD(ensure_returns_queued);
ATF_TC_BODY(ensure_returns_queued, tc)
{
	const struct rsd_materialization_snapshot *d, *s;
	struct rsd_action a = { 0 };
	struct rsd_transition rep;
	struct rsd_snapshot *snap;
	struct rsd_handle h;
	uint64_t v;
	struct cfx f;

	setup(&f, NULL, 0, 1);
	h = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
	cfx_fill(&f, h, PINNED, 0x5a);
	v = cfx_version(&f);
	OK(rsd_ensure_async(f.m, h, CUDA0, NULL, &rep));
	a = rsd_action_ensure(h, CUDA0);
	CHECK_REPORT(&rep, &a, false, &PINNED, &CUDA0, N, N, NULL);
	/* As the waited copy: the commit, and cuda:0 recorded at it. */
	v += 2;
	CHECK_VERSION(&f, v);
	ATF_CHECK_EQ(rsd_simdev_pending_events(f.sd, NULL) > 0, true);
	snap = cfx_snap(&f);
	d = cfx_snap_mat(snap, h, CUDA0);
	s = cfx_snap_mat(snap, h, PINNED);
	ATF_REQUIRE(d && s);
	ATF_CHECK(d->arriving);
	ATF_CHECK_EQ(d->pending_event_count, 0);
	ATF_CHECK(!s->arriving);
	ATF_CHECK_EQ(s->pending_event_count, 1);
	ATF_CHECK_EQ(cfx_loc(snap, PINNED)->pending_event_count, 1);
	ATF_CHECK_EQ(cfx_used(&f, CUDA0), N);
	rsd_snapshot_free(snap);

	/* Neither end can go while the copy runs; nothing changes. */
	ERR(RSD_EINUSE, rsd_drop(f.m, h, CUDA0, NULL));
	CHECK_MSG_HAS("a transfer is in flight");
	ERR(RSD_EINUSE, rsd_drop(f.m, h, PINNED, NULL));
	CHECK_MSG_HAS("1 pending events");
	ERR(RSD_EINUSE, rsd_discard(f.m, h, NULL));
	/* A second ensure sees it resident. */
	OK(rsd_ensure_async(f.m, h, CUDA0, NULL, &rep));
	ATF_CHECK(rep.no_op);
	ATF_CHECK_STREQ(rep.reason, R_DEST_RESIDENT);
	CHECK_VERSION(&f, v);

	/* A reap before completion changes nothing. */
	OK(rsd_manager_reap(f.m));
	snap = cfx_snap(&f);
	ATF_CHECK(cfx_snap_mat(snap, h, CUDA0)->arriving);
	rsd_snapshot_free(snap);

	rsd_simdev_complete_all(f.sd);
	OK(rsd_manager_reap(f.m));
	CHECK_VERSION(&f, v);
	snap = cfx_snap(&f);
	ATF_CHECK(!cfx_snap_mat(snap, h, CUDA0)->arriving);
	ATF_CHECK_EQ(cfx_snap_mat(snap, h, PINNED)->pending_event_count, 0);
	ATF_CHECK_EQ(cfx_loc(snap, PINNED)->pending_event_count, 0);
	rsd_snapshot_free(snap);
	rsd_simdev_set_progress(f.sd, RSD_SIMDEV_IMMEDIATE, 0);
	ATF_CHECK(cfx_has_pattern(&f, h, CUDA0, 0x5a));
	OK(rsd_drop(f.m, h, PINNED, NULL));
	cfx_fini(&f);
}

/* Run the same actions waiting and not waiting: once complete, the two
 * managers' reports and snapshots agree exactly. */
ATF_TC_WITHOUT_HEAD(same_outcome_as_waiting);
ATF_TC_BODY(same_outcome_as_waiting, tc)
{
	const struct rsd_budget b[] = { { CUDA0, 4 * N }, { CUDA1, 4 * N } };
	struct rsd_plan_report *ra, *rb;
	struct rsd_snapshot *sa, *sb;
	struct rsd_handle ha[3], hb[3];
	struct rsd_action acts[5];
	struct cfx fa, fb;

	cfx_sim(&fa, b, 2, 2);
	cfx_sim(&fb, b, 2, 2);
	for (int i = 0; i < 3; i++) {
		ha[i] = cfx_adopt(&fa, PINNED, N, RSD_REPLICABLE);
		hb[i] = cfx_adopt(&fb, PINNED, N, RSD_REPLICABLE);
	}
	rsd_simdev_set_progress(fb.sd, RSD_SIMDEV_ON_COMMAND, 0);
	for (int w = 0; w < 2; w++) {
		const struct rsd_handle *h = w ? hb : ha;

		acts[0] = rsd_action_ensure(h[0], CUDA0);
		acts[1] = rsd_action_ensure(h[1], CUDA1);
		acts[2] = rsd_action_move(h[2], CUDA0, NULL);
		acts[3] = rsd_action_ensure(h[0], CUDA1);
		acts[4] = rsd_action_drop(h[1], PAGEABLE);
		if (w)
			OK(rsd_execute_actions_async(fb.m, acts, 5, "q", NULL, 0, NULL, &rb));
		else
			OK(rsd_execute_actions(fa.m, acts, 5, "q", NULL, 0, NULL, &ra));
	}
	ATF_REQUIRE_EQ(ra->ntransitions, rb->ntransitions);
	for (size_t i = 0; i < ra->ntransitions; i++) {
		const struct rsd_transition *x = &ra->transitions[i], *y = &rb->transitions[i];

		ATF_CHECK_EQ(x->no_op, y->no_op);
		ATF_CHECK_EQ(x->has_source, y->has_source);
		ATF_CHECK(!x->has_source || rsd_location_equal(x->source, y->source));
		ATF_CHECK_EQ(x->has_destination, y->has_destination);
	}
	/* The third action's move queued a copy reading h[2]'s pinned bytes,
	 * which no materialization owns now: charged, not shown. */
	ATF_CHECK_EQ(cfx_used(&fb, PINNED), 2 * N);
	ATF_CHECK_EQ(cfx_used(&fa, PINNED), 2 * N);
	ATF_CHECK_EQ(cfx_version(&fa), cfx_version(&fb));
	rsd_simdev_complete_all(fb.sd);
	OK(rsd_manager_reap(fb.m));
	for (int i = 0; i < 3; i++) {
		struct rsd_location la[4], lb[4];
		size_t na = cfx_mats(&fa, ha[i], la, 4), nb = cfx_mats(&fb, hb[i], lb, 4);

		ATF_CHECK_EQ(na, nb);
		for (size_t k = 0; k < na && k < nb; k++)
			ATF_CHECK(rsd_location_equal(la[k], lb[k]));
	}
	sa = cfx_snap(&fa);
	sb = cfx_snap(&fb);
	ATF_CHECK_EQ(sa->state_version, sb->state_version);
	ATF_REQUIRE_EQ(sa->nlocations, sb->nlocations);
	for (size_t i = 0; i < sa->nlocations; i++) {
		ATF_CHECK(rsd_location_equal(sa->locations[i].location, sb->locations[i].location));
		ATF_CHECK_EQ(sa->locations[i].used_bytes, sb->locations[i].used_bytes);
		ATF_CHECK_EQ(sa->locations[i].value_count, sb->locations[i].value_count);
		ATF_CHECK_EQ(sb->locations[i].pending_event_count, 0);
	}
	rsd_snapshot_free(sa);
	rsd_snapshot_free(sb);
	rsd_plan_report_free(ra);
	rsd_plan_report_free(rb);
	cfx_fini(&fa);
	cfx_fini(&fb);
}

struct probe {
	const struct rsd_resident *r; /* the leased destination */
	int seed;
	atomic_int seen; /* 1: the consumer read the copied bytes; -1: not */
};

/* A consumer's work on its stream: are the copied bytes there? */
static void consumer_reads(void *arg)
{
	struct probe *p = arg;
	const unsigned char *b = rsd_resident_data(p->r, 0);
	bool same = true;

	for (uint64_t i = 0; i < rsd_resident_buffer_nbytes(p->r, 0); i++)
		same &= b[i] == (unsigned char)p->seed;
	atomic_store(&p->seen, same ? 1 : -1);
}

/*
 * §22: an acquire at a CUDA location with a consumer stream succeeds at
 * once and the stream waits for the copy on the device: work queued on it
 * afterwards runs after the copy (the device proves it by refusing to run
 * it first), and so does work on a stream added to the lease later.
 */
ATF_TC_WITHOUT_HEAD(consumer_ordered_on_device);
ATF_TC_BODY(consumer_ordered_on_device, tc)
{
	unsigned long waits;
	struct rsd_lease *l;
	struct probe p = { 0 };
	void *cs, *cs2;
	struct rsd_handle h;
	struct cfx f;

	setup(&f, NULL, 0, 1);
	h = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
	cfx_fill(&f, h, PINNED, 0x33);
	ATF_REQUIRE_EQ(rsd_simdev_stream_create(f.sd, 0, &cs), 0);
	ATF_REQUIRE_EQ(rsd_simdev_stream_create(f.sd, 0, &cs2), 0);
	OK(rsd_ensure_async(f.m, h, CUDA0, NULL, NULL));
	waits = rsd_simdev_calls(f.sd, RSD_SIMDEV_STREAM_WAIT);
	OK(rsd_acquire(f.m, &h, 1, CUDA0, cs, &l));
	ATF_CHECK_EQ(rsd_simdev_calls(f.sd, RSD_SIMDEV_STREAM_WAIT) - waits, 1);
	OK(rsd_lease_add_consumer_stream(l, cs2));
	ATF_CHECK_EQ(rsd_simdev_calls(f.sd, RSD_SIMDEV_STREAM_WAIT) - waits, 2);
	/* Work queued on a consumer stream runs after the copy: running
	 * only that stream runs the copy first (unordered, the consumer
	 * would run at once, on bytes not yet copied). */
	OK(rsd_lease_value(l, h, &p.r));
	p.seed = 0x33;
	ATF_REQUIRE_EQ(rsd_simdev_launch_host_func(f.sd, cs2, consumer_reads, &p), 0);
	rsd_simdev_stream_complete(f.sd, cs2);
	ATF_CHECK_EQ_MSG(atomic_load(&p.seen), 1, "seen %d", atomic_load(&p.seen));
	rsd_simdev_set_progress(f.sd, RSD_SIMDEV_IMMEDIATE, 0);
	OK(rsd_lease_release(l, RSD_RELEASE_WAIT));
	rsd_lease_free(l);
	ATF_CHECK(cfx_has_pattern(&f, h, CUDA0, 0x33));
	rsd_simdev_stream_destroy(f.sd, cs);
	rsd_simdev_stream_destroy(f.sd, cs2);
	cfx_fini(&f);
}

/*
 * A stream added to such a lease that the device refuses to order after
 * the copy is RSD_EDEVICE (the driver's message kept) and is not added:
 * the release records an event on the first stream only.
 */
ATF_TC_WITHOUT_HEAD(consumer_order_failure);
ATF_TC_BODY(consumer_order_failure, tc)
{
	unsigned long rec;
	struct rsd_lease *l;
	void *cs, *cs2;
	struct rsd_handle h;
	struct cfx f;

	setup(&f, NULL, 0, 1);
	h = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
	ATF_REQUIRE_EQ(rsd_simdev_stream_create(f.sd, 0, &cs), 0);
	ATF_REQUIRE_EQ(rsd_simdev_stream_create(f.sd, 0, &cs2), 0);
	OK(rsd_ensure_async(f.m, h, CUDA0, NULL, NULL));
	OK(rsd_acquire(f.m, &h, 1, CUDA0, cs, &l));
	rsd_simdev_fail_nth(f.sd, RSD_SIMDEV_STREAM_WAIT, 1, RSD_EDEVICE);
	ERR(RSD_EDEVICE, rsd_lease_add_consumer_stream(l, cs2));
	CHECK_MSG_HAS("simulated device");
	rec = rsd_simdev_calls(f.sd, RSD_SIMDEV_EVENT_RECORD);
	OK(rsd_lease_release(l, 0));
	ATF_CHECK_EQ(rsd_simdev_calls(f.sd, RSD_SIMDEV_EVENT_RECORD) - rec, 1);
	ATF_CHECK_EQ(rsd_simdev_pending_events(f.sd, cs2), 0);
	rsd_lease_free(l);
	rsd_simdev_complete_all(f.sd);
	OK(rsd_manager_reap(f.m));
	rsd_simdev_stream_destroy(f.sd, cs);
	rsd_simdev_stream_destroy(f.sd, cs2);
	OK(rsd_manager_close(f.m, 0));
	cfx_fini(&f);
}

struct waiter {
	struct cfx *f;
	struct rsd_handle h;
	struct rsd_location at;
	int rc;
	atomic_bool done;
	struct rsd_lease *l;
};

/* Moves h (filled with pattern at pinned host memory) to cuda:0 and leaves
 * the simulated device on command: the start of the cases that copy it
 * back without waiting. */
static void only_on_device(struct cfx *f, struct rsd_handle h, int pattern)
{
	rsd_simdev_set_progress(f->sd, RSD_SIMDEV_IMMEDIATE, 0);
	cfx_fill(f, h, PINNED, pattern);
	OK(rsd_move(f->m, h, CUDA0, NULL, NULL, NULL));
	rsd_simdev_set_progress(f->sd, RSD_SIMDEV_ON_COMMAND, 0);
}

static void *acquire_main(void *arg)
{
	struct waiter *w = arg;

	w->rc = rsd_acquire(w->f->m, &w->h, 1, w->at, NULL, &w->l);
	atomic_store(&w->done, true);
	return NULL;
}

/*
 * A host acquire of bytes a queued copy still writes waits for the copy
 * (without the lock: another thread's call goes on), or fails at once
 * with RSD_ACQUIRE_NOWAIT.
 */
ATF_TC_WITHOUT_HEAD(host_acquire_waits_or_fails);
ATF_TC_BODY(host_acquire_waits_or_fails, tc)
{
	struct rsd_snapshot *snap;
	struct waiter w = { 0 };
	struct rsd_handle h, other;
	struct rsd_lease *l;
	pthread_t th;
	struct cfx f;

	setup(&f, NULL, 0, 1);
	h = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
	other = cfx_adopt(&f, PAGEABLE, N, RSD_REPLICABLE);
	only_on_device(&f, h, 0x21);
	OK(rsd_ensure_async(f.m, h, PINNED, NULL, NULL));
	ERR(RSD_EUNAVAILABLE, rsd_acquire_flags(f.m, &h, 1, PINNED, NULL, RSD_ACQUIRE_NOWAIT, &l));
	CHECK_MSG_HAS("queued copy");
	ERR(RSD_EINVAL, rsd_acquire_flags(f.m, &h, 1, PINNED, NULL, 4u, &l));

	w.f = &f;
	w.h = h;
	w.at = PINNED;
	atomic_init(&w.done, false);
	ATF_REQUIRE_EQ(pthread_create(&th, NULL, acquire_main, &w), 0);
	sleep_ms(50);
	ATF_CHECK_MSG(!atomic_load(&w.done), "the host acquire returned before the copy ran");
	/* The waiter holds no lock: this thread's calls go on. */
	OK(rsd_ensure(f.m, other, PINNED, NULL, NULL));
	rsd_simdev_complete_all(f.sd);
	pthread_join(th, NULL);
	OK(w.rc);
	/* The wait folded the copy in: no reap needed. */
	snap = cfx_snap(&f);
	ATF_CHECK(!cfx_snap_mat(snap, h, PINNED)->arriving);
	ATF_CHECK_EQ(cfx_snap_mat(snap, h, CUDA0)->pending_event_count, 0);
	rsd_snapshot_free(snap);
	OK(rsd_lease_release(w.l, 0));
	rsd_lease_free(w.l);
	ATF_CHECK(cfx_has_pattern(&f, h, PINNED, 0x21));
	cfx_fini(&f);
}

/*
 * A not-waiting move: the source leaves the value at once but its bytes
 * stay charged (in flight: in_flight_bytes, admitted against; t_ledger)
 * until the copy read them. A device failure puts the source back.
 */
ATF_TC_WITHOUT_HEAD(move_keeps_source_bytes);
ATF_TC_BODY(move_keeps_source_bytes, tc)
{
	const struct rsd_budget b[] = { { CUDA0, N } };
	struct rsd_snapshot *snap;
	struct rsd_handle h, g;
	uint64_t v;
	struct cfx f;

	setup(&f, b, 1, 1);
	h = cfx_adopt(&f, PINNED, N, RSD_EXCLUSIVE);
	g = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
	only_on_device(&f, h, 0x44);
	v = cfx_version(&f);
	OK(rsd_move_async(f.m, h, PINNED, NULL, NULL, NULL));
	CHECK_VERSION(&f, v + 2); /* as the waited move: commit, then removal */
	snap = cfx_snap(&f);
	ATF_CHECK(!cfx_snap_mat(snap, h, CUDA0));
	ATF_CHECK(cfx_snap_mat(snap, h, PINNED)->arriving);
	ATF_CHECK_EQ(cfx_loc(snap, CUDA0)->used_bytes, 0);
	rsd_snapshot_free(snap);
	/* cuda:0's budget still holds the bytes the copy reads. */
	ERR(RSD_EBUDGET, rsd_ensure(f.m, g, CUDA0, NULL, NULL));
	ATF_CHECK_EQ(cfx_peak_charged(&f, CUDA0), N);
	rsd_simdev_complete_all(f.sd);
	OK(rsd_manager_reap(f.m));
	CHECK_VERSION(&f, v + 2);
	rsd_simdev_set_progress(f.sd, RSD_SIMDEV_IMMEDIATE, 0);
	ATF_CHECK(cfx_has_pattern(&f, h, PINNED, 0x44));
	OK(rsd_ensure(f.m, g, CUDA0, NULL, NULL));
	OK(rsd_drop(f.m, g, CUDA0, NULL));

	/* Back to the device, then a move out that fails on the device. */
	OK(rsd_move(f.m, h, CUDA0, NULL, NULL, NULL));
	rsd_simdev_set_progress(f.sd, RSD_SIMDEV_ON_COMMAND, 0);
	rsd_simdev_fail_nth(f.sd, RSD_SIMDEV_COPY_EXEC, 1, RSD_EDEVICE);
	OK(rsd_move_async(f.m, h, PINNED, NULL, NULL, NULL));
	v = cfx_version(&f);
	rsd_simdev_complete_all(f.sd);
	ERR(RSD_EDEVICE, rsd_manager_reap(f.m));
	CHECK_VERSION(&f, v + 2); /* destination removed, source reinstated */
	snap = cfx_snap(&f);
	ATF_CHECK(cfx_snap_mat(snap, h, CUDA0) && !cfx_snap_mat(snap, h, CUDA0)->arriving);
	ATF_CHECK(!cfx_snap_mat(snap, h, PINNED));
	ATF_CHECK_EQ(cfx_loc(snap, CUDA0)->used_bytes, N);
	rsd_snapshot_free(snap);
	rsd_simdev_set_progress(f.sd, RSD_SIMDEV_IMMEDIATE, 0);
	OK(rsd_ensure(f.m, h, CUDA0, NULL, NULL)); /* reported once: by the reap */
	ATF_CHECK(cfx_has_pattern(&f, h, CUDA0, 0x44));
	cfx_fini(&f);
}

/* A copy from bytes a queued copy still fills waits for that one first,
 * on the host, and reads complete bytes. */
ATF_TC_WITHOUT_HEAD(copy_from_filling_source);
ATF_TC_BODY(copy_from_filling_source, tc)
{
	struct rsd_transition rep;
	struct rsd_handle h;
	struct cfx f;

	cfx_sim(&f, NULL, 0, 1);
	rsd_simdev_set_progress(f.sd, RSD_SIMDEV_BACKGROUND, 2000000);
	h = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
	cfx_fill(&f, h, PINNED, 0x6c);
	OK(rsd_move(f.m, h, CUDA0, NULL, NULL, NULL));
	OK(rsd_ensure_async(f.m, h, PINNED, NULL, NULL));
	/* pinned comes first in canonical order: it is the source. */
	OK(rsd_ensure(f.m, h, PAGEABLE, NULL, &rep));
	ATF_CHECK(rsd_location_equal(rep.source, PINNED));
	ATF_CHECK(cfx_has_pattern(&f, h, PAGEABLE, 0x6c));
	cfx_fini(&f);
}

/* Two devices run on command; one pinned value holding pattern. */
static struct rsd_handle pinned_on_two_devices(struct cfx *f, int pattern)
{
	struct rsd_handle h;

	setup(f, NULL, 0, 2);
	h = cfx_adopt(f, PINNED, N, RSD_REPLICABLE);
	cfx_fill(f, h, PINNED, pattern);
	return h;
}

/*
 * A not-waiting copy from bytes a queued copy still fills is ordered after
 * that copy on the device (§22): the call returns with both queued and
 * nothing run (the device runs on command), and the simulator, which
 * aborts on a read not ordered after the write it races, sees the peer
 * copy read cuda:0 only after the move filled it.
 */
ATF_TC_WITHOUT_HEAD(copy_after_filling_source_on_device);
ATF_TC_BODY(copy_after_filling_source_on_device, tc)
{
	struct rsd_transition rep;
	struct rsd_snapshot *snap;
	struct rsd_handle h;
	struct cfx f;

	h = pinned_on_two_devices(&f, 0x3c);
	OK(rsd_move_async(f.m, h, CUDA0, NULL, NULL, NULL));
	OK(rsd_ensure_async(f.m, h, CUDA1, NULL, &rep));
	ATF_CHECK(rsd_location_equal(rep.source, CUDA0));
	/* Neither copy ran: the second call did not wait for the first. */
	ATF_CHECK_EQ(rsd_simdev_pending_events(f.sd, NULL), 2);
	snap = cfx_snap(&f);
	ATF_CHECK(cfx_snap_mat(snap, h, CUDA0)->arriving);
	ATF_CHECK_EQ(cfx_snap_mat(snap, h, CUDA0)->pending_event_count, 1);
	ATF_CHECK(cfx_snap_mat(snap, h, CUDA1)->arriving);
	ATF_CHECK(!cfx_snap_mat(snap, h, PINNED));
	ATF_CHECK_EQ(cfx_used(&f, CUDA1), N);
	rsd_snapshot_free(snap);
	/* The source cuda:0 stays until the copy reading it is over. */
	ERR(RSD_EINUSE, rsd_drop(f.m, h, CUDA0, NULL));

	rsd_simdev_complete_all(f.sd);
	OK(rsd_manager_reap(f.m));
	snap = cfx_snap(&f);
	ATF_CHECK(!cfx_snap_mat(snap, h, CUDA0)->arriving);
	ATF_CHECK_EQ(cfx_snap_mat(snap, h, CUDA0)->pending_event_count, 0);
	ATF_CHECK(!cfx_snap_mat(snap, h, CUDA1)->arriving);
	rsd_snapshot_free(snap);
	rsd_simdev_set_progress(f.sd, RSD_SIMDEV_IMMEDIATE, 0);
	ATF_CHECK(cfx_has_pattern(&f, h, CUDA0, 0x3c));
	ATF_CHECK(cfx_has_pattern(&f, h, CUDA1, 0x3c));
	cfx_fini(&f);
}

struct kernel_check {
	const unsigned char *bytes;
	int pattern;
	bool ran, right;
};

/* The kernel's computation: are the bytes it reads the value's? */
static void kernel_reads(void *arg)
{
	struct kernel_check *k = arg;

	k->ran = true;
	k->right = true;
	for (uint64_t i = 0; i < N; i++)
		if (k->bytes[i] != (unsigned char)k->pattern)
			k->right = false;
}

/* A kernel on cuda:1 leased the ordered copy's destination while both
 * copies were queued: it runs after both and reads the value's bytes. */
ATF_TC_WITHOUT_HEAD(kernel_reads_ordered_copy);
ATF_TC_BODY(kernel_reads_ordered_copy, tc)
{
	struct kernel_check k = { NULL, 0x3f, false, false };
	struct rsd_simdev_access acc = { 0 };
	const struct rsd_resident *r;
	struct rsd_lease *l;
	struct rsd_handle h;
	struct cfx f;
	void *cs;

	h = pinned_on_two_devices(&f, k.pattern);
	ATF_REQUIRE_EQ(rsd_simdev_stream_create(f.sd, 1, &cs), 0);
	OK(rsd_move_async(f.m, h, CUDA0, NULL, NULL, NULL));
	OK(rsd_ensure_async(f.m, h, CUDA1, NULL, NULL));
	OK(rsd_acquire(f.m, &h, 1, CUDA1, cs, &l));
	OK(rsd_lease_value(l, h, &r));
	k.bytes = rsd_resident_data(r, 0);
	acc.ptr = (void *)k.bytes;
	acc.nbytes = N;
	ATF_REQUIRE_EQ(rsd_simdev_launch_kernel(f.sd, cs, 1000, &acc, 1, kernel_reads, &k), 0);
	OK(rsd_lease_release(l, 0));
	rsd_lease_free(l);
	ATF_CHECK(!k.ran);
	rsd_simdev_complete_all(f.sd);
	ATF_CHECK(k.ran);
	ATF_CHECK(k.right);
	OK(rsd_manager_reap(f.m));
	rsd_simdev_stream_destroy(f.sd, cs);
	cfx_fini(&f);
}

/*
 * The copy the second one is ordered after fails on the device: the
 * second fails with it (the driver skips the work behind a failed event),
 * both are undone, and the moved value is back where it was, its bytes
 * intact. The value keeps one error, reported once.
 */
ATF_TC_WITHOUT_HEAD(filling_source_fails_both);
ATF_TC_BODY(filling_source_fails_both, tc)
{
	struct rsd_snapshot *snap;
	struct rsd_handle h;
	struct cfx f;

	h = pinned_on_two_devices(&f, 0x3d);
	rsd_simdev_fail_nth(f.sd, RSD_SIMDEV_COPY_EXEC, 1, RSD_EDEVICE);
	OK(rsd_move_async(f.m, h, CUDA0, NULL, NULL, NULL));
	OK(rsd_ensure_async(f.m, h, CUDA1, NULL, NULL));
	rsd_simdev_complete_all(f.sd);
	/* One value, one kept error: the last copy folded in. */
	ERR(RSD_EDEVICE, rsd_manager_reap(f.m));
	OK(rsd_manager_reap(f.m));
	snap = cfx_snap(&f);
	ATF_CHECK(!cfx_snap_mat(snap, h, CUDA0));
	ATF_CHECK(!cfx_snap_mat(snap, h, CUDA1));
	ATF_CHECK(cfx_snap_mat(snap, h, PINNED) && !cfx_snap_mat(snap, h, PINNED)->arriving);
	ATF_CHECK_EQ(cfx_loc(snap, CUDA0)->used_bytes, 0);
	ATF_CHECK_EQ(cfx_loc(snap, CUDA1)->used_bytes, 0);
	rsd_snapshot_free(snap);
	rsd_simdev_set_progress(f.sd, RSD_SIMDEV_IMMEDIATE, 0);
	ATF_CHECK(cfx_has_pattern(&f, h, PINNED, 0x3d));
	OK(rsd_ensure(f.m, h, CUDA1, NULL, NULL));
	ATF_CHECK(cfx_has_pattern(&f, h, CUDA1, 0x3d));
	cfx_fini(&f);
}

static void *ensure_async_main(void *arg)
{
	struct waiter *w = arg;

	w->rc = rsd_ensure_async(w->f->m, w->h, w->at, NULL, NULL);
	atomic_store(&w->done, true);
	return NULL;
}

/*
 * Several threads queue copies from sources still filling, at once: every
 * call returns before the device ran anything (it runs on command, and
 * the threads are joined first), each copy is ordered after its own
 * source's fill, and every value arrives whole at both devices.
 */
#define NTHREADS 4

ATF_TC_WITHOUT_HEAD(ordered_copies_from_threads);
ATF_TC_BODY(ordered_copies_from_threads, tc)
{
	struct waiter w[NTHREADS];
	pthread_t th[NTHREADS];
	struct cfx f;

	setup(&f, NULL, 0, 2);
	for (int i = 0; i < NTHREADS; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].f = &f;
		w[i].at = CUDA1;
		w[i].h = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
		cfx_fill(&f, w[i].h, PINNED, 0x50 + i);
		OK(rsd_move_async(f.m, w[i].h, CUDA0, NULL, NULL, NULL));
	}
	for (int i = 0; i < NTHREADS; i++)
		ATF_REQUIRE_EQ(pthread_create(&th[i], NULL, ensure_async_main, &w[i]), 0);
	for (int i = 0; i < NTHREADS; i++) {
		ATF_REQUIRE_EQ(pthread_join(th[i], NULL), 0);
		ATF_CHECK_EQ(w[i].rc, 0);
	}
	ATF_CHECK_EQ(rsd_simdev_pending_events(f.sd, NULL), 2 * NTHREADS);
	ATF_CHECK_EQ(cfx_used(&f, CUDA1), NTHREADS * N);
	rsd_simdev_complete_all(f.sd);
	OK(rsd_manager_reap(f.m));
	rsd_simdev_set_progress(f.sd, RSD_SIMDEV_IMMEDIATE, 0);
	for (int i = 0; i < NTHREADS; i++) {
		ATF_CHECK(!cfx_resident(&f, w[i].h, PINNED));
		ATF_CHECK(cfx_has_pattern(&f, w[i].h, CUDA0, 0x50 + i));
		ATF_CHECK(cfx_has_pattern(&f, w[i].h, CUDA1, 0x50 + i));
	}
	cfx_fini(&f);
}

/* A forced close that does not wait, with a copy ordered after a filling
 * one: the storage both read and write stays allocated (the simulator
 * aborts on a free under a queued copy), and the device still runs them
 * in order. */
ATF_TC_WITHOUT_HEAD(close_with_ordered_copy);
ATF_TC_BODY(close_with_ordered_copy, tc)
{
	struct rsd_handle h;
	struct cfx f;

	h = pinned_on_two_devices(&f, 0x3e);
	OK(rsd_move_async(f.m, h, CUDA0, NULL, NULL, NULL));
	OK(rsd_ensure_async(f.m, h, CUDA1, NULL, NULL));
	ERR(RSD_EINUSE, rsd_manager_close(f.m, RSD_CLOSE_NOWAIT));
	CHECK_MSG_HAS("queued_copies=2");
	OK(rsd_manager_close(f.m, RSD_CLOSE_FORCE | RSD_CLOSE_NOWAIT));
	rsd_simdev_complete_all(f.sd);
	ATF_CHECK_EQ(rsd_simdev_pending_events(f.sd, NULL), 0);
	cfx_fini(&f);
}

/* Close: a close that must not wait refuses queued copies (naming them);
 * one that may wait waits for them; a forced one without waiting keeps
 * the storage they read and write, on the device and in host memory. */
ATF_TC_WITHOUT_HEAD(close_and_queued_copies);
ATF_TC_BODY(close_and_queued_copies, tc)
{
	struct rsd_handle h;
	struct cfx f;

	setup(&f, NULL, 0, 1);
	h = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
	OK(rsd_ensure_async(f.m, h, CUDA0, NULL, NULL));
	ERR(RSD_EINUSE, rsd_manager_close(f.m, RSD_CLOSE_NOWAIT));
	CHECK_MSG_HAS("pending_leases=0, holds=0, reservations=0, queued_copies=1");
	rsd_simdev_set_progress(f.sd, RSD_SIMDEV_BACKGROUND, 1000000);
	OK(rsd_manager_close(f.m, 0));
	cfx_fini(&f);

	setup(&f, NULL, 0, 1);
	h = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
	OK(rsd_move_async(f.m, h, CUDA0, NULL, NULL, NULL));
	OK(rsd_manager_close(f.m, RSD_CLOSE_FORCE | RSD_CLOSE_NOWAIT));
	cfx_fini(&f);

	/* Host memory at either end of a queued copy too: the simulator
	 * aborts on the free of bytes a queued copy still reads or writes. */
	setup(&f, NULL, 0, 1);
	h = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
	OK(rsd_ensure_async(f.m, h, CUDA0, NULL, NULL)); /* reads pinned */
	OK(rsd_manager_close(f.m, RSD_CLOSE_FORCE | RSD_CLOSE_NOWAIT));
	rsd_simdev_complete_all(f.sd);
	cfx_fini(&f);

	setup(&f, NULL, 0, 1);
	h = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
	only_on_device(&f, h, 0x39);
	OK(rsd_ensure_async(f.m, h, PINNED, NULL, NULL)); /* writes pinned */
	OK(rsd_manager_close(f.m, RSD_CLOSE_FORCE | RSD_CLOSE_NOWAIT));
	rsd_simdev_complete_all(f.sd);
	cfx_fini(&f);
}

/* Scope entry and a controller use return with their copies queued; the
 * use's consumer stream is ordered after them. */
ATF_TC_WITHOUT_HEAD(scope_and_use_async);
ATF_TC_BODY(scope_and_use_async, tc)
{
	struct rsd_requirement req;
	struct rsd_request r = { 0 };
	struct rsd_controller *c;
	struct rsd_snapshot *snap;
	struct rsd_plan p = { 0 };
	struct rsd_policy *pol;
	struct rsd_action act;
	struct rsd_scope *s;
	struct rsd_use *u;
	unsigned long waits;
	struct rsd_handle h, g;
	void *cs;
	struct cfx f;

	setup(&f, NULL, 0, 1);
	h = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
	g = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
	act = rsd_action_ensure(h, CUDA0);
	p.name = "enter";
	p.enter = &act;
	p.nenter = 1;
	OK(rsd_scope_enter_async(f.m, &p, NULL, 0, NULL, &s));
	snap = cfx_snap(&f);
	ATF_CHECK(cfx_snap_mat(snap, h, CUDA0)->arriving);
	rsd_snapshot_free(snap);
	rsd_simdev_complete_all(f.sd);
	OK(rsd_scope_close(s, NULL));
	rsd_scope_free(s);

	OK(rsd_tiered_lru_create(NULL, 0, &pol));
	OK(rsd_controller_create(f.m, pol, 0, &c));
	ATF_REQUIRE_EQ(rsd_simdev_stream_create(f.sd, 0, &cs), 0);
	memset(&req, 0, sizeof(req));
	req.handle = g;
	req.location = CUDA0;
	r.name = "next";
	r.requirements = &req;
	r.nrequirements = 1;
	waits = rsd_simdev_calls(f.sd, RSD_SIMDEV_STREAM_WAIT);
	OK(rsd_controller_use_async(c, &r, &cs, 1, NULL, 0, &u));
	ATF_CHECK_EQ(rsd_simdev_calls(f.sd, RSD_SIMDEV_STREAM_WAIT) - waits, 1);
	snap = cfx_snap(&f);
	ATF_CHECK(cfx_snap_mat(snap, g, CUDA0)->arriving);
	rsd_snapshot_free(snap);
	rsd_simdev_complete_all(f.sd);
	OK(rsd_use_close(u, NULL));
	rsd_use_free(u);
	rsd_simdev_complete_all(f.sd);
	rsd_controller_free(c);
	rsd_policy_free(pol);
	rsd_simdev_stream_destroy(f.sd, cs);
	cfx_fini(&f);
}

/* A room test's start: cuda:0 full with h[0] and h[1] (exclusive, pinned
 * first, patterns seed and seed + 1), a tiered LRU spilling it to pinned,
 * a consumer stream, each copy starting 20 ms after it could (a spill is
 * still queued when the plan's next admission needs its room). */
struct room {
	struct cfx f;
	struct rsd_policy *pol;
	struct rsd_controller *c;
	void *cs;
};

static void room_setup(struct room *x, struct rsd_handle h[2], int seed)
{
	const struct rsd_budget b[] = { { CUDA0, 2 * N } };
	const struct rsd_location to_pinned[] = { PINNED };
	const struct rsd_fallback_tier tier = { CUDA0, to_pinned, 1 };

	cfx_sim(&x->f, b, 1, 1);
	for (int i = 0; i < 2; i++) {
		h[i] = cfx_adopt(&x->f, PINNED, N, RSD_EXCLUSIVE);
		cfx_fill(&x->f, h[i], PINNED, seed + i);
		OK(rsd_move(x->f.m, h[i], CUDA0, NULL, NULL, NULL));
	}
	OK(rsd_tiered_lru_create(&tier, 1, &x->pol));
	OK(rsd_controller_create(x->f.m, x->pol, 0, &x->c));
	ATF_REQUIRE_EQ(rsd_simdev_stream_create(x->f.sd, 0, &x->cs), 0);
	rsd_simdev_set_progress(x->f.sd, RSD_SIMDEV_BACKGROUND, 20000000);
}

/* A not-waiting use of want at cuda:0 whose plan spills `spilled` (a
 * move) to make room. */
static struct rsd_use *room_use(struct room *x, struct rsd_handle want, struct rsd_handle spilled,
				const char *name, struct rsd_reservation_spec *res, size_t nres)
{
	struct rsd_requirement req = { want, CUDA0 };
	struct rsd_request r = { name, &req, 1, res, nres };
	const struct rsd_decision *d;
	struct rsd_use *u;

	OK(rsd_controller_use_async(x->c, &r, &x->cs, 1, NULL, 0, &u));
	d = rsd_use_decision(u);
	ATF_REQUIRE_EQ(d->nevictions, 1);
	ATF_CHECK_EQ(d->evictions[0].action.kind, RSD_ACT_MOVE);
	ATF_CHECK(rsd_handle_equal(d->evictions[0].action.handle, spilled));
	return u;
}

static void room_fini(struct room *x)
{
	rsd_controller_free(x->c);
	rsd_policy_free(x->pol);
	rsd_simdev_stream_destroy(x->f.sd, x->cs);
	cfx_fini(&x->f);
}

/*
 * A not-waiting use whose plan spills to make room: the spill's copy still
 * reads the device bytes the room is made of (a temporary charge), so an
 * admission that needs them, a requirement's or a reservation's, waits on
 * the host for that copy (folded in then), and only for it. The request's
 * own copy is queued; its consumer reads the bytes after it.
 */
ATF_TC_WITHOUT_HEAD(use_async_waits_for_room);
ATF_TC_BODY(use_async_waits_for_room, tc)
{
	struct rsd_reservation_spec room = { CUDA0, N, "room" };
	struct rsd_snapshot *snap;
	struct rsd_use *u;
	struct rsd_handle h[3];
	struct room x;

	room_setup(&x, h, 0x10);
	h[2] = cfx_adopt(&x.f, PINNED, N, RSD_EXCLUSIVE);
	cfx_fill(&x.f, h[2], PINNED, 0x12);

	u = room_use(&x, h[2], h[0], "third", NULL, 0);
	snap = cfx_snap(&x.f);
	/* The spill was waited for and folded in: nothing of it is left. */
	ATF_CHECK(!cfx_snap_mat(snap, h[0], CUDA0));
	ATF_CHECK(!cfx_snap_mat(snap, h[0], PINNED)->arriving);
	ATF_CHECK_EQ(cfx_loc(snap, CUDA0)->used_bytes, 2 * N);
	ATF_CHECK_EQ(cfx_loc(snap, CUDA0)->peak_charged_bytes, 2 * N);
	rsd_snapshot_free(snap);
	OK(rsd_use_close(u, NULL));
	rsd_use_free(u);

	/* A reservation: h[1] is the LRU value now, spilled for the room. */
	u = room_use(&x, h[2], h[1], "room", &room, 1);
	snap = cfx_snap(&x.f);
	ATF_CHECK(!cfx_snap_mat(snap, h[1], CUDA0));
	ATF_CHECK_EQ(cfx_loc(snap, CUDA0)->reserved_bytes, N);
	rsd_snapshot_free(snap);
	OK(rsd_use_close(u, NULL));
	rsd_use_free(u);

	rsd_simdev_set_progress(x.f.sd, RSD_SIMDEV_IMMEDIATE, 0);
	OK(rsd_manager_reap(x.f.m));
	for (int i = 0; i < 3; i++)
		ATF_CHECK(cfx_has_pattern(&x.f, h[i], i < 2 ? PINNED : CUDA0, 0x10 + i));
	room_fini(&x);
}

/*
 * The same with a value its source reconstructs: the plan spills h[0] and
 * loads h[2] into the room the spill's copy still holds. The load comes
 * after the wait for that copy, so the source is loaded once (loading
 * first, the refused admission would throw the loaded value away and load
 * it again after the wait). The outcome is the waiting use's.
 */
ATF_TC_WITHOUT_HEAD(use_async_loads_once_after_room);
ATF_TC_BODY(use_async_loads_once_after_room, tc)
{
	struct rsd_snapshot *snap;
	struct csrc src = { 0 };
	struct rsd_use *u;
	struct rsd_handle h[3];
	struct room x;

	room_setup(&x, h, 0x20);
	h[2] = cfx_sourced(&x.f, &src, PAGEABLE);

	u = room_use(&x, h[2], h[0], "sourced", NULL, 0);
	ATF_CHECK_EQ(src.loads, 1);
	snap = cfx_snap(&x.f);
	ATF_CHECK(!cfx_snap_mat(snap, h[0], CUDA0));
	ATF_CHECK(cfx_snap_mat(snap, h[2], CUDA0) != NULL);
	ATF_CHECK(!cfx_snap_mat(snap, h[2], PAGEABLE));
	ATF_CHECK_EQ(cfx_loc(snap, CUDA0)->used_bytes, 2 * N);
	ATF_CHECK_EQ(cfx_loc(snap, CUDA0)->peak_charged_bytes, 2 * N);
	rsd_snapshot_free(snap);
	OK(rsd_use_close(u, NULL));
	rsd_use_free(u);

	rsd_simdev_set_progress(x.f.sd, RSD_SIMDEV_IMMEDIATE, 0);
	OK(rsd_manager_reap(x.f.m));
	ATF_CHECK_EQ(src.loads, 1);
	ATF_CHECK(cfx_has_pattern(&x.f, h[0], PINNED, 0x20));
	ATF_CHECK(cfx_has_pattern(&x.f, h[1], CUDA0, 0x21));
	room_fini(&x);
}

/* Explain names sources and destinations still arriving as such. */
ATF_TC_WITHOUT_HEAD(explain_names_arriving);
ATF_TC_BODY(explain_names_arriving, tc)
{
	struct rsd_explanation *e;
	struct rsd_action acts[3];
	struct rsd_plan p = { 0 };
	struct rsd_handle h;
	struct cfx f;

	setup(&f, NULL, 0, 1);
	h = cfx_adopt(&f, PINNED, N, RSD_REPLICABLE);
	only_on_device(&f, h, 0x5e);
	OK(rsd_ensure_async(f.m, h, PINNED, NULL, NULL));
	acts[0] = rsd_action_ensure(h, PINNED);	  /* no-op: arriving there */
	acts[1] = rsd_action_ensure(h, PAGEABLE); /* reads the arriving copy */
	acts[2] = rsd_action_drop(h, PINNED);	  /* refused: still filling */
	p.name = "x";
	p.enter = acts;
	p.nenter = 3;
	OK(rsd_explain(f.m, &p, NULL, &e));
	ATF_REQUIRE_EQ(e->nactions, 3);
	ATF_CHECK(e->actions[0].no_op && e->actions[0].destination_arriving);
	ATF_CHECK(!e->actions[0].source_arriving);
	ATF_CHECK(rsd_location_equal(e->actions[1].source, PINNED));
	ATF_CHECK(e->actions[1].source_arriving && !e->actions[1].destination_arriving);
	ATF_CHECK(!e->actions[2].executable);
	ATF_CHECK(!e->feasible);
	rsd_explanation_free(e);
	rsd_simdev_complete_all(f.sd);
	OK(rsd_manager_reap(f.m));
	OK(rsd_explain(f.m, &p, NULL, &e));
	ATF_CHECK(!e->actions[1].source_arriving);
	ATF_CHECK(e->feasible);
	rsd_explanation_free(e);
	cfx_fini(&f);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, ensure_returns_queued);
	ATF_TP_ADD_TC(tp, same_outcome_as_waiting);
	ATF_TP_ADD_TC(tp, copy_after_filling_source_on_device);
	ATF_TP_ADD_TC(tp, kernel_reads_ordered_copy);
	ATF_TP_ADD_TC(tp, filling_source_fails_both);
	ATF_TP_ADD_TC(tp, ordered_copies_from_threads);
	ATF_TP_ADD_TC(tp, close_with_ordered_copy);
	ATF_TP_ADD_TC(tp, consumer_ordered_on_device);
	ATF_TP_ADD_TC(tp, consumer_order_failure);
	ATF_TP_ADD_TC(tp, host_acquire_waits_or_fails);
	ATF_TP_ADD_TC(tp, move_keeps_source_bytes);
	ATF_TP_ADD_TC(tp, copy_from_filling_source);
	ATF_TP_ADD_TC(tp, close_and_queued_copies);
	ATF_TP_ADD_TC(tp, scope_and_use_async);
	ATF_TP_ADD_TC(tp, use_async_waits_for_room);
	ATF_TP_ADD_TC(tp, use_async_loads_once_after_room);
	ATF_TP_ADD_TC(tp, explain_names_arriving);
	return 0;
}
