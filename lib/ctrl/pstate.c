// SPDX-License-Identifier: MIT
/* Compact planning states of the controller search (see pstate.h). */
#include <stdlib.h>
#include <string.h>

#include "pstate.h"

/* Slab chunks: a few hundred states of a typical search each. */
#define PS_CHUNK ((size_t)64 << 10)
/* The slab class of a reclaim record (128 bytes; checked in rsd__ps_append). */
#define NODE_CLS 1

/* ---- the shared table of distinct location sets ---- */

static uint64_t locset_hash(const struct rsd__locset *l)
{
	static const uint64_t k[] = { 0x2545f4914f6cdd1dull, 0x9e3779b97f4a7c15ull,
				      0xbf58476d1ce4e5b9ull, 0x94d049bb133111ebull };
	uint64_t h = 0;

	_Static_assert(RSD__LS_WORDS < sizeof(k) / sizeof(k[0]), "two keys per word");
	for (unsigned i = 0; i < RSD__LS_WORDS; i++)
		h += (l->w[i] ^ k[i]) * k[i + 1];
	return rsd__mix64(h);
}

static int sidx_grow(struct rsd__pspace *sp)
{
	uint32_t cap = sp->sidxcap ? 2 * sp->sidxcap : 64, *idx;
	struct rsd__locset *sets;

	/* ids stay below 2^31 - 1: a code is never RSD__LS_UNKNOWN */
	if (!cap || cap / 2 >= RSD__LS_TABLE)
		return rsd__err(RSD_ENOMEM, "out of memory: %u location sets of the search",
				sp->nsets);
	idx = rsd__calloc(cap, sizeof(*idx));
	sets = rsd__realloc(sp->sets, cap / 2 * sizeof(*sets));
	if (sets)
		sp->sets = sets;
	if (!idx || !sets) {
		free(idx);
		return rsd__err(RSD_ENOMEM, "out of memory: %u location sets of the search",
				cap / 2);
	}
	for (uint32_t id = 0; id < sp->nsets; id++) {
		uint32_t i = (uint32_t)locset_hash(&sp->sets[id]) & (cap - 1);

		while (idx[i])
			i = (i + 1) & (cap - 1);
		idx[i] = id + 1;
	}
	free(sp->sidx);
	sp->sidx = idx;
	sp->sidxcap = cap;
	sp->capsets = cap / 2;
	return 0;
}

/* The code of l (struct rsd__vdelta), added to the table when new; -1
 * with -RSD_ENOMEM recorded. */
static long intern(struct rsd__pspace *sp, const struct rsd__locset *l)
{
	uint64_t h;
	uint32_t i;

	_Static_assert(RSD__LS_WORDS == 3, "a set is its own code when only w[0] < 2^31 is set");
	if (!l->w[1] && !l->w[2] && l->w[0] < RSD__LS_TABLE)
		return (long)l->w[0];
	h = locset_hash(l);

	if (sp->sidxcap) {
		for (i = (uint32_t)h & (sp->sidxcap - 1); sp->sidx[i];
		     i = (i + 1) & (sp->sidxcap - 1))
			if (ls_eq(&sp->sets[sp->sidx[i] - 1], l))
				return (long)(RSD__LS_TABLE | (sp->sidx[i] - 1));
	}
	if (sp->nsets == sp->capsets && sidx_grow(sp))
		return -1;
	for (i = (uint32_t)h & (sp->sidxcap - 1); sp->sidx[i]; i = (i + 1) & (sp->sidxcap - 1))
		;
	sp->sets[sp->nsets] = *l;
	sp->sidx[i] = ++sp->nsets;
	return (long)(RSD__LS_TABLE | (sp->nsets - 1));
}

int rsd__ps_space_init(struct rsd__pspace *sp, const struct rsd_image *img,
		       struct rsd__mem_cache *mc)
{
	memset(sp, 0, sizeof(*sp));
	sp->img = img;
	rsd__slab_init(&sp->slab, PS_CHUNK, mc);
	/* without the cache the search only runs slower */
	sp->tab = rsd__calloc(RSD__BL_SLOTS, sizeof(*sp->tab));
	return 0;
}

void rsd__ps_space_fini(struct rsd__pspace *sp)
{
	rsd__slab_fini(&sp->slab);
	free(sp->tab);
	free(sp->sets);
	free(sp->sidx);
	memset(sp, 0, sizeof(*sp));
}

/* ---- states ---- */

/*
 * A state with room for at least cap_acct accounting and cap_delta delta
 * entries; the delta takes whatever else its slab block holds.
 */
static struct rsd__pstate *ps_alloc(struct rsd__pspace *sp, uint32_t cap_acct, uint32_t cap_delta)
{
	size_t head = sizeof(struct rsd__pstate) + (size_t)cap_acct * sizeof(struct rsd__ps_bytes);
	size_t want = head + (size_t)cap_delta * sizeof(struct rsd__vdelta);
	int cls = rsd__slab_class(want);
	struct rsd__pstate *s;
	size_t room;

	if (cls < 0) {
		rsd__err(RSD_ENOMEM, "out of memory: planning state of %zu bytes", want);
		return NULL;
	}
	s = rsd__slab_alloc(&sp->slab, cls);
	if (!s)
		return NULL;
	room = (rsd__slab_size(cls) - head) / sizeof(struct rsd__vdelta);
	s->cls = cls;
	s->cap_acct = cap_acct;
	s->cap_delta = room > UINT32_MAX ? UINT32_MAX : (uint32_t)room;
	/* Both arrays hold 8-byte aligned records: no padding is needed. */
	s->acct = (struct rsd__ps_bytes *)(s + 1);
	s->delta = (struct rsd__vdelta *)(s->acct + cap_acct);
	return s;
}

struct rsd__pstate *rsd__ps_initial(struct rsd__pspace *sp)
{
	const struct rsd_image *img = sp->img;
	struct rsd__pstate *s = ps_alloc(sp, img->nlocs + 2, 4);

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
		s->acct[k].pad = 0;
		s->acct[k].used = l->acct.used;
		s->acct[k].reserved = l->acct.reserved;
	}
	s->hash = 0;
	for (uint32_t i = 0; i < s->nacct; i++)
		s->hash += rsd__acct_hash(&s->acct[i]);
	return s;
}

/* t takes s's contents (and, when share, a reference to its actions). */
static void ps_fill(struct rsd__pstate *t, const struct rsd__pstate *s, bool share)
{
	t->hash = s->hash;
	t->tail = s->tail;
	if (share && t->tail)
		t->tail->refs++;
	t->nreclaim = s->nreclaim;
	t->nacct = s->nacct;
	t->ndelta = s->ndelta;
	memcpy(t->acct, s->acct, s->nacct * sizeof(*s->acct));
	memcpy(t->delta, s->delta, s->ndelta * sizeof(*s->delta));
}

struct rsd__pstate *rsd__ps_copy(struct rsd__pspace *sp, const struct rsd__pstate *s)
{
	/* A little headroom: a successor usually changes a value or two. */
	struct rsd__pstate *t = ps_alloc(sp, s->nacct + 1, s->ndelta + 2);

	if (t)
		ps_fill(t, s, true);
	return t;
}

void rsd__node_put(struct rsd__pspace *sp, struct rsd__act_node *n)
{
	/* Iterative: chains can be search_state_limit nodes long. */
	while (n && --n->refs == 0) {
		struct rsd__act_node *prev = n->prev;

		rsd__slab_free(&sp->slab, n, NODE_CLS);
		n = prev;
	}
}

void rsd__ps_free(struct rsd__pspace *sp, struct rsd__pstate *s)
{
	if (!s)
		return;
	rsd__node_put(sp, s->tail);
	rsd__slab_free(&sp->slab, s, s->cls);
}

static struct rsd__pstate *ps_grow(struct rsd__pspace *sp, struct rsd__pstate *s,
				   uint32_t need_acct, uint32_t need_delta)
{
	struct rsd__pstate *t;

	if (need_acct <= s->cap_acct && need_delta <= s->cap_delta)
		return s;
	t = ps_alloc(sp, need_acct > s->cap_acct ? need_acct + 2 : s->cap_acct,
		     need_delta > s->cap_delta ? need_delta * 2 : s->cap_delta);
	if (!t)
		return NULL;
	ps_fill(t, s, false); /* the tail reference moves to t */
	rsd__slab_free(&sp->slab, s, s->cls);
	return t;
}

const struct rsd__locset *rsd__ps_base_fill(struct rsd__pspace *sp, uint32_t v,
					    struct rsd__locset *buf)
{
	struct rsd__bl_slot *sl = sp->tab ? &sp->tab[v % RSD__BL_SLOTS] : NULL;
	const struct rsd_img_value *iv = rsd__iv(sp->img, v);

	memset(buf, 0, sizeof(*buf));
	for (uint32_t i = 0; i < iv->nmats; i++)
		ls_add(buf, rsd__loc_slot(iv->mats[i].loc));
	if (!sl)
		return buf;
	sl->tag = v + 1;
	sl->l = *buf;
	return &sl->l;
}

const struct rsd__vdelta *rsd__ps_find(const struct rsd__pstate *s, uint32_t v)
{
	bool found;
	uint32_t i = rsd__ps_delta_pos(s, v, &found);

	return found ? &s->delta[i] : NULL;
}

struct rsd__locset rsd__ps_locs(struct rsd__pspace *sp, const struct rsd__pstate *s, uint32_t v)
{
	const struct rsd__vdelta *d = rsd__ps_find(s, v);

	return d ? rsd__ps_set(sp, d) : rsd__ps_base_locs(sp, v);
}

struct rsd__pstate *rsd__ps_set_locs(struct rsd__pspace *sp, struct rsd__pstate *s, uint32_t v,
				     const struct rsd__locset *locs)
{
	struct rsd__locset base = rsd__ps_base_locs(sp, v);
	struct rsd__vdelta *d;
	bool found;
	uint32_t i = rsd__ps_delta_pos(s, v, &found);
	long id;

	if (ls_eq(&base, locs)) {
		/* Back to the image's set: keep the delta normalized. */
		if (found) {
			s->hash -= rsd__vdelta_hash(&s->delta[i]);
			memmove(&s->delta[i], &s->delta[i + 1],
				(s->ndelta - i - 1) * sizeof(*s->delta));
			s->ndelta--;
		}
		return s;
	}
	id = intern(sp, locs);
	if (id < 0)
		return NULL;
	if (!found) {
		s = ps_grow(sp, s, s->nacct, s->ndelta + 1);
		if (!s)
			return NULL;
		memmove(&s->delta[i + 1], &s->delta[i], (s->ndelta - i) * sizeof(*s->delta));
		s->ndelta++;
		s->delta[i].vidx = v;
	} else {
		s->hash -= rsd__vdelta_hash(&s->delta[i]);
	}
	d = &s->delta[i];
	d->ls = (uint32_t)id;
	s->hash += rsd__vdelta_hash(d);
	return s;
}

int rsd__ps_edit_used(const struct rsd__pstate *s, unsigned slot, uint64_t sub,
		      struct rsd__ps_used_edit *u)
{
	struct rsd__ps_bytes a;

	for (u->apos = 0; u->apos < s->nacct && s->acct[u->apos].slot != slot; u->apos++)
		;
	if (u->apos == s->nacct)
		return 1;
	a = s->acct[u->apos];
	u->dhash = 0 - rsd__acct_hash(&a); /* mod 2^64, like the running hash */
	a.used = a.used >= sub ? a.used - sub : 0;
	u->dhash += rsd__acct_hash(&a);
	u->used = a.used;
	return 0;
}

long rsd__ps_code(struct rsd__pspace *sp, const struct rsd__locset *l)
{
	long code = intern(sp, l);

	return code < 0 ? -RSD_ENOMEM : code;
}

const struct rsd__ps_bytes *rsd__ps_acct(const struct rsd__pstate *s, unsigned slot)
{
	for (uint32_t i = 0; i < s->nacct; i++)
		if (s->acct[i].slot == slot)
			return &s->acct[i];
	return NULL;
}

struct rsd__pstate *rsd__ps_used(struct rsd__pspace *sp, struct rsd__pstate *s, unsigned slot,
				 uint64_t add, uint64_t sub)
{
	uint32_t i = 0;

	while (i < s->nacct && s->acct[i].slot < slot)
		i++;
	if (i == s->nacct || s->acct[i].slot != slot) {
		/* A spill destination enters the maps (it changes SIG). */
		s = ps_grow(sp, s, s->nacct + 1, s->ndelta);
		if (!s)
			return NULL;
		memmove(&s->acct[i + 1], &s->acct[i], (s->nacct - i) * sizeof(*s->acct));
		s->acct[i].slot = slot;
		s->acct[i].pad = 0;
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

bool rsd__ps_append(struct rsd__pspace *sp, struct rsd__pstate *s, const struct rsd_action *a,
		    const struct rsd__evict *ev)
{
	struct rsd__act_node *n;

	_Static_assert(sizeof(*n) <= 64 << NODE_CLS, "a reclaim record fits its slab class");
	n = rsd__slab_alloc(&sp->slab, NODE_CLS);
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
