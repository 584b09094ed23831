// SPDX-License-Identifier: MIT
/*
 * Staged copies on the calling thread: the host-to-device and
 * device-to-host walks through a device's staging pair that a driver
 * without gates (or one that runs work as it is queued) gets, described
 * in staging.c. Both run with the pair's lock (st->lock, staging.h) held
 * for the whole copy and take no other lock of their own; the driver's
 * locks are taken under it.
 */
#include <string.h>

#include "core.h"
#include "staging.h"

/* ---- the two directions ------------------------------------------------------ */

/* Host to device: fill a buffer, queue its DMA, alternate. */
int rsd__stage_in(struct rsd_manager *m, struct rsd_staging *st, struct cursor *c,
		  struct rsd_location to, void *stream, void **event)
{
	struct chunker k = { .c = c, .chunk = st->size };
	struct piece p;
	int err;

	while (rsd__chunk_next(&k, &p)) {
		char *buf = rsd__staging_buffer(st, p.b) + p.off;

		if (p.first) {
			err = rsd__staging_buffer_wait(m, st, p.b);
			if (err)
				return err;
		}
		memcpy(buf, p.src, (size_t)p.n);
		err = m->ops->copy(m->ops_ctx, p.dst, to, buf, RSD_LOC_PINNED_HOST, p.n, stream);
		if (err)
			return err;
		if (p.last) {
			err = m->ops->event_record(m->ops_ctx, stream, &st->ev[p.b]);
			if (err)
				return err;
		}
	}
	return m->ops->event_record(m->ops_ctx, stream, event);
}

/* Device to host: queue up to a chunk of DMAs into buffer b and record its
 * event; *filled gets the bytes (0: nothing was left). */
static int fill_out(struct rsd_manager *m, struct rsd_staging *st, struct cursor *c,
		    struct rsd_location from, void *stream, unsigned b, uint64_t *filled)
{
	const uint64_t chunk = st->size;
	uint64_t fill = 0, n;
	const char *s;
	char *d;
	int err;

	*filled = 0;
	while ((n = rsd__cursor_next(c, chunk - fill, &s, &d))) {
		if (!fill) {
			err = rsd__staging_buffer_wait(m, st, b);
			if (err)
				return err;
		}
		err = m->ops->copy(m->ops_ctx, rsd__staging_buffer(st, b) + fill,
				   RSD_LOC_PINNED_HOST, s, from, n, stream);
		if (err)
			return err;
		fill += n;
	}
	if (!fill)
		return 0;
	err = m->ops->event_record(m->ops_ctx, stream, &st->ev[b]);
	if (!err)
		*filled = fill;
	return err;
}

/* Copy n bytes of buffer b out to the pieces the cursor hands out next. */
static void drain_out(struct rsd_staging *st, struct cursor *c, unsigned b, uint64_t n)
{
	const char *p = rsd__staging_buffer(st, b), *s;
	uint64_t k;
	char *d;

	while (n && (k = rsd__cursor_next(c, n, &s, &d))) {
		/* s is where the piece came from on the device: only d counts. */
		memcpy(d, p, (size_t)k);
		p += k;
		n -= k;
	}
}

int rsd__stage_out(struct rsd_manager *m, struct rsd_staging *st, struct cursor *c,
		   struct rsd_location from, void *stream, void **event)
{
	struct cursor out = *c; /* the pieces, again, as chunks come back */
	uint64_t filled[2] = { 0, 0 };
	unsigned next = 0, oldest = 0, pending = 0;
	int err;

	for (;;) {
		/* Keep both buffers' DMAs in flight. */
		while (pending < 2) {
			err = fill_out(m, st, c, from, stream, next, &filled[next]);
			if (err)
				return err;
			if (!filled[next])
				break;
			next ^= 1;
			pending++;
		}
		if (!pending)
			return 0;
		err = m->ops->event_sync(m->ops_ctx, st->ev[oldest]);
		if (err)
			return err;
		drain_out(st, &out, oldest, filled[oldest]);
		if (pending == 1) {
			/* The last chunk: its event is the copy's (complete). */
			*event = st->ev[oldest];
			st->ev[oldest] = NULL;
			return 0;
		}
		m->ops->event_destroy(m->ops_ctx, st->ev[oldest]);
		st->ev[oldest] = NULL;
		oldest ^= 1;
		pending--;
	}
}
