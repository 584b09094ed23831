// SPDX-License-Identifier: MIT
/*
 * Materializations: validation against a spec (§2.2, §2.4), install and
 * removal with the storage-owner index and accounting (§4.5).
 */
#include <stdlib.h>
#include <string.h>

#include "core.h"

static int dev_of(struct rsd_location at)
{
	return at.kind == RSD_CUDA ? at.device : -1;
}

/* §2.2: buffers agree with the location's device and pinning. */
static int conforms(const struct rsd_resident *v, struct rsd_location at)
{
	char name[RSD_LOCATION_NAME_MAX];
	bool pinned = false, pageable = false;
	int dev;

	if (!v->nbuf)
		return rsd__err(RSD_EMATERIAL, "value has no buffers: its device is undefined");
	dev = dev_of(v->bufs[0].location);
	for (size_t i = 0; i < v->nbuf; i++) {
		struct rsd_location b = v->bufs[i].location;

		if (dev_of(b) != dev)
			return rsd__err(RSD_EMATERIAL, "value buffers live on different devices");
		pinned |= b.kind == RSD_PINNED_HOST;
		pageable |= b.kind == RSD_PAGEABLE_HOST;
	}
	/* The location's name is formatted only for an error: not on the
	 * success path every install takes. */
	if (dev != dev_of(at))
		return rsd__err(RSD_EMATERIAL, "value lives on %s, which does not conform to %s",
				dev < 0 ? "the host" : "a CUDA device",
				rsd_location_name(at, name, sizeof(name)));
	if (pinned && pageable)
		return rsd__err(RSD_EMATERIAL, "value mixes pageable and pinned storage");
	if (at.kind == RSD_PINNED_HOST && !pinned)
		return rsd__err(RSD_EMATERIAL, "value for %s is not fully pinned",
				rsd_location_name(at, name, sizeof(name)));
	if (at.kind == RSD_PAGEABLE_HOST && pinned)
		return rsd__err(RSD_EMATERIAL, "value for %s unexpectedly uses pinned storage",
				rsd_location_name(at, name, sizeof(name)));
	return 0;
}

int rsd__mat_validate(const struct rsd_value_spec *spec, const struct rsd_resident *v,
		      struct rsd_location at)
{
	uint64_t logical, storage;
	int err;

	if (!rsd_type_is_a(v->type, spec->type))
		return rsd__err(RSD_EMATERIAL,
				"value of type '%s' is not a concrete or base type '%s'",
				v->type && v->type->name ? v->type->name : "?",
				spec->type->name ? spec->type->name : "?");
	err = conforms(v, at);
	if (err)
		return err;
	logical = rsd_resident_nbytes(v);
	if (logical != spec->logical_nbytes)
		return rsd__err(RSD_EMATERIAL,
				"logical payload size mismatch: %llu bytes, spec says %llu",
				(unsigned long long)logical,
				(unsigned long long)spec->logical_nbytes);
	storage = rsd_resident_storage_nbytes(v);
	if (storage == UINT64_MAX)
		return rsd__err(RSD_EMATERIAL,
				"two buffers name one allocation with different sizes");
	if ((logical > storage ? logical : storage) > spec->storage_nbytes)
		return rsd__err(RSD_EMATERIAL,
				"registered charge exceeded: %llu bytes for a charge of %llu",
				(unsigned long long)(logical > storage ? logical : storage),
				(unsigned long long)spec->storage_nbytes);
	return 0;
}

static int key_device(const struct rsd_buffer_view *b)
{
	return dev_of(b->location);
}

/* Whether an index slot names rec's materialization at `at`. */
static bool owned_by(const struct rsd_keymap_slot *s, const struct rsd_record *rec,
		     struct rsd_location at)
{
	return s->owner == rec->index && s->at_slot == rsd__loc_slot(at);
}

/* How install() charges. */
#define INSTALL_ARRIVING 1u /* the admit phase of a transfer */
#define INSTALL_COUNTED 2u  /* the bytes are counted already: no admission */

/*
 * Install v at `at`. An arriving install (the admit phase of a transfer,
 * transition.c) charges and indexes the destination but neither records the
 * location nor moves state_version: its commit does (rsd__arrival_commit),
 * so the version steps exactly as a synchronous install's would. A counted
 * install takes bytes its caller removed from a reservation under the same
 * hold of the lock: the location's total does not change, so there is
 * nothing to admit (other threads' plan headroom must not refuse it).
 */
static int install(struct rsd_manager *m, struct rsd_record *rec, struct rsd_location at,
		   struct rsd_resident *v, bool allow_exclusive, unsigned how)
{
	bool arriving = how & INSTALL_ARRIVING;
	char name[RSD_LOCATION_NAME_MAX];
	uint64_t charge = rec->spec.storage_nbytes;
	struct rsd_acct *a;
	struct rsd_mat *mat;
	size_t added = 0;
	int err;

	/* Location names are formatted only for an error: an adopt that
	 * formatted one up front spent a tenth of its time in snprintf. */
	if (rsd__rec_mat(rec, at))
		return rsd__err(RSD_EUSAGE,
				"internal: value %llu already has a materialization at %s",
				(unsigned long long)rec->handle.id,
				rsd_location_name(at, name, sizeof(name)));
	if (rec->spec.replica_mode == RSD_EXCLUSIVE && rec->nmats && !allow_exclusive)
		return rsd__err(RSD_EOWNERSHIP,
				"RSD_EXCLUSIVE value %llu cannot have simultaneous steady replicas",
				(unsigned long long)rec->handle.id);
	err = rsd__mat_validate(&rec->spec, v, at);
	if (err)
		return err;
	err = how & INSTALL_COUNTED ? 0 : rsd__admit(m, at, charge);
	if (err)
		return err;
	for (size_t i = 0; i < v->nbuf; i++) {
		const struct rsd_buffer_view *b = &v->bufs[i];
		struct rsd_keymap_slot *s;

		if (!b->base_nbytes)
			continue;
		s = rsd__keymap_find(&m->owners, key_device(b), b->base);
		if (s) {
			char oname[RSD_LOCATION_NAME_MAX];

			/* Buffers of this value may share an allocation. */
			if (owned_by(s, rec, at))
				continue;
			err = rsd__err(
				RSD_EOWNERSHIP,
				"materialization of %llu at %s must own independent backing storage: "
				"allocation %p is owned by value %llu at %s",
				(unsigned long long)rec->handle.id,
				rsd_location_name(at, name, sizeof(name)), b->base,
				(unsigned long long)(s->owner == rec->index ? rec :
									      m->recs[s->owner])
					->handle.id,
				rsd_location_name(rsd__slot_loc(s->at_slot), oname, sizeof(oname)));
			goto unwind;
		}
		err = rsd__keymap_insert(&m->owners, key_device(b), b->base, rec->index, at);
		if (err)
			goto unwind;
		added = i + 1;
	}
	if (!rec->mats) {
		rec->mats = rec->inline_mats;
		rec->capmats = RSD_ARRAY_SIZE(rec->inline_mats);
	}
	if (rec->nmats == rec->capmats) {
		uint32_t cap = rec->capmats ? rec->capmats * 2 :
					      (uint32_t)RSD_ARRAY_SIZE(rec->inline_mats);
		struct rsd_mat *mats;

		mats = rec->mats == rec->inline_mats ? rsd__malloc(cap * sizeof(*mats)) :
						       rsd__realloc(rec->mats, cap * sizeof(*mats));
		if (!mats) {
			err = rsd__err(RSD_ENOMEM, "out of memory adding a materialization");
			goto unwind;
		}
		if (rec->mats == rec->inline_mats)
			memcpy(mats, rec->inline_mats, sizeof(rec->inline_mats));
		rec->mats = mats;
		rec->capmats = cap;
	}
	/* Nothing below can fail: the install is committed. */
	if (!arriving)
		rsd__record_location(m, at);
	mat = &rec->mats[rec->nmats++];
	memset(mat, 0, sizeof(*mat));
	mat->loc = at;
	mat->value = v;
	mat->storage_nbytes = rsd_resident_storage_nbytes(v);
	if (arriving)
		rsd__mat_set_state(mat, RSD_MAT_ARRIVING, NULL, 0);
	v->managed = true;
	a = &m->acct[rsd__loc_slot(at)];
	a->used += charge;
	rsd__acct_change(m, rsd__loc_slot(at), charge, true);
	a->value_count++;
	if (a->used > a->peak_used)
		a->peak_used = a->used;
	rsd__acct_peak(a);
	rsd__mark_dirty(m, rec);
	if (arriving) {
		a->arriving++;
		m->locs_dirty = true;
	} else {
		rsd__bump(m);
	}
	return 0;
unwind:
	for (size_t i = 0; i < added; i++) {
		const struct rsd_buffer_view *b = &v->bufs[i];
		struct rsd_keymap_slot *s;

		if (!b->base_nbytes)
			continue;
		s = rsd__keymap_find(&m->owners, key_device(b), b->base);
		if (s && owned_by(s, rec, at))
			rsd__keymap_remove(&m->owners, key_device(b), b->base);
	}
	return err;
}

int rsd__install(struct rsd_manager *m, struct rsd_record *rec, struct rsd_location at,
		 struct rsd_resident *v, bool allow_exclusive)
{
	return install(m, rec, at, v, allow_exclusive, 0);
}

int rsd__install_counted(struct rsd_manager *m, struct rsd_record *rec, struct rsd_location at,
			 struct rsd_resident *v)
{
	return install(m, rec, at, v, false, INSTALL_COUNTED);
}

int rsd__install_back(struct rsd_manager *m, struct rsd_record *rec, struct rsd_location at,
		      struct rsd_resident *v)
{
	return install(m, rec, at, v, true, INSTALL_COUNTED);
}

int rsd__install_arriving(struct rsd_manager *m, struct rsd_record *rec, struct rsd_location at,
			  struct rsd_resident *v, bool allow_exclusive)
{
	return install(m, rec, at, v, allow_exclusive, INSTALL_ARRIVING);
}

void rsd__arrival_commit(struct rsd_manager *m, struct rsd_record *rec, struct rsd_location at)
{
	struct rsd_mat *mat = rsd__rec_mat(rec, at);
	uint32_t i = (uint32_t)(mat - rec->mats);

	/* Insertion order is commit order (§16.3, §4.10): a destination
	 * admitted earlier but committed later comes after the others. */
	if (i + 1 < rec->nmats) {
		struct rsd_mat done = *mat;

		memmove(mat, mat + 1, (rec->nmats - i - 1) * sizeof(*mat));
		mat = &rec->mats[rec->nmats - 1];
		*mat = done;
	}
	rsd__mat_set_state(mat, RSD_MAT_RESIDENT, NULL, 0);
	m->acct[rsd__loc_slot(at)].arriving--;
	rsd__record_location(m, at);
	rsd__mark_dirty(m, rec);
	rsd__bump(m);
}

int rsd__removable(struct rsd_record *rec, struct rsd_mat *mat)
{
	char name[RSD_LOCATION_NAME_MAX];

	if (mat->busy || mat->state == RSD_MAT_ARRIVING || mat->state == RSD_MAT_FILLING)
		return rsd__err(RSD_EINUSE,
				"materialization of %llu at %s is in use: a transfer is in flight",
				(unsigned long long)rec->handle.id,
				rsd_location_name(mat->loc, name, sizeof(name)));
	if (!rsd__mat_protected(mat))
		return 0;
	return rsd__err(
		RSD_EINUSE,
		"materialization of %llu at %s is in use: %u active reads, %u holds, %u pending events",
		(unsigned long long)rec->handle.id, rsd_location_name(mat->loc, name, sizeof(name)),
		mat->use_count, mat->hold_count, mat->pending_count);
}

/* Pop the materialization at `at`, refunding its charge, and free its
 * value unless `keep` (then it is returned); state_version is the
 * caller's. */
/* Take mat's owner entries and its charge out (pop(), a returned block). */
static void disown(struct rsd_manager *m, struct rsd_record *rec, struct rsd_location at)
{
	struct rsd_resident *v = rsd__rec_mat(rec, at)->value;
	struct rsd_acct *a = &m->acct[rsd__loc_slot(at)];

	for (size_t b = 0; v && b < v->nbuf; b++) {
		struct rsd_keymap_slot *s;

		if (!v->bufs[b].base_nbytes)
			continue;
		s = rsd__keymap_find(&m->owners, key_device(&v->bufs[b]), v->bufs[b].base);
		if (s && owned_by(s, rec, at))
			rsd__keymap_remove(&m->owners, key_device(&v->bufs[b]), v->bufs[b].base);
	}
	a->used -= rec->spec.storage_nbytes;
	rsd__acct_change(m, rsd__loc_slot(at), rec->spec.storage_nbytes, false);
}

void rsd__return_storage(struct rsd_manager *m, struct rsd_record *rec, struct rsd_location at)
{
	struct rsd_mat *mat = rsd__rec_mat(rec, at);

	disown(m, rec, at);
	mat->returned = true;
	mat->storage_nbytes = 0;
	/* Its header stays (readers of a failed copy look at it): no block,
	 * no buffer that owns anything. */
	mat->value->block = NULL;
	for (size_t b = 0; b < mat->value->nbuf; b++)
		mat->value->bufs[b].base_nbytes = 0;
	rsd__mark_dirty(m, rec);
	m->locs_dirty = true;
}

static struct rsd_resident *pop(struct rsd_manager *m, struct rsd_record *rec,
				struct rsd_location at, bool keep)
{
	struct rsd_mat *mat = rsd__rec_mat(rec, at);
	struct rsd_resident *v;
	struct rsd_acct *a;
	uint32_t i;

	if (!mat)
		return NULL;
	v = mat->value;
	a = &m->acct[rsd__loc_slot(at)];
	/* A returned one gave its owner entries and charge back already. */
	if (!mat->returned)
		disown(m, rec, at);
	a->value_count--;
	/* Keep insertion order: snapshots and discard iterate it. */
	i = (uint32_t)(mat - rec->mats);
	for (; i + 1 < rec->nmats; i++)
		rec->mats[i] = rec->mats[i + 1];
	rec->nmats--;
	rsd__mark_dirty(m, rec);
	m->locs_dirty = true;
	if (keep)
		return v;
	/*
	 * Pageable memory the library allocated is returned after a grace
	 * period, off the caller's path (unmapping a large value costs as
	 * much as copying it). Device and pinned memory go back at once, so
	 * the report's "after" allocator sample does not count it (§4.10).
	 */
	if (v->block && v->block_at.kind == RSD_PAGEABLE_HOST && !v->release &&
	    !rsd__retire(m->img, rsd__retire_resident, v))
		v = NULL;
	rsd__resident_destroy(v);
	return NULL;
}

/* Remove the materialization at `at` (it exists and is unprotected): +1. */
void rsd__remove(struct rsd_manager *m, struct rsd_record *rec, struct rsd_location at)
{
	pop(m, rec, at, false);
	rsd__bump(m);
}

struct rsd_resident *rsd__detach(struct rsd_manager *m, struct rsd_record *rec,
				 struct rsd_location at)
{
	struct rsd_resident *v = pop(m, rec, at, true);

	rsd__bump(m);
	return v;
}

/* A transfer failed: its arriving destination goes as if it never came
 * (no version step; the peaks it raised stay, §9.2). */
void rsd__arrival_abort(struct rsd_manager *m, struct rsd_record *rec, struct rsd_location at)
{
	m->acct[rsd__loc_slot(at)].arriving--;
	pop(m, rec, at, false);
}

struct rsd_resident *rsd__arrival_take(struct rsd_manager *m, struct rsd_record *rec,
				       struct rsd_location at)
{
	m->acct[rsd__loc_slot(at)].arriving--;
	return pop(m, rec, at, true);
}

void rsd__arrival_abandon(struct rsd_manager *m, struct rsd_record *rec, struct rsd_location at)
{
	rsd__keep_forever(rsd__arrival_take(m, rec, at));
}
