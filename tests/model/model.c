// SPDX-License-Identifier: MIT
/*
 * The reference model (model.h). Each function follows the numbered steps
 * of its Documentation/reference.md section, in order, so a reader can check it against
 * the spec line by line. Reaping follows librsd's documented deviation
 * (Documentation/design.md): writer calls reap, snapshots and reserve do not.
 */
#include <stdio.h>
#include <string.h>

#include "model.h"

static const char *const names[ML_N] = { "pageable-host", "pinned-host", "cuda:0", "cuda:1",
					 "cuda:2" };

struct rsd_location ml_loc(int l)
{
	struct rsd_location r = { RSD_PAGEABLE_HOST, -1 };

	if (l == ML_PIN)
		r.kind = RSD_PINNED_HOST;
	else if (l >= ML_CUDA0) {
		r.kind = RSD_CUDA;
		r.device = l - ML_CUDA0;
	}
	return r;
}

int ml_from_loc(struct rsd_location loc)
{
	for (int l = 0; l < ML_N; l++)
		if (rsd_location_equal(ml_loc(l), loc))
			return l;
	return -1;
}

const char *ml_name(int l)
{
	return l >= 0 && l < ML_N ? names[l] : "<none>";
}

void model_init(struct model *md, const bool *has_budget, const uint64_t *budget, const int *order,
		int nbudgets)
{
	memset(md, 0, sizeof(*md));
	for (int i = 0; i < nbudgets; i++) {
		int l = order[i];

		md->loc[l].known = true;
		md->loc[l].has_budget = has_budget[i];
		md->loc[l].budget = budget[i];
		md->known[md->nknown++] = l;
	}
}

/* ---- helpers --------------------------------------------------------- */

static void bump(struct model *md)
{
	md->version++;
}

static void record_loc(struct model *md, int l)
{
	if (md->loc[l].known)
		return;
	md->loc[l].known = true;
	md->known[md->nknown++] = l;
	bump(md);
}

/* §1.3 with two simulated devices. */
static int validate(int l)
{
	return l >= 0 && l < ML_VALID ? 0 : -RSD_EINVAL;
}

/* §7.1 */
static int admit(struct model *md, int l, uint64_t n)
{
	struct mlocrec *r = &md->loc[l];

	if (validate(l))
		return -RSD_EINVAL;
	if (!r->known || !r->has_budget)
		return 0;
	if (r->used + r->reserved + r->inflight > r->budget ||
	    n > r->budget - r->used - r->reserved - r->inflight)
		return -RSD_EBUDGET;
	return 0;
}

static void peak_charged(struct mlocrec *r)
{
	if (r->used + r->reserved + r->inflight > r->peak_charged)
		r->peak_charged = r->used + r->reserved + r->inflight;
}

struct mmat *model_mat(struct model *md, int v, int loc)
{
	struct mval *x = &md->val[v];

	for (int i = 0; i < x->nmat; i++)
		if (x->mat[i].loc == loc)
			return &x->mat[i];
	return NULL;
}

/* §2.5 */
static int resolve(struct model *md, int h)
{
	if (h < 0 || h >= md->nval)
		return -RSD_EHANDLE;
	if (md->val[h].discarded)
		return -RSD_EHANDLE;
	return 0;
}

static bool protected_mat(const struct mmat *m)
{
	return m->use || m->hold || m->pend || m->filling || m->qread;
}

/* §4.5 install, after the checks. */
static void install(struct model *md, int v, int l)
{
	struct mval *x = &md->val[v];
	struct mlocrec *r;

	record_loc(md, l);
	r = &md->loc[l];
	x->mat[x->nmat++] = (struct mmat){ .loc = l };
	r->used += x->charge;
	if (r->used > r->peak_used)
		r->peak_used = r->used;
	peak_charged(r);
	bump(md);
}

static void remove_mat(struct model *md, int v, int l)
{
	struct mval *x = &md->val[v];
	int i = 0;

	while (x->mat[i].loc != l)
		i++;
	memmove(&x->mat[i], &x->mat[i + 1], (size_t)(x->nmat - i - 1) * sizeof(x->mat[0]));
	x->nmat--;
	md->loc[l].used -= x->charge;
	bump(md);
}

static bool lease_complete(struct model *md, const struct mlease *ls)
{
	for (int i = 0; i < ls->nstreams; i++)
		if (ls->seq[i] > md->stream[ls->stream[i]].completed)
			return false;
	return true;
}

static void lease_tokens(struct model *md, struct mlease *ls, int duse, int dpend)
{
	for (int i = 0; i < ls->nh; i++) {
		struct mmat *m = model_mat(md, ls->h[i], ls->loc);

		m->use += duse;
		m->pend += dpend;
	}
}

/* §8.5, creation order. */
static void reap(struct model *md)
{
	for (uint64_t o = 0; o <= md->order; o++)
		for (int i = 0; i < MM_LIFETIMES; i++) {
			struct mlease *ls = &md->lease[i];

			if (ls->order != o || ls->state != MLS_PENDING || !lease_complete(md, ls))
				continue;
			lease_tokens(md, ls, 0, -1);
			ls->state = MLS_GONE;
			bump(md);
		}
}

/* P-mut / P-life prologue (closed, then reap). */
static int prologue(struct model *md)
{
	if (md->closed)
		return -RSD_ECLOSED;
	reap(md);
	return 0;
}

static int min_loc(const struct mval *x, int exclude)
{
	int best = -1;

	for (int i = 0; i < x->nmat; i++)
		if (x->mat[i].loc != exclude && (best < 0 || x->mat[i].loc < best))
			best = x->mat[i].loc;
	return best;
}

/* ---- registration (§6) ------------------------------------------------ */

int model_adopt(struct model *md, int res_loc, int at, enum rsd_replica_mode mode, uint64_t n,
		int *out)
{
	int l = at >= 0 ? at : res_loc;
	int err;

	if ((err = prologue(md)))
		return err;
	if ((err = validate(l)))
		return err;
	if (l != res_loc)
		return -RSD_EMATERIAL;
	if ((err = admit(md, l, n)))
		return err;
	if (md->nval == MM_VALUES)
		return -RSD_ENOMEM; /* the interpreter never gets here */
	md->val[md->nval] = (struct mval){ .logical = n, .charge = n, .mode = mode };
	install(md, md->nval, l);
	*out = md->nval++;
	return 0;
}

int model_register_source(struct model *md, uint64_t logical, uint64_t charge,
			  enum rsd_recoverability rc, int src_loc, int *out)
{
	int err;

	if ((err = prologue(md)))
		return err;
	if ((err = validate(src_loc)))
		return err;
	if (rc != RSD_RECONSTRUCTIBLE)
		return -RSD_EINVAL;
	record_loc(md, src_loc);
	md->val[md->nval] = (struct mval){ .logical = logical,
					   .charge = charge,
					   .mode = RSD_REPLICABLE,
					   .has_source = true,
					   .src_loc = src_loc,
					   .ever_source = true };
	bump(md);
	*out = md->nval++;
	return 0;
}

/* ---- transitions (§4) ---------------------------------------------------- */

struct xfer {
	int src;
	bool temporary;
};

/* §4.3 */
static int transfer_source(struct model *md, int v, struct xfer *x)
{
	struct mval *val = &md->val[v];
	struct mlocrec *r;
	int err;

	x->temporary = false;
	if (val->nmat) {
		x->src = min_loc(val, -1);
		return 0;
	}
	if (!val->has_source)
		return -RSD_EUNAVAILABLE;
	x->src = val->src_loc;
	if ((err = admit(md, x->src, val->charge)))
		return err;
	r = &md->loc[x->src];
	r->reserved += val->charge;
	peak_charged(r);
	val->loads++;
	switch (val->fail_next) {
	case MSRC_OK:
		err = 0;
		break;
	case MSRC_FAIL_POS:
		err = -RSD_ESOURCE;
		break;
	case MSRC_FAIL_NOMEM:
		err = -RSD_ENOMEM;
		break;
	case MSRC_WRONG_SIZE:
		err = -RSD_EMATERIAL;
		break;
	}
	val->fail_next = MSRC_OK;
	if (err) {
		r->reserved -= val->charge;
		return err;
	}
	x->temporary = true;
	return 0;
}

static void xfer_finish(struct model *md, int v, struct xfer *x)
{
	if (x->temporary)
		md->loc[x->src].reserved -= md->val[v].charge;
	x->temporary = false;
}

/* §22.1: in queue mode a copy to or from a device is queued, not waited for. */
static bool queues(const struct model *md, const struct xfer *x, int d)
{
	return md->queue_mode && (x->src >= ML_CUDA0 || d >= ML_CUDA0) &&
	       !(x->temporary && x->src == d);
}

/*
 * Commit a queued copy of v from x to d (installed already): the
 * destination fills, and what the copy reads stays charged (a loaded
 * value's temporary charge and a move's source, leaving, become inflight
 * bytes of their location) or protected (a materialization read) until
 * model_copy_done().
 */
static void queue_copy(struct model *md, int v, struct xfer *x, int d, bool leaving)
{
	struct mqcopy *q = md->qc;
	uint64_t c = md->val[v].charge;

	while (q->live)
		q++; /* MM_QCOPIES is more than the values' materializations */
	*q = (struct mqcopy){ .live = true, .v = v, .to = d, .from = -1, .held_at = -1 };
	model_mat(md, v, d)->filling = true;
	if (x->temporary || leaving) {
		q->held_at = x->src;
		q->held = c;
		md->loc[x->src].inflight += c;
		if (x->temporary)
			md->loc[x->src].reserved -= c;
		x->temporary = false;
		peak_charged(&md->loc[x->src]);
	} else {
		q->from = x->src;
		model_mat(md, v, x->src)->qread++;
	}
}

int model_copy_done(struct model *md, int v, int loc)
{
	for (int i = 0; i < MM_QCOPIES; i++) {
		struct mqcopy *q = &md->qc[i];

		if (!q->live || q->v != v || q->to != loc)
			continue;
		model_mat(md, v, loc)->filling = false;
		if (q->from >= 0)
			model_mat(md, v, q->from)->qread--;
		if (q->held_at >= 0)
			md->loc[q->held_at].inflight -= q->held;
		q->live = false;
		return 0;
	}
	return -1;
}

int model_queued(const struct model *md)
{
	int n = 0;

	for (int i = 0; i < MM_QCOPIES; i++)
		n += md->qc[i].live;
	return n;
}

/* Put the transfer source at d: shared charge or copy, then install. */
static int place(struct model *md, int v, struct xfer *x, int d)
{
	int err;

	if (x->temporary && x->src == d) {
		xfer_finish(md, v, x);
		if ((err = admit(md, d, md->val[v].charge)))
			return err;
		install(md, v, d);
		return 0;
	}
	if ((err = admit(md, d, md->val[v].charge)))
		return err;
	install(md, v, d);
	return 0;
}

static void set_src(struct rsd_transition *rep, int l)
{
	rep->has_source = true;
	rep->source = ml_loc(l);
}

static int do_ensure(struct model *md, int v, int d, struct rsd_transition *rep)
{
	struct mval *val = &md->val[v];
	struct xfer x;
	bool q;
	int err;

	rep->has_destination = true;
	rep->destination = ml_loc(d);
	if (model_mat(md, v, d)) {
		rep->no_op = true;
		rep->reason = "destination already resident";
		return 0;
	}
	if (val->mode == RSD_EXCLUSIVE && val->nmat)
		return -RSD_EOWNERSHIP;
	if ((err = transfer_source(md, v, &x)))
		return err;
	set_src(rep, x.src);
	q = queues(md, &x, d);
	err = place(md, v, &x, d);
	if (!err && q)
		queue_copy(md, v, &x, d, false);
	xfer_finish(md, v, &x);
	return err;
}

static int do_move(struct model *md, int v, const struct mact *a, struct rsd_transition *rep)
{
	int d = a->loc, s;
	bool have_src, q;
	struct xfer x;
	int err;

	rep->has_destination = true;
	rep->destination = ml_loc(d);
	if (a->has_from) {
		s = a->from;
		if (!model_mat(md, v, s))
			return -RSD_EUNAVAILABLE;
		have_src = true;
	} else {
		s = min_loc(&md->val[v], d);
		have_src = s >= 0;
	}
	if (model_mat(md, v, d)) {
		if (!have_src || s == d) {
			rep->no_op = true;
			rep->reason = "destination already owns the selected replica";
			if (have_src)
				set_src(rep, s);
			return 0;
		}
		if (protected_mat(model_mat(md, v, s)))
			return -RSD_EINUSE;
		set_src(rep, s);
		remove_mat(md, v, s);
		return 0;
	}
	if (have_src) {
		if (protected_mat(model_mat(md, v, s)))
			return -RSD_EINUSE;
		x.src = s;
		x.temporary = false;
	} else if ((err = transfer_source(md, v, &x))) {
		return err;
	}
	set_src(rep, x.src);
	q = queues(md, &x, d);
	err = place(md, v, &x, d);
	if (!err && have_src)
		remove_mat(md, v, s);
	if (!err && q)
		queue_copy(md, v, &x, d, have_src);
	xfer_finish(md, v, &x);
	return err;
}

static int do_drop(struct model *md, int v, int l, struct rsd_transition *rep)
{
	struct mmat *m = model_mat(md, v, l);

	set_src(rep, l);
	if (!m) {
		rep->no_op = true;
		rep->reason = "materialization already absent";
		return 0;
	}
	if (protected_mat(m))
		return -RSD_EINUSE;
	if (md->val[v].nmat == 1 && !md->val[v].has_source)
		return -RSD_EOWNERSHIP;
	remove_mat(md, v, l);
	return 0;
}

static int do_discard(struct model *md, int v)
{
	struct mval *x = &md->val[v];

	for (int i = 0; i < x->nmat; i++)
		if (protected_mat(&x->mat[i]))
			return -RSD_EINUSE;
	while (x->nmat)
		remove_mat(md, v, x->mat[0].loc);
	if (x->has_source)
		x->releases++;
	x->has_source = false;
	x->discarded = true;
	bump(md);
	return 0;
}

/* §4.1 then the action. prologue: a direct call's P-mut (closed check). */
int model_action(struct model *md, const struct mact *a, int stream, bool prologue_too,
		 struct rsd_transition *rep)
{
	struct rsd_transition tmp;
	int err;

	if (!rep)
		rep = &tmp;
	if (prologue_too && (err = prologue(md)))
		return err;
	reap(md);
	if ((err = resolve(md, a->h)))
		return err;
	if (a->kind != RSD_ACT_DISCARD && (err = validate(a->loc)))
		return err;
	if (a->kind == RSD_ACT_MOVE && a->has_from && (err = validate(a->from)))
		return err;
	if (stream != MS_NONE) {
		if (a->loc < ML_CUDA0 || ms_device(stream) != a->loc - ML_CUDA0)
			return -RSD_EINVAL;
	}
	memset(rep, 0, sizeof(*rep));
	rep->action.kind = a->kind;
	rep->logical_nbytes = md->val[a->h].logical;
	rep->storage_nbytes = md->val[a->h].charge;
	switch (a->kind) {
	case RSD_ACT_ENSURE:
		return do_ensure(md, a->h, a->loc, rep);
	case RSD_ACT_MOVE:
		return do_move(md, a->h, a, rep);
	case RSD_ACT_DROP:
		return do_drop(md, a->h, a->loc, rep);
	case RSD_ACT_DISCARD:
		return do_discard(md, a->h);
	}
	return -RSD_EUSAGE;
}

/* ---- lifetimes (§8) ------------------------------------------------------ */

static int free_slot_lease(struct model *md)
{
	for (int i = 0; i < MM_LIFETIMES; i++)
		if (!md->lease[i].live && md->lease[i].state == MLS_GONE)
			return i;
	return -1;
}

/* §8.1: duplicates collapse (refs are equal iff the handles are). */
static int dedupe(const int *h, int n, int *out)
{
	int k = 0;

	for (int i = 0; i < n; i++) {
		bool dup = false;

		for (int j = 0; j < k; j++)
			dup |= out[j] == h[i];
		if (!dup)
			out[k++] = h[i];
	}
	return k;
}

static int cover_check(struct model *md, const int *h, int n, int at)
{
	int err;

	for (int i = 0; i < n; i++) {
		if ((err = resolve(md, h[i])))
			return err;
		if (!model_mat(md, h[i], at))
			return -RSD_EUNAVAILABLE;
	}
	return 0;
}

int model_acquire(struct model *md, const int *h, int n, int at, int stream, int *slot)
{
	int hh[MM_HMAX], k = dedupe(h, n, hh), err, i;
	struct mlease *ls;

	if (md->closed)
		return -RSD_ECLOSED;
	if ((err = validate(at)))
		return err;
	if (at >= ML_CUDA0 && stream == MS_NONE)
		return -RSD_EINVAL;
	reap(md);
	if (stream != MS_NONE && (at < ML_CUDA0 || ms_device(stream) != at - ML_CUDA0))
		return -RSD_EINVAL;
	if ((err = cover_check(md, hh, k, at)))
		return err;
	i = free_slot_lease(md);
	ls = &md->lease[i];
	memset(ls, 0, sizeof(*ls));
	ls->state = MLS_ACTIVE;
	ls->obj_active = ls->live = true;
	ls->loc = at;
	ls->nh = k;
	memcpy(ls->h, hh, sizeof(hh[0]) * (size_t)k);
	if (stream != MS_NONE)
		ls->stream[ls->nstreams++] = stream;
	ls->order = ++md->order;
	lease_tokens(md, ls, 1, 0);
	bump(md);
	*slot = i;
	return 0;
}

int model_lease_release(struct model *md, int slot, bool wait)
{
	struct mlease *ls = &md->lease[slot];

	if (!ls->obj_active)
		return 0;
	ls->obj_active = false;
	if (md->closed || ls->state != MLS_ACTIVE)
		return 0;
	if (ls->loc < ML_CUDA0) {
		lease_tokens(md, ls, -1, 0);
		ls->state = MLS_GONE;
		bump(md);
		return 0;
	}
	for (int i = 0; i < ls->nstreams; i++)
		ls->seq[i] = ++md->stream[ls->stream[i]].recorded;
	lease_tokens(md, ls, -1, 1);
	ls->state = MLS_PENDING;
	bump(md);
	if (wait) {
		for (int i = 0; i < ls->nstreams; i++) {
			struct mstream *s = &md->stream[ls->stream[i]];

			if (s->completed < ls->seq[i])
				s->completed = ls->seq[i];
		}
		lease_tokens(md, ls, 0, -1);
		ls->state = MLS_GONE;
		bump(md);
	}
	return 0;
}

int model_lease_release_unrecorded(struct model *md, int slot)
{
	struct mlease *ls = &md->lease[slot];

	if (!ls->obj_active || md->closed || ls->state != MLS_ACTIVE || ls->loc < ML_CUDA0 ||
	    !ls->nstreams)
		return model_lease_release(md, slot, true);
	ls->obj_active = false;
	for (int i = 0; i < ls->nstreams; i++) {
		struct mstream *s = &md->stream[ls->stream[i]];

		s->completed = s->recorded;
	}
	lease_tokens(md, ls, -1, 0);
	ls->state = MLS_GONE;
	bump(md);
	return 0;
}

void model_lease_free(struct model *md, int slot)
{
	if (md->lease[slot].obj_active)
		model_lease_release(md, slot, true);
	md->lease[slot].live = false;
}

int model_lease_add_stream(struct model *md, int slot, int stream)
{
	struct mlease *ls = &md->lease[slot];

	if (!ls->obj_active)
		return -RSD_ELIFETIME;
	if (ls->loc < ML_CUDA0 || ms_device(stream) != ls->loc - ML_CUDA0)
		return -RSD_EINVAL;
	for (int i = 0; i < ls->nstreams; i++)
		if (ls->stream[i] == stream)
			return 0;
	ls->stream[ls->nstreams++] = stream;
	return 0;
}

int model_lease_value(struct model *md, int slot, int h)
{
	struct mlease *ls = &md->lease[slot];
	bool in = false;

	if (!ls->obj_active)
		return -RSD_ELIFETIME;
	for (int i = 0; i < ls->nh; i++)
		in |= ls->h[i] == h;
	if (!in)
		return -RSD_ENOTFOUND;
	if (ls->state != MLS_ACTIVE)
		return -RSD_EUNAVAILABLE;
	return 0;
}

int model_hold(struct model *md, const int *h, int n, int at, int *slot)
{
	int hh[MM_HMAX], k = dedupe(h, n, hh), err, i;
	struct mhold *hd;

	if (md->closed)
		return -RSD_ECLOSED;
	if ((err = validate(at)))
		return err;
	reap(md);
	if ((err = cover_check(md, hh, k, at)))
		return err;
	for (i = 0; md->hold[i].live; i++)
		;
	hd = &md->hold[i];
	hd->live = hd->active = true;
	hd->loc = at;
	hd->nh = k;
	memcpy(hd->h, hh, sizeof(hh[0]) * (size_t)k);
	for (int j = 0; j < k; j++)
		model_mat(md, hh[j], at)->hold++;
	bump(md);
	*slot = i;
	return 0;
}

int model_hold_release(struct model *md, int slot)
{
	struct mhold *hd = &md->hold[slot];

	if (!hd->active)
		return 0;
	hd->active = false;
	if (md->closed)
		return 0;
	for (int j = 0; j < hd->nh; j++)
		model_mat(md, hd->h[j], hd->loc)->hold--;
	bump(md);
	return 0;
}

void model_hold_free(struct model *md, int slot)
{
	model_hold_release(md, slot);
	md->hold[slot].live = false;
}

int model_reserve(struct model *md, int at, uint64_t n, const char *label, int *slot)
{
	struct mresv *r;
	int err, i;

	if (md->closed)
		return -RSD_ECLOSED;
	if ((err = admit(md, at, n)))
		return err;
	record_loc(md, at);
	for (i = 0; md->resv[i].live; i++)
		;
	r = &md->resv[i];
	r->live = r->active = true;
	r->loc = at;
	r->nbytes = n;
	snprintf(r->label, sizeof(r->label), "%s", label);
	r->order = ++md->order;
	md->loc[at].reserved += n;
	peak_charged(&md->loc[at]);
	bump(md);
	*slot = i;
	return 0;
}

int model_resv_release(struct model *md, int slot)
{
	struct mresv *r = &md->resv[slot];

	if (!r->active)
		return 0;
	r->active = false;
	if (md->closed)
		return 0;
	md->loc[r->loc].reserved -= r->nbytes;
	bump(md);
	return 0;
}

void model_resv_free(struct model *md, int slot)
{
	model_resv_release(md, slot);
	md->resv[slot].live = false;
}

void model_stream_complete(struct model *md, int stream)
{
	md->stream[stream].completed = md->stream[stream].recorded;
}

int model_reap(struct model *md)
{
	return prologue(md);
}

/* §15 */
int model_close(struct model *md, unsigned flags)
{
	int busy = 0;

	if (md->closed)
		return 0;
	if (flags & RSD_CLOSE_NOWAIT) {
		reap(md);
	} else {
		for (uint64_t o = 0; o <= md->order; o++)
			for (int i = 0; i < MM_LIFETIMES; i++) {
				struct mlease *ls = &md->lease[i];

				if (ls->order != o || ls->state != MLS_PENDING)
					continue;
				for (int j = 0; j < ls->nstreams; j++) {
					struct mstream *s = &md->stream[ls->stream[j]];

					if (s->completed < ls->seq[j])
						s->completed = ls->seq[j];
				}
				lease_tokens(md, ls, 0, -1);
				ls->state = MLS_GONE;
				bump(md);
			}
	}
	for (int i = 0; i < MM_LIFETIMES; i++) {
		busy += md->lease[i].state != MLS_GONE;
		busy += md->hold[i].live && md->hold[i].active;
		busy += md->resv[i].live && md->resv[i].active;
	}
	if (busy && !(flags & RSD_CLOSE_FORCE))
		return -RSD_EINUSE;
	for (int i = 0; i < MM_LIFETIMES; i++)
		md->lease[i].state = MLS_GONE;
	for (int v = 0; v < md->nval; v++) {
		if (md->val[v].has_source)
			md->val[v].releases++;
		md->val[v].has_source = false;
		md->val[v].nmat = 0;
	}
	for (int l = 0; l < ML_N; l++)
		md->loc[l].used = md->loc[l].reserved = 0;
	md->closed = true;
	bump(md);
	return 0;
}
