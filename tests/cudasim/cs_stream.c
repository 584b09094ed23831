// SPDX-License-Identifier: MIT
/*
 * The CUDA runtime double: streams, events, host functions and waiting.
 *
 * A cudaStream_t the double hands out is a simulated-device stream (so a
 * test can drive it with rsd_simdev_stream_complete()); 0, cudaStreamLegacy
 * and cudaStreamPerThread stand for the current device's default stream.
 * Handles are recognized by identity in the double's lists, never by
 * reading the caller's pointer, so a stale or foreign handle is
 * cudaErrorInvalidResourceHandle, not a crash.
 *
 * A CUDA event is created once and recorded again and again: each record
 * is a new simulated-device event (struct cs_rec), and the event points at
 * its latest one. A record is reference-counted because a thread may still
 * be waiting on it in cudaEventSynchronize when the event is recorded
 * again or destroyed. A record of a timing event (no
 * cudaEventDisableTiming) also queues, just before it, a host function
 * that stamps the host clock when the stream reaches it: what
 * cudaEventElapsedTime subtracts, as the GPU subtracts its own clock's.
 *
 * Waiting (stream, event and device synchronization) blocks in the
 * simulated device until the work has run, whatever makes it progress.
 * cs.lock is never held while waiting.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "cs.h"

/* When a timing event's record was reached on its stream. Referenced by
 * the record and by the host function that sets it (which may run after
 * the record is gone); freed by the last. */
struct cs_stamp {
	_Atomic uint64_t ns; /* 0: not reached yet */
	atomic_int refs;
};

struct cs_stream {
	void *sim; /* the simulated stream; also the cudaStream_t value */
	unsigned flags;
	unsigned long long id; /* cudaStreamGetId: never reused */
	struct cs_lane *lane;
	struct cs_stream *next; /* cs.streams */
};

struct cs_rec {
	void *sim;		/* the simulated-device event of one record */
	unsigned refs;		/* protected by cs.lock: the event's, and waiters' */
	struct cs_stamp *stamp; /* a timing event's; NULL otherwise */
};

struct cs_event {
	unsigned flags;
	int device;	       /* current device at creation */
	struct cs_rec *rec;    /* protected by cs.lock; NULL: never recorded */
	struct cs_event *next; /* cs.events */
};

static bool is_default(cudaStream_t s)
{
	return !s || s == cudaStreamLegacy || s == cudaStreamPerThread;
}

/* With cs.lock held. */
static struct cs_stream *find_stream(const void *p)
{
	for (struct cs_stream *s = cs.streams; s; s = s->next)
		if (s->sim == p)
			return s;
	return NULL;
}

void *cs_stream_resolve(cudaStream_t s)
{
	void *sim = NULL;

	if (is_default(s))
		return cs.ndevices ? cs.ops->default_stream(cs.sd, cs_current_device()) : NULL;
	pthread_mutex_lock(&cs.lock);
	if (find_stream(s))
		sim = s;
	pthread_mutex_unlock(&cs.lock);
	return sim;
}

struct cs_lane *cs_lane_of(void *stream)
{
	struct cs_stream *s = find_stream(stream);

	if (s)
		return s->lane;
	/* A default stream, told by identity (asking the simulated device
	 * for its device fails once that device is lost). */
	for (int d = 0; d < cs.ndevices; d++)
		if (cs.ops->default_stream(cs.sd, d) == stream)
			return cs.default_lane[d];
	return NULL;
}

cudaError_t cs_stream_ctx(void *stream)
{
	struct cs_lane *l;
	int dev;

	pthread_mutex_lock(&cs.lock);
	l = cs_lane_of(stream);
	dev = l ? l->device : -1;
	pthread_mutex_unlock(&cs.lock);
	return cs_ctx(dev);
}

cudaError_t cs_stream_wait(void *stream)
{
	return cs.ops->stream_sync(cs.sd, stream) ? cs_ret(cudaErrorUnknown) : cudaSuccess;
}

/* ---- host functions ---- */

struct cs_host_func {
	void (*fn)(void *);
	void *arg;
};

/* Runs on whichever thread makes the stream progress. */
static void host_func_run(void *p)
{
	struct cs_host_func hf = *(struct cs_host_func *)p;

	free(p);
	cs_set_in_host_func(true);
	hf.fn(hf.arg);
	cs_set_in_host_func(false);
}

cudaError_t cs_queue_host_func(void *stream, void (*fn)(void *), void *arg)
{
	struct cs_host_func *hf = malloc(sizeof(*hf));

	if (!hf)
		return cs_ret(cudaErrorMemoryAllocation);
	hf->fn = fn;
	hf->arg = arg;
	if (rsd_simdev_launch_host_func(cs.sd, stream, host_func_run, hf)) {
		free(hf);
		return cs_ret(cudaErrorUnknown);
	}
	cs_stream_mark(stream);
	return cudaSuccess;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *userData)
{
	cudaError_t e = cs_enter(CS_cudaLaunchHostFunc);
	void *st;

	if (e)
		return e;
	if (!fn)
		return cs_ret(cudaErrorInvalidValue);
	st = cs_stream_resolve(stream);
	if (!st)
		return cs_ret(cudaErrorInvalidResourceHandle);
	e = cs_stream_ctx(st);
	return e ? e : cs_queue_host_func(st, fn, userData);
}

/* ---- streams ---- */

/* The last id given to a created stream (cs.lock). */
static unsigned long long last_stream_id = 1ull << 16;

static cudaError_t stream_create(cudaStream_t *pStream, unsigned flags)
{
	struct cs_stream *s;
	void *sim = NULL;
	cudaError_t e;

	if (!pStream || (flags & ~(unsigned)cudaStreamNonBlocking))
		return cs_ret(cudaErrorInvalidValue);
	if (!cs.ndevices)
		return cs_ret(cudaErrorNoDevice);
	e = cs_ctx(cs_current_device());
	if (e)
		return e;
	s = calloc(1, sizeof(*s));
	if (!s)
		return cs_ret(cudaErrorMemoryAllocation);
	if (rsd_simdev_stream_create(cs.sd, cs_current_device(), &sim)) {
		free(s);
		return cs_ret(cudaErrorMemoryAllocation);
	}
	s->lane = cs_lane_new(sim, cs_current_device());
	if (!s->lane) {
		rsd_simdev_stream_destroy(cs.sd, sim);
		free(s);
		return cs_ret(cudaErrorMemoryAllocation);
	}
	s->sim = sim;
	s->flags = flags;
	pthread_mutex_lock(&cs.lock);
	/* Ids above the default streams' (1 + device), unique for the
	 * process's life, as the runtime's are, though a handle may come
	 * back (the simulated stream's memory is reused). */
	s->id = ++last_stream_id;
	s->next = cs.streams;
	cs.streams = s;
	pthread_mutex_unlock(&cs.lock);
	*pStream = (cudaStream_t)sim;
	return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *pStream)
{
	cudaError_t e = cs_enter(CS_cudaStreamCreate);

	return e ? e : stream_create(pStream, cudaStreamDefault);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)
{
	cudaError_t e = cs_enter(CS_cudaStreamCreateWithFlags);

	return e ? e : stream_create(pStream, flags);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
	cudaError_t e = cs_enter(CS_cudaStreamDestroy);
	struct cs_stream **pp, *s = NULL;

	if (e)
		return e;
	if (cs_stream_resolve(stream) && !is_default(stream)) {
		e = cs_stream_ctx(stream);
		if (e)
			return e;
	}
	pthread_mutex_lock(&cs.lock);
	for (pp = &cs.streams; *pp; pp = &(*pp)->next) {
		if ((*pp)->sim == (void *)stream) {
			s = *pp;
			*pp = s->next;
			break;
		}
	}
	pthread_mutex_unlock(&cs.lock);
	if (!s)
		return cs_ret(cudaErrorInvalidResourceHandle);
	/* Returns at once; work already queued still runs. */
	rsd_simdev_stream_destroy(cs.sd, s->sim);
	cs_lane_retire(s->lane);
	free(s);
	return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
	cudaError_t e = cs_enter(CS_cudaStreamSynchronize);
	void *st;

	if (e)
		return e;
	st = cs_stream_resolve(stream);
	if (!st)
		return cs_ret(cudaErrorInvalidResourceHandle);
	e = cs_stream_ctx(st);
	return e ? e : cs_stream_wait(st);
}

cudaError_t cudaStreamQuery(cudaStream_t stream)
{
	cudaError_t e = cs_enter(CS_cudaStreamQuery);
	void *st;
	int done;

	if (e)
		return e;
	st = cs_stream_resolve(stream);
	if (!st)
		return cs_ret(cudaErrorInvalidResourceHandle);
	e = cs_stream_ctx(st);
	if (e)
		return e;
	done = cs_stream_idle(st);
	if (done < 0)
		return cs_ret(cudaErrorUnknown);
	return done ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaStreamGetDevice(cudaStream_t hStream, int *device)
{
	cudaError_t e = cs_enter(CS_cudaStreamGetDevice);
	void *st;

	if (e)
		return e;
	if (!device)
		return cs_ret(cudaErrorInvalidValue);
	st = cs_stream_resolve(hStream);
	if (st && (e = cs_stream_ctx(st)))
		return e;
	if (!st || cs.ops->stream_device(cs.sd, st, device))
		return cs_ret(cudaErrorInvalidResourceHandle);
	return cudaSuccess;
}

/* What cudaStreamGetFlags and cudaStreamGetId answer (either out may be
 * NULL): the current device's default stream's, or a created stream's. */
static cudaError_t stream_props(cudaStream_t hStream, unsigned *flags, unsigned long long *id)
{
	cudaError_t e = cs_stream_ctx(cs_stream_resolve(hStream));
	struct cs_stream *s;

	if (e)
		return e;
	if (is_default(hStream)) {
		if (flags)
			*flags = cudaStreamDefault;
		if (id)
			*id = 1ull + (unsigned)cs_current_device();
		return cudaSuccess;
	}
	pthread_mutex_lock(&cs.lock);
	s = find_stream(hStream);
	if (s && flags)
		*flags = s->flags;
	if (s && id)
		*id = s->id;
	pthread_mutex_unlock(&cs.lock);
	return s ? cudaSuccess : cs_ret(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaStreamGetFlags(cudaStream_t hStream, unsigned int *flags)
{
	cudaError_t e = cs_enter(CS_cudaStreamGetFlags);

	if (e)
		return e;
	return flags ? stream_props(hStream, flags, NULL) : cs_ret(cudaErrorInvalidValue);
}

cudaError_t cudaStreamGetId(cudaStream_t hStream, unsigned long long *streamId)
{
	cudaError_t e = cs_enter(CS_cudaStreamGetId);

	if (e)
		return e;
	return streamId ? stream_props(hStream, NULL, streamId) : cs_ret(cudaErrorInvalidValue);
}

/* ---- events ---- */

/* With cs.lock held. */
static struct cs_event *find_event(const void *p)
{
	for (struct cs_event *ev = cs.events; ev; ev = ev->next)
		if ((const void *)ev == p)
			return ev;
	return NULL;
}

/* cs_ctx of an event's device (an unknown event: cudaSuccess, the caller
 * refuses it). */
static cudaError_t event_ctx(cudaEvent_t event)
{
	struct cs_event *ev;
	int dev;

	pthread_mutex_lock(&cs.lock);
	ev = find_event(event);
	dev = ev ? ev->device : -1;
	pthread_mutex_unlock(&cs.lock);
	return cs_ctx(dev);
}

static void stamp_put(struct cs_stamp *st)
{
	if (st && atomic_fetch_sub(&st->refs, 1) == 1)
		free(st);
}

/* The host function before a timing record: the stream got there now. */
static void stamp_run(void *p)
{
	struct cs_stamp *st = p;
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	atomic_store(&st->ns, (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec + 1);
	stamp_put(st);
}

/* With cs.lock held: drop one reference to a record. */
static void rec_put(struct cs_rec *r)
{
	if (r && --r->refs == 0) {
		cs.ops->event_destroy(cs.sd, r->sim);
		stamp_put(r->stamp);
		free(r);
	}
}

static cudaError_t event_create(cudaEvent_t *event, unsigned flags)
{
	struct cs_event *ev;
	cudaError_t e;

	if (!event || (flags & ~(unsigned)(cudaEventBlockingSync | cudaEventDisableTiming |
					   cudaEventInterprocess)))
		return cs_ret(cudaErrorInvalidValue);
	if (!cs.ndevices)
		return cs_ret(cudaErrorNoDevice);
	e = cs_ctx(cs_current_device());
	if (e)
		return e;
	ev = calloc(1, sizeof(*ev));
	if (!ev)
		return cs_ret(cudaErrorMemoryAllocation);
	ev->flags = flags;
	ev->device = cs_current_device();
	pthread_mutex_lock(&cs.lock);
	ev->next = cs.events;
	cs.events = ev;
	pthread_mutex_unlock(&cs.lock);
	*event = (cudaEvent_t)ev;
	return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *event)
{
	cudaError_t e = cs_enter(CS_cudaEventCreate);

	return e ? e : event_create(event, cudaEventDefault);
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
	cudaError_t e = cs_enter(CS_cudaEventCreateWithFlags);

	return e ? e : event_create(event, flags);
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
	cudaError_t e = cs_enter(CS_cudaEventRecord);
	struct cs_rec *r = NULL;
	struct cs_event *ev;
	int dev = -1;
	void *st;

	if (e)
		return e;
	st = cs_stream_resolve(stream);
	if (!st)
		return cs_ret(cudaErrorInvalidResourceHandle);
	e = cs_stream_ctx(st);
	if (!e)
		e = event_ctx(event);
	if (e)
		return e;
	pthread_mutex_lock(&cs.lock);
	ev = find_event(event);
	/* An event belongs to the device it was created on; recording it on
	 * another device's stream is refused, as by the runtime. */
	if (!ev || cs.ops->stream_device(cs.sd, st, &dev) || dev != ev->device) {
		e = cudaErrorInvalidResourceHandle;
		goto out;
	}
	r = calloc(1, sizeof(*r));
	if (r && !(ev->flags & cudaEventDisableTiming)) {
		r->stamp = calloc(1, sizeof(*r->stamp));
		if (r->stamp)
			atomic_init(&r->stamp->refs, 2);
		if (!r->stamp || rsd_simdev_launch_host_func(cs.sd, st, stamp_run, r->stamp)) {
			free(r->stamp);
			free(r);
			r = NULL;
		}
	}
	if (!r || cs.ops->event_record(cs.sd, st, &r->sim)) {
		if (r)
			stamp_put(r->stamp); /* its host function holds the other */
		free(r);
		e = cudaErrorUnknown;
		goto out;
	}
	r->refs = 1;
	rec_put(ev->rec);
	ev->rec = r;
out:
	pthread_mutex_unlock(&cs.lock);
	if (e == cudaSuccess)
		cs_stream_mark(st);
	return cs_ret(e);
}

cudaError_t cudaEventQuery(cudaEvent_t event)
{
	cudaError_t e = cs_enter(CS_cudaEventQuery);
	struct cs_event *ev;
	int done = 1;

	if (!e)
		e = event_ctx(event);
	if (e)
		return e;
	pthread_mutex_lock(&cs.lock);
	ev = find_event(event);
	if (ev && ev->rec)
		done = cs.ops->event_query(cs.sd, ev->rec->sim);
	pthread_mutex_unlock(&cs.lock);
	if (!ev)
		return cs_ret(cudaErrorInvalidResourceHandle);
	if (done < 0)
		return cs_ret(cudaErrorUnknown);
	return done ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
	cudaError_t e = cs_enter(CS_cudaEventSynchronize);
	struct cs_event *ev;
	struct cs_rec *r = NULL;
	int rc = 0;

	if (!e)
		e = event_ctx(event);
	if (e)
		return e;
	pthread_mutex_lock(&cs.lock);
	ev = find_event(event);
	if (ev && ev->rec) {
		r = ev->rec;
		r->refs++;
	}
	pthread_mutex_unlock(&cs.lock);
	if (!ev)
		return cs_ret(cudaErrorInvalidResourceHandle);
	if (!r)
		return cudaSuccess; /* never recorded: nothing to wait for */
	rc = cs.ops->event_sync(cs.sd, r->sim);
	pthread_mutex_lock(&cs.lock);
	rec_put(r);
	pthread_mutex_unlock(&cs.lock);
	return rc ? cs_ret(cudaErrorUnknown) : cudaSuccess;
}

/* The stream's later work waits for the event's latest record (taken now,
 * as the runtime does); the host does not wait. A never-recorded event is
 * complete. */
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
	cudaError_t e = cs_enter(CS_cudaStreamWaitEvent);
	struct cs_event *ev;
	void *st;

	if (e)
		return e;
	if (flags & ~(unsigned)cudaEventWaitExternal)
		return cs_ret(cudaErrorInvalidValue);
	st = cs_stream_resolve(stream);
	if (!st)
		return cs_ret(cudaErrorInvalidResourceHandle);
	e = cs_stream_ctx(st);
	if (!e)
		e = event_ctx(event);
	if (e)
		return e;
	pthread_mutex_lock(&cs.lock);
	ev = find_event(event);
	if (ev && ev->rec && cs.ops->stream_wait_event(cs.sd, st, ev->rec->sim))
		e = cudaErrorUnknown;
	pthread_mutex_unlock(&cs.lock);
	if (!ev)
		return cs_ret(cudaErrorInvalidResourceHandle);
	if (e)
		return cs_ret(e);
	cs_stream_mark(st);
	return cudaSuccess;
}

/* The time between two completed records of timing events of one device,
 * in ms, as the runtime answers it: cudaErrorInvalidResourceHandle for a
 * never-recorded or non-timing event or two devices' events,
 * cudaErrorNotReady while either is pending. */
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
	cudaError_t e = cs_enter(CS_cudaEventElapsedTime);
	struct cs_event *a, *b;
	uint64_t t0 = 0, t1 = 0;
	int done = 1;

	if (!e)
		e = event_ctx(start);
	if (!e)
		e = event_ctx(end);
	if (e)
		return e;
	if (!ms)
		return cs_ret(cudaErrorInvalidValue);
	pthread_mutex_lock(&cs.lock);
	a = find_event(start);
	b = find_event(end);
	if (!a || !b || !a->rec || !b->rec || !a->rec->stamp || !b->rec->stamp ||
	    a->device != b->device) {
		e = cudaErrorInvalidResourceHandle;
	} else {
		done = cs.ops->event_query(cs.sd, a->rec->sim);
		if (done > 0)
			done = cs.ops->event_query(cs.sd, b->rec->sim);
		t0 = atomic_load(&a->rec->stamp->ns);
		t1 = atomic_load(&b->rec->stamp->ns);
	}
	pthread_mutex_unlock(&cs.lock);
	if (e)
		return cs_ret(e);
	if (done < 0)
		return cs_ret(cudaErrorUnknown);
	if (!done || !t0 || !t1)
		return cs_ret(cudaErrorNotReady);
	*ms = (float)((double)((int64_t)(t1 - t0)) / 1e6);
	return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event)
{
	cudaError_t e = cs_enter(CS_cudaEventDestroy);
	struct cs_event **pp, *ev = NULL;

	if (!e)
		e = event_ctx(event);
	if (e)
		return e;
	pthread_mutex_lock(&cs.lock);
	for (pp = &cs.events; *pp; pp = &(*pp)->next) {
		if (*pp == (struct cs_event *)event) {
			ev = *pp;
			*pp = ev->next;
			rec_put(ev->rec);
			break;
		}
	}
	pthread_mutex_unlock(&cs.lock);
	if (!ev)
		return cs_ret(cudaErrorInvalidResourceHandle);
	free(ev);
	return cudaSuccess;
}
