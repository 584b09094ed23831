// SPDX-License-Identifier: MIT
/* Shared setup of the controller tests (fixture.h). */
#include <stdlib.h>
#include <string.h>

#include <atf-c.h>
#include "../check.h"

#include "fixture.h"

struct src_ctx {
	struct fx *f;
	struct rsd_location at;
};

static int src_load(void *ctx, struct rsd_resident **out)
{
	struct src_ctx *s = ctx;
	uint64_t n = N;

	s->f->loads++;
	return rsd_resident_alloc(s->f->m, &rsd_resident_type, s->at, 1, &n, NULL, 0, out);
}

static void src_release(void *ctx)
{
	free(ctx);
}

static void init(struct fx *f, const struct rsd_budget *b, size_t nb, int ndevices, bool immediate)
{
	struct rsd_simdev_config sc = { .ndevices = ndevices,
					.auto_complete = immediate,
					.pooled = true };
	struct rsd_manager_config mc;

	memset(f, 0, sizeof(*f));
	RSD_REQUIRE_OK(rsd_simdev_create(&sc, &f->sd));
	memset(&mc, 0, sizeof(mc));
	mc.budgets = b;
	mc.nbudgets = nb;
	mc.driver = rsd_simdev_ops();
	mc.driver_ctx = f->sd;
	RSD_REQUIRE_OK(rsd_manager_create(&mc, &f->m));
}

void fx_init(struct fx *f, const struct rsd_budget *b, size_t nb, int ndevices)
{
	init(f, b, nb, ndevices, true);
}

void fx_init_on_command(struct fx *f, const struct rsd_budget *b, size_t nb, int ndevices)
{
	init(f, b, nb, ndevices, false);
}

void fx_fini(struct fx *f)
{
	rsd_manager_destroy(f->m);
	rsd_simdev_destroy(f->sd);
}

struct rsd_handle fx_adopt(struct fx *f, struct rsd_location at, enum rsd_replica_mode mode)
{
	struct rsd_resident *r;
	struct rsd_handle h;
	uint64_t n = N;

	RSD_REQUIRE_OK(rsd_resident_alloc(f->m, &rsd_resident_type, at, 1, &n, NULL, 0, &r));
	RSD_REQUIRE_OK(rsd_adopt(f->m, r, &at, mode, &h));
	return h;
}

struct rsd_handle fx_sourced(struct fx *f, struct rsd_location src)
{
	struct rsd_value_spec spec = { &rsd_resident_type, N, N, RSD_REPLICABLE,
				       RSD_RECONSTRUCTIBLE };
	struct src_ctx *ctx = malloc(sizeof(*ctx));
	struct rsd_source s = { src_load, src_release, ctx };
	struct rsd_handle h;

	ATF_REQUIRE(ctx);
	ctx->f = f;
	ctx->at = src;
	RSD_REQUIRE_OK(rsd_register_source(f->m, &spec, &s, src, &h));
	return h;
}

void fx_ensure(struct fx *f, struct rsd_handle h, struct rsd_location at)
{
	RSD_REQUIRE_OK(rsd_ensure(f->m, h, at, NULL, NULL));
}

uint64_t fx_version(struct fx *f)
{
	uint64_t v = 0;

	RSD_REQUIRE_OK(rsd_manager_state_version_get(f->m, &v));
	return v;
}

static const struct rsd_value_snapshot *find(const struct rsd_snapshot *s, struct rsd_handle h)
{
	for (size_t i = 0; i < s->nvalues; i++)
		if (rsd_handle_equal(s->values[i].handle, h))
			return &s->values[i];
	return NULL;
}

bool fx_at(struct fx *f, struct rsd_handle h, struct rsd_location at)
{
	struct rsd_snapshot *s;
	const struct rsd_value_snapshot *v;
	bool found = false;

	RSD_REQUIRE_OK(rsd_snapshot_take(f->m, &s));
	v = find(s, h);
	ATF_REQUIRE(v);
	for (size_t i = 0; i < v->nmaterializations; i++)
		found |= rsd_location_equal(v->materializations[i].location, at);
	rsd_snapshot_free(s);
	return found;
}

size_t fx_nmat(struct fx *f, struct rsd_handle h)
{
	struct rsd_snapshot *s;
	size_t n;

	RSD_REQUIRE_OK(rsd_snapshot_take(f->m, &s));
	ATF_REQUIRE(find(s, h));
	n = find(s, h)->nmaterializations;
	rsd_snapshot_free(s);
	return n;
}

static uint64_t loc_field(struct fx *f, struct rsd_location at, bool used)
{
	struct rsd_snapshot *s;
	uint64_t n = 0;

	RSD_REQUIRE_OK(rsd_snapshot_take(f->m, &s));
	for (size_t i = 0; i < s->nlocations; i++)
		if (rsd_location_equal(s->locations[i].location, at))
			n = used ? s->locations[i].used_bytes : s->locations[i].reserved_bytes;
	rsd_snapshot_free(s);
	return n;
}

uint64_t fx_used(struct fx *f, struct rsd_location at)
{
	return loc_field(f, at, true);
}

uint64_t fx_reserved(struct fx *f, struct rsd_location at)
{
	return loc_field(f, at, false);
}

struct rsd_requirement fx_req(struct rsd_handle h, struct rsd_location at)
{
	struct rsd_requirement q = { h, at };

	return q;
}

bool fx_is_drop(const struct rsd_action *a, struct rsd_handle h, struct rsd_location at)
{
	return a->kind == RSD_ACT_DROP && rsd_handle_equal(a->handle, h) &&
	       rsd_location_equal(a->location, at);
}

bool fx_is_ensure(const struct rsd_action *a, struct rsd_handle h, struct rsd_location at)
{
	return a->kind == RSD_ACT_ENSURE && rsd_handle_equal(a->handle, h) &&
	       rsd_location_equal(a->location, at);
}

bool fx_is_move(const struct rsd_action *a, struct rsd_handle h, struct rsd_location to,
		const struct rsd_location *from)
{
	if (a->kind != RSD_ACT_MOVE || !rsd_handle_equal(a->handle, h) ||
	    !rsd_location_equal(a->location, to) || a->has_from != (from != NULL))
		return false;
	return !from || rsd_location_equal(a->from, *from);
}

const struct rsd_policy_config_entry *fx_no_config(void *ctx, size_t *n)
{
	(void)ctx;
	*n = 0;
	return NULL;
}

size_t fx_no_fallback(void *ctx, struct rsd_location l, struct rsd_location *out, size_t cap)
{
	(void)ctx, (void)l, (void)out, (void)cap;
	return 0;
}

static const char *wrap_name(void *ctx)
{
	const struct fx_wrap *w = ctx;

	return w->inner->ops->name(w->inner->ctx);
}

static const struct rsd_policy_config_entry *wrap_config(void *ctx, size_t *n)
{
	const struct fx_wrap *w = ctx;

	return w->inner->ops->config_identity(w->inner->ctx, n);
}

static size_t wrap_fallback(void *ctx, struct rsd_location l, struct rsd_location *out, size_t cap)
{
	const struct fx_wrap *w = ctx;

	return w->inner->ops->fallback_locations(w->inner->ctx, l, out, cap);
}

static int wrap_order(void *ctx, struct rsd_eviction_candidate *c, size_t n)
{
	const struct fx_wrap *w = ctx;
	int err;

	if (w->before)
		w->before(w->ctx, c, n);
	err = w->inner->ops->order_candidates(w->inner->ctx, c, n);
	if (w->after)
		w->after(w->ctx, c, n);
	return err;
}

static size_t wrap_spill(void *ctx, const struct rsd_eviction_candidate *c,
			 struct rsd_location *out, size_t cap)
{
	const struct fx_wrap *w = ctx;

	return w->inner->ops->spill_locations(w->inner->ctx, c, out, cap);
}

void fx_wrap_init(struct fx_wrap *w, const struct rsd_policy *inner,
		  void (*before)(void *ctx, const struct rsd_eviction_candidate *c, size_t n),
		  void (*after)(void *ctx, const struct rsd_eviction_candidate *c, size_t n),
		  void *ctx)
{
	const struct rsd_policy_ops *o = inner->ops;

	w->inner = inner;
	w->before = before;
	w->after = after;
	w->ctx = ctx;
	/* the optional ops stay absent where inner has none */
	w->ops = (struct rsd_policy_ops){ wrap_name, wrap_config,
					  o->fallback_locations ? wrap_fallback : NULL, wrap_order,
					  o->spill_locations ? wrap_spill : NULL };
	w->pol = (struct rsd_policy){ &w->ops, w };
}

struct rsd_eviction_candidate fx_cand(int prio, long long epoch, uint64_t idx)
{
	struct rsd_eviction_candidate c;

	memset(&c, 0, sizeof(c));
	c.handle.id = idx + 100;
	c.location = PINNED;
	c.registration_index = idx;
	c.has_last_access_epoch = epoch >= 0;
	c.last_access_epoch = epoch >= 0 ? (uint64_t)epoch : 0;
	c.metadata.priority = prio;
	return c;
}
