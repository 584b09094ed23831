// SPDX-License-Identifier: MIT
/* Registration: adopt a live value, or register a reconstruction source. */
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "../trace.h"

static struct rsd_record *record_new(struct rsd_manager *m, const struct rsd_type *type,
				     const struct rsd_value_spec *spec)
{
	struct rsd_record *rec;

	if (m->nrecs == m->caprecs) {
		size_t cap = m->caprecs ? m->caprecs * 2 : 64;
		/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers */
		struct rsd_record **recs = rsd__realloc(m->recs, cap * sizeof(*recs));

		if (!recs)
			return NULL;
		m->recs = recs;
		m->caprecs = cap;
	}
	/* Records live until close: carve them with the images' objects. */
	rec = rsd__slab_alloc(&m->oc, sizeof(*rec));
	if (!rec)
		return NULL;
	memset(rec, 0, sizeof(*rec));
	/* Issued now even if the caller fails later: an id is never reused. */
	rec->handle.manager_id = m->id;
	rec->handle.id = rsd__next_id();
	rec->handle.type = type;
	rec->index = m->nrecs;
	rec->spec = *spec;
	return rec;
}

void rsd__record_free(struct rsd_manager *m, struct rsd_record *rec)
{
	if (rec->mats != rec->inline_mats)
		free(rec->mats);
	rsd__slab_free(&m->oc, rec, sizeof(*rec));
}

/* Make the record visible: it keeps its place in registration order. */
static void record_commit(struct rsd_manager *m, struct rsd_record *rec)
{
	m->recs[m->nrecs++] = rec;
	rsd__mark_dirty(m, rec);
}

int rsd__adopt_spec(const struct rsd_resident *value, struct rsd_location at,
		    enum rsd_replica_mode mode, struct rsd_value_spec *spec)
{
	uint64_t logical = rsd_resident_nbytes(value), storage = rsd_resident_storage_nbytes(value);
	int err;

	spec->type = value->type;
	spec->logical_nbytes = logical;
	spec->storage_nbytes = logical > storage ? logical : storage;
	/* RSD_DURABLE is a flag of the record, not of the spec (devloss.c). */
	if (mode == (RSD_REPLICABLE | RSD_DURABLE))
		mode = RSD_REPLICABLE;
	spec->replica_mode = mode;
	spec->recoverability = RSD_MUST_PRESERVE;
	/* Conformance (and consistent allocation sizes) before the spec's
	 * own checks; the derived type and sizes match by construction. */
	err = rsd__mat_validate(spec, value, at);
	if (err)
		return err;
	if (mode == (RSD_EXCLUSIVE | RSD_DURABLE))
		return rsd__err(RSD_ETYPE, "RSD_DURABLE needs RSD_REPLICABLE: a durable value "
					   "keeps a host copy beside its device copies");
	if (mode != RSD_EXCLUSIVE && mode != RSD_REPLICABLE)
		return rsd__err(RSD_ETYPE, "invalid replica mode %d", (int)mode);
	/* What the storage-alias check says for a resident a manager owns;
	 * it also covers zero-size residents, which have no storage keys. */
	if (value->managed)
		return rsd__err(RSD_EOWNERSHIP, "the resident is already owned by a manager");
	return 0;
}

int rsd__adopt_install(struct rsd_manager *m, struct rsd_resident *value, struct rsd_location at,
		       const struct rsd_value_spec *spec, bool counted, struct rsd_record **out)
{
	struct rsd_record *rec;
	int err;

	rec = record_new(m, value->type, spec);
	if (!rec) {
		/* The code spelled out: callers use *out whenever 0 comes back. */
		rsd__err(RSD_ENOMEM, "out of memory creating a value record");
		return -RSD_ENOMEM;
	}
	err = counted ? rsd__install_counted(m, rec, at, value) :
			rsd__install(m, rec, at, value, false);
	if (err) {
		rsd__record_free(m, rec);
		return err;
	}
	record_commit(m, rec);
	*out = rec;
	return 0;
}

int rsd_adopt(struct rsd_manager *m, struct rsd_resident *value, const struct rsd_location *at,
	      enum rsd_replica_mode mode, struct rsd_handle *out)
{
	struct rsd_value_spec spec;
	struct rsd_location loc;
	struct rsd_record *rec;
	int err;

	if (!value)
		return rsd__err(RSD_ETYPE, "rsd_adopt: value is not a resident (NULL)");
	if (!m || !out)
		return rsd__err(RSD_ETYPE, "rsd_adopt: NULL argument");
	/* §6.1 order: closed, location, runtime validity, conformance, spec,
	 * then ownership at install. */
	err = rsd__writer_enter(m, RSD_W_OPEN | RSD_W_REAP);
	if (err)
		return err;
	if (at) {
		loc = *at;
	} else if (!rsd__resident_location(value, &loc)) {
		bool host = value->nbuf > 0;

		for (size_t i = 0; i < value->nbuf; i++)
			host &= value->bufs[i].location.kind != RSD_CUDA;
		err = rsd__err(
			RSD_EMATERIAL,
			host ? "cannot infer a location: value mixes pageable and pinned storage" :
			       "cannot infer a location: value buffers live on different devices");
		goto out;
	}
	err = rsd__check_location(m, loc);
	if (!err)
		err = rsd__adopt_spec(value, loc, mode, &spec);
	if (!err)
		err = rsd__adopt_install(m, value, loc, &spec, false, &rec);
	if (err)
		goto out;
	rsd__durable_set(m, rec, mode);
	rsd_trace_adopt(m->id, rec->handle.id, loc, spec.storage_nbytes);
	*out = rec->handle;
out:
	rsd__writer_exit(m);
	return err;
}

int rsd__check_spec(const struct rsd_value_spec *spec)
{
	int err;

	if (!spec)
		return rsd__err(RSD_ETYPE, "value spec is NULL");
	err = rsd__type_check(spec->type, "value spec");
	if (err)
		return err;
	if (spec->storage_nbytes < spec->logical_nbytes)
		return rsd__err(RSD_EINVAL, "value spec storage_nbytes %llu < logical_nbytes %llu",
				(unsigned long long)spec->storage_nbytes,
				(unsigned long long)spec->logical_nbytes);
	if (spec->replica_mode != RSD_EXCLUSIVE && spec->replica_mode != RSD_REPLICABLE)
		return rsd__err(RSD_ETYPE, "value spec has an invalid replica mode %d",
				(int)spec->replica_mode);
	if (spec->recoverability != RSD_MUST_PRESERVE &&
	    spec->recoverability != RSD_RECONSTRUCTIBLE)
		return rsd__err(RSD_ETYPE, "value spec has an invalid recoverability %d",
				(int)spec->recoverability);
	return 0;
}

int rsd_register_source(struct rsd_manager *m, const struct rsd_value_spec *spec,
			const struct rsd_source *source, struct rsd_location source_location,
			struct rsd_handle *out)
{
	struct rsd_record *rec;
	int err;

	err = rsd__check_spec(spec);
	if (err)
		return err;
	if (!source || !source->load)
		return rsd__err(RSD_ETYPE, "source has no load callback");
	if (!m || !out)
		return rsd__err(RSD_ETYPE, "rsd_register_source: NULL argument");
	err = rsd__writer_enter(m, RSD_W_OPEN | RSD_W_REAP);
	if (err)
		return err;
	err = rsd__check_location(m, source_location);
	if (err)
		goto out;
	if (spec->recoverability != RSD_RECONSTRUCTIBLE) {
		err = rsd__err(RSD_EINVAL,
			       "only RSD_RECONSTRUCTIBLE values may be registered with a source");
		goto out;
	}
	rec = record_new(m, spec->type, spec);
	if (!rec) {
		err = rsd__err(RSD_ENOMEM, "out of memory creating a value record");
		goto out;
	}
	rec->has_source = true;
	rec->source = *source;
	rec->source_loc = source_location;
	rsd__record_location(m, source_location);
	record_commit(m, rec);
	rsd__bump(m);
	rsd_trace_register_source(m->id, rec->handle.id, source_location, spec->storage_nbytes);
	*out = rec->handle;
out:
	rsd__writer_exit(m);
	return err;
}
