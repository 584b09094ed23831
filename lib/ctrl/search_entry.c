// SPDX-License-Identifier: MIT
/*
 * The controller search's entry point (reference.md §13.3-13.4): it sets
 * the search up, runs the machine of search.c, and turns its outcome into
 * the result or the failure record (with the blockers). Also the failure
 * narratives of SEARCH levels, which the RSD_CTRL_PRECHECK message shares.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search.h"

/* Chunks of the frames' stack arena (candidate lists, destinations). */
#define STK_CHUNK ((size_t)64 << 10)

/*
 * Failure narratives are capped: the recorded message holds 511 bytes, so
 * no level's text matters past the bytes that can still reach it. Each
 * SEARCH level knows that number (room): the root 511, a nested level what
 * is left of its parent's room after the parent's own text before it. A
 * level formats only its first room bytes, and nothing at all when room
 * is 0, which is what keeps a deep failing search from spending its time
 * in vsnprintf; the message comes out the same.
 */
void rsd__search_note_fmt(struct frame *f, const char *fmt, ...)
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

static const char *stage_text(const struct search *x, const struct shortfall *sh, char *buf,
			      size_t len)
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
int rsd__search_fail_head(const struct search *x, const struct frame *f, char *buf, size_t len)
{
	char name[RSD_LOCATION_NAME_MAX], stage[300], terms[RSD__LEDGER_TEXT_MAX];
	struct rsd__ledger l = rsd__search_ledger(x, f->u.s.sh.slot, f->u.s.used, f->u.s.reserved);

	return snprintf(buf, len,
			"location %s cannot admit %llu bytes during %s; %s, but no invariant-valid "
			"victim sequence satisfies the complete ordered request",
			rsd_location_name(rsd__slot_loc(f->u.s.sh.slot), name, sizeof(name)),
			(unsigned long long)f->u.s.sh.n,
			stage_text(x, &f->u.s.sh, stage, sizeof(stage)),
			rsd__ledger_text(&l, terms, sizeof(terms)));
}

/* The level's failure text, its first room bytes; NULL when room is 0. */
char *rsd__search_fail_text(const struct search *x, const struct frame *f)
{
	size_t cap = f->u.s.room < NOTE_CAP ? f->u.s.room : NOTE_CAP;
	char *s;
	int n;

	if (!cap)
		return NULL;
	s = rsd__malloc(cap + 1);
	if (!s)
		return NULL;
	n = rsd__search_fail_head(x, f, s, cap + 1);
	if (n >= 0 && (size_t)n < cap && f->u.s.any)
		snprintf(s + n, cap + 1 - (size_t)n, " (%s)", f->u.s.notes ? f->u.s.notes : "");
	return s;
}

void rsd__search_room(const struct search *x, struct frame *f)
{
	if (f->u.s.roomed)
		return;
	f->u.s.roomed = true;
	f->u.s.room = rsd__search_child_room(x, &x->fr[f->parent]);
}

void rsd__search_size(const struct search *x, struct frame *f)
{
	char one[1]; /* only the length is wanted */
	int n;

	if (f->u.s.sized)
		return;
	f->u.s.sized = true;
	rsd__search_room(x, f);
	if (!f->u.s.room)
		return;
	n = rsd__search_fail_head(x, f, one, sizeof(one));
	f->u.s.head = (size_t)(n > 0 ? n : 0) + 2; /* and " (" */
	f->u.s.ncap = f->u.s.room > f->u.s.head ? f->u.s.room - f->u.s.head : 0;
	if (f->u.s.ncap > NOTE_CAP)
		f->u.s.ncap = NOTE_CAP;
}

/* The room of a nested level pushed for candidate ci of SEARCH frame f. */
size_t rsd__search_child_room(const struct search *x, struct frame *f)
{
	size_t off;
	int n;

	rsd__search_size(x, f);
	if (f->u.s.room <= f->u.s.head)
		return 0;
	n = snprintf(NULL, 0, "candidate %u: ", f->cands[f->ci].vidx);
	off = f->u.s.head + f->u.s.nlen + (f->u.s.any ? 2 : 0) + (size_t)(n > 0 ? n : 0);
	return f->u.s.room > off ? f->u.s.room - off : 0;
}

static void search_fini(struct search *x)
{
	rsd__search_frames_fini(x);
	rsd__memo_fini(&x->failed_req);
	rsd__memo_fini(&x->failed_cap);
	/* Most slots have no lists (a search ranks candidates at the few
	 * locations it is short at): 650 calls of free(NULL) were 6% of a
	 * small not-waiting use's host time. */
	for (unsigned s = 0; s < RSD_NSLOTS; s++) {
		if (x->base_cands[s] || x->base_charge[s] || x->base_code[s]) {
			free(x->base_cands[s]);
			free(x->base_charge[s]);
			free(x->base_code[s]);
		}
		if (x->base_order[s] || x->base_req[s]) {
			free(x->base_order[s]);
			free(x->base_req[s]);
		}
	}
	free(x->cmark);
	free(x->bpos);
	free(x->cbi);
	free(x->cpos);
	rsd__ps_space_fini(&x->sp);
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
	struct rsd__ledger l = rsd__search_ledger(x, sh->slot, sh->used, sh->reserved);
	struct rsd_blockers b;
	uint64_t need;

	if (!x->has_root_sh)
		return;
	memset(&b, 0, sizeof(b));
	rsd__blockers_collect(x->view, rsd__slot_loc(sh->slot), &b);
	need = rsd__ledger_taken(&l) + sh->n;
	b.requested_bytes = sh->n;
	b.short_bytes = need > x->budget[sh->slot] ? need - x->budget[sh->slot] : 0;
	b.budget_bytes = x->budget[sh->slot];
	b.used_bytes = x->root_used;
	b.reserved_bytes = x->root_reserved;
	b.in_flight_bytes = l.in_flight;
	b.plan_held_bytes = l.held;
	rsd__blockers_set(&b);
}

/* The search facts of the failure just recorded, and its blockers. */
static void record_failure(struct search *x)
{
	struct rsd_error *e = rsd__err_record();

	e->has_search = true;
	e->state_limit = x->limit;
	e->explored_states = x->count;
	snprintf(e->plan_name, sizeof(e->plan_name), "%s", x->req->name);
	record_blockers(x);
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
	char name[RSD_LOCATION_NAME_MAX], stage[300], q[160], terms[RSD__LEDGER_TEXT_MAX];
	uint64_t freeable, shortb;
	struct rsd__ledger l;
	struct shortfall sh;
	int err;

	x->precheck = true;
	err = rsd__search_simulate(x, S0, &sh);
	x->precheck = false;
	if (x->err)
		return x->err;
	if (err <= 0)
		return err;
	freeable = x->freeable[sh.slot];
	l = rsd__search_ledger(x, sh.slot, sh.used, sh.reserved);
	shortb = rsd__ledger_taken(&l) + sh.n - x->budget[sh.slot];
	x->has_root_sh = true;
	x->root_sh = sh;
	x->root_used = rsd__ps_acct(S0, sh.slot) ? rsd__ps_acct(S0, sh.slot)->used : 0;
	x->root_reserved = rsd__ps_acct(S0, sh.slot) ? rsd__ps_acct(S0, sh.slot)->reserved : 0;
	l = rsd__search_ledger(x, sh.slot, x->root_used, x->root_reserved);
	err = rsd__err(RSD_EPLAN,
		       "Automatic residency request %s is infeasible: location %s cannot admit "
		       "%llu bytes during %s; %s, and evicting every candidate there frees %llu "
		       "of the %llu bytes short (checked before searching)",
		       rsd__quote(x->req->name, q, sizeof(q)),
		       rsd_location_name(rsd__slot_loc(sh.slot), name, sizeof(name)),
		       (unsigned long long)sh.n, stage_text(x, &sh, stage, sizeof(stage)),
		       rsd__ledger_text(&l, terms, sizeof(terms)), (unsigned long long)freeable,
		       (unsigned long long)shortb);
	record_failure(x); /* nothing counted yet */
	return err;
}

/*
 * A request that needs a lost device (a requirement or a reservation at its
 * quarantined location) or a value lost with its device cannot be met in
 * any state: fail at once with RSD_EDEVLOST naming it, counting nothing.
 */
static int refuse_failed(struct search *x)
{
	char name[RSD_LOCATION_NAME_MAX], q[160];
	const struct rsd_request *r = x->req;

	for (size_t i = 0; i < r->nrequirements; i++) {
		const struct rsd_requirement *rq = &r->requirements[i];
		const struct rsd_img_value *iv = rsd__img_find(x->img, rq->handle.id);

		if (x->failed[rsd__loc_slot(rq->location)])
			return rsd__err(
				RSD_EDEVLOST,
				"Automatic residency request %s cannot be met: requirement "
				"%zu is at %s, whose device was lost for good (quarantined)",
				rsd__quote(r->name, q, sizeof(q)), i,
				rsd_location_name(rq->location, name, sizeof(name)));
		if (iv && iv->lost)
			return rsd__err(RSD_EDEVLOST,
					"Automatic residency request %s cannot be met: value %llu "
					"was lost with its device (its only copy was at %s)",
					rsd__quote(r->name, q, sizeof(q)),
					(unsigned long long)rq->handle.id,
					rsd_location_name(iv->lost_at, name, sizeof(name)));
	}
	for (size_t i = 0; i < r->nreservations; i++)
		if (x->failed[rsd__loc_slot(r->reservations[i].location)])
			return rsd__err(
				RSD_EDEVLOST,
				"Automatic residency request %s cannot be met: reservation "
				"%zu is at %s, whose device was lost for good (quarantined)",
				rsd__quote(r->name, q, sizeof(q)), i,
				rsd_location_name(r->reservations[i].location, name, sizeof(name)));
	return 0;
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
	x->req = r;
	x->limit = c->limit;
	if (c->sched.nsteps) {
		x->has_sched = true;
		res->has_schedule = true;
		res->on_schedule = rsd__sched_locate(c, r, &x->sched_pos);
		res->schedule_position = x->sched_pos;
	}
	rsd__memo_init(&x->failed_req, &c->search_mem);
	rsd__memo_init(&x->failed_cap, &c->search_mem);
	rsd__arena_init(&x->stk, STK_CHUNK, &c->search_mem);
	err = rsd__ps_space_init(&x->sp, img, &c->search_mem);
	if (err)
		goto out;
	for (uint32_t i = 0; i < img->nlocs; i++) {
		const struct rsd_acct *a = &img->locs[i].acct;
		unsigned s = rsd__loc_slot(img->locs[i].loc);

		x->has_budget[s] = a->has_budget;
		x->budget[s] = a->has_budget ? a->budget : 0;
		/* As the plan simulation reads it (simulate.c prepare()): the
		 * confirmation applies the same ledger to the same image. */
		x->ledger[s] = rsd__img_loc_ledger(&img->locs[i]);
		x->failed[s] = a->failed;
	}
	x->req_vidx = rsd__malloc(r->nrequirements * sizeof(*x->req_vidx));
	x->simv = rsd__malloc(r->nrequirements * sizeof(*x->simv));
	x->enter = rsd__malloc(r->nrequirements * sizeof(*x->enter));
	S0 = rsd__ps_initial(&x->sp);
	if (!x->req_vidx || !x->simv || !x->enter || !S0) {
		rsd__ps_free(&x->sp, S0);
		err = rsd__err(RSD_ENOMEM, "out of memory starting the residency search");
		goto out;
	}
	for (size_t i = 0; i < r->nrequirements; i++)
		x->req_vidx[i] = (uint32_t)rsd__img_index(img, r->requirements[i].handle);
	err = rsd__sim_init(x);
	if (!err)
		err = refuse_failed(x);
	if (err) {
		rsd__ps_free(&x->sp, S0);
		goto out;
	}

	if (c->flags & RSD_CTRL_PRECHECK) {
		err = precheck(x, S0);
		if (err) {
			rsd__ps_free(&x->sp, S0);
			goto out;
		}
	}
	err = rsd__search_drive(x, S0, &final, &note);
	res->explored = x->count;
	rsd__quote(r->name, q, sizeof(q));
	if (err == 0) {
		err = take_result(x, final, res);
		rsd__ps_free(&x->sp, final);
		if (err)
			rsd__search_result_fini(res);
		res->explored = x->count;
	} else if (err == 1) {
		err = rsd__err(RSD_EPLAN, "Automatic residency request %s is infeasible: %s", q,
			       note);
		free(note);
		record_failure(x);
	} else if (err == -RSD_ESEARCHLIMIT) {
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
		record_failure(x);
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
