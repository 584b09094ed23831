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

/* Queue on cs a kernel that reads r's first buffer (N bytes). */
static void launch_reader(struct rsd_simdev *sd, void *cs, const struct rsd_resident *r,
			  struct kernel_check *k)
{
	struct rsd_simdev_access acc = { 0 };

	k->bytes = rsd_resident_data(r, 0);
	acc.ptr = (void *)k->bytes;
	acc.nbytes = N;
	ATF_REQUIRE_EQ(rsd_simdev_launch_kernel(sd, cs, 1000, &acc, 1, kernel_reads, k), 0);
}

/* A kernel on cuda:1 leased the ordered copy's destination while both
 * copies were queued: it runs after both and reads the value's bytes. */
ATF_TC_WITHOUT_HEAD(kernel_reads_ordered_copy);
ATF_TC_BODY(kernel_reads_ordered_copy, tc)
{
	struct kernel_check k = { NULL, 0x3f, false, false };
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
	launch_reader(f.sd, cs, r, &k);
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

/*
 * cuda:0 (room for two values) holds h[0] and h[1]; h[2] waits in pinned
 * memory; each value's bytes are 0x10 + its index. The tiered policy
 * spills to pinned memory, and the device runs on command from here.
 */
struct spillfx {
	struct cfx f;
	struct rsd_handle h[3];
	struct rsd_policy *pol;
	struct rsd_controller *c;
	void *cs;
};

/* spill_open() with `extra` bytes of room on cuda:0 besides. */
static void spill_open_room(struct spillfx *s, uint64_t extra)
{
	const struct rsd_budget b[] = { { CUDA0, 2 * N + extra } };
	const struct rsd_location to_pinned[] = { PINNED };
	const struct rsd_fallback_tier tier = { CUDA0, to_pinned, 1 };

	cfx_sim(&s->f, b, 1, 1);
	for (int i = 0; i < 3; i++) {
		s->h[i] = cfx_adopt(&s->f, PINNED, N, RSD_EXCLUSIVE);
		cfx_fill(&s->f, s->h[i], PINNED, 0x10 + i);
	}
	OK(rsd_move(s->f.m, s->h[0], CUDA0, NULL, NULL, NULL));
	OK(rsd_move(s->f.m, s->h[1], CUDA0, NULL, NULL, NULL));
	OK(rsd_tiered_lru_create(&tier, 1, &s->pol));
	OK(rsd_controller_create(s->f.m, s->pol, 0, &s->c));
	ATF_REQUIRE_EQ(rsd_simdev_stream_create(s->f.sd, 0, &s->cs), 0);
	rsd_simdev_set_progress(s->f.sd, RSD_SIMDEV_ON_COMMAND, 0);
}

static void spill_open(struct spillfx *s)
{
	spill_open_room(s, 0);
}

/* Ask for h[2] on cuda:0 without waiting: the plan spills h[0]. */
static struct rsd_use *spill_use(struct spillfx *s)
{
	struct rsd_requirement req = { s->h[2], CUDA0 };
	struct rsd_request r = { "third", &req, 1, NULL, 0 };
	const struct rsd_decision *d;
	struct rsd_use *u;

	OK(rsd_controller_use_async(s->c, &r, &s->cs, 1, NULL, 0, &u));
	d = rsd_use_decision(u);
	ATF_REQUIRE_EQ(d->nevictions, 1);
	ATF_CHECK_EQ(d->evictions[0].action.kind, RSD_ACT_MOVE);
	ATF_CHECK(rsd_handle_equal(d->evictions[0].action.handle, s->h[0]));
	return u;
}

/* End a room test's use, then let the device run everything and fold
 * every queued copy in. */
static void spill_use_end(struct spillfx *s, struct rsd_use *u)
{
	OK(rsd_use_close(u, NULL));
	rsd_use_free(u);
	rsd_simdev_set_progress(s->f.sd, RSD_SIMDEV_IMMEDIATE, 0);
	OK(rsd_manager_reap(s->f.m));
}

/* Each value's bytes are whole where `at` says it is. */
static void spill_check_bytes(struct spillfx *s, struct rsd_location at0, struct rsd_location at1,
			      struct rsd_location at2)
{
	const struct rsd_location at[] = { at0, at1, at2 };

	rsd_simdev_set_progress(s->f.sd, RSD_SIMDEV_IMMEDIATE, 0);
	for (int i = 0; i < 3; i++)
		ATF_CHECK_MSG(cfx_has_pattern(&s->f, s->h[i], at[i], 0x10 + i), "value %d", i);
}

static void spill_close(struct spillfx *s)
{
	OK(rsd_manager_close(s->f.m, 0));
	rsd_controller_free(s->c);
	rsd_policy_free(s->pol);
	rsd_simdev_stream_destroy(s->f.sd, s->cs);
	cfx_fini(&s->f);
}

/* Every materialization's charge at `at` adds up to its used bytes, and
 * nothing is in flight there. */
static void check_ledger(const struct rsd_snapshot *snap, struct rsd_location at)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < snap->nvalues; i++)
		for (size_t j = 0; j < snap->values[i].nmaterializations; j++)
			if (rsd_location_equal(snap->values[i].materializations[j].location, at))
				sum += snap->values[i].materializations[j].charged_nbytes;
	ATF_CHECK_EQ(cfx_loc(snap, at)->used_bytes, sum);
	ATF_CHECK_EQ(cfx_loc(snap, at)->in_flight_bytes, 0);
}

/*
 * A not-waiting use whose plan spills to make room returns with the spill
 * still queued (the device has run nothing): the request's copy writes
 * into the block the spill reads, its stream ordered after the spill's
 * event, and the block's charge is the new value's, so the device counts
 * it once and never shows over its budget. A kernel ordered after the use
 * reads the new value's bytes; the spilled value's bytes arrive intact.
 */
ATF_TC_WITHOUT_HEAD(use_async_takes_spilled_room);
ATF_TC_BODY(use_async_takes_spilled_room, tc)
{
	struct kernel_check k = { NULL, 0x12, false, false };
	const struct rsd_resident *r;
	struct rsd_snapshot *snap;
	struct spillfx s;
	struct rsd_use *u;
	unsigned long waits;

	spill_open(&s);
	waits = rsd_simdev_calls(s.f.sd, RSD_SIMDEV_STREAM_WAIT);
	u = spill_use(&s);
	/* The request's copy waited for the spill on its stream. */
	ATF_CHECK(rsd_simdev_calls(s.f.sd, RSD_SIMDEV_STREAM_WAIT) - waits >= 1);
	snap = cfx_snap(&s.f);
	ATF_CHECK(!cfx_snap_mat(snap, s.h[0], CUDA0));
	ATF_CHECK(cfx_snap_mat(snap, s.h[0], PINNED)->arriving);
	ATF_CHECK(cfx_snap_mat(snap, s.h[2], CUDA0)->arriving);
	ATF_CHECK_EQ(cfx_loc(snap, CUDA0)->used_bytes, 2 * N);
	ATF_CHECK_EQ(cfx_loc(snap, CUDA0)->peak_charged_bytes, 2 * N);
	check_ledger(snap, CUDA0);
	rsd_snapshot_free(snap);

	OK(rsd_use_value(u, s.h[2], CUDA0, &r));
	launch_reader(s.f.sd, s.cs, r, &k);
	ATF_CHECK(!k.ran);
	rsd_simdev_complete_all(s.f.sd);
	ATF_CHECK(k.ran);
	ATF_CHECK(k.right);
	OK(rsd_use_close(u, NULL));
	rsd_use_free(u);
	OK(rsd_manager_reap(s.f.m));
	snap = cfx_snap(&s.f);
	ATF_CHECK(!cfx_snap_mat(snap, s.h[0], PINNED)->arriving);
	ATF_CHECK(!cfx_snap_mat(snap, s.h[2], CUDA0)->arriving);
	check_ledger(snap, CUDA0);
	check_ledger(snap, PINNED);
	rsd_snapshot_free(snap);
	spill_check_bytes(&s, PINNED, CUDA0, CUDA0);
	spill_close(&s);
}

/* spill_use() with the nth copy the device runs failing (1: the spill,
 * 2: the copy into its block), run to the end and the use closed. */
static void spill_use_failing(struct spillfx *s, unsigned nth)
{
	struct rsd_use *u;

	spill_open(s);
	rsd_simdev_fail_nth(s->f.sd, RSD_SIMDEV_COPY_EXEC, nth, RSD_EDEVICE);
	u = spill_use(s);
	rsd_simdev_complete_all(s->f.sd);
	/* The use's close drains the failed streams: let the device run. */
	rsd_simdev_set_progress(s->f.sd, RSD_SIMDEV_IMMEDIATE, 0);
	/* The consumer stream failed with the copy: the use's lease ended. */
	OK(rsd_use_close(u, NULL));
	rsd_use_free(u);
}

/*
 * The spill fails on the device: the request's copy, ordered after it,
 * fails with it and wrote nothing, so the block goes back to the spilled
 * value, which is on the device again with its bytes; the requested value
 * stays in pinned memory. The failure is reported once; every byte is
 * charged once throughout.
 */
ATF_TC_WITHOUT_HEAD(spill_fails_room_returns);
ATF_TC_BODY(spill_fails_room_returns, tc)
{
	struct rsd_snapshot *snap;
	struct spillfx s;
	int rc, seen = 0;

	spill_use_failing(&s, 1);
	/* One error each: the spill's (to pinned memory) and the copy's. */
	for (int i = 0; i < 2; i++) {
		ERR(RSD_EDEVICE, rsd_manager_reap(s.f.m));
		rc = strstr(rsd_last_error()->message, "to cuda:0 failed") ? 1 : 2;
		ATF_CHECK(!(seen & rc));
		seen |= rc;
	}
	ATF_CHECK_EQ(seen, 3);
	OK(rsd_manager_reap(s.f.m));
	snap = cfx_snap(&s.f);
	ATF_CHECK(cfx_snap_mat(snap, s.h[0], CUDA0) &&
		  !cfx_snap_mat(snap, s.h[0], CUDA0)->arriving);
	ATF_CHECK(!cfx_snap_mat(snap, s.h[0], PINNED));
	ATF_CHECK(!cfx_snap_mat(snap, s.h[2], CUDA0));
	ATF_CHECK(cfx_snap_mat(snap, s.h[2], PINNED));
	ATF_CHECK_EQ(cfx_loc(snap, CUDA0)->used_bytes, 2 * N);
	check_ledger(snap, CUDA0);
	check_ledger(snap, PINNED);
	rsd_snapshot_free(snap);
	spill_check_bytes(&s, CUDA0, CUDA0, PINNED);
	spill_close(&s);
}

static void *move_async_main(void *arg)
{
	struct waiter *w = arg;

	w->rc = rsd_move_async(w->f->m, w->h, w->at, NULL, NULL, NULL);
	atomic_store(&w->done, true);
	return NULL;
}

/* The spill of h[0] completed and the move of h[2] into its block was
 * undone: h[0] in pinned memory, h[2] back there, each byte charged once;
 * then the manager closes. */
static void spill_check_undone(struct spillfx *s)
{
	struct rsd_snapshot *snap = cfx_snap(&s->f);

	ATF_CHECK(!cfx_snap_mat(snap, s->h[0], CUDA0));
	ATF_CHECK(!cfx_snap_mat(snap, s->h[2], CUDA0));
	ATF_CHECK_EQ(cfx_loc(snap, CUDA0)->used_bytes, N);
	check_ledger(snap, CUDA0);
	check_ledger(snap, PINNED);
	rsd_snapshot_free(snap);
	spill_check_bytes(s, PINNED, CUDA0, PINNED);
	spill_close(s);
}

/*
 * The spill completes and the copy into its block fails on its own: the
 * spilled value is in pinned memory, the requested one back there too (its
 * move undone), each byte charged once, one error reported.
 */
ATF_TC_WITHOUT_HEAD(copy_into_spilled_room_fails);
ATF_TC_BODY(copy_into_spilled_room_fails, tc)
{
	struct spillfx s;

	spill_use_failing(&s, 2);
	ERR(RSD_EDEVICE, rsd_manager_reap(s.f.m));
	CHECK_MSG_HAS("to cuda:0 failed");
	OK(rsd_manager_reap(s.f.m));
	spill_check_undone(&s);
}

/* h[0] spilled to pinned memory and h[2] moved into its block, not
 * waiting: cuda:0 counts the block once. */
static void spill_then_move(struct spillfx *s)
{
	spill_open(s);
	OK(rsd_move_async(s->f.m, s->h[0], PINNED, NULL, NULL, NULL));
	OK(rsd_move_async(s->f.m, s->h[2], CUDA0, NULL, NULL, NULL));
	ATF_CHECK_EQ(cfx_used(&s->f, CUDA0), 2 * N);
}

/* After the spill of h[0] and the move of h[2] into its block have both
 * run and been folded in: every value whole where it went, each byte
 * charged once, and the manager closes. */
static void spill_check_moved(struct spillfx *s)
{
	struct rsd_snapshot *snap = cfx_snap(&s->f);

	ATF_CHECK(!cfx_snap_mat(snap, s->h[0], CUDA0));
	ATF_CHECK(cfx_snap_mat(snap, s->h[0], PINNED) &&
		  !cfx_snap_mat(snap, s->h[0], PINNED)->arriving);
	ATF_CHECK(cfx_snap_mat(snap, s->h[2], CUDA0) &&
		  !cfx_snap_mat(snap, s->h[2], CUDA0)->arriving);
	ATF_CHECK(!cfx_snap_mat(snap, s->h[2], PINNED));
	check_ledger(snap, CUDA0);
	check_ledger(snap, PINNED);
	rsd_snapshot_free(snap);
	spill_check_bytes(s, PINNED, CUDA0, CUDA0);
	spill_close(s);
}

/*
 * The device ran the spill and the move into its block, but the spill's
 * event answers a failure (its query fails before and after the drain of
 * its stream, which the manager takes as the work's failure). The copy
 * into the block decides: it is folded in first, and its completion
 * proves the spill's, so the spilled value stays where it went (taking
 * the failure would put it back into the block, which now holds the
 * other value's bytes). Nothing is reported.
 */
ATF_TC_WITHOUT_HEAD(spill_failure_answered_after_copy);
ATF_TC_BODY(spill_failure_answered_after_copy, tc)
{
	struct spillfx s;

	spill_then_move(&s);
	rsd_simdev_complete_all(s.f.sd);
	rsd_simdev_fail_all(s.f.sd, RSD_SIMDEV_EVENT_QUERY, RSD_EDEVICE);
	OK(rsd_manager_reap(s.f.m));
	rsd_simdev_fail_all(s.f.sd, RSD_SIMDEV_EVENT_QUERY, 0);
	OK(rsd_manager_reap(s.f.m));
	spill_check_moved(&s);
}

/*
 * The same with the copy into the block folded in before the spill's
 * answer: a small value's copy queued first makes the reap visit the
 * copies to cuda:0 first; the spill's query fails there and so does the
 * drain of its stream (no answer, nothing folded). Then the spill's event
 * answers a failure: the completed copy proved the spill complete, and
 * the spilled value keeps its only copy.
 */
ATF_TC_WITHOUT_HEAD(spill_failure_answered_copy_first);
ATF_TC_BODY(spill_failure_answered_copy_first, tc)
{
	struct rsd_snapshot *snap;
	struct rsd_handle x;
	struct spillfx s;

	spill_open_room(&s, 4096);
	x = cfx_adopt(&s.f, PINNED, 4096, RSD_REPLICABLE);
	cfx_fill(&s.f, x, PINNED, 0x20);
	OK(rsd_ensure_async(s.f.m, x, CUDA0, NULL, NULL));
	OK(rsd_move_async(s.f.m, s.h[0], PINNED, NULL, NULL, NULL));
	OK(rsd_move_async(s.f.m, s.h[2], CUDA0, NULL, NULL, NULL));
	ATF_CHECK_EQ(cfx_used(&s.f, CUDA0), 2 * N + 4096);
	rsd_simdev_complete_all(s.f.sd);
	/* Queries: x's copy, the move into the block, the spill. */
	rsd_simdev_fail_nth(s.f.sd, RSD_SIMDEV_EVENT_QUERY, 3, RSD_EDEVICE);
	rsd_simdev_fail_nth(s.f.sd, RSD_SIMDEV_EVENT_SYNC, 1, RSD_EDEVICE);
	ERR(RSD_EDEVICE, rsd_manager_reap(s.f.m));
	CHECK_MSG_HAS("no answer from the device for the queued copy of value");
	snap = cfx_snap(&s.f);
	ATF_CHECK(!cfx_snap_mat(snap, s.h[2], CUDA0)->arriving);
	ATF_CHECK(cfx_snap_mat(snap, s.h[0], PINNED)->arriving);
	rsd_snapshot_free(snap);
	rsd_simdev_fail_all(s.f.sd, RSD_SIMDEV_EVENT_QUERY, RSD_EDEVICE);
	OK(rsd_manager_reap(s.f.m));
	rsd_simdev_fail_all(s.f.sd, RSD_SIMDEV_EVENT_QUERY, 0);
	OK(rsd_manager_reap(s.f.m));
	rsd_simdev_set_progress(s.f.sd, RSD_SIMDEV_IMMEDIATE, 0);
	ATF_CHECK(cfx_has_pattern(&s.f, x, CUDA0, 0x20));
	spill_check_moved(&s);
}

/*
 * The move into a spill's block fails to queue and its stream will not
 * drain: what it queued may still write the block, so the failed copy's
 * record keeps the block (charged in flight at cuda:0, never twice) until
 * an event recorded behind that work completes; the spill, still queued,
 * only frees its header when it completes. Everything ends where it
 * began or went, each byte charged once.
 */
ATF_TC_WITHOUT_HEAD(failed_copy_keeps_spilled_block);
ATF_TC_BODY(failed_copy_keeps_spilled_block, tc)
{
	struct rsd_snapshot *snap;
	struct spillfx s;

	spill_open(&s);
	OK(rsd_move_async(s.f.m, s.h[0], PINNED, NULL, NULL, NULL));
	rsd_simdev_fail_nth(s.f.sd, RSD_SIMDEV_COPY, 1, RSD_EDEVICE);
	rsd_simdev_fail_nth(s.f.sd, RSD_SIMDEV_EVENT_SYNC, 1, RSD_EDEVICE);
	ERR(RSD_EDEVICE, rsd_move_async(s.f.m, s.h[2], CUDA0, NULL, NULL, NULL));
	snap = cfx_snap(&s.f);
	ATF_CHECK(!cfx_snap_mat(snap, s.h[2], CUDA0));
	ATF_CHECK(cfx_snap_mat(snap, s.h[2], PINNED) &&
		  !cfx_snap_mat(snap, s.h[2], PINNED)->arriving);
	ATF_CHECK_EQ(cfx_loc(snap, CUDA0)->used_bytes, N);
	ATF_CHECK_EQ(cfx_loc(snap, CUDA0)->in_flight_bytes, N);
	rsd_snapshot_free(snap);
	rsd_simdev_complete_all(s.f.sd);
	OK(rsd_manager_reap(s.f.m));
	spill_check_undone(&s);
}

/*
 * Two spills queued, then two threads at once queue values into the room
 * they free: both return with nothing run (the device runs on command),
 * each took one block, and everything arrives whole.
 */
ATF_TC_WITHOUT_HEAD(spilled_room_from_threads);
ATF_TC_BODY(spilled_room_from_threads, tc)
{
	struct waiter w[2];
	pthread_t th[2];
	struct rsd_snapshot *snap;
	struct spillfx s;

	spill_open(&s);
	OK(rsd_move_async(s.f.m, s.h[0], PINNED, NULL, NULL, NULL));
	OK(rsd_move_async(s.f.m, s.h[1], PINNED, NULL, NULL, NULL));
	for (int i = 0; i < 2; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		w[i].f = &s.f;
		w[i].at = CUDA0;
		w[i].h = i ? cfx_adopt(&s.f, PINNED, N, RSD_EXCLUSIVE) : s.h[2];
		if (i)
			cfx_fill(&s.f, w[i].h, PINNED, 0x13);
	}
	for (int i = 0; i < 2; i++)
		ATF_REQUIRE_EQ(pthread_create(&th[i], NULL, move_async_main, &w[i]), 0);
	for (int i = 0; i < 2; i++) {
		ATF_REQUIRE_EQ(pthread_join(th[i], NULL), 0);
		ATF_CHECK_EQ(w[i].rc, 0);
	}
	snap = cfx_snap(&s.f);
	ATF_CHECK_EQ(cfx_loc(snap, CUDA0)->used_bytes, 2 * N);
	ATF_CHECK(cfx_snap_mat(snap, s.h[0], PINNED)->arriving);
	ATF_CHECK(cfx_snap_mat(snap, s.h[1], PINNED)->arriving);
	check_ledger(snap, CUDA0);
	rsd_snapshot_free(snap);
	rsd_simdev_complete_all(s.f.sd);
	OK(rsd_manager_reap(s.f.m));
	rsd_simdev_set_progress(s.f.sd, RSD_SIMDEV_IMMEDIATE, 0);
	for (int i = 0; i < 2; i++)
		ATF_CHECK(cfx_has_pattern(&s.f, s.h[i], PINNED, 0x10 + i));
	ATF_CHECK(cfx_has_pattern(&s.f, w[0].h, CUDA0, 0x12));
	ATF_CHECK(cfx_has_pattern(&s.f, w[1].h, CUDA0, 0x13));
	spill_close(&s);
}

/* A forced close that does not wait, with a copy queued into a spill's
 * block: the block stays allocated under both (the simulator aborts on a
 * free under a queued copy), and the device still runs them. */
ATF_TC_WITHOUT_HEAD(close_with_spilled_room);
ATF_TC_BODY(close_with_spilled_room, tc)
{
	struct spillfx s;

	spill_then_move(&s);
	OK(rsd_manager_close(s.f.m, RSD_CLOSE_FORCE | RSD_CLOSE_NOWAIT));
	rsd_simdev_complete_all(s.f.sd);
	ATF_CHECK_EQ(rsd_simdev_pending_events(s.f.sd, NULL), 0);
	rsd_controller_free(s.c);
	rsd_policy_free(s.pol);
	rsd_simdev_stream_destroy(s.f.sd, s.cs);
	cfx_fini(&s.f);
}

/*
 * A reservation's room is not a block a copy can write: a not-waiting use
 * whose reservation needs the room a queued spill frees waits on the host
 * for that spill (folded in then), and only for it.
 */
ATF_TC_WITHOUT_HEAD(use_async_reservation_waits_for_room);
ATF_TC_BODY(use_async_reservation_waits_for_room, tc)
{
	struct rsd_reservation_spec room = { CUDA0, N, "room" };
	struct rsd_requirement req;
	struct rsd_request r;
	const struct rsd_decision *d;
	struct rsd_snapshot *snap;
	struct spillfx s;
	struct rsd_use *u;

	spill_open(&s);
	/* Each copy starts 20 ms after it could: the spill is still queued
	 * when the reservation needs its room. */
	rsd_simdev_set_progress(s.f.sd, RSD_SIMDEV_BACKGROUND, 20000000);
	req = (struct rsd_requirement){ s.h[1], CUDA0 };
	r = (struct rsd_request){ "room", &req, 1, &room, 1 };
	OK(rsd_controller_use_async(s.c, &r, &s.cs, 1, NULL, 0, &u));
	d = rsd_use_decision(u);
	ATF_REQUIRE_EQ(d->nevictions, 1);
	ATF_CHECK(rsd_handle_equal(d->evictions[0].action.handle, s.h[0]));
	snap = cfx_snap(&s.f);
	/* The spill was waited for and folded in: nothing of it is left. */
	ATF_CHECK(!cfx_snap_mat(snap, s.h[0], CUDA0));
	ATF_CHECK(!cfx_snap_mat(snap, s.h[0], PINNED)->arriving);
	ATF_CHECK_EQ(cfx_loc(snap, CUDA0)->reserved_bytes, N);
	ATF_CHECK_EQ(cfx_loc(snap, CUDA0)->peak_charged_bytes, 2 * N);
	rsd_snapshot_free(snap);
	spill_use_end(&s, u);
	spill_check_bytes(&s, PINNED, CUDA0, PINNED);
	spill_close(&s);
}

/*
 * A value its source reconstructs: the plan spills h[0] and loads the
 * value into the room the spill's copy still holds. A staged load cannot
 * take the spill's block, so it waits for that copy first, and the source
 * is loaded once (loading first, the refused admission would throw the
 * loaded bytes away and load them again after the wait). The outcome is
 * the waiting use's.
 */
ATF_TC_WITHOUT_HEAD(use_async_loads_once_after_room);
ATF_TC_BODY(use_async_loads_once_after_room, tc)
{
	struct rsd_snapshot *snap;
	struct csrc src = { 0 };
	struct spillfx s;
	struct rsd_use *u;

	spill_open(&s);
	rsd_simdev_set_progress(s.f.sd, RSD_SIMDEV_BACKGROUND, 20000000);
	s.h[2] = cfx_sourced(&s.f, &src, PAGEABLE);

	u = spill_use(&s);
	ATF_CHECK_EQ(src.loads, 1);
	snap = cfx_snap(&s.f);
	ATF_CHECK(!cfx_snap_mat(snap, s.h[0], CUDA0));
	ATF_CHECK(cfx_snap_mat(snap, s.h[2], CUDA0) != NULL);
	ATF_CHECK(!cfx_snap_mat(snap, s.h[2], PAGEABLE));
	ATF_CHECK_EQ(cfx_loc(snap, CUDA0)->used_bytes, 2 * N);
	ATF_CHECK_EQ(cfx_loc(snap, CUDA0)->peak_charged_bytes, 2 * N);
	rsd_snapshot_free(snap);
	spill_use_end(&s, u);
	ATF_CHECK_EQ(src.loads, 1);
	ATF_CHECK(cfx_has_pattern(&s.f, s.h[0], PINNED, 0x10));
	ATF_CHECK(cfx_has_pattern(&s.f, s.h[1], CUDA0, 0x11));
	spill_close(&s);
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
	ATF_TP_ADD_TC(tp, use_async_takes_spilled_room);
	ATF_TP_ADD_TC(tp, spill_fails_room_returns);
	ATF_TP_ADD_TC(tp, copy_into_spilled_room_fails);
	ATF_TP_ADD_TC(tp, spill_failure_answered_after_copy);
	ATF_TP_ADD_TC(tp, spill_failure_answered_copy_first);
	ATF_TP_ADD_TC(tp, failed_copy_keeps_spilled_block);
	ATF_TP_ADD_TC(tp, spilled_room_from_threads);
	ATF_TP_ADD_TC(tp, close_with_spilled_room);
	ATF_TP_ADD_TC(tp, use_async_reservation_waits_for_room);
	ATF_TP_ADD_TC(tp, use_async_loads_once_after_room);
	ATF_TP_ADD_TC(tp, explain_names_arriving);
	return 0;
}
