// SPDX-License-Identifier: MIT
/*
 * Bad-input sweep over the public functions: NULL objects and out
 * pointers, foreign/unknown/stale/mistyped handles, invalid locations,
 * zero and overflowing sizes, released lifetimes, a closed manager. Each
 * call must return the right negative code, record a non-empty message
 * with that code in rsd_last_error(), and leave the state (the snapshot's
 * state_version and accounting) unchanged.
 */
#include <stdint.h>
#include <string.h>

#include <atf-c.h>
#include "../check.h"

#include <rsd/rsd.h>

#include "interp.h"

struct fx {
	struct rsd_simdev *sd;
	struct rsd_manager *m;
	void *st0, *st1;
	struct rsd_handle a, s, gone;
	struct rsd_lease *released;
	struct rsd_hold *hreleased;
	struct rsd_reservation *rreleased;
};

static const struct rsd_location CUDA0 = { RSD_CUDA, 0 }, CUDA5 = { RSD_CUDA, 5 },
				 BADKIND = { (enum rsd_location_kind)7, 0 },
				 BADHOST = { RSD_PAGEABLE_HOST, 3 };
static const struct rsd_type other = { "other", &rsd_resident_type };

static int load(void *ctx, struct rsd_resident **out)
{
	struct fx *f = ctx;
	uint64_t n = 16;

	return rsd_resident_alloc(f->m, &rsd_resident_type, RSD_LOC_PAGEABLE_HOST, 1, &n, NULL, 0,
				  out);
}

static void fx_init(struct fx *f)
{
	struct rsd_simdev_config sc = { .ndevices = 2, .auto_complete = true, .pooled = true };
	struct rsd_budget b[] = { { { RSD_CUDA, 0 }, 64 } };
	struct rsd_value_spec spec = { &rsd_resident_type, 16, 16, RSD_REPLICABLE,
				       RSD_RECONSTRUCTIBLE };
	struct rsd_source src = { load, NULL, f };
	struct rsd_manager_config cfg;
	struct rsd_resident *r;
	uint64_t n = 16;

	memset(f, 0, sizeof(*f));
	memset(&cfg, 0, sizeof(cfg));
	RSD_REQUIRE_OK(rsd_simdev_create(&sc, &f->sd));
	RSD_REQUIRE_OK(rsd_simdev_stream_create(f->sd, 0, &f->st0));
	RSD_REQUIRE_OK(rsd_simdev_stream_create(f->sd, 1, &f->st1));
	cfg.budgets = b;
	cfg.nbudgets = 1;
	cfg.driver = rsd_simdev_ops();
	cfg.driver_ctx = f->sd;
	RSD_REQUIRE_OK(rsd_manager_create(&cfg, &f->m));
	RSD_REQUIRE_OK(rsd_resident_alloc(f->m, &rsd_resident_type, RSD_LOC_PAGEABLE_HOST, 1, &n,
					  NULL, 0, &r));
	RSD_REQUIRE_OK(rsd_adopt(f->m, r, NULL, RSD_REPLICABLE, &f->a));
	RSD_REQUIRE_OK(rsd_register_source(f->m, &spec, &src, RSD_LOC_PAGEABLE_HOST, &f->s));
	RSD_REQUIRE_OK(rsd_register_source(f->m, &spec, &src, RSD_LOC_PAGEABLE_HOST, &f->gone));
	RSD_REQUIRE_OK(rsd_discard(f->m, f->gone, NULL));
	RSD_REQUIRE_OK(rsd_ensure(f->m, f->s, CUDA0, NULL, NULL));
	RSD_REQUIRE_OK(rsd_acquire(f->m, &f->a, 1, RSD_LOC_PAGEABLE_HOST, NULL, &f->released));
	RSD_REQUIRE_OK(rsd_lease_release(f->released, 0));
	RSD_REQUIRE_OK(rsd_hold(f->m, &f->a, 1, RSD_LOC_PAGEABLE_HOST, &f->hreleased));
	RSD_REQUIRE_OK(rsd_hold_release(f->hreleased));
	RSD_REQUIRE_OK(rsd_reserve(f->m, CUDA0, 8, "r", &f->rreleased));
	RSD_REQUIRE_OK(rsd_reservation_release(f->rreleased));
}

static void fx_fini(struct fx *f)
{
	rsd_lease_free(f->released);
	rsd_hold_free(f->hreleased);
	rsd_reservation_free(f->rreleased);
	rsd_manager_destroy(f->m);
	rsd_simdev_stream_destroy(f->sd, f->st0);
	rsd_simdev_stream_destroy(f->sd, f->st1);
	rsd_simdev_destroy(f->sd);
}

/* A digest of the observable state: version and accounting. */
static uint64_t digest(struct fx *f)
{
	struct rsd_snapshot *s;
	uint64_t d;
	char why[256];

	RSD_REQUIRE_OK(rsd_snapshot_take(f->m, &s));
	ATF_CHECK_MSG(ip_snapshot_invariants(s, why, sizeof(why)), "%s", why);
	d = s->state_version * 1000003u + s->nvalues * 101u + s->nreservations;
	for (size_t i = 0; i < s->nlocations; i++)
		d = d * 31u + s->locations[i].used_bytes + 7 * s->locations[i].reserved_bytes +
		    13 * s->locations[i].use_count + 17 * s->locations[i].hold_count;
	rsd_snapshot_free(s);
	return d;
}

static void check_err(const char *what, int rc, int code)
{
	const struct rsd_error *e = rsd_last_error();

	ATF_CHECK_EQ_MSG(rc, -code, "%s returned %d (%s), expected %s", what, rc, rsd_strerror(rc),
			 rsd_strerror(code));
	if (code && rc == -code)
		ATF_CHECK_MSG(e->code == code && e->message[0],
			      "%s: rsd_last_error() code %d, "
			      "message '%s'",
			      what, e->code, e->message);
}

/* Code, message, and state unchanged. */
#define BAD(f, call, code)                                                      \
	do {                                                                    \
		uint64_t d0_ = digest(f);                                       \
		check_err(#call, (call), code);                                 \
		ATF_CHECK_MSG(digest(f) == d0_, "%s changed the state", #call); \
	} while (0)

ATF_TC_WITHOUT_HEAD(null_objects);
ATF_TC_BODY(null_objects, tc)
{
	struct fx f;
	struct rsd_manager *m = NULL;
	struct rsd_manager_config cfg;
	struct rsd_snapshot *s;
	struct rsd_lease *l;
	struct rsd_hold *hd;
	struct rsd_reservation *r;
	struct rsd_handle h;
	struct rsd_transition t;
	const struct rsd_resident *v;
	struct rsd_value_spec spec = { &rsd_resident_type, 16, 16, RSD_REPLICABLE,
				       RSD_RECONSTRUCTIBLE };
	struct rsd_source src = { load, NULL, NULL };

	fx_init(&f);
	memset(&cfg, 0, sizeof(cfg));
	/* NULL cfg is the default configuration (rsd_manager(3): budgets and driver optional). */
	if (!rsd_manager_create(NULL, &m))
		rsd_manager_destroy(m);
	check_err("rsd_manager_create(NULL out)", rsd_manager_create(&cfg, NULL), RSD_ETYPE);
	check_err("rsd_snapshot_take(NULL)", rsd_snapshot_take(NULL, &s), RSD_ETYPE);
	BAD(&f, rsd_snapshot_take(f.m, NULL), RSD_ETYPE);
	check_err("rsd_manager_reap(NULL)", rsd_manager_reap(NULL), RSD_ETYPE);
	check_err("rsd_ensure(NULL)", rsd_ensure(NULL, f.a, CUDA0, NULL, &t), RSD_ETYPE);
	check_err("rsd_drop(NULL)", rsd_drop(NULL, f.a, CUDA0, &t), RSD_ETYPE);
	check_err("rsd_discard(NULL)", rsd_discard(NULL, f.a, &t), RSD_ETYPE);
	BAD(&f, rsd_adopt(f.m, NULL, NULL, RSD_EXCLUSIVE, &h), RSD_ETYPE);
	BAD(&f, rsd_register_source(f.m, NULL, &src, RSD_LOC_PAGEABLE_HOST, &h), RSD_ETYPE);
	BAD(&f, rsd_register_source(f.m, &spec, NULL, RSD_LOC_PAGEABLE_HOST, &h), RSD_ETYPE);
	src.load = NULL;
	BAD(&f, rsd_register_source(f.m, &spec, &src, RSD_LOC_PAGEABLE_HOST, &h), RSD_ETYPE);
	src.load = load;
	BAD(&f, rsd_register_source(f.m, &spec, &src, RSD_LOC_PAGEABLE_HOST, NULL), RSD_ETYPE);
	spec.type = NULL;
	BAD(&f, rsd_register_source(f.m, &spec, &src, RSD_LOC_PAGEABLE_HOST, &h), RSD_ETYPE);
	BAD(&f, rsd_acquire(f.m, NULL, 1, RSD_LOC_PAGEABLE_HOST, NULL, &l), RSD_ETYPE);
	BAD(&f, rsd_acquire(f.m, &f.a, 1, RSD_LOC_PAGEABLE_HOST, NULL, NULL), RSD_ETYPE);
	BAD(&f, rsd_hold(f.m, NULL, 1, RSD_LOC_PAGEABLE_HOST, &hd), RSD_ETYPE);
	BAD(&f, rsd_hold(f.m, &f.a, 1, RSD_LOC_PAGEABLE_HOST, NULL), RSD_ETYPE);
	BAD(&f, rsd_reserve(f.m, CUDA0, 1, NULL, &r), RSD_ETYPE);
	BAD(&f, rsd_reserve(f.m, CUDA0, 1, "x", NULL), RSD_ETYPE);
	check_err("rsd_lease_release(NULL)", rsd_lease_release(NULL, 0), RSD_ETYPE);
	check_err("rsd_lease_value(NULL)", rsd_lease_value(NULL, f.a, &v), RSD_ETYPE);
	check_err("rsd_hold_release(NULL)", rsd_hold_release(NULL), RSD_ETYPE);
	check_err("rsd_reservation_release(NULL)", rsd_reservation_release(NULL), RSD_ETYPE);
	check_err("rsd_scope_close(NULL)", rsd_scope_close(NULL, NULL), RSD_ETYPE);
	BAD(&f, rsd_explain(f.m, NULL, NULL, NULL), RSD_ETYPE);
	fx_fini(&f);
}

ATF_TC_WITHOUT_HEAD(bad_handles);
ATF_TC_BODY(bad_handles, tc)
{
	struct fx f;
	struct rsd_handle foreign, unknown, mistyped;
	struct rsd_lease *l;
	struct rsd_hold *hd;
	struct rsd_transition t;
	struct rsd_plan_report *rep = NULL;
	struct rsd_action act;

	fx_init(&f);
	foreign = f.a;
	foreign.manager_id += 77;
	unknown = f.a;
	unknown.id = UINT64_MAX - 3;
	mistyped = f.a;
	mistyped.type = &other;
	struct rsd_handle bad[] = { foreign, unknown, mistyped, f.gone };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct rsd_handle h = bad[i];

		BAD(&f, rsd_ensure(f.m, h, RSD_LOC_PINNED_HOST, NULL, &t), RSD_EHANDLE);
		BAD(&f, rsd_copy(f.m, h, RSD_LOC_PINNED_HOST, NULL, &t), RSD_EHANDLE);
		BAD(&f, rsd_move(f.m, h, RSD_LOC_PINNED_HOST, NULL, NULL, &t), RSD_EHANDLE);
		BAD(&f, rsd_drop(f.m, h, RSD_LOC_PAGEABLE_HOST, &t), RSD_EHANDLE);
		BAD(&f, rsd_discard(f.m, h, &t), RSD_EHANDLE);
		BAD(&f, rsd_acquire(f.m, &h, 1, RSD_LOC_PAGEABLE_HOST, NULL, &l), RSD_EHANDLE);
		BAD(&f, rsd_hold(f.m, &h, 1, RSD_LOC_PAGEABLE_HOST, &hd), RSD_EHANDLE);
		act = rsd_action_drop(h, RSD_LOC_PAGEABLE_HOST);
		BAD(&f, rsd_execute_actions(f.m, &act, 1, NULL, NULL, 0, NULL, &rep), RSD_EPLAN);
		ATF_CHECK(rep == NULL);
	}
	fx_fini(&f);
}

ATF_TC_WITHOUT_HEAD(bad_locations_sizes_streams);
ATF_TC_BODY(bad_locations_sizes_streams, tc)
{
	struct fx f;
	/* A record of no known kind is not a location (ETYPE); a CUDA index outside
	 * 0..127 is a bad value (EINVAL), and so is cuda:5, valid but not available
	 * here (§1.3). */
	struct rsd_location badlocs[] = { CUDA5, BADKIND, { RSD_CUDA, -1 }, { RSD_CUDA, 128 } };
	const int codes[] = { RSD_EINVAL, RSD_ETYPE, RSD_EINVAL, RSD_EINVAL };
	struct rsd_value_spec spec = { &rsd_resident_type, 16, 8, RSD_REPLICABLE,
				       RSD_RECONSTRUCTIBLE };
	struct rsd_source src = { load, NULL, NULL };
	struct rsd_handle h;
	struct rsd_lease *l;
	struct rsd_hold *hd;
	struct rsd_reservation *r;
	struct rsd_resident *res;
	struct rsd_transition t;
	uint64_t big = UINT64_MAX, n = 16;
	int junk[8];

	fx_init(&f);
	src.ctx = &f;
	for (size_t i = 0; i < sizeof(badlocs) / sizeof(badlocs[0]); i++) {
		struct rsd_location b = badlocs[i];
		int ebad = codes[i];

		BAD(&f, rsd_ensure(f.m, f.a, b, NULL, &t), ebad);
		BAD(&f, rsd_move(f.m, f.a, b, NULL, NULL, &t), ebad);
		BAD(&f, rsd_move(f.m, f.a, RSD_LOC_PINNED_HOST, &b, NULL, &t), ebad);
		BAD(&f, rsd_drop(f.m, f.a, b, &t), ebad);
		BAD(&f, rsd_acquire(f.m, &f.a, 1, b, f.st0, &l), ebad);
		BAD(&f, rsd_hold(f.m, &f.a, 1, b, &hd), ebad);
		BAD(&f, rsd_reserve(f.m, b, 1, "x", &r), ebad);
		BAD(&f,
		    rsd_register_source(f.m,
					&(struct rsd_value_spec){ &rsd_resident_type, 1, 1,
								  RSD_REPLICABLE,
								  RSD_RECONSTRUCTIBLE },
					&src, b, &h),
		    ebad);
	}
	/* A host record with a device is not canonical: not a location either. */
	BAD(&f, rsd_drop(f.m, f.a, BADHOST, &t), RSD_ETYPE);
	/* sizes */
	BAD(&f, rsd_register_source(f.m, &spec, &src, RSD_LOC_PAGEABLE_HOST, &h), RSD_EINVAL);
	spec.storage_nbytes = 16;
	spec.recoverability = RSD_MUST_PRESERVE;
	BAD(&f, rsd_register_source(f.m, &spec, &src, RSD_LOC_PAGEABLE_HOST, &h), RSD_EINVAL);
	check_err("rsd_resident_alloc(UINT64_MAX bytes)",
		  rsd_resident_alloc(f.m, &rsd_resident_type, RSD_LOC_PAGEABLE_HOST, 1, &big, NULL,
				     0, &res),
		  RSD_EINVAL);
	check_err("rsd_resident_alloc(0 buffers)",
		  rsd_resident_alloc(f.m, &rsd_resident_type, RSD_LOC_PAGEABLE_HOST, 0, &n, NULL, 0,
				     &res),
		  RSD_EINVAL);
	BAD(&f, rsd_reserve(f.m, CUDA0, UINT64_MAX, "x", &r), RSD_EBUDGET);
	BAD(&f, rsd_reserve(f.m, CUDA0, 65, "x", &r), RSD_EBUDGET);
	BAD(&f, rsd_reserve(f.m, CUDA0, 1, " \t", &r), RSD_EINVAL);
	BAD(&f, rsd_acquire(f.m, &f.a, 0, RSD_LOC_PAGEABLE_HOST, NULL, &l), RSD_EINVAL);
	BAD(&f, rsd_hold(f.m, &f.a, 0, RSD_LOC_PAGEABLE_HOST, &hd), RSD_EINVAL);
	/* streams */
	BAD(&f, rsd_acquire(f.m, &f.s, 1, CUDA0, NULL, &l), RSD_EINVAL);
	BAD(&f, rsd_acquire(f.m, &f.s, 1, CUDA0, f.st1, &l), RSD_EINVAL);
	BAD(&f, rsd_acquire(f.m, &f.a, 1, RSD_LOC_PAGEABLE_HOST, f.st0, &l), RSD_EINVAL);
	BAD(&f, rsd_acquire(f.m, &f.s, 1, CUDA0, junk, &l), RSD_ETYPE);
	BAD(&f, rsd_ensure(f.m, f.a, RSD_LOC_PINNED_HOST, f.st0, &t), RSD_EINVAL);
	BAD(&f, rsd_ensure(f.m, f.s, CUDA0, f.st1, &t), RSD_EINVAL); /* even a no-op */
	BAD(&f, rsd_ensure(f.m, f.s, CUDA0, junk, &t), RSD_ETYPE);
	fx_fini(&f);
}

/* rsd_resident_alloc classifies location records as every manager entry
 * point does: an unavailable device EINVAL, an unknown kind ETYPE. */
ATF_TC_WITHOUT_HEAD(resident_alloc_bad_record);
ATF_TC_BODY(resident_alloc_bad_record, tc)
{
	struct fx f;
	struct rsd_resident *res;
	uint64_t n = 16;

	fx_init(&f);
	check_err("rsd_resident_alloc(cuda:5)",
		  rsd_resident_alloc(f.m, &rsd_resident_type, CUDA5, 1, &n, NULL, 0, &res),
		  RSD_EINVAL);
	check_err("rsd_resident_alloc(kind 7)",
		  rsd_resident_alloc(f.m, &rsd_resident_type, BADKIND, 1, &n, NULL, 0, &res),
		  RSD_ETYPE);
	fx_fini(&f);
}

ATF_TC_WITHOUT_HEAD(released_lifetimes);
ATF_TC_BODY(released_lifetimes, tc)
{
	struct fx f;
	const struct rsd_resident *v;
	struct rsd_handle h;

	fx_init(&f);
	BAD(&f, rsd_lease_value(f.released, f.a, &v), RSD_ELIFETIME);
	BAD(&f, rsd_lease_add_consumer_stream(f.released, f.st0), RSD_ELIFETIME);
	BAD(&f, rsd_lease_handle_at(f.released, 0, &h), RSD_ELIFETIME);
	/* releases are idempotent */
	BAD(&f, rsd_lease_release(f.released, 0), 0);
	BAD(&f, rsd_hold_release(f.hreleased), 0);
	BAD(&f, rsd_reservation_release(f.rreleased), 0);
	ATF_CHECK(!rsd_lease_active(f.released) && !rsd_hold_active(f.hreleased) &&
		  !rsd_reservation_active(f.rreleased));
	fx_fini(&f);
}

ATF_TC_WITHOUT_HEAD(closed_manager);
ATF_TC_BODY(closed_manager, tc)
{
	struct fx f;
	struct rsd_snapshot *s;
	struct rsd_lease *l;
	struct rsd_hold *hd;
	struct rsd_reservation *r;
	struct rsd_resident *res;
	struct rsd_handle h;
	struct rsd_transition t;
	struct rsd_plan p = { .name = "p" };
	struct rsd_explanation *e;
	struct rsd_plan_report *rep = NULL;
	struct rsd_scope *sc = NULL;
	struct rsd_value_spec spec = { &rsd_resident_type, 16, 16, RSD_REPLICABLE,
				       RSD_RECONSTRUCTIBLE };
	struct rsd_source src = { load, NULL, NULL };
	struct rsd_location locs[8];
	uint64_t n = 16, ver;

	fx_init(&f);
	RSD_REQUIRE_OK(rsd_manager_close(f.m, 0));
	RSD_REQUIRE_OK(rsd_resident_alloc(f.m, &rsd_resident_type, RSD_LOC_PAGEABLE_HOST, 1, &n,
					  NULL, 0, &res));
	check_err("adopt", rsd_adopt(f.m, res, NULL, RSD_EXCLUSIVE, &h), RSD_ECLOSED);
	rsd_resident_free(res);
	check_err("register_source",
		  rsd_register_source(f.m, &spec, &src, RSD_LOC_PAGEABLE_HOST, &h), RSD_ECLOSED);
	check_err("ensure", rsd_ensure(f.m, f.a, RSD_LOC_PINNED_HOST, NULL, &t), RSD_ECLOSED);
	check_err("move", rsd_move(f.m, f.a, RSD_LOC_PINNED_HOST, NULL, NULL, &t), RSD_ECLOSED);
	check_err("drop", rsd_drop(f.m, f.a, RSD_LOC_PINNED_HOST, &t), RSD_ECLOSED);
	check_err("discard", rsd_discard(f.m, f.a, &t), RSD_ECLOSED);
	check_err("acquire", rsd_acquire(f.m, &f.a, 1, RSD_LOC_PAGEABLE_HOST, NULL, &l),
		  RSD_ECLOSED);
	check_err("hold", rsd_hold(f.m, &f.a, 1, RSD_LOC_PAGEABLE_HOST, &hd), RSD_ECLOSED);
	check_err("reserve", rsd_reserve(f.m, CUDA0, 1, "x", &r), RSD_ECLOSED);
	check_err("snapshot", rsd_snapshot_take(f.m, &s), RSD_ECLOSED);
	check_err("state_version_get", rsd_manager_state_version_get(f.m, &ver), RSD_ECLOSED);
	check_err("reap", rsd_manager_reap(f.m), RSD_ECLOSED);
	check_err("explain", rsd_explain(f.m, &p, NULL, &e), RSD_ECLOSED);
	check_err("execute_actions", rsd_execute_actions(f.m, NULL, 0, NULL, NULL, 0, NULL, &rep),
		  RSD_ECLOSED);
	check_err("scope_enter", rsd_scope_enter(f.m, &p, NULL, 0, NULL, &sc), RSD_ECLOSED);
	rsd_scope_free(sc);
	RSD_CHECK_OK(rsd_manager_close(f.m, 0));
	ATF_CHECK(rsd_manager_locations(f.m, locs, 8) >= 2);
	fx_fini(&f);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, null_objects);
	ATF_TP_ADD_TC(tp, bad_handles);
	ATF_TP_ADD_TC(tp, bad_locations_sizes_streams);
	ATF_TP_ADD_TC(tp, resident_alloc_bad_record);
	ATF_TP_ADD_TC(tp, released_lifetimes);
	ATF_TP_ADD_TC(tp, closed_manager);
	return atf_no_error();
}
