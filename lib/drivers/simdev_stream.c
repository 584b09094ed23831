// SPDX-License-Identifier: MIT
/*
 * Streams and events of the simulated device (model in simdev.h).
 *
 * Streams are found by identity in the simulator's list, never by reading
 * the caller's pointer, so any pointer can be tested for stream-ness. Event
 * objects are driver-issued and never freed before the simulator is: a
 * destroyed event goes back to a free list (and is reused), and its magic
 * tells a live event from a stale one.
 *
 * Synchronizing (event_sync, stream_sync, device_sync) stands for "wait
 * until the work is done": in the simulator the waiter's patience is what
 * finishes the work, so a sync completes the event and every earlier event
 * of its stream (or the whole stream, or every stream of the device).
 */
#include <stdlib.h>

#include "simdev.h"

struct sim_stream *rsd__sim_find_stream(struct rsd_simdev *sd, const void *p)
{
	for (struct sim_stream *s = sd->streams; s; s = s->next)
		if ((const void *)s == p)
			return s;
	return NULL;
}

void rsd__sim_stream_link(struct rsd_simdev *sd, struct sim_stream *s, int device, bool is_default)
{
	s->magic = SIM_STREAM_MAGIC;
	s->device = device;
	s->is_default = is_default;
	s->prev = NULL;
	s->next = sd->streams;
	if (s->next)
		s->next->prev = s;
	sd->streams = s;
}

static void stream_complete(struct sim_stream *s)
{
	s->completed = s->recorded;
}

static bool event_complete(const struct sim_event *ev)
{
	return ev->done || (ev->stream && ev->seq <= ev->stream->completed);
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

void rsd__sim_streams_destroy(struct rsd_simdev *sd)
{
	struct sim_stream *s, *snext;
	struct sim_event *ev, *enext;

	for (s = sd->streams; s; s = snext) {
		snext = s->next;
		if (!s->is_default)
			free(s);
	}
	sd->streams = NULL;
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

	if (!sd || !stream)
		return rsd__err(RSD_ETYPE, "rsd_simdev_stream_create: %s is NULL",
				sd ? "stream" : "simdev");
	*stream = NULL;
	if (device < 0 || device >= sd->ndevices)
		return rsd__err(RSD_EINVAL,
				"rsd_simdev_stream_create: no device %d (%d simulated "
				"devices)",
				device, sd->ndevices);
	s = calloc(1, sizeof(*s));
	if (!s)
		return rsd__err(RSD_ENOMEM, "rsd_simdev_stream_create: out of memory");
	pthread_mutex_lock(&sd->lock);
	rsd__sim_stream_link(sd, s, device, false);
	pthread_mutex_unlock(&sd->lock);
	*stream = s;
	return 0;
}

/* Like cudaStreamDestroy: its work is finished first, so every event still
 * recorded on it becomes complete (and stays valid until destroyed). */
void rsd_simdev_stream_destroy(struct rsd_simdev *sd, void *stream)
{
	struct sim_stream *s;

	if (!sd)
		return;
	pthread_mutex_lock(&sd->lock);
	s = rsd__sim_find_stream(sd, stream);
	if (!s || s->is_default) {
		pthread_mutex_unlock(&sd->lock);
		return;
	}
	while (s->events) {
		struct sim_event *ev = s->events;

		event_unlink(ev);
		ev->done = true;
	}
	if (s->prev)
		s->prev->next = s->next;
	else
		sd->streams = s->next;
	if (s->next)
		s->next->prev = s->prev;
	s->magic = 0;
	pthread_mutex_unlock(&sd->lock);
	free(s);
}

/* NULL stands for every device's transfer stream. */
static void complete_streams(struct rsd_simdev *sd, struct sim_stream *only)
{
	for (struct sim_stream *s = sd->streams; s; s = s->next)
		if (only ? s == only : s->is_default)
			stream_complete(s);
}

void rsd_simdev_stream_complete(struct rsd_simdev *sd, void *stream)
{
	struct sim_stream *s;

	if (!sd)
		return;
	pthread_mutex_lock(&sd->lock);
	s = stream ? rsd__sim_find_stream(sd, stream) : NULL;
	if (s || !stream)
		complete_streams(sd, s);
	pthread_mutex_unlock(&sd->lock);
}

void rsd_simdev_complete_all(struct rsd_simdev *sd)
{
	if (!sd)
		return;
	pthread_mutex_lock(&sd->lock);
	for (struct sim_stream *s = sd->streams; s; s = s->next)
		stream_complete(s);
	pthread_mutex_unlock(&sd->lock);
}

void rsd_simdev_set_auto_complete(struct rsd_simdev *sd, bool on)
{
	if (!sd)
		return;
	pthread_mutex_lock(&sd->lock);
	sd->auto_complete = on;
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
		s = rsd__sim_find_stream(sd, stream);
		if (s)
			n = stream_pending(s);
	} else {
		for (s = sd->streams; s; s = s->next)
			n += stream_pending(s);
	}
	pthread_mutex_unlock(&sd->lock);
	return n;
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
	if (s)
		*device = s->device;
	else
		rc = not_a_stream(stream);
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

int rsd__sim_stream_sync(void *ctx, void *stream)
{
	struct rsd_simdev *sd = ctx;
	struct sim_stream *s = NULL;
	int rc;

	pthread_mutex_lock(&sd->lock);
	rc = rsd__sim_enter(sd, RSD_SIMDEV_EVENT_SYNC);
	if (!rc && stream && !(s = rsd__sim_find_stream(sd, stream)))
		rc = not_a_stream(stream);
	if (!rc)
		complete_streams(sd, s);
	pthread_mutex_unlock(&sd->lock);
	return rc;
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
		for (struct sim_stream *s = sd->streams; s; s = s->next)
			if (s->device == device)
				stream_complete(s);
	pthread_mutex_unlock(&sd->lock);
	return rc;
}

int rsd__sim_event_record(void *ctx, void *stream, void **event)
{
	struct rsd_simdev *sd = ctx;
	struct sim_stream *s = NULL;
	struct sim_event *ev = NULL;
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
	ev = sd->free_events;
	if (ev) {
		sd->free_events = ev->next;
	} else {
		ev = calloc(1, sizeof(*ev));
		if (!ev) {
			rc = rsd__err(RSD_ENOMEM, "simulated device: out of memory for an event");
			goto out;
		}
		ev->all_next = sd->all_events;
		sd->all_events = ev;
	}
	ev->magic = SIM_EVENT_LIVE;
	ev->done = false;
	ev->seq = ++s->recorded;
	ev->stream = s;
	ev->prev = NULL;
	ev->next = s->events;
	if (ev->next)
		ev->next->prev = ev;
	s->events = ev;
	if (sd->auto_complete)
		s->completed = ev->seq;
	*event = ev;
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
	struct sim_event *ev;
	int rc;

	pthread_mutex_lock(&sd->lock);
	rc = rsd__sim_enter(sd, RSD_SIMDEV_EVENT_QUERY);
	if (!rc)
		rc = (ev = live_event(event)) ? event_complete(ev) : -RSD_ETYPE;
	pthread_mutex_unlock(&sd->lock);
	return rc;
}

int rsd__sim_event_sync(void *ctx, void *event)
{
	struct rsd_simdev *sd = ctx;
	struct sim_event *ev = NULL;
	int rc;

	pthread_mutex_lock(&sd->lock);
	rc = rsd__sim_enter(sd, RSD_SIMDEV_EVENT_SYNC);
	if (!rc && !(ev = live_event(event)))
		rc = -RSD_ETYPE;
	if (!rc && !event_complete(ev) && ev->seq > ev->stream->completed)
		ev->stream->completed = ev->seq;
	pthread_mutex_unlock(&sd->lock);
	return rc;
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
