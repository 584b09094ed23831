// SPDX-License-Identifier: MIT
/*
 * The deterministic tiered LRU policy (reference.md §12.3): configured
 * fallback tiers, and an eviction order that depends only on priority,
 * access epoch, stable key and registration order.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrl.h"

struct tiered_lru {
	struct rsd_policy pub; /* pub.ctx points back at this */
	struct rsd__tiers tiers;
	struct rsd_policy_config_entry entry;
};

static const char *lru_name(void *ctx)
{
	(void)ctx;
	return "deterministic-tiered-lru";
}

static const struct rsd_policy_config_entry *lru_config(void *ctx, size_t *n)
{
	struct tiered_lru *p = ctx;

	if (n)
		*n = 1;
	return &p->entry;
}

static size_t lru_fallback(void *ctx, struct rsd_location loc, struct rsd_location *out, size_t cap)
{
	struct tiered_lru *p = ctx;
	const struct rsd__tier *t = rsd__tiers_find(&p->tiers, loc);

	if (!t)
		return 0;
	for (size_t j = 0; j < t->nto && j < cap; j++)
		out[j] = t->to[j];
	return t->nto;
}

const struct rsd__tier *rsd__tiers_find(const struct rsd__tiers *ts, struct rsd_location loc)
{
	for (size_t i = 0; i < ts->n; i++)
		if (rsd_location_equal(ts->tier[i].from, loc))
			return &ts->tier[i];
	return NULL;
}

/* -1 never accessed (the oldest), else the epoch. */
static long long cand_epoch(const struct rsd_eviction_candidate *c)
{
	return c->has_last_access_epoch ? (long long)c->last_access_epoch : -1;
}

/* The §12.3 key: priority, epoch, keyed first, key bytes, registration. */
int rsd__lru_cmp(const struct rsd_eviction_candidate *a, const struct rsd_eviction_candidate *b)
{
	const char *ka = a->metadata.stable_key, *kb = b->metadata.stable_key;
	long long ea = cand_epoch(a), eb = cand_epoch(b);
	int c;

	if (a->metadata.priority != b->metadata.priority)
		return a->metadata.priority < b->metadata.priority ? -1 : 1;
	if (ea != eb)
		return ea < eb ? -1 : 1;
	if (!ka != !kb)
		return ka ? -1 : 1;
	/* strcmp compares as unsigned char: code-point order for UTF-8. */
	c = strcmp(ka ? ka : "", kb ? kb : "");
	if (c)
		return c < 0 ? -1 : 1;
	if (a->registration_index != b->registration_index)
		return a->registration_index < b->registration_index ? -1 : 1;
	return 0;
}

/*
 * Stable merge sort (ties keep their input order) of positions into c:
 * candidates are ~100 bytes, so moving 4-byte positions and permuting once
 * at the end is cheaper than merging the records themselves.
 */
static void msort(const struct rsd_eviction_candidate *c, uint32_t *a, uint32_t *tmp, size_t n,
		  int (*cmp)(const struct rsd_eviction_candidate *,
			     const struct rsd_eviction_candidate *))
{
	size_t mid = n / 2, i = 0, j = mid, k = 0;

	if (n < 2)
		return;
	msort(c, a, tmp, mid, cmp);
	msort(c, a + mid, tmp, n - mid, cmp);
	while (i < mid && j < n)
		tmp[k++] = cmp(&c[a[j]], &c[a[i]]) < 0 ? a[j++] : a[i++];
	while (i < mid)
		tmp[k++] = a[i++];
	while (j < n)
		tmp[k++] = a[j++];
	memcpy(a, tmp, n * sizeof(*a));
}

int rsd__cand_sort(struct rsd_eviction_candidate *c, size_t n,
		   int (*cmp)(const struct rsd_eviction_candidate *,
			      const struct rsd_eviction_candidate *))
{
	struct rsd_eviction_candidate small[64], *copy = small;
	uint32_t sidx[2 * RSD_ARRAY_SIZE(small)], *idx = sidx;

	if (n < 2)
		return 0;
	if (!c)
		return rsd__err(RSD_ETYPE, "order_candidates: candidate array is NULL");
	if (n > UINT32_MAX)
		return rsd__err(RSD_EINVAL, "order_candidates: %zu candidates are too many", n);
	if (n > RSD_ARRAY_SIZE(small)) {
		copy = rsd__malloc(n * sizeof(*copy));
		idx = rsd__malloc(2 * n * sizeof(*idx));
		if (!copy || !idx) {
			free(copy);
			free(idx);
			return rsd__err(RSD_ENOMEM, "out of memory ordering %zu candidates", n);
		}
	}
	for (size_t i = 0; i < n; i++)
		idx[i] = (uint32_t)i;
	msort(c, idx, idx + n, n, cmp);
	memcpy(copy, c, n * sizeof(*c));
	for (size_t i = 0; i < n; i++)
		c[i] = copy[idx[i]];
	if (copy != small) {
		free(copy);
		free(idx);
	}
	return 0;
}

static int lru_order(void *ctx, struct rsd_eviction_candidate *c, size_t n)
{
	(void)ctx;
	return rsd__cand_sort(c, n, rsd__lru_cmp);
}

static const struct rsd_policy_ops lru_ops = {
	.name = lru_name,
	.config_identity = lru_config,
	.fallback_locations = lru_fallback,
	.order_candidates = lru_order,
};

int (*rsd__policy_cmp(const struct rsd_policy *p))(const struct rsd_eviction_candidate *,
						   const struct rsd_eviction_candidate *)
{
	if (p->ops == &lru_ops)
		return rsd__lru_cmp;
	return rsd__next_use_cmp(p);
}

static void tiers_free(struct rsd__tier *t, size_t n)
{
	for (size_t i = 0; t && i < n; i++)
		free(t[i].to);
	free(t);
}

void rsd__tiers_release(struct rsd__tiers *ts)
{
	tiers_free(ts->tier, ts->n);
	free(ts->identity);
}

static int check_loc(struct rsd_location loc, const char *what, size_t i)
{
	char where[64];

	if (rsd_location_valid(loc))
		return 0;
	snprintf(where, sizeof(where), "fallback tier %zu: %s", i, what);
	return rsd__location_check(loc, where);
}

/*
 * The identity text: a Python-like literal of the ordered tiers, e.g.
 * [("pinned-host", ["pageable-host"]), ("pageable-host", ["pinned-host"])];
 * "[]" without tiers. Two policies with equal tiers in equal order have
 * equal texts.
 */
/* The canonical text of tiers t[0..n), or NULL without memory. */
static char *tiers_identity(const struct rsd__tier *t, size_t n)
{
	size_t cap = 3, len = 0;
	char name[RSD_LOCATION_NAME_MAX], *s;

	for (size_t i = 0; i < n; i++)
		cap += 2 * RSD_LOCATION_NAME_MAX + 16 + t[i].nto * (RSD_LOCATION_NAME_MAX + 6);
	s = rsd__malloc(cap);
	if (!s)
		return NULL;
	len += (size_t)snprintf(s + len, cap - len, "[");
	for (size_t i = 0; i < n; i++) {
		len += (size_t)snprintf(s + len, cap - len, "%s(\"%s\", [", i ? ", " : "",
					rsd_location_name(t[i].from, name, sizeof(name)));
		for (size_t j = 0; j < t[i].nto; j++)
			len += (size_t)snprintf(s + len, cap - len, "%s\"%s\"", j ? ", " : "",
						rsd_location_name(t[i].to[j], name, sizeof(name)));
		len += (size_t)snprintf(s + len, cap - len, "])");
	}
	snprintf(s + len, cap - len, "]");
	return s;
}

/* Check (§12.3) and copy fallback tiers into *out (free with rsd__tiers_free). */
/* Check t[0..n) and copy it to *out (never NULL on success). */
static int tiers_copy(const struct rsd_fallback_tier *t, size_t n, struct rsd__tier **out)
{
	struct rsd__tier *c = NULL;
	int err;

	if (n && !t)
		return rsd__err(RSD_ETYPE, "fallback tiers: NULL array of %zu tiers", n);
	for (size_t i = 0; i < n; i++) {
		char name[RSD_LOCATION_NAME_MAX];

		err = check_loc(t[i].from, "the source location", i);
		if (err)
			return err;
		if (t[i].nto && !t[i].to)
			return rsd__err(RSD_ETYPE, "fallback tier %zu: NULL destination array", i);
		for (size_t k = 0; k < i; k++)
			if (rsd_location_equal(t[k].from, t[i].from))
				return rsd__err(RSD_EINVAL, "fallback tiers list source %s twice",
						rsd_location_name(t[i].from, name, sizeof(name)));
		for (size_t j = 0; j < t[i].nto; j++) {
			err = check_loc(t[i].to[j], "a destination", i);
			if (err)
				return err;
			if (rsd_location_equal(t[i].to[j], t[i].from))
				return rsd__err(
					RSD_EINVAL,
					"fallback tier of %s lists its own source as a destination",
					rsd_location_name(t[i].from, name, sizeof(name)));
			for (size_t k = 0; k < j; k++)
				if (rsd_location_equal(t[i].to[k], t[i].to[j]))
					return rsd__err(
						RSD_EINVAL,
						"fallback tier of %s has duplicate destination %s",
						rsd_location_name(t[i].from, name, sizeof(name)),
						rsd_location_name(t[i].to[j], name + 0,
								  sizeof(name)));
		}
	}
	/* never NULL on success, even without tiers */
	c = rsd__calloc(n ? n : 1, sizeof(*c));
	if (!c)
		goto nomem;
	for (size_t i = 0; i < n; i++) {
		c[i].from = t[i].from;
		if (!t[i].nto)
			continue;
		c[i].to = rsd__malloc(t[i].nto * sizeof(*c[i].to));
		if (!c[i].to)
			goto nomem;
		c[i].nto = t[i].nto;
		memcpy(c[i].to, t[i].to, t[i].nto * sizeof(*c[i].to));
	}
	*out = c;
	return 0;
nomem:
	tiers_free(c, n);
	return rsd__err(RSD_ENOMEM, "out of memory copying %zu fallback tiers", n);
}

int rsd__tiers_make(const struct rsd_fallback_tier *t, size_t n, const char *what,
		    struct rsd__tiers *out)
{
	struct rsd__tier *tier = NULL;
	char *identity;
	int err;

	err = tiers_copy(t, n, &tier);
	/* tier is set whenever err is 0; the analyzer cannot see that
	 * rsd__err() codes are negative */
	if (err || !tier)
		return err ? err : -RSD_EINVAL;
	identity = tiers_identity(tier, n);
	if (!identity) {
		tiers_free(tier, n);
		return rsd__err(RSD_ENOMEM, "out of memory creating %s", what);
	}
	out->n = n;
	out->tier = tier;
	out->identity = identity;
	return 0;
}

int rsd_tiered_lru_create(const struct rsd_fallback_tier *t, size_t n, struct rsd_policy **out)
{
	static const char what[] = "the tiered LRU policy";
	struct rsd__tiers tiers = { 0 };
	struct tiered_lru *p;
	int err;

	if (!out)
		return rsd__err(RSD_ETYPE, "rsd_tiered_lru_create: out is NULL");
	err = rsd__tiers_make(t, n, what, &tiers);
	if (err)
		return err;
	p = rsd__calloc(1, sizeof(*p));
	if (!p) {
		rsd__tiers_release(&tiers);
		return rsd__err(RSD_ENOMEM, "out of memory creating %s", what);
	}
	p->pub.ops = &lru_ops;
	p->pub.ctx = p;
	p->tiers = tiers;
	p->entry.key = "fallback_tiers";
	p->entry.value = p->tiers.identity;
	*out = &p->pub;
	return 0;
}

void rsd_policy_free(struct rsd_policy *p)
{
	/* Only policies made by this library are ours to free. */
	if (!p)
		return;
	if (p->ops == &lru_ops) {
		struct tiered_lru *lru = p->ctx;

		rsd__tiers_release(&lru->tiers);
		free(lru);
	} else
		rsd__next_use_free(p);
}
