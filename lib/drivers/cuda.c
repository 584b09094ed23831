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
 * functions that wait until opened (see "Gates" below).
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
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../internal.h"
#include "../nvtx.h"
#include "../trace.h"
#include "host.h"
#include "pool.h"

#ifndef RSD_HAVE_CUDA
#define RSD_HAVE_CUDA 0
#endif

bool rsd_cuda_built(void)
{
	return RSD_HAVE_CUDA;
}

#if RSD_HAVE_CUDA
#include <sys/mman.h>

#include <cuda_runtime_api.h>

#include "cuda_sticky.h"

#define CUDA_CHUNK_SIZE (64ull << 20)
/* cudaMalloc aligns to 256 bytes; keep carved blocks at least that aligned. */
#define CUDA_GRANULE 512ull
#define CUDA_EVENT_MAGIC 0x7273642d63657674ull /* "rsd-cevt" */
#define CUDA_EVENT_FREE 0x7273642d63667265ull  /* "rsd-cfre" */

struct cuda_event {
	uint64_t magic; /* CUDA_EVENT_MAGIC while handed out */
	int device;
	cudaEvent_t ev;
	struct cuda_event *next; /* its device's free list */
	/* The gates queued on its stream before its record (see "Gates"):
	 * line is NULL when that stream never had one. Set by event_record. */
	struct gate_line *line;
	uint64_t gates;
};

/* Oversize blocks kept per pool unless RSD_CUDA_OVERSIZE_KEEP says. */
#define CUDA_OVERSIZE_KEEP (1ull << 30)

/* A driver stream, created on first use (both fields protected by
 * cuda.lock; never destroyed). */
struct cuda_stream {
	cudaStream_t s;
	bool made;
};

enum peer_state {
	PEER_UNKNOWN = 0,
	PEER_ON,  /* cudaDeviceEnablePeerAccess done (or already enabled) */
	PEER_OFF, /* cudaDeviceCanAccessPeer says no, or enabling failed */
};

struct cuda_dev {
	int index;
	struct rsd__pool pool;		/* cudaMalloc chunks; own lock */
	struct cuda_stream transfer;	/* what a NULL stream stands for */
	struct cuda_stream h2d, d2h;	/* transfer_stream per direction */
	struct cuda_stream *peer;	/* [src]: peer copies src -> this device */
	struct cuda_event *free_events; /* protected by cuda.lock */
	/* Its context had a sticky error: set once, never cleared. From then
	 * on no op calls the runtime for it (no cudaFree in a dead context:
	 * its memory is leaked on purpose). */
	atomic_bool lost;
};

static struct {
	pthread_once_t once;
	int ndevices;	    /* set once by cuda_init */
	char why_none[200]; /* set once: why there are no devices */
	struct rsd__pool pinned;
	struct cuda_dev *dev;
	unsigned char *peer;  /* [a * ndevices + b]: enum peer_state, by cuda.lock */
	pthread_mutex_t lock; /* driver streams, peer states, event free lists */
} cuda = { .once = PTHREAD_ONCE_INIT, .lock = PTHREAD_MUTEX_INITIALIZER };

static bool dev_lost(int device)
{
	return device >= 0 && device < cuda.ndevices && atomic_load(&cuda.dev[device].lost);
}

/*
 * Copies timed for rsd:copy_start/end while a session records them: two
 * timing events recorded around the copy on its stream, kept here until a
 * sync or an event query (timed_reap) sees the second complete; both
 * events are then fired with the GPU's elapsed time between the two
 * (cudaEventElapsedTime). Timing never fails a copy nor touches the
 * thread's error record: a copy whose events cannot be made or recorded is
 * not timed, nor one beyond the CUDA_TIMED_MAX already waiting.
 *
 * Locking: timed.lock protects the list and n; taken alone (never with
 * cuda.lock), and no runtime call that waits is made under it.
 */
#define CUDA_TIMED_MAX 4096
/* Set in the driver's copy ids, so they never equal the simulated
 * device's (its queue tickets) in a process that has both (the runtime
 * double runs on it). */
#define CUDA_TIMED_ID_BIT (1ull << 63)

struct cuda_timed {
	cudaEvent_t start, end;
	int device; /* the events' (the copy stream's) */
	int engine_device;
	const char *engine;
	uint64_t id, nbytes;
	struct rsd_location src, dst;
	struct cuda_timed *next;
};

static struct {
	pthread_mutex_t lock;
	struct cuda_timed *head;
	unsigned n;
	atomic_uint_fast64_t ids;
} timed = { .lock = PTHREAD_MUTEX_INITIALIZER };

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
static int cuda_fail(const char *call, cudaError_t e)
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
static int check_lost(const char *op, int device)
{
	if (!dev_lost(device))
		return 0;
	return rsd__err(RSD_EDEVLOST,
			"CUDA driver: %s: cuda:%d was lost to a sticky error (every call in "
			"its context fails)",
			op, device);
}

static int check_lost_at(const char *op, struct rsd_location at)
{
	return at.kind == RSD_CUDA ? check_lost(op, at.device) : 0;
}

/* Make device current, remembering the caller's device to restore. */
static int device_enter(int device, int *prev)
{
	cudaError_t e = cudaGetDevice(prev);

	if (e != cudaSuccess)
		return cuda_fail("cudaGetDevice", e);
	if (*prev == device)
		return 0;
	e = cudaSetDevice(device);
	return e == cudaSuccess ? 0 : cuda_fail("cudaSetDevice", e);
}

static void device_leave(int device, int prev)
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

	rc = device_enter(d->index, &prev);
	if (rc)
		return rc;
	e = cudaMalloc(base, (size_t)nbytes);
	device_leave(d->index, prev);
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
		if (dev_lost(i) || device_enter(i, &prev))
			continue;
		e = cudaHostRegister(p, (size_t)nbytes, cudaHostRegisterPortable);
		device_leave(i, prev);
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

static int ndevices(void)
{
	pthread_once(&cuda.once, cuda_init);
	return cuda.ndevices;
}

static int no_device(const char *op, int device)
{
	if (!ndevices())
		return rsd__err(RSD_EINVAL, "CUDA driver: %s: cuda:%d is not available: %s", op,
				device, cuda.why_none);
	return rsd__err(RSD_EINVAL,
			"CUDA driver: %s: cuda:%d is not available (%d CUDA "
			"devices)",
			op, device, cuda.ndevices);
}

static int check_location(const char *op, struct rsd_location at, bool host_ok)
{
	int rc = rsd__driver_check_location("CUDA driver", at);

	/* Start-up first, whatever the location: it also sets up the pinned
	 * pool, which a pinned-host allocation may be the first to use. */
	(void)ndevices();
	if (rc)
		return rc;
	if (at.kind == RSD_PAGEABLE_HOST && !host_ok)
		return rsd__err(RSD_EINVAL,
				"CUDA driver: %s serves pinned-host and cuda "
				"locations, not pageable-host",
				op);
	if (at.kind == RSD_CUDA && at.device >= ndevices())
		return no_device(op, at.device);
	return 0;
}

static int cu_device_count(void *ctx)
{
	(void)ctx;
	return ndevices();
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
	rc = check_location("alloc", at, false);
	if (!rc)
		rc = check_lost_at("alloc", at);
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
	(void)ndevices(); /* start-up, as in check_location */
	if ((at.kind != RSD_PINNED_HOST && at.kind != RSD_CUDA) || !rsd_location_valid(at) ||
	    (at.kind == RSD_CUDA && at.device >= ndevices()) || rsd__pool_free(pool_of(at), ptr))
		fprintf(stderr,
			"librsd: CUDA driver: free of %p at %s, which is not live memory "
			"there\n",
			ptr, rsd_location_name(at, name, sizeof(name)));
}

/* A driver stream of device, created on first use. */
static int driver_stream(int device, struct cuda_stream *cs, cudaStream_t *out)
{
	cudaError_t e = cudaSuccess;
	int prev, rc = 0;

	pthread_mutex_lock(&cuda.lock);
	if (!cs->made) {
		rc = device_enter(device, &prev);
		if (!rc) {
			e = cudaStreamCreateWithFlags(&cs->s, cudaStreamNonBlocking);
			device_leave(device, prev);
			if (e != cudaSuccess)
				rc = cuda_fail("cudaStreamCreateWithFlags", e);
			else
				cs->made = true;
		}
	}
	*out = cs->s;
	pthread_mutex_unlock(&cuda.lock);
	return rc;
}

/* The driver's transfer stream of device (what a NULL stream means). */
static int transfer_stream(int device, cudaStream_t *out)
{
	return driver_stream(device, &cuda.dev[device].transfer, out);
}

/* With cuda.lock held: enable access from device to peer where the runtime
 * allows it. */
static enum peer_state peer_enable_one(int device, int peer)
{
	cudaError_t e;
	int can = 0, prev;

	e = cudaDeviceCanAccessPeer(&can, device, peer);
	if (e != cudaSuccess || !can) {
		(void)cudaGetLastError();
		return PEER_OFF;
	}
	if (device_enter(device, &prev))
		return PEER_OFF;
	e = cudaDeviceEnablePeerAccess(peer, 0);
	device_leave(device, prev);
	if (e == cudaSuccess)
		return PEER_ON;
	/* Someone (the application) enabled it already: as good. */
	(void)cudaGetLastError();
	return e == cudaErrorPeerAccessAlreadyEnabled ? PEER_ON : PEER_OFF;
}

/* Peer access between a and b, both ways, tried once per pair: without it
 * cudaMemcpyPeerAsync bounces through host memory. A failure only leaves
 * copies on the slow path, so it is not an error. */
static void peer_enable(int a, int b)
{
	unsigned char *ab = &cuda.peer[a * cuda.ndevices + b];
	unsigned char *ba = &cuda.peer[b * cuda.ndevices + a];

	pthread_mutex_lock(&cuda.lock);
	if (*ab == PEER_UNKNOWN) {
		*ab = (unsigned char)peer_enable_one(a, b);
		*ba = (unsigned char)peer_enable_one(b, a);
	}
	pthread_mutex_unlock(&cuda.lock);
}

static void *cu_transfer_stream(void *ctx, struct rsd_location dst, struct rsd_location src)
{
	struct cuda_stream *cs = NULL;
	cudaStream_t s = NULL;
	int dev = -1;

	(void)ctx;
	if (check_location("transfer_stream", dst, true) ||
	    check_location("transfer_stream", src, true) || check_lost_at("transfer_stream", dst) ||
	    check_lost_at("transfer_stream", src))
		return NULL;
	if (dst.kind == RSD_CUDA && src.kind == RSD_CUDA && dst.device != src.device) {
		peer_enable(src.device, dst.device);
		dev = dst.device;
		cs = &cuda.dev[dev].peer[src.device];
	} else if (dst.kind == RSD_CUDA) {
		dev = dst.device;
		cs = src.kind == RSD_CUDA ? &cuda.dev[dev].transfer : &cuda.dev[dev].h2d;
	} else if (src.kind == RSD_CUDA) {
		dev = src.device;
		cs = &cuda.dev[dev].d2h;
	}
	if (!cs || driver_stream(dev, cs, &s))
		return NULL;
	return s;
}

/* The NVTX range of a copy: its direction, a static string. */
static const char *copy_range_name(struct rsd_location dst, struct rsd_location src)
{
	if (src.kind != RSD_CUDA)
		return src.kind == RSD_PAGEABLE_HOST ? "rsd copy H2D (pageable)" : "rsd copy H2D";
	if (dst.kind != RSD_CUDA)
		return dst.kind == RSD_PAGEABLE_HOST ? "rsd copy D2H (pageable)" : "rsd copy D2H";
	return dst.device == src.device ? "rsd copy D2D" : "rsd copy peer";
}

/* Destroy a timed copy's events (raw calls: its failures are not the
 * caller's) and free it. */
static void timed_free(struct cuda_timed *t)
{
	if (t->start)
		(void)cudaEventDestroy(t->start);
	if (t->end)
		(void)cudaEventDestroy(t->end);
	(void)cudaGetLastError();
	free(t);
}

/* t's two events made on device dev and the first recorded on s; false
 * (nothing left made) when s is not dev's or a call fails. */
static bool timed_events(struct cuda_timed *t, int dev, cudaStream_t s)
{
	bool ok;
	int prev;

	if (dev < 0 || dev >= cuda.ndevices || dev_lost(dev))
		return false;
	if (cudaGetDevice(&prev) != cudaSuccess || cudaSetDevice(dev) != cudaSuccess) {
		(void)cudaGetLastError();
		return false;
	}
	ok = cudaEventCreate(&t->start) == cudaSuccess && cudaEventCreate(&t->end) == cudaSuccess &&
	     cudaEventRecord(t->start, s) == cudaSuccess;
	if (!ok) {
		if (t->start)
			(void)cudaEventDestroy(t->start);
		if (t->end)
			(void)cudaEventDestroy(t->end);
		t->start = t->end = NULL;
		(void)cudaGetLastError();
	}
	(void)cudaSetDevice(prev);
	t->device = dev;
	return ok;
}

/* Before a copy on s is queued: its start event, recorded, or NULL (not
 * recording copies, or it cannot be timed). The events belong to s's
 * device, one of the copy's (a stream of another device is not timed). */
static struct cuda_timed *timed_start(cudaStream_t s, struct rsd_location dst,
				      struct rsd_location src, uint64_t nbytes)
{
	struct cuda_timed *t;
	bool room;

	if (!rsd_trace_copy_enabled())
		return NULL;
	pthread_mutex_lock(&timed.lock);
	room = timed.n < CUDA_TIMED_MAX;
	pthread_mutex_unlock(&timed.lock);
	t = room ? calloc(1, sizeof(*t)) : NULL;
	if (!t)
		return NULL;
	t->engine_device = -1;
	t->engine = rsd__trace_copy_engine(src, dst, &t->engine_device);
	t->nbytes = nbytes;
	t->src = src;
	t->dst = dst;
	if ((dst.kind == RSD_CUDA && timed_events(t, dst.device, s)) ||
	    (src.kind == RSD_CUDA && timed_events(t, src.device, s)))
		return t;
	free(t);
	return NULL;
}

/* After the copy: its end event recorded on s and the copy listed for
 * timed_reap, or, when the copy was not queued (err), dropped. */
static void timed_queued(struct cuda_timed *t, cudaStream_t s, cudaError_t err)
{
	if (!t)
		return;
	if (err != cudaSuccess || cudaEventRecord(t->end, s) != cudaSuccess) {
		timed_free(t);
		return;
	}
	t->id = CUDA_TIMED_ID_BIT | (atomic_fetch_add(&timed.ids, 1) + 1);
	pthread_mutex_lock(&timed.lock);
	t->next = timed.head;
	timed.head = t;
	timed.n++;
	pthread_mutex_unlock(&timed.lock);
}

/* Fire rsd:copy_start/end for every timed copy whose end event completed,
 * oldest first, and forget them; those on a lost device, or whose events
 * failed, are forgotten unfired. Called where the driver learns that work
 * completed: stream, device and event syncs, and an event query that says
 * done. */
static void timed_reap(void)
{
	struct cuda_timed *done = NULL, **pp, *t;
	cudaError_t e;
	float ms;

	if (!atomic_load(&timed.ids))
		return;
	pthread_mutex_lock(&timed.lock);
	for (pp = &timed.head; (t = *pp);) {
		e = dev_lost(t->device) ? cudaErrorUnknown : cudaEventQuery(t->end);
		if (e == cudaErrorNotReady) {
			pp = &t->next;
			continue;
		}
		*pp = t->next;
		timed.n--;
		if (e != cudaSuccess) {
			(void)cudaGetLastError();
			t->nbytes = UINT64_MAX; /* not fired */
		}
		t->next = done; /* the list is newest first: this reverses it */
		done = t;
	}
	pthread_mutex_unlock(&timed.lock);
	while ((t = done)) {
		done = t->next;
		if (t->nbytes != UINT64_MAX &&
		    cudaEventElapsedTime(&ms, t->start, t->end) == cudaSuccess) {
			rsd_trace_copy_start(t->engine_device, t->engine, t->id, t->nbytes, t->src,
					     t->dst);
			rsd_trace_copy_end(t->engine_device, t->engine, t->id, t->nbytes,
					   ms > 0 ? (uint64_t)((double)ms * 1e6) : 0, true);
		}
		timed_free(t);
	}
}

static int cu_copy(void *ctx, void *dst, struct rsd_location dst_at, const void *src,
		   struct rsd_location src_at, uint64_t nbytes, void *stream)
{
	struct cuda_timed *t;
	cudaStream_t s = stream;
	cudaError_t e;
	int dev = -1, rc;

	(void)ctx;
	rc = check_location("copy", dst_at, true);
	if (!rc)
		rc = check_location("copy", src_at, true);
	if (!rc)
		rc = check_lost_at("copy", dst_at);
	if (!rc)
		rc = check_lost_at("copy", src_at);
	if (rc)
		return rc;
	if (!nbytes)
		return 0;
	if (!dst || !src)
		return rsd__err(RSD_ETYPE, "CUDA driver: copy of %" PRIu64 " bytes with a NULL %s",
				nbytes, dst ? "source" : "destination");
	dev = dst_at.kind == RSD_CUDA ? dst_at.device :
	      src_at.kind == RSD_CUDA ? src_at.device :
					-1;
	if (dev < 0 && !s) {
		memcpy(dst, src, (size_t)nbytes);
		return 0;
	}
	if (!s) {
		rc = transfer_stream(dev, &s);
		if (rc)
			return rc;
	}
	/* The range covers the enqueue on this thread; Nsight links it to
	 * the copy on the device through the CUDA call inside it. */
	rsd__nvtx_push(copy_range_name(dst_at, src_at), nbytes);
	t = timed_start(s, dst_at, src_at, nbytes);
	if (dst_at.kind == RSD_CUDA && src_at.kind == RSD_CUDA && dst_at.device != src_at.device) {
		peer_enable(src_at.device, dst_at.device);
		e = cudaMemcpyPeerAsync(dst, dst_at.device, src, src_at.device, (size_t)nbytes, s);
		timed_queued(t, s, e);
		rsd__nvtx_pop();
		return e == cudaSuccess ? 0 : cuda_fail("cudaMemcpyPeerAsync", e);
	}
	e = cudaMemcpyAsync(dst, src, (size_t)nbytes, cudaMemcpyDefault, s);
	timed_queued(t, s, e);
	rsd__nvtx_pop();
	return e == cudaSuccess ? 0 : cuda_fail("cudaMemcpyAsync", e);
}

#if CUDART_VERSION < 12080
/* True, with its device, when stream is one of the driver's own. */
static bool own_stream_device(void *stream, int *device)
{
	bool found = false;

	pthread_mutex_lock(&cuda.lock);
	for (int i = 0; i < cuda.ndevices && !found; i++) {
		struct cuda_dev *d = &cuda.dev[i];

		found = (d->transfer.made && (void *)d->transfer.s == stream) ||
			(d->h2d.made && (void *)d->h2d.s == stream) ||
			(d->d2h.made && (void *)d->d2h.s == stream);
		for (int j = 0; j < cuda.ndevices && !found; j++)
			found = d->peer[j].made && (void *)d->peer[j].s == stream;
		if (found)
			*device = i;
	}
	pthread_mutex_unlock(&cuda.lock);
	return found;
}
#endif

static int cu_stream_device(void *ctx, void *stream, int *device)
{
	cudaError_t e;

	(void)ctx;
	if (!device)
		return rsd__err(RSD_ETYPE, "CUDA driver: stream_device needs a device pointer");
	if (!ndevices())
		return rsd__err(RSD_ETYPE, "CUDA driver: %p is not a CUDA stream: %s", stream,
				cuda.why_none);
#if CUDART_VERSION >= 12080
	e = cudaStreamGetDevice((cudaStream_t)stream, device);
#else
	/* No cudaStreamGetDevice: the driver's own streams are known; any
	 * other valid stream is taken to belong to the current device. */
	if (own_stream_device(stream, device))
		return 0;
	{
		unsigned flags;

		e = cudaStreamGetFlags((cudaStream_t)stream, &flags);
		if (e == cudaSuccess)
			e = cudaGetDevice(device);
	}
#endif
	if (e == cudaSuccess)
		return 0;
	(void)cudaGetLastError();
	if (e == cudaErrorInvalidResourceHandle || e == cudaErrorInvalidValue ||
	    e == cudaErrorContextIsDestroyed)
		return rsd__err(RSD_ETYPE, "CUDA driver: %p is not a CUDA stream: %s", stream,
				cudaGetErrorString(e));
	return cuda_fail("cudaStreamGetDevice", e);
}

static void *cu_default_stream(void *ctx, int device)
{
	cudaStream_t s;

	(void)ctx;
	if (device < 0 || device >= ndevices() || transfer_stream(device, &s))
		return NULL;
	return s;
}

static int cu_stream_sync(void *ctx, void *stream)
{
	cudaError_t e;
	int lost = -1;

	(void)ctx;
	if (stream) {
		e = cudaStreamSynchronize((cudaStream_t)stream);
		if (e != cudaSuccess)
			return cuda_fail("cudaStreamSynchronize", e);
		timed_reap();
		return 0;
	}
	/* NULL stands for the driver's streams: synchronize each one made, on
	 * every sound device; a lost one fails the call after the others. */
	for (int i = 0; i < ndevices(); i++) {
		struct cuda_dev *d = &cuda.dev[i];

		if (dev_lost(i)) {
			if (lost < 0)
				lost = i;
			continue;
		}

		for (int j = -3; j < cuda.ndevices; j++) {
			struct cuda_stream *cs = j == -3 ? &d->transfer :
						 j == -2 ? &d->h2d :
						 j == -1 ? &d->d2h :
							   &d->peer[j];
			cudaStream_t s;
			bool made;

			pthread_mutex_lock(&cuda.lock);
			made = cs->made;
			s = cs->s;
			pthread_mutex_unlock(&cuda.lock);
			if (!made)
				continue;
			e = cudaStreamSynchronize(s);
			if (e != cudaSuccess)
				return cuda_fail("cudaStreamSynchronize", e);
		}
	}
	timed_reap();
	return check_lost("stream_sync of the driver's streams", lost);
}

static int cu_device_sync(void *ctx, int device)
{
	cudaError_t e;
	int prev, rc;

	(void)ctx;
	if (device < 0 || device >= ndevices())
		return no_device("device_sync", device);
	rc = check_lost("device_sync", device);
	if (!rc)
		rc = device_enter(device, &prev);
	if (rc)
		return rc;
	e = cudaDeviceSynchronize();
	device_leave(device, prev);
	if (e != cudaSuccess)
		return cuda_fail("cudaDeviceSynchronize", e);
	timed_reap();
	return 0;
}

/* The device of stream, one of the driver's and not lost, into *dev. */
static int stream_sound_device(void *ctx, const char *op, void *stream, int *dev)
{
	int rc = cu_stream_device(ctx, stream, dev);

	if (rc)
		return rc;
	if (*dev < 0 || *dev >= cuda.ndevices)
		return no_device(op, *dev);
	return check_lost(op, *dev);
}

/*
 * Gates (gate_queue, gate_open): a host function queued with
 * cudaLaunchHostFunc that blocks on a condition variable until the gate is
 * opened, so the stream's later work does not start before, and the host
 * does not wait. The host function calls no CUDA API (the programming guide
 * forbids it there) and takes only gates.lock.
 *
 * The runtime may run every host function of a process on one thread of
 * its own, in the order they become ready, so a closed gate of one device's
 * stream can delay another device's host functions (its gates) behind it.
 * librsd's staging workers still progress: a worker waits only for events
 * of DMAs queued before the gate it opens next, and those are behind gates
 * it opened already (its own device's, in the order queued; staging.c,
 * struct stage_job), never behind a host function that waits for a gate
 * not yet opened. Whatever thread the runtime runs gates on, every one it
 * waits for is opened without that thread.
 *
 * A host function cannot fail its stream: a gate opened as failed lets
 * the stream pass like any other, and the DMAs behind it move whatever the
 * staging buffer holds. The failure is kept per stream instead (struct
 * gate_line: the first gate opened as failed, counted in the order gates
 * were queued on it), and every event of this driver recorded on that
 * stream after that gate reports its error to event_query and event_sync
 * once the work before it is done (not earlier: the caller frees what the
 * copy writes once its event answers). A consumer that orders itself after
 * such an event with stream_wait_event (or a CUDA consumer of the stream)
 * is not failed: it runs and may read garbage; librsd's caller learns of
 * the failed copy from the copy's own event. The failure stays with the
 * stream (as a sticky error would): a stream never carries on past it
 * with its events reporting success.
 *
 * A gate is freed by whichever of its host function and gate_open comes
 * last; on a lost device the runtime may never run the host function, and
 * its gate is leaked with the device's memory.
 *
 * A line lives as long as a gate or an event of this driver still counts
 * on it (refs), and after that only while it holds a failure: a line
 * without one says nothing a new line would not. A failed line is the
 * stream's, not its handle's: the driver does not see the caller destroy
 * a stream, and the runtime may give a later stream the same handle. So a
 * line is also named by the stream's id (cudaStreamGetId, unique for the
 * process's life): a handle met again with another id belongs to a new
 * stream, which gets a new line, and the old stream's line is freed once
 * nothing counts on it. (A runtime older than 12.0 has no stream ids: there
 * a failed line stays with its handle.)
 *
 * Locking: gates.lock protects every gate's open and refs and the lines;
 * taken alone, never while calling the runtime.
 */
struct gate_line {
	cudaStream_t s;
	unsigned long long id; /* s's stream id; 0 where the runtime has none */
	uint64_t queued;       /* gates queued on s so far */
	uint64_t failed_at;    /* the first failed gate's number; 0: none */
	int err;	       /* its negative RSD_E* code */
	unsigned refs;	       /* gates not yet freed, events that counted it */
	bool listed;	       /* in gates.lines: s's current line */
	struct gate_line *next;
};

struct cuda_gate {
	struct gate_line *line;
	uint64_t seq; /* its number on line */
	bool open;
	int refs; /* the host function's and the opener's */
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* a gate was opened */
	struct gate_line *lines;
} gates = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };

/* s's identity for its gate line (see "Gates"): 0 without stream ids. */
static unsigned long long stream_id(cudaStream_t s)
{
	unsigned long long id = 0;

#if CUDART_VERSION >= 12000
	if (cudaStreamGetId(s, &id) != cudaSuccess) {
		(void)cudaGetLastError();
		id = 0;
	}
#else
	(void)s;
#endif
	return id;
}

/* With gates.lock held: take l out of gates.lines. */
static void line_unlist(struct gate_line *l)
{
	struct gate_line **pp;

	for (pp = &gates.lines; *pp != l; pp = &(*pp)->next)
		;
	*pp = l->next;
	l->listed = false;
}

/* With gates.lock held: give back one reference to l, freed when nothing
 * counts on it and it holds no failure of a stream that may still live. */
static void line_put(struct gate_line *l)
{
	if (!l || --l->refs)
		return;
	if (l->listed && l->failed_at)
		return;
	if (l->listed)
		line_unlist(l);
	free(l);
}

/* With gates.lock held: s's listed line, or NULL. */
static struct gate_line *line_find(cudaStream_t s)
{
	struct gate_line *l;

	for (l = gates.lines; l && l->s != s; l = l->next)
		;
	return l;
}

/*
 * Without gates.lock: a reference to s's line, or NULL when s has none and
 * make is false, or without memory. A listed line of another stream id
 * was the line of a destroyed stream whose handle s reuses: it is unlisted
 * (freed once nothing counts on it) and s starts afresh. The id is asked
 * for only when s has a line or one is made, never under the lock.
 */
static struct gate_line *line_get(cudaStream_t s, bool make)
{
	unsigned long long id;
	struct gate_line *l;

	if (!make) {
		pthread_mutex_lock(&gates.lock);
		l = line_find(s);
		pthread_mutex_unlock(&gates.lock);
		if (!l)
			return NULL;
	}
	id = stream_id(s);
	pthread_mutex_lock(&gates.lock);
	l = line_find(s);
	if (l && l->id != id) {
		line_unlist(l);
		if (!l->refs)
			free(l);
		l = NULL;
	}
	if (!l && make) {
		l = calloc(1, sizeof(*l));
		if (l) {
			l->s = s;
			l->id = id;
			l->listed = true;
			l->next = gates.lines;
			gates.lines = l;
		}
	}
	if (l)
		l->refs++;
	pthread_mutex_unlock(&gates.lock);
	return l;
}

/* With gates.lock held: give back one reference to g. */
static void gate_put(struct cuda_gate *g)
{
	if (--g->refs == 0) {
		line_put(g->line);
		free(g);
	}
}

/* The host function: waits, without the runtime, for the gate to open. */
static void CUDART_CB gate_wait(void *arg)
{
	struct cuda_gate *g = arg;

	pthread_mutex_lock(&gates.lock);
	while (!g->open)
		pthread_cond_wait(&gates.cond, &gates.lock);
	gate_put(g);
	pthread_mutex_unlock(&gates.lock);
}

static int cu_gate_queue(void *ctx, void *stream, void **gate)
{
	struct cuda_gate *g;
	cudaError_t e;
	int dev = -1, rc;

	if (!gate)
		return rsd__err(RSD_ETYPE, "CUDA driver: gate_queue needs a gate pointer");
	if (!stream)
		return rsd__err(RSD_ETYPE, "CUDA driver: gate_queue needs a stream, not NULL");
	rc = stream_sound_device(ctx, "gate_queue", stream, &dev);
	if (rc)
		return rc;
	g = rsd__calloc(1, sizeof(*g));
	if (!g)
		return rsd__err(RSD_ENOMEM, "CUDA driver: out of memory for a gate");
	g->line = line_get((cudaStream_t)stream, true);
	if (!g->line) {
		free(g);
		return rsd__err(RSD_ENOMEM,
				"CUDA driver: out of memory for a gate's stream record");
	}
	g->refs = 2;
	e = cudaLaunchHostFunc((cudaStream_t)stream, gate_wait, g);
	if (e != cudaSuccess) {
		pthread_mutex_lock(&gates.lock);
		line_put(g->line);
		pthread_mutex_unlock(&gates.lock);
		free(g);
		return cuda_fail("cudaLaunchHostFunc", e);
	}
	/* Numbered once queued: an event recorded after this call on the
	 * stream counts it. */
	pthread_mutex_lock(&gates.lock);
	g->seq = ++g->line->queued;
	pthread_mutex_unlock(&gates.lock);
	*gate = g;
	return 0;
}

static void cu_gate_open(void *ctx, void *gate, int err)
{
	struct cuda_gate *g = gate;

	(void)ctx;
	if (!g)
		return;
	pthread_mutex_lock(&gates.lock);
	if (err < 0 && !g->line->failed_at) {
		g->line->failed_at = g->seq;
		g->line->err = err;
	}
	g->open = true;
	pthread_cond_broadcast(&gates.cond);
	gate_put(g);
	pthread_mutex_unlock(&gates.lock);
}

/* Just after the record: the gates queued on ev's stream so far. Counted
 * after, not before, so a gate another thread queues on the stream at the
 * same moment can only be counted in (an event that fails with it), never
 * left out (an event behind a failed gate that reports success). */
static void event_gates(struct cuda_event *ev, cudaStream_t s)
{
	ev->line = line_get(s, false);
	if (!ev->line)
		return;
	pthread_mutex_lock(&gates.lock);
	ev->gates = ev->line->queued;
	pthread_mutex_unlock(&gates.lock);
}

/* An event whose work is done: 0, or the error of a gate opened as
 * failed before it on its stream (recorded). */
static int event_gate_failed(const struct cuda_event *ev, const char *op)
{
	int err = 0;

	if (!ev->line)
		return 0;
	pthread_mutex_lock(&gates.lock);
	if (ev->line->failed_at && ev->line->failed_at <= ev->gates)
		err = ev->line->err;
	pthread_mutex_unlock(&gates.lock);
	if (!err)
		return 0;
	return rsd__err(-err,
			"CUDA driver: %s: event %p comes after a gate opened as failed on its "
			"stream (a staged chunk that could not be staged): %s",
			op, (const void *)ev, rsd_strerror(-err));
}

/* Back to its device's free list: CUDA events are costly to create. */
static void event_put(struct cuda_event *ev)
{
	if (ev->line) {
		pthread_mutex_lock(&gates.lock);
		line_put(ev->line);
		pthread_mutex_unlock(&gates.lock);
		ev->line = NULL;
	}
	ev->magic = CUDA_EVENT_FREE;
	pthread_mutex_lock(&cuda.lock);
	ev->next = cuda.dev[ev->device].free_events;
	cuda.dev[ev->device].free_events = ev;
	pthread_mutex_unlock(&cuda.lock);
}

static int event_get(int dev, struct cuda_event **out)
{
	struct cuda_event *ev;
	cudaError_t e;
	int prev, rc;

	pthread_mutex_lock(&cuda.lock);
	ev = cuda.dev[dev].free_events;
	if (ev)
		cuda.dev[dev].free_events = ev->next;
	pthread_mutex_unlock(&cuda.lock);
	if (ev)
		goto out;
	ev = rsd__calloc(1, sizeof(*ev));
	if (!ev)
		return rsd__err(RSD_ENOMEM, "CUDA driver: out of memory for an event");
	rc = device_enter(dev, &prev);
	if (rc) {
		free(ev);
		return rc;
	}
	e = cudaEventCreateWithFlags(&ev->ev, cudaEventDisableTiming);
	device_leave(dev, prev);
	if (e != cudaSuccess) {
		free(ev);
		return cuda_fail("cudaEventCreateWithFlags", e);
	}
	ev->device = dev;
out:
	ev->next = NULL;
	*out = ev;
	return 0;
}

static int cu_event_record(void *ctx, void *stream, void **event)
{
	struct cuda_event *ev = NULL;
	cudaError_t e;
	int dev = -1, rc;

	if (!event)
		return rsd__err(RSD_ETYPE, "CUDA driver: event_record needs an event pointer");
	*event = NULL;
	rc = stream_sound_device(ctx, "event_record", stream, &dev);
	if (!rc)
		rc = event_get(dev, &ev);
	if (rc || !ev)
		return rc;
	e = cudaEventRecord(ev->ev, (cudaStream_t)stream);
	if (e != cudaSuccess) {
		rc = cuda_fail("cudaEventRecord", e);
		event_put(ev);
		return rc;
	}
	event_gates(ev, (cudaStream_t)stream);
	ev->magic = CUDA_EVENT_MAGIC;
	*event = ev;
	return 0;
}

static struct cuda_event *live_event(void *event)
{
	struct cuda_event *ev = event;

	if (!ev || ev->magic != CUDA_EVENT_MAGIC) {
		rsd__err(RSD_ETYPE, "CUDA driver: %p is not a live event of this driver", event);
		return NULL;
	}
	return ev;
}

static int cu_event_query(void *ctx, void *event)
{
	struct cuda_event *ev = live_event(event);
	cudaError_t e;
	int rc;

	(void)ctx;
	if (!ev)
		return -RSD_ETYPE;
	if (dev_lost(ev->device))
		return check_lost("event_query", ev->device);
	e = cudaEventQuery(ev->ev);
	if (e == cudaSuccess) {
		timed_reap();
		rc = event_gate_failed(ev, "event_query");
		return rc ? rc : 1;
	}
	if (e == cudaErrorNotReady)
		return 0;
	return cuda_fail("cudaEventQuery", e);
}

static int cu_event_sync(void *ctx, void *event)
{
	struct cuda_event *ev = live_event(event);
	cudaError_t e;

	(void)ctx;
	if (!ev)
		return -RSD_ETYPE;
	if (dev_lost(ev->device))
		return check_lost("event_sync", ev->device);
	e = cudaEventSynchronize(ev->ev);
	if (e != cudaSuccess)
		return cuda_fail("cudaEventSynchronize", e);
	timed_reap();
	return event_gate_failed(ev, "event_sync");
}

static void cu_event_destroy(void *ctx, void *event)
{
	struct cuda_event *ev = event;

	(void)ctx;
	if (ev && ev->magic == CUDA_EVENT_MAGIC)
		event_put(ev);
}

static int cu_stream_wait_event(void *ctx, void *stream, void *event)
{
	struct cuda_event *ev;
	cudaError_t e;

	(void)ctx;
	if (!stream)
		return rsd__err(RSD_ETYPE, "CUDA driver: stream_wait_event needs a stream, not "
					   "NULL");
	ev = live_event(event);
	if (!ev)
		return -RSD_ETYPE;
	if (dev_lost(ev->device))
		return check_lost("stream_wait_event", ev->device);
	e = cudaStreamWaitEvent((cudaStream_t)stream, ev->ev, 0);
	return e == cudaSuccess ? 0 : cuda_fail("cudaStreamWaitEvent", e);
}

static int cu_metrics(void *ctx, int device, uint64_t *allocated, uint64_t *reserved)
{
	struct rsd__pool_stats st;

	(void)ctx;
	if (!allocated || !reserved)
		return rsd__err(RSD_ETYPE, "CUDA driver: metrics needs both output pointers");
	if (device < 0 || device >= ndevices())
		return no_device("metrics", device);
	if (dev_lost(device))
		return check_lost("metrics", device);
	rsd__pool_stats(&cuda.dev[device].pool, &st);
	*allocated = st.allocated_bytes;
	*reserved = st.reserved_bytes;
	return 0;
}

static bool cu_device_lost(void *ctx, int device)
{
	(void)ctx;
	return device >= 0 && device < ndevices() && dev_lost(device);
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
