// SPDX-License-Identifier: MIT
/*
 * Blocked decisions (Documentation/controller.md): what protects the bytes
 * at the location a request could not fit, read from the image the search
 * read, and the thread's record of it beside rsd_last_error().
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../core/image.h"
#include "ctrl.h"

/* Valid while rsd_last_error()->has_blockers; a later failure clears that. */
static _Thread_local struct rsd_blockers last_blockers;

const struct rsd_blockers *rsd_last_blockers(void)
{
	return rsd_last_error()->has_blockers ? &last_blockers : NULL;
}

void rsd__blockers_set(const struct rsd_blockers *b)
{
	last_blockers = *b;
	rsd__err_record()->has_blockers = true;
}

/* A pending lease's consumer streams (immutable once pending). */
static void lease_streams(const struct rsd_img_lease *l, struct rsd_blocked_lease *bl)
{
	for (size_t k = 0; k < l->nevents; k++) {
		void *s = l->streams[k];
		bool seen = false;

		if (!s)
			continue;
		for (uint32_t j = 0; j < bl->nstreams && j < RSD_BLOCKER_STREAMS_MAX; j++)
			seen |= bl->streams[j] == s;
		if (seen)
			continue;
		if (bl->nstreams < RSD_BLOCKER_STREAMS_MAX)
			bl->streams[bl->nstreams] = s;
		bl->nstreams++;
	}
}

static void pending_leases(const struct rsd_image *img, struct rsd_location at,
			   struct rsd_blockers *b)
{
	struct rsd_img_lease l;

	for (uint64_t i = 0; rsd__img_pending_next(img, &i, &l);) {
		struct rsd_blocked_lease *bl;

		if (!rsd_location_equal(l.loc, at))
			continue;
		if (b->npending++ >= RSD_BLOCKERS_MAX)
			continue;
		bl = &b->leases[b->nleases++];
		memset(bl, 0, sizeof(*bl));
		bl->lease_id = l.id;
		bl->nvalues = (uint32_t)l.n;
		bl->nevents = (uint32_t)l.nevents;
		for (size_t j = 0; j < l.n; j++) {
			const struct rsd_img_value *iv = rsd__img_find(img, l.ids[j]);

			if (iv)
				bl->nbytes += iv->spec.storage_nbytes;
		}
		lease_streams(&l, bl);
	}
}

void rsd__blockers_collect(const struct rsd_view *view, struct rsd_location at,
			   struct rsd_blockers *b)
{
	const struct rsd_image *img = view->img;
	const struct rsd_img_loc *row = rsd__img_loc(img, at);
	uint64_t v = 0;

	b->location = at;
	while (row && rsd__img_loc_next(row, &v)) {
		const struct rsd_img_value *iv = rsd__pv_get(&img->values, v);

		for (uint32_t k = 0; iv && !iv->discarded && k < iv->nmats; k++) {
			const struct rsd_img_mat *mat = &iv->mats[k];
			struct rsd_prot_counts pc;
			uint64_t n = iv->spec.storage_nbytes;

			if (!rsd_location_equal(mat->loc, at))
				continue;
			pc = rsd__view_mat_prot(view, iv, k);
			if (!mat->arriving && !rsd__prot_any(pc)) {
				b->freeable_bytes += n;
				break;
			}
			b->nblocked++;
			b->blocked_bytes += n;
			b->lease_bytes += pc.use ? n : 0;
			b->pending_bytes += pc.pending ? n : 0;
			b->hold_bytes += pc.hold ? n : 0;
			b->live_bytes += pc.use || pc.hold ? n : 0;
			b->arriving_bytes += mat->arriving ? n : 0;
			if (b->nvalues < RSD_BLOCKERS_MAX)
				b->values[b->nvalues++] = (struct rsd_blocked_value){
					iv->handle.id,	      n,
					(uint32_t)pc.use,     (uint32_t)pc.hold,
					(uint32_t)pc.pending, mat->arriving
				};
			break;
		}
		v++;
	}
	pending_leases(img, at, b);
}

bool rsd__blockers_for_good(const struct rsd_blockers *b)
{
	uint64_t live = b->live_bytes + b->reserved_bytes;

	return live >= b->budget_bytes || b->requested_bytes > b->budget_bytes - live;
}

bool rsd__lifetimes_block(struct rsd_manager *m, struct rsd_location at, uint64_t n)
{
	const struct rsd_image *img = rsd__read_begin(m);
	const struct rsd_img_loc *row = rsd__img_loc(img, at);
	struct rsd_blockers b;
	struct rsd_view view;
	bool block = false;

	if (row && row->acct.has_budget && n) {
		memset(&b, 0, sizeof(b));
		rsd__view_init(&view, img);
		rsd__blockers_collect(&view, at, &b);
		b.requested_bytes = n;
		b.budget_bytes = row->acct.budget;
		b.reserved_bytes = row->acct.reserved;
		block = rsd__blockers_for_good(&b);
	}
	rsd__read_end();
	return block;
}

/* snprintf that keeps counting past the end of buf, as snprintf does. */
static void put(char *buf, size_t len, size_t *n, const char *fmt, ...) rsd__printf(4, 5);

static void put(char *buf, size_t len, size_t *n, const char *fmt, ...)
{
	va_list ap;
	int k;

	va_start(ap, fmt);
	k = vsnprintf(*n < len ? buf + *n : NULL, *n < len ? len - *n : 0, fmt, ap);
	va_end(ap);
	if (k > 0)
		*n += (size_t)k;
}

static void describe_value(const struct rsd_blocked_value *bv, char *buf, size_t len, size_t *n)
{
	put(buf, len, n, "value %llu (%llu bytes", (unsigned long long)bv->handle_id,
	    (unsigned long long)bv->nbytes);
	if (bv->leases)
		put(buf, len, n, ", leased %u", bv->leases);
	if (bv->pending)
		put(buf, len, n, ", pending %u", bv->pending);
	if (bv->holds)
		put(buf, len, n, ", held %u", bv->holds);
	if (bv->arriving)
		put(buf, len, n, ", arriving");
	put(buf, len, n, ")");
}

static void describe_lease(const struct rsd_blocked_lease *bl, char *buf, size_t len, size_t *n)
{
	put(buf, len, n, "pending lease %llu (%u values, %llu bytes, %u event%s",
	    (unsigned long long)bl->lease_id, bl->nvalues, (unsigned long long)bl->nbytes,
	    bl->nevents, bl->nevents == 1 ? "" : "s");
	for (uint32_t j = 0; j < bl->nstreams && j < RSD_BLOCKER_STREAMS_MAX; j++)
		put(buf, len, n, "%s%p", j ? " " : ", streams ", bl->streams[j]);
	if (bl->nstreams > RSD_BLOCKER_STREAMS_MAX)
		put(buf, len, n, " and %u more", bl->nstreams - RSD_BLOCKER_STREAMS_MAX);
	put(buf, len, n, ")");
}

int rsd_blockers_describe(const struct rsd_blockers *b, char *buf, size_t len)
{
	char name[RSD_LOCATION_NAME_MAX];
	size_t n = 0;

	if (!b || (!buf && len))
		return rsd__err(RSD_ETYPE, "rsd_blockers_describe: NULL %s",
				!b ? "blockers" : "buf");
	if (len)
		buf[0] = '\0';
	put(buf, len, &n,
	    "%s short %llu bytes, %llu freeable, %llu bytes blocked in %llu materializations "
	    "(leased %llu, pending %llu, held %llu, arriving %llu)",
	    rsd_location_name(b->location, name, sizeof(name)), (unsigned long long)b->short_bytes,
	    (unsigned long long)b->freeable_bytes, (unsigned long long)b->blocked_bytes,
	    (unsigned long long)b->nblocked, (unsigned long long)b->lease_bytes,
	    (unsigned long long)b->pending_bytes, (unsigned long long)b->hold_bytes,
	    (unsigned long long)b->arriving_bytes);
	for (uint32_t i = 0; i < b->nvalues && i < RSD_BLOCKERS_MAX; i++) {
		put(buf, len, &n, i ? ", " : ": ");
		describe_value(&b->values[i], buf, len, &n);
	}
	if (b->nblocked > b->nvalues)
		put(buf, len, &n, " and %llu more", (unsigned long long)(b->nblocked - b->nvalues));
	for (uint32_t i = 0; i < b->nleases && i < RSD_BLOCKERS_MAX; i++) {
		put(buf, len, &n, i ? ", " : "; ");
		describe_lease(&b->leases[i], buf, len, &n);
	}
	if (b->npending > b->nleases)
		put(buf, len, &n, " and %llu more", (unsigned long long)(b->npending - b->nleases));
	return n > INT32_MAX ? INT32_MAX : (int)n;
}
