/* SPDX-License-Identifier: MIT */
/*
 * Planning states of the controller search (reference.md §13.1), kept
 * compact because the search may hold one per level for up to
 * search_state_limit levels:
 *
 *  - per value, the set of planned locations (of 130 slots) is stored only
 *    where it differs from the published image ("delta", ordered by value
 *    index, normalized: an entry equal to the image's set is removed); an
 *    entry names its set by a 32-bit code (struct rsd__vdelta). The delta
 *    is a persistent treap shared between a state and its successors
 *    (struct rsd__dnode): a copy takes a reference to its root, and a
 *    change copies the O(log n) nodes on one path, so a chain of n spills
 *    costs O(n log n) time and memory, not the O(n^2) that copying a
 *    sorted array per level cost;
 *  - location accounting (used, reserved) is a short array sorted by slot,
 *    holding exactly the locations present in the state's maps;
 *  - reclaim actions and their evictions form a reference-counted list
 *    shared between a state and its successors (each successor appends one);
 *  - states, delta nodes and reclaim records come from the search's slab
 *    (arena.h): no malloc/free pair per successor.
 *
 * Private to the controller search (search.h lists its files) and
 * lib/ctrl/pstate.c.
 */
#ifndef RSD_CTRL_PSTATE_H
#define RSD_CTRL_PSTATE_H

#include <string.h>

#include "../core/image.h"
#include "arena.h"
#include "ctrl.h"

/*
 * The search reads one published image (lib/core/image.h) inside an RCU read-side
 * section that decide holds from start to end, so every value image it
 * reaches stays valid. Values are addressed by registration index, which
 * counts discarded values.
 */
static inline const struct rsd_img_value *rsd__iv(const struct rsd_image *img, uint32_t v)
{
	return rsd__pv_get(&img->values, v);
}

#define RSD__LS_WORDS ((RSD_NSLOTS + 63) / 64)

struct rsd__locset {
	uint64_t w[RSD__LS_WORDS];
};

static inline bool ls_has(const struct rsd__locset *s, unsigned slot)
{
	return (s->w[slot >> 6] >> (slot & 63)) & 1;
}

static inline void ls_add(struct rsd__locset *s, unsigned slot)
{
	s->w[slot >> 6] |= 1ull << (slot & 63);
}

static inline void ls_del(struct rsd__locset *s, unsigned slot)
{
	s->w[slot >> 6] &= ~(1ull << (slot & 63));
}

static inline bool ls_empty(const struct rsd__locset *s)
{
	for (unsigned i = 0; i < RSD__LS_WORDS; i++)
		if (s->w[i])
			return false;
	return true;
}

static inline bool ls_eq(const struct rsd__locset *a, const struct rsd__locset *b)
{
	for (unsigned i = 0; i < RSD__LS_WORDS; i++)
		if (a->w[i] != b->w[i])
			return false;
	return true;
}

/* Lowest slot (the canonical minimum location); -1 when empty. */
static inline int ls_min(const struct rsd__locset *s)
{
	for (unsigned i = 0; i < RSD__LS_WORDS; i++)
		if (s->w[i])
			return (int)(i * 64 + (unsigned)__builtin_ctzll(s->w[i]));
	return -1;
}

/*
 * A changed value: its index and its location set's code. A set of slots
 * below 31 (the host kinds and cuda:0..28) is its own code, the bitmap;
 * any other is RSD__LS_TABLE | its id in the search's table of distinct
 * sets (struct rsd__pspace), assigned once per search. Either way equal
 * codes are equal sets, so a delta compares and serializes as plain words.
 */
#define RSD__LS_TABLE 0x80000000u
/* Not a code (ids stay below 2^31 - 1): "not known". */
#define RSD__LS_UNKNOWN UINT32_MAX

struct rsd__vdelta {
	uint32_t vidx, ls;
};

/*
 * A location's planned used and reserved bytes (the core's per-location
 * accounting is struct rsd_acct, image.h). pad is always 0: the first two
 * words serialize and compare as plain bytes (search_keys.c). reserved
 * never changes during a search (planning moves only used bytes; a
 * location that enters the maps has 0), so those two words identify an
 * entry within one search.
 */
struct rsd__ps_bytes {
	uint64_t used;
	uint32_t slot, pad;
	uint64_t reserved;
};

/* One reclaim action with its eviction record; shared, refcounted. */
struct rsd__act_node {
	struct rsd__act_node *prev;
	uint32_t refs;
	struct rsd_action action;
	struct rsd__evict ev;
};

/*
 * A strong 64-bit mix (the finalizer of MurmurHash3, a published
 * constant pair): the state hash below sums one mix per entry.
 */
static inline uint64_t rsd__mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

static inline uint64_t rsd__vdelta_hash(const struct rsd__vdelta *d)
{
	return rsd__mix64(((uint64_t)d->vidx << 32 | d->ls) + 0x9e3779b97f4a7c15ull);
}

static inline uint64_t rsd__acct_hash(const struct rsd__ps_bytes *a)
{
	return rsd__mix64(a->used + 0x632be59bd9b4e019ull * (a->slot + 1)) ^
	       rsd__mix64(a->reserved ^ 0x85ebca77c2b2ae63ull * (a->slot + 1));
}

/*
 * A node of a delta treap: ordered by vidx, a max-heap by a hash of vidx
 * (so the tree's shape is a function of its keys, pstate.c). Nodes
 * are immutable once linked and reference-counted: refs counts the states'
 * roots and parent nodes that point at it. They come from the search's
 * slab.
 */
struct rsd__dnode {
	struct rsd__dnode *l, *r;
	struct rsd__vdelta e;
	uint32_t refs;
};

struct rsd__pstate {
	/*
	 * The sum of rsd__vdelta_hash() of every delta entry and
	 * rsd__acct_hash() of every accounting entry (mod 2^64): a function
	 * of SIG(S) kept up to date by every change, so a memo lookup needs
	 * no pass over the state (search.c).
	 */
	uint64_t hash;
	struct rsd__act_node *tail; /* last reclaim action, NULL when none */
	size_t nreclaim;
	uint32_t nacct, cap_acct;
	uint32_t ndelta;	    /* entries in the delta treap */
	size_t size;		    /* its slab object's bytes (struct rsd__pspace) */
	struct rsd__ps_bytes *acct; /* sorted by slot; inside this block */
	struct rsd__dnode *root;    /* the delta; one reference is this state's */
};

/*
 * The image's location set of each value, as the search keeps asking for
 * it: a direct-mapped cache by registration index (tag: index + 1), so a
 * lookup is one probe instead of a walk of the value vector and its
 * materializations. Its slots are the image's value count rounded up to a
 * power of two, at most RSD__BL_SLOTS: every search clears its table, and
 * a small image's search is not to spend its time zeroing slots no value
 * maps to (a not-waiting use on a 3-value image cleared 64 KiB).
 */
#define RSD__BL_SLOTS 2048u

struct rsd__bl_slot {
	uint32_t tag;
	struct rsd__locset l;
};

/*
 * What the planning states of one search share: the image, its location
 * set cache (tab NULL: none, every lookup computes), the table of the
 * distinct location sets that delta entries name by id (those that are
 * not their own code: sets[], found through an open-addressing index of
 * id + 1, 0 empty), and the slab that states, delta nodes and reclaim records
 * come from.
 */
struct rsd__pspace {
	const struct rsd_image *img;
	struct rsd__bl_slot *tab;
	uint32_t tabmask; /* tab's slots - 1 (a power of two - 1) */
	struct rsd__locset *sets;
	uint32_t nsets, capsets;
	uint32_t *sidx;
	uint32_t sidxcap;	     /* 0 or a power of two, at least 2 * capsets */
	struct rsd__slab_source src; /* the controller's memory cache */
	struct rsd__slab slab;
};

/* Only the base cache may be missing afterwards (the search runs slower);
 * -RSD_ENOMEM otherwise. */
int rsd__ps_space_init(struct rsd__pspace *sp, const struct rsd_image *img,
		       struct rsd__mem_cache *mc);
void rsd__ps_space_fini(struct rsd__pspace *sp);

/* Every function below that returns a state returns NULL with -RSD_ENOMEM
 * recorded on failure. */
struct rsd__pstate *rsd__ps_initial(struct rsd__pspace *sp);
struct rsd__pstate *rsd__ps_copy(struct rsd__pspace *sp, const struct rsd__pstate *s);
void rsd__ps_free(struct rsd__pspace *sp, struct rsd__pstate *s);
/* The base cache's slot for v, filled on a miss (pstate.c). */
const struct rsd__locset *rsd__ps_base_fill(struct rsd__pspace *sp, uint32_t v,
					    struct rsd__locset *buf);

/* The image's location set of value v. */
static inline struct rsd__locset rsd__ps_base_locs(struct rsd__pspace *sp, uint32_t v)
{
	struct rsd__locset buf;

	if (sp->tab && sp->tab[v & sp->tabmask].tag == v + 1)
		return sp->tab[v & sp->tabmask].l;
	return *rsd__ps_base_fill(sp, v, &buf);
}

struct rsd__locset rsd__ps_locs(struct rsd__pspace *sp, const struct rsd__pstate *s, uint32_t v);
/* Value v's delta entry in s, NULL when it has none (O(log n)). */
static inline const struct rsd__vdelta *rsd__ps_find(const struct rsd__pstate *s, uint32_t v)
{
	for (const struct rsd__dnode *n = s->root; n; n = v < n->e.vidx ? n->l : n->r)
		if (n->e.vidx == v)
			return &n->e;
	return NULL;
}

/*
 * Call fn on each delta entry of s in vidx order until it returns false.
 * Returns false when fn stopped the walk.
 */
bool rsd__ps_walk(const struct rsd__pstate *s, bool (*fn)(void *ctx, const struct rsd__vdelta *e),
		  void *ctx);
/* The location set of delta entry d. */
static inline struct rsd__locset rsd__ps_set(const struct rsd__pspace *sp,
					     const struct rsd__vdelta *d)
{
	struct rsd__locset l;

	if (d->ls & RSD__LS_TABLE)
		return sp->sets[d->ls & ~RSD__LS_TABLE];
	memset(&l, 0, sizeof(l));
	l.w[0] = d->ls;
	return l;
}

/* Is slot in the location set of delta entry d? */
static inline bool rsd__ps_set_has(const struct rsd__pspace *sp, const struct rsd__vdelta *d,
				   unsigned slot)
{
	if (d->ls & RSD__LS_TABLE)
		return ls_has(&sp->sets[d->ls & ~RSD__LS_TABLE], slot);
	return slot < 31 && (d->ls >> slot) & 1;
}
/* May move the state: returns the one to use from now on (on failure the
 * old one is still valid). Only on unshared states. */
struct rsd__pstate *rsd__ps_set_locs(struct rsd__pspace *sp, struct rsd__pstate *s, uint32_t v,
				     const struct rsd__locset *locs);
const struct rsd__ps_bytes *rsd__ps_acct(const struct rsd__pstate *s, unsigned slot);

/*
 * A successor of s described without building it: value v's location set
 * replaced and one location's used bytes lowered, what a drop does. Its
 * running hash and delta length follow from s's in O(1), so the memo can
 * be asked about it first (search_keys.c).
 */
struct rsd__ps_succ {
	uint64_t hash;		/* its running hash */
	uint64_t used;		/* its used bytes at s->acct[apos] */
	struct rsd__vdelta ent; /* v's delta entry in it (ls: only when keep) */
	uint32_t ndelta;	/* its delta length */
	uint32_t apos;		/* the lowered location's index in s's accounting */
	bool keep;		/* it has a delta entry for v, ent */
};

/* The change rsd__ps_used(slot, 0, sub) would make to s. */
struct rsd__ps_used_edit {
	uint32_t apos;	/* the location's index in s's accounting */
	uint64_t used;	/* its used bytes in the successor */
	uint64_t dhash; /* what the change adds to the running hash */
};

/*
 * That change, into *u (it depends only on s, slot and sub: a caller may
 * keep it for several successors of s). Return: 0, or 1 when slot is not
 * in s's maps (the successor would add it: not described).
 */
int rsd__ps_edit_used(const struct rsd__pstate *s, unsigned slot, uint64_t sub,
		      struct rsd__ps_used_edit *u);

/* Value v's set, d its delta entry in a state (NULL: none, the image's). */
static inline struct rsd__locset rsd__ps_locs_of(struct rsd__pspace *sp, uint32_t v,
						 const struct rsd__vdelta *d)
{
	return d ? rsd__ps_set(sp, d) : rsd__ps_base_locs(sp, v);
}

/* The code of location set l (struct rsd__vdelta), added to the table
 * when new; -RSD_ENOMEM (recorded) on failure. */
long rsd__ps_code(struct rsd__pspace *sp, const struct rsd__locset *l);

/*
 * Describe the successor in which v (old: its entry in s's delta, NULL
 * when none) gets the set of the given code, as rsd__ps_set_locs() would
 * leave it (keep: that set is not v's image set, so v keeps a delta
 * entry), with the used change *u.
 */
static inline void rsd__ps_describe(const struct rsd__pstate *s, uint32_t v,
				    const struct rsd__vdelta *old, bool keep, uint32_t code,
				    const struct rsd__ps_used_edit *u, struct rsd__ps_succ *out)
{
	out->hash = s->hash + u->dhash;
	out->used = u->used;
	out->apos = u->apos;
	out->keep = keep;
	out->ndelta = s->ndelta;
	if (old) {
		out->hash -= rsd__vdelta_hash(old);
		out->ndelta--;
	}
	out->ent.vidx = v; /* also where v's entry goes, or went, when not keep */
	if (keep) {
		out->ent.ls = code;
		out->hash += rsd__vdelta_hash(&out->ent);
		out->ndelta++;
	}
}
/* used[slot] += add - sub, creating the entry when absent. */
struct rsd__pstate *rsd__ps_used(struct rsd__pspace *sp, struct rsd__pstate *s, unsigned slot,
				 uint64_t add, uint64_t sub);
/* Append a reclaim action; false on ENOMEM. */
bool rsd__ps_append(struct rsd__pspace *sp, struct rsd__pstate *s, const struct rsd_action *a,
		    const struct rsd__evict *ev);
void rsd__node_put(struct rsd__pspace *sp, struct rsd__act_node *n);

#endif
