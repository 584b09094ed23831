// SPDX-License-Identifier: MIT
/*
 * The CUDA runtime double (tests/cudasim) behaves like the runtime where
 * librsd depends on it: async copies take effect when their stream runs,
 * synchronization blocks until then, copies involving pageable memory
 * synchronize as documented, events are re-recorded and belong to a
 * device, timing events measure the time between two records, host functions run in stream order and may not call the
 * runtime, device memory is finite, and the last error is per thread with
 * sticky errors that cannot be cleared.
 *
 * Each case runs in its own process, so each starts a fresh double. Built
 * against a real runtime (CUDA=1) or without CUDA, every case skips.
 */
#include <atf-c.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rsd/rsd.h>

#ifndef RSD_CUDASIM
#define RSD_CUDASIM 0
#endif

#if RSD_CUDASIM
#include "../cudasim/cudasim.h"

#define N 4096

static void ok(int line, cudaError_t e, const char *what)
{
	if (e != cudaSuccess)
		atf_tc_fail("line %d: %s: %s (%s)", line, what, cudaGetErrorName(e),
			    cudaGetErrorString(e));
}
#define OK(call) ok(__LINE__, (call), #call)

static void sleep_ms(unsigned ms)
{
	struct timespec d = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&d, &d) && errno == EINTR)
		;
}

/* Queued work runs only when the test completes a stream. */
static struct rsd_simdev *on_command(void)
{
	struct rsd_simdev *sd = rsd_cudasim_simdev();

	ATF_REQUIRE(sd != NULL);
	ATF_REQUIRE_EQ(rsd_cudasim_set_progress(RSD_SIMDEV_ON_COMMAND, 0), cudaSuccess);
	return sd;
}

static void need_sim(void)
{
}
#else
static void need_sim(void)
{
	atf_tc_skip("needs the CUDA runtime double: make check CUDA=sim");
}
#endif

ATF_TC_WITHOUT_HEAD(async_copy_runs_with_its_stream);
ATF_TC_BODY(async_copy_runs_with_its_stream, tc)
{
	need_sim();
#if RSD_CUDASIM
	struct rsd_simdev *sd = on_command();
	unsigned char *src, *back;
	cudaStream_t s;
	void *d;

	OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	OK(cudaMalloc(&d, N));
	OK(cudaHostAlloc((void **)&src, N, cudaHostAllocPortable));
	OK(cudaHostAlloc((void **)&back, N, cudaHostAllocPortable));
	memset(src, 0xa5, N);
	memset(back, 0x11, N);
	OK(cudaMemcpyAsync(d, src, N, cudaMemcpyHostToDevice, s));
	OK(cudaMemcpyAsync(back, d, N, cudaMemcpyDeviceToHost, s));
	/* Queued, not run: the destination keeps its old bytes. */
	ATF_CHECK_EQ(back[0], 0x11);
	ATF_CHECK_EQ(back[N - 1], 0x11);
	ATF_CHECK_EQ(cudaStreamQuery(s), cudaErrorNotReady);
	/* NotReady is a status, not an error. */
	ATF_CHECK_EQ(cudaPeekAtLastError(), cudaSuccess);
	rsd_simdev_stream_complete(sd, s);
	ATF_CHECK_EQ(cudaStreamQuery(s), cudaSuccess);
	ATF_CHECK_EQ(back[0], 0xa5);
	ATF_CHECK_EQ(back[N - 1], 0xa5);
	OK(cudaFreeHost(src));
	OK(cudaFreeHost(back));
	OK(cudaFree(d));
	OK(cudaStreamDestroy(s));
#endif
}

#if RSD_CUDASIM
struct completer {
	struct rsd_simdev *sd;
	cudaStream_t s;
	atomic_bool completed;
};

static void *complete_later(void *arg)
{
	struct completer *c = arg;

	sleep_ms(200);
	atomic_store(&c->completed, true);
	rsd_simdev_stream_complete(c->sd, c->s);
	return NULL;
}
#endif

ATF_TC_WITHOUT_HEAD(synchronize_blocks_until_the_stream_runs);
ATF_TC_BODY(synchronize_blocks_until_the_stream_runs, tc)
{
	need_sim();
#if RSD_CUDASIM
	struct completer c = { .sd = on_command() };
	unsigned char *src, *back;
	cudaEvent_t ev;
	pthread_t t;
	void *d;

	OK(cudaStreamCreateWithFlags(&c.s, cudaStreamNonBlocking));
	OK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
	OK(cudaMalloc(&d, N));
	OK(cudaHostAlloc((void **)&src, N, 0));
	OK(cudaHostAlloc((void **)&back, N, 0));
	memset(src, 7, N);
	memset(back, 0, N);
	OK(cudaMemcpyAsync(d, src, N, cudaMemcpyDefault, c.s));
	OK(cudaMemcpyAsync(back, d, N, cudaMemcpyDefault, c.s));
	OK(cudaEventRecord(ev, c.s));
	ATF_CHECK_EQ(cudaEventQuery(ev), cudaErrorNotReady);
	ATF_REQUIRE_EQ(pthread_create(&t, NULL, complete_later, &c), 0);
	OK(cudaStreamSynchronize(c.s));
	ATF_CHECK_MSG(atomic_load(&c.completed),
		      "cudaStreamSynchronize returned before the stream ran");
	ATF_CHECK_EQ(back[N / 2], 7);
	ATF_CHECK_EQ(cudaEventQuery(ev), cudaSuccess);
	ATF_REQUIRE_EQ(pthread_join(t, NULL), 0);

	/* Re-recorded: pending again, and cudaEventSynchronize waits too. */
	OK(cudaMemcpyAsync(back, d, N, cudaMemcpyDefault, c.s));
	OK(cudaEventRecord(ev, c.s));
	ATF_CHECK_EQ(cudaEventQuery(ev), cudaErrorNotReady);
	atomic_store(&c.completed, false);
	ATF_REQUIRE_EQ(pthread_create(&t, NULL, complete_later, &c), 0);
	OK(cudaEventSynchronize(ev));
	ATF_CHECK_MSG(atomic_load(&c.completed),
		      "cudaEventSynchronize returned before the stream ran");
	ATF_REQUIRE_EQ(pthread_join(t, NULL), 0);
	OK(cudaEventDestroy(ev));
	ATF_CHECK_EQ(cudaEventQuery(ev), cudaErrorInvalidResourceHandle);
	(void)cudaGetLastError();
	OK(cudaFreeHost(src));
	OK(cudaFreeHost(back));
	OK(cudaFree(d));
	OK(cudaStreamDestroy(c.s));
#endif
}

ATF_TC_WITHOUT_HEAD(pageable_copies_synchronize_as_documented);
ATF_TC_BODY(pageable_copies_synchronize_as_documented, tc)
{
	need_sim();
#if RSD_CUDASIM
	struct rsd_simdev *sd = rsd_cudasim_simdev();
	unsigned char *page = malloc(N), *back = malloc(N);
	cudaStream_t s;
	void *d;

	ATF_REQUIRE(page && back && sd);
	/* Background progress with a long delay: nothing runs at once. */
	ATF_REQUIRE_EQ(rsd_cudasim_set_progress(RSD_SIMDEV_BACKGROUND, 20 * 1000 * 1000),
		       cudaSuccess);
	OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	OK(cudaMalloc(&d, N));
	/* Pageable -> device: the source is read (staged) during the call,
	 * so it may be reused as soon as the call returns. */
	memset(page, 0x3c, N);
	OK(cudaMemcpyAsync(d, page, N, cudaMemcpyHostToDevice, s));
	memset(page, 0, N);
	/* Device -> pageable: returns once the copy is done. */
	memset(back, 0, N);
	OK(cudaMemcpyAsync(back, d, N, cudaMemcpyDeviceToHost, s));
	ATF_CHECK_EQ(back[0], 0x3c);
	ATF_CHECK_EQ(back[N - 1], 0x3c);
	ATF_CHECK_EQ(cudaStreamQuery(s), cudaSuccess);
	/* A copy past the end of an allocation is refused. */
	ATF_CHECK_EQ(cudaMemcpyAsync(back, (char *)d + 1, N, cudaMemcpyDeviceToHost, s),
		     cudaErrorInvalidValue);
	/* So is a direction that contradicts the pointers. */
	ATF_CHECK_EQ(cudaMemcpyAsync(back, d, N, cudaMemcpyHostToDevice, s), cudaErrorInvalidValue);
	ATF_CHECK_EQ(cudaGetLastError(), cudaErrorInvalidValue);
	ATF_CHECK_EQ(cudaGetLastError(), cudaSuccess);
	OK(cudaFree(d));
	OK(cudaStreamDestroy(s));
	free(page);
	free(back);
#endif
}

ATF_TC_WITHOUT_HEAD(errors_last_error_and_sticky);
ATF_TC_BODY(errors_last_error_and_sticky, tc)
{
	need_sim();
#if RSD_CUDASIM
	size_t fr, total;
	void *d = (void *)1;
	int dev = -1;

	/* Non-sticky: returned once, kept by Peek, cleared by Get. */
	ATF_REQUIRE_EQ(rsd_cudasim_fail("cudaMalloc", 2, cudaErrorMemoryAllocation), cudaSuccess);
	OK(cudaMalloc(&d, 64));
	OK(cudaFree(d));
	d = (void *)1;
	ATF_CHECK_EQ(cudaMalloc(&d, 64), cudaErrorMemoryAllocation);
	ATF_CHECK_EQ(d, (void *)1);
	ATF_CHECK_EQ(cudaPeekAtLastError(), cudaErrorMemoryAllocation);
	ATF_CHECK_EQ(cudaPeekAtLastError(), cudaErrorMemoryAllocation);
	OK(cudaGetDevice(&dev)); /* a success does not clear it */
	ATF_CHECK_EQ(cudaGetLastError(), cudaErrorMemoryAllocation);
	ATF_CHECK_EQ(cudaGetLastError(), cudaSuccess);
	ATF_CHECK_EQ(rsd_cudasim_calls("cudaMalloc"), 2);
	ATF_CHECK_EQ(rsd_cudasim_fail("cudaNoSuchCall", 1, cudaErrorUnknown),
		     cudaErrorInvalidValue);
	ATF_CHECK_STREQ(cudaGetErrorName(cudaErrorMemoryAllocation), "cudaErrorMemoryAllocation");
	ATF_CHECK_STREQ(cudaGetErrorString(cudaErrorMemoryAllocation), "out of memory");

	/* Sticky: the context is corrupted for good. */
	ATF_REQUIRE_EQ(rsd_cudasim_fail("cudaMemGetInfo", 1, cudaErrorIllegalAddress), cudaSuccess);
	ATF_CHECK_EQ(cudaMemGetInfo(&fr, &total), cudaErrorIllegalAddress);
	ATF_CHECK_EQ(cudaGetLastError(), cudaErrorIllegalAddress);
	ATF_CHECK_EQ(cudaGetLastError(), cudaErrorIllegalAddress);
	ATF_CHECK_EQ(cudaGetDevice(&dev), cudaErrorIllegalAddress);
	ATF_CHECK_EQ(cudaMalloc(&d, 64), cudaErrorIllegalAddress);
	ATF_CHECK_EQ(cudaPeekAtLastError(), cudaErrorIllegalAddress);
#endif
}

#if RSD_CUDASIM
static void *fail_in_thread(void *arg)
{
	(void)arg;
	(void)cudaSetDevice(1000);
	return (void *)(intptr_t)cudaPeekAtLastError();
}

struct host_call {
	cudaError_t inner;
	int ran;
};

static void host_fn(void *arg)
{
	struct host_call *h = arg;
	int dev;

	h->inner = cudaGetDevice(&dev);
	h->ran++;
}
#endif

ATF_TC_WITHOUT_HEAD(devices_events_and_host_functions);
ATF_TC_BODY(devices_events_and_host_functions, tc)
{
	need_sim();
#if RSD_CUDASIM
	struct rsd_simdev *sd;
	struct cudaPointerAttributes at;
	struct host_call h = { cudaSuccess, 0 };
	cudaStream_t s0, s1;
	cudaEvent_t e0;
	size_t fr, total;
	void *d1, *ret;
	char local[8];
	int n = 0, dev = -1;
	pthread_t t;

	ATF_REQUIRE_EQ(rsd_cudasim_configure(2, 1 << 20), cudaSuccess);
	sd = on_command();
	ATF_CHECK_EQ(rsd_cudasim_configure(3, 0), cudaErrorSetOnActiveProcess);
	OK(cudaGetDeviceCount(&n));
	ATF_CHECK_EQ(n, 2);
	ATF_CHECK_EQ(cudaSetDevice(2), cudaErrorInvalidDevice);
	ATF_CHECK_EQ(cudaGetLastError(), cudaErrorInvalidDevice);

	/* The last error is the thread's own. */
	ATF_REQUIRE_EQ(pthread_create(&t, NULL, fail_in_thread, NULL), 0);
	ATF_REQUIRE_EQ(pthread_join(t, &ret), 0);
	ATF_CHECK_EQ((cudaError_t)(intptr_t)ret, cudaErrorInvalidDevice);
	ATF_CHECK_EQ(cudaPeekAtLastError(), cudaSuccess);

	/* Device memory is finite and per device; the device is per thread. */
	OK(cudaStreamCreate(&s0));
	OK(cudaEventCreate(&e0));
	OK(cudaSetDevice(1));
	OK(cudaStreamCreate(&s1));
	OK(cudaMalloc(&d1, 768 << 10));
	OK(cudaMemGetInfo(&fr, &total));
	ATF_CHECK_EQ(total, 1 << 20);
	ATF_CHECK_EQ(fr, 256 << 10);
	ATF_CHECK_EQ(cudaMalloc(&ret, 512 << 10), cudaErrorMemoryAllocation);
	(void)cudaGetLastError();
	OK(cudaPointerGetAttributes(&at, d1));
	ATF_CHECK_EQ(at.type, cudaMemoryTypeDevice);
	ATF_CHECK_EQ(at.device, 1);
	OK(cudaPointerGetAttributes(&at, local));
	ATF_CHECK_EQ(at.type, cudaMemoryTypeUnregistered);
	OK(cudaStreamGetDevice(s1, &dev));
	ATF_CHECK_EQ(dev, 1);
	ATF_CHECK_EQ(cudaStreamGetDevice((cudaStream_t)local, &dev),
		     cudaErrorInvalidResourceHandle);
	(void)cudaGetLastError();

	/* An event of device 0 cannot be recorded on device 1's stream. */
	ATF_CHECK_EQ(cudaEventRecord(e0, s1), cudaErrorInvalidResourceHandle);
	(void)cudaGetLastError();
	OK(cudaEventRecord(e0, s0));

	/* Host functions run in stream order and may not call the runtime. */
	OK(cudaLaunchHostFunc(s1, host_fn, &h));
	ATF_CHECK_EQ(h.ran, 0);
	rsd_simdev_stream_complete(sd, s1);
	ATF_CHECK_EQ(h.ran, 1);
	ATF_CHECK_EQ(h.inner, cudaErrorNotPermitted);
	ATF_CHECK_EQ(cudaPeekAtLastError(), cudaSuccess);

	/* Unpinned mode: "pinned" memory the runtime does not know. */
	rsd_cudasim_set_unpinned_host(true);
	OK(cudaHostAlloc(&ret, 4096, cudaHostAllocPortable));
	OK(cudaPointerGetAttributes(&at, ret));
	ATF_CHECK_EQ(at.type, cudaMemoryTypeUnregistered);
	OK(cudaFreeHost(ret));
	rsd_cudasim_set_unpinned_host(false);
	OK(cudaHostAlloc(&ret, 4096, cudaHostAllocPortable));
	OK(cudaPointerGetAttributes(&at, (char *)ret + 100));
	ATF_CHECK_EQ(at.type, cudaMemoryTypeHost);
	ATF_CHECK_EQ(at.hostPointer, (char *)ret + 100);
	OK(cudaFreeHost(ret));
	ATF_CHECK_EQ(cudaFreeHost(local), cudaErrorInvalidValue);
	(void)cudaGetLastError();

	OK(cudaFree(d1));
	OK(cudaStreamDestroy(s1));
	OK(cudaSetDevice(0));
	rsd_simdev_complete_all(sd);
	OK(cudaEventSynchronize(e0));
	OK(cudaEventDestroy(e0));
	OK(cudaStreamDestroy(s0));
	ATF_CHECK_EQ(cudaStreamDestroy(s0), cudaErrorInvalidResourceHandle);
#endif
}

#if RSD_CUDASIM
/* Stands for GPU work between two records: 30 ms on the stream. */
static void busy_30ms(void *arg)
{
	(void)arg;
	sleep_ms(30);
}
#endif

ATF_TC_WITHOUT_HEAD(elapsed_time_between_records);
ATF_TC_BODY(elapsed_time_between_records, tc)
{
	need_sim();
#if RSD_CUDASIM
	struct rsd_simdev *sd;
	cudaEvent_t a, b, untimed;
	cudaStream_t s;
	float ms = -1;

	ATF_REQUIRE_EQ(rsd_cudasim_configure(1, 1 << 20), cudaSuccess);
	sd = on_command();
	OK(cudaStreamCreate(&s));
	OK(cudaEventCreate(&a));
	OK(cudaEventCreate(&b));
	OK(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming));

	OK(cudaEventRecord(a, s));
	/* b never recorded: no time to give. */
	ATF_CHECK_EQ(cudaEventElapsedTime(&ms, a, b), cudaErrorInvalidResourceHandle);
	(void)cudaGetLastError();
	OK(cudaLaunchHostFunc(s, busy_30ms, NULL));
	OK(cudaEventRecord(b, s));
	OK(cudaEventRecord(untimed, s));
	/* Both recorded, the stream not run: not ready, ms untouched. */
	ATF_CHECK_EQ(cudaEventElapsedTime(&ms, a, b), cudaErrorNotReady);
	(void)cudaGetLastError();
	ATF_CHECK_EQ(ms, -1);
	rsd_simdev_stream_complete(sd, s);
	OK(cudaEventElapsedTime(&ms, a, b));
	ATF_CHECK_MSG(ms >= 30 && ms < 2000, "elapsed %f ms for 30 ms of work", (double)ms);
	OK(cudaEventElapsedTime(&ms, b, a));
	ATF_CHECK_MSG(ms <= -30, "elapsed %f ms backwards", (double)ms);
	/* An event made without timing has none; nor does a NULL result. */
	ATF_CHECK_EQ(cudaEventElapsedTime(&ms, a, untimed), cudaErrorInvalidResourceHandle);
	(void)cudaGetLastError();
	ATF_CHECK_EQ(cudaEventElapsedTime(NULL, a, b), cudaErrorInvalidValue);
	(void)cudaGetLastError();
	OK(cudaEventDestroy(untimed));
	OK(cudaEventDestroy(b));
	OK(cudaEventDestroy(a));
	OK(cudaStreamDestroy(s));
#endif
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, async_copy_runs_with_its_stream);
	ATF_TP_ADD_TC(tp, synchronize_blocks_until_the_stream_runs);
	ATF_TP_ADD_TC(tp, pageable_copies_synchronize_as_documented);
	ATF_TP_ADD_TC(tp, errors_last_error_and_sticky);
	ATF_TP_ADD_TC(tp, devices_events_and_host_functions);
	ATF_TP_ADD_TC(tp, elapsed_time_between_records);
	return atf_no_error();
}
