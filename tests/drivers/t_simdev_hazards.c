// SPDX-License-Identifier: MIT
/*
 * What the simulated device makes of device-side work that is not ordered:
 * a kernel or copy reading bytes a copy or kernel queued before it has not
 * finished writing, or writing bytes one has not finished reading, aborts
 * with a message naming both (death tests: the scene runs in a child); work
 * ordered after the writer, by a stream wait or because the writer ran
 * first, does not. And a copy failing on the device (RSD_SIMDEV_COPY_EXEC):
 * its destination unchanged, the later work of its stream skipped, the
 * events after it failing with the injected code, a stream waiting on such
 * an event failing from its wait on, other streams unaffected.
 */
#include <atf-c.h>
#include "../check.h"
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rsd/rsd.h>

#define MS 1000000ull

static const struct rsd_location PINNED = { RSD_PINNED_HOST, -1 };
static const struct rsd_location CUDA0 = { RSD_CUDA, 0 };

/* An on-command simulator (no threads: it survives a fork) with two streams
 * of cuda:0, 64 pinned bytes h and 64 + 64 device bytes d and o. */
struct fix {
	struct rsd_simdev *sd;
	void *s1, *s2;
	unsigned char *h, *d, *o;
};

static void fix_init(struct fix *f)
{
	const struct rsd_device_ops *S = rsd_simdev_ops();
	struct rsd_simdev_config c = { .ndevices = 1, .pooled = true };

	RSD_REQUIRE_OK(rsd_simdev_create(&c, &f->sd));
	RSD_REQUIRE_OK(rsd_simdev_stream_create(f->sd, 0, &f->s1));
	RSD_REQUIRE_OK(rsd_simdev_stream_create(f->sd, 0, &f->s2));
	RSD_REQUIRE_OK(S->alloc(f->sd, PINNED, 64, (void **)&f->h));
	RSD_REQUIRE_OK(S->alloc(f->sd, CUDA0, 64, (void **)&f->d));
	RSD_REQUIRE_OK(S->alloc(f->sd, CUDA0, 64, (void **)&f->o));
	memset(f->h, 0x21, 64);
	memset(f->d, 0, 64);
	memset(f->o, 0, 64);
}

static void fix_fini(struct fix *f)
{
	const struct rsd_device_ops *S = rsd_simdev_ops();

	rsd_simdev_complete_all(f->sd);
	S->free(f->sd, PINNED, f->h, 64);
	S->free(f->sd, CUDA0, f->d, 64);
	S->free(f->sd, CUDA0, f->o, 64);
	rsd_simdev_stream_destroy(f->sd, f->s1);
	rsd_simdev_stream_destroy(f->sd, f->s2);
	rsd_simdev_destroy(f->sd);
}

/* Run scene(f) in a child with its stderr in a pipe: it must die of
 * SIGABRT, and its message must hold each of want. */
static void expect_abort(struct fix *f, void (*scene)(struct fix *), const char *const *want,
			 size_t nwant)
{
	char msg[4096];
	int status = 0, fd[2];
	size_t len = 0;
	ssize_t n;
	pid_t pid;

	ATF_REQUIRE_EQ(pipe(fd), 0);
	fflush(NULL);
	pid = fork();
	ATF_REQUIRE(pid >= 0);
	if (pid == 0) {
		close(fd[0]);
		if (dup2(fd[1], STDERR_FILENO) < 0)
			_exit(3);
		scene(f);
		_exit(0);
	}
	close(fd[1]);
	while (len < sizeof(msg) - 1 && (n = read(fd[0], msg + len, sizeof(msg) - 1 - len)) > 0)
		len += (size_t)n;
	msg[len] = '\0';
	close(fd[0]);
	ATF_REQUIRE_EQ(waitpid(pid, &status, 0), pid);
	ATF_CHECK_MSG(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
		      "child status %#x, stderr: %s", status, msg);
	for (size_t i = 0; i < nwant; i++)
		ATF_CHECK_MSG(strstr(msg, want[i]) != NULL, "message \"%s\" lacks \"%s\"", msg,
			      want[i]);
}

/* A copy of h to d is queued on s1 and not run; a kernel on s2 reads the
 * middle of d without waiting for it. */
static void queue_kernel_reads_d(struct fix *f)
{
	struct rsd_simdev_access acc = { f->d + 16, 32, false, false, 0 };

	if (rsd_simdev_ops()->copy(f->sd, f->d, CUDA0, f->h, PINNED, 64, f->s1) ||
	    rsd_simdev_launch_kernel(f->sd, f->s2, 1000, &acc, 1, NULL, NULL))
		_exit(2);
}

static void scene_kernel_reads_pending_copy(struct fix *f)
{
	queue_kernel_reads_d(f);
	rsd_simdev_stream_complete(f->sd, f->s2);
}

/* The same, the reader a copy of d to o on s2. */
static void scene_copy_reads_pending_copy(struct fix *f)
{
	const struct rsd_device_ops *S = rsd_simdev_ops();

	if (S->copy(f->sd, f->d, CUDA0, f->h, PINNED, 64, f->s1) ||
	    S->copy(f->sd, f->o, CUDA0, f->d, CUDA0, 64, f->s2))
		_exit(2);
	rsd_simdev_stream_complete(f->sd, f->s2);
}

/* A kernel on s1 reads d and has not run; a copy on s2 overwrites d. */
static void scene_copy_overwrites_pending_read(struct fix *f)
{
	struct rsd_simdev_access acc = { f->d, 64, false, false, 0 };

	if (rsd_simdev_launch_kernel(f->sd, f->s1, 1000, &acc, 1, NULL, NULL) ||
	    rsd_simdev_ops()->copy(f->sd, f->d, CUDA0, f->h, PINNED, 64, f->s2))
		_exit(2);
	rsd_simdev_stream_complete(f->sd, f->s2);
}

/* Background: a 10 s kernel writing o is running (parked) when a copy on
 * another stream reads o. */
static void scene_copy_reads_running_kernel(struct fix *f)
{
	struct rsd_simdev_access acc = { f->o, 64, true, true, 0x5e };

	rsd_simdev_set_progress(f->sd, RSD_SIMDEV_BACKGROUND, 0);
	if (rsd_simdev_launch_kernel(f->sd, f->s1, 10000 * MS, &acc, 1, NULL, NULL) ||
	    rsd_simdev_ops()->copy(f->sd, f->h, PINNED, f->o, CUDA0, 64, f->s2))
		_exit(2);
	rsd_simdev_ops()->stream_sync(f->sd, f->s2);
}

/* Freeing d while a queued kernel reads it. */
static void scene_free_under_kernel(struct fix *f)
{
	struct rsd_simdev_access acc = { f->d, 64, false, false, 0 };

	if (rsd_simdev_launch_kernel(f->sd, f->s1, 1000, &acc, 1, NULL, NULL))
		_exit(2);
	rsd_simdev_ops()->free(f->sd, CUDA0, f->d, 64);
}

ATF_TC_WITHOUT_HEAD(unordered_readers_and_writers_abort);
ATF_TC_BODY(unordered_readers_and_writers_abort, tc)
{
	char w[4][256];
	const char *want[4] = { w[0], w[1], w[2], w[3] };
	struct fix f;

	fix_init(&f);
	snprintf(w[0], sizeof(w[0]),
		 "a kernel of 1000 ns on stream %p (cuda:0) reads 32 bytes at %p", f.s2,
		 (void *)(f.d + 16));
	snprintf(w[1], sizeof(w[1]),
		 "while a copy of 64 bytes from %p (pinned-host) to %p (cuda:0) on stream %p "
		 "(cuda:0), queued before it and not finished, writes 64 bytes at %p",
		 (void *)f.h, (void *)f.d, f.s1, (void *)f.d);
	snprintf(w[2], sizeof(w[2]), "a GPU would read bytes not written yet");
	expect_abort(&f, scene_kernel_reads_pending_copy, want, 3);

	snprintf(w[0], sizeof(w[0]),
		 "a copy of 64 bytes from %p (cuda:0) to %p (cuda:0) on stream %p (cuda:0) "
		 "reads 64 bytes at %p",
		 (void *)f.d, (void *)f.o, f.s2, (void *)f.d);
	expect_abort(&f, scene_copy_reads_pending_copy, want, 3);

	snprintf(w[0], sizeof(w[0]),
		 "a copy of 64 bytes from %p (pinned-host) to %p (cuda:0) on stream %p (cuda:0) "
		 "writes 64 bytes at %p",
		 (void *)f.h, (void *)f.d, f.s2, (void *)f.d);
	snprintf(w[1], sizeof(w[1]),
		 "while a kernel of 1000 ns on stream %p (cuda:0), queued before it and not "
		 "finished, reads 64 bytes at %p",
		 f.s1, (void *)f.d);
	snprintf(w[2], sizeof(w[2]), "a GPU would overwrite bytes it has not read yet");
	expect_abort(&f, scene_copy_overwrites_pending_read, want, 3);

	snprintf(w[0], sizeof(w[0]),
		 "free of %p (64 bytes) at cuda:0 while a queued copy or kernel still reads or "
		 "writes it",
		 (void *)f.d);
	expect_abort(&f, scene_free_under_kernel, want, 1);
	fix_fini(&f);
}

/* A kernel parked in flight by a background worker is unfinished work. */
ATF_TC_WITHOUT_HEAD(reader_of_a_running_kernel_aborts);
ATF_TC_BODY(reader_of_a_running_kernel_aborts, tc)
{
	char w[3][256];
	const char *want[3] = { w[0], w[1], w[2] };
	struct fix f;

#if defined(__SANITIZE_THREAD__)
	/* The child starts the simulator's worker after forking a process
	 * that has threads (LTTng-UST's), which ThreadSanitizer refuses. */
	atf_tc_skip("a thread started after fork in a threaded process: unsupported under "
		    "ThreadSanitizer");
#endif
	fix_init(&f);
	snprintf(w[0], sizeof(w[0]),
		 "a copy of 64 bytes from %p (cuda:0) to %p (pinned-host) on stream %p (cuda:0) "
		 "reads 64 bytes at %p",
		 (void *)f.o, (void *)f.h, f.s2, (void *)f.o);
	snprintf(w[1], sizeof(w[1]),
		 "while a kernel of 10000000000 ns on stream %p (cuda:0), queued before it and "
		 "not finished, writes 64 bytes at %p",
		 f.s1, (void *)f.o);
	snprintf(w[2], sizeof(w[2]), "a GPU would read bytes not written yet");
	expect_abort(&f, scene_copy_reads_running_kernel, want, 3);
	fix_fini(&f);
}

/* The same readers, once ordered after the writer (by a stream wait, or by
 * the writer having run), read its bytes and do not abort. */
ATF_TC_WITHOUT_HEAD(ordered_readers_do_not_abort);
ATF_TC_BODY(ordered_readers_do_not_abort, tc)
{
	const struct rsd_device_ops *S = rsd_simdev_ops();
	struct fix f;
	void *e;

	fix_init(&f);
	/* The writer has run before the reader starts. */
	queue_kernel_reads_d(&f);
	rsd_simdev_stream_complete(f.sd, f.s1);
	rsd_simdev_stream_complete(f.sd, f.s2);
	ATF_CHECK_EQ(f.d[63], 0x21);
	/* The reader waits for the writer's event. */
	memset(f.h, 0x43, 64);
	RSD_REQUIRE_OK(S->copy(f.sd, f.d, CUDA0, f.h, PINNED, 64, f.s1));
	e = NULL;
	RSD_REQUIRE_OK(S->event_record(f.sd, f.s1, &e));
	RSD_REQUIRE_OK(S->stream_wait_event(f.sd, f.s2, e));
	RSD_REQUIRE_OK(S->copy(f.sd, f.o, CUDA0, f.d, CUDA0, 64, f.s2));
	rsd_simdev_stream_complete(f.sd, f.s2);
	ATF_CHECK_EQ(f.o[0], 0x43);
	ATF_CHECK_EQ(f.o[63], 0x43);
	/* Readers of the same bytes on two streams are no conflict. */
	RSD_REQUIRE_OK(S->copy(f.sd, f.h, PINNED, f.d, CUDA0, 32, f.s1));
	RSD_REQUIRE_OK(S->copy(f.sd, f.o, CUDA0, f.d, CUDA0, 32, f.s2));
	rsd_simdev_stream_complete(f.sd, f.s2);
	rsd_simdev_stream_complete(f.sd, f.s1);
	ATF_CHECK_EQ(f.h[0], 0x43);
	S->event_destroy(f.sd, e);
	fix_fini(&f);
}

static void *record(struct rsd_simdev *sd, void *s)
{
	void *ev = NULL;

	RSD_REQUIRE_OK(rsd_simdev_ops()->event_record(sd, s, &ev));
	return ev;
}

/*
 * On s: e0, copy h -> d (fails when it runs), e1, copy h -> o (skipped), a
 * kernel filling o + 32 (skipped), e2. On another stream t: a copy that
 * runs, f. Stream u waits on e1 (failed), v on e0 (fine).
 */
ATF_TC_WITHOUT_HEAD(copy_exec_fault_fails_the_stream);
ATF_TC_BODY(copy_exec_fault_fails_the_stream, tc)
{
	const struct rsd_device_ops *S = rsd_simdev_ops();
	struct fix f;
	unsigned char other[64] = { 0 };
	struct rsd_simdev_access fill = { NULL, 32, true, true, 0x77 };
	void *t, *u, *v, *e0, *e1, *e2, *e3, *ef, *eu, *ev, *ew, *w, *evs[6];
	char want[128];

	fix_init(&f);
	fill.ptr = f.o + 32;
	RSD_REQUIRE_OK(rsd_simdev_stream_create(f.sd, 0, &t));
	RSD_REQUIRE_OK(rsd_simdev_stream_create(f.sd, 0, &u));
	RSD_REQUIRE_OK(rsd_simdev_stream_create(f.sd, 0, &v));
	rsd_simdev_fail_nth(f.sd, RSD_SIMDEV_COPY_EXEC, 1, RSD_EDEVICE);
	e0 = record(f.sd, f.s1);
	/* Queueing succeeds: the copy fails when it runs. */
	RSD_CHECK_OK(S->copy(f.sd, f.d, CUDA0, f.h, PINNED, 64, f.s1));
	e1 = record(f.sd, f.s1);
	RSD_CHECK_OK(S->copy(f.sd, f.o, CUDA0, f.h, PINNED, 32, f.s1));
	RSD_CHECK_OK(rsd_simdev_launch_kernel(f.sd, f.s1, 1000, &fill, 1, NULL, NULL));
	e2 = record(f.sd, f.s1);
	RSD_CHECK_OK(S->copy(f.sd, other, RSD_LOC_PAGEABLE_HOST, f.h, PINNED, 64, t));
	ef = record(f.sd, t);
	RSD_REQUIRE_OK(S->stream_wait_event(f.sd, u, e1));
	eu = record(f.sd, u);
	RSD_REQUIRE_OK(S->stream_wait_event(f.sd, v, e0));
	ev = record(f.sd, v);
	ATF_CHECK_EQ(rsd_simdev_calls(f.sd, RSD_SIMDEV_COPY_EXEC), 0);
	/* Nothing has run: nothing has failed yet. */
	ATF_CHECK_EQ(S->event_query(f.sd, e1), 0);
	rsd_simdev_stream_complete(f.sd, f.s1); /* the first copy to run */
	rsd_simdev_complete_all(f.sd);

	ATF_CHECK_EQ(f.d[0], 0); /* not written */
	ATF_CHECK_EQ(f.d[63], 0);
	ATF_CHECK_EQ(f.o[0], 0);  /* skipped */
	ATF_CHECK_EQ(f.o[32], 0); /* the kernel too */
	ATF_CHECK_EQ(other[63], 0x21);
	ATF_CHECK_EQ(rsd_simdev_calls(f.sd, RSD_SIMDEV_COPY_EXEC), 2); /* skipped: not counted */
	ATF_CHECK_EQ(S->event_query(f.sd, e0), 1);
	RSD_CHECK_OK(S->event_sync(f.sd, e0));
	RSD_CHECK_ERR(RSD_EDEVICE, S->event_query(f.sd, e1));
	snprintf(want, sizeof(want), "event %p comes after a copy that failed on the device", e1);
	ATF_CHECK_MSG(strstr(rsd_last_error()->message, want) != NULL, "%s",
		      rsd_last_error()->message);
	ATF_CHECK(strstr(rsd_last_error()->message,
			 "injected failure of copy_exec call 1 (device driver failure)") != NULL);
	RSD_CHECK_ERR(RSD_EDEVICE, S->event_sync(f.sd, e1));
	RSD_CHECK_ERR(RSD_EDEVICE, S->event_query(f.sd, e2));
	RSD_CHECK_ERR(RSD_EDEVICE, S->event_sync(f.sd, e2));
	ATF_CHECK_EQ(S->event_query(f.sd, ef), 1);
	RSD_CHECK_ERR(RSD_EDEVICE, S->event_query(f.sd, eu));
	ATF_CHECK_EQ(S->event_query(f.sd, ev), 1);
	ATF_CHECK_EQ(rsd_simdev_pending_events(f.sd, NULL), 0);
	/* The syncs are not affected. */
	RSD_CHECK_OK(S->stream_sync(f.sd, f.s1));
	RSD_CHECK_OK(S->device_sync(f.sd, 0));

	/* It sticks: later events of s1 and u fail, s1's copies are skipped
	 * (and not counted), t and v go on. */
	RSD_CHECK_OK(S->copy(f.sd, f.d, CUDA0, f.h, PINNED, 64, f.s1));
	e3 = record(f.sd, f.s1);
	rsd_simdev_complete_all(f.sd);
	RSD_CHECK_ERR(RSD_EDEVICE, S->event_query(f.sd, e3));
	ATF_CHECK_EQ(f.d[0], 0);
	ATF_CHECK_EQ(rsd_simdev_calls(f.sd, RSD_SIMDEV_COPY_EXEC), 2);
	S->event_destroy(f.sd, e3);
	e3 = record(f.sd, u);
	RSD_CHECK_ERR(RSD_EDEVICE, S->event_query(f.sd, e3));
	S->event_destroy(f.sd, e3);
	RSD_CHECK_OK(S->copy(f.sd, f.d, CUDA0, f.h, PINNED, 64, v));
	e3 = record(f.sd, v);
	rsd_simdev_complete_all(f.sd);
	ATF_CHECK_EQ(S->event_query(f.sd, e3), 1);
	ATF_CHECK_EQ(f.d[0], 0x21);
	S->event_destroy(f.sd, e3);

	/* The failed stream destroyed and drained: its events still fail, and
	 * a stream waiting on one fails from its wait on. */
	rsd_simdev_stream_destroy(f.sd, f.s1);
	RSD_CHECK_ERR(RSD_EDEVICE, S->event_query(f.sd, e1));
	ATF_CHECK_EQ(S->event_query(f.sd, e0), 1);
	RSD_REQUIRE_OK(rsd_simdev_stream_create(f.sd, 0, &w));
	ew = record(f.sd, w);
	RSD_REQUIRE_OK(S->stream_wait_event(f.sd, w, e1));
	e3 = record(f.sd, w);
	rsd_simdev_complete_all(f.sd);
	ATF_CHECK_EQ(S->event_query(f.sd, ew), 1);
	RSD_CHECK_ERR(RSD_EDEVICE, S->event_query(f.sd, e3));
	S->event_destroy(f.sd, e3);
	S->event_destroy(f.sd, ew);
	rsd_simdev_stream_destroy(f.sd, w);
	evs[0] = e0, evs[1] = e1, evs[2] = e2, evs[3] = ef, evs[4] = eu, evs[5] = ev;
	for (int i = 0; i < 6; i++)
		S->event_destroy(f.sd, evs[i]);
	rsd_simdev_stream_destroy(f.sd, t);
	rsd_simdev_stream_destroy(f.sd, u);
	rsd_simdev_stream_destroy(f.sd, v);
	f.s1 = NULL; /* destroyed above; fix_fini's destroy ignores it */
	fix_fini(&f);
}

/* fail_all makes every copy fail when it runs (immediate mode: inside the
 * copy call, which still succeeds), with the injected code, either sign. */
ATF_TC_WITHOUT_HEAD(copy_exec_fail_all);
ATF_TC_BODY(copy_exec_fail_all, tc)
{
	const struct rsd_device_ops *S = rsd_simdev_ops();
	struct fix f;
	void *e, *s3;

	fix_init(&f);
	rsd_simdev_set_progress(f.sd, RSD_SIMDEV_IMMEDIATE, 0);
	rsd_simdev_fail_all(f.sd, RSD_SIMDEV_COPY_EXEC, -RSD_ENOMEM);
	RSD_CHECK_OK(S->copy(f.sd, f.d, CUDA0, f.h, PINNED, 64, f.s1));
	RSD_CHECK_OK(S->copy(f.sd, f.o, CUDA0, f.h, PINNED, 64, f.s2));
	e = record(f.sd, f.s2);
	RSD_CHECK_ERR(RSD_ENOMEM, S->event_query(f.sd, e));
	S->event_destroy(f.sd, e);
	e = record(f.sd, f.s1);
	RSD_CHECK_ERR(RSD_ENOMEM, S->event_sync(f.sd, e));
	S->event_destroy(f.sd, e);
	ATF_CHECK_EQ(f.d[0], 0);
	ATF_CHECK_EQ(f.o[0], 0);
	ATF_CHECK_EQ(rsd_simdev_calls(f.sd, RSD_SIMDEV_COPY_EXEC), 2);
	/* Disarmed: a fresh stream copies again. */
	rsd_simdev_fail_all(f.sd, RSD_SIMDEV_COPY_EXEC, 0);
	RSD_REQUIRE_OK(rsd_simdev_stream_create(f.sd, 0, &s3));
	RSD_CHECK_OK(S->copy(f.sd, f.d, CUDA0, f.h, PINNED, 64, s3));
	e = record(f.sd, s3);
	ATF_CHECK_EQ(S->event_query(f.sd, e), 1);
	ATF_CHECK_EQ(f.d[63], 0x21);
	S->event_destroy(f.sd, e);
	rsd_simdev_stream_destroy(f.sd, s3);
	fix_fini(&f);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, unordered_readers_and_writers_abort);
	ATF_TP_ADD_TC(tp, reader_of_a_running_kernel_aborts);
	ATF_TP_ADD_TC(tp, ordered_readers_do_not_abort);
	ATF_TP_ADD_TC(tp, copy_exec_fault_fails_the_stream);
	ATF_TP_ADD_TC(tp, copy_exec_fail_all);
	return atf_no_error();
}
