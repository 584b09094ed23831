// SPDX-License-Identifier: MIT
/*
 * The interpreter (interp.h): one run = a fresh simulated device and
 * manager with small random budgets, then random operations, each applied
 * to librsd and to the model, then a full comparison.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h" /* rsd__fault_fired() */
#include "../simwait.h"
#include "interp.h"
#include "model.h"

enum ip_op {
	OP_ADOPT,
	OP_SOURCE,
	OP_ENSURE,
	OP_COPY,
	OP_MOVE,
	OP_DROP,
	OP_DISCARD,
	OP_ACQUIRE,
	OP_LRELEASE,
	OP_LFREE,
	OP_LSTREAM,
	OP_LVALUE,
	OP_HOLD,
	OP_HRELEASE,
	OP_RESERVE,
	OP_RRELEASE,
	OP_COMPLETE,
	OP_REAP,
	OP_EXECUTE,
	OP_EXPLAIN,
	OP_FAILNEXT,
	OP_CLOSE,
	OP_N
};

static const char *const op_names[OP_N] = {
	"adopt",
	"register_source",
	"ensure",
	"copy",
	"move",
	"drop",
	"discard",
	"acquire",
	"lease_release",
	"lease_free",
	"lease_add_stream",
	"lease_value",
	"hold",
	"hold_release",
	"reserve",
	"reservation_release",
	"event_complete",
	"reap",
	"execute_actions",
	"explain",
	"source_fail_next",
	"close",
};

const char *ip_op_name(unsigned op)
{
	return op < OP_N ? op_names[op] : "?";
}

unsigned ip_nops(void)
{
	return OP_N;
}

static const struct rsd_type other_type = { "other", &rsd_resident_type };

struct ip_src {
	struct ip *ip;
	int v;
};

struct ip {
	const struct ip_opts *o;
	uint64_t rng;
	size_t pos;
	bool exhausted;
	struct rsd_simdev *sd;
	struct rsd_manager *m;
	void *stream[MS_N];
	/* The simulated device runs on command. xfer_pump keeps the transfer
	 * streams (the device's own and streams 4, 5) progressing, as a GPU's
	 * would; wait_pump, during a call that waits for consumer streams,
	 * completes exactly the streams the model says it waits for. */
	struct simpump xfer_pump, wait_pump;
	struct model md;
	struct rsd_handle h[MM_VALUES];
	struct ip_src src[MM_VALUES];
	enum msrc_fail real_fail[MM_VALUES];
	unsigned loads[MM_VALUES], releases[MM_VALUES];
	struct rsd_lease *lease[MM_LIFETIMES];
	struct rsd_hold *hold[MM_LIFETIMES];
	struct rsd_reservation *resv[MM_LIFETIMES];
	uint64_t last_version;
	unsigned step;
	char hist[16][160];
	unsigned nhist;
	char *why;
	size_t wlen;
	struct ip_stats *st;
	/* alloc_fault runs (interp_fault.inc). */
	uint64_t fired0;    /* rsd__fault_fired() when the current call began */
	bool injected;	    /* a call reported the fault: none may again */
	bool plan_injected; /* it stopped an execute_actions after a prefix */
	size_t plan_n;	    /* that plan's committed prefix */
	struct mact plan_a[8];
	struct model saved; /* the model before the current operation */
	uint64_t armed_at;  /* rsd__fault_fired() when the point was armed */
};

static bool fault_now(struct ip *ip);
static bool fault_reported(struct ip *ip, const char *what, int got);
static bool fault_step(struct ip *ip);
static bool fault_unrecorded(struct ip *ip, int k);
static bool snapshot_checked(struct ip *ip);
static bool close_checked(struct ip *ip, unsigned flags, const char *what);
static int manager_create_checked(struct ip *ip, const struct rsd_manager_config *cfg);
static void arm_alloc_fault(struct ip *ip);
static void disarm_alloc_fault(struct ip *ip);

/* ---- decisions ----------------------------------------------------------- */

static unsigned rnd(struct ip *ip, unsigned n)
{
	uint64_t x;

	if (n <= 1)
		return 0;
	if (ip->o->data) {
		if (ip->pos >= ip->o->len) {
			ip->exhausted = true;
			return 0;
		}
		x = ip->o->data[ip->pos++];
		if (n > 256 && ip->pos < ip->o->len)
			x = x << 8 | ip->o->data[ip->pos++];
		return (unsigned)(x % n);
	}
	/* splitmix64 */
	x = (ip->rng += 0x9e3779b97f4a7c15ull);
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return (unsigned)((x ^ (x >> 31)) % n);
}

static void note(struct ip *ip, const char *fmt, ...)
{
	char *b = ip->hist[ip->nhist++ % 16];
	va_list ap;
	int k;

	k = snprintf(b, 160, "step %u: ", ip->step);
	va_start(ap, fmt);
	vsnprintf(b + k, (size_t)(160 - k), fmt, ap);
	va_end(ap);
	if (ip->o->log)
		fprintf(ip->o->log, "%s\n", b);
}

static bool diverge(struct ip *ip, const char *fmt, ...)
{
	size_t k;
	va_list ap;

	k = (size_t)snprintf(ip->why, ip->wlen,
			     "seed %llu step %u: ", (unsigned long long)ip->o->seed, ip->step);
	va_start(ap, fmt);
	if (k < ip->wlen)
		k += (size_t)vsnprintf(ip->why + k, ip->wlen - k, fmt, ap);
	va_end(ap);
	if (k < ip->wlen)
		k += (size_t)snprintf(ip->why + k, ip->wlen - k,
				      " [last error: %s]\nlast operations:\n",
				      rsd_last_error()->message);
	for (unsigned i = ip->nhist > 16 ? ip->nhist - 16 : 0; i < ip->nhist && k < ip->wlen; i++)
		k += (size_t)snprintf(ip->why + k, ip->wlen - k, "  %s\n", ip->hist[i % 16]);
	ip->st->divergences++;
	return false;
}

static bool same_code(struct ip *ip, const char *what, int got, int exp)
{
	if (got == exp) {
		ip->st->codes[-got < 32 ? -got : 31]++;
		return true;
	}
	if (got && fault_now(ip))
		return fault_reported(ip, what, got);
	return diverge(ip, "%s returned %d (%s), model says %d (%s)", what, got,
		       rsd_strerror(got), exp, rsd_strerror(exp));
}

/* ---- sources --------------------------------------------------------------- */

static int src_load(void *ctx, struct rsd_resident **out)
{
	struct ip_src *s = ctx;
	struct ip *ip = s->ip;
	struct mval *x = &ip->md.val[s->v];
	enum msrc_fail f = ip->real_fail[s->v];
	uint64_t n = x->logical + (f == MSRC_WRONG_SIZE ? 8 : 0);

	ip->loads[s->v]++;
	ip->real_fail[s->v] = MSRC_OK;
	if (f == MSRC_FAIL_POS)
		return 7;
	if (f == MSRC_FAIL_NOMEM)
		return -RSD_ENOMEM;
	return rsd_resident_alloc(ip->m, &rsd_resident_type, ml_loc(x->src_loc), 1, &n, NULL, 0,
				  out);
}

static void src_release(void *ctx)
{
	struct ip_src *s = ctx;

	s->ip->releases[s->v]++;
}

/* ---- argument choices ------------------------------------------------------- */

static int pick_loc(struct ip *ip)
{
	return rnd(ip, 24) == 0 ? ML_CUDA2 : (int)rnd(ip, ML_VALID);
}

static int pick_h(struct ip *ip)
{
	unsigned r = rnd(ip, 40);

	if (r == 0)
		return MH_FOREIGN;
	if (r == 1)
		return MH_UNKNOWN;
	if (r == 2 && ip->md.nval)
		return MH_BADTYPE;
	if (!ip->md.nval)
		return MH_UNKNOWN;
	/* prefer recent values */
	if (rnd(ip, 2))
		return ip->md.nval - 1 - (int)rnd(ip, ip->md.nval < 4 ? ip->md.nval : 4);
	return (int)rnd(ip, ip->md.nval);
}

static struct rsd_handle handle_of(struct ip *ip, int ref)
{
	struct rsd_handle h = { rsd_manager_id(ip->m), UINT64_MAX - 7, &rsd_resident_type };

	if (ref >= 0)
		return ip->h[ref];
	if (ref == MH_FOREIGN)
		h.manager_id += 1000;
	if (ref == MH_BADTYPE) {
		h = ip->h[0];
		h.type = &other_type;
	}
	return h;
}

static uint64_t pick_size(struct ip *ip)
{
	static const uint64_t sz[] = { 0, 8, 16, 16, 24, 32, 32, 48 };

	return sz[rnd(ip, 8)];
}

/* A transfer stream for a destination: usually none. */
static int pick_xfer_stream(struct ip *ip)
{
	return rnd(ip, 6) ? MS_NONE : MS_NCONSUMER + (int)rnd(ip, 2);
}

static void *stream_ptr(struct ip *ip, int s)
{
	return s == MS_NONE ? NULL : ip->stream[s];
}

static int pick_lease(struct ip *ip)
{
	int k = (int)rnd(ip, MM_LIFETIMES);

	for (int i = 0; i < MM_LIFETIMES; i++, k = (k + 1) % MM_LIFETIMES)
		if (ip->lease[k])
			return k;
	return -1;
}

static int pick_hold(struct ip *ip)
{
	int k = (int)rnd(ip, MM_LIFETIMES);

	for (int i = 0; i < MM_LIFETIMES; i++, k = (k + 1) % MM_LIFETIMES)
		if (ip->hold[k])
			return k;
	return -1;
}

static int pick_resv(struct ip *ip)
{
	int k = (int)rnd(ip, MM_LIFETIMES);

	for (int i = 0; i < MM_LIFETIMES; i++, k = (k + 1) % MM_LIFETIMES)
		if (ip->resv[k])
			return k;
	return -1;
}

static int nlive(void *const *objs)
{
	int n = 0;

	for (int i = 0; i < MM_LIFETIMES; i++)
		n += objs[i] != NULL;
	return n;
}

/* ---- comparisons -------------------------------------------------------------- */

static bool loc_eq(bool ha, struct rsd_location a, bool hb, struct rsd_location b)
{
	return ha == hb && (!ha || rsd_location_equal(a, b));
}

static bool cmp_report(struct ip *ip, const char *what, const struct rsd_transition *got,
		       const struct rsd_transition *exp, const struct mact *a)
{
	struct rsd_handle h = handle_of(ip, a->h);

	if (got->action.kind != a->kind || !rsd_handle_equal(got->action.handle, h))
		return diverge(ip, "%s: report action kind/handle differ", what);
	if (a->kind != RSD_ACT_DISCARD && !rsd_location_equal(got->action.location, ml_loc(a->loc)))
		return diverge(ip, "%s: report action location differs", what);
	if (a->kind == RSD_ACT_MOVE &&
	    !loc_eq(got->action.has_from, got->action.from, a->has_from, ml_loc(a->from)))
		return diverge(ip, "%s: report action from differs", what);
	if (got->no_op != exp->no_op)
		return diverge(ip, "%s: report no_op %d, model %d", what, got->no_op, exp->no_op);
	if (!loc_eq(got->has_source, got->source, exp->has_source, exp->source))
		return diverge(ip, "%s: report source %s, model %s", what,
			       got->has_source ? ml_name(ml_from_loc(got->source)) : "absent",
			       exp->has_source ? ml_name(ml_from_loc(exp->source)) : "absent");
	if (!loc_eq(got->has_destination, got->destination, exp->has_destination, exp->destination))
		return diverge(ip, "%s: report destination differs", what);
	if (got->logical_nbytes != exp->logical_nbytes ||
	    got->storage_nbytes != exp->storage_nbytes)
		return diverge(ip, "%s: report bytes %llu/%llu, model %llu/%llu", what,
			       (unsigned long long)got->logical_nbytes,
			       (unsigned long long)got->storage_nbytes,
			       (unsigned long long)exp->logical_nbytes,
			       (unsigned long long)exp->storage_nbytes);
	if ((got->reason == NULL) != (exp->reason == NULL) ||
	    (got->reason && strcmp(got->reason, exp->reason)))
		return diverge(ip, "%s: report reason '%s', model '%s'", what,
			       got->reason ? got->reason : "(null)",
			       exp->reason ? exp->reason : "(null)");
	if (got->completed_at_ns < got->started_at_ns)
		return diverge(ip, "%s: completed_at_ns before started_at_ns", what);
	return true;
}

static bool cmp_value(struct ip *ip, int v, const struct rsd_value_snapshot *g)
{
	struct mval *x = &ip->md.val[v];

	if (!rsd_handle_equal(g->handle, ip->h[v]))
		return diverge(ip, "snapshot value %d: handle differs", v);
	if (g->spec.logical_nbytes != x->logical || g->spec.storage_nbytes != x->charge ||
	    g->spec.replica_mode != x->mode ||
	    g->spec.recoverability != (x->ever_source ? RSD_RECONSTRUCTIBLE : RSD_MUST_PRESERVE))
		return diverge(ip, "snapshot value %d: spec differs", v);
	if (g->has_source != x->has_source ||
	    !loc_eq(g->has_source_location, g->source_location, x->has_source,
		    ml_loc(x->src_loc)) ||
	    g->discarded != x->discarded)
		return diverge(ip, "snapshot value %d: source/discarded differ (got %d/%d/%d)", v,
			       g->has_source, g->has_source_location, g->discarded);
	if (g->nmaterializations != (size_t)x->nmat)
		return diverge(ip, "snapshot value %d: %zu materializations, model %d", v,
			       g->nmaterializations, x->nmat);
	for (int i = 0; i < x->nmat; i++) {
		const struct rsd_materialization_snapshot *m = &g->materializations[i];
		const struct mmat *e = &x->mat[i];

		if (!rsd_location_equal(m->location, ml_loc(e->loc)))
			return diverge(ip, "snapshot value %d mat %d: at %s, model %s", v, i,
				       ml_name(ml_from_loc(m->location)), ml_name(e->loc));
		if (m->logical_nbytes != x->logical || m->charged_nbytes != x->charge ||
		    m->storage_nbytes != x->logical)
			return diverge(ip, "snapshot value %d mat %d: bytes %llu/%llu/%llu", v, i,
				       (unsigned long long)m->logical_nbytes,
				       (unsigned long long)m->storage_nbytes,
				       (unsigned long long)m->charged_nbytes);
		if (m->use_count != e->use || m->hold_count != e->hold ||
		    m->pending_event_count != e->pend)
			return diverge(
				ip,
				"snapshot value %d mat %s: use/hold/pending %llu/%llu/%llu, model %u/%u/%u",
				v, ml_name(e->loc), (unsigned long long)m->use_count,
				(unsigned long long)m->hold_count,
				(unsigned long long)m->pending_event_count, e->use, e->hold,
				e->pend);
	}
	return true;
}

static bool cmp_location(struct ip *ip, int l, const struct rsd_location_snapshot *g)
{
	struct mlocrec *r = &ip->md.loc[l];
	uint64_t nv = 0, nr = 0;

	for (int v = 0; v < ip->md.nval; v++)
		nv += model_mat(&ip->md, v, l) != NULL;
	for (int i = 0; i < MM_LIFETIMES; i++)
		nr += ip->md.resv[i].live && ip->md.resv[i].active && ip->md.resv[i].loc == l;
	if (g->has_budget != r->has_budget || (r->has_budget && g->budget_bytes != r->budget))
		return diverge(ip, "snapshot %s: budget differs", ml_name(l));
	if (g->used_bytes != r->used || g->reserved_bytes != r->reserved ||
	    g->peak_used_bytes != r->peak_used || g->peak_charged_bytes != r->peak_charged)
		return diverge(
			ip,
			"snapshot %s: used/reserved/peak_used/peak_charged %llu/%llu/%llu/%llu, model %llu/%llu/%llu/%llu",
			ml_name(l), (unsigned long long)g->used_bytes,
			(unsigned long long)g->reserved_bytes,
			(unsigned long long)g->peak_used_bytes,
			(unsigned long long)g->peak_charged_bytes, (unsigned long long)r->used,
			(unsigned long long)r->reserved, (unsigned long long)r->peak_used,
			(unsigned long long)r->peak_charged);
	if (g->value_count != nv || g->reservation_count != nr)
		return diverge(ip, "snapshot %s: value/reservation counts differ", ml_name(l));
	return true;
}

static bool cmp_snapshot(struct ip *ip)
{
	struct rsd_snapshot *s = NULL;
	char why[256];
	uint64_t ver = 0;
	int err, k;
	bool ok = false;

	err = rsd_snapshot_take(ip->m, &s);
	if (!same_code(ip, "rsd_snapshot_take", err, ip->md.closed ? -RSD_ECLOSED : 0))
		return false;
	if (err && !ip->md.closed)
		return true; /* an injected failure: the caller takes it again */
	err = rsd_manager_state_version_get(ip->m, &ver);
	if (!same_code(ip, "rsd_manager_state_version_get", err, ip->md.closed ? -RSD_ECLOSED : 0))
		goto out;
	ip->st->snapshots++;
	for (int v = 0; v < ip->md.nval; v++)
		if (ip->loads[v] != ip->md.val[v].loads ||
		    ip->releases[v] != ip->md.val[v].releases) {
			diverge(ip, "value %d: source loaded %u/released %u times, model %u/%u", v,
				ip->loads[v], ip->releases[v], ip->md.val[v].loads,
				ip->md.val[v].releases);
			goto out;
		}
	if (ip->md.closed) {
		ok = true;
		goto out;
	}
	if (s->state_version != ip->md.version || ver != ip->md.version) {
		diverge(ip, "state_version %llu (read %llu), model %llu",
			(unsigned long long)s->state_version, (unsigned long long)ver,
			(unsigned long long)ip->md.version);
		goto out;
	}
	if (s->state_version < ip->last_version) {
		diverge(ip, "state_version went backwards");
		goto out;
	}
	ip->last_version = s->state_version;
	if (!ip_snapshot_invariants(s, why, sizeof(why))) {
		diverge(ip, "snapshot invariant: %s", why);
		goto out;
	}
	if (s->manager_id != rsd_manager_id(ip->m) || s->nvalues != (size_t)ip->md.nval) {
		diverge(ip, "snapshot: %zu values, model %d", s->nvalues, ip->md.nval);
		goto out;
	}
	for (int v = 0; v < ip->md.nval; v++)
		if (!cmp_value(ip, v, &s->values[v]))
			goto out;
	if (s->nlocations != (size_t)ip->md.nknown) {
		diverge(ip, "snapshot: %zu locations, model %d", s->nlocations, ip->md.nknown);
		goto out;
	}
	for (int i = 0; i < ip->md.nknown; i++) {
		if (!rsd_location_equal(s->locations[i].location, ml_loc(ip->md.known[i]))) {
			diverge(ip, "snapshot location %d is %s, model %s", i,
				ml_name(ml_from_loc(s->locations[i].location)),
				ml_name(ip->md.known[i]));
			goto out;
		}
		if (!cmp_location(ip, ip->md.known[i], &s->locations[i]))
			goto out;
	}
	k = 0;
	for (uint64_t o = 1; o <= ip->md.order; o++)
		for (int i = 0; i < MM_LIFETIMES; i++) {
			struct mresv *r = &ip->md.resv[i];
			const struct rsd_reservation_snapshot *g;

			if (!r->live || !r->active || r->order != o)
				continue;
			if ((size_t)k >= s->nreservations) {
				diverge(ip, "snapshot lacks reservation %s", r->label);
				goto out;
			}
			g = &s->reservations[k++];
			if (!rsd_location_equal(g->location, ml_loc(r->loc)) ||
			    g->nbytes != r->nbytes || strcmp(g->label, r->label)) {
				diverge(ip, "snapshot reservation %d differs (%s)", k - 1,
					g->label);
				goto out;
			}
		}
	if ((size_t)k != s->nreservations) {
		diverge(ip, "snapshot has %zu reservations, model %d", s->nreservations, k);
		goto out;
	}
	ok = true;
out:
	rsd_snapshot_free(s);
	return ok;
}

#include "interp_ops.inc"
#include "interp_fault.inc"
