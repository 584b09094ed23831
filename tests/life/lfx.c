// SPDX-License-Identifier: MIT
/* Shared setup of the lifetime tests (lfx.h). */
#include <stdio.h>
#include <string.h>

#include <atf-c.h>
#include "../check.h"

#include "../simwait.h"
#include "lfx.h"

struct rsd_simdev *lfx_sd;
struct rsd_manager *lfx_m;
unsigned lfx_nwarn;
char lfx_lastwarn[512];
static struct simpump transfer_pump;

static void on_warn(void *ctx, const char *msg)
{
	(void)ctx;
	lfx_nwarn++;
	snprintf(lfx_lastwarn, sizeof(lfx_lastwarn), "%s", msg);
}

void lfx_setup_with(bool host_only, bool auto_complete, const struct rsd_budget *b, size_t nb)
{
	struct rsd_simdev_config sc = { .ndevices = 2,
					.auto_complete = auto_complete,
					.pooled = true };
	struct rsd_manager_config cfg = { 0 };

	if (!host_only) {
		RSD_REQUIRE_OK(rsd_simdev_create(&sc, &lfx_sd));
		/* The transfer streams progress on their own, as a GPU's
		 * would; consumer streams stay the test's to complete. */
		if (!auto_complete)
			ATF_REQUIRE(simpump_start(&transfer_pump, lfx_sd, NULL, 0, true, false));
		cfg.driver = rsd_simdev_ops();
		cfg.driver_ctx = lfx_sd;
	}
	cfg.host_only = host_only;
	cfg.budgets = b;
	cfg.nbudgets = nb;
	cfg.warn = on_warn;
	RSD_REQUIRE_OK(rsd_manager_create(&cfg, &lfx_m));
}

void lfx_setup_budgets(bool host_only, const struct rsd_budget *b, size_t nb)
{
	lfx_setup_with(host_only, false, b, nb);
}

void lfx_setup(bool host_only)
{
	lfx_setup_with(host_only, false, NULL, 0);
}

int lfx_release_wait(int line, struct rsd_lease *l, void *stream)
{
	struct simwait w;
	int rc;

	ATF_REQUIRE(simwait_start(&w, lfx_sd, stream, 30));
	rc = rsd_lease_release(l, RSD_RELEASE_WAIT);
	ATF_CHECK_MSG(simwait_blocked(&w),
		      "line %d: the waiting release returned before its stream was completed",
		      line);
	return rc;
}

void lfx_stop_pump(void)
{
	simpump_stop(&transfer_pump);
}

void lfx_teardown(void)
{
	/* Whatever a test left queued has run: destroying force-closes the
	 * manager, and its device sync would wait for that work. */
	if (lfx_sd)
		rsd_simdev_complete_all(lfx_sd);
	rsd_manager_destroy(lfx_m);
	lfx_m = NULL;
	lfx_stop_pump();
	if (lfx_sd)
		rsd_simdev_destroy(lfx_sd);
	lfx_sd = NULL;
}

struct rsd_location lfx_cuda(int d)
{
	struct rsd_location l = { RSD_CUDA, d };

	return l;
}

void *lfx_stream(int device)
{
	void *s = NULL;

	RSD_REQUIRE_OK(rsd_simdev_stream_create(lfx_sd, device, &s));
	return s;
}

struct rsd_handle lfx_put(struct rsd_location at, uint64_t n, struct rsd_resident **rp)
{
	struct rsd_resident *r = NULL;
	struct rsd_handle h;

	RSD_REQUIRE_OK(rsd_resident_alloc(lfx_m, &rsd_resident_type, at, 1, &n, NULL, 0, &r));
	RSD_REQUIRE_OK(rsd_adopt(lfx_m, r, &at, RSD_REPLICABLE, &h));
	if (rp)
		*rp = r;
	return h;
}

uint64_t lfx_ver(void)
{
	uint64_t v = 0;

	RSD_REQUIRE_OK(rsd_manager_state_version_get(lfx_m, &v));
	return v;
}

bool lfx_msg_has(const char *s)
{
	return strstr(rsd_last_error()->message, s) != NULL;
}

struct rsd_snapshot *lfx_snap(void)
{
	struct rsd_snapshot *s = NULL;

	RSD_REQUIRE_OK(rsd_snapshot_take(lfx_m, &s));
	return s;
}

const struct rsd_materialization_snapshot *lfx_mat_in(const struct rsd_snapshot *s,
						      struct rsd_handle h, struct rsd_location at)
{
	for (size_t i = 0; i < s->nvalues; i++) {
		if (!rsd_handle_equal(s->values[i].handle, h))
			continue;
		for (size_t j = 0; j < s->values[i].nmaterializations; j++)
			if (rsd_location_equal(s->values[i].materializations[j].location, at))
				return &s->values[i].materializations[j];
	}
	return NULL;
}

const struct rsd_location_snapshot *lfx_loc_in(const struct rsd_snapshot *s, struct rsd_location at)
{
	for (size_t i = 0; i < s->nlocations; i++)
		if (rsd_location_equal(s->locations[i].location, at))
			return &s->locations[i];
	return NULL;
}

void lfx_check_mat(int line, struct rsd_handle h, struct rsd_location at, uint64_t use,
		   uint64_t hold, uint64_t pend)
{
	struct rsd_snapshot *s = lfx_snap();
	const struct rsd_materialization_snapshot *x = lfx_mat_in(s, h, at);

	ATF_CHECK_MSG(x != NULL, "line %d: value %llu has no materialization there", line,
		      (unsigned long long)h.id);
	if (x) {
		ATF_CHECK_EQ_MSG(x->use_count, use, "line %d: use_count %llu, expected %llu", line,
				 (unsigned long long)x->use_count, (unsigned long long)use);
		ATF_CHECK_EQ_MSG(x->hold_count, hold, "line %d: hold_count %llu, expected %llu",
				 line, (unsigned long long)x->hold_count, (unsigned long long)hold);
		ATF_CHECK_EQ_MSG(x->pending_event_count, pend,
				 "line %d: pending_event_count %llu, expected %llu", line,
				 (unsigned long long)x->pending_event_count,
				 (unsigned long long)pend);
	}
	rsd_snapshot_free(s);
}

void lfx_check_loc(int line, struct rsd_location at, uint64_t use, uint64_t hold, uint64_t pend)
{
	struct rsd_snapshot *s = lfx_snap();
	const struct rsd_location_snapshot *x = lfx_loc_in(s, at);

	ATF_CHECK_MSG(x != NULL, "line %d: location not known", line);
	if (x) {
		ATF_CHECK_EQ_MSG(x->use_count, use,
				 "line %d: location use_count %llu, expected %llu", line,
				 (unsigned long long)x->use_count, (unsigned long long)use);
		ATF_CHECK_EQ_MSG(x->hold_count, hold,
				 "line %d: location hold_count %llu, expected %llu", line,
				 (unsigned long long)x->hold_count, (unsigned long long)hold);
		ATF_CHECK_EQ_MSG(x->pending_event_count, pend,
				 "line %d: location pending_event_count %llu, expected %llu", line,
				 (unsigned long long)x->pending_event_count,
				 (unsigned long long)pend);
	}
	rsd_snapshot_free(s);
}

void lfx_check_ver(int line, uint64_t expected)
{
	uint64_t v = lfx_ver();

	ATF_CHECK_EQ_MSG(v, expected, "line %d: state_version %llu, expected %llu", line,
			 (unsigned long long)v, (unsigned long long)expected);
}

/* Is the plan "drop h at `at`" feasible against the published image? */
bool lfx_drop_feasible(struct rsd_handle h, struct rsd_location at)
{
	struct rsd_action a = rsd_action_drop(h, at);
	struct rsd_plan p = { .name = "drop", .enter = &a, .nenter = 1 };
	struct rsd_explanation *e = NULL;
	bool ok;

	RSD_REQUIRE_OK(rsd_explain(lfx_m, &p, NULL, &e));
	ok = e->feasible;
	rsd_explanation_free(e);
	return ok;
}

struct rsd_lease *lfx_pending_lease(struct rsd_handle a, void *s)
{
	struct rsd_lease *l = NULL;

	RSD_REQUIRE_OK(rsd_acquire(lfx_m, &a, 1, lfx_cuda(0), s, &l));
	RSD_REQUIRE_OK(rsd_lease_release(l, 0));
	return l;
}
