// SPDX-License-Identifier: MIT
/*
 * The host driver: pinned memory that is really page-locked, served from a
 * pool that stops calling mmap/mlock once warm; a clean refusal of CUDA
 * locations, streams and events; memcpy between host locations; a clear
 * -RSD_ENOMEM when RLIMIT_MEMLOCK forbids locking; and a pinned allocation
 * that is verified, not trusted: pool memory whose lock was dropped is
 * refused with -RSD_EDEVICE.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <atf-c.h>
#include <linux/capability.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <rsd/rsd.h>

#include "../../lib/drivers/host.h"

static uint64_t vm_locked_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	unsigned long long kib = 0;

	ATF_REQUIRE(f != NULL);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmLck: %llu kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

static bool all_resident(void *p, size_t n)
{
	long pg = sysconf(_SC_PAGESIZE);
	uintptr_t start = (uintptr_t)p & ~(uintptr_t)(pg - 1);
	size_t len = (uintptr_t)p + n - start, npages = (len + (size_t)pg - 1) / (size_t)pg;
	unsigned char *vec = malloc(npages);
	bool ok = true;

	ATF_REQUIRE(vec != NULL);
	ATF_REQUIRE_EQ(mincore((void *)start, len, vec), 0);
	for (size_t i = 0; i < npages; i++)
		ok = ok && (vec[i] & 1);
	free(vec);
	return ok;
}

static const struct rsd_device_ops *H;

static void setup(void)
{
	H = rsd_host_driver();
	ATF_REQUIRE(H != NULL);
}

ATF_TC_WITHOUT_HEAD(no_cuda_devices);
ATF_TC_BODY(no_cuda_devices, tc)
{
	setup();
	ATF_CHECK_STREQ(H->name, "host");
	ATF_CHECK_EQ(H->device_count(NULL), 0);
}

ATF_TC_WITHOUT_HEAD(pinned_is_locked);
ATF_TC_BODY(pinned_is_locked, tc)
{
	uint64_t before, after;
	void *p = NULL;

	setup();
	before = vm_locked_kib();
	ATF_REQUIRE_EQ(H->alloc(NULL, RSD_LOC_PINNED_HOST, 1 << 20, &p), 0);
	ATF_REQUIRE(p != NULL);
	after = vm_locked_kib();
	/* The pool locked a whole chunk, not just the request. */
	ATF_CHECK_MSG(after - before >= RSD__HOST_CHUNK_SIZE / 1024, "VmLck grew by %llu kB",
		      (unsigned long long)(after - before));
	ATF_CHECK(all_resident(p, 1 << 20));
	memset(p, 0x5a, 1 << 20);
	H->free(NULL, RSD_LOC_PINNED_HOST, p, 1 << 20);
	ATF_CHECK_EQ(rsd__host_pool_trim(), 1);
	ATF_CHECK_EQ(vm_locked_kib(), before);
}

ATF_TC_WITHOUT_HEAD(pool_reuse_when_warm);
ATF_TC_BODY(pool_reuse_when_warm, tc)
{
	struct rsd__pool_stats st0, st;
	void *a, *b, *c;
	uint64_t locked;

	setup();
	ATF_REQUIRE_EQ(H->alloc(NULL, RSD_LOC_PINNED_HOST, 300000, &a), 0);
	rsd__host_pool_stats(&st0);
	ATF_CHECK_EQ(st0.allocated_bytes, 300000);
	locked = vm_locked_kib();
	H->free(NULL, RSD_LOC_PINNED_HOST, a, 300000);
	for (int i = 0; i < 100; i++) {
		ATF_REQUIRE_EQ(H->alloc(NULL, RSD_LOC_PINNED_HOST, 300000, &b), 0);
		ATF_REQUIRE_EQ(H->alloc(NULL, RSD_LOC_PINNED_HOST, 4096, &c), 0);
		ATF_CHECK_EQ((uintptr_t)c % 4096, 0);
		H->free(NULL, RSD_LOC_PINNED_HOST, b, 300000);
		H->free(NULL, RSD_LOC_PINNED_HOST, c, 4096);
	}
	rsd__host_pool_stats(&st);
	ATF_CHECK_EQ(st.chunk_allocs, st0.chunk_allocs);
	ATF_CHECK_EQ(st.chunk_frees, st0.chunk_frees);
	ATF_CHECK_EQ(st.nallocs, 0);
	ATF_CHECK_EQ(vm_locked_kib(), locked);
}

ATF_TC_WITHOUT_HEAD(large_request_own_chunk);
ATF_TC_BODY(large_request_own_chunk, tc)
{
	const uint64_t big = RSD__HOST_CHUNK_SIZE + 1;
	struct rsd__pool_stats st0, st;
	void *p;

	setup();
	rsd__host_pool_stats(&st0);
	ATF_REQUIRE_EQ(H->alloc(NULL, RSD_LOC_PINNED_HOST, big, &p), 0);
	rsd__host_pool_stats(&st);
	ATF_CHECK_EQ(st.chunk_allocs, st0.chunk_allocs + 1);
	ATF_CHECK_EQ(st.reserved_bytes - st0.reserved_bytes, RSD__HOST_CHUNK_SIZE + 4096);
	ATF_CHECK(all_resident(p, (size_t)big));
	H->free(NULL, RSD_LOC_PINNED_HOST, p, big);
	rsd__host_pool_stats(&st);
	ATF_CHECK_EQ(st.reserved_bytes, st0.reserved_bytes);
}

/* Drop CAP_IPC_LOCK from the effective set so RLIMIT_MEMLOCK applies. */
static void drop_ipc_lock(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2];

	ATF_REQUIRE_EQ(syscall(SYS_capget, &hdr, data), 0);
	data[CAP_IPC_LOCK / 32].effective &= ~(1u << (CAP_IPC_LOCK % 32));
	ATF_REQUIRE_EQ(syscall(SYS_capset, &hdr, data), 0);
}

ATF_TC_WITHOUT_HEAD(mlock_limit_enomem);
ATF_TC_BODY(mlock_limit_enomem, tc)
{
	struct rlimit rl = { 256 * 1024, 256 * 1024 };
	void *p = NULL, *q = NULL;

	setup();
	drop_ipc_lock();
	ATF_REQUIRE_EQ(setrlimit(RLIMIT_MEMLOCK, &rl), 0);
	/* Under the limit: the 64 MiB chunk cannot be locked, so the request
	 * gets a locked chunk of its own. */
	ATF_REQUIRE_EQ(H->alloc(NULL, RSD_LOC_PINNED_HOST, 64 * 1024, &p), 0);
	ATF_CHECK(all_resident(p, 64 * 1024));
	/* Over it: -RSD_ENOMEM naming mlock, errno and the limit. */
	ATF_CHECK_EQ(H->alloc(NULL, RSD_LOC_PINNED_HOST, 1 << 20, &q), -RSD_ENOMEM);
	ATF_CHECK_EQ(q, NULL);
	ATF_CHECK_EQ(rsd_last_error()->code, RSD_ENOMEM);
	ATF_CHECK_MSG(strstr(rsd_last_error()->message, "mlock of 1048576 bytes failed") &&
			      strstr(rsd_last_error()->message, "errno") &&
			      strstr(rsd_last_error()->message, "RLIMIT_MEMLOCK is 262144 bytes"),
		      "message: %s", rsd_last_error()->message);
	H->free(NULL, RSD_LOC_PINNED_HOST, p, 64 * 1024);
}

ATF_TC_WITHOUT_HEAD(alloc_rejects_other_locations);
ATF_TC_BODY(alloc_rejects_other_locations, tc)
{
	struct rsd_location cuda0 = { RSD_CUDA, 0 }, bad = { (enum rsd_location_kind)7, -1 };
	struct rsd_location cuda_bad = { RSD_CUDA, 500 };
	void *p = NULL;

	setup();
	ATF_CHECK_EQ(H->alloc(NULL, cuda0, 16, &p), -RSD_EINVAL);
	ATF_CHECK_EQ(rsd_last_error()->code, RSD_EINVAL);
	ATF_CHECK(strstr(rsd_last_error()->message, "cuda:0") != NULL);
	ATF_CHECK_EQ(H->alloc(NULL, RSD_LOC_PAGEABLE_HOST, 16, &p), -RSD_EINVAL);
	ATF_CHECK_EQ(H->alloc(NULL, bad, 16, &p), -RSD_ETYPE);
	ATF_CHECK_EQ(H->alloc(NULL, cuda_bad, 16, &p), -RSD_EINVAL);
	ATF_CHECK_EQ(H->alloc(NULL, RSD_LOC_PINNED_HOST, 16, NULL), -RSD_ETYPE);
	ATF_CHECK_EQ(p, NULL);
}

ATF_TC_WITHOUT_HEAD(copy_between_host_locations);
ATF_TC_BODY(copy_between_host_locations, tc)
{
	struct rsd_location cuda0 = { RSD_CUDA, 0 };
	char src[100], dst[100];
	void *pin;
	int not_a_stream;

	setup();
	for (int i = 0; i < 100; i++)
		src[i] = (char)i;
	ATF_REQUIRE_EQ(H->alloc(NULL, RSD_LOC_PINNED_HOST, 100, &pin), 0);
	ATF_REQUIRE_EQ(
		H->copy(NULL, pin, RSD_LOC_PINNED_HOST, src, RSD_LOC_PAGEABLE_HOST, 100, NULL), 0);
	memset(dst, 0, sizeof(dst));
	ATF_REQUIRE_EQ(
		H->copy(NULL, dst, RSD_LOC_PAGEABLE_HOST, pin, RSD_LOC_PINNED_HOST, 100, NULL), 0);
	ATF_CHECK_EQ(memcmp(src, dst, 100), 0);
	ATF_CHECK_EQ(H->copy(NULL, dst, RSD_LOC_PAGEABLE_HOST, pin, RSD_LOC_PINNED_HOST, 100,
			     &not_a_stream),
		     -RSD_ETYPE);
	ATF_CHECK_EQ(H->copy(NULL, dst, cuda0, pin, RSD_LOC_PINNED_HOST, 100, NULL), -RSD_EINVAL);
	ATF_CHECK_EQ(H->copy(NULL, dst, RSD_LOC_PAGEABLE_HOST, pin, cuda0, 100, NULL), -RSD_EINVAL);
	ATF_CHECK_EQ(H->copy(NULL, NULL, RSD_LOC_PAGEABLE_HOST, pin, RSD_LOC_PINNED_HOST, 100,
			     NULL),
		     -RSD_ETYPE);
	ATF_CHECK_EQ(H->copy(NULL, NULL, RSD_LOC_PAGEABLE_HOST, NULL, RSD_LOC_PINNED_HOST, 0, NULL),
		     0);
	H->free(NULL, RSD_LOC_PINNED_HOST, pin, 100);
}

ATF_TC_WITHOUT_HEAD(no_streams_or_events);
ATF_TC_BODY(no_streams_or_events, tc)
{
	uint64_t a = 1, r = 1;
	void *ev = (void *)1;
	int dev = -7, x;

	setup();
	ATF_CHECK_EQ(H->stream_device(NULL, &x, &dev), -RSD_ETYPE);
	ATF_CHECK_EQ(dev, -7);
	ATF_CHECK_EQ(H->default_stream(NULL, 0), NULL);
	ATF_CHECK_EQ(H->stream_sync(NULL, NULL), 0);
	ATF_CHECK_EQ(H->stream_sync(NULL, &x), -RSD_ETYPE);
	ATF_CHECK_EQ(H->device_sync(NULL, 0), -RSD_EDEVICE);
	ATF_CHECK(strstr(rsd_last_error()->message, "host driver") != NULL);
	ATF_CHECK_EQ(H->event_record(NULL, NULL, &ev), -RSD_EDEVICE);
	ATF_CHECK_EQ(ev, NULL);
	ATF_CHECK_EQ(H->event_query(NULL, &x), -RSD_ETYPE);
	ATF_CHECK_EQ(H->event_sync(NULL, &x), -RSD_ETYPE);
	H->event_destroy(NULL, &x);
	ATF_CHECK_EQ(H->metrics(NULL, 0, &a, &r), -RSD_EDEVICE);
	ATF_CHECK_EQ(rsd_last_error()->code, RSD_EDEVICE);
	ATF_CHECK(strstr(rsd_last_error()->message, "metrics") != NULL);
	ATF_CHECK_EQ(a, 1);
}

static void *thr_pinned(void *arg)
{
	(void)arg;
	for (int i = 0; i < 3000; i++) {
		void *p;
		uint64_t n = 1 + (uint64_t)(i % 7) * 5000;

		if (H->alloc(NULL, RSD_LOC_PINNED_HOST, n, &p))
			return (void *)1;
		memset(p, i, (size_t)n);
		H->free(NULL, RSD_LOC_PINNED_HOST, p, n);
	}
	return NULL;
}

ATF_TC_WITHOUT_HEAD(threads);
ATF_TC_BODY(threads, tc)
{
	struct rsd__pool_stats st;
	pthread_t t[4];
	void *ret;

	setup();
	for (int i = 0; i < 4; i++)
		ATF_REQUIRE_EQ(pthread_create(&t[i], NULL, thr_pinned, NULL), 0);
	for (int i = 0; i < 4; i++) {
		ATF_REQUIRE_EQ(pthread_join(t[i], &ret), 0);
		ATF_CHECK_EQ(ret, NULL);
	}
	rsd__host_pool_stats(&st);
	ATF_CHECK_EQ(st.nallocs, 0);
	/* Everything fit in the first chunk. */
	ATF_CHECK_EQ(st.chunk_allocs, 1);
}

/*
 * Pool memory whose lock was dropped behind the pool's back (munlock, then
 * MADV_DONTNEED so the pages leave memory) must not be handed out as
 * pinned: the driver's check finds a page not resident and the alloc fails
 * with -RSD_EDEVICE, returning nothing. Relocking the range makes the same
 * address acceptable again (which also shows the refused request was that
 * range).
 */
ATF_TC_WITHOUT_HEAD(unlocked_pool_memory_is_refused);
ATF_TC_BODY(unlocked_pool_memory_is_refused, tc)
{
	const struct rsd_device_ops *H = rsd_host_driver();
	const size_t n = 1 << 20;
	void *p = NULL, *q = (void *)1;
	int rc;

	rc = H->alloc(NULL, RSD_LOC_PINNED_HOST, n, &p);
	if (rc == -RSD_ENOMEM)
		atf_tc_skip("pinned memory cannot be locked here: %s", rsd_last_error()->message);
	ATF_REQUIRE_EQ(rc, 0);
	H->free(NULL, RSD_LOC_PINNED_HOST, p, n);
	ATF_REQUIRE_EQ(syscall(SYS_munlock, p, n), 0);
	ATF_REQUIRE_EQ(madvise(p, n, MADV_DONTNEED), 0);
	ATF_CHECK_EQ(H->alloc(NULL, RSD_LOC_PINNED_HOST, n, &q), -RSD_EDEVICE);
	ATF_CHECK_EQ(q, (void *)1);
	ATF_CHECK_EQ(rsd_last_error()->code, RSD_EDEVICE);
	ATF_CHECK_MSG(strstr(rsd_last_error()->message,
			     "pinned host storage is unavailable: host driver") != NULL,
		      "message: %s", rsd_last_error()->message);
	ATF_REQUIRE_EQ(syscall(SYS_mlock, p, n), 0);
	ATF_REQUIRE_EQ(H->alloc(NULL, RSD_LOC_PINNED_HOST, n, &q), 0);
	ATF_CHECK_EQ(q, p);
	ATF_CHECK(all_resident(q, n));
	H->free(NULL, RSD_LOC_PINNED_HOST, q, n);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, unlocked_pool_memory_is_refused);
	ATF_TP_ADD_TC(tp, no_cuda_devices);
	ATF_TP_ADD_TC(tp, pinned_is_locked);
	ATF_TP_ADD_TC(tp, pool_reuse_when_warm);
	ATF_TP_ADD_TC(tp, large_request_own_chunk);
	ATF_TP_ADD_TC(tp, mlock_limit_enomem);
	ATF_TP_ADD_TC(tp, alloc_rejects_other_locations);
	ATF_TP_ADD_TC(tp, copy_between_host_locations);
	ATF_TP_ADD_TC(tp, no_streams_or_events);
	ATF_TP_ADD_TC(tp, threads);
	return atf_no_error();
}
