// SPDX-License-Identifier: MIT
/*
 * Residents: one value at one location. A resident is one allocation for
 * its header, buffer table and metadata, plus either one backing block from
 * a location's allocator (rsd_resident_alloc) or caller memory (wrap).
 */
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "pcache.h"

/* Header, buffer table and metadata in one allocation. */
static struct rsd_resident *resident_new(const struct rsd_type *type, size_t nbuf, const void *meta,
					 size_t meta_len)
{
	size_t tbl = nbuf * sizeof(struct rsd_buffer_view);
	struct rsd_resident *r;

	if (nbuf > (SIZE_MAX - sizeof(*r) - meta_len) / sizeof(struct rsd_buffer_view))
		return NULL;
	/* Part of the value, not bookkeeping: the "resident" fault point, not "alloc". */
	r = calloc(1, sizeof(*r) + tbl + meta_len);
	if (!r)
		return NULL;
	r->type = type;
	r->nbuf = nbuf;
	r->bufs = (struct rsd_buffer_view *)(r + 1);
	r->meta_len = meta_len;
	if (meta_len) {
		r->meta = (char *)r->bufs + tbl;
		memcpy(r->meta, meta, meta_len);
	}
	return r;
}

/* Buffer i of r: the next 64-byte aligned slice of its block. */
static void lay_out(struct rsd_resident *r, size_t i, uint64_t nbytes, struct rsd_location at,
		    uint64_t *off)
{
	struct rsd_buffer_view *b = &r->bufs[i];

	b->data = nbytes ? (char *)r->block + *off : NULL;
	b->nbytes = nbytes;
	/* Each buffer owns its slice: storage bytes equal logical bytes. */
	b->base = b->data;
	b->base_nbytes = nbytes;
	b->location = at;
	*off += (nbytes + 63) & ~(uint64_t)63;
}

int rsd__resident_alloc(const struct rsd_device_ops *ops, void *ops_ctx, int ndevices,
			const struct rsd_type *type, struct rsd_location at, size_t nbuf,
			const uint64_t *nbytes, const void *meta, size_t meta_len,
			struct rsd_resident **out)
{
	struct rsd_resident *r;
	uint64_t total = 0, off = 0;
	char name[RSD_LOCATION_NAME_MAX];
	int err;

	err = rsd__type_check(type, "rsd_resident_alloc");
	if (err)
		return err;
	if (!out || (nbuf && !nbytes) || (meta_len && !meta))
		return rsd__err(RSD_ETYPE, "rsd_resident_alloc: NULL argument");
	if (!nbuf)
		return rsd__err(RSD_EINVAL, "a value needs at least one buffer");
	err = rsd__location_check(at, "rsd_resident_alloc");
	if (err)
		return err;
	if (at.kind == RSD_CUDA && at.device >= ndevices)
		return rsd__err(RSD_EINVAL,
				ndevices ?
					"Residency location %s is not available in this process" :
					"CUDA residency locations require available CUDA (%s)",
				rsd_location_name(at, name, sizeof(name)));
	for (size_t i = 0; i < nbuf; i++) {
		/* Keep every buffer 64-byte aligned inside the block. */
		uint64_t rounded = (nbytes[i] + 63) & ~(uint64_t)63;

		if (rounded < nbytes[i] || total + rounded < total)
			return rsd__err(RSD_EINVAL,
					"value size overflows: buffer %zu of %llu bytes", i,
					(unsigned long long)nbytes[i]);
		total += rounded;
	}
	if (rsd__fault_on() &&
	    (err = rsd__fault_hit(RSD__FAULT_RESIDENT, rsd_location_name(at, name, sizeof(name)))))
		return err;
	r = resident_new(type, nbuf, meta, meta_len);
	if (!r)
		return rsd__err(RSD_ENOMEM, "out of memory allocating a resident header");
	r->ops = ops;
	r->ops_ctx = ops_ctx;
	r->block_at = at;
	if (total) {
		if (at.kind == RSD_PAGEABLE_HOST) {
			/* Through the block cache: a spilled value reuses a
			 * freed block whose pages are already mapped. */
			if (rsd__pcache_alloc(total, &r->block)) {
				free(r);
				return rsd__err(RSD_ENOMEM,
						"out of memory allocating %llu pageable bytes",
						(unsigned long long)total);
			}
		} else {
			err = ops->alloc(ops_ctx, at, total, &r->block);
			if (err) {
				free(r);
				return err;
			}
		}
		r->block_nbytes = total;
	}
	for (size_t i = 0; i < nbuf; i++)
		lay_out(r, i, nbytes[i], at, &off);
	*out = r;
	return 0;
}

bool rsd__resident_over(const struct rsd_resident *like, const struct rsd_resident *owner,
			struct rsd_resident **out)
{
	struct rsd_resident *r;
	uint64_t total = 0;

	if (!owner->block || owner->release)
		return false;
	for (size_t i = 0; i < like->nbuf; i++)
		total += (like->bufs[i].nbytes + 63) & ~(uint64_t)63;
	if (!total || total > owner->block_nbytes)
		return false;
	r = resident_new(like->type, like->nbuf, like->meta, like->meta_len);
	if (!r)
		return false;
	r->ops = owner->ops;
	r->ops_ctx = owner->ops_ctx;
	r->block_at = owner->block_at;
	r->block = owner->block;
	/* The whole block: its free names the size it was allocated with. */
	r->block_nbytes = owner->block_nbytes;
	total = 0;
	for (size_t i = 0; i < like->nbuf; i++)
		lay_out(r, i, like->bufs[i].nbytes, owner->block_at, &total);
	*out = r;
	return true;
}

int rsd_resident_alloc(struct rsd_manager *m, const struct rsd_type *type, struct rsd_location at,
		       size_t nbuf, const uint64_t *nbytes, const void *meta, size_t meta_len,
		       struct rsd_resident **out)
{
	if (!m)
		return rsd__err(RSD_ETYPE, "rsd_resident_alloc: manager is NULL");
	return rsd__resident_alloc(m->ops, m->ops_ctx, m->ndevices, type, at, nbuf, nbytes, meta,
				   meta_len, out);
}

/*
 * A range of n bytes at p must end within the address space: one whose end
 * wraps to a low address would pass every later range check made with it.
 */
static int span_check(size_t i, const char *what, const void *p, uint64_t n)
{
	uint64_t room = (uint64_t)(UINTPTR_MAX - (uintptr_t)p);

	if (!n || n - 1 <= room)
		return 0;
	return rsd__err(RSD_EINVAL,
			"buffer %zu: %s at %p of %llu bytes wraps the address space "
			"(%llu bytes fit above it)",
			i, what, p, (unsigned long long)n, (unsigned long long)room + 1);
}

int rsd_resident_wrap(const struct rsd_type *type, size_t nbuf, const struct rsd_buffer_view *bufs,
		      const void *meta, size_t meta_len,
		      void (*release)(void *ctx, struct rsd_resident *r), void *ctx,
		      struct rsd_resident **out)
{
	struct rsd_resident *r;
	int err;

	err = rsd__type_check(type, "rsd_resident_wrap");
	if (err)
		return err;
	if (!out || (nbuf && !bufs) || (meta_len && !meta))
		return rsd__err(RSD_ETYPE, "rsd_resident_wrap: NULL argument");
	if (!nbuf)
		return rsd__err(RSD_EINVAL, "a value needs at least one buffer");
	for (size_t i = 0; i < nbuf; i++) {
		const struct rsd_buffer_view *b = &bufs[i];
		uintptr_t d = (uintptr_t)b->data, base = (uintptr_t)b->base;

		err = rsd__location_check(b->location, "rsd_resident_wrap: buffer");
		if (err)
			return err;
		if (b->nbytes && (!b->data || !b->base))
			return rsd__err(RSD_EINVAL, "buffer %zu of %llu bytes has no data or base",
					i, (unsigned long long)b->nbytes);
		err = span_check(i, "backing allocation", b->base, b->base_nbytes);
		if (!err)
			err = span_check(i, "view", b->data, b->nbytes);
		if (err)
			return err;
		/* The view must lie inside its backing allocation. */
		if (b->nbytes && (d < base || d - base > b->base_nbytes ||
				  b->nbytes > b->base_nbytes - (d - base)))
			return rsd__err(
				RSD_EINVAL,
				"buffer %zu (%llu bytes) lies outside its backing allocation of %llu bytes",
				i, (unsigned long long)b->nbytes,
				(unsigned long long)b->base_nbytes);
	}
	r = resident_new(type, nbuf, meta, meta_len);
	if (!r)
		return rsd__err(RSD_ENOMEM, "out of memory allocating a resident header");
	memcpy(r->bufs, bufs, nbuf * sizeof(*bufs));
	r->release = release;
	r->release_ctx = ctx;
	*out = r;
	return 0;
}

size_t rsd_resident_nbuffers(const struct rsd_resident *r)
{
	return r ? r->nbuf : 0;
}

void *rsd_resident_data(const struct rsd_resident *r, size_t i)
{
	return r && i < r->nbuf ? r->bufs[i].data : NULL;
}

uint64_t rsd_resident_buffer_nbytes(const struct rsd_resident *r, size_t i)
{
	return r && i < r->nbuf ? r->bufs[i].nbytes : 0;
}

const void *rsd_resident_meta(const struct rsd_resident *r, size_t *len)
{
	if (len)
		*len = r ? r->meta_len : 0;
	return r ? r->meta : NULL;
}

uint64_t rsd_resident_nbytes(const struct rsd_resident *r)
{
	uint64_t n = 0;

	if (!r)
		return 0;
	for (size_t i = 0; i < r->nbuf; i++)
		n += r->bufs[i].nbytes;
	return n;
}

static int buf_device(const struct rsd_buffer_view *b)
{
	return b->location.kind == RSD_CUDA ? b->location.device : -1;
}

/*
 * Distinct non-empty backing allocations, deduplicated by (device, base).
 * Values hold a handful of buffers, so the quadratic scan is cheapest.
 */
uint64_t rsd_resident_storage_nbytes(const struct rsd_resident *r)
{
	uint64_t n = 0;

	if (!r)
		return 0;
	for (size_t i = 0; i < r->nbuf; i++) {
		const struct rsd_buffer_view *b = &r->bufs[i];
		bool seen = false;

		if (!b->base_nbytes)
			continue;
		for (size_t j = 0; j < i; j++) {
			const struct rsd_buffer_view *o = &r->bufs[j];

			if (o->base_nbytes && o->base == b->base &&
			    buf_device(o) == buf_device(b)) {
				if (o->base_nbytes != b->base_nbytes)
					return UINT64_MAX;
				seen = true;
				break;
			}
		}
		if (!seen)
			n += b->base_nbytes;
	}
	return n;
}

bool rsd__resident_location(const struct rsd_resident *r, struct rsd_location *at)
{
	if (!r || !r->nbuf)
		return false;
	for (size_t i = 1; i < r->nbuf; i++)
		if (!rsd_location_equal(r->bufs[i].location, r->bufs[0].location))
			return false;
	*at = r->bufs[0].location;
	return true;
}

struct rsd_location rsd_resident_location(const struct rsd_resident *r)
{
	struct rsd_location at = { RSD_PAGEABLE_HOST, -2 };

	rsd__resident_location(r, &at);
	return at;
}

const struct rsd_type *rsd_resident_type_of(const struct rsd_resident *r)
{
	return r ? r->type : NULL;
}

void rsd__resident_destroy(struct rsd_resident *r)
{
	if (!r)
		return;
	if (r->release)
		r->release(r->release_ctx, r);
	if (r->block) {
		if (r->block_at.kind == RSD_PAGEABLE_HOST)
			rsd__pcache_free(r->block, r->block_nbytes);
		else if (!rsd__devloss_dead_block(r))
			r->ops->free(r->ops_ctx, r->block_at, r->block, r->block_nbytes);
	}
	free(r);
}

void rsd__retire_resident(struct rsd_manager *m, void *p)
{
	(void)m;
	rsd__resident_destroy(p);
}

void rsd_resident_free(struct rsd_resident *r)
{
	if (!r)
		return;
	if (r->managed) {
		/* The manager frees it; freeing it here would pull memory from
		 * under a materialization. */
		rsd__err(RSD_EOWNERSHIP, "rsd_resident_free: the resident is owned by a manager");
		return;
	}
	rsd__resident_destroy(r);
}
