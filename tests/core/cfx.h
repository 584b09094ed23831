/* SPDX-License-Identifier: MIT */
/*
 * Shared setup of the core tests: managers (host-only or on the simulated
 * device), residents, counted sources with failure knobs, snapshot lookups
 * and a checker of the snapshot invariants of reference.md §14.6 and §7.2
 * that every cfx_snap() runs.
 */
#ifndef RSD_TESTS_CORE_CFX_H
#define RSD_TESTS_CORE_CFX_H

#include <stdbool.h>
#include <stdint.h>

#include <rsd/rsd.h>

#include "../check.h"

#define N 64 /* the charge of most test values (reference.md §20) */

#define PAGEABLE RSD_LOC_PAGEABLE_HOST
#define PINNED RSD_LOC_PINNED_HOST

/* Value types: base and derived share the root; rogue is not a value type. */
extern const struct rsd_type cfx_base_type;
extern const struct rsd_type cfx_derived_type;
extern const struct rsd_type cfx_other_type;
extern const struct rsd_type cfx_rogue_type;

/* No-op reasons (data fields, reference.md §4.6-4.8). */
#define R_DEST_RESIDENT "destination already resident"
#define R_DEST_OWNS "destination already owns the selected replica"
#define R_ABSENT "materialization already absent"

struct cfx {
	struct rsd_simdev *sd; /* NULL on a host-only manager */
	struct rsd_manager *m;
};

/* A host-only manager (pinned memory from the host driver). */
void cfx_host(struct cfx *f, const struct rsd_budget *b, size_t nb);
/* A manager on the simulated device with ndevices GPUs (auto-complete). */
void cfx_sim(struct cfx *f, const struct rsd_budget *b, size_t nb, int ndevices);
void cfx_fini(struct cfx *f);

struct rsd_location cfx_cuda(int dev);
const char *cfx_name(struct rsd_location at); /* static buffer ring */

/*
 * Location records every entry point refuses before it looks at a device,
 * with the code: none of the three kinds, or a host kind with a device, is
 * RSD_ETYPE; a CUDA index outside 0..127 is RSD_EINVAL.
 */
struct cfx_bad_loc {
	struct rsd_location loc;
	int code;
};
extern const struct cfx_bad_loc cfx_bad_locs[];
extern const size_t cfx_nbad_locs;
/* Leave a code other than `code` in rsd_last_error(), so that a stale
 * record cannot make the next check pass. */
void cfx_reset_error(int code);

/* Results: a failure message that quotes the call, its code and
 * rsd_last_error() (../check.h). */
#define OK(expr) RSD_REQUIRE_OK(expr)
/* rc must be -code, rsd_last_error() must say code with a message. */
void cfx_err(int rc, int code, const char *expr, const char *file, int line);
#define ERR(code, expr) cfx_err((expr), (code), #expr, __FILE__, __LINE__)

uint64_t cfx_version(struct cfx *f);
#define CHECK_VERSION(f, v)                                                              \
	do {                                                                             \
		uint64_t v_ = cfx_version(f);                                            \
		ATF_CHECK_EQ_MSG(v_, (uint64_t)(v), "state_version %llu, expected %llu", \
				 (unsigned long long)v_, (unsigned long long)(v));       \
	} while (0)

/* A fresh resident of one n-byte buffer at `at`; skips the test when pinned
 * memory cannot be page-locked here. */
struct rsd_resident *cfx_alloc(struct cfx *f, struct rsd_location at, uint64_t n);
struct rsd_handle cfx_adopt(struct cfx *f, struct rsd_location at, uint64_t n,
			    enum rsd_replica_mode mode);

/*
 * A counted source. The caller owns the struct (usually on the stack) and
 * sets the knobs before the loads it affects.
 */
struct csrc {
	struct cfx *f;
	struct rsd_location at;	     /* where load allocates; defaults to the source location */
	const struct rsd_type *type; /* type of the loaded value; default rsd_resident_type */
	uint64_t nbytes;	     /* logical bytes loaded; default the spec's logical */
	unsigned loads, releases;
	int fail_rc;	     /* returned by the next fail_times loads */
	unsigned fail_times; /* UINT32_MAX: forever */
	/* Runs inside load first; a nonzero result is returned by load. */
	int (*hook)(struct csrc *s);
	/* Produces the value instead of rsd_resident_alloc. */
	int (*make)(struct csrc *s, struct rsd_resident **out);
	void *arg;
	int hook_rc; /* what the hook saw, for the test to check */
	uint64_t hook_u64;
};
int cfx_load(void *ctx, struct rsd_resident **out);
void cfx_src_release(void *ctx);
struct rsd_handle cfx_register(struct cfx *f, struct csrc *s, struct rsd_location sl,
			       uint64_t logical, uint64_t charge, enum rsd_replica_mode mode);
/* REPLICABLE, N/N. */
struct rsd_handle cfx_sourced(struct cfx *f, struct csrc *s, struct rsd_location sl);

/* Snapshots; cfx_snap checks the invariants before returning. */
struct rsd_snapshot *cfx_snap(struct cfx *f);
void cfx_check_invariants(struct cfx *f, const struct rsd_snapshot *s);
const struct rsd_value_snapshot *cfx_val(const struct rsd_snapshot *s, struct rsd_handle h);
const struct rsd_location_snapshot *cfx_loc(const struct rsd_snapshot *s, struct rsd_location at);
const struct rsd_materialization_snapshot *cfx_mat(const struct rsd_value_snapshot *v,
						   struct rsd_location at);
/* h's materialization at `at` in s; h must be in s. */
const struct rsd_materialization_snapshot *
cfx_snap_mat(const struct rsd_snapshot *s, struct rsd_handle h, struct rsd_location at);
/* Fill h's one buffer at `at` with seed, through a host lease. */
void cfx_fill(struct cfx *f, struct rsd_handle h, struct rsd_location at, int seed);
/* Every byte of h's materialization at `at` equals seed: read through a
 * lease (simulated device memory is host memory), on the device's default
 * stream at a CUDA location, released with a wait there. */
bool cfx_has_pattern(struct cfx *f, struct rsd_handle h, struct rsd_location at, int seed);
/* rsd_last_error()'s message contains text. */
#define CHECK_MSG_HAS(text)                                                     \
	ATF_CHECK_MSG(strstr(rsd_last_error()->message, (text)), "message: %s", \
		      rsd_last_error()->message)
/* Materialization locations of h, in insertion order; returns the count. */
size_t cfx_mats(struct cfx *f, struct rsd_handle h, struct rsd_location *out, size_t cap);
bool cfx_resident(struct cfx *f, struct rsd_handle h, struct rsd_location at);
uint64_t cfx_used(struct cfx *f, struct rsd_location at);
/* The location's in_flight_bytes (a queued move's source, a load's charge). */
uint64_t cfx_in_flight(struct cfx *f, struct rsd_location at);
uint64_t cfx_reserved(struct cfx *f, struct rsd_location at);
uint64_t cfx_peak_charged(struct cfx *f, struct rsd_location at);
/* The manager's known locations equal want[0..n) in order. */
void cfx_check_locations(struct cfx *f, const struct rsd_location *want, size_t n, const char *file,
			 int line);
#define CHECK_LOCATIONS(f, ...)                                                             \
	do {                                                                                \
		const struct rsd_location w_[] = { __VA_ARGS__ };                           \
		cfx_check_locations(f, w_, sizeof(w_) / sizeof(w_[0]), __FILE__, __LINE__); \
	} while (0)
/*
 * Two snapshots describe the same state: version, values, materializations,
 * accounting and reservations (peak_charged may differ when allow_peak).
 */
void cfx_check_same(const struct rsd_snapshot *a, const struct rsd_snapshot *b, bool allow_peak,
		    const char *file, int line);
#define CHECK_SAME(a, b, allow_peak) cfx_check_same(a, b, allow_peak, __FILE__, __LINE__)

/* Report checks. */
void cfx_check_report(const struct rsd_transition *r, const struct rsd_action *a, bool no_op,
		      const struct rsd_location *src, const struct rsd_location *dst,
		      uint64_t logical, uint64_t storage, const char *reason, const char *file,
		      int line);
#define CHECK_REPORT(r, a, no_op, src, dst, logical, storage, reason) \
	cfx_check_report(r, a, no_op, src, dst, logical, storage, reason, __FILE__, __LINE__)

#endif
