/* SPDX-License-Identifier: MIT */
/*
 * Private layout of the simulated device, shared by simdev.c (life cycle,
 * memory, copies, fault injection) and simdev_stream.c (streams, events).
 *
 * Event model: each stream numbers the events recorded on it (seq 1, 2, ...)
 * and remembers the highest number completed; an event is complete when its
 * number is at most that, so completing an event completes every earlier
 * event of its stream, as in-order CUDA streams do.
 */
#ifndef RSD_DRIVERS_SIMDEV_H
#define RSD_DRIVERS_SIMDEV_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "../internal.h"
#include "pool.h"

#define SIM_STREAM_MAGIC 0x7273642d7374726dull /* "rsd-strm" */
#define SIM_EVENT_LIVE 0x7273642d6576656eull   /* "rsd-even" */
#define SIM_EVENT_FREE 0x7273642d66726565ull   /* "rsd-free" */

/* Chunk sizes of pooled simulated memory. Device chunks are lazily
 * populated mappings and cost nothing until touched; pinned chunks are
 * locked (and populated) at once, so they stay small. */
#define SIM_DEVICE_CHUNK (64ull << 20)
#define SIM_DEVICE_GRANULE 256ull
#define SIM_PINNED_CHUNK (4ull << 20)

struct sim_event;

struct sim_stream {
	uint64_t magic; /* SIM_STREAM_MAGIC while registered */
	int device;
	bool is_default;		/* a device's transfer stream, never destroyed */
	struct sim_stream *prev, *next; /* sd->streams */
	uint64_t recorded;		/* seq of the last event recorded */
	uint64_t completed;		/* events with seq <= completed are complete */
	struct sim_event *events;	/* live events recorded on this stream */
};

struct sim_event {
	uint64_t magic;		   /* SIM_EVENT_LIVE or SIM_EVENT_FREE */
	struct sim_stream *stream; /* NULL once its stream is gone (then done) */
	uint64_t seq;
	bool done;		       /* complete regardless of the stream */
	struct sim_event *prev, *next; /* stream->events, or sd->free_events */
	struct sim_event *all_next;    /* sd->all_events: every object, for destroy */
};

struct sim_device {
	struct sim_stream transfer; /* what a NULL stream stands for */
	struct rsd__pool pool;	    /* own lock */
};

struct rsd_simdev {
	int ndevices;
	bool pooled;

	/* One lock for streams, events, counters and injections: the manager's
	 * lock-free readers call event_query and metrics from any thread. The
	 * pools have their own locks and are never entered with it held. */
	pthread_mutex_t lock;
	bool auto_complete;			  /* protected by lock */
	struct sim_stream *streams;		  /* protected by lock */
	struct sim_event *free_events;		  /* protected by lock */
	struct sim_event *all_events;		  /* protected by lock */
	unsigned long calls[RSD_SIMDEV_NOPS];	  /* protected by lock */
	unsigned fail_countdown[RSD_SIMDEV_NOPS]; /* protected by lock; 0 disarmed */
	int fail_nth_err[RSD_SIMDEV_NOPS];	  /* protected by lock */
	int fail_all_err[RSD_SIMDEV_NOPS];	  /* protected by lock; 0 disarmed */
	int fail_loc_err[RSD_NSLOTS];		  /* protected by lock; 0 disarmed */

	struct rsd__pool pinned; /* own lock */
	struct sim_device dev[]; /* ndevices */
};

/* With sd->lock held: count a call of op and fire an armed injection
 * (recorded, naming the op and the call number). */
int rsd__sim_enter(struct rsd_simdev *sd, enum rsd_simdev_op op);
/* With sd->lock held: the registered stream p, or NULL (p is never read). */
struct sim_stream *rsd__sim_find_stream(struct rsd_simdev *sd, const void *p);
void rsd__sim_stream_link(struct rsd_simdev *sd, struct sim_stream *s, int device, bool is_default);
/* Free every non-default stream and every event object (at destroy). */
void rsd__sim_streams_destroy(struct rsd_simdev *sd);

/* Stream and event ops (simdev_stream.c). */
int rsd__sim_stream_device(void *ctx, void *stream, int *device);
void *rsd__sim_default_stream(void *ctx, int device);
int rsd__sim_stream_sync(void *ctx, void *stream);
int rsd__sim_device_sync(void *ctx, int device);
int rsd__sim_event_record(void *ctx, void *stream, void **event);
int rsd__sim_event_query(void *ctx, void *event);
int rsd__sim_event_sync(void *ctx, void *event);
void rsd__sim_event_destroy(void *ctx, void *event);

#endif
