// SPDX-License-Identifier: MIT
/* Compact planning states of the controller search (see pstate.h). */
#include <stdlib.h>
#include <string.h>

#include "pstate.h"

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
	rsd__mem_source(mc, &sp->src);
	rsd__slab_init(&sp->slab, &sp->src);
	sp->tabmask = 1;
	while (sp->tabmask < RSD__BL_SLOTS && sp->tabmask < img->values.count)
		sp->tabmask <<= 1;
	/* without the cache the search only runs slower */
	sp->tab = rsd__calloc(sp->tabmask, sizeof(*sp->tab));
	sp->tabmask--;
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

/* ---- the delta treap ---- */

static inline uint64_t dn_prio(uint32_t v)
{
	/* a bijection of 64-bit words: distinct keys, distinct priorities */
	return rsd__mix64(v);
}

static struct rsd__dnode *dn_get(struct rsd__dnode *n)
{
	if (n)
		n->refs++;
	return n;
}

/* Drop a reference; a node left without one drops its children's. */
static void dn_put(struct rsd__pspace *sp, struct rsd__dnode *n)
{
	while (n && --n->refs == 0) {
		struct rsd__dnode *r = n->r;

		dn_put(sp, n->l);
		rsd__slab_free(&sp->slab, n, sizeof(*n));
		n = r; /* the right spine without recursion */
	}
}

/*
 * An edit takes its new nodes from a pool filled before it starts with as
 * many nodes as it can need, so that the edit itself cannot fail halfway
 * through a path (pool nodes are linked by l).
 */
struct dn_pool {
	struct rsd__dnode *free;
};

static void dn_pool_drain(struct rsd__pspace *sp, struct dn_pool *p)
{
	while (p->free) {
		struct rsd__dnode *d = p->free;

		p->free = d->l;
		rsd__slab_free(&sp->slab, d, sizeof(*d));
	}
}

static bool dn_pool_fill(struct rsd__pspace *sp, struct dn_pool *p, uint32_t n)
{
	p->free = NULL;
	while (n--) {
		struct rsd__dnode *d = rsd__slab_alloc(&sp->slab, sizeof(*d));

		if (!d) {
			dn_pool_drain(sp, p);
			rsd__err(RSD_ENOMEM, "out of memory: planning state delta");
			return false;
		}
		d->l = p->free;
		p->free = d;
	}
	return true;
}

/* A node of entry e over l and r, whose references it takes. */
static struct rsd__dnode *dn_new(struct dn_pool *p, struct rsd__dnode *l, struct rsd__dnode *r,
				 struct rsd__vdelta e)
{
	struct rsd__dnode *n = p->free;

	/*
	 * Not NULL: the pool holds as many nodes as the edit can make
	 * (rsd__ps_set_locs() counts them along the path first), which the
	 * analyzer cannot follow through the recursion.
	 */
	/* NOLINTNEXTLINE(clang-analyzer-core.NullDereference) */
	p->free = n->l;
	n->l = l;
	n->r = r;
	n->e = e;
	n->refs = 1;
	return n;
}

/* Nodes on the path from t to key v (its own included when present). */
static uint32_t dn_depth(const struct rsd__dnode *t, uint32_t v)
{
	uint32_t d = 0;

	for (; t; t = v < t->e.vidx ? t->l : t->r) {
		d++;
		if (t->e.vidx == v)
			break;
	}
	return d;
}

/* t with v's entry replaced by e (v is in t); new path, shared rest. */
static struct rsd__dnode *dn_replace(struct dn_pool *p, struct rsd__dnode *t, struct rsd__vdelta e)
{
	if (e.vidx == t->e.vidx)
		return dn_new(p, dn_get(t->l), dn_get(t->r), e);
	if (e.vidx < t->e.vidx)
		return dn_new(p, dn_replace(p, t->l, e), dn_get(t->r), t->e);
	return dn_new(p, dn_get(t->l), dn_replace(p, t->r, e), t->e);
}

/* Split t (v not in it) into the keys below v, *lo, and above, *hi. */
static void dn_split(struct dn_pool *p, struct rsd__dnode *t, uint32_t v, struct rsd__dnode **lo,
		     struct rsd__dnode **hi)
{
	if (!t) {
		*lo = NULL;
		*hi = NULL;
	} else if (t->e.vidx < v) {
		struct rsd__dnode *a;

		dn_split(p, t->r, v, &a, hi);
		*lo = dn_new(p, dn_get(t->l), a, t->e);
	} else {
		struct rsd__dnode *b;

		dn_split(p, t->l, v, lo, &b);
		*hi = dn_new(p, b, dn_get(t->r), t->e);
	}
}

/* t with e inserted (e.vidx not in t). */
static struct rsd__dnode *dn_insert(struct dn_pool *p, struct rsd__dnode *t, struct rsd__vdelta e)
{
	struct rsd__dnode *lo, *hi;

	if (t && dn_prio(t->e.vidx) > dn_prio(e.vidx)) {
		if (e.vidx < t->e.vidx)
			return dn_new(p, dn_insert(p, t->l, e), dn_get(t->r), t->e);
		return dn_new(p, dn_get(t->l), dn_insert(p, t->r, e), t->e);
	}
	dn_split(p, t, e.vidx, &lo, &hi);
	return dn_new(p, lo, hi, e);
}

/* Nodes a merge of a and b makes: a's right spine and b's left one. */
static uint32_t dn_spines(const struct rsd__dnode *a, const struct rsd__dnode *b)
{
	uint32_t n = 0;

	for (; a; a = a->r)
		n++;
	for (; b; b = b->l)
		n++;
	return n;
}

/* The treap of a's keys and then b's (all below them), sharing both. */
static struct rsd__dnode *dn_merge(struct dn_pool *p, struct rsd__dnode *a, struct rsd__dnode *b)
{
	if (!a)
		return dn_get(b);
	if (!b)
		return dn_get(a);
	if (dn_prio(a->e.vidx) > dn_prio(b->e.vidx))
		return dn_new(p, dn_get(a->l), dn_merge(p, a->r, b), a->e);
	return dn_new(p, dn_merge(p, a, b->l), dn_get(b->r), b->e);
}

/* t without v's entry (v is in t). */
static struct rsd__dnode *dn_remove(struct dn_pool *p, struct rsd__dnode *t, uint32_t v)
{
	if (v == t->e.vidx)
		return dn_merge(p, t->l, t->r);
	if (v < t->e.vidx)
		return dn_new(p, dn_remove(p, t->l, v), dn_get(t->r), t->e);
	return dn_new(p, dn_get(t->l), dn_remove(p, t->r, v), t->e);
}

static bool dn_walk(const struct rsd__dnode *n, bool (*fn)(void *, const struct rsd__vdelta *),
		    void *ctx)
{
	for (; n; n = n->r) {
		if (!dn_walk(n->l, fn, ctx) || !fn(ctx, &n->e))
			return false;
	}
	return true;
}

bool rsd__ps_walk(const struct rsd__pstate *s, bool (*fn)(void *ctx, const struct rsd__vdelta *e),
		  void *ctx)
{
	return dn_walk(s->root, fn, ctx);
}

/* ---- states ---- */

/* A state with room for at least cap_acct accounting entries. */
static struct rsd__pstate *ps_alloc(struct rsd__pspace *sp, uint32_t cap_acct)
{
	size_t size = rsd__slab_size(sizeof(struct rsd__pstate) +
				     (size_t)cap_acct * sizeof(struct rsd__ps_bytes));
	struct rsd__pstate *s = rsd__slab_alloc(&sp->slab, size);

	if (!s) {
		rsd__err(RSD_ENOMEM, "out of memory: planning state of %zu bytes", size);
		return NULL;
	}
	s->size = size;
	s->cap_acct = (uint32_t)((size - sizeof(*s)) / sizeof(*s->acct));
	/* 8-byte aligned records after the header: no padding is needed */
	s->acct = (struct rsd__ps_bytes *)(s + 1);
	return s;
}

struct rsd__pstate *rsd__ps_initial(struct rsd__pspace *sp)
{
	const struct rsd_image *img = sp->img;
	struct rsd__pstate *s = ps_alloc(sp, img->nlocs + 2);

	if (!s)
		return NULL;
	s->tail = NULL;
	s->nreclaim = 0;
	s->ndelta = 0;
	s->root = NULL;
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

/*
 * t takes s's contents; when share, it takes references of its own to the
 * delta and the actions (else it takes over s's).
 */
static void ps_fill(struct rsd__pstate *t, const struct rsd__pstate *s, bool share)
{
	t->hash = s->hash;
	t->tail = s->tail;
	t->root = s->root;
	if (share) {
		if (t->tail)
			t->tail->refs++;
		dn_get(t->root);
	}
	t->nreclaim = s->nreclaim;
	t->nacct = s->nacct;
	t->ndelta = s->ndelta;
	memcpy(t->acct, s->acct, s->nacct * sizeof(*s->acct));
}

struct rsd__pstate *rsd__ps_copy(struct rsd__pspace *sp, const struct rsd__pstate *s)
{
	/* A little headroom: a spill may add its destination. */
	struct rsd__pstate *t = ps_alloc(sp, s->nacct + 1);

	if (t)
		ps_fill(t, s, true);
	return t;
}

void rsd__node_put(struct rsd__pspace *sp, struct rsd__act_node *n)
{
	/* Iterative: chains can be search_state_limit nodes long. */
	while (n && --n->refs == 0) {
		struct rsd__act_node *prev = n->prev;

		rsd__slab_free(&sp->slab, n, sizeof(*n));
		n = prev;
	}
}

void rsd__ps_free(struct rsd__pspace *sp, struct rsd__pstate *s)
{
	if (!s)
		return;
	rsd__node_put(sp, s->tail);
	dn_put(sp, s->root);
	rsd__slab_free(&sp->slab, s, s->size);
}

static struct rsd__pstate *ps_grow(struct rsd__pspace *sp, struct rsd__pstate *s,
				   uint32_t need_acct)
{
	struct rsd__pstate *t;

	if (need_acct <= s->cap_acct)
		return s;
	t = ps_alloc(sp, need_acct + 2);
	if (!t)
		return NULL;
	ps_fill(t, s, false); /* the tail and root references move to t */
	rsd__slab_free(&sp->slab, s, s->size);
	return t;
}

const struct rsd__locset *rsd__ps_base_fill(struct rsd__pspace *sp, uint32_t v,
					    struct rsd__locset *buf)
{
	struct rsd__bl_slot *sl = sp->tab ? &sp->tab[v & sp->tabmask] : NULL;
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

struct rsd__locset rsd__ps_locs(struct rsd__pspace *sp, const struct rsd__pstate *s, uint32_t v)
{
	return rsd__ps_locs_of(sp, v, rsd__ps_find(s, v));
}

struct rsd__pstate *rsd__ps_set_locs(struct rsd__pspace *sp, struct rsd__pstate *s, uint32_t v,
				     const struct rsd__locset *locs)
{
	struct rsd__locset base = rsd__ps_base_locs(sp, v);
	const struct rsd__vdelta *old = rsd__ps_find(s, v);
	bool drop = ls_eq(&base, locs);
	struct rsd__vdelta e = { v, 0 };
	struct rsd__dnode *root;
	struct dn_pool pool;
	uint32_t need;

	if (drop) {
		/* Back to the image's set: keep the delta normalized. */
		const struct rsd__dnode *n = s->root;

		if (!old)
			return s;
		/* the path above v's node, then the merge of its children */
		need = dn_depth(n, v) - 1;
		while (n->e.vidx != v)
			n = v < n->e.vidx ? n->l : n->r;
		need += dn_spines(n->l, n->r);
	} else {
		long id = intern(sp, locs);

		if (id < 0)
			return NULL;
		e.ls = (uint32_t)id;
		/* a replace copies the path to v; an insert splits along it */
		need = dn_depth(s->root, v) + !old;
	}
	if (!dn_pool_fill(sp, &pool, need))
		return NULL;
	if (old)
		s->hash -= rsd__vdelta_hash(old);
	if (drop) {
		root = dn_remove(&pool, s->root, v);
		s->ndelta--;
	} else {
		root = old ? dn_replace(&pool, s->root, e) : dn_insert(&pool, s->root, e);
		s->ndelta += !old;
		s->hash += rsd__vdelta_hash(&e);
	}
	dn_put(sp, s->root); /* old points into it: not used from here on */
	s->root = root;
	dn_pool_drain(sp, &pool);
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
		s = ps_grow(sp, s, s->nacct + 1);
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

	n = rsd__slab_alloc(&sp->slab, sizeof(*n));
	if (!n)
		return false; /* the caller records it */
	n->prev = s->tail;    /* the state's reference moves to the new node */
	n->refs = 1;
	n->action = *a;
	n->ev = *ev;
	s->tail = n;
	s->nreclaim++;
	return true;
}
