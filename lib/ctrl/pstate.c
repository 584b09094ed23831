// SPDX-License-Identifier: MIT
/* Compact planning states of the controller search (see pstate.h). */
#include <stdlib.h>
#include <string.h>

#include "pstate.h"

static size_t ps_size(uint32_t cap_acct, uint32_t cap_delta)
{
	return sizeof(struct rsd__pstate) + cap_acct * sizeof(struct rsd__ps_bytes) +
	       cap_delta * sizeof(struct rsd__vdelta);
}

static struct rsd__pstate *ps_alloc(uint32_t cap_acct, uint32_t cap_delta)
{
	struct rsd__pstate *s = rsd__malloc(ps_size(cap_acct, cap_delta));

	if (!s)
		return NULL;
	s->cap_acct = cap_acct;
	s->cap_delta = cap_delta;
	/* Both arrays hold 8-byte aligned records: no padding is needed. */
	s->acct = (struct rsd__ps_bytes *)(s + 1);
	s->delta = (struct rsd__vdelta *)(s->acct + cap_acct);
	return s;
}

struct rsd__pstate *rsd__ps_initial(const struct rsd_image *img)
{
	struct rsd__pstate *s = ps_alloc(img->nlocs + 2, 4);

	if (!s)
		return NULL;
	s->tail = NULL;
	s->nreclaim = 0;
	s->ndelta = 0;
	s->nacct = 0;
	for (uint32_t i = 0; i < img->nlocs; i++) {
		const struct rsd_img_loc *l = &img->locs[i];
		unsigned slot = rsd__loc_slot(l->loc);
		uint32_t k = s->nacct++;

		/* insertion sort into slot order (registry order differs) */
		while (k && s->acct[k - 1].slot > slot) {
			s->acct[k] = s->acct[k - 1];
			k--;
		}
		s->acct[k].slot = slot;
		s->acct[k].used = l->acct.used;
		s->acct[k].reserved = l->acct.reserved;
	}
	s->hash = 0;
	for (uint32_t i = 0; i < s->nacct; i++)
		s->hash += rsd__acct_hash(&s->acct[i]);
	return s;
}

struct rsd__pstate *rsd__ps_copy(const struct rsd__pstate *s)
{
	/* A little headroom: a successor usually changes a value or two. */
	struct rsd__pstate *t = ps_alloc(s->nacct + 1, s->ndelta + 2);

	if (!t)
		return NULL;
	t->hash = s->hash;
	t->tail = s->tail;
	if (t->tail)
		t->tail->refs++;
	t->nreclaim = s->nreclaim;
	t->nacct = s->nacct;
	t->ndelta = s->ndelta;
	memcpy(t->acct, s->acct, s->nacct * sizeof(*s->acct));
	memcpy(t->delta, s->delta, s->ndelta * sizeof(*s->delta));
	return t;
}

void rsd__node_put(struct rsd__act_node *n)
{
	/* Iterative: chains can be search_state_limit nodes long. */
	while (n && --n->refs == 0) {
		struct rsd__act_node *prev = n->prev;

		free(n);
		n = prev;
	}
}

void rsd__ps_free(struct rsd__pstate *s)
{
	if (!s)
		return;
	rsd__node_put(s->tail);
	free(s);
}

static struct rsd__pstate *ps_grow(struct rsd__pstate *s, uint32_t need_acct, uint32_t need_delta)
{
	struct rsd__pstate *t;

	if (need_acct <= s->cap_acct && need_delta <= s->cap_delta)
		return s;
	t = ps_alloc(need_acct > s->cap_acct ? need_acct + 2 : s->cap_acct,
		     need_delta > s->cap_delta ? need_delta * 2 : s->cap_delta);
	if (!t)
		return NULL;
	t->hash = s->hash;
	t->tail = s->tail;
	t->nreclaim = s->nreclaim;
	t->nacct = s->nacct;
	t->ndelta = s->ndelta;
	memcpy(t->acct, s->acct, s->nacct * sizeof(*s->acct));
	memcpy(t->delta, s->delta, s->ndelta * sizeof(*s->delta));
	free(s); /* the tail reference moved to t */
	return t;
}

struct rsd__locset rsd__ps_base_locs(struct rsd__basecache *bc, uint32_t v)
{
	struct rsd__bl_slot *sl = bc->tab ? &bc->tab[v % RSD__BL_SLOTS] : NULL;
	const struct rsd_img_value *iv;
	struct rsd__locset l;

	if (sl && sl->tag == v + 1)
		return sl->l;
	iv = rsd__iv(bc->img, v);
	memset(&l, 0, sizeof(l));
	for (uint32_t i = 0; i < iv->nmats; i++)
		ls_add(&l, rsd__loc_slot(iv->mats[i].loc));
	if (sl) {
		sl->tag = v + 1;
		sl->l = l;
	}
	return l;
}

/* Position of v in the delta, or where it would be inserted (*found false). */
static uint32_t delta_pos(const struct rsd__pstate *s, uint32_t v, bool *found)
{
	uint32_t lo = 0, hi = s->ndelta;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (s->delta[mid].vidx < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = lo < s->ndelta && s->delta[lo].vidx == v;
	return lo;
}

const struct rsd__vdelta *rsd__ps_find(const struct rsd__pstate *s, uint32_t v)
{
	bool found;
	uint32_t i = delta_pos(s, v, &found);

	return found ? &s->delta[i] : NULL;
}

struct rsd__locset rsd__ps_locs(struct rsd__basecache *bc, const struct rsd__pstate *s, uint32_t v)
{
	const struct rsd__vdelta *d = rsd__ps_find(s, v);

	return d ? d->locs : rsd__ps_base_locs(bc, v);
}

struct rsd__pstate *rsd__ps_set_locs(struct rsd__basecache *bc, struct rsd__pstate *s, uint32_t v,
				     const struct rsd__locset *locs)
{
	struct rsd__locset base = rsd__ps_base_locs(bc, v);
	bool found;
	uint32_t i = delta_pos(s, v, &found);

	if (ls_eq(&base, locs)) {
		/* Back to the image's set: keep the delta normalized. */
		if (found) {
			s->hash -= rsd__vdelta_hash(v, &s->delta[i].locs);
			memmove(&s->delta[i], &s->delta[i + 1],
				(s->ndelta - i - 1) * sizeof(*s->delta));
			s->ndelta--;
		}
		return s;
	}
	if (found) {
		s->hash -= rsd__vdelta_hash(v, &s->delta[i].locs);
		s->hash += rsd__vdelta_hash(v, locs);
		s->delta[i].locs = *locs;
		return s;
	}
	s = ps_grow(s, s->nacct, s->ndelta + 1);
	if (!s)
		return NULL;
	memmove(&s->delta[i + 1], &s->delta[i], (s->ndelta - i) * sizeof(*s->delta));
	s->delta[i].vidx = v;
	s->delta[i].locs = *locs;
	s->ndelta++;
	s->hash += rsd__vdelta_hash(v, locs);
	return s;
}

const struct rsd__ps_bytes *rsd__ps_acct(const struct rsd__pstate *s, unsigned slot)
{
	for (uint32_t i = 0; i < s->nacct; i++)
		if (s->acct[i].slot == slot)
			return &s->acct[i];
	return NULL;
}

struct rsd__pstate *rsd__ps_used(struct rsd__pstate *s, unsigned slot, uint64_t add, uint64_t sub)
{
	uint32_t i = 0;

	while (i < s->nacct && s->acct[i].slot < slot)
		i++;
	if (i == s->nacct || s->acct[i].slot != slot) {
		/* A spill destination enters the maps (it changes SIG). */
		s = ps_grow(s, s->nacct + 1, s->ndelta);
		if (!s)
			return NULL;
		memmove(&s->acct[i + 1], &s->acct[i], (s->nacct - i) * sizeof(*s->acct));
		s->acct[i].slot = slot;
		s->acct[i].used = 0;
		s->acct[i].reserved = 0;
		s->nacct++;
		s->hash += rsd__acct_hash(&s->acct[i]);
	}
	s->hash -= rsd__acct_hash(&s->acct[i]);
	s->acct[i].used += add;
	s->acct[i].used = s->acct[i].used >= sub ? s->acct[i].used - sub : 0;
	s->hash += rsd__acct_hash(&s->acct[i]);
	return s;
}

bool rsd__ps_append(struct rsd__pstate *s, const struct rsd_action *a, const struct rsd__evict *ev)
{
	struct rsd__act_node *n = rsd__malloc(sizeof(*n));

	if (!n)
		return false;
	n->prev = s->tail; /* the state's reference moves to the new node */
	n->refs = 1;
	n->action = *a;
	n->ev = *ev;
	s->tail = n;
	s->nreclaim++;
	return true;
}
