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
#include "compare.h"
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
	return diverge(ip, "%s returned %d (%s), model says %d (%s)", what, got, rsd_strerror(got),
		       exp, rsd_strerror(exp));
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

static bool cmp_report(struct ip *ip, const char *what, const struct rsd_transition *got,
		       const struct rsd_transition *exp, const struct mact *a)
{
	char why[512];

	return mc_report(what, got, exp, a, handle_of(ip, a->h), why, sizeof(why)) ||
	       diverge(ip, "%s", why);
}

static bool cmp_snapshot(struct ip *ip)
{
	struct rsd_snapshot *s = NULL;
	char why[512];
	uint64_t ver = 0;
	int err;
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
	if (s->manager_id != rsd_manager_id(ip->m)) {
		diverge(ip, "snapshot: manager id differs");
		goto out;
	}
	if (!mc_state(&ip->md, ip->h, s, 0, why, sizeof(why))) {
		diverge(ip, "%s", why);
		goto out;
	}
	ok = true;
out:
	rsd_snapshot_free(s);
	return ok;
}

#include "interp_ops.inc"
#include "interp_fault.inc"
