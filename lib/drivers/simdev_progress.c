// SPDX-License-Identifier: MIT
/*
 * Progress of the simulated device's streams (model in simdev.h): queueing
 * work, running it, the three progress modes and the background workers.
 *
 * Who runs an item depends on the mode. RSD_SIMDEV_ON_COMMAND: only
 * rsd_simdev_stream_complete() and rsd_simdev_complete_all(), on the caller's
 * thread. RSD_SIMDEV_IMMEDIATE: the thread that queues it, before the queueing
 * call returns. RSD_SIMDEV_BACKGROUND: worker threads, one per device and
 * role (a device's compute engine and its two copy directions; sim_role in
 * simdev.h), each item delay_ns after it became runnable (reached the front
 * of its stream's queue), like a GPU running asynchronously. Whoever runs an item pops it,
 * marks its stream running, drops sd->lock, executes it, retakes the lock and
 * broadcasts sd->cond; the syncs only ever wait on that condition variable.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "simdev.h"
#include "../trace.h"

/* sd->cond runs on CLOCK_MONOTONIC, so due times do too. */
static uint64_t mono_ns(void)
{
	return rsd__sim_now_ns();
}

/* Sleep on sd->cond until woken or CLOCK_MONOTONIC reaches due. */
static void wait_until(struct rsd_simdev *sd, uint64_t due)
{
	struct timespec ts = rsd__timespec_ns(due);

	pthread_cond_timedwait(&sd->cond, &sd->lock, &ts);
}

/* A wait on a lost stream's event is never blocked: that event will never
 * be trusted, and the waiting stream inherits the loss instead. */
bool rsd__sim_blocked(const struct sim_work *w)
{
	if (w && w->kind == SIM_WORK_GATE)
		return !w->gate.open;
	return w && w->kind == SIM_WORK_WAIT && w->wait.stream && !w->wait.stream->lost &&
	       w->wait.stream->completed < w->wait.seq;
}

/* A closed gate: only its opener lets the stream go on. */
static bool gated(const struct sim_work *w)
{
	return w && w->kind == SIM_WORK_GATE && !w->gate.open;
}

void rsd__sim_wait(struct rsd_simdev *sd)
{
	pthread_cond_wait(&sd->cond, &sd->lock);
}

void rsd__sim_wait_ns(struct rsd_simdev *sd, uint64_t ns)
{
	wait_until(sd, mono_ns() + ns);
}

/* The worker that runs w, an item of s (sim_role in simdev.h). */
static enum sim_role role_of(const struct sim_stream *s, const struct sim_work *w)
{
	if (w->kind == SIM_WORK_KERNEL)
		return SIM_ROLE_COMPUTE;
	if (w->kind != SIM_WORK_COPY)
		return s->role;
	return w->copy.dst_at.kind == RSD_CUDA ? SIM_ROLE_COPY_IN : SIM_ROLE_COPY_OUT;
}

/*
 * Waking the background workers. Each sleeps on its own condition variable
 * and is woken only when an item of its role may have become runnable on
 * its device: waking every worker at every enqueue would have them contend
 * for sd->lock with the host thread that queues, on the host's own cores,
 * which no GPU does. All with sd->lock held, so a worker that scanned and
 * found nothing cannot miss the wake-up before it sleeps.
 */
static void kick(struct rsd_simdev *sd, int device, enum sim_role role)
{
	if (sd->workers) {
		sd->kicks++;
		pthread_cond_signal(&sd->dev[device].wake[role]);
	}
}

uint64_t rsd__sim_kicks(struct rsd_simdev *sd)
{
	uint64_t n;

	pthread_mutex_lock(&sd->lock);
	n = sd->kicks;
	pthread_mutex_unlock(&sd->lock);
	return n;
}

void rsd__sim_kick_all(struct rsd_simdev *sd)
{
	for (int d = 0; d < sd->ndevices; d++)
		for (int r = 0; r < SIM_NROLES; r++)
			pthread_cond_broadcast(&sd->dev[d].wake[r]);
}

/* s's front item, if any, may run now. A closed gate cannot: its opening
 * kicks (gate_open), so the work queued behind it (a staged copy's chunks,
 * queued at admission) wakes no worker that would find nothing to run. Nor
 * can a wait for an event still to come (a consumer stream ordered after a
 * copy just queued, a copy into a block a queued spill still reads): that
 * event's completion kicks the streams waiting for it (kick_waiters), and
 * a loss kicks every worker. */
static void kick_front(struct rsd_simdev *sd, const struct sim_stream *s)
{
	if (!s->running && s->head && !rsd__sim_blocked(s->head))
		kick(sd, s->device, role_of(s, s->head));
}

/* An event of s completed: the streams whose front item waits for s. */
static void kick_waiters(struct rsd_simdev *sd, const struct sim_stream *s)
{
	for (const struct sim_stream *t = sd->streams; t; t = t->next)
		if (!t->running && t->head && t->head->kind == SIM_WORK_WAIT &&
		    t->head->wait.stream == s)
			kick(sd, t->device, t->role);
}

bool rsd__sim_stream_done(const struct sim_stream *s, uint64_t upto)
{
	/* Items run in ticket order within a stream: only the front counts. */
	if (s->running)
		return s->current->ticket > upto;
	return !s->head || s->head->ticket > upto;
}

/* Run w's start-time effects (sd->lock not held). A kernel's come when it
 * finishes. */
static void execute(struct sim_work *w)
{
	if (w->skip)
		return;
	switch (w->kind) {
	case SIM_WORK_COPY:
		if (w->copy.nbytes)
			memmove(w->copy.dst, w->copy.src, (size_t)w->copy.nbytes);
		break;
	case SIM_WORK_HOST_FUNC:
		w->host.fn(w->host.arg);
		break;
	case SIM_WORK_EVENT:
	case SIM_WORK_WAIT:
	case SIM_WORK_KERNEL:
	case SIM_WORK_GATE:
		break;
	}
}

/* With sd->lock held: copy w of sound stream s reads or writes a lost
 * device's memory: it fails, leaving the loss on s as a fault. */
static bool copy_touches_lost(struct rsd_simdev *sd, struct sim_stream *s, struct sim_work *w)
{
	const struct rsd_location *at[2] = { &w->copy.dst_at, &w->copy.src_at };

	for (int i = 0; i < 2; i++) {
		if (at[i]->kind != RSD_CUDA || !sd->dev[at[i]->device].lost)
			continue;
		w->skip = true;
		s->fault = (struct sim_fault){ .err = RSD_EDEVLOST,
					       .after = s->completed,
					       .lost = true,
					       .device = at[i]->device };
		return true;
	}
	return false;
}

/*
 * With sd->lock held, w popped from s and starting: decide whether it
 * executes. Copies and kernels of a failed stream are skipped; the others
 * are checked for order (which aborts on a violation), and a copy may fail
 * now on the device (RSD_SIMDEV_COPY_EXEC), leaving its fault on s. Every
 * event recorded before it has completed (items run in order) and none
 * after it has, so s->completed is the last event the fault spares.
 */
static void admit_or_skip(struct rsd_simdev *sd, struct sim_stream *s, struct sim_work *w)
{
	int err;

	if (w->kind == SIM_WORK_GATE && w->gate.err && !s->fault.err && !s->lost) {
		/* Opened as failed: the stream stops here, as after a failed
		 * copy. */
		s->fault = (struct sim_fault){ .err = -w->gate.err,
					       .after = s->completed,
					       .gate = true };
		return;
	}
	if (w->kind != SIM_WORK_COPY && w->kind != SIM_WORK_KERNEL)
		return;
	if (s->fault.err || s->lost) {
		w->skip = true;
		return;
	}
	rsd__sim_check_order(sd, w);
	if (w->kind != SIM_WORK_COPY)
		return;
	if (copy_touches_lost(sd, s, w))
		return;
	err = rsd__sim_fire(sd, RSD_SIMDEV_COPY_EXEC);
	if (!err)
		return;
	w->skip = true;
	s->fault.err = err;
	s->fault.call = sd->calls[RSD_SIMDEV_COPY_EXEC];
	s->fault.after = s->completed;
}

static void admit(struct rsd_simdev *sd, struct sim_stream *s, struct sim_work *w)
{
	admit_or_skip(sd, s, w);
	/* A skipped item touches no memory from here on (execute() does
	 * nothing for it): it leaves the hazard list at once. Its stream's
	 * fault answers its event already, so whoever owns its buffers may
	 * free them in the instant before its runner finished it; the
	 * hostile soak aborted on that about once in 6,000 runs. */
	if (w->skip)
		rsd__sim_pending_del(sd, w);
}

/* With sd->lock held: the modelled end of w, starting now (0: none). */
static uint64_t item_start(struct rsd_simdev *sd, const struct sim_work *w, uint64_t now)
{
	if (w->skip)
		return 0;
	if (w->kind == SIM_WORK_KERNEL)
		return rsd__sim_kernel_start(sd, w, now);
	return rsd__sim_link_start(sd, w, now);
}

/* w, a copy of s, as the engine takes it (rsd:copy_start) or is done with
 * it (rsd:copy_end, its host time since it started). The ticket numbers
 * copies uniquely on this simulated device. */
static void trace_copy(const struct sim_stream *s, const struct sim_work *w, bool end)
{
	int device = s->device;
	const char *engine = rsd__trace_copy_engine(w->copy.src_at, w->copy.dst_at, &device);
	uint64_t now;

	if (!end) {
		rsd_trace_copy_start(device, engine, w->ticket, w->copy.nbytes, w->copy.src_at,
				     w->copy.dst_at);
		return;
	}
	now = mono_ns();
	rsd_trace_copy_end(device, engine, w->ticket, w->copy.nbytes,
			   now > w->started_ns ? now - w->started_ns : 0, false);
}

/*
 * With sd->lock held: the modelled start of s's front item w, a copy or
 * kernel, whose runner got to it at now. With the link model on and no
 * per-item delay, that is when w became runnable in the model: queued,
 * and the stream's previous item over (model_end_ns), not the runner's
 * wake-up a few tens of microseconds later, which a GPU does not have and
 * which would otherwise add up over back-to-back copies. Never later than
 * now; the engine still serializes it after whatever it runs (item_start).
 */
static uint64_t model_start(const struct rsd_simdev *sd, const struct sim_stream *s,
			    const struct sim_work *w, uint64_t now)
{
	uint64_t m = w->queued_ns > s->model_end_ns ? w->queued_ns : s->model_end_ns;

	if (!sd->lm.on || sd->delay_ns || sd->progress != RSD_SIMDEV_BACKGROUND || !m || m > now)
		return now;
	return m;
}

/* With sd->lock held, s not running and non-empty: start its front item.
 * The lock is dropped while it executes; returns its modelled end (0: none),
 * with s still running: finish_one ends it. */
static uint64_t start_one(struct rsd_simdev *sd, struct sim_stream *s)
{
	struct sim_work *w = s->head;
	uint64_t now;

	s->head = w->next;
	if (!s->head)
		s->tail = &s->head;
	s->running = true;
	s->current = w;
	s->runner = pthread_self();
	if (w->kind == SIM_WORK_COPY || w->kind == SIM_WORK_KERNEL)
		s->role = role_of(s, w);
	admit(sd, s, w);
	now = mono_ns();
	w->started_ns = now;
	w->due_ns = item_start(sd, w, model_start(sd, s, w, now));
	if (w->kind == SIM_WORK_COPY && !w->skip && rsd_trace_copy_enabled())
		trace_copy(s, w, false);
	pthread_mutex_unlock(&sd->lock);
	execute(w);
	pthread_mutex_lock(&sd->lock);
	return w->due_ns;
}

/* With sd->lock held, s's wait item w has run: a fault of the awaited
 * stream that covers the awaited event becomes s's from here on. */
static void inherit_fault(struct sim_stream *s, const struct sim_work *w)
{
	const struct sim_stream *t = w->wait.stream;
	const struct sim_fault *f = t ? &t->fault : &w->wait.fault;

	if (!s->fault.err && t && t->lost && w->wait.seq > t->lost_after) {
		/* The awaited event was pending when its device was lost. */
		s->fault = (struct sim_fault){ .err = RSD_EDEVLOST,
					       .after = s->completed,
					       .lost = true,
					       .device = t->device };
		return;
	}
	if (s->fault.err || !f->err || w->wait.seq <= f->after)
		return;
	s->fault = *f;
	s->fault.after = s->completed;
}

/* The engine's name for rsd:device_work. */
static const char *const role_name[] = {
	[SIM_ROLE_COMPUTE] = "compute",
	[SIM_ROLE_COPY_IN] = "copy-in",
	[SIM_ROLE_COPY_OUT] = "copy-out",
};

/* w, a copy or kernel of s that ran, as rsd:device_work. */
static void trace_work(const struct sim_stream *s, const struct sim_work *w)
{
	bool kernel = w->kind == SIM_WORK_KERNEL;
	struct rsd_location none = { 0 };
	uint64_t now = mono_ns();

	rsd_trace_device_work(s->device, kernel, role_name[role_of(s, w)],
			      kernel ? 0 : w->copy.nbytes, !kernel, kernel ? none : w->copy.src_at,
			      kernel ? none : w->copy.dst_at,
			      now > w->started_ns ? now - w->started_ns : 0);
}

/*
 * With sd->lock held, w of s over: when it ended in the model. A copy or
 * kernel at its due time; an event record at once; a wait when the awaited
 * stream's last event completed (no earlier than the event it waits for,
 * so never too early); a host function or gate when it was seen to end.
 */
static void model_end(struct sim_stream *s, const struct sim_work *w)
{
	uint64_t now = mono_ns();
	uint64_t end = w->queued_ns > s->model_end_ns ? w->queued_ns : s->model_end_ns;
	const struct sim_stream *t = w->kind == SIM_WORK_WAIT ? w->wait.stream : NULL;

	if (w->kind == SIM_WORK_COPY || w->kind == SIM_WORK_KERNEL)
		end = w->due_ns && !w->skip ? w->due_ns : now;
	else if (w->kind == SIM_WORK_WAIT)
		end = t && t->completed_model_ns ?
			      (t->completed_model_ns > end ? t->completed_model_ns : end) :
			      now;
	else if (w->kind != SIM_WORK_EVENT)
		end = now;
	s->model_end_ns = end && end < now ? end : now;
}

/* With sd->lock held: end s's running item. s may be freed on return (a
 * destroyed stream whose last item this was), and so may a stream a wait
 * item referenced. A kernel's effects run first, without the lock, with s
 * still running by this thread (no longer parked, so nobody else finishes
 * it). */
static void finish_one(struct rsd_simdev *sd, struct sim_stream *s)
{
	struct sim_work *w = s->current;

	if (w->kind == SIM_WORK_KERNEL && !w->skip) {
		s->inflight = false;
		s->runner = pthread_self();
		pthread_mutex_unlock(&sd->lock);
		rsd__sim_kernel_effects(w);
		pthread_mutex_lock(&sd->lock);
	}
	if ((w->kind == SIM_WORK_KERNEL || w->kind == SIM_WORK_COPY) && !w->skip &&
	    rsd_trace_device_work_enabled())
		trace_work(s, w);
	if (w->kind == SIM_WORK_COPY && !w->skip && rsd_trace_copy_enabled())
		trace_copy(s, w, true);
	rsd__sim_pending_del(sd, w);
	s->running = false;
	s->inflight = false;
	s->current = NULL;
	model_end(s, w);
	if (w->kind == SIM_WORK_EVENT && w->event_seq > s->completed) {
		s->completed = w->event_seq;
		s->completed_model_ns = s->model_end_ns;
	}
	if (w->kind == SIM_WORK_WAIT)
		inherit_fault(s, w);
	if (w->kind == SIM_WORK_WAIT && w->wait.stream) {
		w->wait.stream->refs--;
		rsd__sim_stream_put(sd, w->wait.stream);
	}
	s->ready_ns = mono_ns();
	if (w->kind == SIM_WORK_EVENT)
		kick_waiters(sd, s);
	kick_front(sd, s);
	free(w);
	pthread_cond_broadcast(&sd->cond);
	rsd__sim_stream_put(sd, s);
}

/* Start and finish s's front item on this thread, sleeping (unlocked) until
 * its modelled end; other threads see s running by us meanwhile. */
static void run_one(struct rsd_simdev *sd, struct sim_stream *s)
{
	uint64_t due = start_one(sd, s);

	if (due > mono_ns()) {
		pthread_mutex_unlock(&sd->lock);
		rsd__sim_sleep_until(due);
		pthread_mutex_lock(&sd->lock);
	}
	finish_one(sd, s);
}

void rsd__sim_drive(struct rsd_simdev *sd, struct sim_stream *only, bool transfers_only,
		    uint64_t upto)
{
	pthread_t self = pthread_self();

	for (;;) {
		uint64_t now = mono_ns(), due = UINT64_MAX;
		struct sim_stream *s, *todo = NULL;
		bool busy = false, closed = false;

		for (s = sd->streams; s; s = s->next) {
			struct sim_stream *t = s;

			if (only ? s != only : transfers_only && !s->is_default)
				continue;
			if (rsd__sim_stream_done(s, upto))
				continue;
			/* Blocked on another stream's event: advance that one
			 * (it has unfinished work up to the event's record). */
			while (!t->running && rsd__sim_blocked(t->head) && !gated(t->head))
				t = t->head->wait.stream;
			if (!t->running && gated(t->head)) {
				/* Another thread opens it (gate_open drives on
				 * in immediate mode). */
				closed = true;
				continue;
			}
			if (!t->running) {
				todo = t;
				break;
			}
			if (t->inflight) {
				if (t->current->due_ns <= now) {
					todo = t;
					break;
				}
				if (t->current->due_ns < due)
					due = t->current->due_ns;
				continue;
			}
			/* A host function of this thread queueing on its own
			 * stream: the item runs after it, in the loop above us. */
			if (!pthread_equal(t->runner, self))
				busy = true;
		}
		if (todo && todo->running)
			finish_one(sd, todo);
		else if (todo)
			run_one(sd, todo);
		else if (due != UINT64_MAX)
			wait_until(sd, due);
		else if (busy || (closed && upto != UINT64_MAX))
			rsd__sim_wait(sd);
		else
			return;
	}
}

void rsd__sim_streams_lose(struct rsd_simdev *sd, int device)
{
	for (struct sim_stream *s = sd->streams; s; s = s->next) {
		if (s->device != device || s->lost)
			continue;
		s->lost = true;
		s->lost_after = s->completed;
		for (struct sim_work *w = s->head; w; w = w->next) {
			if (w->kind != SIM_WORK_COPY && w->kind != SIM_WORK_KERNEL)
				continue;
			w->skip = true;
			rsd__sim_pending_del(sd, w);
		}
		/* A kernel parked until its modelled end has not taken effect:
		 * it never will. A copy's bytes moved when it started. */
		if (s->running && s->inflight && s->current->kind == SIM_WORK_KERNEL) {
			s->current->skip = true;
			rsd__sim_pending_del(sd, s->current);
		}
	}
}

/* With sd->lock held: s may go on; the mode makes progress (in immediate
 * mode by running, up to the end or a closed gate, what only allows). */
static void progress(struct rsd_simdev *sd, struct sim_stream *s, struct sim_stream *only)
{
	switch (sd->progress) {
	case RSD_SIMDEV_IMMEDIATE:
		rsd__sim_drive(sd, only, false, UINT64_MAX);
		break;
	case RSD_SIMDEV_BACKGROUND:
		kick_front(sd, s);
		break;
	case RSD_SIMDEV_ON_COMMAND:
		break;
	}
}

void rsd__sim_enqueue(struct rsd_simdev *sd, struct sim_stream *s, struct sim_work *w)
{
	w->next = NULL;
	w->stream = s;
	w->ticket = ++sd->tickets;
	w->queued_ns = mono_ns();
	rsd__sim_pending_add(sd, w);
	if (!s->head && !s->running)
		s->ready_ns = mono_ns();
	*s->tail = w;
	s->tail = &w->next;
	/* Up to the end, not to w: a host function queueing on its own stream
	 * returns at once (the item runs after it), and the outermost caller
	 * then runs what it queued. */
	progress(sd, s, s);
}

/*
 * Gates (the driver's gate_queue and gate_open). A gate is a work item that
 * its stream cannot pass until another thread opens it, as a CUDA stream
 * cannot pass a host function that has not returned; unlike one, it takes
 * no thread while closed. The handle is the item itself: it cannot finish
 * (and be freed) before it is opened, and after gate_open its opener no
 * longer owns it. gate_queue on a lost device's stream fails as every op
 * naming it does; a gate queued before the loss is opened as any other
 * (the stream's later copies are skipped anyway). In immediate mode it
 * queues nothing and answers 1 (the device runs work as it is queued), so
 * librsd stages on the calling thread and that mode stays synchronous; a
 * gate queued before a switch to immediate mode still works.
 */
int rsd__sim_gate_queue(void *ctx, void *stream, void **gate)
{
	struct rsd_simdev *sd = ctx;
	struct sim_stream *s;
	struct sim_work *w = calloc(1, sizeof(*w));

	if (!w)
		return rsd__err(RSD_ENOMEM, "simulated device: out of memory for a gate");
	w->kind = SIM_WORK_GATE;
	pthread_mutex_lock(&sd->lock);
	s = stream ? rsd__sim_find_stream(sd, stream) : NULL;
	if (!s) {
		pthread_mutex_unlock(&sd->lock);
		free(w);
		return rsd__err(RSD_ETYPE,
				"simulated device: gate_queue on %p, which is not a stream of this "
				"simulated device",
				stream);
	}
	if (s->lost) {
		int rc = rsd__sim_lost(sd, s->device, "gate_queue");

		pthread_mutex_unlock(&sd->lock);
		free(w);
		return rc;
	}
	if (sd->progress == RSD_SIMDEV_IMMEDIATE) {
		/* Work runs as it is queued: a gate would hold its stream's
		 * later work past the queueing call. */
		pthread_mutex_unlock(&sd->lock);
		free(w);
		return 1;
	}
	/* Before the enqueue: in immediate mode w may be the stream's front,
	 * and nothing runs past it until it is opened. */
	*gate = w;
	rsd__sim_enqueue(sd, s, w);
	pthread_mutex_unlock(&sd->lock);
	return 0;
}

void rsd__sim_gate_open(void *ctx, void *gate, int err)
{
	struct rsd_simdev *sd = ctx;
	struct sim_work *w = gate;
	struct sim_stream *s;

	pthread_mutex_lock(&sd->lock);
	s = w->stream;
	w->gate.open = true;
	w->gate.err = err < 0 ? err : 0;
	/* In immediate mode what queued behind it, and what waits for that
	 * on other streams, runs now (w may be freed from here on). */
	progress(sd, s, NULL);
	pthread_cond_broadcast(&sd->cond);
	pthread_mutex_unlock(&sd->lock);
}

struct worker_arg {
	struct rsd_simdev *sd;
	int device;
	enum sim_role role;
};

/*
 * The workers stand for a GPU's engines, which take no host CPU from the
 * thread that queues work on them. Under the default policy a woken worker
 * preempts that thread on its own core (it slept, so the scheduler owes it
 * time), which on a machine with few cores becomes most of a not-waiting
 * call's host time. SCHED_BATCH tasks do not preempt on wake-up; they run
 * on an idle core, or when the host thread sleeps. A refusal (some
 * sandboxes) leaves the default policy: slower, still correct.
 */
static void worker_defer_to_host(void)
{
#ifdef SCHED_BATCH
	struct sched_param sp = { .sched_priority = 0 };

	(void)pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
#endif
}

/* One per device and role: runs each of the device's streams' front item of
 * its role once it has been runnable for delay_ns; sleeps on sd->cond (until
 * the earliest due time when something is queued or in flight). An item with
 * a modelled end is parked in flight, not slept on, so the device's other
 * streams go on meanwhile; the worker of its role finishes it. Idle unless
 * the mode is background. */
static void *worker(void *p)
{
	struct worker_arg *arg = p;
	struct rsd_simdev *sd = arg->sd;
	enum sim_role role = arg->role;
	int device = arg->device;
	pthread_cond_t *wake = &sd->dev[device].wake[role];
	struct timespec ts;

	free(p);
	worker_defer_to_host();
	pthread_mutex_lock(&sd->lock);
	while (!sd->stopping) {
		uint64_t now = mono_ns(), due = UINT64_MAX, end;
		struct sim_stream *s, *todo = NULL, *fin = NULL;

		if (sd->progress != RSD_SIMDEV_BACKGROUND) {
			pthread_cond_wait(wake, &sd->lock);
			continue;
		}
		for (s = sd->streams; s && !fin; s = s->next) {
			if (s->device != device)
				continue;
			if (s->running) {
				if (!s->inflight || role_of(s, s->current) != role)
					continue;
				if (s->current->due_ns <= now)
					fin = s;
				else if (s->current->due_ns < due)
					due = s->current->due_ns;
				continue;
			}
			if (!s->head || rsd__sim_blocked(s->head) || role_of(s, s->head) != role)
				continue;
			/* The item runnable longest goes first: streams take
			 * turns. */
			if (!todo || s->ready_ns < todo->ready_ns)
				todo = s;
		}
		if (fin) {
			finish_one(sd, fin);
			continue;
		}
		if (todo && todo->ready_ns + sd->delay_ns > now) {
			if (todo->ready_ns + sd->delay_ns < due)
				due = todo->ready_ns + sd->delay_ns;
			todo = NULL;
		}
		if (todo) {
			end = start_one(sd, todo);
			if (end > mono_ns())
				todo->inflight = true;
			else
				finish_one(sd, todo);
		} else if (due == UINT64_MAX) {
			pthread_cond_wait(wake, &sd->lock);
		} else {
			ts = rsd__timespec_ns(due);
			pthread_cond_timedwait(wake, &sd->lock, &ts);
		}
	}
	pthread_mutex_unlock(&sd->lock);
	return NULL;
}

/* With sd->lock held: join the first n workers (device-major), which see
 * sd->stopping. */
static void workers_join(struct rsd_simdev *sd, int n)
{
	rsd__sim_kick_all(sd);
	pthread_mutex_unlock(&sd->lock);
	while (n--)
		pthread_join(sd->dev[n / SIM_NROLES].worker[n % SIM_NROLES], NULL);
	pthread_mutex_lock(&sd->lock);
}

/*
 * With sd->lock held: wait until no other thread is starting or stopping
 * the workers. Both drop the lock to join: a second start meanwhile would
 * create threads into the slots being joined.
 */
static void workers_settle(struct rsd_simdev *sd)
{
	while (sd->workers_changing)
		pthread_cond_wait(&sd->cond, &sd->lock);
}

static void workers_changed(struct rsd_simdev *sd)
{
	sd->workers_changing = false;
	pthread_cond_broadcast(&sd->cond);
}

/* With sd->lock held: start every device's workers, all or none. */
static int workers_start(struct rsd_simdev *sd)
{
	int i, n = sd->ndevices * SIM_NROLES, e = 0;

	for (i = 0; i < n; i++) {
		struct worker_arg *a = malloc(sizeof(*a));

		if (!a) {
			e = ENOMEM;
			break;
		}
		a->sd = sd;
		a->device = i / SIM_NROLES;
		a->role = (enum sim_role)(i % SIM_NROLES);
		e = pthread_create(&sd->dev[a->device].worker[a->role], NULL, worker, a);
		if (e) {
			free(a);
			break;
		}
	}
	if (i == n) {
		sd->workers = true;
		return 0;
	}
	/* Undo: the started workers see stopping and exit. */
	sd->stopping = true;
	sd->workers_changing = true;
	workers_join(sd, i);
	sd->stopping = false;
	workers_changed(sd);
	return rsd__err(RSD_ENOMEM,
			"simulated device: cannot start a background worker for cuda:%d: %s",
			i / SIM_NROLES, strerror(e));
}

/* With sd->lock held, leaving background mode: finish the copies the
 * workers parked in flight (at their modelled end), since in the other
 * modes nobody but a driving caller would. */
static void land_parked(struct rsd_simdev *sd)
{
	for (;;) {
		struct sim_stream *s;

		for (s = sd->streams; s && !(s->running && s->inflight); s = s->next)
			;
		if (!s)
			return;
		if (s->current->due_ns > mono_ns()) {
			uint64_t due = s->current->due_ns;

			pthread_mutex_unlock(&sd->lock);
			rsd__sim_sleep_until(due);
			pthread_mutex_lock(&sd->lock);
			continue; /* rescan: someone may have finished it */
		}
		finish_one(sd, s);
	}
}

int rsd__sim_set_progress(struct rsd_simdev *sd, enum rsd_simdev_progress mode, uint64_t delay_ns)
{
	bool leaving;
	int rc;

	workers_settle(sd);
	leaving = sd->progress == RSD_SIMDEV_BACKGROUND && mode != RSD_SIMDEV_BACKGROUND;
	if (mode == RSD_SIMDEV_BACKGROUND && !sd->workers && !sd->stopping) {
		rc = workers_start(sd);
		if (rc)
			return rc;
	}
	sd->progress = mode;
	sd->delay_ns = delay_ns;
	if (leaving)
		land_parked(sd);
	/* Work already queued proceeds: now (immediate) or in the workers. */
	if (mode == RSD_SIMDEV_IMMEDIATE)
		rsd__sim_drive(sd, NULL, false, sd->tickets);
	rsd__sim_kick_all(sd);
	pthread_cond_broadcast(&sd->cond);
	return 0;
}

void rsd__sim_workers_stop(struct rsd_simdev *sd)
{
	bool started;

	pthread_mutex_lock(&sd->lock);
	workers_settle(sd);
	started = sd->workers;
	sd->stopping = true;
	sd->workers = false;
	if (started) {
		sd->workers_changing = true;
		workers_join(sd, sd->ndevices * SIM_NROLES);
		workers_changed(sd);
	}
	pthread_mutex_unlock(&sd->lock);
}

void rsd_simdev_set_progress(struct rsd_simdev *sd, enum rsd_simdev_progress mode,
			     uint64_t delay_ns)
{
	if (!sd || (unsigned)mode > RSD_SIMDEV_BACKGROUND)
		return;
	pthread_mutex_lock(&sd->lock);
	if (rsd__sim_set_progress(sd, mode, delay_ns))
		fprintf(stderr, "librsd: %s; progress mode unchanged\n", rsd_last_error()->message);
	pthread_mutex_unlock(&sd->lock);
}

void rsd_simdev_set_auto_complete(struct rsd_simdev *sd, bool on)
{
	rsd_simdev_set_progress(sd, on ? RSD_SIMDEV_IMMEDIATE : RSD_SIMDEV_ON_COMMAND, 0);
}
