// SPDX-License-Identifier: MIT
/*
 * The model's plan simulation (reference.md §10.3) and execute_actions
 * (§10.4): a dry run over copied per-value location sets and per-location
 * numbers, then the actions through model_action().
 */
#include <stdio.h>
#include <string.h>

#include "model.h"

struct sim {
	struct model *md;
	unsigned locs[MM_VALUES]; /* bit l: simulated resident at l */
	bool disc[MM_VALUES];
	bool known[ML_N], has_budget[ML_N];
	uint64_t budget[ML_N], used[ML_N], reserved[ML_N], peak[ML_N];
	/* Room for every location's repr in a discard reason (4 x ~80). */
	char reason[1024];
	bool exact, no_op;
};

static void sim_init(struct sim *s, struct model *md)
{
	memset(s, 0, sizeof(*s));
	s->md = md;
	for (int v = 0; v < md->nval; v++) {
		for (int i = 0; i < md->val[v].nmat; i++)
			s->locs[v] |= 1u << md->val[v].mat[i].loc;
		s->disc[v] = false;
	}
	for (int l = 0; l < ML_N; l++) {
		struct mlocrec *r = &md->loc[l];

		if (!r->known)
			continue;
		s->known[l] = true;
		s->has_budget[l] = r->has_budget;
		s->budget[l] = r->budget;
		s->used[l] = r->used;
		/* bytes queued copies still read are admitted against */
		s->reserved[l] = r->reserved + r->inflight;
		s->peak[l] = r->used + s->reserved[l];
	}
}

static bool fail(struct sim *s, bool exact, const char *fmt, const char *arg)
{
	snprintf(s->reason, sizeof(s->reason), fmt, arg);
	s->exact = exact;
	return false;
}

static bool prepare(struct sim *s, int l)
{
	if (l >= ML_VALID)
		return fail(s, true, "Residency location %s is not available in this process",
			    ml_name(l));
	s->known[l] = true;
	return true;
}

static bool add(struct sim *s, int v, int l, bool temporary)
{
	uint64_t c = s->md->val[v].charge, total;

	if (!prepare(s, l))
		return false;
	total = s->used[l] + s->reserved[l] + c;
	if (total > s->peak[l])
		s->peak[l] = total;
	if (s->has_budget[l] && total > s->budget[l])
		return fail(s, true, "Transition exceeds budget at %s", ml_name(l));
	if (!temporary) {
		s->used[l] += c;
		s->locs[v] |= 1u << l;
	}
	return true;
}

static void sim_remove(struct sim *s, int v, int l)
{
	s->used[l] -= s->md->val[v].charge;
	s->locs[v] &= ~(1u << l);
}

static bool resident(const struct sim *s, int v, int l)
{
	return l >= 0 && (s->locs[v] >> l & 1);
}

/* Real protection; a pending lease whose events all completed is not. */
static bool sim_protected(struct sim *s, int v, int l)
{
	struct model *md = s->md;
	struct mmat *m = model_mat(md, v, l);

	if (!m)
		return false;
	/* A queued copy's destination filling, or a materialization one
	 * still reads (§22.1). */
	if (m->use || m->hold || m->filling || m->qread)
		return true;
	for (int i = 0; i < MM_LIFETIMES; i++) {
		struct mlease *ls = &md->lease[i];
		bool covers = false, done = true;

		if (ls->state != MLS_PENDING || ls->loc != l)
			continue;
		for (int j = 0; j < ls->nh; j++)
			covers |= ls->h[j] == v;
		for (int j = 0; j < ls->nstreams; j++)
			done &= ls->seq[j] <= md->stream[ls->stream[j]].completed;
		if (covers && !done)
			return true;
	}
	return false;
}

static int min_of(unsigned set, int exclude)
{
	for (int l = 0; l < ML_N; l++)
		if ((set >> l & 1) && l != exclude)
			return l;
	return -1;
}

static int sim_source(struct sim *s, int v)
{
	if (s->locs[v])
		return min_of(s->locs[v], -1);
	return s->md->val[v].has_source ? s->md->val[v].src_loc : -1;
}

static const char *const repr[ML_N] = {
	"ResidencyLocation(kind='pageable-host', device=device(type='cpu'))",
	"ResidencyLocation(kind='pinned-host', device=device(type='cpu'))",
	"ResidencyLocation(kind='cuda', device=device(type='cuda', index=0))",
	"ResidencyLocation(kind='cuda', device=device(type='cuda', index=1))",
	"ResidencyLocation(kind='cuda', device=device(type='cuda', index=2))",
};

/* One action; false when it is not executable. s->no_op set for no-ops. */
static bool sim_action(struct sim *s, const struct mact *a)
{
	struct model *md = s->md;
	int v = a->h, src;

	s->no_op = false;
	if (v < 0 || v >= md->nval || md->val[v].discarded)
		return fail(s, false, "%s", "handle error");
	if (s->disc[v])
		return fail(s, false, "%s", "discarded in simulation");
	switch (a->kind) {
	case RSD_ACT_ENSURE:
		if (!prepare(s, a->loc))
			return false;
		if (resident(s, v, a->loc)) {
			s->no_op = true;
			fail(s, true, "%s", "destination already resident");
			return true;
		}
		if (md->val[v].mode == RSD_EXCLUSIVE && s->locs[v])
			return fail(s, true, "%s",
				    "EnsureResident would replicate an EXCLUSIVE value");
		if ((src = sim_source(s, v)) < 0)
			return fail(s, true, "%s", "value has no materialization or source");
		if (!s->locs[v] && !add(s, v, src, true))
			return false;
		return add(s, v, a->loc, false);
	case RSD_ACT_MOVE: {
		bool src_res;

		if (!prepare(s, a->loc))
			return false;
		if (a->has_from) {
			src = a->from;
			if (!prepare(s, src))
				return false;
			if (!resident(s, v, src))
				return fail(s, true, "explicit source %s is not resident",
					    ml_name(src));
		} else if (s->locs[v]) {
			src = min_of(s->locs[v], a->loc);
		} else {
			src = md->val[v].has_source ? md->val[v].src_loc : -1;
		}
		if (resident(s, v, a->loc)) {
			if (src < 0 || src == a->loc) {
				s->no_op = true;
				fail(s, true, "%s",
				     "destination already owns the selected replica");
				return true;
			}
			if (sim_protected(s, v, src))
				return fail(s, true, "source %s is protected", ml_name(src));
			sim_remove(s, v, src);
			return true;
		}
		if (src < 0)
			return fail(s, true, "%s", "value has no materialization or source");
		src_res = resident(s, v, src);
		if (src_res && sim_protected(s, v, src))
			return fail(s, true, "source %s is protected", ml_name(src));
		if (!src_res && !add(s, v, src, true))
			return false;
		if (!add(s, v, a->loc, false))
			return false;
		if (src_res)
			sim_remove(s, v, src);
		return true;
	}
	case RSD_ACT_DROP:
		if (!prepare(s, a->loc))
			return false;
		if (!resident(s, v, a->loc)) {
			s->no_op = true;
			fail(s, true, "%s", "materialization already absent");
			return true;
		}
		if (sim_protected(s, v, a->loc))
			return fail(s, true, "materialization at %s is protected", ml_name(a->loc));
		if (s->locs[v] == 1u << a->loc && !md->val[v].has_source)
			return fail(s, true, "%s",
				    "cannot drop final MUST_PRESERVE materialization");
		sim_remove(s, v, a->loc);
		return true;
	case RSD_ACT_DISCARD: {
		char list[768] = "";
		bool any = false;

		for (int l = 0; l < ML_N; l++) {
			if (!resident(s, v, l) || !sim_protected(s, v, l))
				continue;
			snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s",
				 any ? ", " : "", repr[l]);
			any = true;
		}
		if (any) {
			snprintf(s->reason, sizeof(s->reason),
				 "discarded value has protected locations [%s]", list);
			s->exact = true;
			return false;
		}
		for (int l = 0; l < ML_N; l++)
			if (resident(s, v, l))
				sim_remove(s, v, l);
		s->disc[v] = true;
		return true;
	}
	}
	return false;
}

/* Fills e; returns whether the list is feasible. */
static bool simulate(struct model *md, const struct mact *a, size_t n, struct mexpl *e)
{
	struct sim s;

	sim_init(&s, md);
	memset(e, 0, sizeof(*e));
	e->feasible = true;
	for (size_t i = 0; i < n; i++) {
		bool ok;

		s.reason[0] = 0;
		s.exact = true;
		ok = sim_action(&s, &a[i]);
		e->executable[i] = ok;
		e->no_op[i] = s.no_op;
		e->nactions = i + 1;
		if (!ok) {
			e->feasible = false;
			snprintf(e->reason, sizeof(e->reason), "%s", s.reason);
			e->reason_exact = s.exact;
			break;
		}
	}
	return e->feasible;
}

int model_explain(struct model *md, const struct mact *a, size_t n, const uint64_t *expected,
		  struct mexpl *e)
{
	if (md->closed)
		return -RSD_ECLOSED;
	if (expected && *expected != md->version)
		return -RSD_ESTALE;
	simulate(md, a, n, e);
	return 0;
}

int model_execute(struct model *md, const struct mact *a, size_t n, const uint64_t *expected,
		  struct rsd_transition *reps, size_t *nrep, int *cause, long *failed)
{
	struct mexpl e;
	int err;

	*nrep = 0;
	/* P-mut: closed, then reap (each action's own reap finds nothing). */
	if ((err = model_reap(md)))
		return err;
	if (expected && *expected != md->version)
		return -RSD_ESTALE;
	if (!simulate(md, a, n, &e))
		return -RSD_EPLAN;
	for (size_t i = 0; i < n; i++) {
		err = model_action(md, &a[i], MS_NONE, false, &reps[i]);
		if (err) {
			*cause = err;
			*failed = (long)i;
			return -RSD_EEXEC;
		}
		*nrep = i + 1;
	}
	return 0;
}
