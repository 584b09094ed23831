// SPDX-License-Identifier: MIT
/*
 * Calls that wait for stream work wait for it, in each of the simulated
 * device's progress modes: a release with RSD_RELEASE_WAIT, a waiting
 * rsd_manager_close(), an abandoned GPU lease, the fallback of a release
 * whose event record fails, and an ensure, a copy and a move on a caller's
 * stream.
 *
 * On command, a second thread completes the stream 100 ms after the call
 * starts: the call must not have returned before, and must return after.
 * In background mode (50 ms per item) the call must take at least the delay.
 * In immediate mode the call returns with the work done. In every mode the
 * work is done when the call returns: nothing pending, the bytes in place.
 * A move frees its source once the copy has run; freeing it earlier would
 * abort the simulator (it refuses to free memory a queued copy still reads).
 */
#include <atf-c.h>
#include "../check.h"
#include <stdio.h>
#include <string.h>

#include <rsd/rsd.h>

#include "../simwait.h"
#include "lfx.h"

#define BG_DELAY_NS (50 * 1000000ull)

static const enum rsd_simdev_progress modes[] = { RSD_SIMDEV_ON_COMMAND, RSD_SIMDEV_IMMEDIATE,
						  RSD_SIMDEV_BACKGROUND };
static const char *const mode_names[] = { "on-command", "immediate", "background" };

/* Brackets a call that waits for stream (NULL: every stream). */
struct waiter {
	enum rsd_simdev_progress mode;
	struct simwait w;
	uint64_t t0;
};

static void setup(enum rsd_simdev_progress mode)
{
	lfx_setup(false);
	lfx_nwarn = 0;
	rsd_simdev_set_progress(lfx_sd, mode, mode == RSD_SIMDEV_BACKGROUND ? BG_DELAY_NS : 0);
}

static void wait_begin(struct waiter *wt, enum rsd_simdev_progress mode, void *stream)
{
	wt->mode = mode;
	if (mode == RSD_SIMDEV_ON_COMMAND)
		ATF_REQUIRE(simwait_start(&wt->w, lfx_sd, stream, 100));
	wt->t0 = simwait_now_ns();
}

static void wait_end(int line, struct waiter *wt, const char *what)
{
	uint64_t took = simwait_now_ns() - wt->t0;

	if (wt->mode == RSD_SIMDEV_ON_COMMAND)
		ATF_CHECK_MSG(simwait_blocked(&wt->w),
			      "line %d: %s returned before its stream was completed", line, what);
	else if (wt->mode == RSD_SIMDEV_BACKGROUND)
		ATF_CHECK_MSG(took >= BG_DELAY_NS,
			      "line %d: %s returned after %llu ns, before the %llu ns the "
			      "background work takes",
			      line, what, (unsigned long long)took,
			      (unsigned long long)BG_DELAY_NS);
}

ATF_TC_WITHOUT_HEAD(release_wait_blocks);
ATF_TC_BODY(release_wait_blocks, tc)
{
	for (size_t i = 0; i < 3; i++) {
		struct rsd_lease *l = NULL;
		struct waiter wt;
		struct rsd_handle a;
		uint64_t v;
		void *st;

		setup(modes[i]);
		st = lfx_stream(0);
		a = lfx_put(lfx_cuda(0), 64, NULL);
		RSD_REQUIRE_OK(rsd_acquire(lfx_m, &a, 1, lfx_cuda(0), st, &l));
		v = lfx_ver();
		wait_begin(&wt, modes[i], st);
		RSD_CHECK_OK(rsd_lease_release(l, RSD_RELEASE_WAIT));
		wait_end(__LINE__, &wt, mode_names[i]);
		ATF_CHECK(!rsd_lease_active(l));
		CHECK_VER(v + 2);
		CHECK_MAT(a, lfx_cuda(0), 0, 0, 0);
		ATF_CHECK_EQ(rsd_simdev_pending_events(lfx_sd, st), 0);
		rsd_lease_free(l);
		ATF_CHECK_EQ(lfx_nwarn, 0);
		lfx_teardown();
	}
}

ATF_TC_WITHOUT_HEAD(waiting_close_blocks);
ATF_TC_BODY(waiting_close_blocks, tc)
{
	for (size_t i = 0; i < 3; i++) {
		struct rsd_lease *l = NULL;
		struct waiter wt;
		struct rsd_handle a;
		void *st;

		setup(modes[i]);
		st = lfx_stream(0);
		a = lfx_put(lfx_cuda(0), 64, NULL);
		RSD_REQUIRE_OK(rsd_acquire(lfx_m, &a, 1, lfx_cuda(0), st, &l));
		/* Timed from before the release: its event is what the close
		 * waits for (pending now, except in immediate mode). */
		wait_begin(&wt, modes[i], st);
		RSD_REQUIRE_OK(rsd_lease_release(l, 0));
		RSD_CHECK_OK(rsd_manager_close(lfx_m, 0));
		wait_end(__LINE__, &wt, mode_names[i]);
		ATF_CHECK_EQ(rsd_simdev_pending_events(lfx_sd, st), 0);
		ATF_CHECK_EQ(rsd_manager_state_version(lfx_m), 0); /* closed */
		rsd_lease_free(l);
		lfx_teardown();
	}
}

/* In a fresh fixture of that mode: a lease of a new cuda:0 value on a new
 * stream *st, with the consumer's work (*busy, an event) queued behind it. */
static struct rsd_lease *busy_lease(enum rsd_simdev_progress mode, struct rsd_handle *a, void **st,
				    void **busy)
{
	struct rsd_lease *l = NULL;

	setup(mode);
	*st = lfx_stream(0);
	*a = lfx_put(lfx_cuda(0), 64, NULL);
	RSD_REQUIRE_OK(rsd_acquire(lfx_m, a, 1, lfx_cuda(0), *st, &l));
	*busy = NULL;
	ATF_REQUIRE_EQ(rsd_simdev_ops()->event_record(lfx_sd, *st, busy), 0);
	return l;
}

ATF_TC_WITHOUT_HEAD(abandoned_lease_blocks);
ATF_TC_BODY(abandoned_lease_blocks, tc)
{
	for (size_t i = 0; i < 3; i++) {
		const struct rsd_device_ops *ops = rsd_simdev_ops();
		struct rsd_lease *l;
		struct waiter wt;
		struct rsd_handle a;
		void *st, *busy;
		uint64_t v;

		l = busy_lease(modes[i], &a, &st, &busy);
		v = lfx_ver();
		wait_begin(&wt, modes[i], st);
		rsd_lease_free(l);
		wait_end(__LINE__, &wt, mode_names[i]);
		CHECK_VER(v + 2);
		ATF_CHECK_EQ(lfx_nwarn, 1); /* "abandoned" */
		CHECK_MAT(a, lfx_cuda(0), 0, 0, 0);
		ATF_CHECK_EQ(ops->event_query(lfx_sd, busy), 1);
		ops->event_destroy(lfx_sd, busy);
		lfx_teardown();
	}
}

ATF_TC_WITHOUT_HEAD(record_failure_fallback_blocks);
ATF_TC_BODY(record_failure_fallback_blocks, tc)
{
	for (size_t i = 0; i < 3; i++) {
		const struct rsd_device_ops *ops = rsd_simdev_ops();
		struct rsd_lease *l;
		struct waiter wt;
		struct rsd_handle a;
		void *st, *busy;
		uint64_t v;

		l = busy_lease(modes[i], &a, &st, &busy);
		rsd_simdev_fail_nth(lfx_sd, RSD_SIMDEV_EVENT_RECORD, 1, RSD_EDEVICE);
		v = lfx_ver();
		wait_begin(&wt, modes[i], st);
		RSD_CHECK_OK(rsd_lease_release(l, 0));
		wait_end(__LINE__, &wt, mode_names[i]);
		ATF_CHECK(!rsd_lease_active(l));
		CHECK_VER(v + 1);
		ATF_CHECK_EQ(lfx_nwarn, 1);
		ATF_CHECK(strstr(lfx_lastwarn, "synchronized its streams") != NULL);
		ATF_CHECK_EQ(ops->event_query(lfx_sd, busy), 1);
		CHECK_MAT(a, lfx_cuda(0), 0, 0, 0);
		rsd_lease_free(l);
		ops->event_destroy(lfx_sd, busy);
		lfx_teardown();
	}
}

/* The bytes of h at a location, read through a host-visible lease (the
 * simulated device's memory is host memory). */
static void check_bytes(int line, struct rsd_handle h, struct rsd_location at, void *st,
			unsigned char fill)
{
	const struct rsd_resident *r = NULL;
	struct rsd_lease *l = NULL;
	const unsigned char *p;

	RSD_REQUIRE_OK(rsd_acquire(lfx_m, &h, 1, at, st, &l));
	RSD_REQUIRE_OK(rsd_lease_value(l, h, &r));
	p = rsd_resident_data(r, 0);
	for (uint64_t i = 0; i < rsd_resident_buffer_nbytes(r, 0); i++)
		if (p[i] != fill) {
			ATF_CHECK_MSG(false, "line %d: byte %llu is %#x, not %#x", line,
				      (unsigned long long)i, p[i], fill);
			break;
		}
	/* Nothing waits on st now: the release returns at once in any mode. */
	rsd_simdev_complete_all(lfx_sd);
	RSD_REQUIRE_OK(rsd_lease_release(l, 0));
	rsd_lease_free(l);
	rsd_simdev_complete_all(lfx_sd);
	RSD_REQUIRE_OK(rsd_manager_reap(lfx_m));
}

/* Ensure, copy (its alias) and move on a caller's stream wait for the copy
 * on that stream; the move's source is freed only after it has run. */
ATF_TC_WITHOUT_HEAD(transitions_on_caller_stream_block);
ATF_TC_BODY(transitions_on_caller_stream_block, tc)
{
	for (size_t i = 0; i < 3; i++) {
		struct rsd_resident *r = NULL;
		struct rsd_transition rep;
		struct waiter wt;
		struct rsd_handle a;
		void *st0, *st1;
		uint64_t v;

		setup(modes[i]);
		st0 = lfx_stream(0);
		st1 = lfx_stream(1);
		a = lfx_put(RSD_LOC_PAGEABLE_HOST, 4096, &r);
		memset(rsd_resident_data(r, 0), 0xa5, 4096);
		v = lfx_ver();

		wait_begin(&wt, modes[i], st0);
		RSD_CHECK_OK(rsd_ensure(lfx_m, a, lfx_cuda(0), st0, &rep));
		wait_end(__LINE__, &wt, "ensure");
		ATF_CHECK(!rep.no_op);
		CHECK_VER(v + 2); /* a new location, then the install */
		ATF_CHECK_EQ(rsd_simdev_pending_events(lfx_sd, st0), 0);
		check_bytes(__LINE__, a, lfx_cuda(0), st0, 0xa5);
		v = lfx_ver();

		wait_begin(&wt, modes[i], st1);
		RSD_CHECK_OK(rsd_copy(lfx_m, a, lfx_cuda(1), st1, &rep));
		wait_end(__LINE__, &wt, "copy");
		CHECK_VER(v + 2); /* cuda:1 is new too */
		check_bytes(__LINE__, a, lfx_cuda(1), st1, 0xa5);
		RSD_CHECK_OK(rsd_drop(lfx_m, a, lfx_cuda(1), NULL));
		v = lfx_ver();

		/* cuda:0 -> cuda:1 on st1: the source is simulated memory, which
		 * the simulator will not free under a queued copy. */
		wait_begin(&wt, modes[i], st1);
		RSD_CHECK_OK(rsd_move(lfx_m, a, lfx_cuda(1), &(struct rsd_location){ RSD_CUDA, 0 },
				      st1, &rep));
		wait_end(__LINE__, &wt, "move");
		CHECK_VER(v + 2); /* the same in every mode */
		check_bytes(__LINE__, a, lfx_cuda(1), st1, 0xa5);
		ATF_CHECK_EQ(rsd_simdev_allocated_bytes(lfx_sd, 0), 0);
		ATF_CHECK_EQ(lfx_nwarn, 0);
		lfx_teardown();
	}
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, release_wait_blocks);
	ATF_TP_ADD_TC(tp, waiting_close_blocks);
	ATF_TP_ADD_TC(tp, abandoned_lease_blocks);
	ATF_TP_ADD_TC(tp, record_failure_fallback_blocks);
	ATF_TP_ADD_TC(tp, transitions_on_caller_stream_block);
	return atf_no_error();
}
