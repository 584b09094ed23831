// SPDX-License-Identifier: MIT
/*
 * Quarantine of a device that failed for good (reference.md, "When a device
 * fails"). A driver reports a lost device by failing an op with RSD_EDEVLOST
 * and answering its device_lost op; the first writer call that meets such a
 * failure marks the device's location failed before it publishes (a state
 * change: state_version increments, and snapshots show the location's
 * failed flag). From then on nothing is admitted there: every admission,
 * whatever asked for it (an ensure, a move, a reservation, a load, a plan's
 * action), fails with RSD_EDEVLOST before any driver call. Calls that do not
 * place bytes there work as before, on the other devices and the host tiers.
 *
 * Settling what was there. At the quarantine, and again at the exit of
 * every later writer call that met the loss (a transfer that was in flight
 * then ends with it, and so does a lease or hold that protected a copy
 * there), the failed location is swept:
 *
 *  - Events of the lost device never complete; the driver answers every
 *    query and sync of them with RSD_EDEVLOST at once. That answer is
 *    final (rsd__devloss_answer(): no stream is drained for it, and
 *    nothing waits but for the lost devices' staging workers, which end
 *    their jobs at once): a reap folds the released GPU leases in as
 *    failed and the queued copies as failed copies (queued.c undoes
 *    them). A copy on a sound stream that reads or writes the lost memory
 *    fails when it runs; the reap after that settles it the same way.
 *  - Every materialization there that no transfer is moving, reading or
 *    filling leaves the books: its charge is refunded and its storage is
 *    never given back to the driver (rsd__devloss_dead_block(): no free in
 *    a dead context). One that a lease, a hold or a released lease's event
 *    still protects is marked failed instead (nothing reads it, copies from
 *    it or replaces it) and leaves when its last protection ends, as the
 *    kept destination of a failed queued copy does (rsd__failed_settle()).
 *  - A value whose copy there was its last readable one and that has no
 *    source is lost: every call on it but a discard fails with RSD_EDEVLOST
 *    naming the value and the device (rsd__resolve()), snapshots show it
 *    (lost, lost_location), and rsd_discard() ends it. A value with a copy
 *    elsewhere keeps that copy; one with a source loads again, elsewhere, at
 *    its next ensure.
 *
 * Each sweep that changed something fires rsd:device_lost.
 *
 * Durable values (RSD_DURABLE at adopt) are what a job chooses to keep
 * through a loss. A move of one off its last host copy keeps that copy
 * (rsd__durable_keep(): the move copies, as an ensure would), so no move
 * leaves it device-only. At the exit of every writer call, the durable values the
 * call changed (the dirty list the publication reads) whose copies are all
 * on devices get a host copy, as an ensure to pinned host (pageable host
 * when pinned host refuses it) run by the same thread before it publishes.
 * An output a producer stream still writes is skipped until the reap that
 * sees the producer finish (that reap changes the value again), and so is
 * a value a transfer is moving. In a not-waiting call the write-back is
 * queued like the call's own copies.
 */
#include "../trace.h"
#include "core.h"

int rsd__err_failed(struct rsd_location at, uint64_t n)
{
	char name[RSD_LOCATION_NAME_MAX];

	return rsd__err(RSD_EDEVLOST,
			"%s failed for good (its device was lost) and is quarantined: "
			"%llu bytes cannot be admitted there",
			rsd_location_name(at, name, sizeof(name)), (unsigned long long)n);
}

int rsd__err_lost(const struct rsd_record *rec)
{
	char name[RSD_LOCATION_NAME_MAX];

	return rsd__err(RSD_EDEVLOST,
			"value %llu was lost with its device: its only copy was at %s, which "
			"failed for good, and it has no source; rsd_discard it",
			(unsigned long long)rec->handle.id,
			rsd_location_name(rec->lost_at, name, sizeof(name)));
}

int rsd__err_dead_copy(const struct rsd_record *rec, const struct rsd_mat *mat)
{
	char name[RSD_LOCATION_NAME_MAX];

	return rsd__err(RSD_EDEVLOST,
			"value %llu at %s: its device was lost for good; the copy there is "
			"unreadable and leaves when its %u lease(s), %u hold(s) and %u pending "
			"event(s) end",
			(unsigned long long)rec->handle.id,
			rsd_location_name(mat->loc, name, sizeof(name)), mat->use_count,
			mat->hold_count, mat->pending_count);
}

/*
 * A stream of a sound device that waited for the lost device's work
 * inherits the loss: its events report RSD_EDEVLOST, but the work queued
 * on it after the wait (a consumer's kernel, a copy) is still queued and
 * still names its memory, to be skipped in order. That answer is no final
 * one: the stream is drained first, as for any failed stream, or what the
 * answer releases would be freed under that work.
 */
bool rsd__devloss_answer(struct rsd_manager *m, void *stream, int dev, int code)
{
	struct rsd_error saved;
	bool final = true;
	int rc;

	if (code != -RSD_EDEVLOST)
		return false;
	rsd__devlost_note();
	if (!m->ops->device_lost)
		goto settle;
	/* The event's error is what the caller reports. A stream its owner
	 * destroyed (the driver no longer knows it) is on dev, the device
	 * of the record it came with. */
	saved = *rsd_last_error();
	rc = stream && m->ops->stream_device ? m->ops->stream_device(m->ops_ctx, stream, &dev) :
					       -RSD_ETYPE;
	*rsd__err_record() = saved;
	if (rc != -RSD_EDEVLOST && dev >= 0 && dev < m->ndevices)
		final = m->ops->device_lost(m->ops_ctx, dev);
settle:
	/* No stream is drained for a final answer, and a lost device's
	 * stream reports the loss before its staging worker opened the gates
	 * queued on it: the worker may still read the source of a copy the
	 * caller frees next, or write its destination (staging_worker.c). */
	if (final)
		rsd__staging_settle_lost(m);
	return final;
}

bool rsd__devloss_dead_block(const struct rsd_resident *r)
{
	return r->block_at.kind == RSD_CUDA && r->ops->device_lost &&
	       r->ops->device_lost(r->ops_ctx, r->block_at.device);
}

static bool loc_failed(const struct rsd_manager *m, struct rsd_location at)
{
	return at.kind == RSD_CUDA && m->acct[rsd__loc_slot(at)].failed;
}

/*
 * Whether mat outlives the failed locations: a committed copy outside
 * them, or one a queued copy is filling from a copy that outlives them
 * (a move's kept source, or a loaded value, outside them). A copy filled
 * from another filling copy is only as good as that one: the copy to
 * pinned of a value on the lost device never gets its bytes, so neither
 * does a copy queued from pinned behind it (it fails with pinned's
 * error, rsd__qcopy_finish()). depth bounds the walk along the chain (a
 * copy reads another location's copy, each location once).
 */
static bool survives(const struct rsd_manager *m, const struct rsd_record *rec,
		     const struct rsd_mat *mat, uint32_t depth)
{
	const struct rsd_mat *src;

	if (loc_failed(m, mat->loc) || mat->state == RSD_MAT_FAILED ||
	    mat->state == RSD_MAT_ARRIVING)
		return false;
	if (mat->state != RSD_MAT_FILLING)
		return true;
	if (loc_failed(m, mat->fill->loc))
		return false;
	/* What it reads is no materialization of rec (a move's kept source,
	 * a loaded value), or the copy at the fill's location. */
	src = rsd__fill_source(rec, mat);
	return !src || (depth && survives(m, rec, src, depth - 1));
}

/*
 * A copy of rec that outlives the failed locations (survives()). A
 * transfer's arriving destination does not count: a sound source it reads
 * is a copy of its own (a move's source stays until the commit), and one
 * on a failed location fails.
 */
static bool has_other_copy(const struct rsd_manager *m, const struct rsd_record *rec)
{
	for (uint32_t k = 0; k < rec->nmats; k++)
		if (survives(m, rec, &rec->mats[k], rec->nmats))
			return true;
	return false;
}

/* Whether a queued copy of rec still reads its copy at `at`: whether the
 * value outlives the loss is that copy's answer (its end sweeps again,
 * rsd__qcopy_finish()). */
static bool feeds_copy(const struct rsd_record *rec, struct rsd_location at)
{
	for (uint32_t k = 0; k < rec->nmats; k++) {
		const struct rsd_lease_rec *fill = rec->mats[k].fill;

		if (fill && fill->n && rsd_location_equal(fill->loc, at))
			return true;
	}
	return false;
}

struct sweep_counts {
	uint64_t removed, kept, lost;
};

/*
 * A queued copy out of a failed location to a sound one may still land:
 * it may have run before the loss, on a sound device's stream. Whether
 * the value survives is known when it ends (rsd__qcopy_finish() asks for
 * the sweep again).
 */
static bool copy_out_pending(const struct rsd_manager *m, const struct rsd_record *rec)
{
	for (uint32_t k = 0; k < rec->nmats; k++) {
		const struct rsd_lease_rec *f = rec->mats[k].fill;

		if (f && (loc_failed(m, f->loc) ||
			  (f->xf->restore && loc_failed(m, f->xf->leftover_at))))
			return true;
	}
	return false;
}

/* Settle rec's copies at failed locations (see the top of the file). */
static void sweep_record(struct rsd_manager *m, struct rsd_record *rec, struct sweep_counts *c,
			 struct sweep_counts *at_slot)
{
	if (copy_out_pending(m, rec))
		return;
	for (uint32_t j = rec->nmats; j-- > 0;) {
		struct rsd_mat *mat = &rec->mats[j];
		struct rsd_location at = mat->loc;
		struct sweep_counts *s = &at_slot[at.device];

		if (!loc_failed(m, at))
			continue;
		/* A transfer or queued copy in flight settles it when it ends
		 * (its thread's writer exit sweeps again). */
		if (mat->state == RSD_MAT_ARRIVING || mat->state == RSD_MAT_FILLING || mat->busy ||
		    mat->leaving || feeds_copy(rec, at))
			continue;
		if (!rec->lost && !rec->has_source && !has_other_copy(m, rec)) {
			rec->lost = true;
			rec->lost_at = at;
			rsd__mark_dirty(m, rec);
			rsd__bump(m);
			c->lost++;
			s->lost++;
		}
		if (!rsd__mat_protected(mat)) {
			rsd__remove(m, rec, at);
			c->removed++;
			s->removed++;
		} else if (!rsd__mat_failed(mat)) {
			rsd__mat_set_state(mat, RSD_MAT_FAILED, NULL, -RSD_EDEVLOST);
			rsd__mark_dirty(m, rec);
			rsd__bump(m);
			c->kept++;
			s->kept++;
		}
	}
}

static void settle(struct rsd_manager *m, const bool *fresh)
{
	struct sweep_counts c = { 0 }, at_slot[RSD_CUDA_MAX_DEVICE + 1] = { { 0 } };
	bool work = false;

	for (int d = 0; d < m->ndevices; d++) {
		const struct rsd_acct *a = &m->acct[2u + (unsigned)d];

		work |= a->failed && (a->value_count || a->pending_count || fresh[d]);
	}
	if (!work)
		return;
	/* The lost devices' events answer at once: fold them in as failed.
	 * An error of another device's event stays pending (no drain here). */
	rsd__reap_flags(m, false);
	for (size_t i = 0; i < m->nrecs; i++)
		if (!m->recs[i]->discarded)
			sweep_record(m, m->recs[i], &c, at_slot);
	for (int d = 0; d < m->ndevices; d++) {
		const struct sweep_counts *s = &at_slot[d];

		if (fresh[d] || s->removed || s->kept || s->lost)
			rsd_trace_device_lost(m->id, (struct rsd_location){ RSD_CUDA, d }, fresh[d],
					      s->removed, s->kept, s->lost);
	}
	if (c.lost)
		rsd__warn(m,
			  "%llu value(s) were lost with a failed device: their only copy was there "
			  "and they have no source (snapshots mark them lost)",
			  (unsigned long long)c.lost);
}

void rsd__quarantine(struct rsd_manager *m)
{
	bool fresh[RSD_CUDA_MAX_DEVICE + 1] = { false };
	bool changed = false;

	if (!m->ops->device_lost)
		return;
	for (int d = 0; d < m->ndevices; d++) {
		struct rsd_acct *a = &m->acct[2u + (unsigned)d];

		if (a->failed || !m->ops->device_lost(m->ops_ctx, d))
			continue;
		a->failed = true;
		fresh[d] = true;
		/* Snapshots show it even where nothing was placed yet. */
		rsd__record_location(m, (struct rsd_location){ RSD_CUDA, d });
		changed = true;
		rsd__warn(m,
			  "cuda:%d failed for good (the driver reports its device lost): "
			  "quarantined, nothing is admitted there any more",
			  d);
	}
	if (changed) {
		m->locs_dirty = true;
		rsd__bump(m);
	}
	/* A closed manager's records are gone or going (close.c). */
	if (!m->closed)
		settle(m, fresh);
}

void rsd__durable_set(struct rsd_manager *m, struct rsd_record *rec, enum rsd_replica_mode mode)
{
	if (!(mode & RSD_DURABLE))
		return;
	rec->durable = true;
	m->ndurable++;
}

bool rsd__durable_keep(const struct rsd_record *rec, struct rsd_location from)
{
	if (!rec->durable || from.kind == RSD_CUDA)
		return false;
	for (uint32_t k = 0; k < rec->nmats; k++) {
		const struct rsd_mat *mat = &rec->mats[k];

		if (mat->loc.kind != RSD_CUDA && !rsd_location_equal(mat->loc, from) &&
		    mat->state != RSD_MAT_ARRIVING && mat->state != RSD_MAT_FAILED)
			return false;
	}
	return true;
}

/* rec has no host copy (not even one arriving) and a whole device copy. */
static bool writeback_due(const struct rsd_record *rec)
{
	bool dev = false;

	if (!rec->durable || rec->discarded || rec->lost || rec->inflight || rec->loading)
		return false;
	for (uint32_t k = 0; k < rec->nmats; k++) {
		const struct rsd_mat *mat = &rec->mats[k];

		if (mat->loc.kind != RSD_CUDA)
			return false;
		/* A producer or a copy still writes it: its end comes back here. */
		if (mat->state == RSD_MAT_ARRIVING || mat->state == RSD_MAT_FILLING || mat->busy)
			return false;
		dev |= !rsd__mat_failed(mat);
	}
	return dev;
}

static int writeback(struct rsd_manager *m, struct rsd_record *rec)
{
	struct rsd_action a = rsd_action_ensure(rec->handle, RSD_LOC_PINNED_HOST);
	int err = rsd__exec_action(m, &a, NULL, NULL);

	if (err && !m->closed) {
		a = rsd_action_ensure(rec->handle, RSD_LOC_PAGEABLE_HOST);
		err = rsd__exec_action(m, &a, NULL, NULL);
	}
	return err;
}

#define WRITEBACK_MAX 64

void rsd__durable_writeback(struct rsd_manager *m)
{
	struct rsd_record *due[WRITEBACK_MAX];
	struct rsd_error saved;
	size_t n = 0;

	/* Inside a plan's batch the copies commit at its flush, which comes
	 * back here; a closed manager keeps nothing. */
	if (m->closed || m->drop_deferred || rsd__batch_pending())
		return;
	for (size_t i = 0; i < m->ndirty && n < WRITEBACK_MAX; i++)
		if (writeback_due(m->dirty[i]))
			due[n++] = m->dirty[i];
	if (!n)
		return;
	/* The write-back's errors must not mask the call's own result. */
	saved = *rsd_last_error();
	for (size_t i = 0; i < n && !m->closed; i++) {
		/* Another thread may have changed it while a copy ran. */
		if (!writeback_due(due[i]))
			continue;
		if (writeback(m, due[i]))
			rsd__warn(
				m,
				"durable value %llu has no host copy: its write-back failed (%s); "
				"the next call that changes it tries again",
				(unsigned long long)due[i]->handle.id, rsd_last_error()->message);
	}
	*rsd__err_record() = saved;
}
