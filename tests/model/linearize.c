// SPDX-License-Identifier: MIT
/*
 * Linearizability against the model (linearize.h).
 *
 * Recording: each worker thread logs its writer sections (internal.h,
 * rsd__lin_log_set): every take and release of the transition lock, with a
 * process-wide number for each take, and the start and end of every action,
 * each with state_version at that instant. Each call remembers which
 * entries are its own.
 *
 * Linearization points: state_version steps only inside sections, and a
 * step between two entries of one section is that thread's own (the lock
 * excludes the others). A call (or a plan's action) that stepped it took
 * effect in the section where it did; one that did not took effect at the
 * end of its last section (its last look at the state). Sections are
 * totally ordered by their numbers, so the events sort into one history;
 * the model replays it and must be at the event's starting version before
 * and its final version after, and return the same code and reports. A
 * call whose steps spread over two sections has no single linearization
 * point and is reported as a divergence. Plans are replayed action by
 * action: the preflight at the plan's first section, each action at its
 * own point, other threads' calls in between.
 *
 * Concurrent-only outcomes (reference.md §21.2) are accepted only when the
 * history confirms them, and must have changed nothing:
 * -RSD_EINUSE "a transfer is in flight" from a drop, move-out or discard
 * that the model would have run, when another call's action on the same
 * value was inside its transfer phase (begun before, ended after the
 * event); -RSD_EBUDGET (and a preflight's -RSD_EPLAN) the model would not
 * have returned, when a transfer to or loading at that location, or a plan
 * holding its headroom, was in flight.
 *
 * Not-waiting calls (the hostile mode's model_shape runs): the call is
 * replayed at its commit with the model in queue mode, and the completion
 * of each copy it queued, logged by whichever call folds it in
 * (RSD_LIN_QDONE), is an event of its own (model_copy_done()).
 *
 * Restrictions: transitions use no caller streams and leases only host
 * locations, so no lease's device event outlives a call (a pending lease's
 * reap happens whenever the background device completes it, in whichever
 * call reaps first, which no history records); source-load failures are
 * injected into single transitions only.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "compare.h"
#include "interp.h"
#include "linearize.h"
#include "model.h"

#define LZ_THREADS 8
#define LZ_LIVES 6 /* lifetimes of each kind a thread keeps */
#define LZ_ACTS 4
#define LZ_MAX_LIVES 4096 /* lifetimes numbered in one run (the probe stops short) */

enum lz_kind {
	K_ADOPT,
	K_SOURCE,
	K_ACT, /* ensure, copy, move, drop, discard */
	K_ACQUIRE,
	K_LEND, /* release then free */
	K_LFREE,
	K_HOLD,
	K_HEND,
	K_RESERVE,
	K_REND,
	K_PLAN,
	K_REAP,	 /* rsd_manager_reap() */
	K_QDONE, /* not a call: a queued copy folded in (RSD_LIN_QDONE) */
	K_N
};

static const char *const call_names[] = { "ensure", "copy", "move", "drop", "discard" };

struct lz_act {
	enum rsd_action_kind kind;
	uint64_t hid;
	int loc;
	bool has_from;
	int from;
};

struct lz_op {
	enum lz_kind kind;
	int thread;
	unsigned call; /* K_ACT: index into call_names */
	int loc, rl, life, nh;
	enum rsd_replica_mode mode;
	uint64_t n, charge, hid[MM_HMAX];
	struct lz_act a[LZ_ACTS];
	size_t na;
	bool want, has_expected;
	bool async; /* a not-waiting call (its device copies are queued) */
	uint64_t expected;
	enum msrc_fail fail;
	unsigned nloads;
	char label[16];
	/* Results. */
	int err, cause, bloc;
	long failed;
	char msg[200];
	uint64_t out_id;
	struct rsd_transition rep[LZ_ACTS];
	size_t nrep;
	/* This call's log entries. */
	size_t e0, ne;
};

struct lz_val {
	struct rsd_handle h;
	int owner, src_loc;
	bool source;
	uint64_t logical;
	atomic_uint releases;
	unsigned pat; /* its bytes' pattern (hz_pat()); its slot */
};

struct lz;

struct lz_thread {
	struct lz *z;
	int id;
	uint64_t rng;
	pthread_t th;
	struct rsd_lin_log log;
	struct lz_op *op;
	size_t nop, capop;
	struct rsd_lease *lease[LZ_LIVES];
	struct rsd_hold *hold[LZ_LIVES];
	struct rsd_reservation *resv[LZ_LIVES];
	int lease_life[LZ_LIVES], hold_life[LZ_LIVES], resv_life[LZ_LIVES];
	unsigned long codes[32]; /* summed into lz_stats after the run */
	/* The hostile mode (hostile.inc). */
	struct hz_wd {
		atomic_ullong t0; /* when the call began (ns); 0: between calls */
		atomic_ullong hid;
		atomic_int kind, loc;
		atomic_uint n;
		atomic_uintptr_t token; /* rsd__thread_token() of the thread */
	} wd;
	void *stream[2][2]; /* per device: the consumer stream, a second one */
	unsigned sgen[2];   /* z->copy_gen when stream[d] were made */
	struct rsd_lease *glease[LZ_LIVES];
	void *gstream[LZ_LIVES]; /* the stream each GPU lease was taken with */
	struct hz_kread *kreads; /* kernels' arguments, freed after the run */
	unsigned long async_calls, waits, gpu_leases, kernels, uses;
};

/* One event of the history: a call, a plan's preflight (act -1) or action. */
struct lz_ev {
	uint64_t seq;
	size_t pos;
	struct lz_op *op;
	int act;
	uint64_t v0, v1;
	/* An action's transfer phase, for the concurrent-only checks. */
	uint64_t bseq, eseq;
	size_t bpos, epos;
	bool paused;
};

struct lz {
	const struct lz_opts *o;
	struct lz_stats *st;
	struct rsd_simdev *sd;
	struct rsd_manager *m;
	pthread_mutex_t vlock;
	struct lz_val val[MM_VALUES];
	int nval, pub[MM_VALUES], npub;
	atomic_int next_life;
	atomic_bool reentry_bad;
	/* [LZ_THREADS]: the checker thread's ledger probes, in runs to replay */
	struct lz_thread th[LZ_THREADS + 1];
	/* The hostile mode (hostile.inc): this run's hostile calls are on;
	 * fault arming and the first failure, under flock. */
	bool hostile_ops;
	/* A hostile run replayed unless a fault fires: its hostile calls are
	 * the not-waiting ones, waits on their copies and reaps (no GPU
	 * lease, controller use or stream destruction), all logged. */
	bool model_shape;
	pthread_mutex_t flock;
	struct hz_arm {
		bool on;
		uint64_t base;
		unsigned n;
	} arm[LZF_N];
	unsigned fired; /* 1u << LZF_* */
	bool failed;
	atomic_uint copy_gen;
	atomic_ullong hot; /* a value (id << 2 | host location) with a queued copy, or 0 */
	atomic_bool stop;
	/* The ledger probe's reservation is the checker's own lifetime: the
	 * end checks turn probes off (probes_off) and wait until none is
	 * running (probing) before they count lifetimes. */
	atomic_bool probes_off, probing;
	pthread_t checker;
	struct hz_wd wd_main;
	struct rsd_controller *ctl; /* for LZF_USES */
	unsigned long probes;
	/* Replay. */
	struct model md;
	struct rsd_handle mh[MM_VALUES]; /* model value -> handle */
	int life_slot[LZ_MAX_LIVES];
	struct lz_op *qd; /* the K_QDONE pseudo-calls of the history */
	struct lz_ev *ev;
	size_t nev, capev;
	char *why;
	size_t wlen;
};

static void hz_fill(const struct lz_val *v, struct rsd_resident *r);
static void hz_check_lease(struct lz_thread *t, struct rsd_lease *l);

static _Thread_local enum msrc_fail tl_fail;
static _Thread_local unsigned tl_loads;
static _Thread_local uint64_t tl_rng;

static unsigned lz_rnd(uint64_t *s, unsigned n)
{
	uint64_t x;

	if (n <= 1)
		return 0;
	x = (*s += 0x9e3779b97f4a7c15ull);
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return (unsigned)((x ^ (x >> 31)) % n);
}

static void sleep_us(unsigned us)
{
	struct timespec ts = { 0, (long)us * 1000 };

	while (us && nanosleep(&ts, &ts))
		;
}

/* ---- sources ----------------------------------------------------------------- */

struct lz_src {
	struct lz *z;
	struct lz_val *v;
};

static struct lz_src srcs[MM_VALUES * LZ_THREADS];

static int lz_load(void *ctx, struct rsd_resident **out)
{
	struct lz_src *s = ctx;
	enum msrc_fail f = tl_fail;
	uint64_t n = s->v->logical + (f == MSRC_WRONG_SIZE ? 8 : 0);
	struct rsd_reservation *r = NULL;

	tl_loads++;
	tl_fail = MSRC_OK;
	/* The loading thread alone is refused (§9.1). */
	if (lz_rnd(&tl_rng, 4) == 0 &&
	    rsd_reserve(s->z->m, ml_loc(ML_PAGE), 8, "reentry", &r) != -RSD_EREENTRANT) {
		atomic_store(&s->z->reentry_bad, true);
		if (r)
			rsd_reservation_free(r);
	}
	sleep_us(lz_rnd(&tl_rng, s->z->o->load_max_us + 1));
	if (f == MSRC_FAIL_POS)
		return 7;
	if (f == MSRC_FAIL_NOMEM)
		return -RSD_ENOMEM;
	f = rsd_resident_alloc(s->z->m, &rsd_resident_type, ml_loc(s->v->src_loc), 1, &n, NULL, 0,
			       out);
	if (!f)
		hz_fill(s->v, *out);
	return f;
}

static void lz_release(void *ctx)
{
	struct lz_src *s = ctx;

	atomic_fetch_add(&s->v->releases, 1);
}

/* ---- recording --------------------------------------------------------------- */

static struct lz_op *op_begin(struct lz_thread *t, enum lz_kind kind)
{
	struct lz_op *op;

	if (t->nop == t->capop) {
		t->capop = t->capop ? 2 * t->capop : 256;
		t->op = realloc(t->op, t->capop * sizeof(*t->op));
		if (!t->op)
			abort();
	}
	op = &t->op[t->nop++];
	memset(op, 0, sizeof(*op));
	op->kind = kind;
	op->thread = t->id;
	op->failed = -1;
	op->bloc = -1;
	op->e0 = t->log.n;
	tl_loads = 0;
	return op;
}

static void op_end(struct lz_thread *t, struct lz_op *op, int err)
{
	const struct rsd_error *e = rsd_last_error();

	op->ne = t->log.n - op->e0;
	op->err = err;
	op->nloads = tl_loads;
	tl_fail = MSRC_OK;
	if (err) {
		memcpy(op->msg, e->message, sizeof(op->msg) - 1);
		op->cause = e->cause;
		op->failed = e->failed_action_index;
		if (e->has_budget && e->has_location)
			op->bloc = ml_from_loc(e->location);
	}
	t->codes[-err < 32 ? -err : 31]++;
}

/* A published value: the thread's own (half the time) or anyone's. */
static bool pick_val(struct lz_thread *t, uint64_t *hid, struct lz_val **out)
{
	struct lz *z = t->z;
	struct lz_val *v = NULL;

	pthread_mutex_lock(&z->vlock);
	if (z->npub) {
		int k = z->pub[lz_rnd(&t->rng, (unsigned)z->npub)];

		if (lz_rnd(&t->rng, 2))
			for (int i = 0; i < z->npub; i++) {
				struct lz_val *w = &z->val[z->pub[(k + i) % z->npub]];

				if (w->owner == t->id) {
					k = z->pub[(k + i) % z->npub];
					break;
				}
			}
		v = &z->val[k];
	}
	pthread_mutex_unlock(&z->vlock);
	if (!v)
		return false;
	*hid = v->h.id;
	if (out)
		*out = v;
	return true;
}

static struct rsd_handle lz_handle(struct lz *z, uint64_t hid)
{
	struct rsd_handle h = { 0 };

	pthread_mutex_lock(&z->vlock);
	for (int i = 0; i < z->nval; i++)
		if (z->val[i].h.id == hid)
			h = z->val[i].h;
	pthread_mutex_unlock(&z->vlock);
	return h;
}

static uint64_t lz_size(struct lz_thread *t)
{
	static const uint64_t sz[] = { 0, 8, 16, 16, 24, 32 };

	return sz[lz_rnd(&t->rng, 6)];
}

/* A new value's slot, or NULL when the model's table would overflow. */
static struct lz_val *claim_val(struct lz *z)
{
	struct lz_val *v = NULL;

	pthread_mutex_lock(&z->vlock);
	if (z->nval < MM_VALUES - 2)
		v = &z->val[z->nval++];
	pthread_mutex_unlock(&z->vlock);
	return v;
}

static void publish_val(struct lz *z, struct lz_val *v, struct rsd_handle h)
{
	pthread_mutex_lock(&z->vlock);
	v->h = h; /* others look handles up under vlock */
	z->pub[z->npub++] = (int)(v - z->val);
	pthread_mutex_unlock(&z->vlock);
}

static void do_create(struct lz_thread *t, bool source)
{
	struct lz *z = t->z;
	struct lz_val *v = claim_val(z);
	struct lz_op *op;
	struct rsd_handle h;
	int err;

	if (!v)
		return;
	v->owner = t->id;
	v->logical = lz_size(t);
	v->pat = (unsigned)(v - z->val);
	if (source) {
		struct lz_src *s = &srcs[v - z->val];
		struct rsd_source src = { lz_load, lz_release, s };
		struct rsd_value_spec spec = { &rsd_resident_type, v->logical,
					       v->logical + (lz_rnd(&t->rng, 3) ? 0 : 8),
					       RSD_REPLICABLE, RSD_RECONSTRUCTIBLE };

		*s = (struct lz_src){ z, v };
		v->source = true;
		v->src_loc = (int)lz_rnd(&t->rng, ML_VALID);
		op = op_begin(t, K_SOURCE);
		op->n = v->logical;
		op->charge = spec.storage_nbytes;
		op->loc = v->src_loc;
		err = rsd_register_source(z->m, &spec, &src, ml_loc(v->src_loc), &h);
	} else {
		struct rsd_resident *r;
		struct rsd_location at;

		op = op_begin(t, K_ADOPT);
		op->rl = (int)lz_rnd(&t->rng, ML_VALID);
		op->loc = lz_rnd(&t->rng, 4) ? op->rl : -1;
		op->mode = lz_rnd(&t->rng, 3) ? RSD_REPLICABLE : RSD_EXCLUSIVE;
		op->n = v->logical;
		at = ml_loc(op->loc);
		if (rsd_resident_alloc(z->m, &rsd_resident_type, ml_loc(op->rl), 1, &v->logical,
				       NULL, 0, &r)) {
			if (!z->o->hostile)
				abort();
			t->nop--; /* an armed fault: the slot stays unpublished */
			return;
		}
		hz_fill(v, r);
		op->e0 = t->log.n;
		err = rsd_adopt(z->m, r, op->loc < 0 ? NULL : &at, op->mode, &h);
		if (err)
			rsd_resident_free(r);
	}
	op_end(t, op, err);
	if (!err) {
		op->out_id = h.id;
		publish_val(z, v, h);
	}
}

static struct lz_act pick_act(struct lz_thread *t, enum rsd_action_kind kind, struct lz_val **v)
{
	struct lz_act a = { .kind = kind, .loc = (int)lz_rnd(&t->rng, ML_VALID) };

	pick_val(t, &a.hid, v);
	if (kind == RSD_ACT_MOVE && lz_rnd(&t->rng, 4) == 0) {
		a.has_from = true;
		a.from = (int)lz_rnd(&t->rng, ML_VALID);
	}
	if (kind == RSD_ACT_DISCARD)
		a.loc = ML_PAGE;
	return a;
}

static struct rsd_action real_act(struct lz *z, const struct lz_act *a)
{
	struct rsd_handle h = lz_handle(z, a->hid);
	struct rsd_location from = ml_loc(a->from);

	switch (a->kind) {
	case RSD_ACT_ENSURE:
		return rsd_action_ensure(h, ml_loc(a->loc));
	case RSD_ACT_MOVE:
		return rsd_action_move(h, ml_loc(a->loc), a->has_from ? &from : NULL);
	case RSD_ACT_DROP:
		return rsd_action_drop(h, ml_loc(a->loc));
	case RSD_ACT_DISCARD:
		break;
	}
	return rsd_action_discard(h);
}

static void do_transition(struct lz_thread *t)
{
	static const enum rsd_action_kind kinds[] = { RSD_ACT_ENSURE, RSD_ACT_ENSURE, RSD_ACT_MOVE,
						      RSD_ACT_DROP, RSD_ACT_DISCARD };
	static const unsigned char w[] = { 12, 3, 10, 8, 2 };
	unsigned r = lz_rnd(&t->rng, 35), call = 0;
	struct lz *z = t->z;
	struct lz_val *v = NULL;
	struct rsd_transition *rep;
	struct lz_act a;
	struct lz_op *op;
	int err;

	while (r >= w[call])
		r -= w[call++];
	a = pick_act(t, kinds[call], &v);
	if (!v)
		return;
	op = op_begin(t, K_ACT);
	op->call = call;
	op->a[0] = a;
	op->na = 1;
	op->want = lz_rnd(&t->rng, 8) != 0;
	if (v->source && a.kind != RSD_ACT_DROP && a.kind != RSD_ACT_DISCARD &&
	    lz_rnd(&t->rng, 8) == 0)
		op->fail = tl_fail = (enum msrc_fail)(1 + lz_rnd(&t->rng, 3));
	rep = op->want ? &op->rep[0] : NULL;
	switch (call) {
	case 0:
		err = rsd_ensure(z->m, v->h, ml_loc(a.loc), NULL, rep);
		break;
	case 1:
		err = rsd_copy(z->m, v->h, ml_loc(a.loc), NULL, rep);
		break;
	case 2: {
		struct rsd_location from = ml_loc(a.from);

		err = rsd_move(z->m, v->h, ml_loc(a.loc), a.has_from ? &from : NULL, NULL, rep);
		break;
	}
	case 3:
		err = rsd_drop(z->m, v->h, ml_loc(a.loc), rep);
		break;
	default:
		err = rsd_discard(z->m, v->h, rep);
		break;
	}
	op_end(t, op, err);
	op->nrep = !err && op->want;
}

static int free_slot(void *const *objs)
{
	for (int i = 0; i < LZ_LIVES; i++)
		if (!objs[i])
			return i;
	return -1;
}

static int used_slot(struct lz_thread *t, void *const *objs)
{
	int k = (int)lz_rnd(&t->rng, LZ_LIVES);

	for (int i = 0; i < LZ_LIVES; i++, k = (k + 1) % LZ_LIVES)
		if (objs[k])
			return k;
	return -1;
}

static void lz_handles(struct lz_thread *t, struct lz_op *op, struct rsd_handle *rh)
{
	int n = 1 + (int)lz_rnd(&t->rng, 3);

	op->nh = 0;
	for (int i = 0; i < n; i++)
		if (pick_val(t, &op->hid[op->nh], NULL))
			op->nh++;
	if (op->nh && lz_rnd(&t->rng, 4) == 0)
		op->hid[op->nh++] = op->hid[0]; /* a duplicate collapses */
	for (int i = 0; i < op->nh; i++)
		rh[i] = lz_handle(t->z, op->hid[i]);
}

static void do_lifetime(struct lz_thread *t, enum lz_kind kind)
{
	struct lz *z = t->z;
	struct rsd_handle rh[MM_HMAX];
	struct lz_op *op;
	int k, err = 0;

	switch (kind) {
	case K_ACQUIRE:
	case K_HOLD: {
		void **objs = kind == K_ACQUIRE ? (void **)t->lease : (void **)t->hold;

		if ((k = free_slot(objs)) < 0)
			return;
		op = op_begin(t, kind);
		lz_handles(t, op, rh);
		if (!op->nh) {
			t->nop--;
			return;
		}
		op->e0 = t->log.n;
		op->life = atomic_fetch_add(&z->next_life, 1);
		if (kind == K_ACQUIRE) {
			op->loc = (int)lz_rnd(&t->rng, 2); /* host: no events outlive the call */
			err = rsd_acquire(z->m, rh, (size_t)op->nh, ml_loc(op->loc), NULL,
					  &t->lease[k]);
			t->lease_life[k] = op->life;
			if (!err)
				hz_check_lease(t, t->lease[k]);
		} else {
			op->loc = (int)lz_rnd(&t->rng, ML_VALID);
			err = rsd_hold(z->m, rh, (size_t)op->nh, ml_loc(op->loc), &t->hold[k]);
			t->hold_life[k] = op->life;
		}
		break;
	}
	case K_RESERVE:
		if ((k = free_slot((void **)t->resv)) < 0)
			return;
		op = op_begin(t, kind);
		op->life = atomic_fetch_add(&z->next_life, 1);
		op->loc = (int)lz_rnd(&t->rng, ML_VALID);
		op->n = lz_size(t);
		snprintf(op->label, sizeof(op->label), "t%dr%d", t->id, op->life);
		err = rsd_reserve(z->m, ml_loc(op->loc), op->n, op->label, &t->resv[k]);
		t->resv_life[k] = op->life;
		break;
	case K_LEND:
	case K_LFREE:
		if ((k = used_slot(t, (void **)t->lease)) < 0)
			return;
		op = op_begin(t, kind);
		op->life = t->lease_life[k];
		if (kind == K_LEND)
			err = rsd_lease_release(t->lease[k], 0);
		rsd_lease_free(t->lease[k]);
		t->lease[k] = NULL;
		break;
	case K_HEND:
		if ((k = used_slot(t, (void **)t->hold)) < 0)
			return;
		op = op_begin(t, kind);
		op->life = t->hold_life[k];
		err = rsd_hold_release(t->hold[k]);
		rsd_hold_free(t->hold[k]);
		t->hold[k] = NULL;
		break;
	default:
		if ((k = used_slot(t, (void **)t->resv)) < 0)
			return;
		op = op_begin(t, kind);
		op->life = t->resv_life[k];
		err = rsd_reservation_release(t->resv[k]);
		rsd_reservation_free(t->resv[k]);
		t->resv[k] = NULL;
		break;
	}
	op_end(t, op, err);
}

static void do_plan(struct lz_thread *t, bool async)
{
	static const enum rsd_action_kind k5[] = { RSD_ACT_ENSURE, RSD_ACT_ENSURE, RSD_ACT_MOVE,
						   RSD_ACT_DROP, RSD_ACT_DISCARD };
	struct lz *z = t->z;
	struct rsd_action ra[LZ_ACTS];
	struct rsd_plan_report *rep = NULL, *partial;
	struct lz_op *op = op_begin(t, K_PLAN);
	struct lz_val *v = NULL;
	const uint64_t *exp;
	int err;

	op->async = async;
	op->na = 1 + lz_rnd(&t->rng, LZ_ACTS);
	for (size_t i = 0; i < op->na; i++) {
		op->a[i] = pick_act(t, k5[lz_rnd(&t->rng, 5)], &v);
		if (!v) {
			t->nop--;
			return;
		}
		ra[i] = real_act(z, &op->a[i]);
	}
	if (lz_rnd(&t->rng, 5) == 0) {
		op->has_expected = true;
		op->expected = rsd_manager_state_version(z->m);
	}
	op->e0 = t->log.n;
	exp = op->has_expected ? &op->expected : NULL;
	if (async)
		err = rsd_execute_actions_async(z->m, ra, op->na, "lz-plan", NULL, 0, exp, &rep);
	else
		err = rsd_execute_actions(z->m, ra, op->na, "lz-plan", NULL, 0, exp, &rep);
	op_end(t, op, err);
	partial = rsd_take_partial_report();
	if (!rep) {
		rep = partial; /* -RSD_EEXEC: the committed prefix */
		partial = NULL;
	}
	rsd_plan_report_free(partial);
	if (rep) {
		op->nrep = rep->ntransitions < LZ_ACTS ? rep->ntransitions : LZ_ACTS;
		memcpy(op->rep, rep->transitions, op->nrep * sizeof(op->rep[0]));
		/* Reasons point into librsd's constant strings: they outlive it. */
		rsd_plan_report_free(rep);
	}
}

#include "hostile.inc"

static void *worker(void *arg)
{
	static const unsigned char w[K_N] = {
		[K_ADOPT] = 5,	 [K_SOURCE] = 5, [K_ACT] = 35, [K_ACQUIRE] = 6,
		[K_LEND] = 4,	 [K_LFREE] = 2,	 [K_HOLD] = 4, [K_HEND] = 4,
		[K_RESERVE] = 4, [K_REND] = 4,	 [K_PLAN] = 8
	};
	struct lz_thread *t = arg;
	unsigned total = 0;

	tl_rng = t->rng ^ 0x5bd1e995u;
	/* Runs with hostile calls other than model_shape's are never
	 * replayed: nothing to log. */
	if (!t->z->hostile_ops || t->z->model_shape)
		rsd__lin_log_set(&t->log);
	for (int k = 0; k < K_N; k++)
		total += w[k];
	for (unsigned i = 0; i < t->z->o->ops; i++) {
		unsigned r;
		int k = 0;

		if (t->z->o->hostile && hz_step(t))
			continue;
		r = lz_rnd(&t->rng, total);
		while (r >= w[k])
			r -= w[k++];
		hz_wd_begin(&t->wd, k, 0, -1);
		switch (k) {
		case K_ADOPT:
		case K_SOURCE:
			do_create(t, k == K_SOURCE);
			break;
		case K_ACT:
			do_transition(t);
			break;
		case K_PLAN:
			do_plan(t, false);
			break;
		default:
			do_lifetime(t, (enum lz_kind)k);
			break;
		}
		hz_wd_end(&t->wd);
	}
	rsd__lin_log_set(NULL);
	return NULL;
}

#include "linearize_replay.inc"
