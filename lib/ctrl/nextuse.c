// SPDX-License-Identifier: MIT
/*
 * The deterministic next-use policy (Documentation/controller.md): the
 * tiered LRU's fallback tiers and tie-breaks, with candidates ranked first
 * by their next use in the declared schedule, farthest first (Belady's
 * rule), and sole copies spilled to the fastest destination when needed
 * within near_steps, to the slowest otherwise.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "ctrl.h"

struct next_use {
	struct rsd_policy pub; /* pub.ctx points back at this */
	struct rsd__tiers tiers;
	uint64_t near;
	char near_text[24];
	struct rsd_policy_config_entry entry[2];
};

static const char *nu_name(void *ctx)
{
	(void)ctx;
	return "deterministic-next-use";
}

static const struct rsd_policy_config_entry *nu_config(void *ctx, size_t *n)
{
	struct next_use *p = ctx;

	if (n)
		*n = RSD_ARRAY_SIZE(p->entry);
	return p->entry;
}

static size_t nu_fallback(void *ctx, struct rsd_location loc, struct rsd_location *out, size_t cap)
{
	struct next_use *p = ctx;
	const struct rsd__tier *t = rsd__tiers_find(&p->tiers, loc);

	if (!t)
		return 0;
	for (size_t j = 0; j < t->nto && j < cap; j++)
		out[j] = t->to[j];
	return t->nto;
}

/*
 * Farthest next use first; a value the schedule does not name again (or
 * at all) is the farthest of all. Equal next uses: the tiered LRU's order.
 */
static int nu_cmp(const struct rsd_eviction_candidate *a, const struct rsd_eviction_candidate *b)
{
	if (a->has_next_use != b->has_next_use)
		return a->has_next_use ? 1 : -1;
	if (a->has_next_use && a->next_use != b->next_use)
		return a->next_use > b->next_use ? -1 : 1;
	return rsd__lru_cmp(a, b);
}

static int nu_order(void *ctx, struct rsd_eviction_candidate *c, size_t n)
{
	(void)ctx;
	return rsd__cand_sort(c, n, nu_cmp);
}

/* Speed of a tier for reading a value back: devices, pinned, pageable. */
static int speed(struct rsd_location l)
{
	return l.kind == RSD_CUDA ? 2 : l.kind == RSD_PINNED_HOST ? 1 : 0;
}

/*
 * The configured destinations of the candidate's location, reordered by
 * speed (stable: configuration order among equals): fastest first for a
 * value needed within near_steps, slowest first for any other.
 */
static size_t nu_spill(void *ctx, const struct rsd_eviction_candidate *c, struct rsd_location *out,
		       size_t cap)
{
	struct next_use *p = ctx;
	const struct rsd__tier *t = rsd__tiers_find(&p->tiers, c->location);
	bool near = c->has_next_use && c->next_use <= p->near;
	size_t n = 0;

	if (!t)
		return 0;
	for (int s = near ? 2 : 0; near ? s >= 0 : s <= 2; s += near ? -1 : 1)
		for (size_t j = 0; j < t->nto; j++)
			if (speed(t->to[j]) == s && n < cap)
				out[n++] = t->to[j];
	return t->nto;
}

static const struct rsd_policy_ops nu_ops = {
	.name = nu_name,
	.config_identity = nu_config,
	.fallback_locations = nu_fallback,
	.order_candidates = nu_order,
	.spill_locations = nu_spill,
};

int (*rsd__next_use_cmp(const struct rsd_policy *p))(const struct rsd_eviction_candidate *,
						     const struct rsd_eviction_candidate *)
{
	return p->ops == &nu_ops ? nu_cmp : NULL;
}

void rsd__next_use_free(struct rsd_policy *pub)
{
	struct next_use *p;

	if (!pub || pub->ops != &nu_ops)
		return;
	p = pub->ctx;
	rsd__tiers_release(&p->tiers);
	free(p);
}

int rsd_next_use_create(const struct rsd_fallback_tier *t, size_t n, uint64_t near_steps,
			struct rsd_policy **out)
{
	static const char what[] = "the next-use policy";
	struct rsd__tiers tiers = { 0 };
	struct next_use *p;
	int err;

	if (!out)
		return rsd__err(RSD_ETYPE, "rsd_next_use_create: out is NULL");
	err = rsd__tiers_make(t, n, what, &tiers);
	if (err)
		return err;
	p = rsd__calloc(1, sizeof(*p));
	if (!p) {
		rsd__tiers_release(&tiers);
		return rsd__err(RSD_ENOMEM, "out of memory creating %s", what);
	}
	p->pub.ops = &nu_ops;
	p->pub.ctx = p;
	p->tiers = tiers;
	p->near = near_steps;
	snprintf(p->near_text, sizeof(p->near_text), "%" PRIu64, near_steps);
	p->entry[0] = (struct rsd_policy_config_entry){ "fallback_tiers", p->tiers.identity };
	p->entry[1] = (struct rsd_policy_config_entry){ "near_steps", p->near_text };
	*out = &p->pub;
	return 0;
}
