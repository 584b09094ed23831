// SPDX-License-Identifier: MIT
/*
 * The CUDA driver's copies: cu_copy on the caller's stream or a driver
 * stream (cuda_stream.c), peer copies with peer access enabled, each
 * inside an NVTX range, and their timing for rsd:copy_start/end while a
 * trace session records copies (struct cuda_timed below). The only lock
 * here is timed.lock, taken alone.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"
#include "../nvtx.h"
#include "../trace.h"

#if RSD_HAVE_CUDA
/*
 * Copies timed for rsd:copy_start/end while a session records them: two
 * timing events recorded around the copy on its stream, kept here until a
 * sync or an event query (cuda_timed_reap) sees the second complete; both
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

	if (dev < 0 || dev >= cuda.ndevices || cuda_dev_lost(dev))
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
 * cuda_timed_reap, or, when the copy was not queued (err), dropped. */
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
void cuda_timed_reap(void)
{
	struct cuda_timed *done = NULL, **pp, *t;
	cudaError_t e;
	float ms;

	if (!atomic_load(&timed.ids))
		return;
	pthread_mutex_lock(&timed.lock);
	for (pp = &timed.head; (t = *pp);) {
		e = cuda_dev_lost(t->device) ? cudaErrorUnknown : cudaEventQuery(t->end);
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

int cu_copy(void *ctx, void *dst, struct rsd_location dst_at, const void *src,
	    struct rsd_location src_at, uint64_t nbytes, void *stream)
{
	struct cuda_timed *t;
	cudaStream_t s = stream;
	cudaError_t e;
	int dev = -1, rc;

	(void)ctx;
	rc = cuda_check_location("copy", dst_at, true);
	if (!rc)
		rc = cuda_check_location("copy", src_at, true);
	if (!rc)
		rc = cuda_check_lost_at("copy", dst_at);
	if (!rc)
		rc = cuda_check_lost_at("copy", src_at);
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
		rc = cuda_transfer_stream(dev, &s);
		if (rc)
			return rc;
	}
	/* The range covers the enqueue on this thread; Nsight links it to
	 * the copy on the device through the CUDA call inside it. */
	rsd__nvtx_push(copy_range_name(dst_at, src_at), nbytes);
	t = timed_start(s, dst_at, src_at, nbytes);
	if (dst_at.kind == RSD_CUDA && src_at.kind == RSD_CUDA && dst_at.device != src_at.device) {
		cuda_peer_enable(src_at.device, dst_at.device);
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
#endif /* RSD_HAVE_CUDA */
