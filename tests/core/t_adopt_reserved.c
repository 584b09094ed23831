// SPDX-License-Identifier: MIT
/*
 * Outputs adopted into their reservations (reference.md §8.10):
 * rsd_adopt_reserved() and rsd_scope_adopt() move a value's charge out of a
 * reservation in one step (exact snapshots, one version step, never over
 * budget with the location full), every failure changes nothing, a
 * producer stream keeps the new materialization filling until its event is
 * reaped (removal refused, readers ordered after it), and another thread
 * admitting at the location meanwhile never sees the bytes counted twice or
 * free.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <atf-c.h>
#include "../check.h"

#include "../simwait.h"
#include "cfx.h"

static struct rsd_location c0;

/* used, reserved and the reservation count at `at`, and the version. */
static void check_acct(struct cfx *f, struct rsd_location at, uint64_t used, uint64_t reserved,
		       uint64_t nresv, uint64_t version, const char *file, int line)
{
	struct rsd_snapshot *s = cfx_snap(f);
	const struct rsd_location_snapshot *l = cfx_loc(s, at);

	ATF_REQUIRE_MSG(l, "%s:%d: %s is not a known location", file, line, cfx_name(at));
	if (l->used_bytes != used || l->reserved_bytes != reserved ||
	    l->reservation_count != nresv || s->state_version != version)
		atf_tc_fail_check(file, (size_t)line,
				  "%s: used %llu reserved %llu reservations %llu version %llu, "
				  "expected %llu %llu %llu %llu",
				  cfx_name(at), (unsigned long long)l->used_bytes,
				  (unsigned long long)l->reserved_bytes,
				  (unsigned long long)l->reservation_count,
				  (unsigned long long)s->state_version, (unsigned long long)used,
				  (unsigned long long)reserved, (unsigned long long)nresv,
				  (unsigned long long)version);
	rsd_snapshot_free(s);
}
#define CHECK_ACCT(f, at, used, reserved, nresv, version) \
	check_acct(f, at, used, reserved, nresv, version, __FILE__, __LINE__)

/* The snapshot's reservation i: its bytes and label. */
static void check_resv(struct cfx *f, size_t i, uint64_t nbytes, const char *label)
{
	struct rsd_snapshot *s = cfx_snap(f);

	ATF_REQUIRE(i < s->nreservations);
	ATF_CHECK_EQ(s->reservations[i].nbytes, nbytes);
	ATF_CHECK_STREQ(s->reservations[i].label, label);
	rsd_snapshot_free(s);
}

/*
 * A location whose budget is exactly one value plus a 2N reservation: two
 * outputs go in, each moving N from reserved to used in one version step,
 * peaks unchanged; nothing else fits at any point, and the emptied
 * reservation stays active (close refuses) until released.
 */
ATF_TC_WITHOUT_HEAD(moves_the_charge);
ATF_TC_BODY(moves_the_charge, tc)
{
	const struct rsd_budget b = { PAGEABLE, 3 * N };
	struct rsd_resident *o1, *o2, *extra;
	const struct rsd_value_snapshot *vs;
	struct rsd_reservation *r;
	struct rsd_snapshot *s;
	struct rsd_handle h1, h2, other, got;
	uint64_t v;
	struct cfx f;

	cfx_host(&f, &b, 1);
	other = cfx_adopt(&f, PAGEABLE, N, RSD_EXCLUSIVE);
	OK(rsd_reserve(f.m, PAGEABLE, 2 * N, "out", &r));
	v = cfx_version(&f);
	CHECK_ACCT(&f, PAGEABLE, N, 2 * N, 1, v);
	ATF_CHECK_EQ(cfx_peak_charged(&f, PAGEABLE), 3 * N);

	/* Full: a plain adopt of one more byte is refused. */
	extra = cfx_alloc(&f, PAGEABLE, 1);
	ERR(RSD_EBUDGET, rsd_adopt(f.m, extra, NULL, RSD_EXCLUSIVE, &got));

	o1 = cfx_alloc(&f, PAGEABLE, N);
	memset(rsd_resident_data(o1, 0), 0x5a, N);
	OK(rsd_adopt_reserved(r, o1, RSD_EXCLUSIVE, NULL, &h1));
	CHECK_ACCT(&f, PAGEABLE, 2 * N, N, 1, v + 1);
	check_resv(&f, 0, N, "out");
	ATF_CHECK_EQ(rsd_reservation_nbytes(r), N);
	ATF_CHECK(rsd_reservation_active(r));
	ERR(RSD_EBUDGET, rsd_adopt(f.m, extra, NULL, RSD_EXCLUSIVE, &got));

	o2 = cfx_alloc(&f, PAGEABLE, N);
	OK(rsd_adopt_reserved(r, o2, RSD_REPLICABLE, NULL, &h2));
	CHECK_ACCT(&f, PAGEABLE, 3 * N, 0, 1, v + 2);
	check_resv(&f, 0, 0, "out");
	ATF_CHECK_EQ(rsd_reservation_nbytes(r), 0);
	ATF_CHECK(rsd_reservation_active(r));
	ERR(RSD_EBUDGET, rsd_adopt(f.m, extra, NULL, RSD_EXCLUSIVE, &got));

	s = cfx_snap(&f);
	ATF_CHECK_EQ(cfx_loc(s, PAGEABLE)->peak_charged_bytes, 3 * N);
	ATF_CHECK_EQ(cfx_loc(s, PAGEABLE)->peak_used_bytes, 3 * N);
	ATF_CHECK_EQ(cfx_loc(s, PAGEABLE)->value_count, 3);
	ATF_CHECK_EQ(cfx_loc(s, PAGEABLE)->remaining_budget_bytes, 0);
	vs = cfx_val(s, h1);
	ATF_REQUIRE(vs);
	ATF_CHECK_EQ(vs->spec.storage_nbytes, N);
	ATF_CHECK_EQ(vs->spec.logical_nbytes, N);
	ATF_CHECK_EQ(vs->spec.replica_mode, RSD_EXCLUSIVE);
	ATF_CHECK_EQ(vs->spec.recoverability, RSD_MUST_PRESERVE);
	ATF_CHECK(!vs->has_source);
	ATF_CHECK_EQ(cfx_val(s, h2)->spec.replica_mode, RSD_REPLICABLE);
	/* Registration order: handles grow. */
	ATF_CHECK(other.id < h1.id && h1.id < h2.id);
	rsd_snapshot_free(s);
	ATF_CHECK(cfx_resident(&f, h1, PAGEABLE));

	/* An emptied reservation is still a lifetime. */
	ERR(RSD_EINUSE, rsd_manager_close(f.m, 0));
	OK(rsd_reservation_release(r));
	CHECK_ACCT(&f, PAGEABLE, 3 * N, 0, 0, v + 3);
	/* The outputs are ordinary values. */
	OK(rsd_discard(f.m, h1, NULL));
	CHECK_ACCT(&f, PAGEABLE, 2 * N, 0, 0, v + 5);
	OK(rsd_adopt(f.m, extra, NULL, RSD_EXCLUSIVE, &got));
	rsd_reservation_free(r);
	cfx_fini(&f);
}

/* Free a buffer wrapped by wrap_at(). */
static void free_buf(void *ctx, struct rsd_resident *r)
{
	(void)r;
	free(ctx);
}

/* A resident at `at` of `logical` bytes in an allocation of `storage` at
 * base (simulated device memory is host memory); freed with base when own. */
static struct rsd_resident *wrap_at(struct rsd_location at, void *base, uint64_t logical,
				    uint64_t storage, bool own)
{
	struct rsd_buffer_view bv = { base, logical, base, storage, at };
	struct rsd_resident *r;

	OK(rsd_resident_wrap(&rsd_resident_type, 1, &bv, NULL, 0, own ? free_buf : NULL,
			     own ? base : NULL, &r));
	return r;
}

/* The charge is the storage bytes: a 10-byte view of a 64-byte allocation
 * takes 64 out of the reservation. An unbudgeted location works alike. */
ATF_TC_WITHOUT_HEAD(storage_bytes);
ATF_TC_BODY(storage_bytes, tc)
{
	struct rsd_reservation *r;
	struct rsd_resident *o;
	struct rsd_snapshot *s;
	struct rsd_handle h;
	uint64_t v;
	struct cfx f;

	cfx_host(&f, NULL, 0);
	OK(rsd_reserve(f.m, PAGEABLE, 100, "out", &r));
	v = cfx_version(&f);
	o = wrap_at(PAGEABLE, calloc(1, 64), 10, 64, true);
	OK(rsd_adopt_reserved(r, o, RSD_EXCLUSIVE, NULL, &h));
	CHECK_ACCT(&f, PAGEABLE, 64, 36, 1, v + 1);
	s = cfx_snap(&f);
	ATF_CHECK_EQ(cfx_val(s, h)->spec.logical_nbytes, 10);
	ATF_CHECK_EQ(cfx_val(s, h)->spec.storage_nbytes, 64);
	ATF_CHECK_EQ(cfx_loc(s, PAGEABLE)->peak_charged_bytes, 100);
	rsd_snapshot_free(s);
	/* A zero-byte value fits an emptied reservation too. */
	o = cfx_alloc(&f, PAGEABLE, 36);
	OK(rsd_adopt_reserved(r, o, RSD_EXCLUSIVE, NULL, &h));
	CHECK_ACCT(&f, PAGEABLE, 100, 0, 1, v + 2);
	OK(rsd_resident_alloc(f.m, &rsd_resident_type, PAGEABLE, 1, &(uint64_t){ 0 }, NULL, 0, &o));
	OK(rsd_adopt_reserved(r, o, RSD_EXCLUSIVE, NULL, &h));
	CHECK_ACCT(&f, PAGEABLE, 100, 0, 1, v + 3);
	OK(rsd_reservation_release(r));
	rsd_reservation_free(r);
	cfx_fini(&f);
}

/*
 * Every refusal leaves the snapshot identical (version, values, accounting,
 * reservations) and the value the caller's.
 */
ATF_TC_WITHOUT_HEAD(failures_change_nothing);
ATF_TC_BODY(failures_change_nothing, tc)
{
	const struct rsd_budget b[] = { { PAGEABLE, 5 * N }, { { RSD_CUDA, 0 }, 2 * N } };
	struct rsd_reservation *r, *rc, *gone;
	struct rsd_resident *o, *big, *dev, *dev1, *alias, *dalias, *owned;
	struct rsd_snapshot *before, *after;
	struct rsd_handle h = { 0 }, keep;
	struct rsd_location c1 = cfx_cuda(1);
	void *s0, *s1, *buf = calloc(1, N), *dbuf = calloc(1, N);
	struct cfx f;

	cfx_sim(&f, b, 2, 2);
	OK(rsd_simdev_stream_create(f.sd, 0, &s0));
	OK(rsd_simdev_stream_create(f.sd, 1, &s1));
	OK(rsd_reserve(f.m, PAGEABLE, 2 * N, "out", &r));
	OK(rsd_reserve(f.m, c0, N, "dev-out", &rc));
	OK(rsd_reserve(f.m, PAGEABLE, N, "gone", &gone));
	OK(rsd_reservation_release(gone));
	keep = cfx_adopt(&f, PAGEABLE, N, RSD_EXCLUSIVE);
	/* Values whose storage the aliases below name again. */
	OK(rsd_adopt(f.m, wrap_at(PAGEABLE, buf, N, N, true), NULL, RSD_EXCLUSIVE, &keep));
	OK(rsd_adopt(f.m, wrap_at(c0, dbuf, N, N, true), NULL, RSD_EXCLUSIVE, &keep));
	alias = wrap_at(PAGEABLE, buf, N / 2, N, false);
	dalias = wrap_at(c0, dbuf, N / 2, N, false);
	o = cfx_alloc(&f, PAGEABLE, N);
	big = cfx_alloc(&f, PAGEABLE, 2 * N + 1);
	dev = cfx_alloc(&f, c0, N);
	dev1 = cfx_alloc(&f, c1, N);
	owned = cfx_alloc(&f, PAGEABLE, N);
	OK(rsd_adopt(f.m, owned, NULL, RSD_EXCLUSIVE, &keep));
	before = cfx_snap(&f);
	CHECK_ACCT(&f, PAGEABLE, 3 * N, 2 * N, 1, before->state_version);
	CHECK_ACCT(&f, c0, N, N, 1, before->state_version);

	ERR(RSD_ETYPE, rsd_adopt_reserved(NULL, o, RSD_EXCLUSIVE, NULL, &h));
	ERR(RSD_ETYPE, rsd_adopt_reserved(r, NULL, RSD_EXCLUSIVE, NULL, &h));
	ERR(RSD_ETYPE, rsd_adopt_reserved(r, o, RSD_EXCLUSIVE, NULL, NULL));
	ERR(RSD_ETYPE, rsd_adopt_reserved(r, o, (enum rsd_replica_mode)7, NULL, &h));
	ERR(RSD_ELIFETIME, rsd_adopt_reserved(gone, o, RSD_EXCLUSIVE, NULL, &h));
	ATF_CHECK_MATCH("reservation 'gone' has been released", rsd_last_error()->message);
	/* Another location: a device is not pageable-host, nor cuda:1 cuda:0. */
	ERR(RSD_EMATERIAL, rsd_adopt_reserved(r, dev, RSD_EXCLUSIVE, NULL, &h));
	ERR(RSD_EMATERIAL, rsd_adopt_reserved(rc, o, RSD_EXCLUSIVE, NULL, &h));
	ERR(RSD_EMATERIAL, rsd_adopt_reserved(rc, dev1, RSD_EXCLUSIVE, s0, &h));
	ERR(RSD_EOWNERSHIP, rsd_adopt_reserved(r, owned, RSD_EXCLUSIVE, NULL, &h));
	/* The storage of a managed value: found at install, after the
	 * reservation gave its bytes, which it gets back. */
	ERR(RSD_EOWNERSHIP, rsd_adopt_reserved(r, alias, RSD_EXCLUSIVE, NULL, &h));
	ERR(RSD_EBUDGET, rsd_adopt_reserved(r, big, RSD_EXCLUSIVE, NULL, &h));
	ATF_CHECK_MATCH("charging 129 bytes .* reservation 'out' at pageable-host, which has 128 "
			"bytes left",
			rsd_last_error()->message);
	/* Streams: none for a host location, the device's own, a real one. */
	ERR(RSD_EINVAL, rsd_adopt_reserved(r, o, RSD_EXCLUSIVE, s0, &h));
	ERR(RSD_EINVAL, rsd_adopt_reserved(rc, dev, RSD_EXCLUSIVE, s1, &h));
	ERR(RSD_ETYPE, rsd_adopt_reserved(rc, dev, RSD_EXCLUSIVE, &h, &h));
	/* The producer's event cannot be recorded. */
	rsd_simdev_fail_nth(f.sd, RSD_SIMDEV_EVENT_RECORD, 1, RSD_EDEVICE);
	ERR(RSD_EDEVICE, rsd_adopt_reserved(rc, dev, RSD_EXCLUSIVE, s0, &h));
	/* An install that fails after the producer's event was recorded. */
	ERR(RSD_EOWNERSHIP, rsd_adopt_reserved(rc, dalias, RSD_EXCLUSIVE, s0, &h));
	ATF_CHECK_EQ(h.id, 0);

	after = cfx_snap(&f);
	CHECK_SAME(before, after, false);
	rsd_snapshot_free(after);
	ATF_CHECK_EQ(rsd_reservation_nbytes(r), 2 * N);
	ATF_CHECK_EQ(rsd_reservation_nbytes(rc), N);

	/* The values were never taken: they still go in. */
	OK(rsd_adopt_reserved(r, o, RSD_EXCLUSIVE, NULL, &h));
	OK(rsd_adopt_reserved(rc, dev, RSD_EXCLUSIVE, s0, &h));
	CHECK_ACCT(&f, PAGEABLE, 4 * N, N, 1, before->state_version + 2);
	CHECK_ACCT(&f, c0, 2 * N, 0, 1, before->state_version + 2);
	rsd_snapshot_free(before);

	/* A closed manager, then a destroyed one. */
	OK(rsd_manager_close(f.m, RSD_CLOSE_FORCE));
	ERR(RSD_ECLOSED, rsd_adopt_reserved(r, big, RSD_EXCLUSIVE, NULL, &h));
	rsd_manager_destroy(f.m);
	f.m = NULL;
	ERR(RSD_ECLOSED, rsd_adopt_reserved(r, big, RSD_EXCLUSIVE, NULL, &h));
	ATF_CHECK_MATCH("the manager of reservation 'out' no longer exists",
			rsd_last_error()->message);
	rsd_reservation_free(r);
	rsd_reservation_free(rc);
	rsd_reservation_free(gone);
	rsd_resident_free(big);
	rsd_resident_free(dev1);
	rsd_resident_free(alias);
	rsd_resident_free(dalias);
	rsd_simdev_stream_destroy(f.sd, s0);
	rsd_simdev_stream_destroy(f.sd, s1);
	cfx_fini(&f);
}

struct kernel {
	unsigned char *out;
	uint64_t n;
	unsigned char byte;
	unsigned delay_us; /* before it writes: a long kernel */
};

static void kernel(void *arg)
{
	struct kernel *k = arg;

	if (k->delay_us)
		usleep(k->delay_us);
	memset(k->out, k->byte, k->n);
}

/* A reader on another stream: copies what it finds. */
struct reader {
	const unsigned char *in;
	unsigned char seen[N];
};

static void reader(void *arg)
{
	struct reader *r = arg;

	memcpy(r->seen, r->in, N);
}

/* Every byte of buf[0..n) is b. */
static bool all(const unsigned char *buf, size_t n, unsigned char b)
{
	for (size_t i = 0; i < n; i++)
		if (buf[i] != b)
			return false;
	return true;
}

/*
 * A kernel still writes the output on its stream: the adopt records an
 * event there, and the new materialization is filling (snapshots show it
 * arriving, §22.1) until a reap sees the event: drop, move and discard are
 * refused, a non-waiting close counts it as a queued copy, and its
 * completion is folded in without a version step.
 */
ATF_TC_WITHOUT_HEAD(producer_stream);
ATF_TC_BODY(producer_stream, tc)
{
	const struct rsd_budget b = { { RSD_CUDA, 0 }, 2 * N };
	const struct rsd_materialization_snapshot *ms;
	struct rsd_reservation *r;
	struct rsd_resident *o;
	const struct rsd_resident *rv;
	struct rsd_snapshot *s;
	struct rsd_lease *l;
	struct kernel k;
	struct rsd_handle h;
	uint64_t v;
	void *st;
	struct cfx f;

	cfx_sim(&f, &b, 1, 1);
	OK(rsd_simdev_stream_create(f.sd, 0, &st));
	rsd_simdev_set_progress(f.sd, RSD_SIMDEV_ON_COMMAND, 0);
	OK(rsd_reserve(f.m, c0, 2 * N, "result", &r));
	v = cfx_version(&f);
	o = cfx_alloc(&f, c0, N);
	k = (struct kernel){ rsd_resident_data(o, 0), N, 0xc3, 0 };
	OK(rsd_simdev_launch_host_func(f.sd, st, kernel, &k));
	OK(rsd_adopt_reserved(r, o, RSD_EXCLUSIVE, st, &h));
	CHECK_ACCT(&f, c0, N, N, 1, v + 1);
	s = cfx_snap(&f);
	ms = cfx_mat(cfx_val(s, h), c0);
	ATF_REQUIRE(ms);
	ATF_CHECK(ms->arriving);
	ATF_CHECK_EQ(ms->pending_event_count, 0);
	ATF_CHECK_EQ(ms->use_count, 0);
	ATF_CHECK_EQ(cfx_loc(s, c0)->pending_event_count, 0);
	rsd_snapshot_free(s);
	ATF_CHECK_EQ(rsd_simdev_pending_events(f.sd, st), 1);

	/* Protected while the kernel runs; a reap changes nothing yet. */
	ERR(RSD_EINUSE, rsd_drop(f.m, h, c0, NULL));
	ERR(RSD_EINUSE, rsd_move(f.m, h, PAGEABLE, NULL, NULL, NULL));
	ERR(RSD_EINUSE, rsd_discard(f.m, h, NULL));
	OK(rsd_manager_reap(f.m));
	CHECK_ACCT(&f, c0, N, N, 1, v + 1);
	ERR(RSD_EINUSE, rsd_manager_close(f.m, RSD_CLOSE_NOWAIT));
	ATF_CHECK_MATCH("queued_copies=1", rsd_last_error()->message);

	/* Done: no longer filling, and no version step for it. */
	rsd_simdev_stream_complete(f.sd, st);
	OK(rsd_manager_reap(f.m));
	CHECK_ACCT(&f, c0, N, N, 1, v + 1);
	s = cfx_snap(&f);
	ATF_CHECK(!cfx_mat(cfx_val(s, h), c0)->arriving);
	rsd_snapshot_free(s);

	/* The kernel's bytes are the value's; it moves like any value. */
	rsd_simdev_set_progress(f.sd, RSD_SIMDEV_IMMEDIATE, 0);
	OK(rsd_move(f.m, h, PAGEABLE, NULL, NULL, NULL));
	CHECK_ACCT(&f, c0, 0, N, 1, v + 4); /* pageable-host recorded, installed; cuda:0 removed */
	OK(rsd_acquire(f.m, &h, 1, PAGEABLE, NULL, &l));
	OK(rsd_lease_value(l, h, &rv));
	ATF_CHECK(all(rsd_resident_data(rv, 0), N, 0xc3));
	OK(rsd_lease_release(l, 0));
	rsd_lease_free(l);
	OK(rsd_reservation_release(r));
	rsd_reservation_free(r);
	rsd_simdev_stream_destroy(f.sd, st);
	cfx_fini(&f);
}

/*
 * Readers of a filling output come after its producer: a lease on another
 * stream orders that stream after the producer's event on the device (the
 * kernel sleeps before it writes, so a reader that did not wait would see
 * zeros), and a copy to the host waits for it on the host (the producer's
 * stream completes only after 100 ms, the copy's at once).
 */
ATF_TC_WITHOUT_HEAD(readers_wait_for_the_producer);
ATF_TC_BODY(readers_wait_for_the_producer, tc)
{
	struct rsd_reservation *r;
	struct rsd_resident *o;
	const struct rsd_resident *rv;
	struct rsd_lease *l;
	struct simpump pump;
	struct simwait w;
	struct reader rd;
	struct kernel k;
	struct rsd_handle h;
	void *st, *s2;
	struct cfx f;

	cfx_sim(&f, NULL, 0, 1);
	OK(rsd_simdev_stream_create(f.sd, 0, &st));
	OK(rsd_simdev_stream_create(f.sd, 0, &s2));
	rsd_simdev_set_progress(f.sd, RSD_SIMDEV_BACKGROUND, 0);
	OK(rsd_reserve(f.m, c0, 2 * N, "result", &r));

	/* A second stream's reader. */
	o = cfx_alloc(&f, c0, N);
	memset(rsd_resident_data(o, 0), 0, N);
	k = (struct kernel){ rsd_resident_data(o, 0), N, 0x5a, 100000 };
	OK(rsd_simdev_launch_host_func(f.sd, st, kernel, &k));
	OK(rsd_adopt_reserved(r, o, RSD_EXCLUSIVE, st, &h));
	OK(rsd_acquire(f.m, &h, 1, c0, s2, &l));
	OK(rsd_lease_value(l, h, &rv));
	rd.in = rsd_resident_data(rv, 0);
	OK(rsd_simdev_launch_host_func(f.sd, s2, reader, &rd));
	rsd_simdev_stream_complete(f.sd, s2);
	ATF_CHECK_MSG(all(rd.seen, N, 0x5a), "the reader ran before the producer finished");
	OK(rsd_lease_release(l, RSD_RELEASE_WAIT));
	rsd_lease_free(l);

	/* A copy to the host, on command: the transfer streams run as soon
	 * as work reaches them, the producer's stream only after 100 ms. */
	rsd_simdev_set_progress(f.sd, RSD_SIMDEV_ON_COMMAND, 0);
	o = cfx_alloc(&f, c0, N);
	memset(rsd_resident_data(o, 0), 0, N);
	k = (struct kernel){ rsd_resident_data(o, 0), N, 0xa5, 0 };
	OK(rsd_simdev_launch_host_func(f.sd, st, kernel, &k));
	OK(rsd_adopt_reserved(r, o, RSD_REPLICABLE, st, &h));
	ATF_REQUIRE(simpump_start(&pump, f.sd, NULL, 0, true, false));
	ATF_REQUIRE(simwait_start(&w, f.sd, st, 100));
	OK(rsd_ensure(f.m, h, PAGEABLE, NULL, NULL));
	ATF_CHECK_MSG(simwait_blocked(&w), "the copy did not wait for the producer");
	simpump_stop(&pump);
	OK(rsd_acquire(f.m, &h, 1, PAGEABLE, NULL, &l));
	OK(rsd_lease_value(l, h, &rv));
	ATF_CHECK_MSG(all(rsd_resident_data(rv, 0), N, 0xa5),
		      "the copy read the output before the producer finished");
	OK(rsd_lease_release(l, 0));
	rsd_lease_free(l);

	OK(rsd_reservation_release(r));
	rsd_reservation_free(r);
	OK(rsd_manager_close(f.m, 0));
	rsd_simdev_stream_destroy(f.sd, st);
	rsd_simdev_stream_destroy(f.sd, s2);
	cfx_fini(&f);
}

/*
 * A producer whose event reports a device error: the reap point that sees
 * it removes the output's materialization (one version step, its charge
 * refunded to the location, not to the reservation) and returns the error
 * once, as for a failed queued copy (§22.2).
 */
ATF_TC_WITHOUT_HEAD(producer_failure);
ATF_TC_BODY(producer_failure, tc)
{
	const struct rsd_budget b = { { RSD_CUDA, 0 }, 2 * N };
	struct rsd_reservation *r;
	struct rsd_resident *o;
	struct rsd_snapshot *s;
	struct rsd_handle h;
	uint64_t v;
	void *st;
	struct cfx f;

	cfx_sim(&f, &b, 1, 1);
	OK(rsd_simdev_stream_create(f.sd, 0, &st));
	rsd_simdev_set_progress(f.sd, RSD_SIMDEV_ON_COMMAND, 0);
	OK(rsd_reserve(f.m, c0, 2 * N, "result", &r));
	o = cfx_alloc(&f, c0, N);
	OK(rsd_adopt_reserved(r, o, RSD_EXCLUSIVE, st, &h));
	v = cfx_version(&f);
	rsd_simdev_stream_complete(f.sd, st);
	/* The event reports a failure, still after its stream has drained:
	 * the device's answer (one failed query alone is none). */
	rsd_simdev_fail_all(f.sd, RSD_SIMDEV_EVENT_QUERY, RSD_EDEVICE);
	ERR(RSD_EDEVICE, rsd_manager_reap(f.m));
	rsd_simdev_fail_all(f.sd, RSD_SIMDEV_EVENT_QUERY, 0);
	CHECK_ACCT(&f, c0, 0, N, 1, v + 1);
	s = cfx_snap(&f);
	ATF_CHECK_EQ(cfx_val(s, h)->nmaterializations, 0);
	rsd_snapshot_free(s);
	OK(rsd_manager_reap(f.m));
	CHECK_ACCT(&f, c0, 0, N, 1, v + 1);
	OK(rsd_reservation_release(r));
	rsd_reservation_free(r);
	rsd_simdev_stream_destroy(f.sd, st);
	cfx_fini(&f);
}

/* A waiting close waits for the producer's event as for a lease's. */
ATF_TC_WITHOUT_HEAD(close_waits_for_producer);
ATF_TC_BODY(close_waits_for_producer, tc)
{
	struct rsd_reservation *r;
	struct rsd_resident *o;
	struct kernel k;
	struct rsd_handle h;
	void *st;
	struct cfx f;

	cfx_sim(&f, NULL, 0, 1);
	OK(rsd_simdev_stream_create(f.sd, 0, &st));
	rsd_simdev_set_progress(f.sd, RSD_SIMDEV_BACKGROUND, 1000000);
	OK(rsd_reserve(f.m, c0, N, "result", &r));
	o = cfx_alloc(&f, c0, N);
	k = (struct kernel){ rsd_resident_data(o, 0), N, 1, 0 };
	OK(rsd_simdev_launch_host_func(f.sd, st, kernel, &k));
	OK(rsd_adopt_reserved(r, o, RSD_EXCLUSIVE, st, &h));
	OK(rsd_reservation_release(r));
	OK(rsd_manager_close(f.m, 0));
	ATF_CHECK_EQ(rsd_simdev_pending_events(f.sd, st), 0);
	rsd_reservation_free(r);
	rsd_simdev_stream_destroy(f.sd, st);
	cfx_fini(&f);
}

/*
 * Scopes: outputs go into the plan's reservations by label (the first so
 * labelled with room), unknown labels and closed scopes are refused without
 * a change, close releases what is left and the outputs stay.
 */
ATF_TC_WITHOUT_HEAD(scope_adopt);
ATF_TC_BODY(scope_adopt, tc)
{
	const struct rsd_budget b = { PAGEABLE, 4 * N };
	const struct rsd_reservation_spec rs[] = { { PAGEABLE, N, "out" },
						   { PAGEABLE, N, "scratch" },
						   { PAGEABLE, 2 * N, "out" } };
	const struct rsd_plan p = { .name = "step", .reservations = rs, .nreservations = 3 };
	struct rsd_snapshot *before, *after;
	struct rsd_resident *o[4], *big;
	struct rsd_handle h[4];
	struct rsd_scope *s;
	uint64_t v;
	struct cfx f;

	cfx_host(&f, &b, 1);
	OK(rsd_scope_enter(f.m, &p, NULL, 0, NULL, &s));
	v = cfx_version(&f);
	CHECK_ACCT(&f, PAGEABLE, 0, 4 * N, 3, v);
	for (int i = 0; i < 4; i++)
		o[i] = cfx_alloc(&f, PAGEABLE, N);
	big = cfx_alloc(&f, PAGEABLE, 2 * N);

	before = cfx_snap(&f);
	ERR(RSD_ETYPE, rsd_scope_adopt(NULL, "out", o[0], RSD_EXCLUSIVE, NULL, &h[0]));
	ERR(RSD_ETYPE, rsd_scope_adopt(s, NULL, o[0], RSD_EXCLUSIVE, NULL, &h[0]));
	ERR(RSD_ENOTFOUND, rsd_scope_adopt(s, "result", o[0], RSD_EXCLUSIVE, NULL, &h[0]));
	ATF_CHECK_MATCH("scope 'step' has no reservation labelled 'result'",
			rsd_last_error()->message);
	after = cfx_snap(&f);
	CHECK_SAME(before, after, false);
	rsd_snapshot_free(after);
	rsd_snapshot_free(before);

	/* The first "out" (N), then the second (2N) twice. */
	OK(rsd_scope_adopt(s, "out", o[0], RSD_EXCLUSIVE, NULL, &h[0]));
	check_resv(&f, 0, 0, "out");
	check_resv(&f, 2, 2 * N, "out");
	OK(rsd_scope_adopt(s, "out", o[1], RSD_EXCLUSIVE, NULL, &h[1]));
	check_resv(&f, 0, 0, "out");
	check_resv(&f, 2, N, "out");
	CHECK_ACCT(&f, PAGEABLE, 2 * N, 2 * N, 3, v + 2);
	/* No "out" has room for 2N: the one with most left (N) says so. */
	ERR(RSD_EBUDGET, rsd_scope_adopt(s, "out", big, RSD_EXCLUSIVE, NULL, &h[3]));
	ATF_CHECK_MATCH("which has 64 bytes left", rsd_last_error()->message);
	OK(rsd_scope_adopt(s, "out", o[2], RSD_EXCLUSIVE, NULL, &h[2]));
	OK(rsd_scope_adopt(s, "scratch", o[3], RSD_EXCLUSIVE, NULL, &h[3]));
	CHECK_ACCT(&f, PAGEABLE, 4 * N, 0, 3, v + 4);
	ERR(RSD_EBUDGET, rsd_scope_adopt(s, "out", big, RSD_EXCLUSIVE, NULL, &h[3]));

	/* Close: three releases, the four outputs stay. */
	OK(rsd_scope_close(s, NULL));
	CHECK_ACCT(&f, PAGEABLE, 4 * N, 0, 0, v + 7);
	for (int i = 0; i < 4; i++)
		ATF_CHECK(cfx_resident(&f, h[i], PAGEABLE));
	ERR(RSD_EUSAGE, rsd_scope_adopt(s, "out", big, RSD_EXCLUSIVE, NULL, &h[0]));
	CHECK_ACCT(&f, PAGEABLE, 4 * N, 0, 0, v + 7);
	rsd_scope_free(s);
	rsd_resident_free(big);
	cfx_fini(&f);
}

/* What a source load tries: adopting into a reservation from inside it. */
struct inner {
	struct rsd_reservation *r;
	struct rsd_scope *s;
	struct rsd_resident *v;
	int rc_resv, rc_scope;
};

static int adopt_hook(struct csrc *src)
{
	struct inner *in = src->arg;
	struct rsd_handle h;

	in->rc_resv = rsd_adopt_reserved(in->r, in->v, RSD_EXCLUSIVE, NULL, &h);
	in->rc_scope = rsd_scope_adopt(in->s, "out", in->v, RSD_EXCLUSIVE, NULL, &h);
	return 0;
}

/* §9.1: a source callback's own thread cannot adopt into a reservation;
 * the refusal changes nothing, and the same calls work afterwards. */
ATF_TC_WITHOUT_HEAD(refused_from_a_source_load);
ATF_TC_BODY(refused_from_a_source_load, tc)
{
	const struct rsd_reservation_spec rs = { PAGEABLE, N, "out" };
	const struct rsd_plan p = { .name = "step", .reservations = &rs, .nreservations = 1 };
	struct csrc src = { 0 };
	struct inner in = { 0 };
	struct rsd_handle h, x;
	uint64_t v;
	struct cfx f;

	cfx_host(&f, NULL, 0);
	h = cfx_sourced(&f, &src, PAGEABLE);
	OK(rsd_reserve(f.m, PAGEABLE, N, "out", &in.r));
	OK(rsd_scope_enter(f.m, &p, NULL, 0, NULL, &in.s));
	in.v = cfx_alloc(&f, PAGEABLE, N);
	src.hook = adopt_hook;
	src.arg = &in;
	v = cfx_version(&f);
	CHECK_ACCT(&f, PAGEABLE, 0, 2 * N, 2, v);
	OK(rsd_ensure(f.m, h, PAGEABLE, NULL, NULL));
	ATF_CHECK_EQ(in.rc_resv, -RSD_EREENTRANT);
	ATF_CHECK_EQ(in.rc_scope, -RSD_EREENTRANT);
	/* Only the load's install happened. */
	CHECK_ACCT(&f, PAGEABLE, N, 2 * N, 2, v + 1);
	OK(rsd_adopt_reserved(in.r, in.v, RSD_EXCLUSIVE, NULL, &x));
	CHECK_ACCT(&f, PAGEABLE, 2 * N, N, 2, v + 2);
	in.v = cfx_alloc(&f, PAGEABLE, N);
	OK(rsd_scope_adopt(in.s, "out", in.v, RSD_EXCLUSIVE, NULL, &x));
	CHECK_ACCT(&f, PAGEABLE, 3 * N, 0, 2, v + 3);
	OK(rsd_scope_close(in.s, NULL));
	OK(rsd_reservation_release(in.r));
	rsd_scope_free(in.s);
	rsd_reservation_free(in.r);
	cfx_fini(&f);
}

/*
 * Two threads at one location. The budget holds the values, a reservation
 * R and slack S. One thread adopts R/K-byte outputs into the reservation,
 * one at a time, each only after the other thread's next round. The other
 * thread keeps admitting: a reservation of S must always succeed (the bytes
 * are never counted twice), one of S + 1 must always fail (they are never
 * free in between), and the location's used + reserved is always the
 * values plus R.
 */
#define K 200
#define SLACK 8

struct race {
	struct rsd_manager *m;
	uint64_t total; /* used + reserved with the admitter holding nothing */
	atomic_uint rounds;
	atomic_bool stop;
	unsigned ok_fit, refused_over, bad;
};

static void *admitter(void *arg)
{
	struct race *x = arg;

	while (!atomic_load(&x->stop)) {
		struct rsd_reservation *r = NULL;
		struct rsd_snapshot *s;
		int rc;

		rc = rsd_reserve(x->m, PAGEABLE, SLACK, "slack", &r);
		if (rc) {
			x->bad++;
		} else {
			x->ok_fit++;
			if (rsd_reservation_release(r))
				x->bad++;
			rsd_reservation_free(r);
		}
		r = NULL;
		rc = rsd_reserve(x->m, PAGEABLE, SLACK + 1, "too-much", &r);
		if (rc == -RSD_EBUDGET) {
			x->refused_over++;
		} else {
			x->bad++;
			rsd_reservation_free(r);
		}
		if (rsd_snapshot_take(x->m, &s)) {
			x->bad++;
		} else {
			for (size_t i = 0; i < s->nlocations; i++)
				if (rsd_location_equal(s->locations[i].location, PAGEABLE) &&
				    s->locations[i].used_bytes + s->locations[i].reserved_bytes !=
					    x->total)
					x->bad++;
			rsd_snapshot_free(s);
		}
		atomic_fetch_add(&x->rounds, 1);
	}
	return NULL;
}

ATF_TC_WITHOUT_HEAD(concurrent_admission);
ATF_TC_BODY(concurrent_admission, tc)
{
	const uint64_t R = (uint64_t)K * N;
	const struct rsd_budget b = { PAGEABLE, 3 * N + R + SLACK };
	struct rsd_reservation *r;
	struct race x = { 0 };
	pthread_t t;
	struct cfx f;
	uint64_t v;

	cfx_host(&f, &b, 1);
	for (int i = 0; i < 3; i++)
		cfx_adopt(&f, PAGEABLE, N, RSD_EXCLUSIVE);
	OK(rsd_reserve(f.m, PAGEABLE, R, "outputs", &r));
	x.m = f.m;
	x.total = 3 * N + R;
	ATF_REQUIRE_EQ(pthread_create(&t, NULL, admitter, &x), 0);
	for (int i = 0; i < K; i++) {
		struct rsd_resident *o = cfx_alloc(&f, PAGEABLE, N);
		unsigned seen = atomic_load(&x.rounds);
		struct rsd_handle h;

		/* Interleave: one admitter round between two adopts. */
		while (atomic_load(&x.rounds) == seen)
			sched_yield();
		OK(rsd_adopt_reserved(r, o, RSD_EXCLUSIVE, NULL, &h));
	}
	{
		unsigned seen = atomic_load(&x.rounds);

		while (atomic_load(&x.rounds) == seen)
			sched_yield();
	}
	atomic_store(&x.stop, true);
	ATF_REQUIRE_EQ(pthread_join(t, NULL), 0);
	ATF_CHECK_EQ(x.bad, 0);
	ATF_CHECK(x.ok_fit >= K + 1);
	ATF_CHECK_EQ(x.refused_over, x.ok_fit);
	/* Each admitter round is two version steps (reserve, release). */
	v = cfx_version(&f);
	CHECK_ACCT(&f, PAGEABLE, 3 * N + R, 0, 1, v);
	ATF_CHECK_EQ(v, 3 + 1 + K + 2ull * x.ok_fit);
	OK(rsd_reservation_release(r));
	rsd_reservation_free(r);
	cfx_fini(&f);
}

ATF_TP_ADD_TCS(tp)
{
	c0 = (struct rsd_location){ RSD_CUDA, 0 };
	ATF_TP_ADD_TC(tp, moves_the_charge);
	ATF_TP_ADD_TC(tp, storage_bytes);
	ATF_TP_ADD_TC(tp, failures_change_nothing);
	ATF_TP_ADD_TC(tp, producer_stream);
	ATF_TP_ADD_TC(tp, readers_wait_for_the_producer);
	ATF_TP_ADD_TC(tp, producer_failure);
	ATF_TP_ADD_TC(tp, close_waits_for_producer);
	ATF_TP_ADD_TC(tp, scope_adopt);
	ATF_TP_ADD_TC(tp, refused_from_a_source_load);
	ATF_TP_ADD_TC(tp, concurrent_admission);
	return atf_no_error();
}
