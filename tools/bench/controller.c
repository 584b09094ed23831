// SPDX-License-Identifier: MIT
/*
 * Controller: rsd_controller_use of a request for 8 values when the
 * pageable budget holds 64 of N reconstructible 4 KiB values. Requests walk
 * the values round robin, so once the budget is full every use evicts 8
 * values and loads 8. The controller is being written concurrently: any
 * failure of its calls turns the case into "skipped" lines with the error.
 */
#include <stdlib.h>

#include "common.h"

#define VAL_BYTES 4096u
#define REQ_VALUES 8u
#define BUDGET_VALUES 64u

struct ctrl_env {
	struct rsd_manager *m;
	struct rsd_controller *c;
	struct rsd_handle *h;
	size_t n;
	size_t next; /* index of the next request's first value */
	struct rsd_requirement req[REQ_VALUES];
	struct rsd_request rq;
};

static void ctrl_next_request(struct ctrl_env *ce)
{
	for (size_t i = 0; i < REQ_VALUES; i++)
		ce->req[i] = (struct rsd_requirement){ ce->h[(ce->next + i) % ce->n],
						       RSD_LOC_PAGEABLE_HOST };
	ce->next = (ce->next + REQ_VALUES) % ce->n;
	ce->rq = (struct rsd_request){ .name = "bench",
				       .requirements = ce->req,
				       .nrequirements = REQ_VALUES };
}

static int ctrl_use_once(struct ctrl_env *ce)
{
	struct rsd_use *u;
	int rc;

	ctrl_next_request(ce);
	rc = rsd_controller_use(ce->c, &ce->rq, NULL, 0, NULL, 0, &u);
	if (rc)
		return rc;
	rc = rsd_use_close(u, NULL);
	rsd_use_free(u);
	return rc;
}

static void ctrl_skip(const char *cs, const char *what, int rc)
{
	bench_skip(cs, "use_us", "%s failed: %s: %s", what, rsd_strerror(rc),
		   rsd_last_error()->message);
}

/*
 * Fill the budget and warm up, then time reps batches of uses and of
 * decides of the next request (it evicts 8). 0, or the failing call's
 * error with *what naming it.
 */
static int ctrl_measure(struct ctrl_env *ce, size_t uses, size_t reps, double *use_us,
			double *dec_us, uint64_t *explored, uint64_t *nevict, const char **what)
{
	int rc;

	*what = "rsd_controller_use";
	for (size_t i = 0; i < BUDGET_VALUES / REQ_VALUES + 4; i++) {
		rc = ctrl_use_once(ce);
		if (rc)
			return rc;
	}
	for (size_t r = 0; r < reps; r++) {
		uint64_t t0 = bench_now_ns();

		for (size_t i = 0; i < uses; i++) {
			rc = ctrl_use_once(ce);
			if (rc)
				return rc;
		}
		use_us[r] = (double)(bench_now_ns() - t0) / (double)uses / 1e3;
	}
	*what = "rsd_controller_decide";
	ctrl_next_request(ce);
	for (size_t r = 0; r < reps; r++) {
		uint64_t t0 = bench_now_ns();

		for (size_t i = 0; i < uses; i++) {
			struct rsd_decision *d;

			rc = rsd_controller_decide(ce->c, &ce->rq, &d);
			if (rc)
				return rc;
			*explored = d->explored_states;
			*nevict = d->nevictions;
			rsd_decision_free(d);
		}
		dec_us[r] = (double)(bench_now_ns() - t0) / (double)uses / 1e3;
	}
	return 0;
}

static void ctrl_run(size_t n, double py_ms)
{
	struct rsd_budget b = { RSD_LOC_PAGEABLE_HOST, (uint64_t)BUDGET_VALUES * VAL_BYTES };
	size_t uses = QF(10, 40), reps = QF(3, 5);
	struct ctrl_env ce = { 0 };
	double use_us[8], dec_us[8];
	uint64_t explored = 0, nevict = 0;
	const char *what;
	char cs[32];
	struct bench_fig *f;
	int rc;

	snprintf(cs, sizeof(cs), "ctrl_use_%zu", n);
	ce.n = n;
	ce.h = calloc(n, sizeof(*ce.h));
	ce.m = bench_manager(&b, 1);
	bench_sources(ce.m, n, VAL_BYTES, ce.h);
	rc = rsd_controller_create(ce.m, NULL, 0, &ce.c);
	if (rc) {
		ctrl_skip(cs, "rsd_controller_create", rc);
		goto out;
	}
	rc = ctrl_measure(&ce, uses, reps, use_us, dec_us, &explored, &nevict, &what);
	if (rc) {
		ctrl_skip(cs, what, rc);
		goto out_ctrl;
	}
	f = bench_fig(cs, "use_us", bench_median(use_us, reps), "us");
	bench_fig_py(f, py_ms * 1e3);
	if (n >= 10000)
		bench_fig_target(f, TGT_MAX, 100);
	snprintf(cs, sizeof(cs), "ctrl_decide_%zu", n);
	bench_fig(cs, "decide_us", bench_median(dec_us, reps), "us");
	bench_line(cs, "explored_states", (double)explored, "count");
	bench_line(cs, "evictions", (double)nevict, "count");
out_ctrl:
	rsd_controller_free(ce.c);
out:
	bench_manager_end(ce.m);
	free(ce.h);
}

static void case_controller(void)
{
	ctrl_run(1000, 46);
	ctrl_run(10000, 559);
	bench_note("ctrl: use = rsd_controller_use + rsd_use_close + free of 8 sourced 4 KiB "
		   "values at pageable-host, budget %u values, round robin (every use evicts 8 "
		   "and loads 8); decide = rsd_controller_decide of the next such request",
		   BUDGET_VALUES);
}
