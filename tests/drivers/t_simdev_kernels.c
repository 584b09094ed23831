// SPDX-License-Identifier: MIT
/*
 * Kernels of the simulated device: a kernel lasts its duration in every
 * progress mode (times the time scale with the link model on), kernels of
 * one device follow one another while kernels of different devices and
 * copies overlap them, a kernel ordered after a copy by a stream wait reads
 * the copied bytes and a copy ordered after a kernel reads its results, a
 * kernel's fills and function take effect when it finishes, the launch
 * refuses bad arguments, and in background mode the compute engine and each
 * copy direction progress independently.
 *
 * Times are checked from below (nothing ends before its modelled time);
 * overlap is shown by order, with wide margins: a short item on another
 * engine ends while a long one is still pending.
 */
#include <atf-c.h>
#include "../check.h"
#include "../gate.h"
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rsd/rsd.h>

#define MS 1000000ull
#define MB 1000000ull

static const struct rsd_location PINNED = { RSD_PINNED_HOST, -1 };
static const struct rsd_location CUDA0 = { RSD_CUDA, 0 };

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct rsd_simdev *mk(const struct rsd_simdev_config *c)
{
	struct rsd_simdev *sd = NULL;

	RSD_REQUIRE_OK(rsd_simdev_create(c, &sd));
	return sd;
}

static struct rsd_simdev *mk_mode(int ndevices, enum rsd_simdev_progress mode)
{
	struct rsd_simdev_config c = { .ndevices = ndevices, .pooled = true, .progress = mode };

	return mk(&c);
}

static void *mem(struct rsd_simdev *sd, struct rsd_location at, uint64_t n)
{
	void *p = NULL;

	RSD_REQUIRE_OK(rsd_simdev_ops()->alloc(sd, at, n, &p));
	return p;
}

static void *stream(struct rsd_simdev *sd, int dev)
{
	void *s = NULL;

	RSD_REQUIRE_OK(rsd_simdev_stream_create(sd, dev, &s));
	return s;
}

static void *record(struct rsd_simdev *sd, void *s)
{
	void *ev = NULL;

	RSD_REQUIRE_OK(rsd_simdev_ops()->event_record(sd, s, &ev));
	return ev;
}

/* The short item's event completes while the long item's is still pending
 * (they overlap: wide margins); then both are waited for and destroyed. */
static void check_short_ends_first(struct rsd_simdev *sd, void *elong, void *eshort)
{
	const struct rsd_device_ops *S = rsd_simdev_ops();

	RSD_REQUIRE_OK(S->event_sync(sd, eshort));
	ATF_CHECK_EQ(S->event_query(sd, elong), 0);
	RSD_REQUIRE_OK(S->event_sync(sd, elong));
	S->event_destroy(sd, elong);
	S->event_destroy(sd, eshort);
}

/* What a kernel's function saw when it ran. */
struct seen {
	pthread_mutex_t lock;
	int calls;
	pthread_t thread;
	uint64_t at_ns;		   /* CLOCK_MONOTONIC when it ran */
	const unsigned char *read; /* the range it copies into bytes */
	unsigned char bytes[64];
	const unsigned char *out; /* a filled range it looks at */
	unsigned char out_first;
};

static void seen_init(struct seen *v, const void *read, const void *out)
{
	memset(v, 0, sizeof(*v));
	pthread_mutex_init(&v->lock, NULL);
	v->read = read;
	v->out = out;
}

static void kernel_fn(void *arg)
{
	struct seen *v = arg;

	pthread_mutex_lock(&v->lock);
	v->calls++;
	v->thread = pthread_self();
	v->at_ns = now_ns();
	if (v->read)
		memcpy(v->bytes, v->read, sizeof(v->bytes));
	if (v->out)
		v->out_first = *v->out;
	pthread_mutex_unlock(&v->lock);
}

static int calls_of(struct seen *v)
{
	int n;

	pthread_mutex_lock(&v->lock);
	n = v->calls;
	pthread_mutex_unlock(&v->lock);
	return n;
}

/* One kernel writing out (filled with 0xab) lasts at least d in wall time
 * from its launch to its event; its fill comes before its function. */
static void check_duration(struct rsd_simdev *sd, enum rsd_simdev_progress mode, uint64_t d,
			   uint64_t modelled)
{
	const struct rsd_device_ops *S = rsd_simdev_ops();
	unsigned char *out = mem(sd, CUDA0, 64);
	struct rsd_simdev_access acc = { out, 64, true, true, 0xab };
	void *s = stream(sd, 0), *e;
	struct seen v;
	uint64_t t0, t1;

	memset(out, 0, 64);
	seen_init(&v, NULL, out + 63);
	t0 = now_ns();
	RSD_REQUIRE_OK(rsd_simdev_launch_kernel(sd, s, d, &acc, 1, kernel_fn, &v));
	t1 = now_ns();
	e = record(sd, s);
	switch (mode) {
	case RSD_SIMDEV_IMMEDIATE:
		/* Run by the launching call, which sleeps through it. */
		ATF_CHECK(t1 - t0 >= modelled);
		ATF_CHECK_EQ(S->event_query(sd, e), 1);
		ATF_CHECK(pthread_equal(v.thread, pthread_self()));
		break;
	case RSD_SIMDEV_ON_COMMAND:
		/* Nothing runs it until the stream is completed, which takes
		 * the kernel's time on this thread. */
		usleep(20000);
		ATF_CHECK_EQ(S->event_query(sd, e), 0);
		ATF_CHECK_EQ(calls_of(&v), 0);
		ATF_CHECK_EQ(out[0], 0);
		t0 = now_ns();
		rsd_simdev_stream_complete(sd, s);
		ATF_CHECK(now_ns() - t0 >= modelled);
		ATF_CHECK_EQ(S->event_query(sd, e), 1);
		ATF_CHECK(pthread_equal(v.thread, pthread_self()));
		break;
	case RSD_SIMDEV_BACKGROUND:
		/* The launch returns at once; a worker runs it. */
		if (now_ns() - t0 < modelled)
			ATF_CHECK_EQ(S->event_query(sd, e), 0);
		RSD_REQUIRE_OK(S->event_sync(sd, e));
		ATF_CHECK(now_ns() - t0 >= modelled);
		ATF_CHECK(!pthread_equal(v.thread, pthread_self()));
		break;
	}
	ATF_CHECK_EQ(calls_of(&v), 1);
	ATF_CHECK(v.at_ns - t0 >= modelled); /* its effects come at its end */
	ATF_CHECK_EQ(v.out_first, 0xab);     /* the fill came first */
	ATF_CHECK_EQ(out[0], 0xab);
	S->event_destroy(sd, e);
	rsd_simdev_stream_destroy(sd, s);
	S->free(sd, CUDA0, out, 64);
}

ATF_TC_WITHOUT_HEAD(kernel_lasts_its_duration);
ATF_TC_BODY(kernel_lasts_its_duration, tc)
{
	const enum rsd_simdev_progress modes[] = { RSD_SIMDEV_ON_COMMAND, RSD_SIMDEV_IMMEDIATE,
						   RSD_SIMDEV_BACKGROUND };
	struct rsd_simdev_config c = { .ndevices = 1,
				       .pooled = true,
				       .links = true,
				       .time_scale = 4,
				       .progress = RSD_SIMDEV_BACKGROUND };
	struct rsd_simdev *sd;

	/* Without the link model: its duration in wall time, in every mode. */
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		sd = mk_mode(1, modes[i]);
		check_duration(sd, modes[i], 40 * MS, 40 * MS);
		rsd_simdev_destroy(sd);
	}
	/* With it: times the time scale. */
	sd = mk(&c);
	check_duration(sd, RSD_SIMDEV_BACKGROUND, 20 * MS, 80 * MS);
	rsd_simdev_destroy(sd);
}

/* Two kernels of one device on two streams take the sum of their times; a
 * short kernel on another device ends while a long one is pending. */
ATF_TC_WITHOUT_HEAD(kernels_of_one_device_follow_one_another);
ATF_TC_BODY(kernels_of_one_device_follow_one_another, tc)
{
	const struct rsd_device_ops *S = rsd_simdev_ops();
	struct rsd_simdev *sd = mk_mode(2, RSD_SIMDEV_BACKGROUND);
	void *a = stream(sd, 0), *b = stream(sd, 0), *c = stream(sd, 1), *ea, *eb, *ec;
	uint64_t t0;

	t0 = now_ns();
	RSD_REQUIRE_OK(rsd_simdev_launch_kernel(sd, a, 150 * MS, NULL, 0, NULL, NULL));
	ea = record(sd, a);
	RSD_REQUIRE_OK(rsd_simdev_launch_kernel(sd, b, 150 * MS, NULL, 0, NULL, NULL));
	eb = record(sd, b);
	RSD_REQUIRE_OK(S->event_sync(sd, ea));
	RSD_REQUIRE_OK(S->event_sync(sd, eb));
	ATF_CHECK_MSG(now_ns() - t0 >= 300 * MS, "two 150 ms kernels of cuda:0 took %llu ms",
		      (unsigned long long)((now_ns() - t0) / MS));
	S->event_destroy(sd, ea);
	S->event_destroy(sd, eb);

	/* cuda:0 for 1 s, then cuda:1 for 50 ms: the second ends first. */
	RSD_REQUIRE_OK(rsd_simdev_launch_kernel(sd, a, 1000 * MS, NULL, 0, NULL, NULL));
	ea = record(sd, a);
	RSD_REQUIRE_OK(rsd_simdev_launch_kernel(sd, c, 50 * MS, NULL, 0, NULL, NULL));
	ec = record(sd, c);
	check_short_ends_first(sd, ea, ec);
	rsd_simdev_stream_destroy(sd, a);
	rsd_simdev_stream_destroy(sd, b);
	rsd_simdev_stream_destroy(sd, c);
	rsd_simdev_destroy(sd);
}

/* A long kernel does not hold up copies of its device on other streams,
 * with the link model (copies on the copy engines) or without it (copies
 * take no time): the worker parks the kernel and goes on. And a long copy
 * does not hold up a kernel. */
ATF_TC_WITHOUT_HEAD(kernels_and_copies_overlap);
ATF_TC_BODY(kernels_and_copies_overlap, tc)
{
	const struct rsd_device_ops *S = rsd_simdev_ops();
	struct rsd_simdev_config lc = { .ndevices = 1,
					.pooled = true,
					.progress = RSD_SIMDEV_BACKGROUND,
					.links = true,
					.h2d_bps = 2 * MB,
					.d2h_bps = 10 * MB,
					.pcie_latency_ns = 1 };

	for (int links = 0; links < 2; links++) {
		struct rsd_simdev *sd = links ? mk(&lc) : mk_mode(1, RSD_SIMDEV_BACKGROUND);
		void *h2d = S->transfer_stream(sd, CUDA0, PINNED);
		void *d2h = S->transfer_stream(sd, PINNED, CUDA0);
		void *cs = stream(sd, 0), *ek, *e1, *e2;
		unsigned char *h = mem(sd, PINNED, 2 * MB), *d = mem(sd, CUDA0, 2 * MB);

		memset(h, 0x5c, MB);
		memset(d + MB, 0x6d, MB);
		/* Kernel 1 s; then 1 MB each way (500 ms and 100 ms with
		 * the model), both done while the kernel is pending. */
		RSD_REQUIRE_OK(rsd_simdev_launch_kernel(sd, cs, 1000 * MS, NULL, 0, NULL, NULL));
		ek = record(sd, cs);
		RSD_REQUIRE_OK(S->copy(sd, d, CUDA0, h, PINNED, MB, h2d));
		e1 = record(sd, h2d);
		RSD_REQUIRE_OK(S->copy(sd, h + MB, PINNED, d + MB, CUDA0, MB, d2h));
		e2 = record(sd, d2h);
		RSD_REQUIRE_OK(S->event_sync(sd, e1));
		RSD_REQUIRE_OK(S->event_sync(sd, e2));
		ATF_CHECK_EQ_MSG(S->event_query(sd, ek), 0, "links %d", links);
		ATF_CHECK_EQ(d[MB - 1], 0x5c);
		ATF_CHECK_EQ(h[2 * MB - 1], 0x6d);
		RSD_REQUIRE_OK(S->event_sync(sd, ek));
		S->event_destroy(sd, ek);
		S->event_destroy(sd, e1);
		S->event_destroy(sd, e2);
		if (links) {
			/* A 1 s copy (2 MB), then a 50 ms kernel: it ends
			 * first. */
			RSD_REQUIRE_OK(S->copy(sd, d, CUDA0, h, PINNED, 2 * MB, h2d));
			e1 = record(sd, h2d);
			RSD_REQUIRE_OK(
				rsd_simdev_launch_kernel(sd, cs, 50 * MS, NULL, 0, NULL, NULL));
			ek = record(sd, cs);
			check_short_ends_first(sd, e1, ek);
		}
		S->free(sd, PINNED, h, 2 * MB);
		S->free(sd, CUDA0, d, 2 * MB);
		rsd_simdev_stream_destroy(sd, cs);
		rsd_simdev_destroy(sd);
	}
}

/*
 * The consumer pattern: a copy to the device on a transfer stream, a stream
 * wait on its event, a kernel on the compute stream reading the copied bytes
 * and writing its output, then a copy back ordered after the kernel by a
 * wait on the kernel's event. Nothing aborts; every reader sees the writer's
 * bytes.
 */
static void check_consumer(struct rsd_simdev *sd, bool on_command)
{
	const struct rsd_device_ops *S = rsd_simdev_ops();
	void *h2d = S->transfer_stream(sd, CUDA0, PINNED);
	void *d2h = S->transfer_stream(sd, PINNED, CUDA0);
	unsigned char *h = mem(sd, PINNED, 128), *back = mem(sd, PINNED, 64);
	unsigned char *in = mem(sd, CUDA0, 64), *out = mem(sd, CUDA0, 64);
	struct rsd_simdev_access acc[] = { { in, 64, false, false, 0 },
					   { out, 64, true, true, 0xc3 } };
	void *cs = stream(sd, 0), *ecopy, *ekern, *eback;
	unsigned char want[64];
	struct seen v;

	for (int i = 0; i < 64; i++)
		h[i] = want[i] = (unsigned char)(i * 7 + 1);
	memset(in, 0, 64);
	memset(out, 0, 64);
	memset(back, 0, 64);
	seen_init(&v, in, NULL);
	RSD_REQUIRE_OK(S->copy(sd, in, CUDA0, h, PINNED, 64, h2d));
	ecopy = record(sd, h2d);
	RSD_REQUIRE_OK(S->stream_wait_event(sd, cs, ecopy));
	RSD_REQUIRE_OK(rsd_simdev_launch_kernel(sd, cs, 1 * MS, acc, 2, kernel_fn, &v));
	ekern = record(sd, cs);
	RSD_REQUIRE_OK(S->stream_wait_event(sd, d2h, ekern));
	RSD_REQUIRE_OK(S->copy(sd, back, PINNED, out, CUDA0, 64, d2h));
	eback = record(sd, d2h);
	if (on_command) {
		ATF_CHECK_EQ(rsd_simdev_pending_events(sd, NULL), 3);
		/* Completing the last stream runs each stream it waits for
		 * up to the awaited event first. */
		rsd_simdev_stream_complete(sd, d2h);
	}
	RSD_REQUIRE_OK(S->event_sync(sd, eback));
	ATF_CHECK_EQ(S->event_query(sd, ecopy), 1);
	ATF_CHECK_EQ(S->event_query(sd, ekern), 1);
	ATF_REQUIRE_EQ(calls_of(&v), 1);
	ATF_CHECK(memcmp(v.bytes, want, 64) == 0);
	ATF_CHECK_EQ(back[0], 0xc3);
	ATF_CHECK_EQ(back[63], 0xc3);
	S->event_destroy(sd, ecopy);
	S->event_destroy(sd, ekern);
	S->event_destroy(sd, eback);
	rsd_simdev_stream_destroy(sd, cs);
	S->free(sd, PINNED, h, 128);
	S->free(sd, PINNED, back, 64);
	S->free(sd, CUDA0, in, 64);
	S->free(sd, CUDA0, out, 64);
}

ATF_TC_WITHOUT_HEAD(kernel_ordered_after_copy_reads_its_bytes);
ATF_TC_BODY(kernel_ordered_after_copy_reads_its_bytes, tc)
{
	struct rsd_simdev_config lc = { .ndevices = 1,
					.pooled = true,
					.progress = RSD_SIMDEV_BACKGROUND,
					.delay_ns = 2 * MS,
					.links = true,
					.pcie_latency_ns = 2 * MS };
	struct rsd_simdev *sd;

	sd = mk_mode(1, RSD_SIMDEV_ON_COMMAND);
	check_consumer(sd, true);
	rsd_simdev_destroy(sd);
	sd = mk_mode(1, RSD_SIMDEV_IMMEDIATE);
	check_consumer(sd, false);
	rsd_simdev_destroy(sd);
	/* Background, each item 2 ms late and each copy 2 ms long, so that
	 * every writer is still pending when its reader is queued. */
	sd = mk(&lc);
	check_consumer(sd, false);
	rsd_simdev_destroy(sd);
}

/* Work queued on one stream after a kernel waits for its modelled end: a
 * host function behind a kernel runs after the kernel's function. */
struct order {
	pthread_mutex_t lock;
	int ids[4];
	int n;
};

struct order_mark {
	struct order *o;
	int id;
};

static void note(void *arg)
{
	struct order_mark *m = arg;

	pthread_mutex_lock(&m->o->lock);
	if (m->o->n < 4)
		m->o->ids[m->o->n++] = m->id;
	pthread_mutex_unlock(&m->o->lock);
}

ATF_TC_WITHOUT_HEAD(stream_order_around_a_kernel);
ATF_TC_BODY(stream_order_around_a_kernel, tc)
{
	const struct rsd_device_ops *S = rsd_simdev_ops();
	struct rsd_simdev *sd = mk_mode(1, RSD_SIMDEV_BACKGROUND);
	struct order o = { PTHREAD_MUTEX_INITIALIZER, { 0 }, 0 };
	struct order_mark m[3] = { { &o, 1 }, { &o, 2 }, { &o, 3 } };
	void *s = stream(sd, 0);

	RSD_REQUIRE_OK(rsd_simdev_launch_host_func(sd, s, note, &m[0]));
	RSD_REQUIRE_OK(rsd_simdev_launch_kernel(sd, s, 30 * MS, NULL, 0, note, &m[1]));
	RSD_REQUIRE_OK(rsd_simdev_launch_host_func(sd, s, note, &m[2]));
	RSD_REQUIRE_OK(S->stream_sync(sd, s));
	ATF_REQUIRE_EQ(o.n, 3);
	for (int i = 0; i < 3; i++)
		ATF_CHECK_EQ(o.ids[i], i + 1);
	rsd_simdev_stream_destroy(sd, s);
	rsd_simdev_destroy(sd);
}

ATF_TC_WITHOUT_HEAD(launch_refuses_bad_arguments);
ATF_TC_BODY(launch_refuses_bad_arguments, tc)
{
	struct rsd_simdev *sd = mk_mode(1, RSD_SIMDEV_ON_COMMAND);
	const struct rsd_device_ops *S = rsd_simdev_ops();
	unsigned char buf[16] = { 0 };
	struct rsd_simdev_access ok = { buf, 16, true, true, 0x11 };
	struct rsd_simdev_access null_ptr = { NULL, 16, false, false, 0 };
	struct rsd_simdev_access fill_read = { buf, 16, false, true, 0x11 };
	struct rsd_simdev_access wraps = { (void *)(UINTPTR_MAX - 8), 16, false, false, 0 };
	struct rsd_simdev_access empty = { NULL, 0, true, false, 0 };
	void *s = stream(sd, 0);
	int x;

	RSD_CHECK_ERR(RSD_ETYPE, rsd_simdev_launch_kernel(NULL, s, 1, &ok, 1, NULL, NULL));
	RSD_CHECK_ERR(RSD_ETYPE, rsd_simdev_launch_kernel(sd, NULL, 1, &ok, 1, NULL, NULL));
	RSD_CHECK_ERR(RSD_ETYPE, rsd_simdev_launch_kernel(sd, &x, 1, &ok, 1, NULL, NULL));
	ATF_CHECK(strstr(rsd_last_error()->message, "not a stream") != NULL);
	RSD_CHECK_ERR(RSD_ETYPE, rsd_simdev_launch_kernel(sd, s, 1, NULL, 2, NULL, NULL));
	RSD_CHECK_ERR(RSD_ETYPE, rsd_simdev_launch_kernel(sd, s, 1, &null_ptr, 1, NULL, NULL));
	ATF_CHECK(strstr(rsd_last_error()->message, "range 0 of 16 bytes has a NULL pointer") !=
		  NULL);
	RSD_CHECK_ERR(RSD_EINVAL, rsd_simdev_launch_kernel(sd, s, 1, &fill_read, 1, NULL, NULL));
	RSD_CHECK_ERR(RSD_EINVAL, rsd_simdev_launch_kernel(sd, s, 1, &wraps, 1, NULL, NULL));
	ATF_CHECK(strstr(rsd_last_error()->message, "past the end of the address space") != NULL);
	/* Nothing was queued: the stream runs nothing, buf is untouched. */
	rsd_simdev_stream_complete(sd, s);
	ATF_CHECK_EQ(buf[0], 0);
	/* An empty range names nothing; the array is copied at the launch. */
	{
		struct rsd_simdev_access acc[2] = { empty, ok };
		void *e;

		RSD_REQUIRE_OK(rsd_simdev_launch_kernel(sd, s, 1, acc, 2, NULL, NULL));
		memset(acc, 0, sizeof(acc));
		e = record(sd, s);
		rsd_simdev_stream_complete(sd, s);
		ATF_CHECK_EQ(S->event_query(sd, e), 1);
		ATF_CHECK_EQ(buf[15], 0x11);
		S->event_destroy(sd, e);
	}
	rsd_simdev_stream_destroy(sd, s);
	rsd_simdev_destroy(sd);
}

/* Polls ev for up to 10 s: 1 once complete, 0 if it never was. */
static int completes(struct rsd_simdev *sd, void *ev)
{
	for (int i = 0; i < 10000; i++) {
		if (rsd_simdev_ops()->event_query(sd, ev) == 1)
			return 1;
		usleep(1000);
	}
	return 0;
}

/*
 * In background mode a device's compute engine and its two copy directions
 * make progress independently, as a GPU's engines do: while the host-side
 * work of one (here a host function after a copy in, standing for a long
 * memmove) holds it, a kernel, a copy out and another device's copy in
 * still run and complete.
 */
ATF_TC_WITHOUT_HEAD(engines_progress_independently);
ATF_TC_BODY(engines_progress_independently, tc)
{
	const struct rsd_device_ops *S = rsd_simdev_ops();
	const struct rsd_location CUDA1 = { RSD_CUDA, 1 };
	struct rsd_simdev *sd = mk_mode(2, RSD_SIMDEV_BACKGROUND);
	void *in = stream(sd, 0), *cs = stream(sd, 0), *out = stream(sd, 0);
	void *in1 = stream(sd, 1), *ek, *eo, *e1, *eg;
	unsigned char *h = mem(sd, PINNED, 256), *d = mem(sd, CUDA0, 256);
	unsigned char *d1 = mem(sd, CUDA1, 64);
	struct gate g = GATE_INIT;

	memset(h, 0x3a, 64);
	memset(d + 128, 0x4b, 64);
	/* cuda:0's copies in are held behind the gate. */
	RSD_REQUIRE_OK(S->copy(sd, d, CUDA0, h, PINNED, 64, in));
	RSD_REQUIRE_OK(rsd_simdev_launch_host_func(sd, in, gate_hold, &g));
	eg = record(sd, in);
	gate_wait_entered(&g);
	RSD_REQUIRE_OK(rsd_simdev_launch_kernel(sd, cs, 1000, NULL, 0, NULL, NULL));
	ek = record(sd, cs);
	RSD_REQUIRE_OK(S->copy(sd, h + 128, PINNED, d + 128, CUDA0, 64, out));
	eo = record(sd, out);
	RSD_REQUIRE_OK(S->copy(sd, d1, CUDA1, h, PINNED, 64, in1));
	e1 = record(sd, in1);
	ATF_CHECK_EQ_MSG(completes(sd, ek), 1, "the kernel waited for the copy engine");
	ATF_CHECK_EQ_MSG(completes(sd, eo), 1, "the copy out waited for the copy in");
	ATF_CHECK_EQ_MSG(completes(sd, e1), 1, "cuda:1 waited for cuda:0");
	ATF_CHECK_EQ(S->event_query(sd, eg), 0);
	ATF_CHECK_EQ(h[128], 0x4b);
	ATF_CHECK_EQ(d1[63], 0x3a);
	gate_open(&g);
	RSD_REQUIRE_OK(S->event_sync(sd, eg));
	ATF_CHECK_EQ(d[63], 0x3a);
	S->event_destroy(sd, ek);
	S->event_destroy(sd, eo);
	S->event_destroy(sd, e1);
	S->event_destroy(sd, eg);
	S->free(sd, PINNED, h, 256);
	S->free(sd, CUDA0, d, 256);
	S->free(sd, CUDA1, d1, 64);
	rsd_simdev_stream_destroy(sd, in);
	rsd_simdev_stream_destroy(sd, cs);
	rsd_simdev_stream_destroy(sd, out);
	rsd_simdev_stream_destroy(sd, in1);
	rsd_simdev_destroy(sd);
}

static void sleep_300ms(void *arg)
{
	struct timespec ts = { 0, 300 * 1000000L };

	(void)arg;
	nanosleep(&ts, NULL);
}

/*
 * With the link model, the item after a kernel starts when that kernel
 * ends in the model, not when the simulator's worker is done with it: a
 * GPU has no host between two items of a stream. Kernel A (10 ms) has a
 * function that takes 300 ms of the worker's real time; kernel B (300 ms)
 * queued behind it ends 310 ms after the start in the model, which has
 * passed when A's function returns. Timed from the wake-up instead, B
 * would end at 610 ms or later.
 */
ATF_TC_WITHOUT_HEAD(next_item_starts_at_the_modelled_end);
ATF_TC_BODY(next_item_starts_at_the_modelled_end, tc)
{
	const struct rsd_device_ops *S = rsd_simdev_ops();
	struct rsd_simdev_config c = { .ndevices = 1,
				       .pooled = true,
				       .links = true,
				       .time_scale = 1,
				       .progress = RSD_SIMDEV_BACKGROUND };
	struct rsd_simdev *sd = mk(&c);
	void *a = stream(sd, 0), *eb;
	uint64_t t0, el;

	t0 = now_ns();
	RSD_REQUIRE_OK(rsd_simdev_launch_kernel(sd, a, 10 * MS, NULL, 0, sleep_300ms, NULL));
	RSD_REQUIRE_OK(rsd_simdev_launch_kernel(sd, a, 300 * MS, NULL, 0, NULL, NULL));
	eb = record(sd, a);
	RSD_REQUIRE_OK(S->event_sync(sd, eb));
	el = now_ns() - t0;
	ATF_CHECK_MSG(el >= 310 * MS, "two kernels ended after %llu ms, before 310",
		      (unsigned long long)(el / MS));
	ATF_CHECK_MSG(el < 560 * MS,
		      "kernel B ended %llu ms after the start: timed from the worker's "
		      "wake-up (610 ms), not from kernel A's modelled end (310 ms)",
		      (unsigned long long)(el / MS));
	S->event_destroy(sd, eb);
	rsd_simdev_stream_destroy(sd, a);
	rsd_simdev_destroy(sd);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, kernel_lasts_its_duration);
	ATF_TP_ADD_TC(tp, kernels_of_one_device_follow_one_another);
	ATF_TP_ADD_TC(tp, kernels_and_copies_overlap);
	ATF_TP_ADD_TC(tp, kernel_ordered_after_copy_reads_its_bytes);
	ATF_TP_ADD_TC(tp, stream_order_around_a_kernel);
	ATF_TP_ADD_TC(tp, launch_refuses_bad_arguments);
	ATF_TP_ADD_TC(tp, engines_progress_independently);
	ATF_TP_ADD_TC(tp, next_item_starts_at_the_modelled_end);
	return atf_no_error();
}
