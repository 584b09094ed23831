// SPDX-License-Identifier: MIT
/*
 * The CUDA driver's streams and events: its own non-blocking streams
 * (a device's transfer stream, what a NULL stream means; one per copy
 * direction; one per ordered device pair, with peer access enabled once
 * per pair), a stream's device, stream and device syncs, and events from
 * per-device free lists (cudaEventDisableTiming), whose query and sync
 * also report a failed gate before them on their stream (cuda_gate.c).
 *
 * Locking: cuda.lock protects each driver stream's creation, the peer
 * states and the event free lists; a driver stream is created and peer
 * access enabled with it held. No sync is made under a lock. An event
 * gives back its gate line (under gates.lock, cuda_gate.c) before it takes
 * cuda.lock, never both at once.
 */
#include <pthread.h>
#include <stdlib.h>

#include "cuda_internal.h"

#if RSD_HAVE_CUDA
/* A driver stream of device, created on first use. */
static int driver_stream(int device, struct cuda_stream *cs, cudaStream_t *out)
{
	cudaError_t e = cudaSuccess;
	int prev, rc = 0;

	pthread_mutex_lock(&cuda.lock);
	if (!cs->made) {
		rc = cuda_device_enter(device, &prev);
		if (!rc) {
			e = cudaStreamCreateWithFlags(&cs->s, cudaStreamNonBlocking);
			cuda_device_leave(device, prev);
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
int cuda_transfer_stream(int device, cudaStream_t *out)
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
	if (cuda_device_enter(device, &prev))
		return PEER_OFF;
	e = cudaDeviceEnablePeerAccess(peer, 0);
	cuda_device_leave(device, prev);
	if (e == cudaSuccess)
		return PEER_ON;
	/* Someone (the application) enabled it already: as good. */
	(void)cudaGetLastError();
	return e == cudaErrorPeerAccessAlreadyEnabled ? PEER_ON : PEER_OFF;
}

/* Peer access between a and b, both ways, tried once per pair: without it
 * cudaMemcpyPeerAsync bounces through host memory. A failure only leaves
 * copies on the slow path, so it is not an error. */
void cuda_peer_enable(int a, int b)
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

void *cu_transfer_stream(void *ctx, struct rsd_location dst, struct rsd_location src)
{
	struct cuda_stream *cs = NULL;
	cudaStream_t s = NULL;
	int dev = -1;

	(void)ctx;
	if (cuda_check_location("transfer_stream", dst, true) ||
	    cuda_check_location("transfer_stream", src, true) ||
	    cuda_check_lost_at("transfer_stream", dst) ||
	    cuda_check_lost_at("transfer_stream", src))
		return NULL;
	if (dst.kind == RSD_CUDA && src.kind == RSD_CUDA && dst.device != src.device) {
		cuda_peer_enable(src.device, dst.device);
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

int cu_stream_device(void *ctx, void *stream, int *device)
{
	cudaError_t e;

	(void)ctx;
	if (!device)
		return rsd__err(RSD_ETYPE, "CUDA driver: stream_device needs a device pointer");
	if (!cuda_ndevices())
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

void *cu_default_stream(void *ctx, int device)
{
	cudaStream_t s;

	(void)ctx;
	if (device < 0 || device >= cuda_ndevices() || cuda_transfer_stream(device, &s))
		return NULL;
	return s;
}

int cu_stream_sync(void *ctx, void *stream)
{
	cudaError_t e;
	int lost = -1;

	(void)ctx;
	if (stream) {
		e = cudaStreamSynchronize((cudaStream_t)stream);
		if (e != cudaSuccess)
			return cuda_fail("cudaStreamSynchronize", e);
		cuda_timed_reap();
		return 0;
	}
	/* NULL stands for the driver's streams: synchronize each one made, on
	 * every sound device; a lost one fails the call after the others. */
	for (int i = 0; i < cuda_ndevices(); i++) {
		struct cuda_dev *d = &cuda.dev[i];

		if (cuda_dev_lost(i)) {
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
	cuda_timed_reap();
	return cuda_check_lost("stream_sync of the driver's streams", lost);
}

int cu_device_sync(void *ctx, int device)
{
	cudaError_t e;
	int prev, rc;

	(void)ctx;
	if (device < 0 || device >= cuda_ndevices())
		return cuda_no_device("device_sync", device);
	rc = cuda_check_lost("device_sync", device);
	if (!rc)
		rc = cuda_device_enter(device, &prev);
	if (rc)
		return rc;
	e = cudaDeviceSynchronize();
	cuda_device_leave(device, prev);
	if (e != cudaSuccess)
		return cuda_fail("cudaDeviceSynchronize", e);
	cuda_timed_reap();
	return 0;
}

/* The device of stream, one of the driver's and not lost, into *dev. */
int cuda_stream_sound_device(void *ctx, const char *op, void *stream, int *dev)
{
	int rc = cu_stream_device(ctx, stream, dev);

	if (rc)
		return rc;
	if (*dev < 0 || *dev >= cuda.ndevices)
		return cuda_no_device(op, *dev);
	return cuda_check_lost(op, *dev);
}

/* Back to its device's free list: CUDA events are costly to create. */
static void event_put(struct cuda_event *ev)
{
	cuda_event_ungate(ev);
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
	rc = cuda_device_enter(dev, &prev);
	if (rc) {
		free(ev);
		return rc;
	}
	e = cudaEventCreateWithFlags(&ev->ev, cudaEventDisableTiming);
	cuda_device_leave(dev, prev);
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

int cu_event_record(void *ctx, void *stream, void **event)
{
	struct cuda_event *ev = NULL;
	cudaError_t e;
	int dev = -1, rc;

	if (!event)
		return rsd__err(RSD_ETYPE, "CUDA driver: event_record needs an event pointer");
	*event = NULL;
	rc = cuda_stream_sound_device(ctx, "event_record", stream, &dev);
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
	cuda_event_gates(ev, (cudaStream_t)stream);
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

/* event, live and of a device not lost, into *out; else op's error. */
static int sound_event(void *event, const char *op, struct cuda_event **out)
{
	struct cuda_event *ev = live_event(event);
	int rc;

	if (!ev)
		return -RSD_ETYPE;
	rc = cuda_check_lost(op, ev->device);
	if (!rc)
		*out = ev;
	return rc;
}

int cu_event_query(void *ctx, void *event)
{
	struct cuda_event *ev = NULL;
	cudaError_t e;
	int rc;

	(void)ctx;
	rc = sound_event(event, "event_query", &ev);
	if (rc)
		return rc;
	e = cudaEventQuery(ev->ev);
	if (e == cudaSuccess) {
		cuda_timed_reap();
		rc = cuda_event_gate_failed(ev, "event_query");
		return rc ? rc : 1;
	}
	if (e == cudaErrorNotReady)
		return 0;
	return cuda_fail("cudaEventQuery", e);
}

int cu_event_sync(void *ctx, void *event)
{
	struct cuda_event *ev = NULL;
	cudaError_t e;
	int rc;

	(void)ctx;
	rc = sound_event(event, "event_sync", &ev);
	if (rc)
		return rc;
	e = cudaEventSynchronize(ev->ev);
	if (e != cudaSuccess)
		return cuda_fail("cudaEventSynchronize", e);
	cuda_timed_reap();
	return cuda_event_gate_failed(ev, "event_sync");
}

void cu_event_destroy(void *ctx, void *event)
{
	struct cuda_event *ev = event;

	(void)ctx;
	if (ev && ev->magic == CUDA_EVENT_MAGIC)
		event_put(ev);
}

int cu_stream_wait_event(void *ctx, void *stream, void *event)
{
	struct cuda_event *ev = NULL;
	cudaError_t e;
	int rc;

	(void)ctx;
	if (!stream)
		return rsd__err(RSD_ETYPE, "CUDA driver: stream_wait_event needs a stream, not "
					   "NULL");
	rc = sound_event(event, "stream_wait_event", &ev);
	if (rc)
		return rc;
	e = cudaStreamWaitEvent((cudaStream_t)stream, ev->ev, 0);
	return e == cudaSuccess ? 0 : cuda_fail("cudaStreamWaitEvent", e);
}
#endif /* RSD_HAVE_CUDA */
