// SPDX-License-Identifier: MIT
/*
 * Freeing a caller-owned object twice (lease, hold, reservation, use,
 * snapshot, decision) aborts the process with a message naming the object,
 * as glibc's free() does, instead of corrupting the manager (a lease freed
 * twice used to sit twice in the per-manager lease cache). Each case runs
 * the double free in a forked child and checks how the child ended: killed
 * by SIGABRT, its stderr naming the free function and the type. Under
 * AddressSanitizer a second free of malloc'd memory is its report instead
 * (it sees the guard's read first), which is accepted in such a build.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atf-c.h>
#include <rsd/rsd.h>

#include "lfx.h"

#if defined(__SANITIZE_ADDRESS__)
#define ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASAN 1
#endif
#endif
#ifndef ASAN
#define ASAN 0
#endif

/*
 * Run fn in a child whose stderr goes to a file; require that it died of
 * SIGABRT and said "FN(): double free of TYPE".
 */
static void expect_abort(void (*fn)(void), const char *fname, const char *type)
{
	char want[128], buf[4096] = "";
	FILE *f;
	pid_t pid;
	int st;

	fflush(NULL);
	pid = fork();
	ATF_REQUIRE(pid >= 0);
	if (pid == 0) {
		if (!freopen("child.err", "w", stderr))
			_exit(3);
		fn();
		_exit(0); /* survived the double free */
	}
	ATF_REQUIRE_EQ(waitpid(pid, &st, 0), pid);
	f = fopen("child.err", "r");
	ATF_REQUIRE(f);
	buf[fread(buf, 1, sizeof(buf) - 1, f)] = '\0';
	fclose(f);
	if (ASAN && strstr(buf, "AddressSanitizer"))
		return;
	ATF_REQUIRE_MSG(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "the child %s %d; stderr: %s",
			WIFSIGNALED(st) ? "died of signal" : "exited",
			WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), buf);
	snprintf(want, sizeof(want), "%s(): double free of %s", fname, type);
	ATF_CHECK_MSG(strstr(buf, want), "stderr lacks \"%s\": %s", want, buf);
}

/* A released lease on h at pinned host (the child exits 2 when none). */
static struct rsd_lease *released_lease(struct rsd_handle h)
{
	struct rsd_lease *l;

	if (rsd_acquire(lfx_m, &h, 1, RSD_LOC_PINNED_HOST, NULL, &l))
		_exit(2);
	rsd_lease_release(l, 0);
	return l;
}

static void lease_twice(void)
{
	struct rsd_lease *l;

	lfx_setup(true);
	l = released_lease(lfx_put(RSD_LOC_PINNED_HOST, 64, NULL));
	rsd_lease_free(l);
	rsd_lease_free(l);
}

static void hold_twice(void)
{
	struct rsd_handle h;
	struct rsd_hold *hd;

	lfx_setup(true);
	h = lfx_put(RSD_LOC_PINNED_HOST, 64, NULL);
	if (rsd_hold(lfx_m, &h, 1, RSD_LOC_PINNED_HOST, &hd))
		_exit(2);
	rsd_hold_release(hd);
	rsd_hold_free(hd);
	rsd_hold_free(hd);
}

static void reservation_twice(void)
{
	struct rsd_reservation *r;

	lfx_setup(true);
	if (rsd_reserve(lfx_m, RSD_LOC_PINNED_HOST, 64, "twice", &r))
		_exit(2);
	rsd_reservation_release(r);
	rsd_reservation_free(r);
	rsd_reservation_free(r);
}

static void snapshot_twice(void)
{
	struct rsd_snapshot *s;

	lfx_setup(true);
	lfx_put(RSD_LOC_PINNED_HOST, 64, NULL);
	if (rsd_snapshot_take(lfx_m, &s))
		_exit(2);
	rsd_snapshot_free(s);
	rsd_snapshot_free(s);
}

/* A controller and a one-requirement request on a fresh host-only manager. */
static struct rsd_controller *ctrl_setup(struct rsd_requirement *q, struct rsd_request *r)
{
	struct rsd_controller *c;

	lfx_setup(true);
	q->handle = lfx_put(RSD_LOC_PAGEABLE_HOST, 64, NULL);
	q->location = RSD_LOC_PINNED_HOST;
	*r = (struct rsd_request){ "twice", q, 1, NULL, 0 };
	if (rsd_controller_create(lfx_m, NULL, 0, &c))
		_exit(2);
	return c;
}

static void decision_twice(void)
{
	struct rsd_requirement q;
	struct rsd_request r;
	struct rsd_controller *c = ctrl_setup(&q, &r);
	struct rsd_decision *d;

	if (rsd_controller_decide(c, &r, &d))
		_exit(2);
	rsd_decision_free(d);
	rsd_decision_free(d);
}

static void use_twice(void)
{
	struct rsd_requirement q;
	struct rsd_request r;
	struct rsd_controller *c = ctrl_setup(&q, &r);
	struct rsd_use *u;

	if (rsd_controller_use(c, &r, NULL, 0, NULL, 0, &u))
		_exit(2);
	rsd_use_close(u, NULL);
	rsd_use_free(u);
	rsd_use_free(u);
}

#define DEATH_CASE(name, fname, type)                                \
	ATF_TC_WITHOUT_HEAD(name);                                   \
	ATF_TC_BODY(name, tc)                                        \
	{                                                            \
		expect_abort(name##_twice, #fname, "struct " #type); \
	}

DEATH_CASE(lease, rsd_lease_free, rsd_lease)
DEATH_CASE(hold, rsd_hold_free, rsd_hold)
DEATH_CASE(reservation, rsd_reservation_free, rsd_reservation)
DEATH_CASE(snapshot, rsd_snapshot_free, rsd_snapshot)
DEATH_CASE(decision, rsd_decision_free, rsd_decision)
DEATH_CASE(use, rsd_use_free, rsd_use)

/* One free is still just a free: the child exits normally. */
static void lease_once(void)
{
	struct rsd_handle h;

	lfx_setup(true);
	h = lfx_put(RSD_LOC_PINNED_HOST, 64, NULL);
	rsd_lease_free(released_lease(h));
	/* the cached object comes back live for the next lease */
	rsd_lease_free(released_lease(h));
	lfx_teardown();
}

ATF_TC_WITHOUT_HEAD(single_free_is_fine);
ATF_TC_BODY(single_free_is_fine, tc)
{
	pid_t pid;
	int st;

#if defined(__SANITIZE_THREAD__)
	/* The child starts librsd's reclaimer thread after forking a process
	 * that has threads (LTTng-UST's), which ThreadSanitizer refuses. */
	atf_tc_skip(
		"a thread started after fork in a threaded process: unsupported under ThreadSanitizer");
#endif
	fflush(NULL);
	pid = fork();
	ATF_REQUIRE(pid >= 0);
	if (pid == 0) {
		lease_once();
		_exit(0);
	}
	ATF_REQUIRE_EQ(waitpid(pid, &st, 0), pid);
	ATF_CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x", st);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, lease);
	ATF_TP_ADD_TC(tp, hold);
	ATF_TP_ADD_TC(tp, reservation);
	ATF_TP_ADD_TC(tp, snapshot);
	ATF_TP_ADD_TC(tp, decision);
	ATF_TP_ADD_TC(tp, use);
	ATF_TP_ADD_TC(tp, single_free_is_fine);
	return atf_no_error();
}
