// SPDX-License-Identifier: MIT
/*
 * Streams and events of the simulated device (model in simdev.h; who runs
 * queued work in simdev_progress.c).
 *
 * Streams are found by identity in the simulator's list, never by reading
 * the caller's pointer, so any pointer can be tested for stream-ness. Event
 * objects are driver-issued and never freed before the simulator is: a
 * destroyed event goes back to a free list (and is reused), and its magic
 * tells a live event from a stale one.
 *
 * Synchronizing (event_sync, stream_sync, device_sync) waits, on sd->cond,
 * until the awaited work has run: it never runs work itself. In on-command
 * mode only another thread calling rsd_simdev_stream_complete() or
 * rsd_simdev_complete_all() (or a switch of mode) can end such a wait; a sync
 * with nobody to complete the work waits forever, which is the caller's bug,
 * as a cudaStreamSynchronize() on a stream blocked by a never-set flag is.
 */
#include <stdio.h>
#include <stdlib.h>

#include "simdev.h"

/* A lookup in the set of linked streams: a device with thousands of
 * streams answers as fast as with a few, as the CUDA runtime does. */
struct sim_stream *rsd__sim_find_any_stream(struct rsd_simdev *sd, const void *p)
{
	return rsd__ptrmap_get(&sd->stream_set, p, NULL) ? (struct sim_stream *)p : NULL;
}

struct sim_stream *rsd__sim_find_stream(struct rsd_simdev *sd, const void *p)
{
	struct sim_stream *s = rsd__sim_find_any_stream(sd, p);

	return s && !s->retired ? s : NULL;
}

int rsd__sim_stream_link(struct rsd_simdev *sd, struct sim_stream *s, int device, bool is_default)
{
	if (rsd__ptrmap_set(&sd->stream_set, s, 0))
		return rsd__err(RSD_ENOMEM, "simulated device: out of memory for a stream");
	s->magic = SIM_STREAM_MAGIC;
	s->device = device;
	s->is_default = is_default;
	s->role = SIM_ROLE_COMPUTE;
	s->head = NULL;
	s->tail = &s->head;
	s->prev = NULL;
	s->next = sd->streams;
	if (s->next)
		s->next->prev = s;
	sd->streams = s;
	return 0;
}

static bool event_complete(const struct sim_event *ev)
{
	return ev->done || (ev->stream && ev->seq <= ev->stream->completed);
}

/* The device failure ev reports (recorded after a failed copy on its
 * stream, or after a wait that inherited one), or NULL. */
static const struct sim_fault *event_fault(const struct sim_event *ev)
{
	const struct sim_fault *f = ev->stream ? &ev->stream->fault : &ev->fault;

	return f->err && ev->seq > f->after ? f : NULL;
}

/* With sd->lock held: event_query's and event_sync's answer for a failed
 * event, recorded. */
static int event_failed(const struct sim_event *ev, const struct sim_fault *f)
{
	if (f->gate)
		return rsd__err(f->err,
				"simulated device: event %p comes after a gate opened as failed "
				"(on its stream, or on one its stream waited for): %s",
				(const void *)ev, rsd_strerror(f->err));
	if (f->lost)
		return rsd__err(f->err,
				"simulated device: event %p comes after a copy that touched "
				"cuda:%d, which was lost (on its stream, or on one its stream "
				"waited for)",
				(const void *)ev, f->device);
	return rsd__err(f->err,
			"simulated device: event %p comes after a copy that failed on the device "
			"(on its stream, or on one its stream waited for): injected failure of "
			"%s call %lu (%s)",
			(const void *)ev, rsd__sim_op_name(RSD_SIMDEV_COPY_EXEC), f->call,
			rsd_strerror(f->err));
}

/* With sd->lock held: a copy of the lost device's that started before
 * the loss and that another thread still runs (its bytes moving, or its
 * modelled time not over), which the loss cannot stop. */
static bool lost_copy_running(struct rsd_simdev *sd, int device)
{
	for (const struct sim_stream *s = sd->streams; s; s = s->next)
		if (s->device == device && s->running && s->current &&
		    s->current->kind == SIM_WORK_COPY && !s->current->skip &&
		    !pthread_equal(s->runner, pthread_self()))
			return true;
	return false;
}

/* With sd->lock held: 0, or for an event of a lost device -RSD_EDEVLOST,
 * recorded: complete or not, such an event reports the loss. The answer
 * lets the caller free what the device's work used, so it waits for a
 * copy the loss caught running: it still reads and writes its ends. */
static int event_lost(struct rsd_simdev *sd, const struct sim_event *ev)
{
	char op[64];

	if (!sd->dev[ev->device].lost)
		return 0;
	while (lost_copy_running(sd, ev->device))
		rsd__sim_wait(sd);
	snprintf(op, sizeof(op), "event %p", (const void *)ev);
	return rsd__sim_lost(sd, ev->device, op);
}

static void event_unlink(struct sim_event *ev)
{
	if (ev->stream) {
		if (ev->prev)
			ev->prev->next = ev->next;
		else
			ev->stream->events = ev->next;
		if (ev->next)
			ev->next->prev = ev->prev;
	}
	ev->prev = ev->next = NULL;
	ev->stream = NULL;
}

static void stream_unlink(struct rsd_simdev *sd, struct sim_stream *s)
{
	if (s->prev)
		s->prev->next = s->next;
	else
		sd->streams = s->next;
	if (s->next)
		s->next->prev = s->prev;
	rsd__ptrmap_del(&sd->stream_set, s);
	s->magic = 0;
}

void rsd__sim_stream_put(struct rsd_simdev *sd, struct sim_stream *s)
{
	if (!s->retired || s->head || s->running || s->refs)
		return;
	/* Its work has all run: its events stay valid, and complete, and
	 * keep reporting its fault. */
	while (s->events) {
		struct sim_event *ev = s->events;

		event_unlink(ev);
		ev->done = true;
		ev->fault = s->fault;
	}
	stream_unlink(sd, s);
	free(s);
}

void rsd__sim_streams_destroy(struct rsd_simdev *sd)
{
	struct sim_stream *s, *snext;
	struct sim_event *ev, *enext;

	/* Work still queued is dropped, not run: what it would read or write
	 * may already be gone (the simulator's memory goes next). */
	for (s = sd->streams; s; s = snext) {
		snext = s->next;
		/* A copy a stopped worker parked in flight. */
		if (s->running && s->inflight)
			free(s->current);
		while (s->head) {
			struct sim_work *w = s->head;

			s->head = w->next;
			free(w);
		}
		if (!s->embedded)
			free(s);
	}
	sd->streams = NULL;
	rsd__ptrmap_free(&sd->stream_set);
	rsd__list_init(&sd->pending);
	for (ev = sd->all_events; ev; ev = enext) {
		enext = ev->all_next;
		free(ev);
	}
	sd->all_events = sd->free_events = NULL;
}

/* ---- control API ---- */

int rsd_simdev_stream_create(struct rsd_simdev *sd, int device, void **stream)
{
	struct sim_stream *s;
	int rc;

	if (!sd || !stream)
		return rsd__err(RSD_ETYPE, "rsd_simdev_stream_create: %s is NULL",
				sd ? "stream" : "simdev");
	if (device < 0 || device >= sd->ndevices)
		return rsd__err(RSD_EINVAL,
				"rsd_simdev_stream_create: no device %d (%d simulated "
				"devices)",
				device, sd->ndevices);
	s = calloc(1, sizeof(*s));
	if (!s)
		return rsd__err(RSD_ENOMEM, "rsd_simdev_stream_create: out of memory");
	pthread_mutex_lock(&sd->lock);
	rc = rsd__sim_lost(sd, device, "rsd_simdev_stream_create");
	if (!rc)
		rc = rsd__sim_stream_link(sd, s, device, false);
	pthread_mutex_unlock(&sd->lock);
	if (rc) {
		free(s);
		return rc;
	}
	*stream = s;
	return 0;
}

/* Like cudaStreamDestroy: the handle is gone at once, its queued work still
 * runs (by whatever mode makes progress), and the stream object is freed
 * when that work has drained; events recorded on it stay valid. */
void rsd_simdev_stream_destroy(struct rsd_simdev *sd, void *stream)
{
	struct sim_stream *s;

	if (!sd)
		return;
	pthread_mutex_lock(&sd->lock);
	s = rsd__sim_find_stream(sd, stream);
	if (s && !s->is_default) {
		s->retired = true;
		rsd__sim_stream_put(sd, s);
	}
	pthread_mutex_unlock(&sd->lock);
}

void rsd_simdev_stream_complete(struct rsd_simdev *sd, void *stream)
{
	struct sim_stream *s;

	if (!sd)
		return;
	pthread_mutex_lock(&sd->lock);
	s = stream ? rsd__sim_find_any_stream(sd, stream) : NULL;
	if (s || !stream)
		rsd__sim_drive(sd, s, true, sd->tickets);
	pthread_mutex_unlock(&sd->lock);
}

void rsd_simdev_complete_all(struct rsd_simdev *sd)
{
	if (!sd)
		return;
	pthread_mutex_lock(&sd->lock);
	rsd__sim_drive(sd, NULL, false, sd->tickets);
	pthread_mutex_unlock(&sd->lock);
}

static unsigned stream_pending(const struct sim_stream *s)
{
	unsigned n = 0;

	for (const struct sim_event *ev = s->events; ev; ev = ev->next)
		n += !event_complete(ev);
	return n;
}

unsigned rsd_simdev_pending_events(struct rsd_simdev *sd, void *stream)
{
	struct sim_stream *s;
	unsigned n = 0;

	if (!sd)
		return 0;
	pthread_mutex_lock(&sd->lock);
	if (stream) {
		s = rsd__sim_find_any_stream(sd, stream);
		if (s)
			n = stream_pending(s);
	} else {
		for (s = sd->streams; s; s = s->next)
			n += stream_pending(s);
	}
	pthread_mutex_unlock(&sd->lock);
	return n;
}

int rsd_simdev_launch_host_func(struct rsd_simdev *sd, void *stream, void (*fn)(void *arg),
				void *arg)
{
	struct sim_stream *s;
	struct sim_work *w;

	if (!sd || !fn)
		return rsd__err(RSD_ETYPE, "rsd_simdev_launch_host_func: %s is NULL",
				sd ? "fn" : "simdev");
	w = calloc(1, sizeof(*w));
	if (!w)
		return rsd__err(RSD_ENOMEM, "rsd_simdev_launch_host_func: out of memory");
	w->kind = SIM_WORK_HOST_FUNC;
	w->host.fn = fn;
	w->host.arg = arg;
	pthread_mutex_lock(&sd->lock);
	s = rsd__sim_find_stream(sd, stream);
	if (!s) {
		pthread_mutex_unlock(&sd->lock);
		free(w);
		return rsd__err(RSD_ETYPE,
				"rsd_simdev_launch_host_func: %p is not a stream of this "
				"simulated device",
				stream);
	}
	if (s->lost) {
		int rc = rsd__sim_lost(sd, s->device, "rsd_simdev_launch_host_func");

		pthread_mutex_unlock(&sd->lock);
		free(w);
		return rc;
	}
	rsd__sim_enqueue(sd, s, w);
	pthread_mutex_unlock(&sd->lock);
	return 0;
}

/* ---- driver ops ---- */

static int not_a_stream(const void *stream)
{
	return rsd__err(RSD_ETYPE,
			"simulated device: %p is not a stream of this simulated "
			"device",
			stream);
}

int rsd__sim_stream_device(void *ctx, void *stream, int *device)
{
	struct rsd_simdev *sd = ctx;
	struct sim_stream *s;
	int rc = 0;

	if (!device)
		return rsd__err(RSD_ETYPE,
				"simulated device: stream_device needs a device pointer");
	pthread_mutex_lock(&sd->lock);
	s = rsd__sim_find_stream(sd, stream);
	if (!s)
		rc = not_a_stream(stream);
	else if (s->lost)
		rc = rsd__sim_lost(sd, s->device, "stream_device");
	else
		*device = s->device;
	pthread_mutex_unlock(&sd->lock);
	return rc;
}

void *rsd__sim_default_stream(void *ctx, int device)
{
	struct rsd_simdev *sd = ctx;

	if (device < 0 || device >= sd->ndevices)
		return NULL;
	return &sd->dev[device].transfer;
}

/* With sd->lock held: true when every stream (only: that one, which may
 * have drained and gone; device >= 0: those of that device; else the
 * transfer streams) has run its work with a ticket up to upto. */
static bool streams_done(struct rsd_simdev *sd, const void *only, int device, uint64_t upto)
{
	for (struct sim_stream *s = sd->streams; s; s = s->next) {
		if (only	? (const void *)s != only :
		    device >= 0 ? s->device != device :
				  !s->is_default || s->lost)
			continue;
		if (!rsd__sim_stream_done(s, upto))
			return false;
	}
	return true;
}

/* With sd->lock held: the lost device an awaited stream (only) or device
 * is on, or with neither the first lost device; -1 when none. */
static int sync_lost(struct rsd_simdev *sd, const struct sim_stream *only, int device)
{
	if (only)
		return only->lost ? only->device : -1;
	if (device >= 0)
		return sd->dev[device].lost ? device : -1;
	for (int d = 0; d < sd->ndevices; d++)
		if (sd->dev[d].lost)
			return d;
	return -1;
}

/* How long event_wait and stream_wait sleep between two calls of their
 * stop callback. */
#define SIM_STOP_POLL_NS 500000ull

/* With sd->lock held: sleep until woken, or true at once when stop (may be
 * NULL) says to give up. */
static bool wait_or_stop(struct rsd_simdev *sd, bool (*stop)(void *arg), void *arg)
{
	if (!stop) {
		rsd__sim_wait(sd);
		return false;
	}
	if (stop(arg))
		return true;
	rsd__sim_wait_ns(sd, SIM_STOP_POLL_NS);
	return false;
}

/* With sd->lock held: wait until the awaited streams have run their work up
 * to now; a lost device among them ends the wait (at once, or once the
 * sound transfer streams drained, for all of them). 1 when stop said to
 * give up first. */
static int sync_wait(struct rsd_simdev *sd, const struct sim_stream *only, int device,
		     const char *op, bool (*stop)(void *arg), void *arg)
{
	uint64_t upto = sd->tickets;
	int lost;

	for (;;) {
		lost = sync_lost(sd, only, device);
		if (lost >= 0 && (only || device >= 0))
			break;
		if (streams_done(sd, only, device, upto))
			break;
		if (wait_or_stop(sd, stop, arg))
			return 1;
	}
	return lost >= 0 ? rsd__sim_lost(sd, lost, op) : 0;
}

/* stream_sync, and stream_wait with stop (1 when it gave up). */
static int stream_wait(struct rsd_simdev *sd, void *stream, bool (*stop)(void *arg), void *arg)
{
	struct sim_stream *s = NULL;
	int rc;

	pthread_mutex_lock(&sd->lock);
	rc = rsd__sim_enter(sd, RSD_SIMDEV_EVENT_SYNC);
	if (!rc && stream && !(s = rsd__sim_find_stream(sd, stream)))
		rc = not_a_stream(stream);
	if (!rc) {
		/* Its owner may destroy it while we wait (cudaStreamDestroy
		 * returns at once and frees the stream once it drained): hold
		 * it until the wait is over. */
		if (s)
			s->refs++;
		rc = sync_wait(sd, s, -1, "stream_sync", stop, arg);
		if (s) {
			s->refs--;
			rsd__sim_stream_put(sd, s);
		}
	}
	pthread_mutex_unlock(&sd->lock);
	return rc;
}

int rsd__sim_stream_sync(void *ctx, void *stream)
{
	return stream_wait(ctx, stream, NULL, NULL);
}

int rsd__sim_stream_wait(void *ctx, void *stream, bool (*stop)(void *arg), void *arg)
{
	return stream_wait(ctx, stream, stop, arg);
}

int rsd__sim_device_sync(void *ctx, int device)
{
	struct rsd_simdev *sd = ctx;
	int rc;

	pthread_mutex_lock(&sd->lock);
	rc = rsd__sim_enter(sd, RSD_SIMDEV_EVENT_SYNC);
	if (!rc && (device < 0 || device >= sd->ndevices))
		rc = rsd__err(RSD_EINVAL,
			      "simulated device: no device %d to synchronize (%d "
			      "simulated devices)",
			      device, sd->ndevices);
	if (!rc)
		rc = sync_wait(sd, NULL, device, "device_sync", NULL, NULL);
	pthread_mutex_unlock(&sd->lock);
	return rc;
}

int rsd__sim_event_record(void *ctx, void *stream, void **event)
{
	struct rsd_simdev *sd = ctx;
	struct sim_stream *s = NULL;
	struct sim_event *ev = NULL;
	struct sim_work *w = NULL;
	int rc;

	pthread_mutex_lock(&sd->lock);
	rc = rsd__sim_enter(sd, RSD_SIMDEV_EVENT_RECORD);
	if (rc)
		goto out;
	if (!event) {
		rc = rsd__err(RSD_ETYPE, "simulated device: event_record needs an event pointer");
		goto out;
	}
	s = rsd__sim_find_stream(sd, stream);
	if (!s) {
		rc = not_a_stream(stream);
		goto out;
	}
	if (s->lost) {
		rc = rsd__sim_lost(sd, s->device, "event_record");
		goto out;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		rc = rsd__err(RSD_ENOMEM, "simulated device: out of memory for an event record");
		goto out;
	}
	ev = sd->free_events;
	if (ev) {
		sd->free_events = ev->next;
	} else {
		ev = calloc(1, sizeof(*ev));
		if (!ev) {
			free(w);
			rc = rsd__err(RSD_ENOMEM, "simulated device: out of memory for an event");
			goto out;
		}
		ev->all_next = sd->all_events;
		sd->all_events = ev;
	}
	ev->magic = SIM_EVENT_LIVE;
	ev->device = s->device;
	ev->done = false;
	ev->fault = (struct sim_fault){ 0 };
	ev->seq = ++s->recorded;
	ev->ticket = sd->tickets + 1; /* what rsd__sim_enqueue gives w */
	ev->stream = s;
	ev->prev = NULL;
	ev->next = s->events;
	if (ev->next)
		ev->next->prev = ev;
	s->events = ev;
	*event = ev;
	w->kind = SIM_WORK_EVENT;
	w->event_seq = ev->seq;
	rsd__sim_enqueue(sd, s, w);
out:
	pthread_mutex_unlock(&sd->lock);
	return rc;
}

/* With sd->lock held: the live event ev, or NULL with the error recorded. */
static struct sim_event *live_event(void *event)
{
	struct sim_event *ev = event;

	if (!ev || ev->magic != SIM_EVENT_LIVE) {
		rsd__err(RSD_ETYPE,
			 "simulated device: %p is not a live event of the simulated "
			 "device",
			 event);
		return NULL;
	}
	return ev;
}

int rsd__sim_event_query(void *ctx, void *event)
{
	struct rsd_simdev *sd = ctx;
	const struct sim_fault *f;
	struct sim_event *ev;
	int rc;

	pthread_mutex_lock(&sd->lock);
	rc = rsd__sim_enter(sd, RSD_SIMDEV_EVENT_QUERY);
	if (rc)
		goto out;
	ev = live_event(event);
	if (!ev) {
		rc = -RSD_ETYPE;
		goto out;
	}
	rc = event_lost(sd, ev);
	if (!rc)
		rc = (f = event_fault(ev)) ? event_failed(ev, f) : event_complete(ev);
out:
	pthread_mutex_unlock(&sd->lock);
	return rc;
}

/* event_sync, and event_wait with stop (1 when it gave up). */
static int event_wait(struct rsd_simdev *sd, void *event, bool (*stop)(void *arg), void *arg)
{
	struct sim_event *ev = NULL;
	int rc;

	pthread_mutex_lock(&sd->lock);
	rc = rsd__sim_enter(sd, RSD_SIMDEV_EVENT_SYNC);
	if (!rc && !(ev = live_event(event)))
		rc = -RSD_ETYPE;
	/* Event objects are never freed while the simulator lives, so ev may
	 * be read after every wake-up. A failure is reported once known; a
	 * lost device's events never complete. */
	while (!rc && !sd->dev[ev->device].lost && !event_fault(ev) && !event_complete(ev)) {
		if (wait_or_stop(sd, stop, arg)) {
			pthread_mutex_unlock(&sd->lock);
			return 1;
		}
	}
	if (!rc)
		rc = event_lost(sd, ev);
	if (!rc && event_fault(ev))
		rc = event_failed(ev, event_fault(ev));
	pthread_mutex_unlock(&sd->lock);
	return rc;
}

int rsd__sim_event_sync(void *ctx, void *event)
{
	return event_wait(ctx, event, NULL, NULL);
}

int rsd__sim_event_wait(void *ctx, void *event, bool (*stop)(void *arg), void *arg)
{
	return event_wait(ctx, event, stop, arg);
}

void rsd__sim_event_destroy(void *ctx, void *event)
{
	struct rsd_simdev *sd = ctx;
	struct sim_event *ev = event;

	if (!ev)
		return;
	pthread_mutex_lock(&sd->lock);
	if (ev->magic == SIM_EVENT_LIVE) {
		event_unlink(ev);
		ev->magic = SIM_EVENT_FREE;
		ev->next = sd->free_events;
		sd->free_events = ev;
	}
	pthread_mutex_unlock(&sd->lock);
}

int rsd__sim_stream_wait_event(void *ctx, void *stream, void *event)
{
	struct rsd_simdev *sd = ctx;
	struct sim_event *ev = NULL;
	struct sim_stream *s;
	struct sim_work *w;
	int rc;

	pthread_mutex_lock(&sd->lock);
	rc = rsd__sim_enter(sd, RSD_SIMDEV_STREAM_WAIT);
	if (rc)
		goto out;
	s = rsd__sim_find_stream(sd, stream);
	if (!s) {
		rc = not_a_stream(stream);
		goto out;
	}
	ev = live_event(event);
	if (!ev) {
		rc = -RSD_ETYPE;
		goto out;
	}
	rc = rsd__sim_lost(sd, s->device, "stream_wait_event");
	if (!rc)
		rc = event_lost(sd, ev);
	if (rc)
		goto out;
	/* Complete already (and not failed), or on s itself (in order
	 * anyway): nothing to wait for, as cudaStreamWaitEvent on a completed
	 * event. A failed one still passes its failure on to s's later work. */
	if ((event_complete(ev) && !event_fault(ev)) || ev->stream == s)
		goto out;
	w = calloc(1, sizeof(*w));
	if (!w) {
		rc = rsd__err(RSD_ENOMEM, "simulated device: out of memory for a stream wait");
		goto out;
	}
	w->kind = SIM_WORK_WAIT;
	w->wait.stream = ev->stream;
	w->wait.seq = ev->seq;
	w->wait.ticket = ev->ticket;
	if (ev->stream)
		ev->stream->refs++;
	else
		w->wait.fault = ev->fault;
	rsd__sim_enqueue(sd, s, w);
out:
	pthread_mutex_unlock(&sd->lock);
	return rc;
}
