/* SPDX-License-Identifier: MIT */
/*
 * Planning states of the controller search (reference.md §13.1), kept
 * compact because the search may hold one per level for up to
 * search_state_limit levels:
 *
 *  - per value, the set of planned locations is a 130-bit slot set, stored
 *    only where it differs from the published image ("delta", sorted by
 *    value index, normalized: an entry equal to the image's set is removed), so
 *    a copy costs O(changed values), not O(all values);
 *  - location accounting (used, reserved) is a short array sorted by slot,
 *    holding exactly the locations present in the state's maps;
 *  - reclaim actions and their evictions form a reference-counted list
 *    shared between a state and its successors (each successor appends one).
 *
 * Private to lib/ctrl/search.c and lib/ctrl/pstate.c.
 */
#ifndef RSD_CTRL_PSTATE_H
#define RSD_CTRL_PSTATE_H

#include "../core/core.h"
#include "ctrl.h"

/*
 * The search reads one published image (core.h) inside an RCU read-side
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

struct rsd__vdelta {
	uint32_t vidx;
	struct rsd__locset locs;
};

/* A location's planned used and reserved bytes (the core's per-location
 * accounting is struct rsd_acct, core.h). */
struct rsd__ps_bytes {
	uint64_t used, reserved;
	uint32_t slot;
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

static inline uint64_t rsd__vdelta_hash(uint32_t vidx, const struct rsd__locset *l)
{
	uint64_t h = rsd__mix64(vidx + 0x9e3779b97f4a7c15ull);

	for (unsigned i = 0; i < RSD__LS_WORDS; i++)
		h = rsd__mix64(h ^ l->w[i]) + i;
	return h;
}

static inline uint64_t rsd__acct_hash(const struct rsd__ps_bytes *a)
{
	uint64_t h = rsd__mix64(a->slot + 0x632be59bd9b4e019ull);

	h = rsd__mix64(h ^ a->used);
	return rsd__mix64(h ^ (a->reserved + 0x85ebca77c2b2ae63ull));
}

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
	uint32_t ndelta, cap_delta;
	struct rsd__ps_bytes *acct;	   /* sorted by slot; inside this allocation */
	struct rsd__vdelta *delta; /* sorted by vidx; inside this allocation */
};

/*
 * The image's location set of each value, as the search keeps asking for
 * it: a direct-mapped cache by registration index (tag: index + 1), so a
 * lookup is one probe instead of a walk of the value vector and its
 * materializations. tab NULL: no cache, every lookup computes.
 */
#define RSD__BL_SLOTS 2048u

struct rsd__bl_slot {
	uint32_t tag;
	struct rsd__locset l;
};

struct rsd__basecache {
	const struct rsd_image *img;
	struct rsd__bl_slot *tab;
};

struct rsd__pstate *rsd__ps_initial(const struct rsd_image *img);
struct rsd__pstate *rsd__ps_copy(const struct rsd__pstate *s);
void rsd__ps_free(struct rsd__pstate *s);
struct rsd__locset rsd__ps_base_locs(struct rsd__basecache *bc, uint32_t v);
struct rsd__locset rsd__ps_locs(struct rsd__basecache *bc, const struct rsd__pstate *s, uint32_t v);
const struct rsd__vdelta *rsd__ps_find(const struct rsd__pstate *s, uint32_t v);
/* May reallocate: returns the state to use from now on, NULL on ENOMEM
 * (the old state is then still valid). Only on unshared states. */
struct rsd__pstate *rsd__ps_set_locs(struct rsd__basecache *bc, struct rsd__pstate *s, uint32_t v,
				     const struct rsd__locset *locs);
const struct rsd__ps_bytes *rsd__ps_acct(const struct rsd__pstate *s, unsigned slot);
/* used[slot] += add - sub, creating the entry when absent. */
struct rsd__pstate *rsd__ps_used(struct rsd__pstate *s, unsigned slot, uint64_t add, uint64_t sub);
/* Append a reclaim action; false on ENOMEM. */
bool rsd__ps_append(struct rsd__pstate *s, const struct rsd_action *a, const struct rsd__evict *ev);
void rsd__node_put(struct rsd__act_node *n);

#endif
