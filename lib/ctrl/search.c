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
#include <stdarg.h>
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
	PC_CHECKED /* SEARCH: its consumer found its state in no memo */
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

/*
 * Failure narratives are capped: the recorded message holds 511 bytes, so
 * no level's text matters past the bytes that can still reach it. Each
 * SEARCH level knows that number (room): the root 511, a nested level what
 * is left of its parent's room after the parent's own text before it. A
 * level formats only its first room bytes, and nothing at all when room
 * is 0, which is what keeps a deep failing search from spending its time
 * in vsnprintf; the message comes out the same.
 */
#define NOTE_CAP 1024
#define EXHAUSTED "equivalent ordered-request state is already exhausted"
#define MSG_ROOM (sizeof(((struct rsd_error *)0)->message) - 1)

static void note_add(struct frame *f, const char *fmt, ...) rsd__printf(2, 3);

static void note_add(struct frame *f, const char *fmt, ...)
{
	size_t cap = f->u.s.ncap;
	va_list ap;
	int n;

	f->u.s.any = true; /* a note exists, whether or not its bytes are kept */
	if (!cap)
		return;
	if (!f->u.s.notes) {
		f->u.s.notes = rsd__malloc(cap + 1);
		if (!f->u.s.notes)
			return; /* a lost note only shortens a diagnostic */
		f->u.s.nlen = 0;
		f->u.s.notes[0] = '\0';
	} else if (f->u.s.nlen < cap) {
		f->u.s.nlen +=
			(size_t)snprintf(f->u.s.notes + f->u.s.nlen, cap + 1 - f->u.s.nlen, "; ");
	}
	if (f->u.s.nlen >= cap) {
		f->u.s.nlen = cap;
		return;
	}
	va_start(ap, fmt);
	n = vsnprintf(f->u.s.notes + f->u.s.nlen, cap + 1 - f->u.s.nlen, fmt, ap);
	va_end(ap);
	if (n > 0)
		f->u.s.nlen += (size_t)n;
	if (f->u.s.nlen > cap)
		f->u.s.nlen = cap;
}

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
	return (int32_t)x->nfr++;
}

static void frame_fini(struct frame *f)
{
	free(f->cands);
	if (f->type != F_RECLAIM)
		rsd__ps_free(f->S);
	if (f->type == F_SEARCH)
		free(f->u.s.notes);
	if (f->type == F_RECLAIM) {
		free(f->u.r.dests);
		free(f->u.r.mine);
	}
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

/* A RECLAIM for the ci-th ranked candidate of frame i, at slot src. */
static enum act push_reclaim(struct search *x, int32_t i, unsigned src, const struct active *in)
{
	int32_t j = push(x, F_RECLAIM, i);
	struct frame *f, *g;

	if (j < 0)
		return A_ERROR;
	f = &x->fr[i];
	g = &x->fr[j];
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

static const char *stage_text(struct search *x, const struct shortfall *sh, char *buf, size_t len)
{
	char q[256], id[32];

	if (sh->kind == ST_RESERVATION) {
		snprintf(buf, len, "reservation %s",
			 rsd__quote(x->req->reservations[sh->index].label, q, sizeof(q)));
		return buf;
	}
	snprintf(id, sizeof(id), "%llu",
		 (unsigned long long)x->req->requirements[sh->index].handle.id);
	snprintf(buf, len, "%s %s",
		 sh->kind == ST_SOURCE ? "source reconstruction for" : "materialization of",
		 rsd__quote(id, q, sizeof(q)));
	return buf;
}

/* The failure text before its notes (truncated to len - 1); its length. */
static int fail_head(struct search *x, const struct frame *f, char *buf, size_t len)
{
	char name[RSD_LOCATION_NAME_MAX], stage[300];

	return snprintf(buf, len,
			"location %s cannot admit %llu bytes during %s; budget=%llu, used=%llu, "
			"reserved=%llu, but no invariant-valid victim sequence satisfies the "
			"complete ordered request",
			rsd_location_name(rsd__slot_loc(f->u.s.sh.slot), name, sizeof(name)),
			(unsigned long long)f->u.s.sh.n,
			stage_text(x, &f->u.s.sh, stage, sizeof(stage)),
			(unsigned long long)f->u.s.budget, (unsigned long long)f->u.s.used,
			(unsigned long long)f->u.s.reserved);
}

/* The level's failure text, its first room bytes; NULL when room is 0. */
static char *fail_text(struct search *x, const struct frame *f)
{
	size_t cap = f->u.s.room < NOTE_CAP ? f->u.s.room : NOTE_CAP;
	char *s;
	int n;

	if (!cap)
		return NULL;
	s = rsd__malloc(cap + 1);
	if (!s)
		return NULL;
	n = fail_head(x, f, s, cap + 1);
	if (n >= 0 && (size_t)n < cap && f->u.s.any)
		snprintf(s + n, cap + 1 - (size_t)n, " (%s)", f->u.s.notes ? f->u.s.notes : "");
	return s;
}

/* A failure note; NULL is an empty one, when room is 0. */
static enum act search_fail_note(struct search *x, struct frame *f, struct out *o, const char *s)
{
	if (!f->u.s.room)
		return A_FAIL;
	o->note = s ? rsd__strdup(s) : fail_text(x, f);
	return o->note ? A_FAIL : nomem(x, "failure text");
}

static enum act search_next(struct search *x, int32_t i, struct out *o)
{
	struct frame *f = &x->fr[i];

	if (f->ci == f->ncands) {
		if (rsd__search_key_sig(x, 'R', f->S) || memo_add(x, &x->failed_req))
			return A_ERROR;
		return search_fail_note(x, f, o, NULL);
	}
	f->flag = false;
	return push_reclaim(x, i, f->u.s.sh.slot, NULL);
}

/* The room of a nested level pushed for candidate ci of SEARCH frame f. */
static size_t child_room(const struct frame *f)
{
	size_t off;
	int n;

	if (f->u.s.room <= f->u.s.head)
		return 0;
	n = snprintf(NULL, 0, "candidate %u: ", f->cands[f->ci].vidx);
	off = f->u.s.head + f->u.s.nlen + (f->u.s.any ? 2 : 0) + (size_t)(n > 0 ? n : 0);
	return f->u.s.room > off ? f->u.s.room - off : 0;
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
		if (f->u.s.room) {
			char one[1]; /* only the length is wanted */
			int n = fail_head(x, f, one, sizeof(one));

			f->u.s.head = (size_t)(n > 0 ? n : 0) + 2; /* and " (" */
			f->u.s.ncap = f->u.s.room > f->u.s.head ? f->u.s.room - f->u.s.head : 0;
			if (f->u.s.ncap > NOTE_CAP)
				f->u.s.ncap = NOTE_CAP;
		}
		if (rsd__search_rank(x, f->S, f->u.s.sh.slot, NULL, &f->cands, &f->ncands))
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
		if (rsd__search_key_sig(x, 'R', m->st))
			err = x->err;
		else
			err = memo_lookup(x, &x->failed_req);
		if (err) {
			rsd__ps_free(m->st);
			if (err < 0)
				return A_ERROR;
			note_add(f, "candidate %u: %s", f->cands[f->ci].vidx, EXHAUSTED);
			o->resume = f->child;
			return A_RESUME;
		}
		j = push(x, F_SEARCH, i);
		if (j < 0) {
			rsd__ps_free(m->st);
			return A_ERROR;
		}
		x->fr[j].S = m->st;
		x->fr[j].pc = PC_CHECKED;
		x->fr[j].u.s.room = child_room(&x->fr[i]);
		return A_PUSH;
	case EV_FAIL:
		note_add(f, "candidate %u: %s", f->cands[f->ci].vidx, m->note ? m->note : "");
		free(m->note);
		o->resume = f->child;
		return A_RESUME;
	case EV_DONE:
		if (!f->flag)
			note_add(f, "candidate %u: no legal drop or fallback transition",
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
	struct rsd__locset seen;
	const struct rsd_policy *p = x->pol;
	uint32_t v = f->u.r.vidx, src = f->u.r.src, n = 0;
	size_t k;

	f->u.r.dests = rsd__malloc(2 * (size_t)RSD_NSLOTS * sizeof(*f->u.r.dests));
	if (!f->u.r.dests)
		return x->err = rsd__err(RSD_ENOMEM, "out of memory listing spill destinations");
	memset(&seen, 0, sizeof(seen));
	/* requested endpoints of this handle, canonical order, then fallbacks */
	for (size_t i = 0; i < x->req->nrequirements; i++) {
		unsigned s = rsd__loc_slot(x->req->requirements[i].location);

		if (x->req_vidx[i] == v && s != src)
			ls_add(&seen, s);
	}
	for (unsigned s = 0; s < RSD_NSLOTS; s++)
		if (ls_has(&seen, s))
			f->u.r.dests[n++] = (uint8_t)s;
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
		if (!ls_has(&seen, s)) {
			ls_add(&seen, s);
			f->u.r.dests[n++] = (uint8_t)s;
		}
	}
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
	L = rsd__ps_locs(&x->bc, f->S, v);
	if (!f->u.r.mine) {
		f->u.r.mine = rsd__malloc(sizeof(*f->u.r.mine));
		if (!f->u.r.mine)
			return nomem(x, "active pair");
		f->u.r.mine->prev = f->u.r.in;
		f->u.r.mine->vidx = v;
		f->u.r.mine->slot = f->u.r.src;
	}
	T = rsd__ps_copy(f->S);
	if (!T)
		return nomem(x, "state copy");
	j = push(x, F_CAPACITY, i);
	if (j < 0) {
		rsd__ps_free(T);
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

static enum act step_reclaim(struct search *x, int32_t i, struct msg *m, struct out *o)
{
	struct frame *f = &x->fr[i];
	uint32_t v = f->u.r.vidx, src = f->u.r.src;
	struct rsd__evict ev = { f->u.r.rank, rsd__slot_loc(src), f->u.r.charged, RSD__R_SOURCE,
				 rsd__slot_loc(src) };
	struct rsd_action a;
	struct rsd__locset L;
	struct rsd__pstate *T, *U;
	uint64_t C = rsd__search_charge(x, v);

	memset(&a, 0, sizeof(a));
	a.handle = rsd__iv(x->img, v)->handle;
	switch (m->ev) {
	case EV_START:
		if (rsd__search_active_has(f->u.r.in, v, (int)src))
			return A_DONE;
		L = rsd__ps_locs(&x->bc, f->S, v);
		ls_del(&L, src);
		f->flag = !ls_empty(&L); /* another replica preserves the value */
		if (f->flag || rsd__iv(x->img, v)->has_source) {
			T = rsd__ps_copy(f->S);
			if (!T)
				return nomem(x, "state copy");
			a.kind = RSD_ACT_DROP;
			a.location = rsd__slot_loc(src);
			ev.reason = f->flag ? RSD__R_OTHER_REPLICA : RSD__R_SOURCE;
			if (!rsd__ps_append(T, &a, &ev) ||
			    !(U = rsd__ps_set_locs(&x->bc, T, v, &L)))
				goto nomem_T;
			T = U;
			if (!(U = rsd__ps_used(T, src, 0, C)))
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
		L = rsd__ps_locs(&x->bc, T, v);
		if (!ls_has(&L, src)) { /* defensive */
			rsd__ps_free(T);
			o->resume = f->child;
			return A_RESUME;
		}
		a.kind = RSD_ACT_MOVE;
		a.location = rsd__slot_loc(f->u.r.dests[f->u.r.di]);
		a.has_from = true;
		a.from = rsd__slot_loc(src);
		ev.reason = RSD__R_MOVED;
		ev.moved_to = a.location;
		if (!ls_has(&L, f->u.r.dests[f->u.r.di])) {
			ls_add(&L, f->u.r.dests[f->u.r.di]);
			if (!(U = rsd__ps_used(T, f->u.r.dests[f->u.r.di], C, 0)))
				goto nomem_T;
			T = U;
		}
		if (!rsd__ps_append(T, &a, &ev))
			goto nomem_T;
		ls_del(&L, src);
		if (!(U = rsd__ps_set_locs(&x->bc, T, v, &L)))
			goto nomem_T;
		T = U;
		if (!(U = rsd__ps_used(T, src, 0, C)))
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
	rsd__ps_free(T);
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
		if (!f->flag && (rsd__search_key_capacity(x, f->S, f->u.k.x, f->u.k.amount, f->u.k.act) ||
				 memo_add(x, &x->failed_cap)))
			return A_ERROR;
		return A_DONE;
	}
	return push_reclaim(x, i, f->u.k.x, f->u.k.act);
}

static enum act step_capacity(struct search *x, int32_t i, struct msg *m, struct out *o)
{
	struct frame *f = &x->fr[i];
	const struct rsd__ps_bytes *a;
	int32_t j;

	switch (m->ev) {
	case EV_START:
		a = rsd__ps_acct(f->S, f->u.k.x);
		if (!x->has_budget[f->u.k.x] ||
		    (a ? a->used + a->reserved : 0) + f->u.k.amount <= x->budget[f->u.k.x]) {
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
		if (rsd__search_rank(x, f->S, f->u.k.x, f->u.k.act, &f->cands, &f->ncands))
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
				rsd__ps_free(m->st);
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

/* 0: success (*final set); 1: the root SEARCH failed (*note set); <0: error. */
static int drive(struct search *x, struct rsd__pstate *S0, struct rsd__pstate **final, char **note)
{
	struct msg m = { EV_START, -1, NULL, NULL };
	int32_t cur = push(x, F_SEARCH, -1);

	if (cur < 0) {
		rsd__ps_free(S0);
		return cur;
	}
	x->fr[cur].S = S0;
	x->fr[cur].u.s.room = MSG_ROOM;
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
			frame_fini(&x->fr[cur]);
			x->nfr--;
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

static void search_fini(struct search *x)
{
	for (size_t i = x->nfr; i-- > 0;)
		frame_fini(&x->fr[i]);
	free(x->fr);
	rsd__memo_fini(&x->failed_req);
	rsd__memo_fini(&x->failed_cap);
	for (unsigned s = 0; s < RSD_NSLOTS; s++) {
		free(x->base_cands[s]);
		free(x->base_pos[s]);
	}
	free(x->bc.tab);
	free(x->req_vidx);
	free(x->simv);
	free(x->key);
	free(x->cbuf);
	free(x->cvidx);
	free(x->chandle);
	free(x->ccharge);
	free(x->creq);
	free(x->cused);
	free(x->enter);
}

static int take_result(struct search *x, struct rsd__pstate *S, struct rsd__search_result *res)
{
	/*
	 * S is drive()'s *final, set whenever drive() returns 0; the analyzer
	 * cannot see that the codes its error paths return (rsd__err()) are < 0.
	 */
	/* NOLINTNEXTLINE(clang-analyzer-core.NullDereference) */
	size_t n = S->nreclaim, k = n;

	res->reclaim = rsd__malloc((n ? n : 1) * sizeof(*res->reclaim));
	res->evict = rsd__malloc((n ? n : 1) * sizeof(*res->evict));
	res->enter = rsd__malloc((x->nenter ? x->nenter : 1) * sizeof(*res->enter));
	if (!res->reclaim || !res->evict || !res->enter)
		return rsd__err(RSD_ENOMEM, "out of memory copying the search result");
	for (const struct rsd__act_node *a = S->tail; a && k; a = a->prev) {
		k--;
		res->reclaim[k] = a->action;
		res->evict[k] = a->ev;
	}
	res->nreclaim = n;
	memcpy(res->enter, x->enter, x->nenter * sizeof(*x->enter));
	res->nenter = x->nenter;
	return 0;
}

/* The blockers at the root's shortfall, for the failure just recorded. */
static void record_blockers(struct search *x)
{
	const struct shortfall *sh = &x->root_sh;
	struct rsd_blockers b;
	uint64_t need;

	if (!x->has_root_sh)
		return;
	memset(&b, 0, sizeof(b));
	rsd__blockers_collect(x->view, rsd__slot_loc(sh->slot), &b);
	need = sh->used + sh->reserved + sh->n;
	b.requested_bytes = sh->n;
	b.short_bytes = need > x->budget[sh->slot] ? need - x->budget[sh->slot] : 0;
	b.budget_bytes = x->budget[sh->slot];
	b.used_bytes = x->root_used;
	b.reserved_bytes = x->root_reserved;
	rsd__blockers_set(&b);
}

/*
 * RSD_CTRL_PRECHECK: simulate the request on the image as if every stage
 * fitted. Before any stage, evictions and spills can have lowered what its
 * location holds by at most the charges of the candidates there: reclaim
 * removes only candidates, a state the search reaches differs from the
 * image by reclaim alone, and reclaim never lowers what an earlier stage
 * of the request adds there. So when a stage is short by more than those
 * charges, every state the search could reach fails at that stage or
 * earlier. Fail at once then, counting nothing.
 */
static int precheck(struct search *x, const struct rsd__pstate *S0)
{
	struct shortfall sh;
	uint64_t freeable, shortb;
	char name[RSD_LOCATION_NAME_MAX], stage[300], q[160];
	struct rsd_error *e;
	int err;

	x->precheck = true;
	err = rsd__search_simulate(x, S0, &sh);
	x->precheck = false;
	if (x->err)
		return x->err;
	if (err <= 0)
		return err;
	freeable = x->freeable[sh.slot];
	shortb = sh.used + sh.reserved + sh.n - x->budget[sh.slot];
	x->has_root_sh = true;
	x->root_sh = sh;
	x->root_used = rsd__ps_acct(S0, sh.slot) ? rsd__ps_acct(S0, sh.slot)->used : 0;
	x->root_reserved = rsd__ps_acct(S0, sh.slot) ? rsd__ps_acct(S0, sh.slot)->reserved : 0;
	err = rsd__err(RSD_EPLAN,
		       "Automatic residency request %s is infeasible: location %s cannot admit "
		       "%llu bytes during %s; budget=%llu, used=%llu, reserved=%llu, and evicting "
		       "every candidate there frees %llu of the %llu bytes short (checked before "
		       "searching)",
		       rsd__quote(x->req->name, q, sizeof(q)),
		       rsd_location_name(rsd__slot_loc(sh.slot), name, sizeof(name)),
		       (unsigned long long)sh.n, stage_text(x, &sh, stage, sizeof(stage)),
		       (unsigned long long)x->budget[sh.slot], (unsigned long long)x->root_used,
		       (unsigned long long)x->root_reserved, (unsigned long long)freeable,
		       (unsigned long long)shortb);
	e = rsd__err_record();
	e->has_search = true;
	e->state_limit = x->limit;
	e->explored_states = 0;
	snprintf(e->plan_name, sizeof(e->plan_name), "%s", x->req->name);
	record_blockers(x);
	return err;
}

int rsd__search(struct rsd_controller *c, const struct rsd_view *view, const struct rsd_request *r,
		struct rsd__search_result *res)
{
	const struct rsd_image *img = view->img;
	struct search *x = rsd__calloc(1, sizeof(*x));
	struct rsd__pstate *S0, *final = NULL;
	char *note = NULL, q[160], name[RSD_LOCATION_NAME_MAX + 1];
	int err;

	memset(res, 0, sizeof(*res));
	if (!x)
		return rsd__err(RSD_ENOMEM, "out of memory starting the residency search");
	x->c = c;
	x->pol = c->policy;
	x->cmp = rsd__policy_cmp(c->policy);
	x->img = img;
	x->view = view;
	x->bc.img = img;
	/* without the cache the search only runs slower */
	x->bc.tab = rsd__calloc(RSD__BL_SLOTS, sizeof(*x->bc.tab));
	x->req = r;
	x->limit = c->limit;
	if (c->sched.nsteps) {
		x->has_sched = true;
		res->has_schedule = true;
		res->on_schedule = rsd__sched_locate(c, r, &x->sched_pos);
		res->schedule_position = x->sched_pos;
	}
	rsd__memo_init(&x->failed_req);
	rsd__memo_init(&x->failed_cap);
	for (uint32_t i = 0; i < img->nlocs; i++) {
		const struct rsd_acct *a = &img->locs[i].acct;
		unsigned s = rsd__loc_slot(img->locs[i].loc);

		x->has_budget[s] = a->has_budget;
		x->budget[s] = a->has_budget ? a->budget : 0;
	}
	x->req_vidx = rsd__malloc(r->nrequirements * sizeof(*x->req_vidx));
	x->simv = rsd__malloc(r->nrequirements * sizeof(*x->simv));
	x->enter = rsd__malloc(r->nrequirements * sizeof(*x->enter));
	S0 = rsd__ps_initial(img);
	if (!x->req_vidx || !x->simv || !x->enter || !S0) {
		rsd__ps_free(S0);
		err = rsd__err(RSD_ENOMEM, "out of memory starting the residency search");
		goto out;
	}
	for (size_t i = 0; i < r->nrequirements; i++)
		x->req_vidx[i] = (uint32_t)rsd__img_index(img, r->requirements[i].handle);
	err = rsd__sim_init(x);
	if (err) {
		rsd__ps_free(S0);
		goto out;
	}

	if (c->flags & RSD_CTRL_PRECHECK) {
		err = precheck(x, S0);
		if (err) {
			rsd__ps_free(S0);
			goto out;
		}
	}
	err = drive(x, S0, &final, &note);
	res->explored = x->count;
	rsd__quote(r->name, q, sizeof(q));
	if (err == 0) {
		err = take_result(x, final, res);
		rsd__ps_free(final);
		if (err)
			rsd__search_result_fini(res);
		res->explored = x->count;
	} else if (err == 1) {
		struct rsd_error *e;

		err = rsd__err(RSD_EPLAN, "Automatic residency request %s is infeasible: %s", q,
			       note);
		free(note);
		e = rsd__err_record();
		e->has_search = true;
		e->state_limit = x->limit;
		e->explored_states = x->count;
		snprintf(e->plan_name, sizeof(e->plan_name), "%s", r->name);
		record_blockers(x);
	} else if (err == -RSD_ESEARCHLIMIT) {
		struct rsd_error *e;

		name[0] = ' ';
		name[1] = '\0';
		if (x->objective_slot >= 0)
			rsd_location_name(rsd__slot_loc((unsigned)x->objective_slot), name + 1,
					  sizeof(name) - 1);
		rsd__err(
			RSD_ESEARCHLIMIT,
			"Automatic residency request %s is inconclusive (not infeasible): automatic "
			"residency search exceeded its deterministic state limit during %s%s: "
			"limit=%llu; explored_states=%llu",
			q, x->objective, x->objective_slot >= 0 ? name : "",
			(unsigned long long)x->limit, (unsigned long long)x->count);
		e = rsd__err_record();
		e->has_search = true;
		e->state_limit = x->limit;
		e->explored_states = x->count;
		snprintf(e->plan_name, sizeof(e->plan_name), "%s", r->name);
		record_blockers(x);
	}
out:
	search_fini(x);
	free(x);
	return err;
}

void rsd__search_result_fini(struct rsd__search_result *res)
{
	free(res->reclaim);
	free(res->evict);
	free(res->enter);
	memset(res, 0, sizeof(*res));
}
