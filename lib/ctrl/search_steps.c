// SPDX-License-Identifier: MIT
/*
 * Building blocks of the controller search (reference.md §13.2-13.4):
 * SIMULATE, CANDIDATES + RANK, COUNT and the memo keys built from SIG(S).
 * The generator machine that strings them together is in run.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Would n more bytes at slot exceed its budget? */
static bool over(const struct search *x, uint64_t used, uint64_t reserved, unsigned slot,
		 uint64_t n)
{
	return x->has_budget[slot] && sat_add(sat_add(used, reserved), n) > x->budget[slot];
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
		sv->locs = rsd__ps_locs(&x->bc, S, sv->vidx);
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
	uint64_t need = sat_add(sat_add(used[slot], reserved[slot]), n);

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
 * 0: feasible, enter actions in x->enter; 1: *sh describes the shortfall
 * (with x->precheck: one that evictions cannot cover, see stop_at()).
 */
int rsd__search_simulate(struct search *x, const struct rsd__pstate *S, struct shortfall *sh)
{
	const struct rsd_request *r = x->req;
	uint64_t used[RSD_NSLOTS], reserved[RSD_NSLOTS];

	memset(used, 0, sizeof(used));
	memset(reserved, 0, sizeof(reserved));
	for (uint32_t i = 0; i < S->nacct; i++) {
		used[S->acct[i].slot] = S->acct[i].used;
		reserved[S->acct[i].slot] = S->acct[i].reserved;
	}
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
		}
		if (temp && src == D)
			reserved[src] -= C; /* load and install share one charge */
		if (over(x, used[D], reserved[D], D, C)) {
			if (stop_at(x, sh, D, C, used, reserved, ST_MATERIALIZE, qi))
				return 1;
		}
		used[D] = sat_add(used[D], C);
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
			}
		} else {
			a->kind = RSD_ACT_ENSURE;
		}
		x->nenter++;
	}
	return 0;
}

/* ---- CANDIDATES and RANK (§13.3) ---- */

bool rsd__search_active_has(const struct active *a, uint32_t v, int slot)
{
	for (; a; a = a->prev)
		if (a->vidx == v && (slot < 0 || a->slot == (uint32_t)slot))
			return true;
	return false;
}

static bool is_required(const struct search *x, uint32_t v, unsigned slot)
{
	for (size_t i = 0; i < x->req->nrequirements; i++)
		if (x->req_vidx[i] == v && rsd__loc_slot(x->req->requirements[i].location) == slot)
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
	uint32_t *list = NULL, n = 0, cap = 0;
	uint64_t v = 0;

	if (x->built[slot])
		return 0;
	while (row && rsd__img_loc_next(row, &v)) {
		const struct rsd_img_value *iv = rsd__iv(x->img, (uint32_t)v);

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
	x->base_cands[slot] = list;
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
		n += rsd__search_charge(x, x->base_cands[slot][i]);
	*out = n;
	return 0;
}

static int scratch_reserve(struct search *x, size_t n)
{
	void *a, *b, *c, *d, *e, *f;

	if (n <= x->ccap)
		return 0;
	n = n < 16 ? 16 : 2 * n;
	a = rsd__realloc(x->cbuf, n * sizeof(*x->cbuf));
	if (a)
		x->cbuf = a;
	b = rsd__realloc(x->cvidx, n * sizeof(*x->cvidx));
	if (b)
		x->cvidx = b;
	c = rsd__realloc(x->cused, n);
	if (c)
		x->cused = c;
	d = rsd__realloc(x->creq, n * sizeof(*x->creq));
	if (d)
		x->creq = d;
	e = rsd__realloc(x->chandle, n * sizeof(*x->chandle));
	if (e)
		x->chandle = e;
	f = rsd__realloc(x->ccharge, n * sizeof(*x->ccharge));
	if (f)
		x->ccharge = f;
	if (!a || !b || !c || !d || !e || !f)
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
	}
	return 0;
}

/* RANK(CANDIDATES(S, X, blocked)), blocked being the handles of act. */
int rsd__search_rank(struct search *x, const struct rsd__pstate *S, unsigned X, const struct active *act,
	      struct ranked **out, uint32_t *nout)
{
	uint32_t nb, bi = 0, di = 0, n = 0, nord = 0;
	const uint32_t *base;
	bool projected = false;
	struct ranked *r;

	if (build_base(x, X))
		return x->err;
	base = x->base_cands[X];
	nb = x->nbase_cands[X];
	if (scratch_reserve(x, (size_t)nb + S->ndelta + 1))
		return x->err;
	/* Merge the image list with the delta, both in registration order. */
	while (bi < nb || di < S->ndelta) {
		const struct rsd__vdelta *d = di < S->ndelta ? &S->delta[di] : NULL;
		uint32_t v;
		bool cand;

		if (bi < nb && (!d || base[bi] < d->vidx)) {
			v = base[bi++];
			cand = true;
		} else if (bi < nb && base[bi] == d->vidx) {
			v = base[bi++];
			di++;
			cand = ls_has(&d->locs, X);
		} else {
			/*
			 * d is not NULL here: without a delta entry left, bi < nb
			 * (loop condition) and the first branch was taken. The
			 * analyzer assumes S->delta NULL with ndelta > 0.
			 */
			/* NOLINTNEXTLINE(clang-analyzer-core.NullDereference) */
			struct rsd__locset bl = rsd__ps_base_locs(&x->bc, d->vidx);

			v = d->vidx;
			di++;
			/* projected here by planning (a protected original is not) */
			cand = ls_has(&d->locs, X) && !ls_has(&bl, X);
			projected |= cand;
		}
		if (cand && !rsd__search_active_has(act, v, -1))
			x->cvidx[n++] = v;
	}
	/* Ordinary candidates first, then required endpoints, each stable:
	 * required ones are parked in cused-marked order, then appended. */
	{
		uint32_t nreq = 0;

		for (uint32_t k = 0; k < n; k++) {
			uint32_t v = x->cvidx[k];

			if (is_required(x, v, X))
				x->creq[nreq++] = v;
			else
				x->cvidx[nord++] = v;
		}
		memcpy(x->cvidx + nord, x->creq, nreq * sizeof(*x->creq));
	}
	r = rsd__malloc((n ? n : 1) * sizeof(*r));
	if (!r)
		return x->err = rsd__err(RSD_ENOMEM, "out of memory ranking candidates");
	if (x->cmp && !projected) {
		if (rsd__order_cached(x, X, nord, n, r)) {
			free(r);
			return x->err;
		}
		*out = r;
		*nout = n;
		return 0;
	}
	for (uint32_t k = 0; k < n; k++)
		fill_candidate(x, k, X);
	/* Two policy calls, even when one side is empty (§13.3). */
	if (order_part(x, 0, nord, X, r) || order_part(x, nord, n, X, r)) {
		free(r);
		return x->err;
	}
	*out = r;
	*nout = n;
	return 0;
}

/* ---- memo keys: SIG(S) (§13.4) plus the objective's parameters ---- */

/* Room for n more key bytes; the key so far is kept. */
static int key_reserve(struct search *x, size_t n)
{
	if (x->keylen + n > x->keycap) {
		size_t cap = 2 * (x->keylen + n) + 64;
		unsigned char *k = rsd__realloc(x->key, cap);

		if (!k)
			return x->err = rsd__err(RSD_ENOMEM, "out of memory building a search key");
		x->key = k;
		x->keycap = cap;
	}
	return 0;
}

static int key_put(struct search *x, const void *p, size_t n)
{
	if (key_reserve(x, n))
		return x->err;
	memcpy(x->key + x->keylen, p, n);
	x->keylen += n;
	return 0;
}

/* Append a field of a reserved key (no capacity check). */
#define KEY_PUT(q, v) (memcpy((q), &(v), sizeof(v)), (q) += sizeof(v))

/*
 * SIG(S): the planned locations of every value, then (name, used, reserved)
 * of every location in the maps, both in canonical order. Values are
 * serialized as their normalized delta from the image, which is equal
 * for two states of one search exactly when their location sets are.
 * Written in one pass into a key reserved once.
 */
static int key_serialize(struct search *x, char tag, const struct rsd__pstate *S)
{
	size_t n = 1 + 2 * sizeof(uint32_t) +
		   S->ndelta * (sizeof(S->delta->vidx) + sizeof(S->delta->locs)) +
		   S->nacct * (sizeof(S->acct->slot) + 2 * sizeof(uint64_t));
	unsigned char *q;

	x->keylen = 0;
	if (key_reserve(x, n))
		return x->err;
	q = x->key;
	*q++ = (unsigned char)tag;
	KEY_PUT(q, S->ndelta);
	for (uint32_t i = 0; i < S->ndelta; i++) {
		KEY_PUT(q, S->delta[i].vidx);
		KEY_PUT(q, S->delta[i].locs);
	}
	KEY_PUT(q, S->nacct);
	for (uint32_t i = 0; i < S->nacct; i++) {
		KEY_PUT(q, S->acct[i].slot);
		KEY_PUT(q, S->acct[i].used);
		KEY_PUT(q, S->acct[i].reserved);
	}
	x->keylen = (size_t)(q - x->key);
	return 0;
}

/*
 * The request key of S: its hash at once, from the state's running hash
 * (a function of SIG(S), pstate.h); its bytes when rsd__key_build() asks.
 */
int rsd__search_key_sig(struct search *x, char tag, const struct rsd__pstate *S)
{
	x->keyhash = rsd__mix64(S->hash ^ (uint64_t)(unsigned char)tag ^
				((uint64_t)S->ndelta << 8) ^ ((uint64_t)S->nacct << 40));
	x->keyS = S;
	x->key_built = false;
	return 0;
}

int rsd__key_build(struct search *x)
{
	if (x->key_built)
		return 0;
	if (key_serialize(x, 'R', x->keyS))
		return x->err;
	x->key_built = true;
	return 0;
}

int rsd__search_key_capacity(struct search *x, const struct rsd__pstate *S, unsigned X, uint64_t amount,
		      const struct active *act)
{
	uint32_t pairs[2 * 64], *p = pairs, n = 0, cap = 64;
	uint32_t slot = X;
	int err;

	if (key_serialize(x, 'C', S) || key_put(x, &slot, sizeof(slot)) ||
	    key_put(x, &amount, sizeof(amount)))
		return x->err;
	/* active pairs (and so blocked handles), sorted by registration index */
	for (const struct active *a = act; a; a = a->prev) {
		size_t k;

		if (n == cap) {
			uint32_t *np = rsd__malloc(4 * (size_t)cap * sizeof(*np));

			if (!np)
				return x->err = rsd__err(RSD_ENOMEM,
							 "out of memory building a search key");
			memcpy(np, p, 2 * (size_t)n * sizeof(*np));
			if (p != pairs)
				free(p);
			p = np;
			cap *= 2;
		}
		for (k = n; k && p[2 * (k - 1)] > a->vidx; k--) {
			p[2 * k] = p[2 * (k - 1)];
			p[2 * k + 1] = p[2 * (k - 1) + 1];
		}
		p[2 * k] = a->vidx;
		p[2 * k + 1] = a->slot;
		n++;
	}
	err = key_put(x, &n, sizeof(n)) || key_put(x, p, 2 * (size_t)n * sizeof(*p));
	if (p != pairs)
		free(p);
	if (err)
		return x->err;
	x->keyhash = rsd__memo_hash(x->key, x->keylen);
	x->key_built = true;
	return 0;
}
