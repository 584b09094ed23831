// SPDX-License-Identifier: MIT
/*
 * Outputs: a value a kernel produced, adopted into the reservation made
 * for it (reference.md §8.10).
 *
 * A reservation already counts its bytes at its location; adopting the
 * output moves the output's charge out of the reservation and onto the new
 * value in one hold of the transition lock, so no reader, admission or
 * snapshot ever sees the bytes counted twice or free in between, and
 * nothing is admitted: the location's total does not change.
 *
 * When a stream still writes the output, the new materialization is
 * *filling*, exactly as the destination of a copy a not-waiting call queued
 * (queued.c, §22): an event recorded on the producer stream is kept in a
 * pending lease record, removal is refused until a reap sees it, consumers
 * on other streams are ordered after it, host readers and copies from it
 * wait for it. Its completion is folded in without a version step.
 */
#include <string.h>

#include "core.h"
#include "../trace.h"

/* The record and the event of a producer stream's write (nothing on
 * failure). */
static int producer_prepare(struct rsd_manager *m, void *stream, struct rsd_lease_rec **out,
			    void **event)
{
	struct rsd_lease_rec *l = rsd__xfer_new(m);
	int err;

	if (!l)
		return rsd__err(RSD_ENOMEM, "out of memory for an output's producer event");
	err = m->ops->event_record(m->ops_ctx, stream, event);
	if (err) {
		rsd__xfer_discard(m, l);
		return err;
	}
	*out = l;
	return 0;
}

int rsd__adopt_reserved_locked(struct rsd_manager *m, struct rsd_reservation *r,
			       struct rsd_resident *value, enum rsd_replica_mode mode,
			       void *producer_stream, struct rsd_handle *out)
{
	char name[RSD_LOCATION_NAME_MAX];
	struct rsd_lease_rec *fill = NULL;
	struct rsd_location at = r->loc;
	struct rsd_value_spec spec;
	struct rsd_record *rec;
	struct rsd_acct *a;
	void *event = NULL;
	int err;

	if (!r->active || !r->tracked)
		return rsd__err(RSD_ELIFETIME, "reservation '%s' has been released", r->label);
	if (producer_stream) {
		err = rsd__check_stream(m, producer_stream, at);
		if (err)
			return err;
	}
	err = rsd__adopt_spec(value, at, mode, &spec);
	if (err)
		return err;
	if (spec.storage_nbytes > r->nbytes)
		return rsd__err(RSD_EBUDGET,
				"a value charging %llu bytes does not fit reservation '%s' at %s, "
				"which has %llu bytes left",
				(unsigned long long)spec.storage_nbytes, r->label,
				rsd_location_name(at, name, sizeof(name)),
				(unsigned long long)r->nbytes);
	if (producer_stream) {
		err = producer_prepare(m, producer_stream, &fill, &event);
		if (err)
			return err;
	}
	/* Out of the reservation first, so that the install's peak sees the
	 * same total; put back if the install fails. */
	a = &m->acct[rsd__loc_slot(at)];
	r->nbytes -= spec.storage_nbytes;
	a->reserved -= spec.storage_nbytes;
	rsd__acct_change(m, rsd__loc_slot(at), spec.storage_nbytes, false);
	err = rsd__adopt_install(m, value, at, &spec, true, &rec);
	if (err) {
		r->nbytes += spec.storage_nbytes;
		a->reserved += spec.storage_nbytes;
		rsd__acct_change(m, rsd__loc_slot(at), spec.storage_nbytes, true);
		if (fill) {
			m->ops->event_destroy(m->ops_ctx, event);
			rsd__xfer_discard(m, fill);
		}
		return err;
	}
	rsd__resv_changed(m, r);
	rsd__durable_set(m, rec, mode);
	if (fill)
		rsd__qcopy_fill(m, fill, rec, at, producer_stream, event, RSD_XFER_OUTPUT);
	rsd_trace_adopt_reserved(m->id, rec->handle.id, at, spec.storage_nbytes, r->id, r->label,
				 r->nbytes, fill != NULL);
	*out = rec->handle;
	return 0;
}

int rsd_adopt_reserved(struct rsd_reservation *r, struct rsd_resident *value,
		       enum rsd_replica_mode mode, void *producer_stream, struct rsd_handle *out)
{
	struct rsd_manager *m;
	int err;

	if (!r || !value || !out)
		return rsd__err(RSD_ETYPE, "rsd_adopt_reserved: NULL %s",
				!r     ? "reservation" :
				!value ? "value" :
					 "out");
	if (!r->active)
		return rsd__err(RSD_ELIFETIME, "reservation '%s' has been released", r->label);
	m = r->link.m;
	if (!m)
		return rsd__err(RSD_ECLOSED, "the manager of reservation '%s' no longer exists",
				r->label);
	err = rsd__writer_enter(m, RSD_W_OPEN | RSD_W_REAP);
	if (err)
		return err;
	err = rsd__adopt_reserved_locked(m, r, value, mode, producer_stream, out);
	rsd__writer_exit(m);
	return err;
}
