// SPDX-License-Identifier: MIT
/*
 * The CUDA driver's gates, for librsd's staging workers: host functions
 * queued with cudaLaunchHostFunc that hold their stream until opened, and
 * the per-stream records (struct gate_line) of the first gate opened as
 * failed, which the events recorded after it on that stream report. The
 * comment below says how; gates.lock (below) is the only lock here.
 */
#include <pthread.h>
#include <stdlib.h>

#include "cuda_internal.h"

#if RSD_HAVE_CUDA
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

int cu_gate_queue(void *ctx, void *stream, void **gate)
{
	struct cuda_gate *g;
	cudaError_t e;
	int dev = -1, rc;

	if (!gate)
		return rsd__err(RSD_ETYPE, "CUDA driver: gate_queue needs a gate pointer");
	if (!stream)
		return rsd__err(RSD_ETYPE, "CUDA driver: gate_queue needs a stream, not NULL");
	rc = cuda_stream_sound_device(ctx, "gate_queue", stream, &dev);
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

void cu_gate_open(void *ctx, void *gate, int err)
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
void cuda_event_gates(struct cuda_event *ev, cudaStream_t s)
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
int cuda_event_gate_failed(const struct cuda_event *ev, const char *op)
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

/* Before ev goes back to its device's free list: the reference its record
 * took on its stream's line given back. */
void cuda_event_ungate(struct cuda_event *ev)
{
	if (ev->line) {
		pthread_mutex_lock(&gates.lock);
		line_put(ev->line);
		pthread_mutex_unlock(&gates.lock);
		ev->line = NULL;
	}
}
#endif /* RSD_HAVE_CUDA */
