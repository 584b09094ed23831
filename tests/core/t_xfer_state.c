// SPDX-License-Identifier: MIT
/*
 * The two state machines of a copy in flight (lib/core/xfer.c): a
 * materialization's (resident, arriving, filling, failed) and a transfer's
 * (idle, queued, done, failed, settled). Each legal transition sets
 * exactly the state's data (a filling copy's record, a failed copy's
 * error) and clears the rest; each illegal one aborts the process with
 * both states named, checked in a child. Then the states a not-waiting
 * copy goes through in a manager, read from its records under the lock:
 * completed, and failed with its destination held.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atf-c.h>

#include "cfx.h"
#include "core/core.h"

static const struct rsd_location CUDA0 = { RSD_CUDA, 0 };

/* A stand-in for a queued copy's pending record: only its address counts. */
static struct rsd_lease_rec fake_fill;

/*
 * Run fn(arg) in a child with stderr on a pipe: it must die of SIGABRT and
 * have written a line holding `want`.
 */
static void check_aborts(void (*fn)(int), int arg, const char *want)
{
	char buf[512] = { 0 };
	size_t got = 0;
	int fds[2], status;
	ssize_t r;
	pid_t pid;

	ATF_REQUIRE(pipe(fds) == 0);
	fflush(stderr);
	pid = fork();
	ATF_REQUIRE(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		dup2(fds[1], STDERR_FILENO);
		fn(arg);
		_exit(0); /* the transition was taken: the parent fails */
	}
	close(fds[1]);
	while (got + 1 < sizeof(buf) && (r = read(fds[0], buf + got, sizeof(buf) - 1 - got)) > 0)
		got += (size_t)r;
	close(fds[0]);
	ATF_REQUIRE(waitpid(pid, &status, 0) == pid);
	ATF_CHECK_MSG(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
		      "case %d: the child was not aborted (status %#x)", arg, status);
	ATF_CHECK_MSG(strstr(buf, want), "case %d: stderr lacks \"%s\": %s", arg, want, buf);
}

/* A materialization in state s, as its writer leaves it. */
static void mat_in(struct rsd_mat *mat, enum rsd_mat_state s)
{
	memset(mat, 0, sizeof(*mat));
	mat->loc = CUDA0;
	switch (s) {
	case RSD_MAT_RESIDENT:
		break;
	case RSD_MAT_ARRIVING:
		rsd__mat_set_state(mat, RSD_MAT_ARRIVING, NULL, 0);
		break;
	case RSD_MAT_FILLING:
		rsd__mat_set_state(mat, RSD_MAT_FILLING, &fake_fill, 0);
		break;
	case RSD_MAT_FAILED:
		mat->hold_count = 1;
		rsd__mat_set_state(mat, RSD_MAT_FAILED, NULL, -RSD_EDEVICE);
		break;
	}
}

ATF_TC_WITHOUT_HEAD(mat_legal);
ATF_TC_BODY(mat_legal, tc)
{
	struct rsd_mat mat;

	/* The admission's destination, committed. */
	mat_in(&mat, RSD_MAT_ARRIVING);
	ATF_CHECK_EQ(mat.state, RSD_MAT_ARRIVING);
	ATF_CHECK(!mat.fill && !mat.err);
	ATF_CHECK(!rsd__mat_resident(&mat));
	rsd__mat_set_state(&mat, RSD_MAT_RESIDENT, NULL, 0);
	ATF_CHECK_EQ(mat.state, RSD_MAT_RESIDENT);
	ATF_CHECK(rsd__mat_resident(&mat));

	/* A queued copy fills it and completes. */
	rsd__mat_set_state(&mat, RSD_MAT_FILLING, &fake_fill, 0);
	ATF_CHECK_EQ(mat.state, RSD_MAT_FILLING);
	ATF_CHECK(mat.fill == &fake_fill && !mat.err);
	ATF_CHECK(rsd__mat_resident(&mat));
	rsd__mat_set_state(&mat, RSD_MAT_RESIDENT, NULL, 0);
	ATF_CHECK(mat.state == RSD_MAT_RESIDENT && !mat.fill && !mat.err);

	/* The next one fails while a hold protects it: kept, failed. */
	rsd__mat_set_state(&mat, RSD_MAT_FILLING, &fake_fill, 0);
	rsd__mat_set_state(&mat, RSD_MAT_RESIDENT, NULL, 0);
	mat.hold_count = 1;
	rsd__mat_set_state(&mat, RSD_MAT_FAILED, NULL, -RSD_EDEVICE);
	ATF_CHECK_EQ(mat.state, RSD_MAT_FAILED);
	ATF_CHECK(rsd__mat_failed(&mat));
	ATF_CHECK_EQ(mat.err, -RSD_EDEVICE);
	ATF_CHECK(!mat.fill);
}

/* Illegal materialization transitions: from, to, record, error. */
static const struct {
	enum rsd_mat_state from, to;
	bool fill;
	int err;
	bool used; /* a hold on it before the transition */
	const char *want;
} mat_bad[] = {
	{ RSD_MAT_ARRIVING, RSD_MAT_FILLING, true, 0, false, "arriving -> filling" },
	{ RSD_MAT_ARRIVING, RSD_MAT_FAILED, false, -RSD_EDEVICE, false, "arriving -> failed" },
	{ RSD_MAT_ARRIVING, RSD_MAT_ARRIVING, false, 0, false, "arriving -> arriving" },
	{ RSD_MAT_FILLING, RSD_MAT_FAILED, false, -RSD_EDEVICE, false, "filling -> failed" },
	{ RSD_MAT_FILLING, RSD_MAT_ARRIVING, false, 0, false, "filling -> arriving" },
	{ RSD_MAT_FAILED, RSD_MAT_RESIDENT, false, 0, false, "failed -> resident" },
	{ RSD_MAT_RESIDENT, RSD_MAT_RESIDENT, false, 0, false, "resident -> resident" },
	{ RSD_MAT_RESIDENT, RSD_MAT_ARRIVING, false, 0, true, "it is in use already" },
	{ RSD_MAT_RESIDENT, RSD_MAT_FILLING, false, 0, false, "record or error does not match" },
	{ RSD_MAT_RESIDENT, RSD_MAT_FAILED, false, 0, false, "record or error does not match" },
	{ RSD_MAT_RESIDENT, RSD_MAT_FILLING, true, -RSD_EDEVICE, false,
	  "record or error does not match" },
};

static void mat_bad_run(int i)
{
	struct rsd_mat mat;

	mat_in(&mat, mat_bad[i].from);
	if (mat_bad[i].used)
		mat.use_count = 1;
	rsd__mat_set_state(&mat, mat_bad[i].to, mat_bad[i].fill ? &fake_fill : NULL,
			   mat_bad[i].err);
}

ATF_TC_WITHOUT_HEAD(mat_illegal_aborts);
ATF_TC_BODY(mat_illegal_aborts, tc)
{
	for (size_t i = 0; i < RSD_ARRAY_SIZE(mat_bad); i++)
		check_aborts(mat_bad_run, (int)i, mat_bad[i].want);
}

ATF_TC_WITHOUT_HEAD(xfer_legal);
ATF_TC_BODY(xfer_legal, tc)
{
	struct rsd_xfer x;

	/* Waited for and completed. */
	memset(&x, 0, sizeof(x));
	ATF_CHECK_EQ(x.state, RSD_XFER_IDLE);
	ATF_CHECK_EQ(x.kind, RSD_XFER_SYNC);
	rsd__xfer_set_state(&x, RSD_XFER_QUEUED, 0);
	rsd__xfer_set_state(&x, RSD_XFER_DONE, 0);
	ATF_CHECK_EQ(x.state, RSD_XFER_DONE);
	ATF_CHECK_EQ(x.err, 0);
	rsd__xfer_set_state(&x, RSD_XFER_SETTLED, 0);
	ATF_CHECK_EQ(x.state, RSD_XFER_SETTLED);

	/* Failed: the device's error is the one recorded. */
	memset(&x, 0, sizeof(x));
	rsd__xfer_set_state(&x, RSD_XFER_QUEUED, 0);
	rsd__xfer_set_state(&x, RSD_XFER_FAILED, -RSD_EDEVICE);
	ATF_CHECK_EQ(x.state, RSD_XFER_FAILED);
	ATF_CHECK_EQ(x.err, -RSD_EDEVICE);
	rsd__xfer_set_state(&x, RSD_XFER_SETTLED, 0);
	ATF_CHECK_EQ(x.err, -RSD_EDEVICE);

	/* Known to have failed at issue: a later error does not replace it. */
	memset(&x, 0, sizeof(x));
	rsd__xfer_set_state(&x, RSD_XFER_QUEUED, 0);
	x.err = -RSD_ENOMEM;
	x.told = true;
	rsd__xfer_set_state(&x, RSD_XFER_FAILED, -RSD_EDEVICE);
	ATF_CHECK_EQ(x.err, -RSD_ENOMEM);
}

static const struct {
	enum rsd_xfer_state from, to;
	int err;
	const char *want;
} xfer_bad[] = {
	{ RSD_XFER_IDLE, RSD_XFER_DONE, 0, "idle -> done" },
	{ RSD_XFER_IDLE, RSD_XFER_SETTLED, 0, "idle -> settled" },
	{ RSD_XFER_QUEUED, RSD_XFER_SETTLED, 0, "queued -> settled" },
	{ RSD_XFER_QUEUED, RSD_XFER_QUEUED, 0, "queued -> queued" },
	{ RSD_XFER_QUEUED, RSD_XFER_FAILED, 0, "queued -> failed (error 0)" },
	{ RSD_XFER_DONE, RSD_XFER_FAILED, -RSD_EDEVICE, "done -> failed" },
	{ RSD_XFER_SETTLED, RSD_XFER_QUEUED, 0, "settled -> queued" },
};

static void xfer_bad_run(int i)
{
	struct rsd_xfer x;

	memset(&x, 0, sizeof(x));
	if (xfer_bad[i].from != RSD_XFER_IDLE)
		rsd__xfer_set_state(&x, RSD_XFER_QUEUED, 0);
	if (xfer_bad[i].from == RSD_XFER_DONE || xfer_bad[i].from == RSD_XFER_SETTLED)
		rsd__xfer_set_state(&x, RSD_XFER_DONE, 0);
	if (xfer_bad[i].from == RSD_XFER_SETTLED)
		rsd__xfer_set_state(&x, RSD_XFER_SETTLED, 0);
	rsd__xfer_set_state(&x, xfer_bad[i].to, xfer_bad[i].err);
}

ATF_TC_WITHOUT_HEAD(xfer_illegal_aborts);
ATF_TC_BODY(xfer_illegal_aborts, tc)
{
	for (size_t i = 0; i < RSD_ARRAY_SIZE(xfer_bad); i++)
		check_aborts(xfer_bad_run, (int)i, xfer_bad[i].want);
}

/*
 * A value at pinned memory with a not-waiting copy (a move when `move`) to
 * cuda:0 queued, failing on the device when `fail`; the device runs on
 * command.
 */
static struct rsd_handle start(struct cfx *f, bool move, bool fail)
{
	struct rsd_handle h;

	cfx_sim(f, NULL, 0, 1);
	rsd_simdev_set_progress(f->sd, RSD_SIMDEV_ON_COMMAND, 0);
	h = cfx_adopt(f, PINNED, N, RSD_REPLICABLE);
	if (fail)
		rsd_simdev_fail_nth(f->sd, RSD_SIMDEV_COPY_EXEC, 1, RSD_EDEVICE);
	if (move)
		OK(rsd_move_async(f->m, h, CUDA0, NULL, NULL, NULL));
	else
		OK(rsd_ensure_async(f->m, h, CUDA0, NULL, NULL));
	return h;
}

/* rec's materialization at `at`, copied out under the lock. */
static bool mat_of(struct cfx *f, struct rsd_handle h, struct rsd_location at, struct rsd_mat *out,
		   struct rsd_xfer *xf)
{
	struct rsd_record *rec;
	struct rsd_mat *mat;
	bool found = false;

	pthread_mutex_lock(&f->m->lock);
	if (!rsd__resolve(f->m, h, &rec) && (mat = rsd__rec_mat(rec, at))) {
		*out = *mat;
		if (xf && mat->fill && mat->fill->xf)
			*xf = *mat->fill->xf;
		found = true;
	}
	pthread_mutex_unlock(&f->m->lock);
	return found;
}

/*
 * A not-waiting ensure: its destination is FILLING, its record carries
 * one transfer, QUEUED, of kind ASYNC, from pinned to cuda:0; the source
 * stays RESIDENT with a pending event. The reap that sees the event makes
 * the destination RESIDENT, with no record named.
 */
ATF_TC_WITHOUT_HEAD(queued_copy_states);
ATF_TC_BODY(queued_copy_states, tc)
{
	struct rsd_xfer xf = { 0 };
	struct rsd_mat mat;
	struct cfx f;
	struct rsd_handle h = start(&f, false, false);

	ATF_REQUIRE(mat_of(&f, h, CUDA0, &mat, &xf));
	ATF_CHECK_EQ(mat.state, RSD_MAT_FILLING);
	ATF_CHECK(mat.fill != NULL);
	ATF_CHECK_EQ(mat.err, 0);
	ATF_CHECK_EQ(xf.state, RSD_XFER_QUEUED);
	ATF_CHECK_EQ(xf.kind, RSD_XFER_ASYNC);
	ATF_CHECK(rsd_location_equal(xf.to, CUDA0));
	ATF_CHECK_EQ(xf.err, 0);
	ATF_CHECK(!xf.leftover && !xf.garbage);
	ATF_REQUIRE(mat_of(&f, h, PINNED, &mat, NULL));
	ATF_CHECK_EQ(mat.state, RSD_MAT_RESIDENT);
	ATF_CHECK_EQ(mat.pending_count, 1);

	/* A reap before the device answers changes no state. */
	OK(rsd_manager_reap(f.m));
	ATF_REQUIRE(mat_of(&f, h, CUDA0, &mat, &xf));
	ATF_CHECK_EQ(mat.state, RSD_MAT_FILLING);
	ATF_CHECK_EQ(xf.state, RSD_XFER_QUEUED);

	rsd_simdev_complete_all(f.sd);
	OK(rsd_manager_reap(f.m));
	ATF_REQUIRE(mat_of(&f, h, CUDA0, &mat, NULL));
	ATF_CHECK_EQ(mat.state, RSD_MAT_RESIDENT);
	ATF_CHECK(mat.fill == NULL);
	ATF_CHECK_EQ(mat.err, 0);
	ATF_REQUIRE(mat_of(&f, h, PINNED, &mat, NULL));
	ATF_CHECK_EQ(mat.pending_count, 0);
	cfx_fini(&f);
}

/*
 * A not-waiting move: the record keeps the moved source as its leftover,
 * to be put back if the copy fails (restore), charged at pinned.
 */
ATF_TC_WITHOUT_HEAD(queued_move_keeps_source);
ATF_TC_BODY(queued_move_keeps_source, tc)
{
	struct rsd_xfer xf = { 0 };
	struct rsd_mat mat;
	struct cfx f;
	struct rsd_handle h = start(&f, true, false);

	ATF_REQUIRE(mat_of(&f, h, CUDA0, &mat, &xf));
	ATF_CHECK_EQ(mat.state, RSD_MAT_FILLING);
	ATF_CHECK_EQ(xf.state, RSD_XFER_QUEUED);
	ATF_CHECK(xf.restore && xf.leftover && xf.leftover_charged);
	ATF_CHECK(rsd_location_equal(xf.leftover_at, PINNED));
	ATF_CHECK(!mat_of(&f, h, PINNED, &mat, NULL));
	rsd_simdev_complete_all(f.sd);
	OK(rsd_manager_reap(f.m));
	ATF_REQUIRE(mat_of(&f, h, CUDA0, &mat, NULL));
	ATF_CHECK_EQ(mat.state, RSD_MAT_RESIDENT);
	ATF_CHECK(!mat_of(&f, h, PINNED, &mat, NULL));
	cfx_fini(&f);
}

/*
 * The copy fails on the device while a hold protects its destination: the
 * destination goes FAILED with the device's error, and leaves when the
 * hold ends.
 */
ATF_TC_WITHOUT_HEAD(failed_copy_held_destination);
ATF_TC_BODY(failed_copy_held_destination, tc)
{
	struct rsd_hold *hd;
	struct rsd_mat mat;
	struct cfx f;
	struct rsd_handle h = start(&f, false, true);

	OK(rsd_hold(f.m, &h, 1, CUDA0, &hd));
	rsd_simdev_complete_all(f.sd);
	ERR(RSD_EDEVICE, rsd_manager_reap(f.m));
	ATF_REQUIRE(mat_of(&f, h, CUDA0, &mat, NULL));
	ATF_CHECK_EQ(mat.state, RSD_MAT_FAILED);
	ATF_CHECK_EQ(mat.err, -RSD_EDEVICE);
	ATF_CHECK(mat.fill == NULL);
	ATF_CHECK_EQ(mat.hold_count, 1);
	OK(rsd_hold_release(hd));
	rsd_hold_free(hd);
	ATF_CHECK(!mat_of(&f, h, CUDA0, &mat, NULL));
	ATF_REQUIRE(mat_of(&f, h, PINNED, &mat, NULL));
	ATF_CHECK_EQ(mat.state, RSD_MAT_RESIDENT);
	ATF_CHECK_EQ(mat.pending_count, 0);
	cfx_fini(&f);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, mat_legal);
	ATF_TP_ADD_TC(tp, mat_illegal_aborts);
	ATF_TP_ADD_TC(tp, xfer_legal);
	ATF_TP_ADD_TC(tp, xfer_illegal_aborts);
	ATF_TP_ADD_TC(tp, queued_copy_states);
	ATF_TP_ADD_TC(tp, queued_move_keeps_source);
	ATF_TP_ADD_TC(tp, failed_copy_held_destination);
	return atf_no_error();
}
