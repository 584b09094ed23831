// SPDX-License-Identifier: MIT
/*
 * Building blocks of the controller search (reference.md §13.2-13.4):
 * SIMULATE, CANDIDATES + RANK and COUNT. The memo keys built from SIG(S)
 * are in search_keys.c, the generator machine that strings them together
 * in search.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../plan/plan_api.h"
#include "memo.h"
#include "pstate.h"
#include "search.h"

int rsd__search_count(struct search *x, const char *objective, int slot)
{
	if (x->count >= x->limit) {
		x->objective = objective;
		x->objective_slot = slot;
		x->err = -RSD_ESEARCHLIMIT;
		return x->err;
	}
	x->count++;
	return 0;
}

uint64_t rsd__search_charge(const struct search *x, uint32_t v)
{
	return rsd__iv(x->img, v)->spec.storage_nbytes;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a + b < a ? UINT64_MAX : a + b;
}

/* Would n more bytes at slot exceed its budget? The admission rule
 * (rsd__ledger_free) on the state's used and reserved bytes. */
static bool over(const struct search *x, uint64_t used, uint64_t reserved, unsigned slot,
		 uint64_t n)
{
	struct rsd__ledger l = rsd__search_ledger(x, slot, used, reserved);

	return x->has_budget[slot] && n > rsd__ledger_free(&l);
}

/* ---- SIMULATE (§13.2) ---- */

static int cmp_pair(const void *a, const void *b)
{
	const uint32_t *p = a, *q = b;

	if (p[0] != q[0])
		return p[0] < q[0] ? -1 : 1;
	return p[1] < q[1] ? -1 : p[1] > q[1];
}

int rsd__sim_init(struct search *x)
{
	size_t n = x->req->nrequirements;
	uint32_t *pairs = rsd__malloc((n ? n : 1) * 2 * sizeof(*pairs));

	if (!pairs)
		return x->err = rsd__err(RSD_ENOMEM, "out of memory starting the residency search");
	for (size_t i = 0; i < n; i++) {
		pairs[2 * i] = x->req_vidx[i];
		pairs[2 * i + 1] = (uint32_t)i;
	}
	qsort(pairs, n, 2 * sizeof(*pairs), cmp_pair);
	for (size_t i = 0; i < n; i++) {
		struct simv *sv = &x->simv[pairs[2 * i + 1]];

		sv->vidx = pairs[2 * i];
		sv->first = i && pairs[2 * i - 2] == pairs[2 * i] ?
				    x->simv[pairs[2 * i - 1]].first :
				    pairs[2 * i + 1];
		sv->gen = 0;
	}
	free(pairs);
	return 0;
}

/* The simulation's location set of requirement qi's value. */
static struct rsd__locset *sim_locs(struct search *x, const struct rsd__pstate *S, size_t qi)
{
	struct simv *sv = &x->simv[x->simv[qi].first];

	if (sv->gen != x->simgen) {
		sv->gen = x->simgen;
		sv->locs = rsd__ps_locs(&x->sp, S, sv->vidx);
	}
	return &sv->locs;
}

/*
 * Stage idx (of kind) needs n more bytes at slot, which do not fit: record
 * the shortfall in *sh and say whether to stop there. The precheck does not
 * stop: it simulates past every shortfall as if the stage fitted and stops
 * only at one whose bytes short exceed what evicting every candidate at
 * that location could free (or when listing them fails: x->err).
 */
static bool stop_at(struct search *x, struct shortfall *sh, unsigned slot, uint64_t n,
		    const uint64_t *used, const uint64_t *reserved, enum stage_kind kind,
		    size_t idx)
{
	struct rsd__ledger l = rsd__search_ledger(x, slot, used[slot], reserved[slot]);
	uint64_t need = sat_add(rsd__ledger_taken(&l), n);

	sh->slot = slot;
	sh->n = n;
	sh->used = used[slot];
	sh->reserved = reserved[slot];
	sh->kind = kind;
	sh->index = idx;
	if (!x->precheck)
		return true;
	if (!x->has_freeable[slot]) {
		if (rsd__freeable(x, slot, &x->freeable[slot]))
			return true;
		x->has_freeable[slot] = true;
	}
	return need - x->budget[slot] > x->freeable[slot];
}

/*
 * A feasible state's enter actions move an EXCLUSIVE required value from
 * its resident replica; the plan simulation that confirms the decision
 * refuses a move whose source is protected (arriving, used, held, or
 * under a pending lease whose events have not all completed). SIMULATE
 * does not look at protection, and no reclaim changes that source: a
 * protected materialization is never a candidate, and an EXCLUSIVE value
 * has no other replica to move from. So every plan the search could
 * propose has that move: fail the search with the simulation's own
 * answer rather than propose a plan its confirmation rejects.
 */
static int refuse_protected_source(const struct search *x)
{
	char name[RSD_LOCATION_NAME_MAX];

	for (size_t i = 0; i < x->nenter; i++) {
		const struct rsd_action *a = &x->enter[i];

		if (a->kind != RSD_ACT_MOVE || !a->has_from ||
		    !rsd__plan_mat_protected(x->c->m, x->view, rsd__img_find(x->img, a->handle.id),
					     a->from))
			continue;
		return rsd__err(RSD_EPLAN, "source %s is protected",
				rsd_location_name(a->from, name, sizeof(name)));
	}
	return 0;
}

/* SIMULATE on used[] and reserved[] (all of S's map entries filled in);
 * every slot it writes is added to *w. */
static int simulate(struct search *x, const struct rsd__pstate *S, struct shortfall *sh,
		    uint64_t *used, uint64_t *reserved, struct rsd__locset *w)
{
	const struct rsd_request *r = x->req;

	x->nenter = 0;
	x->simgen++;
	for (size_t i = 0; i < r->nreservations; i++) {
		unsigned slot = rsd__loc_slot(r->reservations[i].location);
		uint64_t n = r->reservations[i].nbytes;

		if (over(x, used[slot], reserved[slot], slot, n)) {
			if (stop_at(x, sh, slot, n, used, reserved, ST_RESERVATION, i))
				return 1;
		}
		reserved[slot] = sat_add(reserved[slot], n);
		ls_add(w, slot);
	}
	for (size_t qi = 0; qi < r->nrequirements; qi++) {
		const struct rsd_requirement *q = &r->requirements[qi];
		uint32_t v = x->req_vidx[qi];
		const struct rsd_img_value *vs = rsd__iv(x->img, v);
		struct rsd__locset *L = sim_locs(x, S, qi);
		unsigned D = rsd__loc_slot(q->location), src;
		uint64_t C = vs->spec.storage_nbytes;
		struct rsd_action *a = &x->enter[x->nenter];
		bool temp;

		if (ls_has(L, D))
			continue; /* satisfied, possibly by an earlier requirement */
		if (!ls_empty(L)) {
			src = (unsigned)ls_min(L);
			temp = false;
		} else {
			if (!vs->has_source)
				return rsd__err(
					RSD_EUNAVAILABLE,
					"Residency value '%llu' has no materialization or source",
					(unsigned long long)q->handle.id);
			src = rsd__loc_slot(vs->source_loc);
			temp = true;
			if (over(x, used[src], reserved[src], src, C)) {
				if (stop_at(x, sh, src, C, used, reserved, ST_SOURCE, qi))
					return 1;
			}
			reserved[src] = sat_add(reserved[src], C);
			ls_add(w, src);
		}
		if (temp && src == D)
			reserved[src] -= C; /* load and install share one charge */
		if (over(x, used[D], reserved[D], D, C)) {
			if (stop_at(x, sh, D, C, used, reserved, ST_MATERIALIZE, qi))
				return 1;
		}
		used[D] = sat_add(used[D], C);
		ls_add(w, D);
		ls_add(L, D);
		if (temp && src != D)
			reserved[src] -= C;
		memset(a, 0, sizeof(*a));
		a->handle = q->handle;
		a->location = q->location;
		if (vs->spec.replica_mode == RSD_EXCLUSIVE) {
			a->kind = RSD_ACT_MOVE;
			if (!temp) {
				a->has_from = true;
				a->from = rsd__slot_loc(src);
				ls_del(L, src);
				used[src] -= C;
				ls_add(w, src);
			}
		} else {
			a->kind = RSD_ACT_ENSURE;
		}
		x->nenter++;
	}
	return x->precheck ? 0 : refuse_protected_source(x);
}

/*
 * 0: feasible, enter actions in x->enter; 1: *sh describes the shortfall
 * (with x->precheck: one that evictions cannot cover, see stop_at()).
 * Runs on the search's zeroed per-slot arrays and zeroes what it wrote,
 * rather than clearing a pair of RSD_NSLOTS arrays per state.
 */
int rsd__search_simulate(struct search *x, const struct rsd__pstate *S, struct shortfall *sh)
{
	uint64_t *used = x->sim_used, *reserved = x->sim_reserved;
	struct rsd__locset w;
	int ret;

	memset(&w, 0, sizeof(w));
	for (uint32_t i = 0; i < S->nacct; i++) {
		used[S->acct[i].slot] = S->acct[i].used;
		reserved[S->acct[i].slot] = S->acct[i].reserved;
		ls_add(&w, S->acct[i].slot);
	}
	ret = simulate(x, S, sh, used, reserved, &w);
	for (unsigned i = 0; i < RSD__LS_WORDS; i++) {
		for (uint64_t b = w.w[i]; b; b &= b - 1) {
			unsigned slot = i * 64 + (unsigned)__builtin_ctzll(b);

			used[slot] = 0;
			reserved[slot] = 0;
		}
	}
	return ret;
}

/* ---- CANDIDATES and RANK (§13.3) ---- */

bool rsd__search_active_has(const struct active *a, uint32_t v, int slot)
{
	for (; a; a = a->prev)
		if (a->vidx == v && (slot < 0 || a->slot == (uint32_t)slot))
			return true;
	return false;
}

bool rsd__search_required(const struct search *x, uint32_t v, unsigned slot)
{
	for (size_t i = 0; i < x->req->nrequirements; i++)
		if (x->req_vidx[i] == v && rsd__loc_slot(x->req->requirements[i].location) == slot)
			return true;
	return false;
}

/* A copy of the value is arriving somewhere: a transfer reads or moves it. */
static bool value_in_transfer(const struct rsd_img_value *iv)
{
	for (uint32_t k = 0; k < iv->nmats; k++)
		if (iv->mats[k].arriving)
			return true;
	return false;
}

/*
 * Values whose image materialization at slot is unprotected, in
 * registration order; protected ones can never become candidates because
 * planning never removes them. Built once per slot and decide from the
 * location's member bitmap, so it costs the values present at slot, not
 * every registered value. A slot outside the location table holds none.
 */
static int build_base(struct search *x, unsigned slot)
{
	const struct rsd_img_loc *row = rsd__img_loc(x->img, rsd__slot_loc(slot));
	uint32_t *list = NULL, n = 0, cap = 0, *code;
	uint64_t v = 0, *charge;

	if (x->built[slot])
		return 0;
	while (row && rsd__img_loc_next(row, &v)) {
		const struct rsd_img_value *iv = rsd__iv(x->img, (uint32_t)v);

		/* A value with a copy arriving anywhere is being read or moved
		 * by a transfer in flight: none of its copies is a candidate
		 * (the entry would refuse it as busy or leaving). */
		if (iv && value_in_transfer(iv))
			iv = NULL;
		for (uint32_t k = 0; iv && !iv->discarded && k < iv->nmats; k++) {
			if (rsd__loc_slot(iv->mats[k].loc) != slot)
				continue;
			if (iv->mats[k].arriving ||
			    rsd__prot_any(rsd__view_mat_prot(x->view, iv, k)))
				break;
			if (n == cap) {
				uint32_t *nl = rsd__realloc(list, (cap = cap ? 2 * cap : 16) *
									  sizeof(*nl));

				if (!nl) {
					free(list);
					return x->err =
						       rsd__err(RSD_ENOMEM,
								"out of memory listing candidates");
				}
				list = nl;
			}
			list[n++] = (uint32_t)v;
			break;
		}
		v++;
	}
	charge = rsd__malloc((n ? n : 1) * sizeof(*charge));
	code = rsd__malloc((n ? n : 1) * sizeof(*code));
	if (!charge || !code) {
		free(list);
		free(charge);
		free(code);
		return x->err = rsd__err(RSD_ENOMEM, "out of memory listing candidates");
	}
	for (uint32_t i = 0; i < n; i++) {
		struct rsd__locset l = rsd__ps_base_locs(&x->sp, list[i]);

		charge[i] = rsd__search_charge(x, list[i]);
		/* a set of low slots is its own code (pstate.h); no table here */
		code[i] = !l.w[1] && !l.w[2] && l.w[0] < RSD__LS_TABLE ? (uint32_t)l.w[0] :
									 RSD__LS_UNKNOWN;
	}
	x->base_cands[slot] = list;
	x->base_charge[slot] = charge;
	x->base_code[slot] = code;
	x->nbase_cands[slot] = n;
	x->built[slot] = true;
	return 0;
}

int rsd__freeable(struct search *x, unsigned slot, uint64_t *out)
{
	uint64_t n = 0;

	if (build_base(x, slot))
		return x->err;
	for (uint32_t i = 0; i < x->nbase_cands[slot]; i++)
		n += x->base_charge[slot][i];
	*out = n;
	return 0;
}

/* Grow RANK scratch array x->field to n entries; ok false if that fails. */
#define SCRATCH_GROW(field)                                               \
	do {                                                              \
		void *p_ = rsd__realloc(x->field, n * sizeof(*x->field)); \
                                                                          \
		if (p_)                                                   \
			x->field = p_;                                    \
		else                                                      \
			ok = false;                                       \
	} while (0)

static int scratch_reserve(struct search *x, size_t n)
{
	bool ok = true;

	if (n <= x->ccap)
		return 0;
	n = n < 16 ? 16 : 2 * n;
	SCRATCH_GROW(cbuf);
	SCRATCH_GROW(cvidx);
	SCRATCH_GROW(cused);
	SCRATCH_GROW(creq);
	SCRATCH_GROW(chandle);
	SCRATCH_GROW(ccharge);
	SCRATCH_GROW(cbi);
	SCRATCH_GROW(cpos);
	if (!ok)
		return x->err = rsd__err(RSD_ENOMEM, "out of memory ranking candidates");
	x->ccap = n;
	return 0;
}

void rsd__candidate(const struct search *x, uint32_t v, unsigned slot,
		    struct rsd_eviction_candidate *c)
{
	const struct rsd_img_value *iv = rsd__iv(x->img, v);
	const struct rsd__meta *md = rsd__meta_find(x->c, iv->handle.id);

	memset(c, 0, sizeof(*c));
	c->handle = iv->handle;
	c->location = rsd__slot_loc(slot);
	c->charged_nbytes = iv->spec.storage_nbytes;
	c->registration_index = v;
	if (md) {
		c->has_last_access_epoch = md->has_epoch;
		c->last_access_epoch = md->epoch;
		c->metadata.priority = md->priority;
		c->metadata.stable_key = md->key;
	}
	if (x->has_sched)
		c->has_next_use = rsd__sched_next_use(x->c, md, x->sched_pos, &c->next_use);
}

/* Candidate k (cbuf[k], value cvidx[k]); keeps its handle and charge aside
 * in chandle[k] and ccharge[k], whatever the policy does to cbuf. */
static void fill_candidate(struct search *x, size_t k, unsigned slot)
{
	rsd__candidate(x, x->cvidx[k], slot, &x->cbuf[k]);
	x->chandle[k] = x->cbuf[k].handle;
	x->ccharge[k] = x->cbuf[k].charged_nbytes;
}

/* Find the input position of an ordered candidate (positions lo..hi). */
static long find_input(struct search *x, const struct rsd_eviction_candidate *c, size_t lo,
		       size_t hi, unsigned slot)
{
	if (!rsd_location_equal(c->location, rsd__slot_loc(slot)))
		return -1;
	/* Ids grow with registration order, so binary search first. */
	for (size_t a = lo, b = hi; a < b;) {
		size_t mid = a + (b - a) / 2;
		const struct rsd_handle *h = &x->chandle[mid];

		if (h->id == c->handle.id) {
			if (rsd_handle_equal(*h, c->handle))
				return (long)mid;
			break;
		}
		if (h->id < c->handle.id)
			a = mid + 1;
		else
			b = mid;
	}
	for (size_t k = lo; k < hi; k++)
		if (rsd_handle_equal(x->chandle[k], c->handle))
			return (long)k;
	return -1;
}

/* One policy call on cbuf[lo..hi), then the permutation check; the
 * ranked order goes to out[lo..hi). */
static int order_part(struct search *x, size_t lo, size_t hi, unsigned slot, struct ranked *out)
{
	const struct rsd_policy *p = x->pol;
	int err = p->ops->order_candidates(p->ctx, x->cbuf + lo, hi - lo);

	if (err) {
		if (err > 0 || rsd_last_error()->code != -err)
			err = rsd__err(err < 0 ? -err : RSD_EUSAGE,
				       "policy order_candidates failed with %d", err);
		return x->err = err;
	}
	memset(x->cused + lo, 0, hi - lo);
	for (size_t j = lo; j < hi; j++) {
		long k = find_input(x, &x->cbuf[j], lo, hi, slot);

		if (k < 0 || x->cused[k])
			return x->err = rsd__err(RSD_EUSAGE,
						 "policy must return every candidate exactly once");
		x->cused[k] = 1;
		out[j].vidx = x->cvidx[k];
		out[j].charged = x->ccharge[k];
		out[j].dpos = x->cpos[k] >> 1;
		out[j].found = x->cpos[k] & 1;
		out[j].bcode = RSD__LS_UNKNOWN;
	}
	return 0;
}

/*
 * CANDIDATES(S, X, blocked): the merge of the image's list at X with S's
 * delta, both in registration order, into cvidx[] (with cbi[] and cpos[]).
 */
struct cand_merge {
	struct search *x;
	unsigned X;
	const struct active *act;
	const uint32_t *base;
	uint32_t nb, bi, di, n;
	bool projected;
};

static void cand_add(struct cand_merge *m, uint32_t v, uint32_t at, uint32_t pos)
{
	if (!m->act || !rsd__search_active_has(m->act, v, -1)) {
		m->x->cbi[m->n] = at;
		m->x->cpos[m->n] = pos;
		m->x->cvidx[m->n++] = v;
	}
}

/* Every image candidate below v: none has a delta entry. */
static void cand_base_upto(struct cand_merge *m, uint64_t v)
{
	for (; m->bi < m->nb && m->base[m->bi] < v; m->bi++)
		cand_add(m, m->base[m->bi], m->bi, m->di << 1); /* one would go at di */
}

static bool cand_delta(void *ctx, const struct rsd__vdelta *d)
{
	struct cand_merge *m = ctx;
	struct rsd__pspace *sp = &m->x->sp;
	uint32_t pos;

	cand_base_upto(m, d->vidx);
	pos = m->di++ << 1 | 1;
	if (m->bi < m->nb && m->base[m->bi] == d->vidx) {
		if (rsd__ps_set_has(sp, d, m->X))
			cand_add(m, d->vidx, m->bi, pos);
		m->bi++;
	} else {
		struct rsd__locset bl = rsd__ps_base_locs(sp, d->vidx);

		/* projected here by planning (a protected original is not) */
		if (rsd__ps_set_has(sp, d, m->X) && !ls_has(&bl, m->X)) {
			m->projected = true;
			cand_add(m, d->vidx, UINT32_MAX, pos);
		}
	}
	return true;
}

/* Blocked being the handles of act; the ranked list is taken from the
 * frames' arena (its caller is the top frame). */
int rsd__search_rank(struct search *x, const struct rsd__pstate *S, unsigned X,
		     const struct active *act, struct ranked **out, uint32_t *nout, bool *cached)
{
	struct cand_merge m = { x, X, act, NULL, 0, 0, 0, 0, false };
	uint32_t n, nord = 0;
	bool projected;
	struct ranked *r;

	if (build_base(x, X))
		return x->err;
	m.base = x->base_cands[X];
	m.nb = x->nbase_cands[X];
	if (scratch_reserve(x, (size_t)m.nb + S->ndelta + 1))
		return x->err;
	rsd__ps_walk(S, cand_delta, &m);
	cand_base_upto(&m, UINT64_MAX);
	n = m.n;
	projected = m.projected;
	r = rsd__arena_alloc(&x->stk, (n ? n : 1) * sizeof(*r));
	if (!r)
		return x->err = -RSD_ENOMEM; /* recorded by the arena */
	if (cached)
		*cached = x->cmp && !projected;
	if (x->cmp && !projected) {
		if (rsd__order_cached(x, X, n, r))
			return x->err;
		*out = r;
		*nout = n;
		return 0;
	}
	/* Ordinary candidates first, then required endpoints, each stable:
	 * required ones are parked in creq, then appended. */
	{
		uint32_t nreq = 0;

		for (uint32_t k = 0; k < n; k++) {
			uint32_t v = x->cvidx[k], pos = x->cpos[k];

			if (rsd__search_required(x, v, X)) {
				x->cbi[nreq] = pos; /* cbi is free on this path */
				x->creq[nreq++] = v;
			} else {
				x->cpos[nord] = pos;
				x->cvidx[nord++] = v;
			}
		}
		memcpy(x->cvidx + nord, x->creq, nreq * sizeof(*x->creq));
		memcpy(x->cpos + nord, x->cbi, nreq * sizeof(*x->cbi));
	}
	for (uint32_t k = 0; k < n; k++)
		fill_candidate(x, k, X);
	/* Two policy calls, even when one side is empty (§13.3). */
	if (order_part(x, 0, nord, X, r) || order_part(x, nord, n, X, r))
		return x->err;
	*out = r;
	*nout = n;
	return 0;
}
