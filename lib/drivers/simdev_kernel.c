// SPDX-License-Identifier: MIT
/*
 * Kernels of the simulated device and the check that device-side readers
 * and writers are ordered (model in simdev.h).
 *
 * A kernel is a work item of known length on its device's compute engine:
 * it reserves the engine from max(now, busy_until), so kernels of one
 * device follow one another across streams, while copies (on copy engines,
 * or on none) and other devices' kernels overlap it. Its fills and function
 * take effect when it finishes, at its modelled end.
 *
 * The ordering check stands for what a GPU would do to a reader that is not
 * ordered after a writer (or a writer not ordered after a reader): the bytes
 * it sees depend on timing. Work ordered after other work, by its stream or
 * by a stream wait on an event recorded after it, starts only once that
 * work has finished; so when an item starts, no copy or kernel with a
 * smaller ticket that has not finished is ordered before it. The starting
 * item must then not read what such an item writes (read before write) nor
 * write what it reads (write before read); two unordered writes are not
 * checked. The items that touch memory are kept on sd->pending in ticket
 * order, so the check walks only unfinished work queued before the starting
 * item. Host code reading or writing the bytes cannot be seen: the check
 * covers device-side work, copies and kernels.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simdev.h"

/* Kernel ranges are stored right after their item. */
_Static_assert(sizeof(struct sim_work) % _Alignof(struct rsd_simdev_access) == 0,
	       "a kernel's ranges after its item are aligned");

/* One byte range an item reads or writes. */
struct range {
	const char *p;
	uint64_t n;
	bool write;
};

/* The i-th range w touches (0-based); false past the last. Copies read
 * their source (range 0) and write their destination (range 1). */
static bool range_of(const struct sim_work *w, size_t i, struct range *r)
{
	if (w->kind == SIM_WORK_COPY && i < 2 && w->copy.nbytes) {
		r->p = i ? (const char *)w->copy.dst : (const char *)w->copy.src;
		r->n = w->copy.nbytes;
		r->write = i == 1;
		return true;
	}
	if (w->kind == SIM_WORK_KERNEL && i < w->kernel.nacc) {
		r->p = w->kernel.acc[i].ptr;
		r->n = w->kernel.acc[i].nbytes;
		r->write = w->kernel.acc[i].write;
		return true;
	}
	return false;
}

static bool overlap(const char *a, uint64_t an, const char *b, uint64_t bn)
{
	return an && bn && a < b + bn && b < a + an;
}

void rsd__sim_pending_add(struct rsd_simdev *sd, struct sim_work *w)
{
	struct range r;

	if (!range_of(w, 0, &r))
		return;
	/* Tickets are issued under sd->lock as items are queued: appending
	 * keeps the list in ticket order. */
	w->listed = true;
	rsd__list_add_tail(&sd->pending, &w->pend);
}

void rsd__sim_pending_del(struct rsd_simdev *sd, struct sim_work *w)
{
	if (!w->listed)
		return;
	rsd__list_del(&sd->pending, &w->pend);
	w->listed = false;
}

static void describe(const struct sim_work *w, char *buf, size_t len);

bool rsd__sim_pending_touches(struct rsd_simdev *sd, const void *p, uint64_t n, char *buf,
			      size_t len)
{
	const struct sim_work *w;
	struct range r;

	rsd__list_for_each_entry(w, &sd->pending, pend)
		for (size_t i = 0; range_of(w, i, &r); i++) {
			char what[256];

			/* Work queued behind a failed copy counts: nothing
			 * may free what it names before its stream is
			 * synchronized (it is skipped here; a device whose
			 * failure is not sticky would run it). */
			if (!overlap(r.p, r.n, p, n))
				continue;
			if (!buf)
				return true;
			describe(w, what, sizeof(what));
			snprintf(buf, len, "%s, ticket %" PRIu64 ", %s%s", what, w->ticket,
				 w->stream->current == w ? "running" : "queued",
				 w->stream->fault.err ? " behind a failed copy of its stream" : "");
			return true;
		}
	return false;
}

/* "a copy of 64 bytes from 0x... (cuda:0) to 0x... (pinned-host)" or "a
 * kernel of 5000000 ns", then its stream and device. */
static void describe(const struct sim_work *w, char *buf, size_t len)
{
	char dst[RSD_LOCATION_NAME_MAX], src[RSD_LOCATION_NAME_MAX];
	const struct sim_stream *s = w->stream;

	if (w->kind == SIM_WORK_COPY)
		snprintf(buf, len,
			 "a copy of %" PRIu64 " bytes from %p (%s) to %p (%s) on stream %p "
			 "(cuda:%d)",
			 w->copy.nbytes, w->copy.src,
			 rsd_location_name(w->copy.src_at, src, sizeof(src)), w->copy.dst,
			 rsd_location_name(w->copy.dst_at, dst, sizeof(dst)), (void *)s, s->device);
	else
		snprintf(buf, len, "a kernel of %" PRIu64 " ns on stream %p (cuda:%d)",
			 w->kernel.ns, (void *)s, s->device);
}

static void report_unordered(const struct sim_work *w, const struct range *a,
			     const struct sim_work *v, const struct range *b)
{
	char wd[256], vd[256];

	describe(w, wd, sizeof(wd));
	describe(v, vd, sizeof(vd));
	fprintf(stderr,
		"librsd: simulated device: %s %s %" PRIu64 " bytes at %p while %s, queued "
		"before it and not finished, %s %" PRIu64 " bytes at %p: it is not ordered "
		"after that work (a stream wait on an event recorded after it); a GPU would "
		"%s\n",
		wd, a->write ? "writes" : "reads", a->n, (const void *)a->p, vd,
		b->write ? "writes" : "reads", b->n, (const void *)b->p,
		a->write ? "overwrite bytes it has not read yet" : "read bytes not written yet");
}

void rsd__sim_check_order(struct rsd_simdev *sd, const struct sim_work *w)
{
	const struct sim_work *v;
	struct range a, b;

	rsd__list_for_each_entry(v, &sd->pending, pend) {
		if (v->ticket >= w->ticket)
			return; /* the rest was queued after w */
		for (size_t i = 0; range_of(w, i, &a); i++)
			for (size_t j = 0; range_of(v, j, &b); j++)
				if (a.write != b.write && overlap(a.p, a.n, b.p, b.n)) {
					report_unordered(w, &a, v, &b);
					abort();
				}
	}
}

uint64_t rsd__sim_kernel_start(struct rsd_simdev *sd, const struct sim_work *w, uint64_t now)
{
	struct sim_engine *e = &sd->dev[w->stream->device].compute_eng;
	uint64_t start = e->busy_until > now ? e->busy_until : now;

	/* A duration past the end of time ends there. */
	e->busy_until = w->kernel.ns > UINT64_MAX - start ? UINT64_MAX : start + w->kernel.ns;
	return e->busy_until;
}

void rsd__sim_kernel_effects(const struct sim_work *w)
{
	for (size_t i = 0; i < w->kernel.nacc; i++) {
		const struct rsd_simdev_access *a = &w->kernel.acc[i];

		if (a->fill && a->nbytes)
			memset(a->ptr, a->pattern, (size_t)a->nbytes);
	}
	if (w->kernel.fn)
		w->kernel.fn(w->kernel.arg);
}

/* The modelled duration: the time scale applies with the link model on. */
static uint64_t scaled(const struct rsd_simdev *sd, uint64_t ns)
{
	double v;

	if (!sd->lm.on)
		return ns;
	v = (double)ns * sd->lm.scale;
	return v >= (double)UINT64_MAX ? UINT64_MAX : (uint64_t)v;
}

/* 0, or the error of the first bad range. */
static int check_ranges(const struct rsd_simdev_access *acc, size_t nacc)
{
	if (nacc && !acc)
		return rsd__err(RSD_ETYPE, "rsd_simdev_launch_kernel: %zu ranges and a NULL array",
				nacc);
	for (size_t i = 0; i < nacc; i++) {
		const struct rsd_simdev_access *a = &acc[i];

		if (a->nbytes && !a->ptr)
			return rsd__err(RSD_ETYPE,
					"rsd_simdev_launch_kernel: range %zu of %" PRIu64
					" bytes has a NULL pointer",
					i, a->nbytes);
		if (a->fill && !a->write)
			return rsd__err(RSD_EINVAL,
					"rsd_simdev_launch_kernel: range %zu asks for a fill but "
					"is read, not written",
					i);
		if (a->nbytes > UINTPTR_MAX - (uintptr_t)a->ptr)
			return rsd__err(RSD_EINVAL,
					"rsd_simdev_launch_kernel: range %zu (%" PRIu64
					" bytes at %p) runs past the end of the address space",
					i, a->nbytes, a->ptr);
	}
	return 0;
}

int rsd_simdev_launch_kernel(struct rsd_simdev *sd, void *stream, uint64_t duration_ns,
			     const struct rsd_simdev_access *acc, size_t nacc,
			     void (*fn)(void *arg), void *arg)
{
	struct sim_work *w = NULL;
	struct sim_stream *s;
	int rc;

	if (!sd)
		return rsd__err(RSD_ETYPE, "rsd_simdev_launch_kernel: simdev is NULL");
	rc = check_ranges(acc, nacc);
	if (rc)
		return rc;
	if (nacc > (SIZE_MAX - sizeof(*w)) / sizeof(*acc))
		return rsd__err(RSD_ENOMEM,
				"rsd_simdev_launch_kernel: %zu ranges do not fit in memory", nacc);
	/* The ranges live right after the item, freed with it. */
	w = calloc(1, sizeof(*w) + nacc * sizeof(*acc));
	if (!w)
		return rsd__err(RSD_ENOMEM,
				"rsd_simdev_launch_kernel: out of memory for %zu ranges", nacc);
	w->kind = SIM_WORK_KERNEL;
	w->kernel.acc = (struct rsd_simdev_access *)(w + 1);
	w->kernel.nacc = nacc;
	if (nacc)
		memcpy(w->kernel.acc, acc, nacc * sizeof(*acc));
	w->kernel.ns = scaled(sd, duration_ns);
	w->kernel.fn = fn;
	w->kernel.arg = arg;
	pthread_mutex_lock(&sd->lock);
	s = rsd__sim_find_stream(sd, stream);
	if (!s) {
		rc = rsd__err(RSD_ETYPE,
			      "rsd_simdev_launch_kernel: %p is not a stream of this simulated "
			      "device",
			      stream);
		goto out;
	}
	rc = rsd__sim_lost(sd, s->device, "rsd_simdev_launch_kernel");
	if (rc)
		goto out;
	rsd__sim_enqueue(sd, s, w);
	w = NULL;
out:
	pthread_mutex_unlock(&sd->lock);
	free(w);
	return rc;
}
