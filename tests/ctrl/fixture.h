/* SPDX-License-Identifier: MIT */
/*
 * Shared setup of the controller tests: a manager on the simulated device,
 * 64-byte values (N in reference.md §20), counted sources.
 */
#ifndef RSD_TESTS_CTRL_FIXTURE_H
#define RSD_TESTS_CTRL_FIXTURE_H

#include <rsd/rsd.h>

#define N 64

struct fx {
	struct rsd_simdev *sd;
	struct rsd_manager *m;
	unsigned loads; /* calls of every source made by fx_sourced */
};

#define PAGEABLE RSD_LOC_PAGEABLE_HOST
#define PINNED RSD_LOC_PINNED_HOST

/* Budgets as (location, bytes) pairs, in map order; ndevices simulated GPUs. */
void fx_init(struct fx *f, const struct rsd_budget *b, size_t nb, int ndevices);
/* The same with the simulated device in on-command mode: stream work (a
 * released GPU lease's event) runs only at rsd_simdev_stream_complete(). */
void fx_init_on_command(struct fx *f, const struct rsd_budget *b, size_t nb, int ndevices);
void fx_fini(struct fx *f);
struct rsd_handle fx_adopt(struct fx *f, struct rsd_location at, enum rsd_replica_mode mode);
/* REPLICABLE, RECONSTRUCTIBLE, 64/64, loader returns a fresh value at src. */
struct rsd_handle fx_sourced(struct fx *f, struct rsd_location src);
void fx_ensure(struct fx *f, struct rsd_handle h, struct rsd_location at);
uint64_t fx_version(struct fx *f);
/* Is h resident at at, and how many materializations does it have? */
bool fx_at(struct fx *f, struct rsd_handle h, struct rsd_location at);
size_t fx_nmat(struct fx *f, struct rsd_handle h);
uint64_t fx_used(struct fx *f, struct rsd_location at);
uint64_t fx_reserved(struct fx *f, struct rsd_location at);

struct rsd_requirement fx_req(struct rsd_handle h, struct rsd_location at);
/* Action checks. */
bool fx_is_drop(const struct rsd_action *a, struct rsd_handle h, struct rsd_location at);
bool fx_is_ensure(const struct rsd_action *a, struct rsd_handle h, struct rsd_location at);
bool fx_is_move(const struct rsd_action *a, struct rsd_handle h, struct rsd_location to,
		const struct rsd_location *from);

/* An eviction candidate at pinned host: handle id idx + 100, registration
 * index idx, priority prio, last accessed at epoch (never when < 0). */
struct rsd_eviction_candidate fx_cand(int prio, long long epoch, uint64_t idx);

/* Ops of test policies: no configuration entries, no fallback locations. */
const struct rsd_policy_config_entry *fx_no_config(void *ctx, size_t *n);
size_t fx_no_fallback(void *ctx, struct rsd_location l, struct rsd_location *out, size_t cap);

/*
 * A policy that is inner (a library policy) with its candidate ordering
 * watched: before(ctx, ...) sees each group of candidates before inner
 * orders it, after(ctx, ...) once it has (either may be NULL). pol is the
 * policy to give a controller; w must outlive it.
 */
struct fx_wrap {
	const struct rsd_policy *inner;
	void (*before)(void *ctx, const struct rsd_eviction_candidate *c, size_t n);
	void (*after)(void *ctx, const struct rsd_eviction_candidate *c, size_t n);
	void *ctx;
	struct rsd_policy_ops ops;
	struct rsd_policy pol;
};
void fx_wrap_init(struct fx_wrap *w, const struct rsd_policy *inner,
		  void (*before)(void *ctx, const struct rsd_eviction_candidate *c, size_t n),
		  void (*after)(void *ctx, const struct rsd_eviction_candidate *c, size_t n),
		  void *ctx);

#endif
