/* SPDX-License-Identifier: MIT */
/*
 * librsd error model: every call returns 0 or a negative RSD_E* code, and
 * records the facts of its last failure in a thread-local struct rsd_error.
 */
#ifndef RSD_ERROR_H
#define RSD_ERROR_H

#include <stdbool.h>
#include <stdint.h>

#include <rsd/location.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Positive values; functions return them negated (return -RSD_EBUDGET). */
enum rsd_err {
	RSD_EINVAL = 1,   /* ArgumentValueError */
	RSD_ETYPE,        /* ArgumentTypeError: NULL object, bad record kind, missing callback */
	RSD_EUSAGE,       /* misuse of a single-use object, internal inconsistency */
	RSD_ENOTFOUND,    /* lookup of a key the mapping does not contain */
	RSD_EBUDGET,      /* admission rejected by a location budget */
	RSD_EHANDLE,      /* malformed, foreign, unknown or discarded handle */
	RSD_EUNAVAILABLE, /* nothing to read from, or not resident where required */
	RSD_EINUSE,       /* removal of a protected materialization; close with lifetimes */
	RSD_ELIFETIME,    /* use of a released lease, hold or reservation */
	RSD_EMATERIAL,    /* a value does not conform to its spec or location */
	RSD_EOWNERSHIP,   /* replica, last-copy or storage-alias rule */
	RSD_EPLAN,        /* preflight infeasible: nothing was executed */
	RSD_ESTALE,       /* expected state_version differs (a plan error) */
	RSD_ESEARCHLIMIT, /* controller search inconclusive (a plan error) */
	RSD_EEXEC,        /* failure after preflight: a prefix may be committed */
	RSD_ECLOSED,      /* the manager is closed */
	RSD_EREENTRANT,   /* access during a source callback, or same-thread re-entry */
	RSD_ENOMEM,       /* bookkeeping or materialization allocation failed */
	RSD_EDEVICE,      /* a device driver call failed */
	RSD_ESOURCE,      /* a source load failed with a non-RSD code (kept in cause) */
	RSD_EMAX
};

/* Accepts err or -err; unknown codes give "unknown error". */
const char *rsd_strerror(int err);
/* True for EPLAN, ESTALE and ESEARCHLIMIT (sign ignored). */
bool rsd_err_is_plan_error(int err);

enum rsd_plan_phase {
	RSD_PHASE_NONE,
	RSD_PHASE_EXECUTE,
	RSD_PHASE_RECLAIM,
	RSD_PHASE_RESERVE,
	RSD_PHASE_ENTER,
	RSD_PHASE_EXIT,
};
const char *rsd_phase_name(enum rsd_plan_phase phase);

/*
 * The last failure on the calling thread. Fields that do not apply are
 * absent: has_* false, indices -1, cause 0, phase RSD_PHASE_NONE.
 */
struct rsd_error {
	int code; /* positive RSD_E* code, 0 when no failure was recorded */
	char message[512];
	bool has_location;
	struct rsd_location location;
	bool has_budget; /* budget rejection: the numbers at check time */
	uint64_t budget_bytes, used_bytes, reserved_bytes, requested_bytes;
	bool has_versions; /* stale state */
	uint64_t expected_version, actual_version;
	bool has_search; /* search limit */
	uint64_t state_limit, explored_states;
	enum rsd_plan_phase phase; /* plan execution */
	long failed_action_index;      /* -1 when absent */
	long failed_reservation_index; /* -1 when absent */
	int cause;                     /* negative code of the original error, 0 when absent */
	char plan_name[128];           /* plan execution / search limit: the plan or request name */
};

/* Never NULL; valid until the next librsd call on this thread. */
const struct rsd_error *rsd_last_error(void);

#ifdef __cplusplus
}
#endif
#endif
