// SPDX-License-Identifier: MIT
/*
 * Locations (reference.md §1): static validity and canonical names, the
 * canonical order, runtime validity checked by a manager, and the lazy
 * location registry with its recording order.
 */
#include <string.h>

#include <atf-c.h>
#include "../check.h"

#include "cfx.h"

static struct rsd_location loc(enum rsd_location_kind k, int dev)
{
	struct rsd_location l = { k, dev };

	return l;
}

ATF_TC_WITHOUT_HEAD(parse_canonical);
ATF_TC_BODY(parse_canonical, tc)
{
	static const struct {
		const char *text;
		enum rsd_location_kind kind;
		int dev;
	} ok[] = {
		{ "pageable-host", RSD_PAGEABLE_HOST, -1 },
		{ "pinned-host", RSD_PINNED_HOST, -1 },
		{ "cuda:0", RSD_CUDA, 0 },
		{ "cuda:1", RSD_CUDA, 1 },
		{ "cuda:10", RSD_CUDA, 10 },
		{ "cuda:99", RSD_CUDA, 99 },
		{ "cuda:127", RSD_CUDA, 127 },
	};
	char buf[RSD_LOCATION_NAME_MAX];

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		struct rsd_location l = { RSD_PINNED_HOST, 55 };

		ATF_CHECK_EQ_MSG(rsd_location_parse(ok[i].text, &l), 0, "%s: %s", ok[i].text,
				 rsd_last_error()->message);
		ATF_CHECK_EQ_MSG(l.kind, ok[i].kind, "%s", ok[i].text);
		ATF_CHECK_EQ_MSG(l.device, ok[i].dev, "%s", ok[i].text);
		ATF_CHECK(rsd_location_valid(l));
		/* The name is the textual form and round-trips. */
		ATF_CHECK_STREQ(rsd_location_name(l, buf, sizeof(buf)), ok[i].text);
	}
	ATF_CHECK(rsd_location_equal(RSD_LOC_PAGEABLE_HOST, loc(RSD_PAGEABLE_HOST, -1)));
	ATF_CHECK(rsd_location_equal(RSD_LOC_PINNED_HOST, loc(RSD_PINNED_HOST, -1)));
}

ATF_TC_WITHOUT_HEAD(parse_rejects);
ATF_TC_BODY(parse_rejects, tc)
{
	static const char *const bad[] = {
		"cuda",
		"cuda:",
		"cuda:00",
		"cuda:01",
		"cuda:007",
		"cuda:-1",
		"cuda:+1",
		"cuda: 1",
		"cuda:1 ",
		" cuda:1",
		"cuda:1a",
		"cuda:0x1",
		"CUDA:0",
		"cuda0",
		"cuda::1",
		"cuda:128",
		"cuda:999",
		"cuda:1000",
		"cuda:4294967296",
		"cuda:99999999999999999999999",
		"",
		"cpu",
		"cpu:0",
		"pageable",
		"pinned",
		"pageable-host ",
		"Pinned-Host",
		"pinned-host:0",
		"gpu:0",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct rsd_location l = { RSD_PINNED_HOST, -1 };
		int rc = rsd_location_parse(bad[i], &l);

		ATF_CHECK_EQ_MSG(rc, -RSD_EINVAL, "'%s' gave %d", bad[i], rc);
		ATF_CHECK_EQ_MSG(rsd_last_error()->code, RSD_EINVAL, "'%s'", bad[i]);
		ATF_CHECK_MSG(rsd_last_error()->message[0], "'%s': empty message", bad[i]);
		/* Out-parameters are written only on success. */
		ATF_CHECK_MSG(rsd_location_equal(l, RSD_LOC_PINNED_HOST), "'%s' wrote out", bad[i]);
	}
}

ATF_TC_WITHOUT_HEAD(cuda_location_range);
ATF_TC_BODY(cuda_location_range, tc)
{
	struct rsd_location l = RSD_LOC_PAGEABLE_HOST, p;

	RSD_CHECK_OK(rsd_cuda_location(0, &l));
	ATF_CHECK_EQ(l.kind, RSD_CUDA);
	ATF_CHECK_EQ(l.device, 0);
	/* Statically valid, whatever the machine has. */
	RSD_CHECK_OK(rsd_cuda_location(127, &l));
	ATF_CHECK_EQ(l.device, 127);
	RSD_REQUIRE_OK(rsd_location_parse("cuda:127", &p));
	ATF_CHECK(rsd_location_equal(l, p));

	l = RSD_LOC_PAGEABLE_HOST;
	ERR(RSD_EINVAL, rsd_cuda_location(128, &l));
	ERR(RSD_EINVAL, rsd_cuda_location(999, &l));
	ERR(RSD_EINVAL, rsd_cuda_location(-1, &l));
	ATF_CHECK(rsd_location_equal(l, RSD_LOC_PAGEABLE_HOST));
	ERR(RSD_ETYPE, rsd_cuda_location(0, NULL));
}

ATF_TC_WITHOUT_HEAD(make_collapses_cpu_index);
ATF_TC_BODY(make_collapses_cpu_index, tc)
{
	struct rsd_location l;

	/* §18.1: pinned-host built from "cpu:7" equals PINNED_HOST. */
	RSD_REQUIRE_OK(rsd_location_make(RSD_PINNED_HOST, 7, &l));
	ATF_CHECK(rsd_location_equal(l, RSD_LOC_PINNED_HOST));
	RSD_REQUIRE_OK(rsd_location_make(RSD_PINNED_HOST, 0, &l));
	ATF_CHECK(rsd_location_equal(l, RSD_LOC_PINNED_HOST));
	RSD_REQUIRE_OK(rsd_location_make(RSD_PAGEABLE_HOST, -1, &l));
	ATF_CHECK(rsd_location_equal(l, RSD_LOC_PAGEABLE_HOST));
	RSD_REQUIRE_OK(rsd_location_make(RSD_PAGEABLE_HOST, 3, &l));
	ATF_CHECK(rsd_location_equal(l, RSD_LOC_PAGEABLE_HOST));
	/* Both host kinds live on the CPU and still differ. */
	ATF_CHECK(!rsd_location_equal(RSD_LOC_PAGEABLE_HOST, RSD_LOC_PINNED_HOST));
	RSD_REQUIRE_OK(rsd_location_make(RSD_CUDA, 5, &l));
	ATF_CHECK(rsd_location_equal(l, loc(RSD_CUDA, 5)));
	ERR(RSD_EINVAL, rsd_location_make(RSD_CUDA, -1, &l));
	ERR(RSD_EINVAL, rsd_location_make(RSD_CUDA, 128, &l));
	ERR(RSD_EINVAL, rsd_location_make((enum rsd_location_kind)7, 0, &l));
	ERR(RSD_ETYPE, rsd_location_make(RSD_PINNED_HOST, 0, NULL));
}

ATF_TC_WITHOUT_HEAD(static_validity_and_names);
ATF_TC_BODY(static_validity_and_names, tc)
{
	char buf[RSD_LOCATION_NAME_MAX], small[5];

	ATF_CHECK(rsd_location_valid(RSD_LOC_PAGEABLE_HOST));
	ATF_CHECK(rsd_location_valid(RSD_LOC_PINNED_HOST));
	ATF_CHECK(rsd_location_valid(loc(RSD_CUDA, 0)));
	ATF_CHECK(rsd_location_valid(loc(RSD_CUDA, 127)));
	ATF_CHECK(!rsd_location_valid(loc(RSD_CUDA, 128)));
	ATF_CHECK(!rsd_location_valid(loc(RSD_CUDA, -1)));
	ATF_CHECK(!rsd_location_valid(loc(RSD_PAGEABLE_HOST, 0)));
	ATF_CHECK(!rsd_location_valid(loc(RSD_PINNED_HOST, 3)));
	ATF_CHECK(!rsd_location_valid(loc((enum rsd_location_kind)7, -1)));

	ATF_CHECK_STREQ(rsd_location_name(loc(RSD_CUDA, 127), buf, sizeof(buf)), "cuda:127");
	ATF_CHECK_STREQ(rsd_location_name(loc((enum rsd_location_kind)7, 0), buf, sizeof(buf)),
			"<invalid>");
	ATF_CHECK_STREQ(rsd_location_name(loc(RSD_PINNED_HOST, 3), buf, sizeof(buf)), "<invalid>");
	/* Never overruns the buffer; the longest name fits the documented max. */
	memset(small, 'x', sizeof(small));
	rsd_location_name(RSD_LOC_PAGEABLE_HOST, small, sizeof(small));
	ATF_CHECK_EQ(small[sizeof(small) - 1], '\0');
	ATF_CHECK(strlen(rsd_location_name(RSD_LOC_PAGEABLE_HOST, buf, sizeof(buf))) <
		  (size_t)RSD_LOCATION_NAME_MAX);
	ATF_CHECK(strlen(rsd_location_name(loc(RSD_CUDA, 127), buf, sizeof(buf))) <
		  (size_t)RSD_LOCATION_NAME_MAX);
}

ATF_TC_WITHOUT_HEAD(canonical_order);
ATF_TC_BODY(canonical_order, tc)
{
	const struct rsd_location order[] = {
		RSD_LOC_PAGEABLE_HOST, RSD_LOC_PINNED_HOST, loc(RSD_CUDA, 0),	loc(RSD_CUDA, 1),
		loc(RSD_CUDA, 2),      loc(RSD_CUDA, 10),   loc(RSD_CUDA, 127),
	};
	const size_t n = sizeof(order) / sizeof(order[0]);

	for (size_t i = 0; i < n; i++) {
		for (size_t j = 0; j < n; j++) {
			int c = rsd_location_cmp(order[i], order[j]);

			if (i < j)
				ATF_CHECK_MSG(c < 0, "%s should sort before %s", cfx_name(order[i]),
					      cfx_name(order[j]));
			else if (i > j)
				ATF_CHECK_MSG(c > 0, "%s should sort after %s", cfx_name(order[i]),
					      cfx_name(order[j]));
			else
				ATF_CHECK_EQ(c, 0);
			ATF_CHECK_EQ(rsd_location_equal(order[i], order[j]), i == j);
		}
	}
}

/* §1.3, §18.3: a host-only manager rejects every cuda:N without recording it. */
ATF_TC_WITHOUT_HEAD(runtime_cuda_on_host_only);
ATF_TC_BODY(runtime_cuda_on_host_only, tc)
{
	struct rsd_value_spec spec = { &rsd_resident_type, N, N, RSD_REPLICABLE,
				       RSD_RECONSTRUCTIBLE };
	struct rsd_location c0 = cfx_cuda(0), c127 = cfx_cuda(127);
	struct csrc s = { 0 };
	struct rsd_source src = { cfx_load, NULL, &s };
	struct rsd_reservation *r = NULL;
	struct rsd_lease *l = NULL;
	struct rsd_hold *hd = NULL;
	struct rsd_resident *v;
	struct rsd_handle h, a, x;
	struct cfx f;

	cfx_host(&f, NULL, 0);
	a = cfx_adopt(&f, PAGEABLE, N, RSD_REPLICABLE);
	h = cfx_sourced(&f, &s, PAGEABLE);
	CHECK_VERSION(&f, 3);

	ERR(RSD_EINVAL, rsd_register_source(f.m, &spec, &src, c0, &x));
	ERR(RSD_EINVAL, rsd_register_source(f.m, &spec, &src, c127, &x));
	ERR(RSD_EINVAL, rsd_ensure(f.m, h, c0, NULL, NULL));
	ERR(RSD_EINVAL, rsd_copy(f.m, a, c0, NULL, NULL));
	ERR(RSD_EINVAL, rsd_move(f.m, a, c0, NULL, NULL, NULL));
	ERR(RSD_EINVAL, rsd_move(f.m, a, PINNED, &c0, NULL, NULL));
	ERR(RSD_EINVAL, rsd_drop(f.m, a, c0, NULL));
	ERR(RSD_EINVAL, rsd_reserve(f.m, c0, 0, "gpu", &r));
	ERR(RSD_EINVAL, rsd_acquire(f.m, &a, 1, c0, NULL, &l));
	ERR(RSD_EINVAL, rsd_hold(f.m, &a, 1, c0, &hd));
	v = cfx_alloc(&f, PAGEABLE, N);
	ERR(RSD_EINVAL, rsd_adopt(f.m, v, &c0, RSD_EXCLUSIVE, &x));
	rsd_resident_free(v);
	/* A CUDA resident cannot even be allocated through this manager. */
	{
		uint64_t n = N;

		v = NULL;
		ERR(RSD_EINVAL,
		    rsd_resident_alloc(f.m, &rsd_resident_type, c0, 1, &n, NULL, 0, &v));
		ATF_CHECK(v == NULL);
	}
	ATF_CHECK_EQ(s.loads, 0);
	ATF_CHECK(r == NULL && l == NULL && hd == NULL);
	CHECK_VERSION(&f, 3);
	CHECK_LOCATIONS(&f, PAGEABLE);
	cfx_fini(&f);
}

/* With two simulated GPUs: cuda:1 is valid, cuda:2 and cuda:127 are not. */
ATF_TC_WITHOUT_HEAD(runtime_cuda_device_count);
ATF_TC_BODY(runtime_cuda_device_count, tc)
{
	struct rsd_reservation *r = NULL;
	struct rsd_handle a;
	struct cfx f;

	cfx_sim(&f, NULL, 0, 2);
	a = cfx_adopt(&f, PAGEABLE, N, RSD_REPLICABLE);
	CHECK_VERSION(&f, 2);
	ERR(RSD_EINVAL, rsd_ensure(f.m, a, cfx_cuda(2), NULL, NULL));
	ERR(RSD_EINVAL, rsd_ensure(f.m, a, cfx_cuda(127), NULL, NULL));
	ERR(RSD_EINVAL, rsd_reserve(f.m, cfx_cuda(2), 1, "x", &r));
	CHECK_VERSION(&f, 2);
	CHECK_LOCATIONS(&f, PAGEABLE);
	OK(rsd_ensure(f.m, a, cfx_cuda(1), NULL, NULL));
	CHECK_VERSION(&f, 4);
	CHECK_LOCATIONS(&f, PAGEABLE, cfx_cuda(1));
	cfx_fini(&f);
}

/* §5.1: budget keys are runtime-validated at construction. */
ATF_TC_WITHOUT_HEAD(runtime_budget_keys);
ATF_TC_BODY(runtime_budget_keys, tc)
{
	struct rsd_budget b[] = { { { RSD_CUDA, 0 }, 100 } };
	struct rsd_manager_config mc;
	struct rsd_manager *m = NULL;
	struct rsd_simdev *sd;
	struct rsd_simdev_config sc = { .ndevices = 1, .auto_complete = true, .pooled = true };

	memset(&mc, 0, sizeof(mc));
	mc.host_only = true;
	mc.budgets = b;
	mc.nbudgets = 1;
	ERR(RSD_EINVAL, rsd_manager_create(&mc, &m));
	ATF_CHECK(m == NULL);
	b[0].location.kind = (enum rsd_location_kind)7;
	ERR(RSD_ETYPE, rsd_manager_create(&mc, &m));
	b[0].location = loc(RSD_PINNED_HOST, 2);
	ERR(RSD_ETYPE, rsd_manager_create(&mc, &m));
	ATF_CHECK(m == NULL);

	/* On a device that has cuda:0 the same key is fine and recorded first. */
	RSD_REQUIRE_OK(rsd_simdev_create(&sc, &sd));
	memset(&mc, 0, sizeof(mc));
	b[0].location = loc(RSD_CUDA, 0);
	mc.budgets = b;
	mc.nbudgets = 1;
	mc.driver = rsd_simdev_ops();
	mc.driver_ctx = sd;
	OK(rsd_manager_create(&mc, &m));
	{
		struct rsd_location got[4];

		ATF_CHECK_EQ(rsd_manager_locations(m, got, 4), 1);
		ATF_CHECK(rsd_location_equal(got[0], loc(RSD_CUDA, 0)));
		ATF_CHECK_EQ(rsd_manager_state_version(m), 0);
	}
	rsd_manager_destroy(m);
	rsd_simdev_destroy(sd);
}

/* §1.4, §18.6: budgets in map order, then first successful use. */
ATF_TC_WITHOUT_HEAD(registry_order);
ATF_TC_BODY(registry_order, tc)
{
	const struct rsd_budget b[] = { { { RSD_CUDA, 1 }, 1 << 20 },
					{ { RSD_PINNED_HOST, -1 }, 1 << 20 } };
	struct rsd_reservation *r;
	struct csrc s = { 0 };
	struct rsd_handle a, h;
	struct cfx f;

	cfx_sim(&f, b, 2, 2);
	CHECK_LOCATIONS(&f, cfx_cuda(1), PINNED);
	CHECK_VERSION(&f, 0);
	/* register_source records its source location. */
	h = cfx_sourced(&f, &s, PINNED);
	CHECK_LOCATIONS(&f, cfx_cuda(1), PINNED);
	CHECK_VERSION(&f, 1);
	/* A reservation records a new location. */
	OK(rsd_reserve(f.m, cfx_cuda(0), 0, "r", &r));
	CHECK_LOCATIONS(&f, cfx_cuda(1), PINNED, cfx_cuda(0));
	CHECK_VERSION(&f, 3);
	OK(rsd_reservation_release(r));
	rsd_reservation_free(r);
	CHECK_VERSION(&f, 4);
	/* An install records the destination. */
	OK(rsd_ensure(f.m, h, PAGEABLE, NULL, NULL));
	CHECK_LOCATIONS(&f, cfx_cuda(1), PINNED, cfx_cuda(0), PAGEABLE);
	CHECK_VERSION(&f, 6);
	a = cfx_adopt(&f, PAGEABLE, N, RSD_EXCLUSIVE);
	CHECK_VERSION(&f, 7);
	/* Locations are never removed: not by drop, discard or close. */
	OK(rsd_drop(f.m, h, PAGEABLE, NULL));
	OK(rsd_discard(f.m, a, NULL));
	OK(rsd_discard(f.m, h, NULL));
	CHECK_LOCATIONS(&f, cfx_cuda(1), PINNED, cfx_cuda(0), PAGEABLE);
	OK(rsd_manager_close(f.m, 0));
	CHECK_LOCATIONS(&f, cfx_cuda(1), PINNED, cfx_cuda(0), PAGEABLE);
	cfx_fini(&f);
}

/* §1.4: nothing but a successful need records a location. */
ATF_TC_WITHOUT_HEAD(registry_failures_do_not_record);
ATF_TC_BODY(registry_failures_do_not_record, tc)
{
	struct rsd_value_spec keep = { &rsd_resident_type, N, N, RSD_REPLICABLE,
				       RSD_MUST_PRESERVE };
	struct csrc s = { 0 }, bad = { 0 };
	struct rsd_source src = { cfx_load, NULL, &s };
	struct rsd_lease *l = NULL;
	struct rsd_hold *hd = NULL;
	struct rsd_handle a, h, hb, x;
	struct cfx f;

	cfx_sim(&f, NULL, 0, 1);
	a = cfx_adopt(&f, PAGEABLE, N, RSD_EXCLUSIVE);
	h = cfx_sourced(&f, &s, PAGEABLE);
	hb = cfx_sourced(&f, &bad, PAGEABLE);
	bad.fail_rc = -RSD_EUNAVAILABLE;
	bad.fail_times = UINT32_MAX;
	CHECK_VERSION(&f, 4);
	/* A MUST_PRESERVE spec is refused before its location is recorded. */
	ERR(RSD_EINVAL, rsd_register_source(f.m, &keep, &src, PINNED, &x));
	/* EXCLUSIVE replication, a failing load, a no-op drop. */
	ERR(RSD_EOWNERSHIP, rsd_ensure(f.m, a, PINNED, NULL, NULL));
	ERR(RSD_EUNAVAILABLE, rsd_ensure(f.m, hb, PINNED, NULL, NULL));
	ERR(RSD_EUNAVAILABLE, rsd_move(f.m, hb, cfx_cuda(0), NULL, NULL, NULL));
	OK(rsd_drop(f.m, h, PINNED, NULL));
	OK(rsd_drop(f.m, h, cfx_cuda(0), NULL));
	/* acquire and hold of a non-resident endpoint. */
	ERR(RSD_EUNAVAILABLE, rsd_hold(f.m, &a, 1, PINNED, &hd));
	ERR(RSD_EUNAVAILABLE, rsd_acquire(f.m, &a, 1, PINNED, NULL, &l));
	ATF_CHECK_EQ(s.loads, 0);
	CHECK_LOCATIONS(&f, PAGEABLE);
	CHECK_VERSION(&f, 4);
	cfx_fini(&f);
}

/* rsd_manager_locations copies at most cap entries and returns the count. */
ATF_TC_WITHOUT_HEAD(locations_cap);
ATF_TC_BODY(locations_cap, tc)
{
	const struct rsd_budget b[] = { { { RSD_PINNED_HOST, -1 }, 10 },
					{ { RSD_PAGEABLE_HOST, -1 }, 10 } };
	struct rsd_location got[2] = { { RSD_CUDA, 5 }, { RSD_CUDA, 6 } };
	struct cfx f;

	cfx_host(&f, b, 2);
	ATF_CHECK_EQ(rsd_manager_locations(f.m, NULL, 0), 2);
	ATF_CHECK_EQ(rsd_manager_locations(f.m, got, 1), 2);
	ATF_CHECK(rsd_location_equal(got[0], PINNED));
	ATF_CHECK(rsd_location_equal(got[1], cfx_cuda(6)));
	cfx_fini(&f);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, parse_canonical);
	ATF_TP_ADD_TC(tp, parse_rejects);
	ATF_TP_ADD_TC(tp, cuda_location_range);
	ATF_TP_ADD_TC(tp, make_collapses_cpu_index);
	ATF_TP_ADD_TC(tp, static_validity_and_names);
	ATF_TP_ADD_TC(tp, canonical_order);
	ATF_TP_ADD_TC(tp, runtime_cuda_on_host_only);
	ATF_TP_ADD_TC(tp, runtime_cuda_device_count);
	ATF_TP_ADD_TC(tp, runtime_budget_keys);
	ATF_TP_ADD_TC(tp, registry_order);
	ATF_TP_ADD_TC(tp, registry_failures_do_not_record);
	ATF_TP_ADD_TC(tp, locations_cap);
	return 0;
}
