// SPDX-License-Identifier: MIT
/*
 * The lease tests of t_lease.c run against the real CUDA runtime driver
 * (rsd_cuda_driver()): the stream rules of acquisition, the GPU release
 * into a pending lease that blocks a drop and is reaped once its consumer
 * finishes, one pending count per lease however many consumer streams it
 * has, the state_version arithmetic of a waiting release, and the transfer
 * reports and bytes of a pageable -> cuda:0 -> pageable round trip.
 *
 * Where the simulated device completes a stream's events on command, a
 * real stream is kept busy by a host function that waits on a gate
 * (struct gate): events recorded behind it stay pending until the test
 * opens the gate. The gate also opens by itself after GATE_LIMIT_S so a
 * broken library turns into a failed check, not a hung test; a gate that
 * had to open itself fails the test.
 *
 * Every case skips without a visible CUDA device, or when librsd was built
 * without CUDA (RSD_HAVE_CUDA=0); the bodies compile either way.
 */
#include <atf-c.h>
#include "../check.h"
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rsd/rsd.h>

#include "lfx.h"

#ifndef RSD_HAVE_CUDA
#define RSD_HAVE_CUDA 0
#endif

#if RSD_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#define GATE_LIMIT_S 30

/* ---- the gate a busy stream waits on --------------------------------------- */

/*
 * One gate per blocked stream. lock protects open and timed_out; the host
 * function runs on the CUDA runtime's callback thread, the test opens the
 * gate from its own thread or from an opener thread.
 */
struct gate {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool open;
	bool timed_out;
	unsigned delay_ms; /* opener thread: how long to wait before opening */
};

static void gate_init(struct gate *g)
{
	pthread_mutex_init(&g->lock, NULL);
	pthread_cond_init(&g->cond, NULL);
	g->open = false;
	g->timed_out = false;
	g->delay_ms = 0;
}

static void gate_open(struct gate *g)
{
	pthread_mutex_lock(&g->lock);
	g->open = true;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
}

static bool gate_is_open(struct gate *g)
{
	bool open;

	pthread_mutex_lock(&g->lock);
	open = g->open;
	pthread_mutex_unlock(&g->lock);
	return open;
}

static void gate_fini(struct gate *g)
{
	ATF_CHECK_MSG(!g->timed_out, "a busy stream's gate opened itself after %d s", GATE_LIMIT_S);
	pthread_cond_destroy(&g->cond);
	pthread_mutex_destroy(&g->lock);
}

/* The host function: holds its stream until the gate opens (or the limit). */
static void gate_wait(void *arg)
{
	struct gate *g = arg;
	struct timespec until;
	int rc = 0;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += GATE_LIMIT_S;
	pthread_mutex_lock(&g->lock);
	while (!g->open && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&g->cond, &g->lock, &until);
	if (!g->open) {
		g->timed_out = true;
		g->open = true;
	}
	pthread_mutex_unlock(&g->lock);
}

static void *gate_opener(void *arg)
{
	struct gate *g = arg;
	struct timespec d = { g->delay_ms / 1000, (long)(g->delay_ms % 1000) * 1000000L };

	while (nanosleep(&d, &d) && errno == EINTR)
		;
	gate_open(g);
	return NULL;
}

/* ---- CUDA runtime helpers (stubs without CUDA: lc_setup skipped first) ---- */

#if RSD_HAVE_CUDA

static void cuda_ok(int line, cudaError_t e, const char *call)
{
	if (e != cudaSuccess)
		atf_tc_fail("line %d: %s failed: %s (%s)", line, call, cudaGetErrorString(e),
			    cudaGetErrorName(e));
}
#define CUDA_OK(call) cuda_ok(__LINE__, (call), #call)

static int lc_ndevices(void)
{
	return rsd_cuda_driver()->device_count(NULL);
}

static void lc_skip_without_device(void)
{
	cudaError_t e;
	int n = 0;

	if (lc_ndevices() >= 1)
		return;
	e = cudaGetDeviceCount(&n);
	(void)cudaGetLastError();
	if (e != cudaSuccess)
		atf_tc_skip("no CUDA device: cudaGetDeviceCount failed: %s (%s, error %d)",
			    cudaGetErrorString(e), cudaGetErrorName(e), (int)e);
	atf_tc_skip("no CUDA device: the CUDA runtime sees %d devices", n);
}

/* A non-blocking consumer stream on a device. */
static void *lc_stream(int device)
{
	cudaStream_t s;

	CUDA_OK(cudaSetDevice(device));
	CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CUDA_OK(cudaSetDevice(0));
	return (void *)s;
}

static void lc_stream_free(void *s)
{
	CUDA_OK(cudaStreamDestroy((cudaStream_t)s));
}

/* Keep s busy until g opens: work enqueued after this waits for it. */
static void lc_block(void *s, struct gate *g)
{
	CUDA_OK(cudaLaunchHostFunc((cudaStream_t)s, gate_wait, g));
}

static void lc_sync(void *s)
{
	CUDA_OK(cudaStreamSynchronize((cudaStream_t)s));
}

static void lc_read_device(void *dst, const void *src, uint64_t n)
{
	CUDA_OK(cudaMemcpy(dst, src, (size_t)n, cudaMemcpyDeviceToHost));
}

#else /* !RSD_HAVE_CUDA */

static int lc_ndevices(void)
{
	return 0;
}

static void lc_skip_without_device(void)
{
	atf_tc_skip("built without CUDA (RSD_HAVE_CUDA=0): these tests need the CUDA runtime");
}

static void unreachable(const char *what)
{
	atf_tc_fail("%s called in a build without CUDA", what);
}

static void *lc_stream(int device)
{
	(void)device;
	unreachable("lc_stream");
	return NULL;
}

static void lc_stream_free(void *s)
{
	(void)s;
	unreachable("lc_stream_free");
}

static void lc_block(void *s, struct gate *g)
{
	(void)s, (void)g, (void)gate_wait;
	unreachable("lc_block");
}

static void lc_sync(void *s)
{
	(void)s;
	unreachable("lc_sync");
}

static void lc_read_device(void *dst, const void *src, uint64_t n)
{
	(void)dst, (void)src, (void)n;
	unreachable("lc_read_device");
}

#endif /* RSD_HAVE_CUDA */

/* ---- the manager on the CUDA driver ----------------------------------------- */

static void on_warn(void *ctx, const char *msg)
{
	(void)ctx;
	lfx_nwarn++;
	snprintf(lfx_lastwarn, sizeof(lfx_lastwarn), "%s", msg);
}

/* Skips unless a CUDA device is visible; else lfx_m runs on the CUDA driver. */
static void lc_setup(void)
{
	struct rsd_manager_config cfg = { 0 };

	lc_skip_without_device();
	cfg.driver = rsd_cuda_driver();
	cfg.driver_ctx = NULL;
	cfg.warn = on_warn;
	lfx_sd = NULL;
	lfx_nwarn = 0;
	lfx_lastwarn[0] = '\0';
	RSD_REQUIRE_OK(rsd_manager_create(&cfg, &lfx_m));
}

static struct rsd_location cuda0(void)
{
	struct rsd_location l;

	RSD_REQUIRE_OK(rsd_cuda_location(0, &l));
	return l;
}

/* A REPLICABLE value allocated pageable, then copied to cuda:0. */
static struct rsd_handle lc_put_both(uint64_t n)
{
	struct rsd_handle h = lfx_put(RSD_LOC_PAGEABLE_HOST, n, NULL);

	RSD_REQUIRE_OK(rsd_ensure(lfx_m, h, cuda0(), NULL, NULL));
	return h;
}

/* ---- acquisition ------------------------------------------------------------- */

ATF_TC_WITHOUT_HEAD(cuda_acquire_stream_rules);
ATF_TC_BODY(cuda_acquire_stream_rules, tc)
{
	struct rsd_location locs[8], c0;
	struct rsd_lease *l = NULL;
	struct rsd_handle a, p;
	size_t nlocs;
	void *s0;
	uint64_t v;
	int ndev;

	lc_setup();
	c0 = cuda0();
	ndev = lc_ndevices();
	s0 = lc_stream(0);
	a = lc_put_both(64);
	p = lfx_put(RSD_LOC_PAGEABLE_HOST, 64, NULL);
	nlocs = rsd_manager_locations(lfx_m, locs, 8);
	v = lfx_ver();

	/* §8.2 step 4: a CUDA lease needs a consumer stream ... */
	RSD_CHECK_ERR(RSD_EINVAL, rsd_acquire(lfx_m, &a, 1, c0, NULL, &l));
	/* ... and that check precedes the residency check (step 7). */
	RSD_CHECK_ERR(RSD_EINVAL, rsd_acquire(lfx_m, &p, 1, c0, NULL, &l));
	/* A host lease with a (valid) CUDA stream. */
	RSD_CHECK_ERR(RSD_EINVAL, rsd_acquire(lfx_m, &p, 1, RSD_LOC_PAGEABLE_HOST, s0, &l));
	ATF_CHECK(lfx_msg_has("CUDA"));
	/* A device the runtime does not have: rejected, not recorded. */
	if (ndev <= RSD_CUDA_MAX_DEVICE)
		RSD_CHECK_ERR(RSD_EINVAL, rsd_acquire(lfx_m, &a, 1, lfx_cuda(ndev), s0, &l));
	if (ndev >= 2) {
		void *s1 = lc_stream(1);

		/* A stream of another device. */
		RSD_CHECK_ERR(RSD_EINVAL, rsd_acquire(lfx_m, &a, 1, c0, s1, &l));
		ATF_CHECK(lfx_msg_has("does not match"));
		RSD_CHECK_ERR(RSD_EINVAL, rsd_acquire(lfx_m, &p, 1, c0, s1, &l));
		lc_stream_free(s1);
	}
	ATF_CHECK(l == NULL);
	CHECK_VER(v);
	ATF_CHECK_EQ(rsd_manager_locations(lfx_m, locs, 8), nlocs);
	CHECK_LOC(c0, 0, 0, 0);

	/* With the stream, residency decides: p is not on cuda:0. */
	RSD_CHECK_ERR(RSD_EUNAVAILABLE, rsd_acquire(lfx_m, &p, 1, c0, s0, &l));
	ATF_CHECK(lfx_msg_has("cuda:0"));
	ATF_CHECK(l == NULL);
	CHECK_VER(v);

	/* The right stream works; an idle stream releases at once. */
	RSD_REQUIRE_OK(rsd_acquire(lfx_m, &a, 1, c0, s0, &l));
	CHECK_VER(v + 1);
	CHECK_MAT(a, c0, 1, 0, 0);
	RSD_CHECK_ERR(RSD_ETYPE, rsd_lease_add_consumer_stream(l, NULL));
	RSD_CHECK_OK(rsd_lease_add_consumer_stream(l, s0));
	CHECK_VER(v + 1);
	RSD_CHECK_OK(rsd_lease_release(l, RSD_RELEASE_WAIT));
	CHECK_VER(v + 3);
	CHECK_MAT(a, c0, 0, 0, 0);
	RSD_CHECK_ERR(RSD_ELIFETIME, rsd_lease_add_consumer_stream(l, s0));
	rsd_lease_free(l);
	lc_stream_free(s0);
	ATF_CHECK_EQ(lfx_nwarn, 0);
	lfx_teardown();
}

/* ---- GPU release, pending leases, reaping ------------------------------------ */

ATF_TC_WITHOUT_HEAD(cuda_release_pending_blocks_drop);
ATF_TC_BODY(cuda_release_pending_blocks_drop, tc)
{
	struct rsd_action drop;
	struct rsd_plan plan = { .name = "drop-a" };
	struct rsd_explanation *ex = NULL;
	struct rsd_location c0;
	struct rsd_snapshot *s;
	struct rsd_lease *l = NULL;
	struct rsd_handle a;
	struct gate g;
	void *st;
	uint64_t v;

	lc_setup();
	c0 = cuda0();
	gate_init(&g);
	st = lc_stream(0);
	/* Two copies, so that dropping cuda:0 is not a last-copy drop. */
	a = lc_put_both(64);
	RSD_REQUIRE_OK(rsd_acquire(lfx_m, &a, 1, c0, st, &l));
	lc_block(st, &g);
	v = lfx_ver();
	RSD_REQUIRE_OK(rsd_lease_release(l, 0));
	CHECK_VER(v + 1);
	ATF_CHECK(!rsd_lease_active(l));
	CHECK_MAT(a, c0, 0, 0, 1);
	CHECK_LOC(c0, 0, 0, 1);

	RSD_CHECK_ERR(RSD_EINUSE, rsd_drop(lfx_m, a, c0, NULL));
	CHECK_VER(v + 1);
	RSD_CHECK_OK(rsd_manager_reap(lfx_m));
	CHECK_VER(v + 1);
	CHECK_MAT(a, c0, 0, 0, 1);
	drop = rsd_action_drop(a, c0);
	plan.reclaim = &drop;
	plan.nreclaim = 1;
	RSD_REQUIRE_OK(rsd_explain(lfx_m, &plan, NULL, &ex));
	ATF_CHECK(!ex->feasible);
	rsd_explanation_free(ex);

	/* The consumer finishes: readers still show the pending lease (no
	 * reaping outside the writer path), explain sees the completed event,
	 * the drop reaps first and then succeeds. */
	gate_open(&g);
	lc_sync(st);
	CHECK_VER(v + 1);
	CHECK_MAT(a, c0, 0, 0, 1);
	RSD_REQUIRE_OK(rsd_explain(lfx_m, &plan, NULL, &ex));
	ATF_CHECK(ex->feasible);
	rsd_explanation_free(ex);
	CHECK_VER(v + 1);
	RSD_CHECK_OK(rsd_drop(lfx_m, a, c0, NULL));
	CHECK_VER(v + 3); /* +1 reap, +1 removal */
	s = lfx_snap();
	ATF_CHECK(lfx_mat_in(s, a, c0) == NULL);
	ATF_CHECK(lfx_mat_in(s, a, RSD_LOC_PAGEABLE_HOST) != NULL);
	ATF_CHECK_EQ(lfx_loc_in(s, c0)->value_count, 0);
	ATF_CHECK_EQ(lfx_loc_in(s, c0)->pending_event_count, 0);
	rsd_snapshot_free(s);
	rsd_lease_free(l);
	lc_stream_free(st);
	gate_fini(&g);
	ATF_CHECK_EQ(lfx_nwarn, 0);
	lfx_teardown();
}

ATF_TC_WITHOUT_HEAD(cuda_pending_reaped_by_reap);
ATF_TC_BODY(cuda_pending_reaped_by_reap, tc)
{
	struct rsd_location c0;
	struct rsd_lease *l;
	struct rsd_handle a;
	struct gate g;
	void *st;
	uint64_t v;

	lc_setup();
	c0 = cuda0();
	gate_init(&g);
	st = lc_stream(0);
	a = lc_put_both(4096);
	lc_block(st, &g);
	v = lfx_ver();
	l = lfx_pending_lease(a, st);
	CHECK_VER(v + 2);
	CHECK_MAT(a, c0, 0, 0, 1);
	/* An incomplete lease survives every reap point. */
	RSD_CHECK_OK(rsd_manager_reap(lfx_m));
	RSD_CHECK_OK(rsd_ensure(lfx_m, a, c0, NULL, NULL));
	CHECK_VER(v + 2);
	CHECK_MAT(a, c0, 0, 0, 1);

	gate_open(&g);
	lc_sync(st);
	CHECK_VER(v + 2); /* state_version reads do not reap */
	RSD_CHECK_OK(rsd_manager_reap(lfx_m));
	CHECK_VER(v + 3);
	CHECK_MAT(a, c0, 0, 0, 0);
	CHECK_LOC(c0, 0, 0, 0);
	RSD_CHECK_OK(rsd_manager_reap(lfx_m));
	CHECK_VER(v + 3);
	rsd_lease_free(l);
	lc_stream_free(st);
	gate_fini(&g);
	ATF_CHECK_EQ(lfx_nwarn, 0);
	lfx_teardown();
}

ATF_TC_WITHOUT_HEAD(cuda_two_streams_count_once);
ATF_TC_BODY(cuda_two_streams_count_once, tc)
{
	struct rsd_location c0;
	struct rsd_lease *l = NULL;
	struct rsd_handle a, b, set[2];
	struct gate g1, g2;
	void *s1, *s2;
	uint64_t v;

	lc_setup();
	c0 = cuda0();
	gate_init(&g1);
	gate_init(&g2);
	s1 = lc_stream(0);
	s2 = lc_stream(0);
	a = lc_put_both(64);
	b = lc_put_both(64);
	set[0] = a;
	set[1] = b;
	RSD_REQUIRE_OK(rsd_acquire(lfx_m, set, 2, c0, s1, &l));
	RSD_REQUIRE_OK(rsd_lease_add_consumer_stream(l, s2));
	RSD_REQUIRE_OK(rsd_lease_add_consumer_stream(l, s2));
	lc_block(s1, &g1);
	lc_block(s2, &g2);
	v = lfx_ver();
	RSD_REQUIRE_OK(rsd_lease_release(l, 0));
	CHECK_VER(v + 1);
	/* One lease, two events: counted once per covered materialization. */
	CHECK_MAT(a, c0, 0, 0, 1);
	CHECK_MAT(b, c0, 0, 0, 1);
	CHECK_LOC(c0, 0, 0, 2);

	/* All events must complete before the lease is reaped. */
	gate_open(&g1);
	lc_sync(s1);
	RSD_CHECK_OK(rsd_manager_reap(lfx_m));
	CHECK_VER(v + 1);
	CHECK_MAT(a, c0, 0, 0, 1);
	CHECK_LOC(c0, 0, 0, 2);
	gate_open(&g2);
	lc_sync(s2);
	RSD_CHECK_OK(rsd_manager_reap(lfx_m));
	CHECK_VER(v + 2);
	CHECK_MAT(a, c0, 0, 0, 0);
	CHECK_MAT(b, c0, 0, 0, 0);
	CHECK_LOC(c0, 0, 0, 0);
	RSD_CHECK_OK(rsd_manager_reap(lfx_m));
	CHECK_VER(v + 2);
	rsd_lease_free(l);
	lc_stream_free(s1);
	lc_stream_free(s2);
	gate_fini(&g1);
	gate_fini(&g2);
	ATF_CHECK_EQ(lfx_nwarn, 0);
	lfx_teardown();
}

/* A lease at cuda:0 on a stream a gate keeps busy (lc_lease_busy). */
struct lc_busy {
	struct rsd_handle a; /* the leased value */
	struct rsd_lease *l;
	struct gate g; /* keeps s busy */
	void *s;
	uint64_t v; /* state_version before the acquire */
};

/*
 * A manager on the CUDA driver with a 64-byte value a at pageable-host and
 * cuda:0, leased at cuda:0 on a new stream s that g then keeps busy.
 */
static void lc_lease_busy(struct lc_busy *b)
{
	lc_setup();
	gate_init(&b->g);
	b->s = lc_stream(0);
	b->a = lc_put_both(64);
	b->v = lfx_ver();
	b->l = NULL;
	RSD_REQUIRE_OK(rsd_acquire(lfx_m, &b->a, 1, cuda0(), b->s, &b->l));
	lc_block(b->s, &b->g);
}

/* rsd_lease_release(l, flags) while an opener thread opens g after 200 ms:
 * checks that the release returned only after that (what: the message
 * otherwise) and returns its result. */
static int lc_release_blocked(struct rsd_lease *l, unsigned flags, struct gate *g, const char *what)
{
	pthread_t opener;
	int rc;

	g->delay_ms = 200;
	ATF_REQUIRE_EQ(pthread_create(&opener, NULL, gate_opener, g), 0);
	rc = rsd_lease_release(l, flags);
	ATF_CHECK_MSG(gate_is_open(g), "%s", what);
	ATF_REQUIRE_EQ(pthread_join(opener, NULL), 0);
	return rc;
}

ATF_TC_WITHOUT_HEAD(cuda_release_wait_versions);
ATF_TC_BODY(cuda_release_wait_versions, tc)
{
	struct rsd_location c0;
	struct lc_busy b;

	lc_lease_busy(&b);
	c0 = cuda0();
	CHECK_VER(b.v + 1);
	/* Stream busy: waiting blocks until another thread lets it go, then
	 * active -> pending -> gone. Returning before the gate opened would
	 * mean the release did not wait. */
	RSD_CHECK_OK(lc_release_blocked(b.l, RSD_RELEASE_WAIT, &b.g,
					"the waiting release returned while its stream was busy"));
	CHECK_VER(b.v + 3);
	ATF_CHECK(!rsd_lease_active(b.l));
	CHECK_MAT(b.a, c0, 0, 0, 0);
	CHECK_LOC(c0, 0, 0, 0);
	RSD_CHECK_OK(rsd_manager_reap(lfx_m));
	CHECK_VER(b.v + 3);
	lc_sync(b.s);
	rsd_lease_free(b.l);
	lc_stream_free(b.s);
	gate_fini(&b.g);
	ATF_CHECK_EQ(lfx_nwarn, 0);
	lfx_teardown();
}

/*
 * A consumer stream destroyed with its work still queued (cudaStreamDestroy()
 * returns at once; the work runs on): no event can be recorded on it, so
 * the release waits for the device. It returns only once that work ran,
 * ends the lease (+1) and warns once; the manager then closes.
 */
ATF_TC_WITHOUT_HEAD(cuda_release_after_stream_destroyed);
ATF_TC_BODY(cuda_release_after_stream_destroyed, tc)
{
	struct lc_busy b;

	lc_lease_busy(&b);
	lc_stream_free(b.s);
	RSD_CHECK_OK(lc_release_blocked(
		b.l, 0, &b.g, "the release returned while the destroyed stream was busy"));
	CHECK_VER(b.v + 2); /* the acquire, the release */
	ATF_CHECK(!rsd_lease_active(b.l));
	CHECK_MAT(b.a, cuda0(), 0, 0, 0);
	ATF_CHECK_EQ(lfx_nwarn, 1);
	ATF_CHECK_MSG(strstr(lfx_lastwarn, "lost consumer stream") &&
			      strstr(lfx_lastwarn, "synchronized the device"),
		      "warning: %s", lfx_lastwarn);
	rsd_lease_free(b.l);
	RSD_CHECK_OK(rsd_manager_close(lfx_m, 0));
	gate_fini(&b.g);
	lfx_teardown();
}

/* ---- transfers: reports and bytes ------------------------------------------- */

#define RT_NBYTES 1000000ull /* not a multiple of any granule */

static unsigned char rt_byte(uint64_t i)
{
	return (unsigned char)((i * 131u + 7u) ^ (i >> 9));
}

/* Compares n bytes against the pattern; returns the first bad index or n. */
static uint64_t rt_mismatch(const unsigned char *p, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		if (p[i] != rt_byte(i))
			return i;
	return n;
}

ATF_TC_WITHOUT_HEAD(cuda_round_trip_keeps_bytes);
ATF_TC_BODY(cuda_round_trip_keeps_bytes, tc)
{
	const struct rsd_resident *got = NULL;
	struct rsd_transition rep;
	struct rsd_resident *r = NULL;
	struct rsd_location c0, at;
	struct rsd_lease *l = NULL;
	struct rsd_snapshot *s;
	struct rsd_handle h;
	struct rsd_action a;
	uint64_t n = RT_NBYTES, bad;
	unsigned char *buf, *back;
	void *st;

	lc_setup();
	c0 = cuda0();
	st = lc_stream(0);
	RSD_REQUIRE_OK(rsd_resident_alloc(lfx_m, &rsd_resident_type, RSD_LOC_PAGEABLE_HOST, 1, &n,
					  NULL, 0, &r));
	buf = rsd_resident_data(r, 0);
	ATF_REQUIRE(buf != NULL);
	for (uint64_t i = 0; i < n; i++)
		buf[i] = rt_byte(i);
	at = RSD_LOC_PAGEABLE_HOST;
	RSD_REQUIRE_OK(rsd_adopt(lfx_m, r, &at, RSD_REPLICABLE, &h));

	/* Upload: a copy whose report samples cuda:0's allocator. */
	memset(&rep, 0, sizeof(rep));
	RSD_REQUIRE_OK(rsd_ensure(lfx_m, h, c0, NULL, &rep));
	a = rsd_action_ensure(h, c0);
	ATF_CHECK(rsd_action_equal(&rep.action, &a));
	ATF_CHECK(!rep.no_op);
	ATF_CHECK(rep.has_source && rsd_location_equal(rep.source, RSD_LOC_PAGEABLE_HOST));
	ATF_CHECK(rep.has_destination && rsd_location_equal(rep.destination, c0));
	ATF_CHECK_EQ(rep.logical_nbytes, n);
	ATF_CHECK_EQ(rep.storage_nbytes, n);
	ATF_CHECK(rep.has_allocator);
	ATF_CHECK_EQ(rep.allocator_device, 0);
	ATF_CHECK(rep.allocator_allocated_bytes_after >= rep.allocator_allocated_bytes_before + n);
	ATF_CHECK(rep.allocator_reserved_bytes_after >= rep.allocator_allocated_bytes_after);
	ATF_CHECK(rep.completed_at_ns >= rep.started_at_ns);

	/* Only the device copy left: its bytes, read back independently. */
	RSD_REQUIRE_OK(rsd_drop(lfx_m, h, RSD_LOC_PAGEABLE_HOST, NULL));
	RSD_REQUIRE_OK(rsd_acquire(lfx_m, &h, 1, c0, st, &l));
	RSD_REQUIRE_OK(rsd_lease_value(l, h, &got));
	ATF_CHECK(rsd_location_equal(rsd_resident_location(got), c0));
	ATF_REQUIRE_EQ(rsd_resident_nbytes(got), n);
	back = malloc((size_t)n);
	ATF_REQUIRE(back != NULL);
	memset(back, 0, (size_t)n);
	lc_read_device(back, rsd_resident_data(got, 0), n);
	bad = rt_mismatch(back, n);
	ATF_CHECK_EQ_MSG(bad, n, "cuda:0 copy differs at byte %llu", (unsigned long long)bad);
	RSD_REQUIRE_OK(rsd_lease_release(l, RSD_RELEASE_WAIT));
	rsd_lease_free(l);
	l = NULL;

	/* Download by a move: the report samples cuda:0 (a current
	 * materialization), whose copy is gone afterwards. */
	memset(&rep, 0, sizeof(rep));
	RSD_REQUIRE_OK(rsd_move(lfx_m, h, RSD_LOC_PAGEABLE_HOST, NULL, NULL, &rep));
	a = rsd_action_move(h, RSD_LOC_PAGEABLE_HOST, NULL);
	ATF_CHECK(rsd_action_equal(&rep.action, &a));
	ATF_CHECK(!rep.no_op);
	ATF_CHECK(rep.has_source && rsd_location_equal(rep.source, c0));
	ATF_CHECK(rep.has_destination &&
		  rsd_location_equal(rep.destination, RSD_LOC_PAGEABLE_HOST));
	ATF_CHECK(rep.has_allocator);
	ATF_CHECK_EQ(rep.allocator_device, 0);
	ATF_CHECK(rep.allocator_allocated_bytes_after <= rep.allocator_allocated_bytes_before);
	s = lfx_snap();
	ATF_CHECK(lfx_mat_in(s, h, c0) == NULL);
	ATF_CHECK(lfx_mat_in(s, h, RSD_LOC_PAGEABLE_HOST) != NULL);
	rsd_snapshot_free(s);

	RSD_REQUIRE_OK(rsd_acquire(lfx_m, &h, 1, RSD_LOC_PAGEABLE_HOST, NULL, &l));
	RSD_REQUIRE_OK(rsd_lease_value(l, h, &got));
	ATF_REQUIRE_EQ(rsd_resident_nbytes(got), n);
	bad = rt_mismatch(rsd_resident_data(got, 0), n);
	ATF_CHECK_EQ_MSG(bad, n, "bytes back on the host differ at byte %llu",
			 (unsigned long long)bad);
	RSD_REQUIRE_OK(rsd_lease_release(l, 0));
	rsd_lease_free(l);
	free(back);
	lc_stream_free(st);
	ATF_CHECK_EQ(lfx_nwarn, 0);
	lfx_teardown();
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, cuda_acquire_stream_rules);
	ATF_TP_ADD_TC(tp, cuda_release_pending_blocks_drop);
	ATF_TP_ADD_TC(tp, cuda_pending_reaped_by_reap);
	ATF_TP_ADD_TC(tp, cuda_two_streams_count_once);
	ATF_TP_ADD_TC(tp, cuda_release_wait_versions);
	ATF_TP_ADD_TC(tp, cuda_release_after_stream_destroyed);
	ATF_TP_ADD_TC(tp, cuda_round_trip_keeps_bytes);
	return atf_no_error();
}
