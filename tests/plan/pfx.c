// SPDX-License-Identifier: MIT
/* Shared setup of the plan tests (pfx.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atf-c.h>
#include "../check.h"

#include "pfx.h"

static int src_load(void *ctx, struct rsd_resident **out)
{
	struct pfx_src *s = ctx;

	s->f->loads++;
	if (s->scope)
		s->close_rc = rsd_scope_close(s->scope, NULL);
	if (s->fail)
		return s->fail;
	return rsd_resident_alloc(s->f->m, &rsd_resident_type, s->at, 1, &s->nbytes, NULL, 0, out);
}

static void src_release(void *ctx)
{
	free(ctx);
}

static void on_warn(void *ctx, const char *message)
{
	struct pfx *f = ctx;

	f->nwarn++;
	snprintf(f->warn, sizeof(f->warn), "%s", message);
}

void pfx_init_pooled(struct pfx *f, const struct rsd_budget *b, size_t nb, int ndevices,
		     bool pooled)
{
	struct rsd_manager_config cfg;

	memset(f, 0, sizeof(*f));
	memset(&cfg, 0, sizeof(cfg));
	cfg.budgets = b;
	cfg.nbudgets = nb;
	cfg.warn = on_warn;
	cfg.warn_ctx = f;
	if (ndevices < 0) {
		cfg.host_only = true;
	} else {
		struct rsd_simdev_config sc = { .ndevices = ndevices,
						.auto_complete = true,
						.pooled = pooled };

		RSD_REQUIRE_OK(rsd_simdev_create(&sc, &f->sd));
		cfg.driver = rsd_simdev_ops();
		cfg.driver_ctx = f->sd;
	}
	RSD_REQUIRE_OK(rsd_manager_create(&cfg, &f->m));
}

void pfx_init(struct pfx *f, const struct rsd_budget *b, size_t nb, int ndevices)
{
	pfx_init_pooled(f, b, nb, ndevices, true);
}

void pfx_fini(struct pfx *f)
{
	rsd_manager_destroy(f->m);
	if (f->sd)
		rsd_simdev_destroy(f->sd);
}

struct rsd_location pfx_cuda(int n)
{
	struct rsd_location l;

	RSD_REQUIRE_OK(rsd_cuda_location(n, &l));
	return l;
}

bool pfx_loc_is(struct rsd_location a, struct rsd_location b)
{
	return rsd_location_equal(a, b);
}

struct rsd_handle pfx_adopt_n(struct pfx *f, struct rsd_location at, enum rsd_replica_mode mode,
			      uint64_t n)
{
	struct rsd_resident *r;
	struct rsd_handle h;

	RSD_REQUIRE_OK(rsd_resident_alloc(f->m, &rsd_resident_type, at, 1, &n, NULL, 0, &r));
	RSD_REQUIRE_OK(rsd_adopt(f->m, r, &at, mode, &h));
	return h;
}

struct rsd_handle pfx_adopt(struct pfx *f, struct rsd_location at, enum rsd_replica_mode mode)
{
	return pfx_adopt_n(f, at, mode, N);
}

struct rsd_handle pfx_sourced_src(struct pfx *f, struct rsd_location at, uint64_t n, int fail,
				  struct pfx_src **out)
{
	struct rsd_value_spec spec = { &rsd_resident_type, n, n, RSD_REPLICABLE,
				       RSD_RECONSTRUCTIBLE };
	struct pfx_src *s = calloc(1, sizeof(*s));
	struct rsd_source source = { src_load, src_release, s };
	struct rsd_handle h;

	ATF_REQUIRE(s);
	s->f = f;
	s->at = at;
	s->nbytes = n;
	s->fail = fail;
	RSD_REQUIRE_OK(rsd_register_source(f->m, &spec, &source, at, &h));
	if (out)
		*out = s;
	return h;
}

struct rsd_handle pfx_sourced_fail(struct pfx *f, struct rsd_location at, int fail)
{
	return pfx_sourced_src(f, at, N, fail, NULL);
}

struct rsd_handle pfx_sourced(struct pfx *f, struct rsd_location at)
{
	return pfx_sourced_src(f, at, N, 0, NULL);
}

void pfx_ensure(struct pfx *f, struct rsd_handle h, struct rsd_location at)
{
	RSD_REQUIRE_OK(rsd_ensure(f->m, h, at, NULL, NULL));
}

struct rsd_hold *pfx_hold1(struct pfx *f, struct rsd_handle h, struct rsd_location at)
{
	struct rsd_hold *hd;

	RSD_REQUIRE_OK(rsd_hold(f->m, &h, 1, at, &hd));
	return hd;
}

uint64_t pfx_version(struct pfx *f)
{
	uint64_t v = 0;

	RSD_REQUIRE_OK(rsd_manager_state_version_get(f->m, &v));
	return v;
}

size_t pfx_nlocations(struct pfx *f)
{
	struct rsd_location l[8];

	return rsd_manager_locations(f->m, l, 8);
}

const struct rsd_value_snapshot *pfx_snap_value(const struct rsd_snapshot *s, struct rsd_handle h)
{
	for (size_t i = 0; i < s->nvalues; i++)
		if (rsd_handle_equal(s->values[i].handle, h))
			return &s->values[i];
	return NULL;
}

size_t pfx_nmat(struct pfx *f, struct rsd_handle h)
{
	const struct rsd_value_snapshot *v;
	struct rsd_snapshot *s;
	size_t n;

	RSD_REQUIRE_OK(rsd_snapshot_take(f->m, &s));
	v = pfx_snap_value(s, h);
	ATF_REQUIRE(v);
	n = v->nmaterializations;
	rsd_snapshot_free(s);
	return n;
}

bool pfx_resident_at(struct pfx *f, struct rsd_handle h, struct rsd_location at)
{
	const struct rsd_value_snapshot *v;
	struct rsd_snapshot *s;
	bool found = false;

	RSD_REQUIRE_OK(rsd_snapshot_take(f->m, &s));
	v = pfx_snap_value(s, h);
	ATF_REQUIRE(v);
	for (size_t i = 0; i < v->nmaterializations; i++)
		found |= pfx_loc_is(v->materializations[i].location, at);
	rsd_snapshot_free(s);
	return found;
}

struct rsd_location_snapshot pfx_loc_snap(struct pfx *f, struct rsd_location at, size_t *nresv)
{
	struct rsd_location_snapshot out;
	struct rsd_snapshot *s;

	memset(&out, 0, sizeof(out));
	RSD_REQUIRE_OK(rsd_snapshot_take(f->m, &s));
	for (size_t i = 0; i < s->nlocations; i++)
		if (pfx_loc_is(s->locations[i].location, at))
			out = s->locations[i];
	if (nresv)
		*nresv = s->nreservations;
	rsd_snapshot_free(s);
	return out;
}

uint64_t pfx_reserved(struct pfx *f, struct rsd_location at)
{
	return pfx_loc_snap(f, at, NULL).reserved_bytes;
}

size_t pfx_nreservations(struct pfx *f)
{
	size_t n;

	pfx_loc_snap(f, PAGEABLE, &n);
	return n;
}

void pfx_clear_partial(void)
{
	rsd_plan_report_free(rsd_take_partial_report());
}

struct rsd_explanation *pfx_explain_enter(struct pfx *f, const char *name,
					  const struct rsd_action *a, size_t n)
{
	struct rsd_plan p = { .name = name, .enter = a, .nenter = n };
	struct rsd_explanation *e = NULL;

	RSD_REQUIRE_OK(rsd_explain(f->m, &p, NULL, &e));
	ATF_REQUIRE(e);
	return e;
}

void pfx_check_reason(const char *got, const char *want)
{
	ATF_REQUIRE_MSG(got != NULL, "reason absent, wanted \"%s\"", want);
	ATF_CHECK_STREQ(got, want);
}

void pfx_check_act(const struct rsd_action_explanation *x, bool executable, bool no_op,
		   const struct rsd_location *src, const struct rsd_location *dst, uint64_t nbytes,
		   const char *reason)
{
	ATF_CHECK_EQ(x->executable, executable);
	ATF_CHECK_EQ(x->no_op, no_op);
	ATF_CHECK_EQ(x->has_source, src != NULL);
	if (src && x->has_source)
		ATF_CHECK(pfx_loc_is(x->source, *src));
	ATF_CHECK_EQ(x->has_destination, dst != NULL);
	if (dst && x->has_destination)
		ATF_CHECK(pfx_loc_is(x->destination, *dst));
	ATF_CHECK_EQ(x->logical_nbytes, nbytes);
	ATF_CHECK_EQ(x->storage_nbytes, nbytes);
	if (reason)
		pfx_check_reason(x->reason, reason);
	else
		ATF_CHECK_MSG(x->reason == NULL, "unexpected reason \"%s\"", x->reason);
}

void pfx_check_peak(const struct rsd_explanation *e, size_t i, struct rsd_location at,
		    uint64_t nbytes)
{
	char name[RSD_LOCATION_NAME_MAX];

	ATF_REQUIRE_MSG(i < e->npeaks, "only %zu predicted peaks", e->npeaks);
	ATF_CHECK_MSG(pfx_loc_is(e->predicted_peak_bytes[i].location, at), "peak %zu is at %s", i,
		      rsd_location_name(e->predicted_peak_bytes[i].location, name, sizeof(name)));
	ATF_CHECK_EQ_MSG(e->predicted_peak_bytes[i].nbytes, nbytes, "peak %zu: %llu, want %llu", i,
			 (unsigned long long)e->predicted_peak_bytes[i].nbytes,
			 (unsigned long long)nbytes);
}

void pfx_check_transition(const struct rsd_transition *t, const struct rsd_action *a, bool no_op,
			  const struct rsd_location *src, const struct rsd_location *dst,
			  uint64_t nbytes)
{
	ATF_CHECK(rsd_action_equal(&t->action, a));
	ATF_CHECK_EQ(t->no_op, no_op);
	ATF_CHECK_EQ(t->has_source, src != NULL);
	if (src && t->has_source)
		ATF_CHECK(pfx_loc_is(t->source, *src));
	ATF_CHECK_EQ(t->has_destination, dst != NULL);
	if (dst && t->has_destination)
		ATF_CHECK(pfx_loc_is(t->destination, *dst));
	ATF_CHECK_EQ(t->logical_nbytes, nbytes);
	ATF_CHECK_EQ(t->storage_nbytes, nbytes);
	ATF_CHECK(t->completed_at_ns >= t->started_at_ns);
}

void pfx_check_no_scope(const struct rsd_scope *s)
{
	ATF_CHECK_MSG(s == NULL, "a failed scope entry wrote %p to *out", (const void *)s);
}
