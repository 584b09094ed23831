/* SPDX-License-Identifier: MIT */
/*
 * Shared setup of the plan tests (explain, execute, scopes): a manager on
 * the simulated device or host-only with its warnings captured, 64-byte
 * values (N in reference.md §20), counted sources with failure
 * knobs, snapshot lookups, and checks of explanations and reports.
 */
#ifndef RSD_TESTS_PLAN_PFX_H
#define RSD_TESTS_PLAN_PFX_H

#include <stdbool.h>
#include <stdint.h>

#include <rsd/rsd.h>

#define N 64
#define PAGEABLE RSD_LOC_PAGEABLE_HOST
#define PINNED RSD_LOC_PINNED_HOST

/* Python reprs of the locations, as reason texts quote them. */
#define REPR_PAGEABLE "ResidencyLocation(kind='pageable-host', device=device(type='cpu'))"
#define REPR_PINNED "ResidencyLocation(kind='pinned-host', device=device(type='cpu'))"
#define REPR_CUDA0 "ResidencyLocation(kind='cuda', device=device(type='cuda', index=0))"

struct pfx {
	struct rsd_simdev *sd; /* NULL: a host-only manager */
	struct rsd_manager *m;
	unsigned loads; /* loads of every source made by pfx_sourced* */
	unsigned nwarn; /* warnings of the manager */
	char warn[512]; /* the latest of them */
};

/* A source made by pfx_sourced_src; the manager frees it on release. */
struct pfx_src {
	struct pfx *f;
	struct rsd_location at;
	uint64_t nbytes;
	int fail;		 /* returned by load when nonzero */
	struct rsd_scope *scope; /* closed from inside load when set */
	int close_rc;		 /* what that close returned */
};

/* ndevices < 0: host-only manager; otherwise the simulated device (auto-complete). */
void pfx_init(struct pfx *f, const struct rsd_budget *b, size_t nb, int ndevices);
void pfx_init_pooled(struct pfx *f, const struct rsd_budget *b, size_t nb, int ndevices,
		     bool pooled);
void pfx_fini(struct pfx *f);

struct rsd_location pfx_cuda(int n);
bool pfx_loc_is(struct rsd_location a, struct rsd_location b);

/* Adopt a fresh value of n (pfx_adopt: N) bytes at a location. */
struct rsd_handle pfx_adopt_n(struct pfx *f, struct rsd_location at, enum rsd_replica_mode mode,
			      uint64_t n);
struct rsd_handle pfx_adopt(struct pfx *f, struct rsd_location at, enum rsd_replica_mode mode);
/* A REPLICABLE, RECONSTRUCTIBLE n/n value whose source loads at `at`. */
struct rsd_handle pfx_sourced_src(struct pfx *f, struct rsd_location at, uint64_t n, int fail,
				  struct pfx_src **out);
struct rsd_handle pfx_sourced_fail(struct pfx *f, struct rsd_location at, int fail);
struct rsd_handle pfx_sourced(struct pfx *f, struct rsd_location at);
void pfx_ensure(struct pfx *f, struct rsd_handle h, struct rsd_location at);
struct rsd_hold *pfx_hold1(struct pfx *f, struct rsd_handle h, struct rsd_location at);

uint64_t pfx_version(struct pfx *f);
size_t pfx_nlocations(struct pfx *f);
/* The value's snapshot entry, NULL when it is not listed. */
const struct rsd_value_snapshot *pfx_snap_value(const struct rsd_snapshot *s, struct rsd_handle h);
/* Materialization count and residency of a listed value (the test fails otherwise). */
size_t pfx_nmat(struct pfx *f, struct rsd_handle h);
bool pfx_resident_at(struct pfx *f, struct rsd_handle h, struct rsd_location at);
/* A copy of one location's snapshot (zeroed when the location is unknown). */
struct rsd_location_snapshot pfx_loc_snap(struct pfx *f, struct rsd_location at, size_t *nresv);
uint64_t pfx_reserved(struct pfx *f, struct rsd_location at);
size_t pfx_nreservations(struct pfx *f);

/* Drop any partial report left by an earlier call on this thread. */
void pfx_clear_partial(void);

/* The explanation of a plan that only enters a (no expected version). */
struct rsd_explanation *pfx_explain_enter(struct pfx *f, const char *name,
					  const struct rsd_action *a, size_t n);
void pfx_check_reason(const char *got, const char *want);
/* One action explanation, field by field. src/dst NULL: absent; reason NULL: none. */
void pfx_check_act(const struct rsd_action_explanation *x, bool executable, bool no_op,
		   const struct rsd_location *src, const struct rsd_location *dst, uint64_t nbytes,
		   const char *reason);
/* The i-th predicted peak. */
void pfx_check_peak(const struct rsd_explanation *e, size_t i, struct rsd_location at,
		    uint64_t nbytes);
/* One report transition, except its reason. src/dst NULL: absent. */
void pfx_check_transition(const struct rsd_transition *t, const struct rsd_action *a, bool no_op,
			  const struct rsd_location *src, const struct rsd_location *dst,
			  uint64_t nbytes);
/* A failed entry wrote nothing to *out (s was NULL before the call). */
void pfx_check_no_scope(const struct rsd_scope *s);

#endif
