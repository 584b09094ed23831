// SPDX-License-Identifier: MIT
/*
 * The host driver: pinned host memory without CUDA. "Pinned" here means
 * page-locked with mlock, which is what pinned memory is to the kernel; it
 * comes from one process-wide pool of 64 MiB chunks, so only pool growth
 * calls mmap and mlock. There are no CUDA devices, streams or events: every
 * copy is a synchronous memcpy between host locations.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../internal.h"
#include "host.h"

int rsd__driver_check_location(const char *driver, struct rsd_location at)
{
	char name[RSD_LOCATION_NAME_MAX];

	if (at.kind != RSD_PAGEABLE_HOST && at.kind != RSD_PINNED_HOST && at.kind != RSD_CUDA)
		return rsd__err(RSD_ETYPE, "%s: location kind %d is not a location kind", driver,
				(int)at.kind);
	if (!rsd_location_valid(at))
		return rsd__err(RSD_EINVAL, "%s: %s location with device %d is not valid", driver,
				at.kind == RSD_CUDA ? "cuda" :
						      rsd_location_name(at, name, sizeof(name)),
				at.device);
	return 0;
}

/* ---- the pinned check shared with the simulated device ---- */

int rsd__check_pinned(const char *driver, const void *ptr, uint64_t nbytes)
{
	unsigned char vec[4096];
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t lo = (uintptr_t)ptr & ~(page - 1);
	uintptr_t hi = (uintptr_t)ptr + (uintptr_t)(nbytes ? nbytes : 1);

	/* A locked page is resident: mlock faults every page in and keeps it
	 * there. So one page mincore reports not resident proves the range is
	 * not page-locked. Windows of 4096 pages keep the vector on the stack. */
	for (uintptr_t at = lo; at < hi; at += sizeof(vec) * page) {
		size_t len = hi - at < sizeof(vec) * page ? (size_t)(hi - at) : sizeof(vec) * page;
		size_t npages = (len + page - 1) / page;

		if (mincore((void *)at, len, vec) != 0) {
			int e = errno;

			return rsd__err(RSD_EDEVICE,
					"pinned host storage is unavailable: %s: mincore of %p "
					"failed: %s (errno %d)",
					driver, (void *)at, strerror(e), e);
		}
		for (size_t i = 0; i < npages; i++)
			if (!(vec[i] & 1))
				return rsd__err(RSD_EDEVICE,
						"pinned host storage is unavailable: %s: %" PRIu64
						" bytes at %p are not page-locked (page at %p is "
						"not resident)",
						driver, nbytes, ptr, (void *)(at + i * page));
	}
	return 0;
}

/* ---- chunk backings shared with the simulated device ---- */

static int anon_map(const char *what, uint64_t nbytes, void **base)
{
	void *p;

	if (nbytes > SIZE_MAX)
		return rsd__err(RSD_ENOMEM, "%s: %" PRIu64 " bytes exceed the address space", what,
				nbytes);
	p = mmap(NULL, (size_t)nbytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		int e = errno;

		return rsd__err(RSD_ENOMEM, "%s: mmap of %" PRIu64 " bytes failed: %s (errno %d)",
				what, nbytes, strerror(e), e);
	}
	*base = p;
	return 0;
}

static int locked_chunk_alloc(void *ctx, uint64_t nbytes, void **base)
{
	struct rlimit rl;
	char limit[32];
	void *p = NULL;
	int rc, e;

	(void)ctx;
	rc = anon_map("pinned host memory", nbytes, &p);
	if (rc)
		return rc;
	/* mlock also faults every page in: no first-touch cost later. The
	 * raw system call, because AddressSanitizer turns the libc mlock into
	 * a no-op and a sanitized build must lock for real too. */
	if (syscall(SYS_mlock, p, (size_t)nbytes) == 0) {
		*base = p;
		return 0;
	}
	e = errno;
	munmap(p, (size_t)nbytes);
	if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0)
		snprintf(limit, sizeof(limit), "unknown");
	else if (rl.rlim_cur == RLIM_INFINITY)
		snprintf(limit, sizeof(limit), "unlimited");
	else
		snprintf(limit, sizeof(limit), "%" PRIu64 " bytes", (uint64_t)rl.rlim_cur);
	return rsd__err(RSD_ENOMEM,
			"pinned host memory: mlock of %" PRIu64 " bytes failed: %s (errno %d); "
			"RLIMIT_MEMLOCK is %s",
			nbytes, strerror(e), e, limit);
}

static void unmap_chunk(void *ctx, void *base, uint64_t nbytes)
{
	(void)ctx;
	/* munmap drops the lock with the mapping. */
	munmap(base, (size_t)nbytes);
}

static int anon_chunk_alloc(void *ctx, uint64_t nbytes, void **base)
{
	(void)ctx;
	return anon_map("simulated device memory", nbytes, base);
}

const struct rsd__pool_ops rsd__locked_chunk_ops = {
	.chunk_alloc = locked_chunk_alloc,
	.chunk_free = unmap_chunk,
};

const struct rsd__pool_ops rsd__anon_chunk_ops = {
	.chunk_alloc = anon_chunk_alloc,
	.chunk_free = unmap_chunk,
};

/* ---- the host driver ---- */

static struct rsd__pool host_pool;
static pthread_once_t host_pool_once = PTHREAD_ONCE_INIT;

static void host_pool_init(void)
{
	rsd__pool_init(&host_pool, &rsd__locked_chunk_ops, NULL, RSD__HOST_CHUNK_SIZE,
		       RSD__PAGE_GRANULE);
}

static struct rsd__pool *host_pool_get(void)
{
	pthread_once(&host_pool_once, host_pool_init);
	return &host_pool;
}

void rsd__host_pool_stats(struct rsd__pool_stats *out)
{
	rsd__pool_stats(host_pool_get(), out);
}

unsigned rsd__host_pool_trim(void)
{
	return rsd__pool_trim(host_pool_get());
}

static int host_device_count(void *ctx)
{
	(void)ctx;
	return 0;
}

static int host_alloc(void *ctx, struct rsd_location at, uint64_t nbytes, void **ptr)
{
	void *p;
	int rc;

	(void)ctx;
	if (!ptr)
		return rsd__err(RSD_ETYPE,
				"host driver: alloc needs a pointer to store the address");
	rc = rsd__driver_check_location("host driver", at);
	if (rc)
		return rc;
	if (at.kind == RSD_CUDA)
		return rsd__err(RSD_EINVAL,
				"host driver: cannot allocate at cuda:%d: the host "
				"driver has no CUDA devices",
				at.device);
	if (at.kind == RSD_PAGEABLE_HOST)
		return rsd__err(RSD_EINVAL, "host driver: allocates pinned-host memory only, not "
					    "pageable-host");
	rc = rsd__pool_alloc(host_pool_get(), nbytes, &p);
	if (rc)
		return rc;
	/* Verified, not trusted: the chunk's lock may have been dropped. */
	rc = rsd__check_pinned("host driver", p, nbytes);
	if (rc) {
		rsd__pool_free(host_pool_get(), p);
		return rc;
	}
	*ptr = p;
	return 0;
}

static void host_free(void *ctx, struct rsd_location at, void *ptr, uint64_t nbytes)
{
	(void)ctx;
	(void)nbytes;
	if (!ptr || at.kind != RSD_PINNED_HOST)
		return;
	if (rsd__pool_free(host_pool_get(), ptr))
		fprintf(stderr,
			"librsd: host driver: free of %p, which is not live pinned memory "
			"of this driver\n",
			ptr);
}

static int host_copy(void *ctx, void *dst, struct rsd_location dst_at, const void *src,
		     struct rsd_location src_at, uint64_t nbytes, void *stream)
{
	int rc;

	(void)ctx;
	rc = rsd__driver_check_location("host driver", dst_at);
	if (!rc)
		rc = rsd__driver_check_location("host driver", src_at);
	if (rc)
		return rc;
	if (dst_at.kind == RSD_CUDA || src_at.kind == RSD_CUDA)
		return rsd__err(RSD_EINVAL,
				"host driver: cannot copy %s cuda:%d: the host driver "
				"has no CUDA devices",
				dst_at.kind == RSD_CUDA ? "to" : "from",
				dst_at.kind == RSD_CUDA ? dst_at.device : src_at.device);
	if (stream)
		return rsd__err(RSD_ETYPE,
				"host driver: %p is not a stream (the host driver has "
				"no streams)",
				stream);
	if (!nbytes)
		return 0;
	if (!dst || !src)
		return rsd__err(RSD_ETYPE, "host driver: copy of %" PRIu64 " bytes with a NULL %s",
				nbytes, dst ? "source" : "destination");
	memcpy(dst, src, (size_t)nbytes);
	return 0;
}

static int host_stream_device(void *ctx, void *stream, int *device)
{
	(void)ctx;
	(void)device;
	return rsd__err(RSD_ETYPE,
			"host driver: %p is not a stream (the host driver has no "
			"streams)",
			stream);
}

static void *host_default_stream(void *ctx, int device)
{
	(void)ctx;
	(void)device;
	return NULL;
}

static int host_stream_sync(void *ctx, void *stream)
{
	(void)ctx;
	/* NULL stands for "the transfer stream": host copies are synchronous. */
	if (!stream)
		return 0;
	return host_stream_device(ctx, stream, NULL);
}

static int host_device_sync(void *ctx, int device)
{
	(void)ctx;
	return rsd__err(RSD_EDEVICE,
			"host driver: no CUDA device %d to synchronize (the host "
			"driver has no CUDA devices)",
			device);
}

static int host_event_record(void *ctx, void *stream, void **event)
{
	(void)ctx;
	if (event)
		*event = NULL;
	return rsd__err(RSD_EDEVICE,
			"host driver: cannot record an event on %p: the host "
			"driver has no streams or events",
			stream);
}

static int host_event_query(void *ctx, void *event)
{
	(void)ctx;
	return rsd__err(RSD_ETYPE,
			"host driver: %p is not an event (the host driver has no "
			"events)",
			event);
}

static void host_event_destroy(void *ctx, void *event)
{
	(void)ctx;
	(void)event;
}

static int host_metrics(void *ctx, int device, uint64_t *allocated, uint64_t *reserved)
{
	(void)ctx;
	(void)allocated;
	(void)reserved;
	return rsd__err(RSD_EDEVICE,
			"host driver: no allocator metrics for device %d (the "
			"host driver has no CUDA devices)",
			device);
}

static const struct rsd_device_ops host_ops = {
	.name = "host",
	.device_count = host_device_count,
	.alloc = host_alloc,
	.free = host_free,
	.copy = host_copy,
	.stream_device = host_stream_device,
	.default_stream = host_default_stream,
	.stream_sync = host_stream_sync,
	.device_sync = host_device_sync,
	.event_record = host_event_record,
	.event_query = host_event_query,
	.event_sync = host_event_query,
	.event_destroy = host_event_destroy,
	.metrics = host_metrics,
};

const struct rsd_device_ops *rsd_host_driver(void)
{
	return &host_ops;
}
