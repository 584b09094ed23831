/* SPDX-License-Identifier: MIT */
/*
 * Shared setup of the lifetime tests (leases, holds, reservations, close,
 * RCU readers): one manager per test, on the simulated device (two GPUs,
 * events that complete only when the test completes their stream) or
 * host-only, with its warnings captured; value creation, snapshot lookups
 * and checks of the protection counts and of state_version.
 *
 * The manager is global because every test drives exactly one; the check
 * macros take the caller's line so a failure points at the test, not here.
 */
#ifndef RSD_TESTS_LIFE_LFX_H
#define RSD_TESTS_LIFE_LFX_H

#include <stdbool.h>
#include <stdint.h>

#include <rsd/rsd.h>

extern struct rsd_simdev *lfx_sd; /* NULL on a host-only manager */
extern struct rsd_manager *lfx_m;
extern unsigned lfx_nwarn;     /* warnings seen since setup */
extern char lfx_lastwarn[512]; /* the latest of them */

/* A manager on the simulated device (on-command progress: consumer streams
 * run only when the test completes them, while a pump thread keeps the
 * transfer streams progressing as a GPU would), or a host-only one. */
void lfx_setup(bool host_only);
void lfx_setup_budgets(bool host_only, const struct rsd_budget *b, size_t nb);
/* Any of the above; auto_complete makes the simulated events complete at once. */
void lfx_setup_with(bool host_only, bool auto_complete, const struct rsd_budget *b, size_t nb);
void lfx_teardown(void);
/* Stop the transfer pump (teardown does; a test destroying lfx_sd itself
 * calls it first). */
void lfx_stop_pump(void);

struct rsd_location lfx_cuda(int d);
/* A stream of the simulated device. */
void *lfx_stream(int device);

/* Adopt a fresh n-byte REPLICABLE value at a location; rp (optional) gets it. */
struct rsd_handle lfx_put(struct rsd_location at, uint64_t n, struct rsd_resident **rp);
uint64_t lfx_ver(void);
/* Does rsd_last_error()'s message contain s? */
bool lfx_msg_has(const char *s);

struct rsd_snapshot *lfx_snap(void);
const struct rsd_materialization_snapshot *lfx_mat_in(const struct rsd_snapshot *s,
						      struct rsd_handle h, struct rsd_location at);
const struct rsd_location_snapshot *lfx_loc_in(const struct rsd_snapshot *s,
					       struct rsd_location at);

/* The protection counts of h's materialization at a location. */
void lfx_check_mat(int line, struct rsd_handle h, struct rsd_location at, uint64_t use,
		   uint64_t hold, uint64_t pend);
#define CHECK_MAT(h, at, use, hold, pend) lfx_check_mat(__LINE__, h, at, use, hold, pend)
/* The location's sums of protection counts over its materializations. */
void lfx_check_loc(int line, struct rsd_location at, uint64_t use, uint64_t hold, uint64_t pend);
#define CHECK_LOC(at, use, hold, pend) lfx_check_loc(__LINE__, at, use, hold, pend)
void lfx_check_ver(int line, uint64_t expected);
#define CHECK_VER(expected) lfx_check_ver(__LINE__, expected)

/* rsd_lease_release(l, RSD_RELEASE_WAIT) while a second thread completes
 * stream (NULL: every stream) 30 ms later; checks that the release blocked
 * until then and returns its result. */
int lfx_release_wait(int line, struct rsd_lease *l, void *stream);
#define RELEASE_WAIT(l, stream) lfx_release_wait(__LINE__, l, stream)

/* Is the plan "drop h at `at`" feasible against the published image? */
bool lfx_drop_feasible(struct rsd_handle h, struct rsd_location at);

/* A lease on [a] at cuda:0 released without waiting while s is busy. */
struct rsd_lease *lfx_pending_lease(struct rsd_handle a, void *s);

#endif
