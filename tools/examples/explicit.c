// SPDX-License-Identifier: MIT
/*
 * Explicit residency: the caller decides every placement.
 *
 * A ciphertext is adopted in pageable memory, ensured in pinned memory,
 * moved, leased for reading, and finally staged through a plan: explain it
 * first (a dry run that changes nothing), then run it as a scope whose exit
 * actions undo the staging.
 */
#include <stdio.h>
#include <string.h>

#include <rsd/rsd.h>

#define CHECK(call)                                                                    \
	do {                                                                           \
		int err_ = (call);                                                     \
		if (err_) {                                                            \
			fprintf(stderr, "%s: %s\n", #call, rsd_last_error()->message); \
			return 1;                                                      \
		}                                                                      \
	} while (0)

int main(void)
{
	/* 64 KiB of pinned memory is all this job may use there. */
	struct rsd_budget budget = { RSD_LOC_PINNED_HOST, 64 << 10 };
	struct rsd_manager_config cfg = { .budgets = &budget, .nbudgets = 1 };
	struct rsd_manager *m;
	struct rsd_resident *ct;
	const struct rsd_resident *seen;
	struct rsd_handle h;
	struct rsd_transition t;
	struct rsd_lease *lease;
	struct rsd_explanation *e;
	struct rsd_scope *scope;
	struct rsd_plan_report *report;
	uint64_t sizes[2] = { 16 << 10, 16 << 10 }; /* a ciphertext: two polynomials */
	const char meta[] = "level=3 scale=2^40";

	CHECK(rsd_manager_create(&cfg, &m));
	CHECK(rsd_resident_alloc(m, &rsd_resident_type, RSD_LOC_PAGEABLE_HOST, 2, sizes, meta,
				 sizeof(meta), &ct));
	memset(rsd_resident_data(ct, 0), 0xab, sizes[0]);
	memset(rsd_resident_data(ct, 1), 0xcd, sizes[1]);

	/* From here on the manager owns the ciphertext. */
	CHECK(rsd_adopt(m, ct, NULL, RSD_EXCLUSIVE, &h));

	/* An exclusive value moves; ensure would refuse to replicate it. */
	CHECK(rsd_move(m, h, RSD_LOC_PINNED_HOST, NULL, NULL, &t));
	printf("moved %llu bytes, no_op=%d\n", (unsigned long long)t.logical_nbytes, t.no_op);

	/* A lease protects the pinned copy while we read it. */
	CHECK(rsd_acquire(m, &h, 1, RSD_LOC_PINNED_HOST, NULL, &lease));
	CHECK(rsd_lease_value(lease, h, &seen));
	printf("first byte %#x, metadata travelled: %s\n",
	       ((const unsigned char *)rsd_resident_data(seen, 0))[0],
	       (const char *)rsd_resident_meta(seen, NULL));
	CHECK(rsd_lease_release(lease, 0));
	rsd_lease_free(lease);

	/* A stage: move the ciphertext back out on exit, with a workspace. */
	struct rsd_action enter[] = { rsd_action_move(h, RSD_LOC_PINNED_HOST, NULL) };
	struct rsd_action leave[] = { rsd_action_move(h, RSD_LOC_PAGEABLE_HOST, NULL) };
	struct rsd_reservation_spec ws = { RSD_LOC_PINNED_HOST, 16 << 10, "workspace" };
	struct rsd_plan stage = { .name = "stage-1",
				  .enter = enter,
				  .nenter = 1,
				  .exit = leave,
				  .nexit = 1,
				  .reservations = &ws,
				  .nreservations = 1 };

	CHECK(rsd_explain(m, &stage, NULL, &e));
	printf("plan %s feasible=%d, predicted pinned peak %llu bytes\n", e->plan_name, e->feasible,
	       (unsigned long long)e->predicted_peak_bytes[0].nbytes);
	rsd_explanation_free(e);

	CHECK(rsd_scope_enter(m, &stage, NULL, 0, NULL, &scope));
	/* ... the stage's GPU or CPU work runs here ... */
	CHECK(rsd_scope_close(scope, &report));
	printf("scope ran %zu transitions\n", report->ntransitions);
	rsd_plan_report_free(report);
	rsd_scope_free(scope);

	CHECK(rsd_discard(m, h, NULL));
	CHECK(rsd_manager_close(m, 0));
	rsd_manager_destroy(m);
	return 0;
}
