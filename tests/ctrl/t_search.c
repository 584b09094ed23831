// SPDX-License-Identifier: MIT
/*
 * The controller search's own structures and its count at the limit:
 *
 *  - the memory cache (lib/ctrl/arena.c): blocks kept up to its cap and
 *    handed out again for requests of up to their size and down to half
 *    of it, arena chunks going back to it (the cases that check reuse are
 *    skipped under AddressSanitizer, where nothing is reused);
 *  - the arena: chunks added as allocations grow, one
 *    larger than a chunk served whole, 8-byte alignment, mark/release
 *    reusing exactly the memory released, a release to before the first
 *    chunk, a reused chunk too small for the next allocation;
 *  - planning states (lib/ctrl/pstate.c): random edits of random states,
 *    each copied from another, against a reference that keeps every
 *    value's planned set in full: each state's sets, its delta (the
 *    entries that differ from the image, in value order, as many as
 *    ndelta) and its running hash stay exact, whatever its copies did
 *    after (the delta treap's nodes are shared); an edit refused for
 *    memory leaves its state as it was;
 *  - the memo (lib/ctrl/memo.c): keys of one hash told apart by their
 *    bytes, every key kept across table growth, a lookup that compares
 *    keys where they lie;
 *  - example D of reference.md §13.7 with k droppable replicas, whose
 *    search counts exactly 2^k states (each subset of the drops, all but
 *    the first reached again through other orders and answered by the
 *    memo without a state): with the limit 2^k it is infeasible with
 *    explored_states 2^k, with 2^k - 1 inconclusive with 2^k - 1. Three
 *    variants: replicas at host kinds (location sets that are their own
 *    codes), at two CUDA devices past cuda:28 (sets in the search's
 *    table), and sourced values with no other replica (the drop answered,
 *    then the spill options, of which there are none).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <atf-c.h>
#include "../check.h"

#include "ctrl/arena.h"
#include "ctrl/memo.h"
#include "ctrl/pstate.h"
#include "fixture.h"
#include "rsd/fault.h"

ATF_TC_WITHOUT_HEAD(mem_cache);
ATF_TC_BODY(mem_cache, tc)
{
	struct rsd__mem_cache mc;
	struct rsd__arena a;
	void *p, *q, *r;
	size_t got;

	if (RSD__ARENA_PASSTHROUGH)
		atf_tc_skip("AddressSanitizer build: blocks are not reused (arena.h)");
	rsd__mem_cache_init(&mc, 3000);
	p = rsd__mem_get(&mc, 1000, &got);
	ATF_REQUIRE(p);
	ATF_CHECK_EQ(got, 1000);
	q = rsd__mem_get(&mc, 2000, &got);
	ATF_REQUIRE(q);
	rsd__mem_put(&mc, p, 1000);
	rsd__mem_put(&mc, q, 2000);
	ATF_CHECK_EQ(mc.bytes, 3000);
	r = rsd__mem_get(&mc, 8000, &got); /* over the cap: never kept */
	ATF_REQUIRE(r);
	rsd__mem_put(&mc, r, 8000);
	ATF_CHECK_EQ(mc.bytes, 3000);
	/* a kept block serves a request up to its size, down to half of it */
	ATF_CHECK_EQ(rsd__mem_get(&mc, 600, &got), p);
	ATF_CHECK_EQ(got, 1000);
	r = rsd__mem_get(&mc, 900, &got); /* the 2000-byte block is too large */
	ATF_CHECK(r != q);
	ATF_CHECK_EQ(got, 900);
	ATF_CHECK_EQ(mc.bytes, 2000);
	free(r);
	rsd__mem_put(&mc, p, 1000);
	/* an arena's chunks go back to the cache and come out again */
	rsd__arena_init(&a, 1000 - 64, &mc);
	ATF_REQUIRE(rsd__arena_alloc(&a, 8));
	ATF_CHECK_EQ(mc.bytes, 2000);
	rsd__arena_fini(&a);
	ATF_CHECK_EQ(mc.bytes, 3000);
	rsd__mem_cache_fini(&mc);
	ATF_CHECK_EQ(mc.bytes, 0);
	ATF_CHECK(!mc.free);
}

ATF_TC_WITHOUT_HEAD(arena_chunks);
ATF_TC_BODY(arena_chunks, tc)
{
	struct rsd__arena a;
	unsigned char *p[8], *big, *q;

	rsd__arena_init(&a, 256, NULL);
	/* 100 bytes round up to 104: two fit a 256-byte chunk, the third not */
	for (int i = 0; i < 8; i++) {
		p[i] = rsd__arena_alloc(&a, 100);
		ATF_REQUIRE(p[i]);
		ATF_CHECK_EQ((uintptr_t)p[i] % 8, 0);
		memset(p[i], 0x10 + i, 100);
	}
	if (!RSD__ARENA_PASSTHROUGH) { /* else each allocation is a block of its own */
		ATF_CHECK_EQ(p[1], p[0] + 104);
		ATF_CHECK(p[2] != p[1] + 104);
	}
	big = rsd__arena_alloc(&a, 1000); /* larger than a chunk: one of its own */
	ATF_REQUIRE(big);
	memset(big, 0x77, 1000);
	for (int i = 0; i < 8; i++)
		for (int k = 0; k < 100; k++)
			ATF_REQUIRE_EQ(p[i][k], 0x10 + i);
	q = rsd__arena_alloc(&a, 8);
	ATF_REQUIRE(q);
	ATF_CHECK(q < big || q >= big + 1000);
	rsd__arena_fini(&a);
}

ATF_TC_WITHOUT_HEAD(arena_stack);
ATF_TC_BODY(arena_stack, tc)
{
	struct rsd__arena a;
	struct rsd__arena_mark m0, m1;
	unsigned char *p, *q, *r, *s, *t;

	if (RSD__ARENA_PASSTHROUGH)
		atf_tc_skip("AddressSanitizer build: blocks are not reused (arena.h)");
	rsd__arena_init(&a, 256, NULL);
	m0 = rsd__arena_mark(&a); /* before the first chunk */
	p = rsd__arena_alloc(&a, 64);
	m1 = rsd__arena_mark(&a);
	q = rsd__arena_alloc(&a, 200); /* does not fit after p: next chunk */
	r = rsd__arena_alloc(&a, 8);
	ATF_REQUIRE(p && q && r);
	ATF_CHECK_EQ(r, q + 200);
	rsd__arena_release(&a, m1);
	/* the memory after the mark is handed out again, in the same order */
	ATF_CHECK_EQ(rsd__arena_alloc(&a, 200), q);
	rsd__arena_release(&a, m1);
	/* a reused chunk too small for a request: a new one goes after it */
	s = rsd__arena_alloc(&a, 600);
	ATF_REQUIRE(s);
	ATF_CHECK(s + 600 <= q || s >= q + 256);
	memset(s, 1, 600);
	rsd__arena_release(&a, m0);
	t = rsd__arena_alloc(&a, 64);
	ATF_CHECK_EQ(t, p);
	rsd__arena_fini(&a);
	rsd__arena_fini(&a); /* an empty arena may be finished again */
}

/* ---- planning states against a reference ---- */

enum {
	PS_VALUES = 48,
	PS_STATES = 24,
	PS_STEPS = 4000
};

/* A state and, per value index, the set it should plan. */
struct ps_ref {
	struct rsd__pstate *S;
	struct rsd__locset want[PS_VALUES];
};

struct ps_walk {
	const struct rsd__pspace *sp;
	const struct ps_ref *ref;
	const struct rsd__locset *base;
	uint32_t n;
	int64_t last;
	uint64_t hash;
};

static bool ps_walk_check(void *ctx, const struct rsd__vdelta *e)
{
	struct ps_walk *w = ctx;
	struct rsd__locset l = rsd__ps_set(w->sp, e);

	ATF_REQUIRE((int64_t)e->vidx > w->last); /* strictly in value order */
	ATF_REQUIRE(e->vidx < PS_VALUES);
	ATF_REQUIRE(ls_eq(&l, &w->ref->want[e->vidx]));
	ATF_REQUIRE(!ls_eq(&l, &w->base[e->vidx])); /* normalized */
	w->last = e->vidx;
	w->hash += rsd__vdelta_hash(e);
	w->n++;
	return true;
}

static void ps_check(struct rsd__pspace *sp, const struct ps_ref *r, const struct rsd__locset *base)
{
	struct ps_walk w = { sp, r, base, 0, -1, 0 };
	uint32_t ndiff = 0;

	for (uint32_t v = 0; v < PS_VALUES; v++) {
		struct rsd__locset l = rsd__ps_locs(sp, r->S, v);

		ATF_REQUIRE(ls_eq(&l, &r->want[v]));
		ATF_REQUIRE_EQ(rsd__ps_find(r->S, v) != NULL, !ls_eq(&r->want[v], &base[v]));
		ndiff += !ls_eq(&r->want[v], &base[v]);
	}
	ATF_REQUIRE(rsd__ps_walk(r->S, ps_walk_check, &w));
	ATF_REQUIRE_EQ(w.n, ndiff);
	ATF_REQUIRE_EQ(r->S->ndelta, ndiff);
	for (uint32_t i = 0; i < r->S->nacct; i++)
		w.hash += rsd__acct_hash(&r->S->acct[i]);
	ATF_REQUIRE_EQ(r->S->hash, w.hash);
}

/* A random set over host kinds, low and high CUDA slots (some sets are
 * their own codes, others go to the search's table). */
static struct rsd__locset ps_random_set(unsigned *seed)
{
	const struct rsd_location at[] = { PAGEABLE,
					   PINNED,
					   { RSD_CUDA, 0 },
					   { RSD_CUDA, 3 },
					   { RSD_CUDA, 40 } };
	struct rsd__locset l;

	memset(&l, 0, sizeof(l));
	for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++)
		if (rand_r(seed) % 3 == 0)
			ls_add(&l, rsd__loc_slot(at[i]));
	return l;
}

ATF_TC_WITHOUT_HEAD(pstate_reference);
ATF_TC_BODY(pstate_reference, tc)
{
	static struct ps_ref ref[PS_STATES];
	struct rsd__locset base[PS_VALUES];
	const struct rsd_image *img;
	struct rsd__pspace sp;
	unsigned seed = 34, nref = 1, nomem = 0;
	struct fx f;

	fx_init(&f, NULL, 0, 0);
	for (uint32_t i = 0; i < PS_VALUES; i++) {
		struct rsd_handle h = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);

		if (i % 3 == 0)
			fx_ensure(&f, h, PINNED);
	}
	img = rsd__read_begin(f.m);
	RSD_REQUIRE_OK(rsd__ps_space_init(&sp, img, NULL));
	/* the base cache: one slot per value, rounded up to a power of two */
	ATF_REQUIRE(sp.tab);
	ATF_CHECK_EQ(sp.tabmask + 1, 64);
	for (uint32_t v = 0; v < PS_VALUES; v++) {
		base[v] = rsd__ps_base_locs(&sp, v);
		ATF_REQUIRE(ls_has(&base[v], rsd__loc_slot(PAGEABLE)));
		ATF_REQUIRE_EQ(ls_has(&base[v], rsd__loc_slot(PINNED)), v % 3 == 0);
		ref[0].want[v] = base[v];
	}
	ref[0].S = rsd__ps_initial(&sp);
	ATF_REQUIRE(ref[0].S);
	ps_check(&sp, &ref[0], base);
	for (unsigned step = 0; step < PS_STEPS; step++) {
		unsigned k = (unsigned)rand_r(&seed) % nref, op = (unsigned)rand_r(&seed) % 8;
		struct ps_ref *r = &ref[k];

		if (op == 0 && nref < PS_STATES) {
			/* a successor: shares everything with k */
			r = &ref[nref++];
			*r = ref[k];
			r->S = rsd__ps_copy(&sp, ref[k].S);
			ATF_REQUIRE(r->S);
		} else if (op == 1 && nref > 1) {
			/* a state gone: its copies keep what they share */
			rsd__ps_free(&sp, r->S);
			*r = ref[--nref];
			r = &ref[k < nref ? k : 0];
		} else {
			uint32_t v = (uint32_t)rand_r(&seed) % PS_VALUES;
			/* back to the image's set a third of the time (a removal) */
			struct rsd__locset l = op % 3 ? ps_random_set(&seed) : base[v];
			struct rsd__pstate *T;

			if (op == 7) {
				/* every allocation refused: under AddressSanitizer
				 * each node is one, elsewhere the slab may have
				 * room */
				RSD_REQUIRE_OK(rsd_fault_inject("alloc", NULL, 1, RSD_ENOMEM));
				T = rsd__ps_set_locs(&sp, r->S, v, &l);
				RSD_REQUIRE_OK(rsd_fault_inject("alloc", NULL, 0, 0));
				if (!T) {
					nomem++;
					ps_check(&sp, r, base);
					continue;
				}
			} else {
				T = rsd__ps_set_locs(&sp, r->S, v, &l);
				ATF_REQUIRE(T);
			}
			r->S = T;
			r->want[v] = l;
		}
		ps_check(&sp, r, base);
		if (step % 64 == 0)
			for (unsigned i = 0; i < nref; i++)
				ps_check(&sp, &ref[i], base);
	}
	for (unsigned i = 0; i < nref; i++) {
		ps_check(&sp, &ref[i], base);
		rsd__ps_free(&sp, ref[i].S);
	}
	/* the edits were not all no-ops: the table holds the high-slot sets */
	ATF_CHECK(sp.nsets > 0);
	if (RSD__ARENA_PASSTHROUGH)
		ATF_CHECK(nomem > 0);
	rsd__ps_space_fini(&sp);
	rsd__read_end();
	fx_fini(&f);
}

struct key_cmp {
	const unsigned char *bytes;
	size_t len;
	unsigned calls;
};

static bool key_eq(const void *ctx, const unsigned char *key, size_t len)
{
	struct key_cmp *k = (struct key_cmp *)ctx;

	k->calls++;
	return len == k->len && !memcmp(key, k->bytes, len);
}

/* Key i of memo_keys: 4..43 bytes, all distinct; every fourth has hash 7. */
static size_t memo_key(unsigned i, unsigned char *key, uint64_t *h)
{
	size_t len = sizeof(i) + i % 40;

	memset(key, 0, 64);
	memcpy(key, &i, sizeof(i));
	*h = i % 4 ? rsd__memo_hash(key, len) : 7;
	return len;
}

ATF_TC_WITHOUT_HEAD(memo_keys);
ATF_TC_BODY(memo_keys, tc)
{
	enum {
		NKEYS = 5000
	};
	struct rsd__memo m;
	unsigned char key[64];
	struct key_cmp k = { key, 0, 0 };

	rsd__memo_init(&m, NULL);
	ATF_CHECK(!rsd__memo_has_hash(&m, 1));
	for (unsigned i = 0; i < NKEYS; i++) {
		uint64_t h;
		size_t len = memo_key(i, key, &h);

		RSD_REQUIRE_OK(rsd__memo_add(&m, key, len, h));
		RSD_REQUIRE_OK(rsd__memo_add(&m, key, len, h)); /* a second add is a no-op */
	}
	ATF_CHECK_EQ(m.n, NKEYS);
	for (unsigned i = 0; i < NKEYS; i++) {
		uint64_t h;
		size_t len = memo_key(i, key, &h);

		ATF_REQUIRE(rsd__memo_has_hash(&m, h));
		ATF_REQUIRE(rsd__memo_has(&m, key, len, h));
		k.len = len;
		ATF_REQUIRE(rsd__memo_find(&m, h, key_eq, &k));
		/* the same bytes under another hash, and one byte longer */
		ATF_REQUIRE(!rsd__memo_has(&m, key, len, h ^ 1));
		ATF_REQUIRE(!rsd__memo_has(&m, key, len + 1, h));
	}
	/* hash 7 holds NKEYS / 4 keys: a key that is none of them is compared
	 * with each and found in none */
	memset(key, 0xff, sizeof(key));
	k.len = 8;
	k.calls = 0;
	ATF_CHECK(!rsd__memo_find(&m, 7, key_eq, &k));
	ATF_CHECK_EQ(k.calls, NKEYS / 4);
	rsd__memo_fini(&m);
	ATF_CHECK_EQ(m.n, 0);
}

/*
 * Example D with k values: each resident at where and at pinned-host or,
 * with cuda, at cuda:40 (where also lists cuda:41); the short location's
 * budget holds the k values, the request reserves k + 1 there. sourced:
 * k sourced values resident only at pinned-host instead.
 */
enum d_kind {
	D_HOST,
	D_CUDA,
	D_SOURCED
};

static void example_d(enum d_kind kind, unsigned k, size_t limit, int want)
{
	const struct rsd_location c40 = { RSD_CUDA, 40 }, c41 = { RSD_CUDA, 41 };
	struct rsd_location at = kind == D_CUDA ? c40 : PINNED;
	struct rsd_budget bud = { at, (uint64_t)k * N };
	struct rsd_reservation_spec big = { at, (uint64_t)(k + 1) * N, "big" };
	struct rsd_requirement q;
	struct rsd_request r = { "D", &q, 1, &big, 1 };
	struct rsd_controller *c;
	struct rsd_decision *d = NULL;
	struct rsd_handle h, req;
	struct fx f;

	fx_init(&f, &bud, 1, kind == D_CUDA ? 42 : 0);
	req = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
	for (unsigned i = 0; i < k; i++) {
		if (kind == D_SOURCED) {
			h = fx_sourced(&f, PINNED);
		} else {
			h = fx_adopt(&f, PAGEABLE, RSD_REPLICABLE);
			if (kind == D_CUDA)
				fx_ensure(&f, h, c41);
		}
		fx_ensure(&f, h, at);
	}
	q = fx_req(req, PAGEABLE);
	RSD_REQUIRE_OK(rsd_controller_create(f.m, NULL, limit, &c));
	ATF_CHECK_EQ(rsd_controller_decide(c, &r, &d), want);
	ATF_CHECK(!d);
	ATF_CHECK(rsd_last_error()->has_search);
	ATF_CHECK_EQ(rsd_last_error()->explored_states, limit);
	ATF_CHECK_EQ(rsd_last_error()->state_limit, limit);
	rsd_controller_free(c);
	fx_fini(&f);
}

ATF_TC_WITHOUT_HEAD(example_d_exact_limit);
ATF_TC_BODY(example_d_exact_limit, tc)
{
	example_d(D_HOST, 10, 1024, -RSD_EPLAN);
	example_d(D_HOST, 10, 1023, -RSD_ESEARCHLIMIT);
	example_d(D_HOST, 1, 2, -RSD_EPLAN);
	example_d(D_HOST, 1, 1, -RSD_ESEARCHLIMIT);
}

ATF_TC_WITHOUT_HEAD(example_d_table_sets);
ATF_TC_BODY(example_d_table_sets, tc)
{
	example_d(D_CUDA, 10, 1024, -RSD_EPLAN);
	example_d(D_CUDA, 10, 1023, -RSD_ESEARCHLIMIT);
}

ATF_TC_WITHOUT_HEAD(example_d_sourced);
ATF_TC_BODY(example_d_sourced, tc)
{
	example_d(D_SOURCED, 10, 1024, -RSD_EPLAN);
	example_d(D_SOURCED, 10, 1023, -RSD_ESEARCHLIMIT);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, mem_cache);
	ATF_TP_ADD_TC(tp, arena_chunks);
	ATF_TP_ADD_TC(tp, arena_stack);
	ATF_TP_ADD_TC(tp, pstate_reference);
	ATF_TP_ADD_TC(tp, memo_keys);
	ATF_TP_ADD_TC(tp, example_d_exact_limit);
	ATF_TP_ADD_TC(tp, example_d_table_sets);
	ATF_TP_ADD_TC(tp, example_d_sourced);
	return atf_no_error();
}
