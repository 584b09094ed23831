// SPDX-License-Identifier: MIT
/*
 * The simulated device: host memory posing as CUDA devices, for machines
 * without a GPU and for tests. This file holds its life cycle, memory,
 * copies, allocator metrics and fault injection; simdev_stream.c holds
 * streams and events.
 *
 * Copies are work on a stream (simdev.h): they take effect when their
 * stream's work runs, in whatever progress mode the simulator is in, so a
 * destination holds its old bytes and a source must stay valid until then.
 * Freeing simulated memory that queued work still reads or writes is the
 * caller's bug a real GPU would turn into silent corruption; the simulator
 * reports it and aborts.
 */
#include <execinfo.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "host.h"
#include "simdev.h"

static const char *const op_names[RSD_SIMDEV_NOPS] = {
	[RSD_SIMDEV_ALLOC] = "alloc",
	[RSD_SIMDEV_COPY] = "copy",
	[RSD_SIMDEV_EVENT_RECORD] = "event_record",
	[RSD_SIMDEV_EVENT_QUERY] = "event_query",
	[RSD_SIMDEV_EVENT_SYNC] = "sync",
	[RSD_SIMDEV_METRICS] = "metrics",
	[RSD_SIMDEV_BACKING_ALLOC] = "backing alloc",
	[RSD_SIMDEV_BACKING_FREE] = "backing free",
	[RSD_SIMDEV_STREAM_WAIT] = "stream_wait_event",
	[RSD_SIMDEV_COPY_EXEC] = "copy_exec",
};

const char *rsd__sim_op_name(enum rsd_simdev_op op)
{
	return op_names[op];
}

int rsd__sim_fire(struct rsd_simdev *sd, enum rsd_simdev_op op)
{
	++sd->calls[op];
	/* The countdown advances on every call, even one fail_all fails. */
	if (sd->fail_countdown[op] && --sd->fail_countdown[op] == 0)
		return sd->fail_nth_err[op];
	return sd->fail_all_err[op];
}

int rsd__sim_enter(struct rsd_simdev *sd, enum rsd_simdev_op op)
{
	int err = rsd__sim_fire(sd, op);

	if (!err)
		return 0;
	return rsd__err(err, "simulated device: injected failure of %s call %lu (%s)", op_names[op],
			sd->calls[op], rsd_strerror(err));
}

/* Injected codes are positive RSD_E* codes; either sign is accepted and
 * anything unknown becomes RSD_EDEVICE. */
static int inject_code(int err)
{
	if (err < 0)
		err = -err;
	if (err >= RSD_EMAX)
		err = RSD_EDEVICE;
	return err;
}

/*
 * A GPU's memory is mapped when cudaMalloc returns: a copy into it takes
 * no page faults. The simulated device's memory is anonymous host memory,
 * which faults on first touch (on the 2-core VM a fresh 64 MiB block made
 * a copy's memmove about twice as long: 16,000 faults). With the link
 * model on, whose timing must be the device's, a device chunk is populated
 * at allocation, within its modelled allocation time. Best effort: a
 * kernel older than 5.14 refuses MADV_POPULATE_WRITE and the pages fault
 * as before.
 */
static void populate(void *base, uint64_t nbytes)
{
#ifdef MADV_POPULATE_WRITE
	(void)madvise(base, (size_t)nbytes, MADV_POPULATE_WRITE);
#else
	(void)base;
	(void)nbytes;
#endif
}

/* Backing allocations are counted (and can be made to fail) and, with the
 * link model on, take their modelled time: what cudaMalloc, cudaHostAlloc
 * and cudaFree cost. They run under the pool's lock, never under sd->lock
 * (the pool is entered without it), so taking it here keeps the order. */
static int backing_alloc(void *ctx, uint64_t nbytes, void **base)
{
	struct sim_backing *b = ctx;
	struct rsd_simdev *sd = b->sd;
	uint64_t ns = 0, t0;
	int rc;

	pthread_mutex_lock(&sd->lock);
	rc = rsd__sim_enter(sd, RSD_SIMDEV_BACKING_ALLOC);
	if (sd->lm.on)
		ns = (uint64_t)((double)(b->device ? sd->lm.dev_alloc_ns : sd->lm.pinned_alloc_ns) *
				sd->lm.scale);
	pthread_mutex_unlock(&sd->lock);
	if (rc)
		return rc;
	t0 = rsd__sim_now_ns();
	rc = b->base->chunk_alloc(NULL, nbytes, base);
	if (!rc && b->device && sd->lm.on) /* lm is fixed at creation */
		populate(*base, nbytes);
	if (!rc && ns)
		rsd__sim_sleep_until(t0 + ns);
	return rc;
}

static void backing_free(void *ctx, void *base, uint64_t nbytes)
{
	struct sim_backing *b = ctx;
	struct rsd_simdev *sd = b->sd;
	uint64_t ns = 0;

	pthread_mutex_lock(&sd->lock);
	sd->calls[RSD_SIMDEV_BACKING_FREE]++;
	if (sd->lm.on)
		ns = (uint64_t)((double)sd->lm.free_ns * sd->lm.scale);
	pthread_mutex_unlock(&sd->lock);
	b->base->chunk_free(NULL, base, nbytes);
	if (ns)
		rsd__sim_sleep_until(rsd__sim_now_ns() + ns);
}

static const struct rsd__pool_ops backing_ops = {
	.chunk_alloc = backing_alloc,
	.chunk_free = backing_free,
};

static void backing_init(struct sim_backing *b, struct rsd_simdev *sd,
			 const struct rsd__pool_ops *base, bool device)
{
	b->sd = sd;
	b->base = base;
	b->device = device;
}

int rsd_simdev_create(const struct rsd_simdev_config *cfg, struct rsd_simdev **out)
{
	size_t pairs;
	enum rsd_simdev_progress mode;
	pthread_condattr_t ca;
	struct rsd_simdev *sd;
	int rc;

	if (!out)
		return rsd__err(RSD_ETYPE, "rsd_simdev_create: out is NULL");
	if (!cfg)
		return rsd__err(RSD_ETYPE, "rsd_simdev_create: config is NULL");
	if (cfg->ndevices < 0 || cfg->ndevices > RSD_CUDA_MAX_DEVICE + 1)
		return rsd__err(RSD_EINVAL, "rsd_simdev_create: ndevices %d is outside 0..%d",
				cfg->ndevices, RSD_CUDA_MAX_DEVICE + 1);
	mode = cfg->auto_complete ? RSD_SIMDEV_IMMEDIATE : cfg->progress;
	if ((unsigned)mode > RSD_SIMDEV_BACKGROUND)
		return rsd__err(RSD_EINVAL,
				"rsd_simdev_create: progress mode %d is not one of "
				"on-command, immediate, background",
				(int)cfg->progress);
	sd = calloc(1, sizeof(*sd) + (size_t)cfg->ndevices * sizeof(sd->dev[0]));
	if (!sd)
		return rsd__err(RSD_ENOMEM, "rsd_simdev_create: out of memory for %d devices",
				cfg->ndevices);
	sd->ndevices = cfg->ndevices;
	sd->pooled = cfg->pooled;
	pairs = (size_t)cfg->ndevices * (size_t)cfg->ndevices + 1;
	sd->peer_on = calloc(pairs, sizeof(*sd->peer_on));
	sd->peer_eng = calloc(pairs, sizeof(*sd->peer_eng));
	sd->peer_streams = calloc(pairs, sizeof(struct sim_stream *));
	if (!sd->peer_on || !sd->peer_eng || !sd->peer_streams) {
		free(sd->peer_on);
		free(sd->peer_eng);
		free(sd->peer_streams);
		free(sd);
		return rsd__err(RSD_ENOMEM, "rsd_simdev_create: out of memory for %d devices",
				cfg->ndevices);
	}
	rsd__sim_links_init(sd, cfg);
	pthread_mutex_init(&sd->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&sd->cond, &ca);
	for (int d = 0; d < sd->ndevices; d++)
		for (int r = 0; r < SIM_NROLES; r++)
			pthread_cond_init(&sd->dev[d].wake[r], &ca);
	pthread_condattr_destroy(&ca);
	/* Unpooled: chunk size 0, so every allocation is its own mapping. */
	backing_init(&sd->pinned_backing, sd, &rsd__locked_chunk_ops, false);
	rsd__pool_init(&sd->pinned, &backing_ops, &sd->pinned_backing,
		       sd->pooled ? SIM_PINNED_CHUNK : 0, RSD__PAGE_GRANULE);
	/* Pinned oversize blocks (an evicted value larger than a chunk) are
	 * kept as device ones are, as the CUDA driver keeps them. */
	if (sd->pooled)
		rsd__pool_set_keep(&sd->pinned, sd->lm.oversize_keep);
	/* Never pooled: each allocation is a fresh, untouched mapping, which
	 * the pinned check finds not resident, hence not locked. */
	rsd__pool_init(&sd->pageable, &rsd__anon_chunk_ops, NULL, 0, RSD__PAGE_GRANULE);
	for (int d = 0; d < sd->ndevices; d++) {
		struct sim_device *dv = &sd->dev[d];

		backing_init(&dv->backing, sd, &rsd__anon_chunk_ops, true);
		rsd__pool_init(&dv->pool, &backing_ops, &dv->backing,
			       sd->pooled ? SIM_DEVICE_CHUNK : 0, SIM_DEVICE_GRANULE);
		/* Oversize blocks are kept for reuse only in a pooled device
		 * (an unpooled one gives every free back, as cudaFree). */
		if (sd->pooled)
			rsd__pool_set_keep(&dv->pool, sd->lm.oversize_keep);
		dv->transfer.embedded = dv->h2d.embedded = dv->d2h.embedded = true;
	}
	pthread_mutex_lock(&sd->lock);
	rc = 0;
	for (int d = 0; d < sd->ndevices && !rc; d++) {
		struct sim_device *dv = &sd->dev[d];

		rc = rsd__sim_stream_link(sd, &dv->transfer, d, true);
		if (!rc)
			rc = rsd__sim_stream_link(sd, &dv->h2d, d, true);
		if (!rc)
			rc = rsd__sim_stream_link(sd, &dv->d2h, d, true);
	}
	if (!rc)
		rc = rsd__sim_set_progress(sd, mode, cfg->delay_ns);
	pthread_mutex_unlock(&sd->lock);
	if (rc) {
		rsd_simdev_destroy(sd);
		return rc;
	}
	*out = sd;
	return 0;
}

void rsd_simdev_destroy(struct rsd_simdev *sd)
{
	if (!sd)
		return;
	rsd__sim_workers_stop(sd);
	rsd__sim_streams_destroy(sd);
	for (int d = 0; d < sd->ndevices; d++)
		rsd__pool_destroy(&sd->dev[d].pool);
	rsd__pool_destroy(&sd->pinned);
	rsd__pool_destroy(&sd->pageable);
	free(sd->peer_on);
	free(sd->peer_eng);
	free(sd->peer_streams); /* the streams went with the others */
	pthread_cond_destroy(&sd->cond);
	for (int d = 0; d < sd->ndevices; d++)
		for (int r = 0; r < SIM_NROLES; r++)
			pthread_cond_destroy(&sd->dev[d].wake[r]);
	pthread_mutex_destroy(&sd->lock);
	free(sd);
}

/* -RSD_EINVAL unless at is pinned-host or one of this simulator's devices. */
static int check_device_location(struct rsd_simdev *sd, const char *op, struct rsd_location at,
				 bool host_ok)
{
	int rc = rsd__driver_check_location("simulated device", at);

	if (rc)
		return rc;
	if (at.kind == RSD_PAGEABLE_HOST && !host_ok)
		return rsd__err(RSD_EINVAL,
				"simulated device: %s serves pinned-host and cuda "
				"locations, not pageable-host",
				op);
	if (at.kind == RSD_CUDA && at.device >= sd->ndevices)
		return rsd__err(RSD_EINVAL,
				"simulated device: cuda:%d is not available (%d "
				"simulated devices)",
				at.device, sd->ndevices);
	return 0;
}

static struct rsd__pool *pool_of(struct rsd_simdev *sd, struct rsd_location at)
{
	return at.kind == RSD_CUDA ? &sd->dev[at.device].pool : &sd->pinned;
}

static int sim_alloc(void *ctx, struct rsd_location at, uint64_t nbytes, void **ptr)
{
	struct rsd_simdev *sd = ctx;
	char name[RSD_LOCATION_NAME_MAX];
	bool unpinned;
	void *p;
	int rc;

	pthread_mutex_lock(&sd->lock);
	rc = rsd__sim_enter(sd, RSD_SIMDEV_ALLOC);
	if (!rc && !ptr) {
		pthread_mutex_unlock(&sd->lock);
		return rsd__err(RSD_ETYPE, "simulated device: alloc needs a pointer to store the "
					   "address");
	}
	if (!rc)
		rc = check_device_location(sd, "alloc", at, false);
	if (!rc)
		rc = rsd__sim_lost_at(sd, at, "alloc");
	if (!rc && sd->fail_loc_err[rsd__loc_slot(at)]) {
		int err = sd->fail_loc_err[rsd__loc_slot(at)];

		rc = rsd__err(err,
			      "simulated device: injected failure of alloc call %lu at %s "
			      "(%s)",
			      sd->calls[RSD_SIMDEV_ALLOC],
			      rsd_location_name(at, name, sizeof(name)), rsd_strerror(err));
	}
	unpinned = sd->unpinned_host && at.kind == RSD_PINNED_HOST;
	pthread_mutex_unlock(&sd->lock);
	if (rc)
		return rc;
	if (!unpinned)
		return rsd__pool_alloc(pool_of(sd, at), nbytes, ptr);
	/* What a broken pinned allocator hands out: pageable memory. The same
	 * check as the host driver's must refuse it. */
	rc = rsd__pool_alloc(&sd->pageable, nbytes, &p);
	if (rc)
		return rc;
	rc = rsd__check_pinned("simulated device", p, nbytes);
	if (!rc) {
		*ptr = p;
		return 0;
	}
	rsd__pool_free(&sd->pageable, p);
	return rc;
}

static void sim_free(void *ctx, struct rsd_location at, void *ptr, uint64_t nbytes)
{
	struct rsd_simdev *sd = ctx;
	char name[RSD_LOCATION_NAME_MAX], what[512];
	bool busy, lost;

	if (!ptr)
		return;
	pthread_mutex_lock(&sd->lock);
	/* A lost device's memory is never given back, as cudaFree in a dead
	 * context frees nothing: the bytes stay allocated (and counted). */
	lost = at.kind == RSD_CUDA && at.device >= 0 && at.device < sd->ndevices &&
	       sd->dev[at.device].lost;
	busy = !lost && rsd__sim_pending_touches(sd, ptr, nbytes, what, sizeof(what));
	pthread_mutex_unlock(&sd->lock);
	if (lost)
		return;
	if (busy) {
		void *chain[32];
		int depth = backtrace(chain, 32);

		fprintf(stderr,
			"librsd: simulated device: free of %p (%" PRIu64 " bytes) at %s while a "
			"queued copy or kernel still reads or writes it (%s); a GPU would "
			"corrupt it. The freeing call:\n",
			ptr, nbytes, rsd_location_name(at, name, sizeof(name)), what);
		backtrace_symbols_fd(chain, depth, 2);
		abort();
	}
	if ((at.kind != RSD_PINNED_HOST && at.kind != RSD_CUDA) || !rsd_location_valid(at) ||
	    (at.kind == RSD_CUDA && at.device >= sd->ndevices) ||
	    rsd__pool_free(pool_of(sd, at), ptr))
		fprintf(stderr,
			"librsd: simulated device: free of %p at %s, which is not live "
			"memory there\n",
			ptr, rsd_location_name(at, name, sizeof(name)));
}

/* With sd->lock held: the stream a copy runs on; NULL stands for the
 * transfer stream of the device involved (the destination's first). */
static struct sim_stream *copy_stream(struct rsd_simdev *sd, void *stream,
				      struct rsd_location dst_at, struct rsd_location src_at)
{
	if (stream)
		return rsd__sim_find_stream(sd, stream);
	if (dst_at.kind == RSD_CUDA)
		return &sd->dev[dst_at.device].transfer;
	if (src_at.kind == RSD_CUDA)
		return &sd->dev[src_at.device].transfer;
	return NULL;
}

/*
 * With sd->lock held: a copy from or to pageable memory holds its caller
 * until it has run, as CUDA's pageable cudaMemcpyAsync does (the runtime
 * stages it through its own pinned buffer). In background mode the workers
 * run it; otherwise the caller runs the stream up to it (on-command mode's
 * completer would be the caller anyway: nobody else knows to).
 */
static void hold(struct rsd_simdev *sd, struct sim_stream *s, uint64_t ticket)
{
	s->refs++;
	if (sd->progress == RSD_SIMDEV_BACKGROUND) {
		while (!rsd__sim_stream_done(s, ticket))
			rsd__sim_wait(sd);
	} else {
		rsd__sim_drive(sd, s, false, ticket);
	}
	s->refs--;
	rsd__sim_stream_put(sd, s);
}

static int sim_copy(void *ctx, void *dst, struct rsd_location dst_at, const void *src,
		    struct rsd_location src_at, uint64_t nbytes, void *stream)
{
	struct rsd_simdev *sd = ctx;
	struct sim_work *w = NULL;
	struct sim_stream *s;
	uint64_t ticket;
	int rc;

	pthread_mutex_lock(&sd->lock);
	rc = rsd__sim_enter(sd, RSD_SIMDEV_COPY);
	if (rc)
		goto out;
	rc = check_device_location(sd, "copy", dst_at, true);
	if (rc)
		goto out;
	rc = check_device_location(sd, "copy", src_at, true);
	if (!rc)
		rc = rsd__sim_lost_at(sd, dst_at, "copy");
	if (!rc)
		rc = rsd__sim_lost_at(sd, src_at, "copy");
	if (rc)
		goto out;
	s = copy_stream(sd, stream, dst_at, src_at);
	if (stream && !s) {
		rc = rsd__err(RSD_ETYPE,
			      "simulated device: %p is not a stream of this simulated "
			      "device",
			      stream);
		goto out;
	}
	if (s && s->lost) {
		rc = rsd__sim_lost(sd, s->device, "copy on a stream");
		goto out;
	}
	if (nbytes && (!dst || !src)) {
		rc = rsd__err(RSD_ETYPE,
			      "simulated device: copy of %" PRIu64 " bytes with a "
			      "NULL %s",
			      nbytes, dst ? "source" : "destination");
		goto out;
	}
	if (!s) {
		/* Host to host with no stream: no device is involved, so it
		 * is done synchronously, as cudaMemcpy between host buffers. */
		pthread_mutex_unlock(&sd->lock);
		if (nbytes)
			memmove(dst, src, (size_t)nbytes);
		return 0;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		rc = rsd__err(RSD_ENOMEM, "simulated device: out of memory for a copy");
		goto out;
	}
	w->kind = SIM_WORK_COPY;
	w->copy.dst = dst;
	w->copy.src = src;
	w->copy.dst_at = dst_at;
	w->copy.src_at = src_at;
	w->copy.nbytes = nbytes;
	ticket = sd->tickets + 1; /* what rsd__sim_enqueue gives w */
	rsd__sim_enqueue(sd, s, w);
	if (nbytes && rsd__sim_link_holds(sd, dst_at, src_at))
		hold(sd, s, ticket);
out:
	pthread_mutex_unlock(&sd->lock);
	return rc;
}

/* With sd->lock held: the lazily made stream of peer copies src -> dst (on
 * dst's device, as a NULL stream's copies are); NULL without memory. */
static struct sim_stream *peer_stream(struct rsd_simdev *sd, int src, int dst)
{
	struct sim_stream **pp = &sd->peer_streams[src * sd->ndevices + dst];

	if (!*pp) {
		*pp = calloc(1, sizeof(**pp));
		if (!*pp) {
			rsd__err(RSD_ENOMEM,
				 "simulated device: out of memory for the peer "
				 "stream cuda:%d -> cuda:%d",
				 src, dst);
			return NULL;
		}
		if (rsd__sim_stream_link(sd, *pp, dst, true)) {
			free(*pp);
			*pp = NULL;
			return NULL;
		}
	}
	return *pp;
}

static void *sim_transfer_stream(void *ctx, struct rsd_location dst, struct rsd_location src)
{
	struct rsd_simdev *sd = ctx;
	struct sim_stream *s = NULL;

	if (check_device_location(sd, "transfer_stream", dst, true) ||
	    check_device_location(sd, "transfer_stream", src, true))
		return NULL;
	pthread_mutex_lock(&sd->lock);
	if (rsd__sim_lost_at(sd, dst, "transfer_stream") ||
	    rsd__sim_lost_at(sd, src, "transfer_stream"))
		s = NULL;
	else if (dst.kind == RSD_CUDA && src.kind == RSD_CUDA && dst.device != src.device)
		s = peer_stream(sd, src.device, dst.device);
	else if (dst.kind == RSD_CUDA && src.kind == RSD_CUDA)
		s = &sd->dev[dst.device].transfer;
	else if (dst.kind == RSD_CUDA)
		s = &sd->dev[dst.device].h2d;
	else if (src.kind == RSD_CUDA)
		s = &sd->dev[src.device].d2h;
	pthread_mutex_unlock(&sd->lock);
	return s;
}

static int sim_device_count(void *ctx)
{
	return ((struct rsd_simdev *)ctx)->ndevices;
}

static int sim_metrics(void *ctx, int device, uint64_t *allocated, uint64_t *reserved)
{
	struct rsd_simdev *sd = ctx;
	struct rsd__pool_stats st;
	int rc;

	pthread_mutex_lock(&sd->lock);
	rc = rsd__sim_enter(sd, RSD_SIMDEV_METRICS);
	if (rc)
		goto out;
	if (!allocated || !reserved) {
		rc = rsd__err(RSD_ETYPE, "simulated device: metrics needs both output pointers");
		goto out;
	}
	if (device < 0 || device >= sd->ndevices) {
		rc = rsd__err(RSD_EINVAL,
			      "simulated device: no device %d for metrics (%d "
			      "simulated devices)",
			      device, sd->ndevices);
		goto out;
	}
	rc = rsd__sim_lost(sd, device, "metrics");
	if (rc)
		goto out;
	pthread_mutex_unlock(&sd->lock);
	rsd__pool_stats(&sd->dev[device].pool, &st);
	*allocated = st.allocated_bytes;
	/* Unpooled memory reserves nothing beyond what is allocated. */
	*reserved = sd->pooled ? st.reserved_bytes : st.allocated_bytes;
	return 0;
out:
	pthread_mutex_unlock(&sd->lock);
	return rc;
}

void rsd_simdev_set_unpinned_host(struct rsd_simdev *sd, bool on)
{
	if (!sd)
		return;
	pthread_mutex_lock(&sd->lock);
	sd->unpinned_host = on;
	pthread_mutex_unlock(&sd->lock);
}

uint64_t rsd_simdev_allocated_bytes(struct rsd_simdev *sd, int device)
{
	struct rsd__pool_stats st;

	if (!sd || device < 0 || device >= sd->ndevices)
		return 0;
	rsd__pool_stats(&sd->dev[device].pool, &st);
	return st.allocated_bytes;
}

static bool sim_device_lost(void *ctx, int device)
{
	struct rsd_simdev *sd = ctx;
	bool lost;

	if (device < 0 || device >= sd->ndevices)
		return false;
	pthread_mutex_lock(&sd->lock);
	lost = sd->dev[device].lost;
	pthread_mutex_unlock(&sd->lock);
	return lost;
}

static const struct rsd_device_ops sim_ops = {
	.name = "simdev",
	.device_count = sim_device_count,
	.alloc = sim_alloc,
	.free = sim_free,
	.copy = sim_copy,
	.stream_device = rsd__sim_stream_device,
	.default_stream = rsd__sim_default_stream,
	.stream_sync = rsd__sim_stream_sync,
	.device_sync = rsd__sim_device_sync,
	.event_record = rsd__sim_event_record,
	.event_query = rsd__sim_event_query,
	.event_sync = rsd__sim_event_sync,
	.event_destroy = rsd__sim_event_destroy,
	.metrics = sim_metrics,
	.transfer_stream = sim_transfer_stream,
	.stream_wait_event = rsd__sim_stream_wait_event,
	.device_lost = sim_device_lost,
	.event_wait = rsd__sim_event_wait,
	.stream_wait = rsd__sim_stream_wait,
	.gate_queue = rsd__sim_gate_queue,
	.gate_open = rsd__sim_gate_open,
};

const struct rsd_device_ops *rsd_simdev_ops(void)
{
	return &sim_ops;
}

/* ---- fault injection ---- */

int rsd__sim_lost(struct rsd_simdev *sd, int device, const char *op)
{
	if (device < 0 || device >= sd->ndevices || !sd->dev[device].lost)
		return 0;
	return rsd__err(RSD_EDEVLOST,
			"simulated device: %s on cuda:%d, which was lost "
			"(rsd_simdev_lose_device): every operation on it fails",
			op, device);
}

int rsd__sim_lost_at(struct rsd_simdev *sd, struct rsd_location at, const char *op)
{
	return at.kind == RSD_CUDA ? rsd__sim_lost(sd, at.device, op) : 0;
}

int rsd_simdev_lose_device(struct rsd_simdev *sd, int device)
{
	if (!sd)
		return rsd__err(RSD_ETYPE, "rsd_simdev_lose_device: simdev is NULL");
	if (device < 0 || device >= sd->ndevices)
		return rsd__err(RSD_EINVAL,
				"rsd_simdev_lose_device: no device %d (%d simulated devices)",
				device, sd->ndevices);
	pthread_mutex_lock(&sd->lock);
	if (!sd->dev[device].lost) {
		sd->dev[device].lost = true;
		rsd__sim_streams_lose(sd, device);
		/* Waiters on its work, and workers whose streams waited on
		 * it, see the loss. */
		rsd__sim_kick_all(sd);
		pthread_cond_broadcast(&sd->cond);
	}
	pthread_mutex_unlock(&sd->lock);
	return 0;
}

bool rsd_simdev_device_lost(struct rsd_simdev *sd, int device)
{
	return sd && sim_device_lost(sd, device);
}

void rsd_simdev_fail_nth(struct rsd_simdev *sd, enum rsd_simdev_op op, unsigned n, int err)
{
	if (!sd || (unsigned)op >= RSD_SIMDEV_NOPS)
		return;
	err = inject_code(err);
	pthread_mutex_lock(&sd->lock);
	sd->fail_countdown[op] = err ? n : 0;
	sd->fail_nth_err[op] = err;
	pthread_mutex_unlock(&sd->lock);
}

void rsd_simdev_fail_all(struct rsd_simdev *sd, enum rsd_simdev_op op, int err)
{
	if (!sd || (unsigned)op >= RSD_SIMDEV_NOPS)
		return;
	pthread_mutex_lock(&sd->lock);
	sd->fail_all_err[op] = inject_code(err);
	pthread_mutex_unlock(&sd->lock);
}

void rsd_simdev_fail_location(struct rsd_simdev *sd, struct rsd_location at, int err)
{
	if (!sd || !rsd_location_valid(at))
		return;
	pthread_mutex_lock(&sd->lock);
	sd->fail_loc_err[rsd__loc_slot(at)] = inject_code(err);
	pthread_mutex_unlock(&sd->lock);
}

unsigned long rsd_simdev_calls(struct rsd_simdev *sd, enum rsd_simdev_op op)
{
	unsigned long n;

	if (!sd || (unsigned)op >= RSD_SIMDEV_NOPS)
		return 0;
	pthread_mutex_lock(&sd->lock);
	n = sd->calls[op];
	pthread_mutex_unlock(&sd->lock);
	return n;
}
