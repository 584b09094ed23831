// SPDX-License-Identifier: MIT
/* Shared setup of the core tests (cfx.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atf-c.h>
#include "../check.h"

#include "cfx.h"

const struct rsd_type cfx_base_type = { "base", &rsd_resident_type };
const struct rsd_type cfx_derived_type = { "derived", &cfx_base_type };
const struct rsd_type cfx_other_type = { "other", &rsd_resident_type };
const struct rsd_type cfx_rogue_type = { "rogue", NULL };

static void make(struct cfx *f, const struct rsd_budget *b, size_t nb, bool host, int ndevices)
{
	struct rsd_manager_config mc;

	memset(f, 0, sizeof(*f));
	memset(&mc, 0, sizeof(mc));
	mc.budgets = b;
	mc.nbudgets = nb;
	if (host) {
		mc.host_only = true;
	} else {
		struct rsd_simdev_config sc = { .ndevices = ndevices,
						.auto_complete = true,
						.pooled = true };

		RSD_REQUIRE_OK(rsd_simdev_create(&sc, &f->sd));
		mc.driver = rsd_simdev_ops();
		mc.driver_ctx = f->sd;
	}
	RSD_REQUIRE_OK(rsd_manager_create(&mc, &f->m));
}

void cfx_host(struct cfx *f, const struct rsd_budget *b, size_t nb)
{
	make(f, b, nb, true, 0);
}

void cfx_sim(struct cfx *f, const struct rsd_budget *b, size_t nb, int ndevices)
{
	make(f, b, nb, false, ndevices);
}

void cfx_fini(struct cfx *f)
{
	rsd_manager_destroy(f->m);
	if (f->sd)
		rsd_simdev_destroy(f->sd);
	f->m = NULL;
	f->sd = NULL;
}

struct rsd_location cfx_cuda(int dev)
{
	struct rsd_location at;

	RSD_REQUIRE_OK(rsd_cuda_location(dev, &at));
	return at;
}

const char *cfx_name(struct rsd_location at)
{
	static _Thread_local char ring[8][RSD_LOCATION_NAME_MAX];
	static _Thread_local unsigned next;
	char *b = ring[next++ % 8];

	return rsd_location_name(at, b, RSD_LOCATION_NAME_MAX);
}

const struct cfx_bad_loc cfx_bad_locs[] = {
	{ { (enum rsd_location_kind)7, -1 }, RSD_ETYPE },
	{ { (enum rsd_location_kind)7, 0 }, RSD_ETYPE },
	{ { (enum rsd_location_kind) - 3, 0 }, RSD_ETYPE },
	{ { RSD_PAGEABLE_HOST, 3 }, RSD_ETYPE },
	{ { RSD_PINNED_HOST, 3 }, RSD_ETYPE },
	{ { RSD_CUDA, 128 }, RSD_EINVAL },
	{ { RSD_CUDA, -1 }, RSD_EINVAL },
	{ { RSD_CUDA, -7 }, RSD_EINVAL },
	{ { RSD_CUDA, 100000 }, RSD_EINVAL },
	{ { RSD_CUDA, -2147483647 - 1 }, RSD_EINVAL },
};
const size_t cfx_nbad_locs = sizeof(cfx_bad_locs) / sizeof(cfx_bad_locs[0]);

void cfx_reset_error(int code)
{
	struct rsd_location l;

	if (code == RSD_EINVAL)
		RSD_REQUIRE_ERR(RSD_ETYPE, rsd_location_parse(NULL, &l));
	else
		RSD_REQUIRE_ERR(RSD_EINVAL, rsd_location_parse("bogus", &l));
}

void cfx_err(int rc, int code, const char *expr, const char *file, int line)
{
	struct rsd_error e = *rsd_last_error();

	if (rc != -code) {
		atf_tc_fail_check(file, (size_t)line,
				  "%s returned %d (%s), expected %d (%s); last error: %s", expr, rc,
				  rc ? rsd_strerror(rc) : "success", -code, rsd_strerror(code),
				  e.message);
		return;
	}
	if (e.code != code)
		atf_tc_fail_check(file, (size_t)line, "%s: rsd_last_error()->code %d, expected %d",
				  expr, e.code, code);
	if (!e.message[0])
		atf_tc_fail_check(file, (size_t)line, "%s: rsd_last_error()->message is empty",
				  expr);
}

uint64_t cfx_version(struct cfx *f)
{
	uint64_t v = 0;
	int rc = rsd_manager_state_version_get(f->m, &v);

	ATF_REQUIRE_EQ_MSG(rc, 0, "state_version: %s", rsd_last_error()->message);
	return v;
}

struct rsd_resident *cfx_alloc(struct cfx *f, struct rsd_location at, uint64_t n)
{
	struct rsd_resident *r = NULL;
	int rc = rsd_resident_alloc(f->m, &rsd_resident_type, at, 1, &n, NULL, 0, &r);

	if (rc == -RSD_ENOMEM && at.kind == RSD_PINNED_HOST)
		atf_tc_skip("pinned host memory unavailable here: %s", rsd_last_error()->message);
	ATF_REQUIRE_EQ_MSG(rc, 0, "rsd_resident_alloc(%s, %llu): %s", cfx_name(at),
			   (unsigned long long)n, rsd_last_error()->message);
	return r;
}

struct rsd_handle cfx_adopt(struct cfx *f, struct rsd_location at, uint64_t n,
			    enum rsd_replica_mode mode)
{
	struct rsd_resident *r = cfx_alloc(f, at, n);
	struct rsd_handle h;

	ATF_REQUIRE_EQ_MSG(rsd_adopt(f->m, r, &at, mode, &h), 0, "rsd_adopt: %s",
			   rsd_last_error()->message);
	return h;
}

/* ---- sources ---- */

int cfx_load(void *ctx, struct rsd_resident **out)
{
	struct csrc *s = ctx;
	uint64_t n = s->nbytes;
	int rc;

	s->loads++;
	if (s->hook) {
		rc = s->hook(s);
		if (rc)
			return rc;
	}
	if (s->fail_times) {
		if (s->fail_times != UINT32_MAX)
			s->fail_times--;
		return s->fail_rc;
	}
	if (s->make)
		return s->make(s, out);
	rc = rsd_resident_alloc(s->f->m, s->type ? s->type : &rsd_resident_type, s->at, 1, &n, NULL,
				0, out);
	return rc;
}

void cfx_src_release(void *ctx)
{
	struct csrc *s = ctx;

	s->releases++;
}

struct rsd_handle cfx_register(struct cfx *f, struct csrc *s, struct rsd_location sl,
			       uint64_t logical, uint64_t charge, enum rsd_replica_mode mode)
{
	struct rsd_value_spec spec = { &rsd_resident_type, logical, charge, mode,
				       RSD_RECONSTRUCTIBLE };
	struct rsd_source src = { cfx_load, cfx_src_release, s };
	struct rsd_handle h;

	if (!s->f) {
		s->f = f;
		s->at = sl;
		s->nbytes = logical;
	}
	ATF_REQUIRE_EQ_MSG(rsd_register_source(f->m, &spec, &src, sl, &h), 0,
			   "rsd_register_source: %s", rsd_last_error()->message);
	return h;
}

struct rsd_handle cfx_sourced(struct cfx *f, struct csrc *s, struct rsd_location sl)
{
	return cfx_register(f, s, sl, N, N, RSD_REPLICABLE);
}

/* ---- snapshots ---- */

#define INV(cond, ...)                                                                             \
	do {                                                                                       \
		if (!(cond))                                                                       \
			atf_tc_fail_check(__FILE__, __LINE__, "snapshot invariant: " __VA_ARGS__); \
	} while (0)

static uint64_t max3(uint64_t a, uint64_t b, uint64_t c)
{
	uint64_t m = a > b ? a : b;

	return m > c ? m : c;
}

void cfx_check_invariants(struct cfx *f, const struct rsd_snapshot *s)
{
	INV(s->manager_id == rsd_manager_id(f->m), "manager_id %llu != %llu",
	    (unsigned long long)s->manager_id, (unsigned long long)rsd_manager_id(f->m));
	INV(s->captured_at_ns > 0, "captured_at_ns is 0");
	for (size_t i = 0; i < s->nvalues; i++) {
		const struct rsd_value_snapshot *v = &s->values[i];

		INV(v->handle.manager_id == s->manager_id, "value %zu from another manager", i);
		for (size_t j = 0; j < i; j++)
			INV(!rsd_handle_equal(s->values[j].handle, v->handle), "handle %llu twice",
			    (unsigned long long)v->handle.id);
		INV(v->has_source == v->has_source_location, "has_source != has_source_location");
		INV(v->spec.storage_nbytes >= v->spec.logical_nbytes, "spec storage < logical");
		if (v->discarded)
			INV(!v->has_source && !v->nmaterializations,
			    "discarded value %llu has a source or materializations",
			    (unsigned long long)v->handle.id);
		/* Lost with its device: no source, not discarded, and no
		 * readable copy (one kept at the failed location, or one a
		 * copy from there still fills until the copy fails). */
		if (v->lost) {
			const struct rsd_location_snapshot *fl = cfx_loc(s, v->lost_location);

			INV(!v->has_source && !v->discarded, "lost value %llu has a source",
			    (unsigned long long)v->handle.id);
			INV(fl && fl->failed, "lost value %llu: %s is not failed",
			    (unsigned long long)v->handle.id, cfx_name(v->lost_location));
			for (size_t k = 0; k < v->nmaterializations; k++)
				INV(v->materializations[k].arriving,
				    "lost value %llu has a readable copy at %s",
				    (unsigned long long)v->handle.id,
				    cfx_name(v->materializations[k].location));
		}
		for (size_t k = 0; k < v->nmaterializations; k++) {
			const struct rsd_materialization_snapshot *mt = &v->materializations[k];

			for (size_t l = 0; l < k; l++)
				INV(!rsd_location_equal(v->materializations[l].location,
							mt->location),
				    "value %llu has two materializations at %s",
				    (unsigned long long)v->handle.id, cfx_name(mt->location));
			INV(cfx_loc(s, mt->location), "materialization at unknown location %s",
			    cfx_name(mt->location));
			INV(mt->logical_nbytes == v->spec.logical_nbytes, "mat logical != spec");
			INV(mt->charged_nbytes == v->spec.storage_nbytes,
			    "mat charged != spec charge");
			INV(mt->charged_nbytes >= mt->logical_nbytes &&
				    mt->charged_nbytes >= mt->storage_nbytes,
			    "charged %llu < max(logical %llu, storage %llu)",
			    (unsigned long long)mt->charged_nbytes,
			    (unsigned long long)mt->logical_nbytes,
			    (unsigned long long)mt->storage_nbytes);
		}
	}
	for (size_t i = 0; i < s->nlocations; i++) {
		const struct rsd_location_snapshot *l = &s->locations[i];
		uint64_t used = 0, vc = 0, rc = 0, resv = 0, uc = 0, hc = 0, pc = 0;

		INV(rsd_location_valid(l->location), "invalid location record in snapshot");
		for (size_t j = 0; j < i; j++)
			INV(!rsd_location_equal(s->locations[j].location, l->location),
			    "location %s listed twice", cfx_name(l->location));
		for (size_t j = 0; j < s->nvalues; j++) {
			const struct rsd_materialization_snapshot *mt =
				cfx_mat(&s->values[j], l->location);

			if (!mt)
				continue;
			used += mt->charged_nbytes;
			vc++;
			uc += mt->use_count;
			hc += mt->hold_count;
			pc += mt->pending_event_count;
		}
		for (size_t j = 0; j < s->nreservations; j++) {
			if (!rsd_location_equal(s->reservations[j].location, l->location))
				continue;
			rc++;
			resv += s->reservations[j].nbytes;
		}
		INV(l->used_bytes == used, "%s used %llu != sum of charges %llu",
		    cfx_name(l->location), (unsigned long long)l->used_bytes,
		    (unsigned long long)used);
		INV(l->value_count == vc, "%s value_count %llu != %llu", cfx_name(l->location),
		    (unsigned long long)l->value_count, (unsigned long long)vc);
		INV(l->reserved_bytes == resv, "%s reserved %llu != sum of reservations %llu",
		    cfx_name(l->location), (unsigned long long)l->reserved_bytes,
		    (unsigned long long)resv);
		INV(l->reservation_count == rc, "%s reservation_count %llu != %llu",
		    cfx_name(l->location), (unsigned long long)l->reservation_count,
		    (unsigned long long)rc);
		INV(l->use_count == uc && l->hold_count == hc && l->pending_event_count == pc,
		    "%s protection counts are not sums over its materializations",
		    cfx_name(l->location));
		INV(l->peak_used_bytes >= l->used_bytes, "%s peak_used < used",
		    cfx_name(l->location));
		INV(l->peak_charged_bytes >= max3(l->peak_used_bytes, l->used_bytes,
						  l->used_bytes + l->reserved_bytes),
		    "%s peak_charged %llu < max(peak_used %llu, used+reserved %llu)",
		    cfx_name(l->location), (unsigned long long)l->peak_charged_bytes,
		    (unsigned long long)l->peak_used_bytes,
		    (unsigned long long)(l->used_bytes + l->reserved_bytes));
		INV(l->plan_hold_count <= l->plan_held_bytes, "%s %lu plans hold %llu bytes",
		    cfx_name(l->location), (unsigned long)l->plan_hold_count,
		    (unsigned long long)l->plan_held_bytes);
		if (l->has_budget) {
			/* The ledger: every term admission sums. */
			uint64_t taken = l->used_bytes + l->reserved_bytes + l->in_flight_bytes +
					 l->plan_held_bytes;

			INV(taken <= l->budget_bytes,
			    "%s used+reserved+in flight+held %llu above budget",
			    cfx_name(l->location), (unsigned long long)taken);
			INV(l->peak_charged_bytes <= l->budget_bytes,
			    "%s peak_charged above budget", cfx_name(l->location));
			INV(l->remaining_budget_bytes == l->budget_bytes - taken,
			    "%s remaining %llu != budget - used - reserved - in flight - held",
			    cfx_name(l->location), (unsigned long long)l->remaining_budget_bytes);
		} else {
			INV(!l->plan_held_bytes, "%s: plans hold headroom without a budget",
			    cfx_name(l->location));
		}
		if (l->location.kind != RSD_CUDA)
			INV(!l->has_allocator, "host location %s has allocator metrics",
			    cfx_name(l->location));
	}
	for (size_t i = 0; i < s->nreservations; i++) {
		INV(cfx_loc(s, s->reservations[i].location), "reservation at unknown location");
		INV(s->reservations[i].label && s->reservations[i].label[0],
		    "reservation label empty");
	}
}

struct rsd_snapshot *cfx_snap(struct cfx *f)
{
	struct rsd_snapshot *s = NULL;

	ATF_REQUIRE_EQ_MSG(rsd_snapshot_take(f->m, &s), 0, "snapshot: %s",
			   rsd_last_error()->message);
	cfx_check_invariants(f, s);
	return s;
}

const struct rsd_value_snapshot *cfx_val(const struct rsd_snapshot *s, struct rsd_handle h)
{
	for (size_t i = 0; i < s->nvalues; i++)
		if (rsd_handle_equal(s->values[i].handle, h))
			return &s->values[i];
	return NULL;
}

const struct rsd_location_snapshot *cfx_loc(const struct rsd_snapshot *s, struct rsd_location at)
{
	for (size_t i = 0; i < s->nlocations; i++)
		if (rsd_location_equal(s->locations[i].location, at))
			return &s->locations[i];
	return NULL;
}

const struct rsd_materialization_snapshot *cfx_mat(const struct rsd_value_snapshot *v,
						   struct rsd_location at)
{
	for (size_t i = 0; v && i < v->nmaterializations; i++)
		if (rsd_location_equal(v->materializations[i].location, at))
			return &v->materializations[i];
	return NULL;
}

size_t cfx_mats(struct cfx *f, struct rsd_handle h, struct rsd_location *out, size_t cap)
{
	struct rsd_snapshot *s = cfx_snap(f);
	const struct rsd_value_snapshot *v = cfx_val(s, h);
	size_t n;

	ATF_REQUIRE_MSG(v, "handle %llu not in the snapshot", (unsigned long long)h.id);
	n = v->nmaterializations;
	for (size_t i = 0; i < n && i < cap; i++)
		out[i] = v->materializations[i].location;
	rsd_snapshot_free(s);
	return n;
}

bool cfx_resident(struct cfx *f, struct rsd_handle h, struct rsd_location at)
{
	struct rsd_snapshot *s = cfx_snap(f);
	bool r;

	ATF_REQUIRE(cfx_val(s, h));
	r = cfx_mat(cfx_val(s, h), at) != NULL;
	rsd_snapshot_free(s);
	return r;
}

static uint64_t loc_field(struct cfx *f, struct rsd_location at, int which)
{
	struct rsd_snapshot *s = cfx_snap(f);
	const struct rsd_location_snapshot *l = cfx_loc(s, at);
	uint64_t n = 0;

	if (l)
		n = which == 0 ? l->used_bytes :
		    which == 1 ? l->reserved_bytes :
		    which == 2 ? l->peak_charged_bytes :
				 l->in_flight_bytes;
	rsd_snapshot_free(s);
	return n;
}

uint64_t cfx_used(struct cfx *f, struct rsd_location at)
{
	return loc_field(f, at, 0);
}

uint64_t cfx_reserved(struct cfx *f, struct rsd_location at)
{
	return loc_field(f, at, 1);
}

uint64_t cfx_peak_charged(struct cfx *f, struct rsd_location at)
{
	return loc_field(f, at, 2);
}

uint64_t cfx_in_flight(struct cfx *f, struct rsd_location at)
{
	return loc_field(f, at, 3);
}

void cfx_check_locations(struct cfx *f, const struct rsd_location *want, size_t n, const char *file,
			 int line)
{
	struct rsd_location got[RSD_CUDA_MAX_DEVICE + 3];
	size_t k = rsd_manager_locations(f->m, got, sizeof(got) / sizeof(got[0]));
	char gs[512] = "", ws[512] = "";
	bool same = k == n;

	for (size_t i = 0; i < k && i < n; i++)
		same &= rsd_location_equal(got[i], want[i]);
	if (same)
		return;
	for (size_t i = 0; i < k; i++)
		snprintf(gs + strlen(gs), sizeof(gs) - strlen(gs), "%s ", cfx_name(got[i]));
	for (size_t i = 0; i < n; i++)
		snprintf(ws + strlen(ws), sizeof(ws) - strlen(ws), "%s ", cfx_name(want[i]));
	atf_tc_fail_check(file, (size_t)line, "locations [%s], expected [%s]", gs, ws);
}

#define SAME(cond, ...)                                                                       \
	do {                                                                                  \
		if (!(cond))                                                                  \
			atf_tc_fail_check(file, (size_t)line, "state changed: " __VA_ARGS__); \
	} while (0)

/* Field by field: the snapshot's padding bytes are not written. */
static bool mat_same(const struct rsd_materialization_snapshot *x,
		     const struct rsd_materialization_snapshot *y)
{
	return rsd_location_equal(x->location, y->location) &&
	       x->logical_nbytes == y->logical_nbytes && x->storage_nbytes == y->storage_nbytes &&
	       x->charged_nbytes == y->charged_nbytes && x->use_count == y->use_count &&
	       x->hold_count == y->hold_count && x->pending_event_count == y->pending_event_count &&
	       x->arriving == y->arriving;
}

void cfx_check_same(const struct rsd_snapshot *a, const struct rsd_snapshot *b, bool allow_peak,
		    const char *file, int line)
{
	SAME(a->state_version == b->state_version, "version %llu -> %llu",
	     (unsigned long long)a->state_version, (unsigned long long)b->state_version);
	SAME(a->nvalues == b->nvalues, "%zu -> %zu values", a->nvalues, b->nvalues);
	for (size_t i = 0; i < a->nvalues && i < b->nvalues; i++) {
		const struct rsd_value_snapshot *x = &a->values[i], *y = &b->values[i];

		SAME(rsd_handle_equal(x->handle, y->handle), "value %zu handle", i);
		SAME(x->has_source == y->has_source && x->discarded == y->discarded,
		     "value %zu source/discarded", i);
		SAME(x->nmaterializations == y->nmaterializations, "value %zu: %zu -> %zu replicas",
		     i, x->nmaterializations, y->nmaterializations);
		for (size_t k = 0; k < x->nmaterializations && k < y->nmaterializations; k++)
			SAME(mat_same(&x->materializations[k], &y->materializations[k]),
			     "value %zu materialization %zu", i, k);
	}
	SAME(a->nlocations == b->nlocations, "%zu -> %zu locations", a->nlocations, b->nlocations);
	for (size_t i = 0; i < a->nlocations && i < b->nlocations; i++) {
		const struct rsd_location_snapshot *x = &a->locations[i], *y = &b->locations[i];

		SAME(rsd_location_equal(x->location, y->location), "location %zu", i);
		SAME(x->used_bytes == y->used_bytes && x->reserved_bytes == y->reserved_bytes &&
			     x->value_count == y->value_count &&
			     x->reservation_count == y->reservation_count &&
			     x->peak_used_bytes == y->peak_used_bytes &&
			     x->use_count == y->use_count && x->hold_count == y->hold_count &&
			     x->pending_event_count == y->pending_event_count,
		     "%s accounting", cfx_name(x->location));
		if (!allow_peak)
			SAME(x->peak_charged_bytes == y->peak_charged_bytes,
			     "%s peak_charged %llu -> %llu", cfx_name(x->location),
			     (unsigned long long)x->peak_charged_bytes,
			     (unsigned long long)y->peak_charged_bytes);
	}
	SAME(a->nreservations == b->nreservations, "%zu -> %zu reservations", a->nreservations,
	     b->nreservations);
}

static void loc_or_absent(char *buf, size_t len, bool has, struct rsd_location at)
{
	if (has)
		rsd_location_name(at, buf, len);
	else
		snprintf(buf, len, "absent");
}

void cfx_check_report(const struct rsd_transition *r, const struct rsd_action *a, bool no_op,
		      const struct rsd_location *src, const struct rsd_location *dst,
		      uint64_t logical, uint64_t storage, const char *reason, const char *file,
		      int line)
{
	char x[32], y[32];

	if (!rsd_action_equal(&r->action, a))
		atf_tc_fail_check(file, (size_t)line, "report action differs from the request");
	if (r->no_op != no_op)
		atf_tc_fail_check(file, (size_t)line, "report no_op %d, expected %d", r->no_op,
				  no_op);
	if (r->has_source != !!src || (src && !rsd_location_equal(r->source, *src))) {
		loc_or_absent(x, sizeof(x), r->has_source, r->source);
		loc_or_absent(y, sizeof(y), !!src, src ? *src : PAGEABLE);
		atf_tc_fail_check(file, (size_t)line, "report source %s, expected %s", x, y);
	}
	if (r->has_destination != !!dst || (dst && !rsd_location_equal(r->destination, *dst))) {
		loc_or_absent(x, sizeof(x), r->has_destination, r->destination);
		loc_or_absent(y, sizeof(y), !!dst, dst ? *dst : PAGEABLE);
		atf_tc_fail_check(file, (size_t)line, "report destination %s, expected %s", x, y);
	}
	if (r->logical_nbytes != logical || r->storage_nbytes != storage)
		atf_tc_fail_check(file, (size_t)line, "report bytes %llu/%llu, expected %llu/%llu",
				  (unsigned long long)r->logical_nbytes,
				  (unsigned long long)r->storage_nbytes,
				  (unsigned long long)logical, (unsigned long long)storage);
	if (r->storage_nbytes < r->logical_nbytes)
		atf_tc_fail_check(file, (size_t)line, "report storage < logical");
	if ((reason == NULL) != (r->reason == NULL) || (reason && strcmp(reason, r->reason)))
		atf_tc_fail_check(file, (size_t)line, "report reason \"%s\", expected \"%s\"",
				  r->reason ? r->reason : "(absent)", reason ? reason : "(absent)");
	if (!r->started_at_ns || r->completed_at_ns < r->started_at_ns)
		atf_tc_fail_check(file, (size_t)line, "report timestamps %llu..%llu",
				  (unsigned long long)r->started_at_ns,
				  (unsigned long long)r->completed_at_ns);
	if (r->has_allocator &&
	    (r->allocator_device < 0 || r->allocator_device > RSD_CUDA_MAX_DEVICE))
		atf_tc_fail_check(file, (size_t)line, "report allocator device %d",
				  r->allocator_device);
}

const struct rsd_materialization_snapshot *cfx_snap_mat(const struct rsd_snapshot *s,
							struct rsd_handle h, struct rsd_location at)
{
	const struct rsd_value_snapshot *v = cfx_val(s, h);

	ATF_REQUIRE(v);
	return cfx_mat(v, at);
}

void cfx_fill(struct cfx *f, struct rsd_handle h, struct rsd_location at, int seed)
{
	const struct rsd_resident *r;
	struct rsd_lease *l;

	RSD_REQUIRE_OK(rsd_acquire(f->m, &h, 1, at, NULL, &l));
	RSD_REQUIRE_OK(rsd_lease_value(l, h, &r));
	memset(rsd_resident_data(r, 0), seed, (size_t)rsd_resident_buffer_nbytes(r, 0));
	RSD_REQUIRE_OK(rsd_lease_release(l, 0));
	rsd_lease_free(l);
}

bool cfx_has_pattern(struct cfx *f, struct rsd_handle h, struct rsd_location at, int seed)
{
	const struct rsd_resident *r;
	struct rsd_lease *l;
	void *stream = NULL;
	bool same = true;

	if (at.kind == RSD_CUDA)
		stream = rsd_simdev_ops()->default_stream(f->sd, at.device);
	RSD_REQUIRE_OK(rsd_acquire(f->m, &h, 1, at, stream, &l));
	RSD_REQUIRE_OK(rsd_lease_value(l, h, &r));
	for (uint64_t i = 0; i < rsd_resident_buffer_nbytes(r, 0); i++)
		same &= ((const unsigned char *)rsd_resident_data(r, 0))[i] == (unsigned char)seed;
	RSD_REQUIRE_OK(rsd_lease_release(l, at.kind == RSD_CUDA ? RSD_RELEASE_WAIT : 0));
	rsd_lease_free(l);
	return same;
}
