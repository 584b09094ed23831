// SPDX-License-Identifier: MIT
/*
 * Source loading (reference.md §6.2, §6.3, §4.3, §18.13-18.20): registration
 * checks, load failure kinds and retries, validation of loaded values, the
 * temporary charge at the source location and the alias rule for loaded
 * storage.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <atf-c.h>

#include "cfx.h"

static void need_pinned(struct cfx *f)
{
	struct rsd_resident *probe = cfx_alloc(f, PINNED, 1);

	rsd_resident_free(probe);
}

/* Nothing reserved anywhere, the value still unloaded with its source. */
static void check_clean(struct cfx *f, struct rsd_handle h)
{
	struct rsd_snapshot *s = cfx_snap(f);
	const struct rsd_value_snapshot *v = cfx_val(s, h);

	for (size_t i = 0; i < s->nlocations; i++)
		ATF_CHECK_EQ_MSG(s->locations[i].reserved_bytes, 0, "%s reserved %llu",
				 cfx_name(s->locations[i].location),
				 (unsigned long long)s->locations[i].reserved_bytes);
	ATF_REQUIRE(v);
	ATF_CHECK(v->has_source && !v->discarded);
	ATF_CHECK_EQ(v->nmaterializations, 0);
	rsd_snapshot_free(s);
}

/* §6.2, §18.13. */
ATF_TC_WITHOUT_HEAD(register_source_checks);
ATF_TC_BODY(register_source_checks, tc)
{
	struct rsd_value_spec ok = { &cfx_base_type, 8, 16, RSD_REPLICABLE, RSD_RECONSTRUCTIBLE };
	struct rsd_value_spec spec;
	struct csrc s = { 0 };
	struct rsd_source src = { cfx_load, cfx_src_release, &s }, noload = { NULL, NULL, &s };
	const struct rsd_value_snapshot *v;
	struct rsd_snapshot *snap;
	struct rsd_handle h = { 0 };
	struct cfx f;

	cfx_host(&f, NULL, 0);
	spec = ok;
	spec.recoverability = RSD_MUST_PRESERVE;
	ERR(RSD_EINVAL, rsd_register_source(f.m, &spec, &src, PAGEABLE, &h));
	ERR(RSD_ETYPE, rsd_register_source(f.m, &ok, &noload, PAGEABLE, &h));
	ERR(RSD_ETYPE, rsd_register_source(f.m, &ok, NULL, PAGEABLE, &h));
	spec = ok;
	spec.storage_nbytes = 7;
	ERR(RSD_EINVAL, rsd_register_source(f.m, &spec, &src, PAGEABLE, &h));
	spec = ok;
	spec.type = &cfx_rogue_type;
	ERR(RSD_ETYPE, rsd_register_source(f.m, &spec, &src, PAGEABLE, &h));
	spec = ok;
	spec.replica_mode = (enum rsd_replica_mode)9;
	ERR(RSD_ETYPE, rsd_register_source(f.m, &spec, &src, PAGEABLE, &h));
	spec = ok;
	spec.recoverability = (enum rsd_recoverability)9;
	ERR(RSD_ETYPE, rsd_register_source(f.m, &spec, &src, PAGEABLE, &h));
	ATF_CHECK_EQ(h.id, 0);
	ATF_CHECK_EQ(s.loads, 0);
	CHECK_VERSION(&f, 0);
	ATF_CHECK_EQ(rsd_manager_locations(f.m, NULL, 0), 0);

	/* The handle carries the spec's (base) type; the source is never called. */
	OK(rsd_register_source(f.m, &ok, &src, PINNED, &h));
	ATF_CHECK(h.type == &cfx_base_type);
	ATF_CHECK_EQ(s.loads, 0);
	CHECK_VERSION(&f, 2);
	snap = cfx_snap(&f);
	v = cfx_val(snap, h);
	ATF_REQUIRE(v);
	ATF_CHECK(v->has_source && v->has_source_location);
	ATF_CHECK(rsd_location_equal(v->source_location, PINNED));
	ATF_CHECK_EQ(v->nmaterializations, 0);
	ATF_CHECK(!memcmp(&v->spec, &ok, sizeof(ok)));
	/* No charge is taken at registration. */
	ATF_CHECK_EQ(cfx_loc(snap, PINNED)->used_bytes, 0);
	ATF_CHECK_EQ(cfx_loc(snap, PINNED)->peak_charged_bytes, 0);
	rsd_snapshot_free(snap);
	cfx_fini(&f);
	/* The release callback runs once at close. */
	ATF_CHECK_EQ(s.releases, 1);
}

/* §18.15: a loader's own RSD error propagates unchanged; a retry succeeds. */
ATF_TC_WITHOUT_HEAD(load_failure_own_code);
ATF_TC_BODY(load_failure_own_code, tc)
{
	struct csrc s = { 0 };
	struct rsd_snapshot *before, *after;
	struct rsd_handle h;
	struct cfx f;

	cfx_host(&f, NULL, 0);
	h = cfx_sourced(&f, &s, PAGEABLE);
	s.fail_rc = -RSD_EUNAVAILABLE;
	s.fail_times = 1;
	before = cfx_snap(&f);
	ERR(RSD_EUNAVAILABLE, rsd_ensure(f.m, h, PAGEABLE, NULL, NULL));
	ATF_CHECK_EQ(rsd_last_error()->cause, 0);
	after = cfx_snap(&f);
	CHECK_SAME(before, after, true);
	/* The temporary charge of the failed load still raised the peak. */
	ATF_CHECK_EQ(cfx_loc(after, PAGEABLE)->peak_charged_bytes, N);
	rsd_snapshot_free(before);
	rsd_snapshot_free(after);
	check_clean(&f, h);
	OK(rsd_ensure(f.m, h, PAGEABLE, NULL, NULL));
	ATF_CHECK_EQ(s.loads, 2);
	ATF_CHECK(cfx_resident(&f, h, PAGEABLE));
	cfx_fini(&f);
}

/* A non-RSD failure becomes RSD_ESOURCE with the value kept as cause. */
ATF_TC_WITHOUT_HEAD(load_failure_foreign_code);
ATF_TC_BODY(load_failure_foreign_code, tc)
{
	static const int codes[] = { 7, 1000, -1000, RSD_EBUDGET, -RSD_EMAX };
	struct csrc s = { 0 };
	struct rsd_handle h;
	struct cfx f;

	cfx_host(&f, NULL, 0);
	h = cfx_sourced(&f, &s, PAGEABLE);
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		s.fail_rc = codes[i];
		s.fail_times = 1;
		ERR(RSD_ESOURCE, rsd_ensure(f.m, h, PAGEABLE, NULL, NULL));
		ATF_CHECK_EQ_MSG(rsd_last_error()->cause, codes[i], "loader returned %d, cause %d",
				 codes[i], rsd_last_error()->cause);
		check_clean(&f, h);
	}
	CHECK_VERSION(&f, 2);
	OK(rsd_ensure(f.m, h, PAGEABLE, NULL, NULL));
	ATF_CHECK_EQ(s.loads, 6);
	CHECK_VERSION(&f, 3);
	cfx_fini(&f);
}

/* INT_MIN is not the negation of any RSD code either. */
ATF_TC_WITHOUT_HEAD(load_failure_int_min);
ATF_TC_BODY(load_failure_int_min, tc)
{
	struct csrc s = { 0 };
	struct rsd_handle h;
	struct cfx f;

	cfx_host(&f, NULL, 0);
	h = cfx_sourced(&f, &s, PAGEABLE);
	s.fail_rc = INT_MIN;
	s.fail_times = 1;
	ERR(RSD_ESOURCE, rsd_ensure(f.m, h, PAGEABLE, NULL, NULL));
	ATF_CHECK_EQ(rsd_last_error()->cause, INT_MIN);
	check_clean(&f, h);
	cfx_fini(&f);
}

static int make_null(struct csrc *s, struct rsd_resident **out)
{
	(void)s;
	*out = NULL;
	return 0;
}

/* Loader succeeding without a value. */
ATF_TC_WITHOUT_HEAD(load_returns_nothing);
ATF_TC_BODY(load_returns_nothing, tc)
{
	struct csrc s = { 0 };
	struct rsd_handle h;
	struct cfx f;

	cfx_host(&f, NULL, 0);
	h = cfx_sourced(&f, &s, PAGEABLE);
	s.make = make_null;
	ATF_CHECK(rsd_ensure(f.m, h, PAGEABLE, NULL, NULL) < 0);
	check_clean(&f, h);
	CHECK_VERSION(&f, 2);
	cfx_fini(&f);
}

static void free_big(void *ctx, struct rsd_resident *r)
{
	(void)r;
	rsd_resident_free(ctx);
}

static int make_strided(struct csrc *s, struct rsd_resident **out)
{
	uint64_t n = 64;
	struct rsd_resident *big;
	struct rsd_buffer_view v;
	int rc;

	/* A 32-byte view into a 64-byte allocation the view's release frees. */
	rc = rsd_resident_alloc(s->f->m, &rsd_resident_type, s->at, 1, &n, NULL, 0, &big);
	if (rc)
		return rc;
	v.data = rsd_resident_data(big, 0);
	v.nbytes = 32;
	v.base = v.data;
	v.base_nbytes = 64;
	v.location = s->at;
	rc = rsd_resident_wrap(s->type ? s->type : &rsd_resident_type, 1, &v, NULL, 0, free_big,
			       big, out);
	if (rc)
		rsd_resident_free(big);
	return rc;
}

/* §2.4, §18.14: every invalid loaded value is a materialization error. */
ATF_TC_WITHOUT_HEAD(load_invalid_values);
ATF_TC_BODY(load_invalid_values, tc)
{
	struct rsd_value_spec spec = { &cfx_base_type, 32, 48, RSD_REPLICABLE,
				       RSD_RECONSTRUCTIBLE };
	struct csrc s = { 0 }, p = { 0 };
	struct rsd_source src = { cfx_load, NULL, &s }, psrc = { cfx_load, NULL, &p };
	struct rsd_handle h, hp;
	struct cfx f;

	cfx_host(&f, NULL, 0);
	need_pinned(&f);
	s.f = &f;
	s.at = PAGEABLE;
	s.nbytes = 32;
	OK(rsd_register_source(f.m, &spec, &src, PAGEABLE, &h));
	CHECK_VERSION(&f, 2);

	/* Unrelated type, then the (super) root type. */
	s.type = &cfx_other_type;
	ERR(RSD_EMATERIAL, rsd_ensure(f.m, h, PAGEABLE, NULL, NULL));
	check_clean(&f, h);
	s.type = &rsd_resident_type;
	ERR(RSD_EMATERIAL, rsd_ensure(f.m, h, PINNED, NULL, NULL));
	check_clean(&f, h);
	/* Wrong logical size, either way. */
	s.type = &cfx_base_type;
	s.nbytes = 31;
	ERR(RSD_EMATERIAL, rsd_ensure(f.m, h, PAGEABLE, NULL, NULL));
	check_clean(&f, h);
	s.nbytes = 33;
	ERR(RSD_EMATERIAL, rsd_ensure(f.m, h, PAGEABLE, NULL, NULL));
	check_clean(&f, h);
	/* Storage above the charge: a 32-byte view of a 64-byte allocation. */
	s.make = make_strided;
	ERR(RSD_EMATERIAL, rsd_ensure(f.m, h, PAGEABLE, NULL, NULL));
	check_clean(&f, h);
	s.make = NULL;
	s.nbytes = 32;
	CHECK_VERSION(&f, 2);
	CHECK_LOCATIONS(&f, PAGEABLE);

	/* A pageable value for a pinned source location. */
	p.f = &f;
	p.at = PAGEABLE;
	p.nbytes = 32;
	p.type = &cfx_derived_type;
	OK(rsd_register_source(f.m, &spec, &psrc, PINNED, &hp));
	ERR(RSD_EMATERIAL, rsd_ensure(f.m, hp, PINNED, NULL, NULL));
	check_clean(&f, hp);
	/* A subtype in pinned memory is accepted. */
	p.at = PINNED;
	OK(rsd_ensure(f.m, hp, PINNED, NULL, NULL));
	ATF_CHECK(cfx_resident(&f, hp, PINNED));
	s.type = &cfx_derived_type;
	OK(rsd_ensure(f.m, h, PAGEABLE, NULL, NULL));
	ATF_CHECK_EQ(s.loads, 6);
	ATF_CHECK_EQ(p.loads, 2);
	cfx_fini(&f);
}

/* §20.2, §18.18: the load runs before the destination budget check. */
ATF_TC_WITHOUT_HEAD(load_then_full_destination);
ATF_TC_BODY(load_then_full_destination, tc)
{
	const struct rsd_budget b[] = { { { RSD_PINNED_HOST, -1 }, N } };
	const struct rsd_location_snapshot *l;
	struct csrc s = { 0 };
	struct rsd_snapshot *snap;
	struct rsd_error e;
	struct rsd_handle h;
	struct cfx f;

	cfx_host(&f, b, 1);
	cfx_adopt(&f, PINNED, N, RSD_EXCLUSIVE);
	CHECK_VERSION(&f, 1);
	h = cfx_sourced(&f, &s, PAGEABLE);
	CHECK_VERSION(&f, 3);
	ERR(RSD_EBUDGET, rsd_ensure(f.m, h, PINNED, NULL, NULL));
	e = *rsd_last_error();
	ATF_CHECK(rsd_location_equal(e.location, PINNED));
	ATF_CHECK_EQ(e.budget_bytes, N);
	ATF_CHECK_EQ(e.used_bytes, N);
	ATF_CHECK_EQ(e.reserved_bytes, 0);
	ATF_CHECK_EQ(e.requested_bytes, N);
	ATF_CHECK_EQ(s.loads, 1);
	CHECK_VERSION(&f, 3);
	snap = cfx_snap(&f);
	l = cfx_loc(snap, PAGEABLE);
	ATF_CHECK_EQ(l->used_bytes, 0);
	ATF_CHECK_EQ(l->reserved_bytes, 0);
	ATF_CHECK_EQ(l->peak_used_bytes, 0);
	ATF_CHECK_EQ(l->peak_charged_bytes, N);
	rsd_snapshot_free(snap);
	CHECK_LOCATIONS(&f, PINNED, PAGEABLE);
	check_clean(&f, h);
	cfx_fini(&f);
}

/* §4.3 step a: the temporary charge itself must fit the source location. */
ATF_TC_WITHOUT_HEAD(load_rejected_at_source);
ATF_TC_BODY(load_rejected_at_source, tc)
{
	const struct rsd_budget b[] = { { { RSD_PAGEABLE_HOST, -1 }, 100 } };
	struct rsd_reservation *r;
	struct csrc s = { 0 };
	struct rsd_error e;
	struct rsd_handle h;
	struct cfx f;

	cfx_host(&f, b, 1);
	need_pinned(&f);
	h = cfx_sourced(&f, &s, PAGEABLE);
	OK(rsd_reserve(f.m, PAGEABLE, 50, "half", &r));
	ERR(RSD_EBUDGET, rsd_ensure(f.m, h, PINNED, NULL, NULL));
	e = *rsd_last_error();
	ATF_CHECK(rsd_location_equal(e.location, PAGEABLE));
	ATF_CHECK_EQ(e.budget_bytes, 100);
	ATF_CHECK_EQ(e.used_bytes, 0);
	ATF_CHECK_EQ(e.reserved_bytes, 50);
	ATF_CHECK_EQ(e.requested_bytes, N);
	ATF_CHECK_EQ(s.loads, 0);
	CHECK_LOCATIONS(&f, PAGEABLE);
	ATF_CHECK_EQ(cfx_peak_charged(&f, PAGEABLE), 50);
	OK(rsd_reservation_release(r));
	rsd_reservation_free(r);
	OK(rsd_ensure(f.m, h, PINNED, NULL, NULL));
	ATF_CHECK_EQ(s.loads, 1);
	ATF_CHECK_EQ(cfx_peak_charged(&f, PAGEABLE), N);
	cfx_fini(&f);
}

/* §18.19: destination == source location: one charge, not two. */
ATF_TC_WITHOUT_HEAD(load_at_destination_single_charge);
ATF_TC_BODY(load_at_destination_single_charge, tc)
{
	const struct rsd_budget b[] = { { { RSD_PINNED_HOST, -1 }, N } };
	struct csrc s = { 0 };
	struct rsd_snapshot *snap;
	struct rsd_handle h;
	struct cfx f;

	cfx_host(&f, b, 1);
	need_pinned(&f);
	h = cfx_sourced(&f, &s, PINNED);
	OK(rsd_move(f.m, h, PINNED, NULL, NULL, NULL));
	snap = cfx_snap(&f);
	ATF_CHECK_EQ(cfx_loc(snap, PINNED)->used_bytes, N);
	ATF_CHECK_EQ(cfx_loc(snap, PINNED)->reserved_bytes, 0);
	ATF_CHECK_EQ(cfx_loc(snap, PINNED)->peak_charged_bytes, N);
	rsd_snapshot_free(snap);
	ATF_CHECK_EQ(s.loads, 1);
	cfx_fini(&f);
}

/* Both sources hand out new wrappers of one cached allocation. */
struct cache {
	char mem[N];
	unsigned wrappers, released;
};

static void cache_release(void *ctx, struct rsd_resident *r)
{
	struct cache *c = ctx;

	(void)r;
	c->released++;
}

static int make_cached(struct csrc *s, struct rsd_resident **out)
{
	struct cache *c = s->arg;
	struct rsd_buffer_view v = { c->mem, N, c->mem, N, RSD_LOC_PAGEABLE_HOST };

	c->wrappers++;
	return rsd_resident_wrap(&rsd_resident_type, 1, &v, NULL, 0, cache_release, c, out);
}

/* §4.5, §18.20: installed loaded storage is alias-checked; a temporary is not. */
ATF_TC_WITHOUT_HEAD(load_shared_storage_alias);
ATF_TC_BODY(load_shared_storage_alias, tc)
{
	struct cache *c = calloc(1, sizeof(*c));
	struct csrc s1 = { 0 }, s2 = { 0 };
	struct rsd_location mats[4];
	struct rsd_handle h1, h2;
	struct cfx f;

	ATF_REQUIRE(c);
	cfx_host(&f, NULL, 0);
	need_pinned(&f);
	h1 = cfx_sourced(&f, &s1, PAGEABLE);
	h2 = cfx_sourced(&f, &s2, PAGEABLE);
	s1.make = s2.make = make_cached;
	s1.arg = s2.arg = c;
	OK(rsd_ensure(f.m, h1, PAGEABLE, NULL, NULL));
	ERR(RSD_EOWNERSHIP, rsd_ensure(f.m, h2, PAGEABLE, NULL, NULL));
	check_clean(&f, h2);
	ATF_CHECK_EQ(c->released, 1); /* the rejected wrapper */
	OK(rsd_ensure(f.m, h2, PINNED, NULL, NULL));
	ATF_CHECK_EQ(cfx_mats(&f, h2, mats, 4), 1);
	ATF_CHECK(rsd_location_equal(mats[0], PINNED));
	ATF_CHECK_EQ(c->wrappers, 3);
	ATF_CHECK_EQ(c->released, 2); /* the temporary copy source */
	ATF_CHECK_EQ(cfx_used(&f, PAGEABLE), N);
	ATF_CHECK_EQ(cfx_reserved(&f, PAGEABLE), 0);
	cfx_fini(&f);
	ATF_CHECK_EQ(c->released, 3);
	free(c);
}

/* A source that returns a resident the manager already owns is refused. */
static int make_same(struct csrc *s, struct rsd_resident **out)
{
	*out = s->arg;
	return 0;
}

ATF_TC_WITHOUT_HEAD(load_returns_managed_resident);
ATF_TC_BODY(load_returns_managed_resident, tc)
{
	struct csrc s1 = { 0 }, s2 = { 0 };
	struct rsd_handle h1, h2;
	struct cfx f;

	cfx_host(&f, NULL, 0);
	h1 = cfx_sourced(&f, &s1, PAGEABLE);
	h2 = cfx_sourced(&f, &s2, PAGEABLE);
	s1.arg = s2.arg = cfx_alloc(&f, PAGEABLE, N);
	s1.make = s2.make = make_same;
	OK(rsd_ensure(f.m, h1, PAGEABLE, NULL, NULL));
	ERR(RSD_EOWNERSHIP, rsd_ensure(f.m, h2, PAGEABLE, NULL, NULL));
	check_clean(&f, h2);
	ATF_CHECK(cfx_resident(&f, h1, PAGEABLE));
	cfx_fini(&f);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, register_source_checks);
	ATF_TP_ADD_TC(tp, load_failure_own_code);
	ATF_TP_ADD_TC(tp, load_failure_foreign_code);
	ATF_TP_ADD_TC(tp, load_failure_int_min);
	ATF_TP_ADD_TC(tp, load_returns_nothing);
	ATF_TP_ADD_TC(tp, load_invalid_values);
	ATF_TP_ADD_TC(tp, load_then_full_destination);
	ATF_TP_ADD_TC(tp, load_rejected_at_source);
	ATF_TP_ADD_TC(tp, load_at_destination_single_charge);
	ATF_TP_ADD_TC(tp, load_shared_storage_alias);
	ATF_TP_ADD_TC(tp, load_returns_managed_resident);
	return 0;
}
