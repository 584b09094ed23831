// SPDX-License-Identifier: MIT
/*
 * The CUDA runtime driver. Device memory comes from a per-device pool of
 * cudaMalloc'ed chunks and pinned host memory from a pool of anonymous
 * mappings registered with cudaHostRegister, so a warm pool serves
 * transitions without either call; blocks
 * larger than a chunk are kept for reuse within a byte bound per pool
 * (RSD_CUDA_OVERSIZE_KEEP), so a steady stream of large values does not
 * call cudaMalloc and cudaFree (which may synchronize the device) per
 * transition. Copies go on the caller's stream or on the driver's own
 * non-blocking transfer streams: the device's default one (what a NULL
 * stream means), one per direction (transfer_stream: H2D, D2H) so the two
 * copy engines of a device overlap, and one per ordered device pair. Peer
 * access is enabled, where cudaDeviceCanAccessPeer allows, once per pair at
 * its first peer copy or transfer stream, so peer copies take the direct
 * link instead of bouncing through host memory. Events come from
 * per-device free lists. Gates, for librsd's staging workers, are host
 * functions that wait until opened (cuda_gate.c).
 *
 * A device whose context takes a sticky error (an illegal address, an
 * uncorrectable ECC error) is marked lost, found by asking each device's
 * context after such an error; from then on every op on it fails with
 * RSD_EDEVLOST without calling the runtime, and nothing is freed there.
 *
 * A machine without a usable GPU (no device, or a driver too old for the
 * runtime) reports zero devices: the first cudaGetDeviceCount error is kept
 * and quoted by every later failure. Built with RSD_HAVE_CUDA=0, the same
 * table reports zero devices and refuses everything else.
 *
 * This file holds the devices and their contexts (start-up, lost devices,
 * the failures of runtime calls) and memory (the pools), and the ops
 * table; streams and events are in cuda_stream.c, gates in cuda_gate.c,
 * copies in cuda_copy.c, and what they share in cuda_internal.h, which
 * also says how the driver is locked.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../internal.h"
#include "cuda_internal.h"
#include "host.h"
#include "pool.h"

bool rsd_cuda_built(void)
{
	return RSD_HAVE_CUDA;
}

#if RSD_HAVE_CUDA
#include <sys/mman.h>

#include "cuda_sticky.h"

/* Oversize blocks kept per pool unless RSD_CUDA_OVERSIZE_KEEP says. */
#define CUDA_OVERSIZE_KEEP (1ull << 30)

struct cuda_state cuda = { .once = PTHREAD_ONCE_INIT, .lock = PTHREAD_MUTEX_INITIALIZER };

bool cuda_dev_lost(int device)
{
	return device >= 0 && device < cuda.ndevices && atomic_load(&cuda.dev[device].lost);
}

/*
 * After a sticky error, which contexts are dead? The error does not say, so
 * every device not yet lost is asked with a cheap call bound to its context
 * (cudaMemGetInfo): one that fails with a sticky error is marked lost. Raw
 * runtime calls only (a failure here must not come back through
 * cuda_fail); the caller's device is restored. Only ever runs on a failure.
 */
static void probe_lost(void)
{
	bool restore;
	int prev = 0;

	restore = cudaGetDevice(&prev) == cudaSuccess;
	for (int i = 0; i < cuda.ndevices; i++) {
		size_t fr, tot;
		cudaError_t e;

		if (atomic_load(&cuda.dev[i].lost))
			continue;
		e = cudaSetDevice(i);
		if (e == cudaSuccess)
			e = cudaMemGetInfo(&fr, &tot);
		if (rsd__cuda_is_sticky(e))
			atomic_store(&cuda.dev[i].lost, true);
	}
	if (restore)
		(void)cudaSetDevice(prev);
	(void)cudaGetLastError();
}

/* The lost devices, "cuda:0, cuda:2", into buf; false when none. */
static bool lost_names(char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = 0;
	for (int i = 0; i < cuda.ndevices && n < len; i++)
		if (atomic_load(&cuda.dev[i].lost))
			n += (size_t)snprintf(buf + n, len - n, "%scuda:%d", n ? ", " : "", i);
	return n > 0;
}

/* Record a failed CUDA call; clears the runtime's last error so that the
 * caller's own cudaGetLastError() is not confused by ours. The runtime out
 * of memory is an allocation failure (RSD_ENOMEM); a sticky error that left
 * a device's context dead is RSD_EDEVLOST, naming the lost devices; anything
 * else a device failure (RSD_EDEVICE). */
int cuda_fail(const char *call, cudaError_t e)
{
	char lost[160];

	(void)cudaGetLastError();
	if (rsd__cuda_is_sticky(e)) {
		probe_lost();
		if (lost_names(lost, sizeof(lost)))
			return rsd__err(
				RSD_EDEVLOST,
				"CUDA driver: %s failed: %s (%s, error %d), a sticky error: "
				"lost %s (every later call in its context fails)",
				call, cudaGetErrorString(e), cudaGetErrorName(e), (int)e, lost);
	}
	return rsd__err(e == cudaErrorMemoryAllocation ? RSD_ENOMEM : RSD_EDEVICE,
			"CUDA driver: %s failed: %s (%s, error %d)", call, cudaGetErrorString(e),
			cudaGetErrorName(e), (int)e);
}

/* 0, or -RSD_EDEVLOST (recorded) when device is lost: nothing is asked of
 * the runtime in a dead context. */
int cuda_check_lost(const char *op, int device)
{
	if (!cuda_dev_lost(device))
		return 0;
	return rsd__err(RSD_EDEVLOST,
			"CUDA driver: %s: cuda:%d was lost to a sticky error (every call in "
			"its context fails)",
			op, device);
}

int cuda_check_lost_at(const char *op, struct rsd_location at)
{
	return at.kind == RSD_CUDA ? cuda_check_lost(op, at.device) : 0;
}

/* Make device current, remembering the caller's device to restore. */
int cuda_device_enter(int device, int *prev)
{
	cudaError_t e = cudaGetDevice(prev);

	if (e != cudaSuccess)
		return cuda_fail("cudaGetDevice", e);
	if (*prev == device)
		return 0;
	e = cudaSetDevice(device);
	return e == cudaSuccess ? 0 : cuda_fail("cudaSetDevice", e);
}

void cuda_device_leave(int device, int prev)
{
	if (prev != device)
		(void)cudaSetDevice(prev);
}

static int dev_chunk_alloc(void *ctx, uint64_t nbytes, void **base)
{
	struct cuda_dev *d = ctx;
	char what[64];
	cudaError_t e;
	int prev, rc;

	rc = cuda_device_enter(d->index, &prev);
	if (rc)
		return rc;
	e = cudaMalloc(base, (size_t)nbytes);
	cuda_device_leave(d->index, prev);
	if (e == cudaSuccess)
		return 0;
	snprintf(what, sizeof(what), "cudaMalloc(%" PRIu64 ") on cuda:%d", nbytes, d->index);
	return cuda_fail(what, e);
}

static void dev_chunk_free(void *ctx, void *base, uint64_t nbytes)
{
	struct cuda_dev *d = ctx;

	(void)nbytes;
	/* Never cudaFree in a dead context: the chunk is leaked. */
	if (atomic_load(&d->lost))
		return;
	(void)cudaFree(base);
}

static const char *memory_type_name(enum cudaMemoryType t)
{
	switch (t) {
	case cudaMemoryTypeUnregistered:
		return "unregistered (pageable)";
	case cudaMemoryTypeHost:
		return "host";
	case cudaMemoryTypeDevice:
		return "device";
	case cudaMemoryTypeManaged:
		return "managed";
	default:
		return "unknown";
	}
}

/*
 * Pinned memory is verified, not trusted: a chunk the runtime does not
 * report as page-locked host memory is given back and the allocation fails
 * (copies from it would be neither asynchronous nor safe to overlap).
 */
static int pinned_check(void *p, uint64_t nbytes)
{
	struct cudaPointerAttributes attr;
	cudaError_t e;

	memset(&attr, 0, sizeof(attr));
	e = cudaPointerGetAttributes(&attr, p);
	if (e != cudaSuccess) {
		(void)cudaGetLastError();
		return rsd__err(RSD_EDEVICE,
				"pinned host storage is unavailable: cudaPointerGetAttributes of "
				"the %" PRIu64
				"-byte cudaHostRegister block %p failed: %s (%s, error %d)",
				nbytes, p, cudaGetErrorString(e), cudaGetErrorName(e), (int)e);
	}
	if (attr.type == cudaMemoryTypeHost)
		return 0;
	return rsd__err(RSD_EDEVICE,
			"pinned host storage is unavailable: cudaHostRegister(%" PRIu64 ") of "
			"%p succeeded, but the runtime reports it as %s memory, not page-locked "
			"host memory",
			nbytes, p, memory_type_name(attr.type));
}

/* Register p in the first sound device's context (portable: copies to and
 * from every device see it as pinned); the calling thread's device is
 * restored. */
static cudaError_t register_sound(void *p, uint64_t nbytes)
{
	cudaError_t e = cudaErrorNoDevice;
	int prev;

	for (int i = 0; i < cuda.ndevices; i++) {
		if (cuda_dev_lost(i) || cuda_device_enter(i, &prev))
			continue;
		e = cudaHostRegister(p, (size_t)nbytes, cudaHostRegisterPortable);
		cuda_device_leave(i, prev);
		if (e == cudaSuccess || !rsd__cuda_is_sticky(e))
			return e;
		(void)cuda_fail("cudaHostRegister", e); /* marks it lost */
	}
	return e;
}

/*
 * Pinned memory is the driver's own anonymous memory, page-locked and
 * registered with the runtime, not a cudaHostAlloc block: such a block
 * belongs to the context that was current and dies with it (cudaFreeHost
 * fails in a lost context, a reset frees it), while a registration only
 * maps memory that stays ours, so host copies stay readable after a
 * device's context is lost and are unmapped whatever the runtime says.
 * Registration takes the calling thread's context, or a sound device's
 * when that one is lost.
 */
static int pinned_chunk_alloc(void *ctx, uint64_t nbytes, void **base)
{
	char what[80];
	cudaError_t e;
	void *p;
	int rc;

	(void)ctx;
	p = mmap(NULL, (size_t)nbytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return rsd__err(RSD_ENOMEM,
				"CUDA driver: mmap of %" PRIu64 " bytes for pinned "
				"memory failed: %s",
				nbytes, strerror(errno));
	e = cudaHostRegister(p, (size_t)nbytes, cudaHostRegisterPortable);
	if (rsd__cuda_is_sticky(e)) {
		(void)cuda_fail("cudaHostRegister", e);
		e = register_sound(p, nbytes);
	}
	if (e != cudaSuccess) {
		snprintf(what, sizeof(what), "cudaHostRegister(%" PRIu64 ")", nbytes);
		rc = cuda_fail(what, e);
		munmap(p, (size_t)nbytes);
		return rc;
	}
	rc = pinned_check(p, nbytes);
	if (rc) {
		(void)cudaHostUnregister(p);
		(void)cudaGetLastError();
		munmap(p, (size_t)nbytes);
		return rc;
	}
	*base = p;
	return 0;
}

/* The memory is ours: unmapped even when the runtime refuses to
 * unregister it (its context lost), since the pages are released with the
 * mapping either way. */
static void pinned_chunk_free(void *ctx, void *base, uint64_t nbytes)
{
	(void)ctx;
	if (cudaHostUnregister(base) != cudaSuccess)
		(void)cudaGetLastError();
	munmap(base, (size_t)nbytes);
}

static const struct rsd__pool_ops dev_chunk_ops = {
	.chunk_alloc = dev_chunk_alloc,
	.chunk_free = dev_chunk_free,
};

static const struct rsd__pool_ops pinned_chunk_ops = {
	.chunk_alloc = pinned_chunk_alloc,
	.chunk_free = pinned_chunk_free,
};

/* The oversize bound: RSD_CUDA_OVERSIZE_KEEP bytes (a plain number; 0
 * keeps none), else CUDA_OVERSIZE_KEEP. */
static uint64_t oversize_keep(void)
{
	const char *s = getenv("RSD_CUDA_OVERSIZE_KEEP");
	unsigned long long v;
	char *end;

	if (!s || !*s)
		return CUDA_OVERSIZE_KEEP;
	v = strtoull(s, &end, 10);
	if (*end) {
		fprintf(stderr,
			"librsd: CUDA driver: RSD_CUDA_OVERSIZE_KEEP=%s is not a byte "
			"count; keeping %llu bytes\n",
			s, (unsigned long long)CUDA_OVERSIZE_KEEP);
		return CUDA_OVERSIZE_KEEP;
	}
	return v;
}

static void cuda_init(void)
{
	uint64_t keep = oversize_keep();
	cudaError_t e;
	int n = 0;

	rsd__pool_init(&cuda.pinned, &pinned_chunk_ops, NULL, CUDA_CHUNK_SIZE, RSD__PAGE_GRANULE);
	rsd__pool_set_keep(&cuda.pinned, keep);
	e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess) {
		snprintf(cuda.why_none, sizeof(cuda.why_none),
			 "cudaGetDeviceCount failed: %s (%s, error %d)", cudaGetErrorString(e),
			 cudaGetErrorName(e), (int)e);
		(void)cudaGetLastError();
		return;
	}
	if (n > RSD_CUDA_MAX_DEVICE + 1)
		n = RSD_CUDA_MAX_DEVICE + 1;
	if (n <= 0) {
		snprintf(cuda.why_none, sizeof(cuda.why_none), "no CUDA device is visible");
		return;
	}
	cuda.dev = rsd__calloc((size_t)n, sizeof(*cuda.dev));
	cuda.peer = rsd__calloc((size_t)n * (size_t)n, 1);
	for (int i = 0; cuda.dev && i < n; i++) {
		cuda.dev[i].peer = rsd__calloc((size_t)n, sizeof(*cuda.dev[i].peer));
		if (!cuda.dev[i].peer)
			goto nomem;
	}
	if (!cuda.dev || !cuda.peer)
		goto nomem;
	for (int i = 0; i < n; i++) {
		cuda.dev[i].index = i;
		rsd__pool_init(&cuda.dev[i].pool, &dev_chunk_ops, &cuda.dev[i], CUDA_CHUNK_SIZE,
			       CUDA_GRANULE);
		rsd__pool_set_keep(&cuda.dev[i].pool, keep);
	}
	cuda.ndevices = n;
	return;
nomem:
	for (int i = 0; cuda.dev && i < n; i++)
		free(cuda.dev[i].peer);
	free(cuda.dev);
	free(cuda.peer);
	cuda.dev = NULL;
	cuda.peer = NULL;
	snprintf(cuda.why_none, sizeof(cuda.why_none), "out of memory for %d devices", n);
}

int cuda_ndevices(void)
{
	pthread_once(&cuda.once, cuda_init);
	return cuda.ndevices;
}

int cuda_no_device(const char *op, int device)
{
	if (!cuda_ndevices())
		return rsd__err(RSD_EINVAL, "CUDA driver: %s: cuda:%d is not available: %s", op,
				device, cuda.why_none);
	return rsd__err(RSD_EINVAL,
			"CUDA driver: %s: cuda:%d is not available (%d CUDA "
			"devices)",
			op, device, cuda.ndevices);
}

int cuda_check_location(const char *op, struct rsd_location at, bool host_ok)
{
	int rc = rsd__driver_check_location("CUDA driver", at);

	/* Start-up first, whatever the location: it also sets up the pinned
	 * pool, which a pinned-host allocation may be the first to use. */
	(void)cuda_ndevices();
	if (rc)
		return rc;
	if (at.kind == RSD_PAGEABLE_HOST && !host_ok)
		return rsd__err(RSD_EINVAL,
				"CUDA driver: %s serves pinned-host and cuda "
				"locations, not pageable-host",
				op);
	if (at.kind == RSD_CUDA && at.device >= cuda_ndevices())
		return cuda_no_device(op, at.device);
	return 0;
}

static int cu_device_count(void *ctx)
{
	(void)ctx;
	return cuda_ndevices();
}

static struct rsd__pool *pool_of(struct rsd_location at)
{
	return at.kind == RSD_CUDA ? &cuda.dev[at.device].pool : &cuda.pinned;
}

static int cu_alloc(void *ctx, struct rsd_location at, uint64_t nbytes, void **ptr)
{
	int rc;

	(void)ctx;
	if (!ptr)
		return rsd__err(RSD_ETYPE,
				"CUDA driver: alloc needs a pointer to store the address");
	rc = cuda_check_location("alloc", at, false);
	if (!rc)
		rc = cuda_check_lost_at("alloc", at);
	if (rc)
		return rc;
	return rsd__pool_alloc(pool_of(at), nbytes, ptr);
}

static void cu_free(void *ctx, struct rsd_location at, void *ptr, uint64_t nbytes)
{
	char name[RSD_LOCATION_NAME_MAX];

	(void)ctx;
	(void)nbytes;
	if (!ptr)
		return;
	(void)cuda_ndevices(); /* start-up, as in check_location */
	if ((at.kind != RSD_PINNED_HOST && at.kind != RSD_CUDA) || !rsd_location_valid(at) ||
	    (at.kind == RSD_CUDA && at.device >= cuda_ndevices()) ||
	    rsd__pool_free(pool_of(at), ptr))
		fprintf(stderr,
			"librsd: CUDA driver: free of %p at %s, which is not live memory "
			"there\n",
			ptr, rsd_location_name(at, name, sizeof(name)));
}

static int cu_metrics(void *ctx, int device, uint64_t *allocated, uint64_t *reserved)
{
	struct rsd__pool_stats st;

	(void)ctx;
	if (!allocated || !reserved)
		return rsd__err(RSD_ETYPE, "CUDA driver: metrics needs both output pointers");
	if (device < 0 || device >= cuda_ndevices())
		return cuda_no_device("metrics", device);
	if (cuda_dev_lost(device))
		return cuda_check_lost("metrics", device);
	rsd__pool_stats(&cuda.dev[device].pool, &st);
	*allocated = st.allocated_bytes;
	*reserved = st.reserved_bytes;
	return 0;
}

static bool cu_device_lost(void *ctx, int device)
{
	(void)ctx;
	return device >= 0 && device < cuda_ndevices() && cuda_dev_lost(device);
}

static const struct rsd_device_ops cuda_ops = {
	.name = "cuda",
	.device_count = cu_device_count,
	.alloc = cu_alloc,
	.free = cu_free,
	.copy = cu_copy,
	.stream_device = cu_stream_device,
	.default_stream = cu_default_stream,
	.stream_sync = cu_stream_sync,
	.device_sync = cu_device_sync,
	.event_record = cu_event_record,
	.event_query = cu_event_query,
	.event_sync = cu_event_sync,
	.event_destroy = cu_event_destroy,
	.metrics = cu_metrics,
	.transfer_stream = cu_transfer_stream,
	.stream_wait_event = cu_stream_wait_event,
	.device_lost = cu_device_lost,
	.gate_queue = cu_gate_queue,
	.gate_open = cu_gate_open,
};

#else /* !RSD_HAVE_CUDA */

static int nocuda(const char *op)
{
	return rsd__err(RSD_EDEVICE, "CUDA driver: %s: librsd was built without CUDA", op);
}

static int nc_device_count(void *ctx)
{
	(void)ctx;
	return 0;
}

static int nc_alloc(void *ctx, struct rsd_location at, uint64_t nbytes, void **ptr)
{
	(void)ctx, (void)at, (void)nbytes;
	if (ptr)
		*ptr = NULL;
	return nocuda("alloc");
}

static void nc_free(void *ctx, struct rsd_location at, void *ptr, uint64_t nbytes)
{
	(void)ctx, (void)at, (void)ptr, (void)nbytes;
}

static int nc_copy(void *ctx, void *dst, struct rsd_location dst_at, const void *src,
		   struct rsd_location src_at, uint64_t nbytes, void *stream)
{
	(void)ctx, (void)dst, (void)dst_at, (void)src, (void)src_at, (void)nbytes, (void)stream;
	return nocuda("copy");
}

static int nc_stream_device(void *ctx, void *stream, int *device)
{
	(void)ctx, (void)stream, (void)device;
	return nocuda("stream_device");
}

static void *nc_default_stream(void *ctx, int device)
{
	(void)ctx, (void)device;
	return NULL;
}

static int nc_stream_sync(void *ctx, void *stream)
{
	(void)ctx, (void)stream;
	return nocuda("stream_sync");
}

static int nc_device_sync(void *ctx, int device)
{
	(void)ctx, (void)device;
	return nocuda("device_sync");
}

static int nc_event_record(void *ctx, void *stream, void **event)
{
	(void)ctx, (void)stream;
	if (event)
		*event = NULL;
	return nocuda("event_record");
}

static int nc_event_query(void *ctx, void *event)
{
	(void)ctx, (void)event;
	return nocuda("event_query");
}

static int nc_event_sync(void *ctx, void *event)
{
	(void)ctx, (void)event;
	return nocuda("event_sync");
}

static void nc_event_destroy(void *ctx, void *event)
{
	(void)ctx, (void)event;
}

static int nc_metrics(void *ctx, int device, uint64_t *allocated, uint64_t *reserved)
{
	(void)ctx, (void)device, (void)allocated, (void)reserved;
	return nocuda("metrics");
}

static void *nc_transfer_stream(void *ctx, struct rsd_location dst, struct rsd_location src)
{
	(void)ctx, (void)dst, (void)src;
	return NULL;
}

static int nc_stream_wait_event(void *ctx, void *stream, void *event)
{
	(void)ctx, (void)stream, (void)event;
	return nocuda("stream_wait_event");
}

static const struct rsd_device_ops cuda_ops = {
	.name = "cuda",
	.device_count = nc_device_count,
	.alloc = nc_alloc,
	.free = nc_free,
	.copy = nc_copy,
	.stream_device = nc_stream_device,
	.default_stream = nc_default_stream,
	.stream_sync = nc_stream_sync,
	.device_sync = nc_device_sync,
	.event_record = nc_event_record,
	.event_query = nc_event_query,
	.event_sync = nc_event_sync,
	.event_destroy = nc_event_destroy,
	.metrics = nc_metrics,
	.transfer_stream = nc_transfer_stream,
	.stream_wait_event = nc_stream_wait_event,
};

#endif /* RSD_HAVE_CUDA */

const struct rsd_device_ops *rsd_cuda_driver(void)
{
	return &cuda_ops;
}
