// SPDX-License-Identifier: MIT
/*
 * The controller search machine (reference.md §13.3-13.4).
 *
 * SEARCH, RECLAIM and CAPACITY are generators: each produces successor
 * states one at a time and does the work for the next successor (including
 * its COUNT) only after its consumer rejected the previous one. Two-way
 * fallback tiers make SEARCH nest up to search_state_limit levels (example
 * J), so the generators are not native calls but frames on one
 * heap-allocated stack. A loop passes messages between a frame and the
 * frame that created it (its consumer):
 *
 *   START   a frame begins               YIELD  a producer hands up a state
 *   RESUME  the consumer wants the next  DONE   a producer is exhausted (popped)
 *   FAIL    a SEARCH level failed, with its PlanningFailure text (popped)
 *
 * A consumer finishes whatever it pushed for one successor before asking
 * its producer for the next; the producer passes RESUME on to its own
 * suspended producer, and so on up to the top of the stack. A producer is
 * exhausted only while it runs with nothing above it, so the frame popped
 * is always the top. Success of any SEARCH level ends the whole search (every
 * producer above it is abandoned, none records a memo entry); reaching the
 * state limit aborts it from any depth.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search.h"

enum act {
	A_PUSH,
	A_YIELD,
	A_DONE,
	A_FAIL,
	A_RESUME,
	A_SUCCESS,
	A_ERROR
};
enum ev {
	EV_START,
	EV_RESUME,
	EV_YIELD,
	EV_DONE,
	EV_FAIL
};
enum pc {
	PC_NONE,
	PC_AFTER_DROP,
	PC_AFTER_MOVE,
	PC_FIT,
	PC_FORWARD,
	PC_CHECKED, /* SEARCH: its consumer found its state in no memo */
	PC_SPILL    /* RECLAIM: its consumer rejected the drop already; spill */
};

struct msg {
	enum ev ev;
	int32_t from;
	struct rsd__pstate *st; /* EV_YIELD: ownership passes to the receiver */
	char *note;		/* EV_FAIL: ownership passes to the receiver */
};

/* What a step asks the driver to do next. */
struct out {
	struct rsd__pstate *yield;
	char *note;
	int32_t resume;
	struct rsd__pstate *final; /* A_SUCCESS */
};

#define EXHAUSTED "equivalent ordered-request state is already exhausted"
#define MSG_ROOM (sizeof(((struct rsd_error *)0)->message) - 1)

/* Index of the new frame, or the negative error code (also left in x->err). */
static int32_t push(struct search *x, enum ftype type, int32_t parent)
{
	struct frame *f;

	if (x->nfr == x->capfr) {
		size_t cap = x->capfr ? 2 * x->capfr : 64;
		struct frame *fr = rsd__realloc(x->fr, cap * sizeof(*fr));

		if (!fr) {
			x->err = rsd__err(RSD_ENOMEM, "out of memory: search stack of %zu frames",
					  x->nfr);
			return x->err;
		}
		x->fr = fr;
		x->capfr = cap;
	}
	f = &x->fr[x->nfr];
	memset(f, 0, sizeof(*f));
	f->type = (uint8_t)type;
	f->parent = parent;
	f->child = -1;
	f->sub = -1;
	f->mark = rsd__arena_mark(&x->stk);
	return (int32_t)x->nfr++;
}

/*
 * Pop the top frame: its state goes back to the slab, and what it took
 * from the frames' stack arena (candidates, destinations, its active
 * pair) is released: a frame takes scratch only while it is the top one.
 */
static void frame_pop(struct search *x)
{
	struct frame *f = &x->fr[--x->nfr];

	if (f->type != F_RECLAIM)
		rsd__ps_free(&x->sp, f->S);
	if (f->type == F_SEARCH)
		free(f->u.s.notes);
	rsd__arena_release(&x->stk, f->mark);
}

/* Remember x->key as failed; a failure becomes the search's (x->err). */
static int memo_add(struct search *x, struct rsd__memo *m)
{
	int err = rsd__key_build(x);

	if (!err)
		err = rsd__memo_add(m, x->key, x->keylen, x->keyhash);
	if (err)
		x->err = err;
	return err;
}

/* 1: x->key failed before; 0: not; < 0: error. Bytes only on a hash match. */
static int memo_lookup(struct search *x, const struct rsd__memo *m)
{
	if (!rsd__memo_has_hash(m, x->keyhash))
		return 0;
	if (rsd__key_build(x))
		return x->err;
	return rsd__memo_has(m, x->key, x->keylen, x->keyhash);
}

static enum act nomem(struct search *x, const char *what)
{
	x->err = rsd__err(RSD_ENOMEM, "out of memory during the residency search (%s)", what);
	return A_ERROR;
}

/* A RECLAIM for the ci-th ranked candidate of frame i, at slot src,
 * starting at pc (PC_NONE: from the drop). */
static enum act push_reclaim(struct search *x, int32_t i, unsigned src, const struct active *in,
			     enum pc pc)
{
	int32_t j = push(x, F_RECLAIM, i);
	struct frame *f, *g;

	if (j < 0)
		return A_ERROR;
	f = &x->fr[i];
	g = &x->fr[j];
	g->pc = (uint8_t)pc;
	g->S = f->S;
	g->u.r.vidx = f->cands[f->ci].vidx;
	g->u.r.charged = f->cands[f->ci].charged;
	g->u.r.rank = f->ci;
	g->u.r.src = src;
	g->u.r.in = in;
	f->child = j;
	return A_PUSH;
}

/* ---- SEARCH ---- */

/*
 * A SEARCH level whose state is its parent's with the parent's current
 * candidate dropped or moved to another location (one reclaim action
 * more, nothing reclaimed for the move's room), short at the same
 * location, ranks exactly the parent's candidates without that one, in
 * the same order, when the parent's came from the shipped policy's order
 * (order.c): the action changes no other value, and that order is fixed
 * for the search. Take them from there instead of ranking again; f->cands
 * stays NULL when this does not apply.
 *
 * A search that succeeds takes its first candidate at every level: the
 * list is then the parent's from its second entry on, shared, so that a
 * chain of N reclaims ranks once instead of N times (each ranking and
 * each copy cost the candidates, N^2 in all).
 */
static int search_derive(struct search *x, struct frame *f)
{
	const struct frame *p = f->parent >= 0 ? &x->fr[f->parent] : NULL;
	struct ranked *r;
	uint32_t n = 0;

	if (!f->u.s.derive || !p || !p->u.s.cached || p->u.s.sh.slot != f->u.s.sh.slot)
		return 0;
	if (p->ci == 0) {
		/* The parent's frame outlives this one, and no one writes
		 * a ranked list once made. */
		f->cands = p->cands + 1;
		f->ncands = p->ncands - 1;
		f->u.s.cached = true;
		return 0;
	}
	r = rsd__arena_alloc(&x->stk, (p->ncands > 1 ? p->ncands - 1 : 1) * sizeof(*r));
	if (!r)
		return x->err = -RSD_ENOMEM; /* recorded by the arena */
	for (uint32_t k = 0; k < p->ncands; k++)
		if (k != p->ci)
			r[n++] = p->cands[k];
	f->cands = r;
	f->ncands = n;
	f->u.s.cached = true;
	return 0;
}

/* A failure note; NULL is an empty one, when room is 0. */
static enum act search_fail_note(struct search *x, struct frame *f, struct out *o, const char *s)
{
	rsd__search_room(x, f);
	if (!f->u.s.room)
		return A_FAIL;
	o->note = s ? rsd__strdup(s) : rsd__search_fail_text(x, f);
	return o->note ? A_FAIL : nomem(x, "failure text");
}

/*
 * RECLAIM(S, cand) of a SEARCH candidate first produces the drop state
 * when there is one, and a drop state that failed before fails at once,
 * uncounted, with the note below (step_search, EV_YIELD). In an
 * exhausting search nearly every successor is one (the other orders of
 * the same drops), so search_next() asks the memo about the drop state
 * without a frame or a state (search_keys.c). It describes candidates
 * LOOK_AHEAD turns ahead (struct drop_ahead), so that their memo slots
 * are already loading when their turn comes, and starts loading the key
 * the next lookup will compare: the failed-request memo is far larger
 * than the caches, and each lookup would otherwise wait for memory twice.
 */
#define LOOK_AHEAD 7 /* plus one: a power of two */

static int search_look_ahead(struct search *x, struct frame *f)
{
	struct drop_ahead *da = f->u.s.da;
	uint32_t end = f->ci + LOOK_AHEAD + 1 < f->ncands ? f->ci + LOOK_AHEAD + 1 : f->ncands;
	unsigned src = f->u.s.sh.slot;

	for (; da->ndv < end; da->ndv++) {
		const struct ranked *c = &f->cands[da->ndv];

		if (!da->dstate || da->dC != c->charged) {
			bool absent = rsd__ps_edit_used(f->S, src, c->charged, &da->du);

			da->dstate = absent ? 2 : 1;
			da->dC = c->charged;
		}
		if (rsd__search_drop_view(x, f->S, c, src, da->dstate == 1 ? &da->du : NULL,
					  &da->dv[da->ndv & da->mask]))
			return x->err;
	}
	if (f->ci + 1 < da->ndv)
		rsd__search_drop_prefetch(x, &da->dv[(f->ci + 1) & da->mask]);
	return 0;
}

/* The views ahead of a SEARCH level with n candidates, in the frames' arena. */
static struct drop_ahead *drop_ahead_new(struct search *x, uint32_t n)
{
	uint32_t ring = 1;
	struct drop_ahead *da;

	while (ring < n && ring < LOOK_AHEAD + 1)
		ring *= 2;
	da = rsd__arena_alloc(&x->stk, sizeof(*da) + ring * sizeof(da->dv[0]));
	if (!da) {
		x->err = -RSD_ENOMEM; /* recorded by the arena */
		return NULL;
	}
	da->dstate = 0;
	da->ndv = 0;
	da->mask = ring - 1;
	return da;
}

static enum act search_next(struct search *x, int32_t i, struct out *o)
{
	struct frame *f = &x->fr[i];
	const struct drop_view *dv;

	for (;; f->ci++) {
		if (f->ci == f->ncands) {
			if (rsd__search_key_sig(x, 'R', f->S) || memo_add(x, &x->failed_req))
				return A_ERROR;
			return search_fail_note(x, f, o, NULL);
		}
		f->flag = false;
		if (search_look_ahead(x, f))
			return A_ERROR;
		dv = &f->u.s.da->dv[f->ci & f->u.s.da->mask];
		if (dv->state != DV_DROP || !rsd__search_drop_failed(x, f->S, dv)) {
			/* RECLAIM yields the drop state first when there is one */
			f->u.s.dclear = dv->state == DV_DROP;
			return push_reclaim(x, i, f->u.s.sh.slot, NULL, PC_NONE);
		}
		/* the drop was a successor, and it was rejected */
		f->flag = true;
		rsd__search_note(x, f, "candidate %u: %s", f->cands[f->ci].vidx, EXHAUSTED);
		if (!dv->others)
			return push_reclaim(x, i, f->u.s.sh.slot, NULL, PC_SPILL);
		/* RECLAIM would now be done: a value with another replica is
		 * never spilled, and the drop produced a successor */
	}
}

/* Whether T is S with RECLAIM frame r's value dropped at, or moved from,
 * its source, and no other reclaim action. */
static bool reclaimed_one(const struct frame *r, const struct rsd__pstate *S,
			  const struct rsd__pstate *T)
{
	if (T->nreclaim != S->nreclaim + 1)
		return false;
	return r->pc == PC_AFTER_DROP ||
	       (r->pc == PC_AFTER_MOVE && r->u.r.dests[r->u.r.di] != r->u.r.src);
}

static enum act step_search(struct search *x, int32_t i, struct msg *m, struct out *o)
{
	struct frame *f = &x->fr[i];
	const struct rsd__ps_bytes *a;
	int32_t j;
	int err;

	switch (m->ev) {
	case EV_START:
		/* a nested level's state was looked up by its consumer */
		if (f->pc != PC_CHECKED) {
			if (rsd__search_key_sig(x, 'R', f->S))
				return A_ERROR;
			err = memo_lookup(x, &x->failed_req);
			if (err < 0)
				return A_ERROR;
			if (err)
				return search_fail_note(x, f, o, EXHAUSTED);
		}
		if (rsd__search_count(x, "ordered request", -1))
			return A_ERROR;
		err = rsd__search_simulate(x, f->S, &f->u.s.sh);
		if (err < 0) {
			x->err = err;
			return A_ERROR;
		}
		if (!err) {
			/* SEARCH returns S itself, not the simulation's scratch */
			o->final = f->S;
			f->S = NULL;
			return A_SUCCESS;
		}
		a = rsd__ps_acct(f->S, f->u.s.sh.slot);
		f->u.s.budget = x->budget[f->u.s.sh.slot];
		f->u.s.used = a ? a->used : 0;
		f->u.s.reserved = a ? a->reserved : 0;
		if (f->parent < 0) {
			x->has_root_sh = true;
			x->root_sh = f->u.s.sh;
			x->root_used = f->u.s.used;
			x->root_reserved = f->u.s.reserved;
		}
		if (search_derive(x, f) ||
		    (!f->cands && rsd__search_rank(x, f->S, f->u.s.sh.slot, NULL, &f->cands,
						   &f->ncands, &f->u.s.cached)))
			return A_ERROR;
		f->u.s.da = drop_ahead_new(x, f->ncands);
		if (!f->u.s.da)
			return A_ERROR;
		f->ci = 0;
		return search_next(x, i, o);
	case EV_YIELD: /* a successor T from the RECLAIM producer: try SEARCH(T) */
		f->flag = true;
		/*
		 * SEARCH(T) of a state that failed before fails at once,
		 * uncounted, with the note below: say so here without a frame
		 * (most successors of an exhausting search are such states).
		 */
		if (f->u.s.dclear)
			err = 0; /* the drop state search_next() found in no memo */
		else if (rsd__search_key_sig(x, 'R', m->st))
			err = x->err;
		else
			err = memo_lookup(x, &x->failed_req);
		f->u.s.dclear = false;
		if (err) {
			rsd__ps_free(&x->sp, m->st);
			if (err < 0)
				return A_ERROR;
			rsd__search_note(x, f, "candidate %u: %s", f->cands[f->ci].vidx, EXHAUSTED);
			o->resume = f->child;
			return A_RESUME;
		}
		j = push(x, F_SEARCH, i);
		if (j < 0) {
			rsd__ps_free(&x->sp, m->st);
			return A_ERROR;
		}
		x->fr[j].S = m->st;
		x->fr[j].pc = PC_CHECKED;
		/* the RECLAIM's drop, or its move that reclaimed nothing for
		 * room: this level may take over our candidates */
		x->fr[j].u.s.derive = reclaimed_one(&x->fr[m->from], x->fr[i].S, m->st);
		return A_PUSH;
	case EV_FAIL:
		rsd__search_note(x, f, "candidate %u: %s", f->cands[f->ci].vidx,
				 m->note ? m->note : "");
		free(m->note);
		o->resume = f->child;
		return A_RESUME;
	case EV_DONE:
		f->u.s.dclear = false;
		if (!f->flag)
			rsd__search_note(x, f, "candidate %u: no legal drop or fallback transition",
					 f->cands[f->ci].vidx);
		f->ci++;
		return search_next(x, i, o);
	default:
		break;
	}
	x->err = rsd__err(RSD_EUSAGE, "internal search inconsistency (SEARCH event %d)", m->ev);
	return A_ERROR;
}

/* ---- RECLAIM ---- */

static int reclaim_dests(struct search *x, struct frame *f)
{
	struct rsd_location buf[RSD_NSLOTS];
	uint8_t dests[RSD_NSLOTS]; /* each slot at most once (seen) */
	struct rsd__locset seen;
	const struct rsd_policy *p = x->pol;
	uint32_t v = f->u.r.vidx, src = f->u.r.src, n = 0;
	size_t k;

	memset(&seen, 0, sizeof(seen));
	/* requested endpoints of this handle, canonical order, then fallbacks */
	for (size_t i = 0; i < x->req->nrequirements; i++) {
		unsigned s = rsd__loc_slot(x->req->requirements[i].location);

		if (x->req_vidx[i] == v && s != src)
			ls_add(&seen, s);
	}
	for (unsigned i = 0; i < RSD__LS_WORDS; i++)
		for (uint64_t w = seen.w[i]; w; w &= w - 1)
			dests[n++] = (uint8_t)(i * 64 + (unsigned)__builtin_ctzll(w));
	if (p->ops->spill_locations) {
		struct rsd_eviction_candidate cand;

		rsd__candidate(x, v, src, &cand);
		k = p->ops->spill_locations(p->ctx, &cand, buf, RSD_NSLOTS);
	} else {
		k = p->ops->fallback_locations(p->ctx, rsd__slot_loc(src), buf, RSD_NSLOTS);
	}
	if (k > RSD_NSLOTS)
		k = RSD_NSLOTS;
	for (size_t i = 0; i < k; i++) {
		unsigned s;

		if (!rsd_location_valid(buf[i]))
			return x->err = rsd__err(RSD_ETYPE,
						 "policy %s returned an invalid location",
						 p->ops->spill_locations ? "spill_locations" :
									   "fallback_locations");
		s = rsd__loc_slot(buf[i]);
		/* A lost device's location is no spill destination. */
		if (!ls_has(&seen, s) && !x->failed[s]) {
			ls_add(&seen, s);
			dests[n++] = (uint8_t)s;
		}
	}
	/* kept for the frame's life: deep spill loops hold one per level */
	f->u.r.dests = rsd__arena_alloc(&x->stk, n ? n : 1);
	if (!f->u.r.dests)
		return x->err = -RSD_ENOMEM; /* recorded by the arena */
	memcpy(f->u.r.dests, dests, n);
	f->u.r.ndests = n;
	f->u.r.di = 0;
	return 0;
}

static enum act reclaim_next(struct search *x, int32_t i)
{
	struct frame *f = &x->fr[i];
	uint32_t v = f->u.r.vidx;
	struct rsd__locset L;
	struct rsd__pstate *T;
	unsigned d;
	int32_t j;

	if (f->u.r.di == f->u.r.ndests)
		return A_DONE;
	d = f->u.r.dests[f->u.r.di];
	L = rsd__ps_locs(&x->sp, f->S, v);
	if (!f->u.r.mine) {
		f->u.r.mine = rsd__arena_alloc(&x->stk, sizeof(*f->u.r.mine));
		if (!f->u.r.mine) {
			x->err = -RSD_ENOMEM; /* recorded by the arena */
			return A_ERROR;
		}
		f->u.r.mine->prev = f->u.r.in;
		f->u.r.mine->vidx = v;
		f->u.r.mine->slot = f->u.r.src;
	}
	T = rsd__ps_copy(&x->sp, f->S);
	if (!T)
		return nomem(x, "state copy");
	j = push(x, F_CAPACITY, i);
	if (j < 0) {
		rsd__ps_free(&x->sp, T);
		return A_ERROR;
	}
	f = &x->fr[i];
	x->fr[j].S = T;
	x->fr[j].u.k.x = d;
	x->fr[j].u.k.amount = ls_has(&L, d) ? 0 : rsd__search_charge(x, v);
	x->fr[j].u.k.act = f->u.r.mine;
	f->child = j;
	return A_PUSH;
}

/*
 * The reclaim action of RECLAIM frame f and its eviction record: a drop at
 * its source (d < 0) or a move from there to slot d.
 */
static void reclaim_record(const struct search *x, const struct frame *f, int d,
			   enum rsd__reason reason, struct rsd_action *a, struct rsd__evict *ev)
{
	struct rsd_location src = rsd__slot_loc(f->u.r.src);

	memset(a, 0, sizeof(*a));
	a->handle = rsd__iv(x->img, f->u.r.vidx)->handle;
	a->kind = d < 0 ? RSD_ACT_DROP : RSD_ACT_MOVE;
	a->location = d < 0 ? src : rsd__slot_loc((unsigned)d);
	a->has_from = d >= 0;
	if (d >= 0)
		a->from = src;
	ev->rank = f->u.r.rank;
	ev->released = src;
	ev->nbytes = f->u.r.charged;
	ev->reason = reason;
	ev->moved_to = d < 0 ? src : a->location;
}

static enum act step_reclaim(struct search *x, int32_t i, struct msg *m, struct out *o)
{
	struct frame *f = &x->fr[i];
	uint32_t v = f->u.r.vidx, src = f->u.r.src;
	struct rsd__evict ev;
	struct rsd_action a;
	struct rsd__locset L;
	struct rsd__pstate *T, *U;
	uint64_t C;
	unsigned d;

	switch (m->ev) {
	case EV_START:
		if (rsd__search_active_has(f->u.r.in, v, (int)src))
			return A_DONE;
		if (f->pc == PC_SPILL) {
			/* the consumer answered the drop (search_next) */
			f->flag = false;
			break;
		}
		L = rsd__ps_locs(&x->sp, f->S, v);
		ls_del(&L, src);
		f->flag = !ls_empty(&L); /* another replica preserves the value */
		if (f->flag || rsd__iv(x->img, v)->has_source) {
			T = rsd__ps_copy(&x->sp, f->S);
			if (!T)
				return nomem(x, "state copy");
			reclaim_record(x, f, -1, f->flag ? RSD__R_OTHER_REPLICA : RSD__R_SOURCE, &a,
				       &ev);
			if (!rsd__ps_append(&x->sp, T, &a, &ev) ||
			    !(U = rsd__ps_set_locs(&x->sp, T, v, &L)))
				goto nomem_T;
			T = U;
			if (!(U = rsd__ps_used(&x->sp, T, src, 0, rsd__search_charge(x, v))))
				goto nomem_T;
			T = U;
			f->pc = PC_AFTER_DROP;
			o->yield = T;
			return A_YIELD;
		}
		break;
	case EV_RESUME:
		if (f->pc == PC_AFTER_MOVE) {
			o->resume = f->child;
			return A_RESUME;
		}
		/* after the drop: never spill a value that has another replica */
		if (f->flag)
			return A_DONE;
		break;
	case EV_YIELD: /* Cst from CAPACITY(copy(S), d, ...) */
		T = m->st;
		L = rsd__ps_locs(&x->sp, T, v);
		if (!ls_has(&L, src)) { /* defensive */
			rsd__ps_free(&x->sp, T);
			o->resume = f->child;
			return A_RESUME;
		}
		d = f->u.r.dests[f->u.r.di];
		C = rsd__search_charge(x, v);
		reclaim_record(x, f, (int)d, RSD__R_MOVED, &a, &ev);
		if (!ls_has(&L, d)) {
			ls_add(&L, d);
			if (!(U = rsd__ps_used(&x->sp, T, d, C, 0)))
				goto nomem_T;
			T = U;
		}
		if (!rsd__ps_append(&x->sp, T, &a, &ev))
			goto nomem_T;
		ls_del(&L, src);
		if (!(U = rsd__ps_set_locs(&x->sp, T, v, &L)))
			goto nomem_T;
		T = U;
		if (!(U = rsd__ps_used(&x->sp, T, src, 0, C)))
			goto nomem_T;
		T = U;
		f->pc = PC_AFTER_MOVE;
		o->yield = T;
		return A_YIELD;
	case EV_DONE: /* CAPACITY for this destination exhausted */
		f->u.r.di++;
		return reclaim_next(x, i);
	default:
		x->err = rsd__err(RSD_EUSAGE, "internal search inconsistency (RECLAIM event %d)",
				  m->ev);
		return A_ERROR;
	}
	if (reclaim_dests(x, f))
		return A_ERROR;
	return reclaim_next(x, i);
nomem_T:
	rsd__ps_free(&x->sp, T);
	return nomem(x, "reclaim action");
}

/* ---- CAPACITY ---- */

static enum act capacity_next(struct search *x, int32_t i)
{
	struct frame *f = &x->fr[i];

	while (f->ci < f->ncands &&
	       rsd__search_active_has(f->u.k.act, f->cands[f->ci].vidx, (int)f->u.k.x))
		f->ci++;
	if (f->ci == f->ncands) {
		if (!f->flag &&
		    (rsd__search_key_capacity(x, f->S, f->u.k.x, f->u.k.amount, f->u.k.act) ||
		     memo_add(x, &x->failed_cap)))
			return A_ERROR;
		return A_DONE;
	}
	return push_reclaim(x, i, f->u.k.x, f->u.k.act, PC_NONE);
}

static enum act step_capacity(struct search *x, int32_t i, struct msg *m, struct out *o)
{
	struct frame *f = &x->fr[i];
	const struct rsd__ps_bytes *a;
	struct rsd__ledger l;
	int32_t j;

	switch (m->ev) {
	case EV_START:
		a = rsd__ps_acct(f->S, f->u.k.x);
		l = rsd__search_ledger(x, f->u.k.x, a ? a->used : 0, a ? a->reserved : 0);
		if (!x->has_budget[f->u.k.x] || f->u.k.amount <= rsd__ledger_free(&l)) {
			/* fits: produce S, uncounted, without a memo lookup */
			f->pc = PC_FIT;
			o->yield = f->S;
			f->S = NULL;
			return A_YIELD;
		}
		if (rsd__search_key_capacity(x, f->S, f->u.k.x, f->u.k.amount, f->u.k.act))
			return A_ERROR;
		switch (memo_lookup(x, &x->failed_cap)) {
		case 0:
			break;
		case 1:
			return A_DONE;
		default:
			return A_ERROR;
		}
		if (rsd__search_count(x, "capacity at", (int)f->u.k.x))
			return A_ERROR;
		if (rsd__search_rank(x, f->S, f->u.k.x, f->u.k.act, &f->cands, &f->ncands, NULL))
			return A_ERROR;
		f->flag = false;
		f->ci = 0;
		return capacity_next(x, i);
	case EV_RESUME:
		if (f->pc == PC_FIT)
			return A_DONE;
		o->resume = f->sub;
		return A_RESUME;
	case EV_YIELD:
		if (m->from == f->child) { /* R from RECLAIM: CAPACITY(R, X, ...) */
			j = push(x, F_CAPACITY, i);
			if (j < 0) {
				rsd__ps_free(&x->sp, m->st);
				return A_ERROR;
			}
			f = &x->fr[i];
			x->fr[j].S = m->st;
			x->fr[j].u.k = f->u.k;
			f->sub = j;
			return A_PUSH;
		}
		f->flag = true; /* produced */
		f->pc = PC_FORWARD;
		o->yield = m->st;
		return A_YIELD;
	case EV_DONE:
		if (m->from == f->sub) {
			f->sub = -1;
			o->resume = f->child;
			return A_RESUME;
		}
		f->ci++;
		return capacity_next(x, i);
	default:
		break;
	}
	x->err = rsd__err(RSD_EUSAGE, "internal search inconsistency (CAPACITY event %d)", m->ev);
	return A_ERROR;
}

/* ---- the driver ---- */

int rsd__search_drive(struct search *x, struct rsd__pstate *S0, struct rsd__pstate **final,
		      char **note)
{
	struct msg m = { EV_START, -1, NULL, NULL };
	int32_t cur = push(x, F_SEARCH, -1);

	if (cur < 0) {
		rsd__ps_free(&x->sp, S0);
		return cur;
	}
	x->fr[cur].S = S0;
	x->fr[cur].u.s.room = MSG_ROOM;
	x->fr[cur].u.s.roomed = true;
	for (;;) {
		struct out o = { NULL, NULL, -1, NULL };
		int32_t parent = x->fr[cur].parent;
		enum act a;

		switch (x->fr[cur].type) {
		case F_SEARCH:
			a = step_search(x, cur, &m, &o);
			break;
		case F_RECLAIM:
			a = step_reclaim(x, cur, &m, &o);
			break;
		default:
			a = step_capacity(x, cur, &m, &o);
			break;
		}
		m = (struct msg){ EV_START, cur, NULL, NULL };
		switch (a) {
		case A_PUSH:
			cur = (int32_t)x->nfr - 1;
			break;
		case A_YIELD:
			m.ev = EV_YIELD;
			m.st = o.yield;
			cur = parent;
			break;
		case A_DONE:
		case A_FAIL:
			if ((size_t)cur != x->nfr - 1) {
				free(o.note);
				goto broken;
			}
			frame_pop(x);
			if (a == A_FAIL && parent < 0) {
				*note = o.note;
				return 1;
			}
			m.ev = a == A_DONE ? EV_DONE : EV_FAIL;
			m.note = o.note;
			cur = parent;
			break;
		case A_RESUME:
			if (o.resume < 0 || (size_t)o.resume >= x->nfr)
				goto broken;
			m.ev = EV_RESUME;
			cur = o.resume;
			break;
		case A_SUCCESS:
			*final = o.final;
			return 0;
		default:
			return x->err;
		}
	}
broken:
	return x->err = rsd__err(RSD_EUSAGE, "internal search inconsistency: frame order");
}

void rsd__search_frames_fini(struct search *x)
{
	while (x->nfr)
		frame_pop(x);
	free(x->fr);
	rsd__arena_fini(&x->stk);
}
