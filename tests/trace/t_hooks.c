// SPDX-License-Identifier: MIT
/*
 * The trace hooks of lib/trace.h, without a manager.
 *
 * "fire" calls every hook once, in a fixed order and with distinctive
 * payloads. Alone it checks that the hooks leave the thread's error record
 * alone and accept absent strings; t_trace.sh runs it inside an isolated
 * LTTng session and checks every field of every rsd:* event it produced.
 * Keep the sequence below and the expectations in t_trace.sh in step.
 *
 * "strings" checks, in a TRACE=1 build, how absent values are spelled.
 */
#include <atf-c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rsd/rsd.h>

#include "../../lib/internal.h"
#include "../../lib/trace.h"

#define MID 7u

static struct rsd_transition transition(enum rsd_action_kind kind, uint64_t id)
{
	struct rsd_transition t;

	memset(&t, 0, sizeof(t));
	t.action.kind = kind;
	t.action.handle.manager_id = MID;
	t.action.handle.id = id;
	t.action.location = RSD_LOC_PINNED_HOST;
	t.started_at_ns = 1000;
	t.completed_at_ns = 1250;
	return t;
}

/* Returns the number of rsd_trace_transition calls. */
static unsigned fire_all(void)
{
	struct rsd_location cuda3 = { RSD_CUDA, 3 };
	struct rsd_transition t;
	unsigned n = 0;

	rsd_trace_adopt(MID, 11, RSD_LOC_PAGEABLE_HOST, 4096);
	rsd_trace_register_source(MID, 12, RSD_LOC_PINNED_HOST, 8192);
	rsd_trace_adopt_reserved(MID, 13, cuda3, 2048, 42, "result", 512, true);
	rsd_trace_adopt_reserved(MID, 14, RSD_LOC_PINNED_HOST, 0, 44, NULL, 0, false);
	rsd_trace_manager_create(MID, "lru", 2, 4);
	rsd_trace_state(MID, 2, RSD_LOC_PAGEABLE_HOST, 4096, 0, false, 0, 0);

	/* A move with an explicit from and a sampled allocator: every field set. */
	t = transition(RSD_ACT_MOVE, 11);
	t.action.location = cuda3;
	t.action.has_from = true;
	t.action.from = RSD_LOC_PAGEABLE_HOST;
	t.has_source = true;
	t.source = RSD_LOC_PAGEABLE_HOST;
	t.has_destination = true;
	t.destination = cuda3;
	t.logical_nbytes = 4000;
	t.storage_nbytes = 4096;
	t.has_allocator = true;
	t.allocator_device = 3;
	t.allocator_allocated_bytes_before = 100;
	t.allocator_reserved_bytes_before = 200;
	t.allocator_allocated_bytes_after = 4196;
	t.allocator_reserved_bytes_after = 2097352;
	rsd_trace_transition(MID, &t);
	n++;

	/* A no-op ensure with a reason and neither source nor destination. */
	t = transition(RSD_ACT_ENSURE, 12);
	t.no_op = true;
	t.reason = "already resident";
	t.logical_nbytes = 8192;
	t.storage_nbytes = 8192;
	rsd_trace_transition(MID, &t);
	n++;

	rsd_trace_lease_acquire(MID, 21, cuda3, 2);
	rsd_trace_lease_release(MID, 21, cuda3, 1, false, true);
	rsd_trace_lease_reap(MID, 21, 5000);
	rsd_trace_hold(MID, 31, RSD_LOC_PINNED_HOST, 3, true);
	rsd_trace_hold(MID, 31, RSD_LOC_PINNED_HOST, 3, false);
	rsd_trace_reservation(MID, 41, cuda3, 1 << 20, "activations", true);
	{
		struct rsd__ledger l = { true, 10000, 6000, 2000, 600, 400, 1 };

		rsd_trace_budget_reject(MID, cuda3, &l, 2000);
	}
	rsd_trace_budget_retry(MID, cuda3, "wait");
	rsd_trace_device_work(3, false, "copy-in", 4096, true, RSD_LOC_PINNED_HOST, cuda3, 700);
	rsd_trace_device_work(3, true, "compute", 0, false, cuda3, cuda3, 900);
	rsd_trace_reservation(MID, 41, cuda3, 1 << 20, "activations", false);
	rsd_trace_plan_begin(MID, "step-1", "execute");

	/* A discard: no action location, no reason (absent strings). */
	t = transition(RSD_ACT_DISCARD, 11);
	t.has_source = true;
	t.source = cuda3;
	t.logical_nbytes = 4000;
	t.storage_nbytes = 4096;
	t.started_at_ns = 2000;
	t.completed_at_ns = 2600;
	rsd_trace_transition(MID, &t);
	n++;

	rsd_trace_plan_end(MID, "step-1", "execute", "done", 0, 1);
	rsd_trace_decision(MID, "req-a", 2, 17, -3);
	/* NULL strings are legal: they become "none". */
	rsd_trace_plan_end(MID, NULL, "scope-exit", NULL, -22, 0);
	rsd_trace_state(MID, 9, cuda3, 0, 0, true, 1 << 20, 2);
	return n;
}

ATF_TC_WITHOUT_HEAD(fire);
ATF_TC_BODY(fire, tc)
{
	const char *count_file = getenv("RSD_T_TRACE_COUNT");
	char message[sizeof(rsd_last_error()->message)];
	unsigned n;

	/* The hooks must not touch the thread's error record. */
	ATF_REQUIRE_EQ(rsd__err(RSD_ESTALE, "sentinel %d", 42), -RSD_ESTALE);
	ATF_REQUIRE(strstr(rsd_last_error()->message, "sentinel 42") != NULL);
	strcpy(message, rsd_last_error()->message);
	n = fire_all();
	ATF_CHECK_EQ(n, 3);
	ATF_CHECK_EQ(rsd_last_error()->code, RSD_ESTALE);
	ATF_CHECK_STREQ(rsd_last_error()->message, message);

	if (count_file) {
		FILE *f = fopen(count_file, "w");

		ATF_REQUIRE(f != NULL);
		fprintf(f, "%u\n", n);
		ATF_REQUIRE_EQ(fclose(f), 0);
	}
}

ATF_TC_WITHOUT_HEAD(strings);
ATF_TC_BODY(strings, tc)
{
#if defined(RSD_TRACE) && RSD_TRACE
	char buf[RSD_LOCATION_NAME_MAX];
	struct rsd_location cuda12 = { RSD_CUDA, 12 };

	ATF_CHECK_STREQ(rsd__trace_str(NULL), "none");
	ATF_CHECK_STREQ(rsd__trace_str(""), "none");
	ATF_CHECK_STREQ(rsd__trace_str("x"), "x");
	ATF_CHECK_STREQ(rsd__trace_opt_name(false, cuda12, buf, sizeof(buf)), "none");
	ATF_CHECK_STREQ(rsd__trace_opt_name(true, cuda12, buf, sizeof(buf)), "cuda:12");
	ATF_CHECK_STREQ(rsd__trace_action_name(RSD_ACT_ENSURE), "ensure");
	ATF_CHECK_STREQ(rsd__trace_action_name(RSD_ACT_MOVE), "move");
	ATF_CHECK_STREQ(rsd__trace_action_name(RSD_ACT_DROP), "drop");
	ATF_CHECK_STREQ(rsd__trace_action_name(RSD_ACT_DISCARD), "discard");
	ATF_CHECK_STREQ(rsd__trace_action_name((enum rsd_action_kind)9), "<invalid>");
#else
	atf_tc_skip("built with TRACE=0: the hooks are empty");
#endif
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, fire);
	ATF_TP_ADD_TC(tp, strings);
	return atf_no_error();
}
