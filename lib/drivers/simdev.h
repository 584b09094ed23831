/* SPDX-License-Identifier: MIT */
/*
 * Private layout of the simulated device, shared by simdev.c (life cycle,
 * memory, copies, fault injection), simdev_stream.c (streams, events),
 * simdev_progress.c (work queues, progress modes, waiting), simdev_links.c
 * (the link model) and simdev_kernel.c (kernels, the ordering check).
 *
 * Stream model: every stream is a FIFO of work items (copies, event
 * records, host functions, kernels). An item takes effect when it runs, never when it
 * is queued: a copy reads its source and writes its destination then, an
 * event record marks its event complete then. Items of one stream run one at
 * a time in queue order; a running item executes outside sd->lock (so a
 * host function may call back into the simulator and a large copy does not
 * stall event_query), with its stream marked running.
 *
 * Event model: each stream numbers the events recorded on it (seq 1, 2, ...)
 * and remembers the highest number whose record item has run; an event is
 * complete when its number is at most that, so events of one stream
 * complete in order, as in-order CUDA streams do.
 *
 * Every item also takes a ticket from one counter of the simulator, so "all
 * work queued before now" is "every item with a ticket up to the counter's
 * value now", across streams: that is what the syncs wait for.
 *
 * A wait item (stream_wait_event) is runnable only once the event it names
 * (its stream and sequence number, taken when it was queued) is complete;
 * until then its stream is blocked, and it holds a reference on the
 * event's stream so that stream is not freed under it.
 *
 * Link model (simdev_links.c), when on: a copy reserves the engines it
 * uses (a device's H2D or D2H engine, or the peer link of a device pair)
 * from max(now, the engines' busy_until) for its modelled duration, so
 * copies on one engine follow one another in the order they start and
 * copies on different engines overlap. Whoever runs a copy executes it and
 * then sleeps until its modelled end; a background worker instead parks it
 * (stream still running, inflight set) and goes on with other streams, and
 * whoever sees it due finishes it.
 *
 * Kernels (simdev_kernel.c) use their device's compute engine the same way,
 * with the link model on or off: kernels of one device follow one another,
 * and a kernel overlaps copies and other devices' kernels. A kernel's effects
 * (its fills, its function) happen when it finishes, at its modelled end.
 *
 * Ordering check: every copy and kernel that touches memory is on
 * sd->pending, in ticket order, from its enqueue until it finishes. When one
 * starts, a listed item with a smaller ticket that writes what it reads, or
 * reads what it writes, is not ordered before it (ordered work has
 * finished): the simulator reports both and aborts.
 *
 * Device failure: a copy that fails when it runs (RSD_SIMDEV_COPY_EXEC)
 * leaves a fault on its stream: the copies and kernels queued after it are
 * skipped, and every event recorded after it reports the fault, as does every
 * stream that waits on such an event (from its wait item on).
 *
 * Device loss (rsd_simdev_lose_device): the device's streams are marked
 * lost. Their queued copies and kernels are skipped at once (taken off
 * sd->pending: they will never touch memory, so their other ends may be
 * freed); the streams still drain (skipping), so their waiters and
 * retirement work as before, but every event recorded on them reports the
 * loss whether or not its record has run, and every op naming the device,
 * one of its streams or events fails with RSD_EDEVLOST. A copy queued on a
 * sound stream that reads or writes the lost device's memory fails when it
 * runs, leaving a fault (lost set) on its stream; a stream waiting on an
 * event of a lost stream that was pending at the loss inherits one too.
 */
#ifndef RSD_DRIVERS_SIMDEV_H
#define RSD_DRIVERS_SIMDEV_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "../internal.h"
#include "../list.h"
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

enum sim_work_kind {
	SIM_WORK_COPY,
	SIM_WORK_EVENT,
	SIM_WORK_HOST_FUNC,
	SIM_WORK_WAIT,
	SIM_WORK_KERNEL,
	SIM_WORK_GATE, /* stops its stream until opened (gate_queue/gate_open) */
};

/* A failure that sticks to a stream (or to an event whose stream is gone):
 * every event numbered after `after` reports it. err 0: none. */
struct sim_fault {
	int err;	    /* positive RSD_E* code */
	unsigned long call; /* the failed copy_exec call */
	uint64_t after;	    /* the last event number not affected */
	bool lost;	    /* a copy touched a lost device (err is
			     * RSD_EDEVLOST, call 0) */
	int device;	    /* with lost: that device */
	bool gate;	    /* a gate opened as failed (err is the opener's,
			     * call 0) */
};

struct sim_work {
	struct sim_work *next; /* the stream's queue */
	enum sim_work_kind kind;
	uint64_t ticket;	    /* from sd->tickets */
	uint64_t due_ns;	    /* modelled end once started; 0: none */
	struct sim_stream *stream;  /* its stream (set at enqueue) */
	struct rsd__list_node pend; /* on sd->pending, while listed */
	bool listed;		    /* on sd->pending */
	bool skip;		    /* not executed: its stream failed */
	uint64_t started_ns;	    /* when it started (rsd:device_work) */
	uint64_t queued_ns;	    /* when it was queued (the modelled start) */
	union {
		struct {
			void *dst;
			const void *src;
			struct rsd_location dst_at, src_at;
			uint64_t nbytes;
		} copy;
		uint64_t event_seq; /* SIM_WORK_EVENT: the event it completes */
		struct {
			void (*fn)(void *arg);
			void *arg;
		} host;
		struct {
			struct sim_stream *stream; /* the event's; referenced */
			uint64_t seq;		   /* the event's number on it */
			uint64_t ticket;	   /* the event record's ticket */
			/* NULL stream: the event was complete and failed, and
			 * its stream gone; its fault. */
			struct sim_fault fault;
		} wait;
		struct {
			uint64_t ns;		       /* duration, time scale applied */
			struct rsd_simdev_access *acc; /* allocated with the item */
			size_t nacc;
			void (*fn)(void *arg);
			void *arg;
		} kernel;
		struct {
			bool open; /* gate_open ran: the stream may pass */
			int err;   /* what it opened with (<= 0) */
		} gate;
	};
};

/*
 * Who starts an item in background mode. A GPU's copy engines and its
 * compute engine run independently: a kernel starts when the one before it
 * ends, whatever the copy engines do. The simulator executes a copy's bytes
 * on the host (a memmove that takes real time), so each device has one
 * worker per role, and a long memmove delays only the copies of its own
 * direction, as the engine it stands for would. A stream's other items
 * (events, waits, host functions) go to the worker of its last copy or
 * kernel, so a copy stream's events stay with its copies.
 */
enum sim_role {
	SIM_ROLE_COMPUTE,  /* kernels */
	SIM_ROLE_COPY_IN,  /* copies whose destination is a device */
	SIM_ROLE_COPY_OUT, /* copies whose destination is host memory */
	SIM_NROLES,
};

/* Every field is protected by sd->lock. */
struct sim_stream {
	uint64_t magic; /* SIM_STREAM_MAGIC while registered */
	int device;
	bool is_default;		/* a driver transfer stream, never destroyed */
	bool embedded;			/* part of struct sim_device, never freed */
	bool retired;			/* destroyed by its owner; freed once drained */
	unsigned refs;			/* wait items and holders; freed only at 0 */
	struct sim_stream *prev, *next; /* sd->streams */
	uint64_t recorded;		/* seq of the last event recorded */
	uint64_t completed;		/* events with seq <= completed are complete */
	struct sim_event *events;	/* live events recorded on this stream */

	struct sim_work *head, **tail; /* queued work not yet started */
	bool running;		       /* an item of it is executing (unlocked) */
	bool inflight;		       /* running item parked until its due_ns */
	struct sim_work *current;      /* that item (freed when it finishes) */
	pthread_t runner;	       /* the thread executing it */
	uint64_t ready_ns;	       /* when head became runnable (background) */
	/*
	 * The modelled time its last finished item ended (a copy's or
	 * kernel's due time, an awaited event's, else when it was seen to
	 * end), and the modelled time its last event completed. A GPU starts
	 * the next item of a stream when the one before it ends, not when a
	 * host thread notices: the link model starts an item queued in time
	 * at this end (model_start()).
	 */
	uint64_t model_end_ns;
	uint64_t completed_model_ns;
	struct sim_fault fault; /* a copy of it failed on the device */
	enum sim_role role;	/* of its last copy or kernel started */
	bool lost;		/* its device was lost */
	uint64_t lost_after;	/* with lost: completed at the loss */
};

struct sim_event {
	uint64_t magic;		   /* SIM_EVENT_LIVE or SIM_EVENT_FREE */
	struct sim_stream *stream; /* NULL once its stream is gone (then done) */
	uint64_t seq;
	uint64_t ticket;	       /* of its record item */
	int device;		       /* of the stream it was recorded on */
	bool done;		       /* complete regardless of the stream */
	struct sim_fault fault;	       /* the stream's, kept once it is gone */
	struct sim_event *prev, *next; /* stream->events, or sd->free_events */
	struct sim_event *all_next;    /* sd->all_events: every object, for destroy */
};

/* A copy engine or peer link of the link model, or a compute engine. */
struct sim_engine {
	uint64_t busy_until; /* protected by sd->lock; CLOCK_MONOTONIC ns */
};

/* The link model's figures, fixed at creation (rsd__sim_links_init). */
struct sim_links {
	bool on;
	bool peer_capable;
	double scale;
	uint64_t h2d_bps, d2h_bps, pageable_bps, peer_bps, bounce_bps;
	uint64_t pcie_latency_ns, peer_latency_ns;
	uint64_t dev_alloc_ns, pinned_alloc_ns, free_ns;
	uint64_t oversize_keep;
};

/* What a pool's chunk callbacks get: the backing is counted and timed. */
struct sim_backing {
	struct rsd_simdev *sd;
	const struct rsd__pool_ops *base;
	bool device;
};

struct sim_device {
	struct sim_stream transfer; /* what a NULL stream stands for */
	struct sim_stream h2d, d2h; /* transfer_stream's per direction */
	struct sim_engine h2d_eng, d2h_eng;
	struct sim_engine compute_eng; /* kernels, with the link model on or off */
	struct sim_backing backing;
	struct rsd__pool pool; /* own lock */
	/* Background progress, one thread per role (sim_role); valid if
	 * sd->workers. */
	pthread_t worker[SIM_NROLES];
	/* Each worker sleeps on its own, with sd->lock (simdev_progress.c,
	 * kick()); CLOCK_MONOTONIC. */
	pthread_cond_t wake[SIM_NROLES];
	bool lost; /* protected by sd->lock; rsd_simdev_lose_device, for good */
};

struct rsd_simdev {
	int ndevices;
	bool pooled;

	/* One lock for streams, work queues, events, counters and injections:
	 * the manager's lock-free readers call event_query and metrics from any
	 * thread. The pools have their own locks and are never entered with it
	 * held. cond (CLOCK_MONOTONIC) is broadcast whenever work finishes, work
	 * is queued, the mode changes or the simulator is being destroyed:
	 * waiters and background workers sleep on it. */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	enum rsd_simdev_progress progress;	  /* protected by lock */
	uint64_t delay_ns;			  /* protected by lock */
	uint64_t tickets;			  /* protected by lock; last ticket issued */
	uint64_t kicks;				  /* protected by lock; workers signalled */
	bool workers;				  /* protected by lock; dev[].worker[] started */
	bool workers_changing;			  /* protected by lock; a start or stop joins */
	bool stopping;				  /* protected by lock; destroy under way */
	bool unpinned_host;			  /* protected by lock */
	struct sim_stream *streams;		  /* protected by lock */
	struct rsd__ptrmap stream_set;		  /* protected by lock; each of streams */
	struct rsd__list pending;		  /* protected by lock; sim_work, by ticket */
	struct sim_event *free_events;		  /* protected by lock */
	struct sim_event *all_events;		  /* protected by lock */
	unsigned long calls[RSD_SIMDEV_NOPS];	  /* protected by lock */
	unsigned fail_countdown[RSD_SIMDEV_NOPS]; /* protected by lock; 0 disarmed */
	int fail_nth_err[RSD_SIMDEV_NOPS];	  /* protected by lock */
	int fail_all_err[RSD_SIMDEV_NOPS];	  /* protected by lock; 0 disarmed */
	int fail_loc_err[RSD_NSLOTS];		  /* protected by lock; 0 disarmed */
	struct sim_links lm;			  /* fixed at creation */
	/* ndevices x ndevices, index src * ndevices + dst: */
	bool *peer_on;			  /* protected by lock; symmetric */
	struct sim_engine *peer_eng;	  /* protected by lock */
	struct sim_stream **peer_streams; /* protected by lock; made on use */
	struct sim_backing pinned_backing;

	struct rsd__pool pinned;   /* own lock */
	struct rsd__pool pageable; /* own lock; "pinned" memory while unpinned_host */
	struct sim_device dev[];   /* ndevices */
};

/* With sd->lock held: count a call of op and fire an armed injection
 * (recorded, naming the op and the call number). */
int rsd__sim_enter(struct rsd_simdev *sd, enum rsd_simdev_op op);
/* With sd->lock held: count a call of op; the positive code of an armed
 * injection it fires, else 0. Nothing is recorded. */
int rsd__sim_fire(struct rsd_simdev *sd, enum rsd_simdev_op op);
/* The name of op in messages. */
const char *rsd__sim_op_name(enum rsd_simdev_op op);
/* With sd->lock held: the registered, not destroyed stream p, or NULL (p is
 * never read). */
struct sim_stream *rsd__sim_find_stream(struct rsd_simdev *sd, const void *p);
/* With sd->lock held: like rsd__sim_find_stream, destroyed streams whose work
 * has not drained included. */
struct sim_stream *rsd__sim_find_any_stream(struct rsd_simdev *sd, const void *p);
/* Link s into sd->streams; -RSD_ENOMEM (recorded), s not linked. */
int rsd__sim_stream_link(struct rsd_simdev *sd, struct sim_stream *s, int device, bool is_default);
/* With sd->lock held: free s if it is destroyed, drained and not running. */
void rsd__sim_stream_put(struct rsd_simdev *sd, struct sim_stream *s);
/* Free every non-default stream, every queued work item and every event
 * object (at destroy, workers stopped). */
void rsd__sim_streams_destroy(struct rsd_simdev *sd);

/* Work queues and progress (simdev_progress.c). All with sd->lock held. */
/* Queue w on s (taking a ticket) and let the mode make progress. */
void rsd__sim_enqueue(struct rsd_simdev *sd, struct sim_stream *s, struct sim_work *w);
/* Run the work queued on s (NULL: on every stream, or with transfers_only on
 * every device's transfer stream) with a ticket up to upto; waits for items
 * other threads are running. */
void rsd__sim_drive(struct rsd_simdev *sd, struct sim_stream *only, bool transfers_only,
		    uint64_t upto);
/* Sleep on sd->cond. */
void rsd__sim_wait(struct rsd_simdev *sd);
/* Sleep on sd->cond, at most ns. */
void rsd__sim_wait_ns(struct rsd_simdev *sd, uint64_t ns);
/* True when s has no unfinished work with a ticket up to upto. */
bool rsd__sim_stream_done(const struct sim_stream *s, uint64_t upto);
/* Switch mode (starting background workers if needed); -RSD_E* on failure
 * to start them, mode unchanged. */
int rsd__sim_set_progress(struct rsd_simdev *sd, enum rsd_simdev_progress mode, uint64_t delay_ns);
/* Stop and join the background workers (sd->lock not held). */
void rsd__sim_workers_stop(struct rsd_simdev *sd);

/* With sd->lock held: whether w is a wait item whose event is pending, or
 * a gate not yet opened. */
bool rsd__sim_blocked(const struct sim_work *w);
/* The background workers' wake-ups signalled so far (tests count them). */
uint64_t rsd__sim_kicks(struct rsd_simdev *sd);
/* The gate ops (simdev_progress.c). */
int rsd__sim_gate_queue(void *ctx, void *stream, void **gate);
void rsd__sim_gate_open(void *ctx, void *gate, int err);

/* Link model (simdev_links.c). */
/* Fill sd->lm from cfg, the environment and the defaults. */
void rsd__sim_links_init(struct rsd_simdev *sd, const struct rsd_simdev_config *cfg);
/* With sd->lock held: reserve the engines copy w uses from now; its
 * modelled end, or 0 with the model off or for a copy on no engine. */
uint64_t rsd__sim_link_start(struct rsd_simdev *sd, const struct sim_work *w, uint64_t now);
/* With sd->lock held: whether a copy between these locations holds its
 * caller (the model is on and its host side is pageable). */
bool rsd__sim_link_holds(struct rsd_simdev *sd, struct rsd_location dst, struct rsd_location src);
/* Sleep until CLOCK_MONOTONIC reaches ns. */
void rsd__sim_sleep_until(uint64_t ns);
uint64_t rsd__sim_now_ns(void);

/* Kernels and the ordering check (simdev_kernel.c). All with sd->lock held. */
/* Put w on sd->pending if it touches memory (at enqueue). */
void rsd__sim_pending_add(struct rsd_simdev *sd, struct sim_work *w);
/* Take w off sd->pending if it is there (when it finishes). */
void rsd__sim_pending_del(struct rsd_simdev *sd, struct sim_work *w);
/* Whether a listed item reads or writes some byte of [p, p + n); with buf,
 * the first such item described in it (what, where, whether started). */
bool rsd__sim_pending_touches(struct rsd_simdev *sd, const void *p, uint64_t n, char *buf,
			      size_t len);
/* w is starting: abort, naming both, if an item queued before it and not
 * finished writes what it reads or reads what it writes. */
void rsd__sim_check_order(struct rsd_simdev *sd, const struct sim_work *w);
/* Reserve the compute engine of kernel w's device from now; its end. */
uint64_t rsd__sim_kernel_start(struct rsd_simdev *sd, const struct sim_work *w, uint64_t now);
/* Kernel w's effects: its fills, then its function (sd->lock not held). */
void rsd__sim_kernel_effects(const struct sim_work *w);

/* With sd->lock held: 0, or -RSD_EDEVLOST (recorded, naming op) when
 * cuda:device is lost; device may be anything. */
int rsd__sim_lost(struct rsd_simdev *sd, int device, const char *op);
/* With sd->lock held: rsd__sim_lost for a location (0 for a host one). */
int rsd__sim_lost_at(struct rsd_simdev *sd, struct rsd_location at, const char *op);
/* With sd->lock held: wake every background worker. */
void rsd__sim_kick_all(struct rsd_simdev *sd);
/* With sd->lock held: mark cuda:device's streams lost and skip their queued
 * copies and kernels (simdev_progress.c). */
void rsd__sim_streams_lose(struct rsd_simdev *sd, int device);

/* Stream and event ops (simdev_stream.c). */
int rsd__sim_stream_device(void *ctx, void *stream, int *device);
void *rsd__sim_default_stream(void *ctx, int device);
int rsd__sim_stream_sync(void *ctx, void *stream);
int rsd__sim_device_sync(void *ctx, int device);
int rsd__sim_event_record(void *ctx, void *stream, void **event);
int rsd__sim_event_query(void *ctx, void *event);
int rsd__sim_event_sync(void *ctx, void *event);
int rsd__sim_event_wait(void *ctx, void *event, bool (*stop)(void *arg), void *arg);
int rsd__sim_stream_wait(void *ctx, void *stream, bool (*stop)(void *arg), void *arg);
void rsd__sim_event_destroy(void *ctx, void *event);
int rsd__sim_stream_wait_event(void *ctx, void *stream, void *event);

#endif
