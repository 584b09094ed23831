// SPDX-License-Identifier: MIT
/*
 * The action executor (§4): ensure/copy, move, drop and discard, each with
 * its report. Runs on the writer path; plans call rsd__exec_action() once
 * per action under the same lock.
 *
 * Every check that can fail precedes the first state change, so a failed
 * action leaves no trace beyond the reaping of its prologue and the peak
 * raised by a temporary source charge (§7.2).
 */
#include <string.h>

#include "core.h"
#include "../trace.h"

static const char R_DEST_RESIDENT[] = "destination already resident";
static const char R_DEST_OWNS[] = "destination already owns the selected replica";
static const char R_ABSENT[] = "materialization already absent";

/* Where a copy reads from: an existing replica or a temporary load. */
struct xfer {
	struct rsd_location src;
	struct rsd_resident *value;
	bool temporary; /* value came from the source; freed unless installed */
	bool charged;   /* the temporary charge is still held at src */
};

static int min_location(const struct rsd_record *rec, const struct rsd_location *exclude,
			struct rsd_location *out)
{
	bool found = false;

	for (uint32_t i = 0; i < rec->nmats; i++) {
		struct rsd_location l = rec->mats[i].loc;

		if (exclude && rsd_location_equal(l, *exclude))
			continue;
		if (!found || rsd_location_cmp(l, *out) < 0)
			*out = l;
		found = true;
	}
	return found;
}

static void charge_temp(struct rsd_manager *m, struct rsd_location at, uint64_t c)
{
	struct rsd_acct *a = &m->acct[rsd__loc_slot(at)];

	a->reserved += c;
	if (a->used + a->reserved > a->peak_charged)
		a->peak_charged = a->used + a->reserved;
	m->locs_dirty = true;
}

static void uncharge_temp(struct rsd_manager *m, struct xfer *x, const struct rsd_record *rec)
{
	if (!x->charged)
		return;
	m->acct[rsd__loc_slot(x->src)].reserved -= rec->spec.storage_nbytes;
	x->charged = false;
}

/* Run the source's load with the callback guard raised (§4.3, §9). */
static int load_source(struct rsd_manager *m, struct rsd_record *rec, struct xfer *x)
{
	uint64_t c = rec->spec.storage_nbytes;
	struct rsd_resident *v = NULL;
	int err, ret;

	err = rsd__admit(m, rec->source_loc, c);
	if (err)
		return err;
	x->src = rec->source_loc;
	x->temporary = true;
	x->charged = true;
	charge_temp(m, x->src, c);
	rsd__err_clear();
	atomic_store(&m->callback_active, true);
	ret = rec->source.load(rec->source.ctx, &v);
	atomic_store(&m->callback_active, false);
	if (ret) {
		if (ret < 0 && ret > -RSD_EMAX) {
			/* A loader's own RSD error propagates unchanged; keep the
			 * record it left when it matches. */
			if (rsd_last_error()->code != -ret)
				rsd__err(-ret, "source load of value %llu failed: %s",
					 (unsigned long long)rec->handle.id, rsd_strerror(ret));
			err = ret;
		} else {
			err = rsd__err(RSD_ESOURCE, "source load of value %llu failed with code %d",
				       (unsigned long long)rec->handle.id, ret);
			rsd__err_record()->cause = ret;
		}
		goto fail;
	}
	if (!v) {
		err = rsd__err(RSD_ESOURCE, "source load of value %llu returned no value",
			       (unsigned long long)rec->handle.id);
		goto fail;
	}
	if (v->managed) {
		err = rsd__err(RSD_EOWNERSHIP,
			       "source of value %llu returned a resident a manager already owns",
			       (unsigned long long)rec->handle.id);
		v = NULL;
		goto fail;
	}
	err = rsd__mat_validate(&rec->spec, v, x->src);
	if (err)
		goto fail;
	x->value = v;
	return 0;
fail:
	if (v)
		rsd__resident_destroy(v);
	uncharge_temp(m, x, rec);
	x->temporary = false;
	return err;
}

/* §4.3: the copy source of an ensure, or of a move with nothing to move. */
static int transfer_source(struct rsd_manager *m, struct rsd_record *rec, struct xfer *x)
{
	memset(x, 0, sizeof(*x));
	if (min_location(rec, NULL, &x->src)) {
		x->value = rsd__rec_mat(rec, x->src)->value;
		return 0;
	}
	if (!rec->has_source)
		return rsd__err(RSD_EUNAVAILABLE,
				"value %llu has no materialization or reconstruction source",
				(unsigned long long)rec->handle.id);
	return load_source(m, rec, x);
}

static void xfer_finish(struct rsd_manager *m, struct rsd_record *rec, struct xfer *x)
{
	uncharge_temp(m, x, rec);
	if (x->temporary && x->value)
		rsd__resident_destroy(x->value);
	x->value = NULL;
}

/* Put x's value (or a copy of it) at `to`; x->value is consumed on install. */
static int place(struct rsd_manager *m, struct rsd_record *rec, struct xfer *x,
		 struct rsd_location to, void *stream, bool allow_exclusive)
{
	struct rsd_resident *copy = NULL;
	int err;

	if (x->temporary && rsd_location_equal(x->src, to)) {
		/* Load and install share one charge. */
		uncharge_temp(m, x, rec);
		err = rsd__install(m, rec, to, x->value, allow_exclusive);
		if (!err)
			x->value = NULL;
		return err;
	}
	err = rsd__admit(m, to, rec->spec.storage_nbytes);
	if (err)
		return err;
	err = rsd__copy_to(m, x->value, x->src, to, stream, &copy);
	if (err)
		return err;
	err = rsd__install(m, rec, to, copy, allow_exclusive);
	if (err)
		rsd__resident_destroy(copy);
	return err;
}

static void set_source(struct rsd_transition *rep, struct rsd_location at)
{
	rep->has_source = true;
	rep->source = at;
}

static int do_ensure(struct rsd_manager *m, struct rsd_record *rec, const struct rsd_action *a,
		     void *stream, struct rsd_transition *rep)
{
	struct rsd_location d = a->location;
	struct xfer x;
	int err;

	rep->has_destination = true;
	rep->destination = d;
	if (rsd__rec_mat(rec, d)) {
		rep->no_op = true;
		rep->reason = R_DEST_RESIDENT;
		return 0;
	}
	if (rec->spec.replica_mode == RSD_EXCLUSIVE && rec->nmats)
		return rsd__err(RSD_EOWNERSHIP,
				"EnsureResident would replicate an EXCLUSIVE value %llu; use move",
				(unsigned long long)rec->handle.id);
	err = transfer_source(m, rec, &x);
	if (err)
		return err;
	set_source(rep, x.src);
	err = place(m, rec, &x, d, stream, false);
	xfer_finish(m, rec, &x);
	return err;
}

static int do_move(struct rsd_manager *m, struct rsd_record *rec, const struct rsd_action *a,
		   void *stream, struct rsd_transition *rep)
{
	char name[RSD_LOCATION_NAME_MAX];
	struct rsd_location d = a->location, s;
	struct xfer x;
	bool have_src;
	int err;

	rep->has_destination = true;
	rep->destination = d;
	if (a->has_from) {
		s = a->from;
		if (!rsd__rec_mat(rec, s))
			return rsd__err(RSD_EUNAVAILABLE, "explicit source %s is not resident",
					rsd_location_name(s, name, sizeof(name)));
		have_src = true;
	} else {
		have_src = min_location(rec, &d, &s);
	}
	if (rsd__rec_mat(rec, d)) {
		if (!have_src || rsd_location_equal(s, d)) {
			rep->no_op = true;
			rep->reason = R_DEST_OWNS;
			if (have_src)
				set_source(rep, s);
			return 0;
		}
		err = rsd__removable(rec, rsd__rec_mat(rec, s));
		if (err)
			return err;
		set_source(rep, s);
		rsd__remove(m, rec, s);
		return 0;
	}
	if (have_src) {
		err = rsd__removable(rec, rsd__rec_mat(rec, s));
		if (err)
			return err;
		memset(&x, 0, sizeof(x));
		x.src = s;
		x.value = rsd__rec_mat(rec, s)->value;
	} else {
		err = transfer_source(m, rec, &x);
		if (err)
			return err;
	}
	set_source(rep, x.src);
	err = place(m, rec, &x, d, stream, true);
	if (!err && have_src)
		rsd__remove(m, rec, s);
	xfer_finish(m, rec, &x);
	return err;
}

static int do_drop(struct rsd_manager *m, struct rsd_record *rec, const struct rsd_action *a,
		   struct rsd_transition *rep)
{
	struct rsd_mat *mat = rsd__rec_mat(rec, a->location);
	int err;

	set_source(rep, a->location);
	if (!mat) {
		rep->no_op = true;
		rep->reason = R_ABSENT;
		return 0;
	}
	err = rsd__removable(rec, mat);
	if (err)
		return err;
	if (rec->nmats == 1 && !rec->has_source)
		return rsd__err(RSD_EOWNERSHIP,
				"the last copy of preserve-only value %llu cannot be dropped; discard it instead",
				(unsigned long long)rec->handle.id);
	rsd__remove(m, rec, a->location);
	return 0;
}

static int do_discard(struct rsd_manager *m, struct rsd_record *rec)
{
	int err;

	for (uint32_t i = 0; i < rec->nmats; i++) {
		err = rsd__removable(rec, &rec->mats[i]);
		if (err)
			return err;
	}
	while (rec->nmats)
		rsd__remove(m, rec, rec->mats[0].loc);
	if (rec->has_source && rec->source.release)
		rec->source.release(rec->source.ctx);
	rec->has_source = false;
	memset(&rec->source, 0, sizeof(rec->source));
	rec->discarded = true;
	rsd__mark_dirty(m, rec);
	rsd__bump(m);
	return 0;
}

/* §4.10: the first CUDA location among the action's candidates. */
static int sample_device(const struct rsd_record *rec, const struct rsd_action *a)
{
	switch (a->kind) {
	case RSD_ACT_ENSURE:
	case RSD_ACT_DROP:
		return a->location.kind == RSD_CUDA ? a->location.device : -1;
	case RSD_ACT_MOVE:
		if (a->location.kind == RSD_CUDA)
			return a->location.device;
		if (a->has_from)
			return a->from.kind == RSD_CUDA ? a->from.device : -1;
		/* then current materializations, insertion order */
		rsd__fallthrough;
	case RSD_ACT_DISCARD:
		for (uint32_t i = 0; i < rec->nmats; i++)
			if (rec->mats[i].loc.kind == RSD_CUDA)
				return rec->mats[i].loc.device;
	}
	return -1;
}

static int check_action_locations(struct rsd_manager *m, const struct rsd_action *a, void *stream)
{
	int err = 0;

	switch (a->kind) {
	case RSD_ACT_ENSURE:
	case RSD_ACT_DROP:
		err = rsd__check_location(m, a->location);
		break;
	case RSD_ACT_MOVE:
		err = rsd__check_location(m, a->location);
		if (!err && a->has_from)
			err = rsd__check_location(m, a->from);
		break;
	case RSD_ACT_DISCARD:
		break;
	default:
		return rsd__err(RSD_ETYPE, "invalid action kind %d", (int)a->kind);
	}
	if (err || !stream)
		return err;
	if (a->kind == RSD_ACT_DROP || a->kind == RSD_ACT_DISCARD)
		return rsd__err(RSD_EINVAL, "only Ensure and Move accept a stream");
	return rsd__check_stream(m, stream, a->location);
}

int rsd__exec_action(struct rsd_manager *m, const struct rsd_action *a, void *stream,
		     struct rsd_transition *report)
{
	struct rsd_transition rep;
	struct rsd_record *rec;
	bool stamp;
	int err, dev;

	memset(&rep, 0, sizeof(rep));
	err = rsd__reap(m);
	if (err)
		return err;
	/* Reading the clock is most of a no-op's cost: only when someone
	 * reads the report (the caller, or a recording trace session). */
	stamp = report || rsd_trace_transition_enabled();
	if (stamp)
		rep.started_at_ns = rsd__now_ns();
	rep.action = *a;
	err = rsd__resolve(m, a->handle, &rec);
	if (err)
		return err;
	err = check_action_locations(m, a, stream);
	if (err)
		return err;
	dev = sample_device(rec, a);
	if (dev >= 0 && dev < m->ndevices && m->ops->metrics) {
		rep.allocator_device = dev;
		rep.has_allocator = !m->ops->metrics(m->ops_ctx, dev, &rep.allocator_allocated_bytes_before,
						     &rep.allocator_reserved_bytes_before);
	}
	rep.logical_nbytes = rec->spec.logical_nbytes;
	rep.storage_nbytes = rec->spec.storage_nbytes;
	switch (a->kind) {
	case RSD_ACT_ENSURE:
		err = do_ensure(m, rec, a, stream, &rep);
		break;
	case RSD_ACT_MOVE:
		err = do_move(m, rec, a, stream, &rep);
		break;
	case RSD_ACT_DROP:
		err = do_drop(m, rec, a, &rep);
		break;
	case RSD_ACT_DISCARD:
		err = do_discard(m, rec);
		break;
	}
	if (err)
		return err;
	if (rep.has_allocator && m->ops->metrics) {
		/* Best effort: a failed sample leaves the fields absent. */
		struct rsd_error saved = *rsd_last_error();

		rep.has_allocator = !m->ops->metrics(m->ops_ctx, dev, &rep.allocator_allocated_bytes_after,
						     &rep.allocator_reserved_bytes_after);
		*rsd__err_record() = saved;
	}
	if (!rep.has_allocator) {
		rep.allocator_device = 0;
		rep.allocator_allocated_bytes_before = rep.allocator_reserved_bytes_before = 0;
	}
	if (stamp)
		rep.completed_at_ns = rsd__now_ns();
	rsd_trace_transition(m->id, &rep);
	if (report)
		*report = rep;
	return 0;
}

/* fn: the public entry point, for messages. */
static int run_one(struct rsd_manager *m, const char *fn, const struct rsd_action *a, void *stream,
		   struct rsd_transition *report)
{
	int err;

	err = rsd__handle_check(a->handle, fn);
	if (!err && a->kind != RSD_ACT_DISCARD)
		err = rsd__location_check(a->location, fn);
	if (!err && a->has_from)
		err = rsd__location_check(a->from, "rsd_move: from");
	if (err)
		return err;
	err = rsd__writer_enter(m, RSD_W_OPEN | RSD_W_REAP);
	if (err)
		return err;
	err = rsd__exec_action(m, a, stream, report);
	rsd__writer_exit(m);
	return err;
}

int rsd_ensure(struct rsd_manager *m, struct rsd_handle h, struct rsd_location at, void *stream,
	       struct rsd_transition *report)
{
	struct rsd_action a = rsd_action_ensure(h, at);

	return run_one(m, "rsd_ensure", &a, stream, report);
}

int rsd_copy(struct rsd_manager *m, struct rsd_handle h, struct rsd_location to, void *stream,
	     struct rsd_transition *report)
{
	struct rsd_action a = rsd_action_ensure(h, to);

	return run_one(m, "rsd_copy", &a, stream, report);
}

int rsd_move(struct rsd_manager *m, struct rsd_handle h, struct rsd_location to,
	     const struct rsd_location *from, void *stream, struct rsd_transition *report)
{
	struct rsd_action a = rsd_action_move(h, to, from);

	return run_one(m, "rsd_move", &a, stream, report);
}

int rsd_drop(struct rsd_manager *m, struct rsd_handle h, struct rsd_location at,
	     struct rsd_transition *report)
{
	struct rsd_action a = rsd_action_drop(h, at);

	return run_one(m, "rsd_drop", &a, NULL, report);
}

int rsd_discard(struct rsd_manager *m, struct rsd_handle h, struct rsd_transition *report)
{
	struct rsd_action a = rsd_action_discard(h);

	return run_one(m, "rsd_discard", &a, NULL, report);
}
