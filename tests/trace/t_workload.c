// SPDX-License-Identifier: MIT
/*
 * A real librsd workload on host locations, for t_trace.sh to record:
 * adopt, ensure (a copy, then a no-op), drop, move, a budget rejection and
 * two discards, all through the public API.
 *
 * Alone, "workload" checks the reports it gets. With RSD_T_TRACE_EXPECT set
 * it also writes, in babeltrace2's text form, the rsd:adopt, rsd:transition
 * and rsd:budget_reject events those calls must have produced (built from
 * the reports and the error record, not from lib/trace.h), and with
 * RSD_T_TRACE_COUNT the number of transitions it completed.
 */
#include <atf-c.h>
#include "../check.h"
#include "adopt.h"
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rsd/rsd.h>

static const struct rsd_type t_bytes = { "t_workload bytes", &rsd_resident_type };

static FILE *expect;
static unsigned ntransitions;

static void put_loc(const char *field, bool has, struct rsd_location loc)
{
	char name[RSD_LOCATION_NAME_MAX];

	fprintf(expect, ", %s_kind = %d, %s_device = %d, %s = \"%s\"", field,
		has ? (int)loc.kind : -1, field, has ? loc.device : -1, field,
		has ? rsd_location_name(loc, name, sizeof(name)) : "none");
}

static void expect_transition(uint64_t mid, const struct rsd_transition *t)
{
	ntransitions++;
	if (!expect)
		return;
	fprintf(expect,
		"rsd:transition: { manager_id = %" PRIu64 ", handle_id = %" PRIu64
		", action = \"%s\"",
		mid, t->action.handle.id, rsd_action_kind_name(t->action.kind));
	put_loc("location", t->action.kind != RSD_ACT_DISCARD, t->action.location);
	put_loc("from", t->action.has_from, t->action.from);
	put_loc("source", t->has_source, t->source);
	put_loc("destination", t->has_destination, t->destination);
	fprintf(expect,
		", no_op = %d, reason = \"%s\", logical_nbytes = %" PRIu64
		", storage_nbytes = %" PRIu64 ", started_at_ns = %" PRIu64
		", completed_at_ns = %" PRIu64 ", duration_ns = %" PRIu64 ", has_allocator = %d"
		", allocator_device = %d, allocator_allocated_bytes_before = %" PRIu64
		", allocator_reserved_bytes_before = %" PRIu64
		", allocator_allocated_bytes_after = %" PRIu64
		", allocator_reserved_bytes_after = %" PRIu64 " }\n",
		t->no_op, t->reason && *t->reason ? t->reason : "none", t->logical_nbytes,
		t->storage_nbytes, t->started_at_ns, t->completed_at_ns,
		t->completed_at_ns - t->started_at_ns, t->has_allocator,
		t->has_allocator ? t->allocator_device : -1, t->allocator_allocated_bytes_before,
		t->allocator_reserved_bytes_before, t->allocator_allocated_bytes_after,
		t->allocator_reserved_bytes_after);
}

static void expect_adopt(uint64_t mid, struct rsd_handle h, struct rsd_location at,
			 uint64_t charged)
{
	char name[RSD_LOCATION_NAME_MAX];

	if (!expect)
		return;
	fprintf(expect,
		"rsd:adopt: { manager_id = %" PRIu64 ", handle_id = %" PRIu64
		", at_kind = %d, at_device = %d, at = \"%s\", charged_nbytes = %" PRIu64 " }\n",
		mid, h.id, (int)at.kind, at.device, rsd_location_name(at, name, sizeof(name)),
		charged);
}

static void expect_budget_reject(uint64_t mid, const struct rsd_error *e)
{
	char name[RSD_LOCATION_NAME_MAX];
	uint64_t taken =
		e->used_bytes + e->reserved_bytes + e->in_flight_bytes + e->plan_held_bytes;
	uint64_t room = e->budget_bytes > taken ? e->budget_bytes - taken : 0;

	if (!expect)
		return;
	fprintf(expect,
		"rsd:budget_reject: { manager_id = %" PRIu64 ", at_kind = %d"
		", at_device = %d, at = \"%s\", budget = %" PRIu64 ", used = %" PRIu64
		", reserved = %" PRIu64 ", in_flight = %" PRIu64 ", held = %" PRIu64
		", requested = %" PRIu64 ", available = %" PRIu64 " }\n",
		mid, (int)e->location.kind, e->location.device,
		rsd_location_name(e->location, name, sizeof(name)), e->budget_bytes, e->used_bytes,
		e->reserved_bytes, e->in_flight_bytes, e->plan_held_bytes, e->requested_bytes,
		room);
}

static struct rsd_handle adopt_bytes(struct rsd_manager *m, uint64_t nbytes,
				     enum rsd_replica_mode mode)
{
	struct rsd_handle h = trace_adopt_bytes(m, &t_bytes, nbytes, 0x5a, mode);

	expect_adopt(rsd_manager_id(m), h, RSD_LOC_PAGEABLE_HOST, nbytes);
	return h;
}

ATF_TC_WITHOUT_HEAD(workload);
ATF_TC_BODY(workload, tc)
{
	const char *expect_path = getenv("RSD_T_TRACE_EXPECT");
	const char *count_path = getenv("RSD_T_TRACE_COUNT");
	const struct rsd_budget budgets[] = {
		{ RSD_LOC_PAGEABLE_HOST, 1 << 20 },
		{ RSD_LOC_PINNED_HOST, 64 << 10 },
	};
	struct rsd_manager_config cfg = {
		.budgets = budgets,
		.nbudgets = 2,
		.host_only = true,
	};
	struct rsd_location pinned = RSD_LOC_PINNED_HOST;
	struct rsd_manager *m = NULL;
	struct rsd_transition rep;
	struct rsd_handle a, b;
	uint64_t mid;

	if (expect_path)
		ATF_REQUIRE((expect = fopen(expect_path, "w")) != NULL);
	RSD_REQUIRE_OK(rsd_manager_create(&cfg, &m));
	mid = rsd_manager_id(m);

	a = adopt_bytes(m, 4096, RSD_REPLICABLE);

	/* A copy to pinned memory, then the same ensure again: a no-op. */
	RSD_REQUIRE_OK(rsd_ensure(m, a, pinned, NULL, &rep));
	ATF_CHECK(!rep.no_op && rep.has_source && rep.has_destination);
	ATF_CHECK(rsd_location_equal(rep.destination, pinned));
	ATF_CHECK_EQ(rep.storage_nbytes, 4096);
	expect_transition(mid, &rep);
	RSD_REQUIRE_OK(rsd_ensure(m, a, pinned, NULL, &rep));
	ATF_CHECK(rep.no_op);
	ATF_CHECK(rep.reason != NULL);
	expect_transition(mid, &rep);

	RSD_REQUIRE_OK(rsd_drop(m, a, pinned, &rep));
	ATF_CHECK(!rep.no_op);
	expect_transition(mid, &rep);

	RSD_REQUIRE_OK(rsd_move(m, a, pinned, NULL, NULL, &rep));
	ATF_CHECK(!rep.no_op && rep.has_source);
	ATF_CHECK(rsd_location_equal(rep.source, RSD_LOC_PAGEABLE_HOST));
	expect_transition(mid, &rep);

	/* 4 KiB used of 64 KiB pinned: 62 KiB more does not fit. */
	b = adopt_bytes(m, 62 << 10, RSD_REPLICABLE);
	RSD_REQUIRE_ERR(RSD_EBUDGET, rsd_ensure(m, b, pinned, NULL, &rep));
	ATF_CHECK(rsd_last_error()->has_budget);
	ATF_CHECK_EQ(rsd_last_error()->budget_bytes, 64 << 10);
	ATF_CHECK_EQ(rsd_last_error()->used_bytes, 4096);
	ATF_CHECK_EQ(rsd_last_error()->requested_bytes, 62 << 10);
	expect_budget_reject(mid, rsd_last_error());

	RSD_REQUIRE_OK(rsd_discard(m, a, &rep));
	expect_transition(mid, &rep);
	RSD_REQUIRE_OK(rsd_discard(m, b, &rep));
	expect_transition(mid, &rep);

	RSD_CHECK_OK(rsd_manager_close(m, 0));
	rsd_manager_destroy(m);
	ATF_CHECK_EQ(ntransitions, 6);

	if (expect)
		ATF_REQUIRE_EQ(fclose(expect), 0);
	if (count_path) {
		FILE *f = fopen(count_path, "w");

		ATF_REQUIRE(f != NULL);
		fprintf(f, "%u\n", ntransitions);
		ATF_REQUIRE_EQ(fclose(f), 0);
	}
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, workload);
	return atf_no_error();
}
