/* SPDX-License-Identifier: MIT */
/*
 * The residency manager: owns values, places them under per-location byte
 * budgets, and runs the primitive transitions.
 *
 * Writers (every state-changing call) are serialized by the manager's
 * transition lock. Readers (snapshot, explain, state_version) never lock: they
 * read the last image the writer published through RCU.
 */
#ifndef RSD_MANAGER_H
#define RSD_MANAGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rsd/action.h>
#include <rsd/location.h>
#include <rsd/value.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rsd_device_ops;

struct rsd_budget {
	struct rsd_location location;
	uint64_t nbytes; /* 0 is a real budget: only 0-byte charges fit */
};

struct rsd_manager_config {
	const struct rsd_budget *budgets; /* copied; recorded in this order */
	size_t nbudgets;
	/*
	 * The driver for pinned host and CUDA memory. NULL: the CUDA runtime
	 * driver when it sees a device, else the host driver (page-locked host
	 * memory, no CUDA devices).
	 */
	const struct rsd_device_ops *driver;
	void *driver_ctx;
	/* No device driver even where CUDA devices exist: the host driver. */
	bool host_only;
	/* Receives warnings (abandoned lifetimes...); NULL prints to stderr. */
	void (*warn)(void *ctx, const char *message);
	void *warn_ctx;
};

/* cfg NULL is the all-defaults configuration, the same as a zeroed one: no
 * budgets, and the CUDA runtime driver when it sees a device (else the host
 * driver, with no CUDA location available). */
int rsd_manager_create(const struct rsd_manager_config *cfg, struct rsd_manager **out);

#define RSD_CLOSE_NOWAIT 1u /* reap completed leases instead of waiting for pending ones */
#define RSD_CLOSE_FORCE 2u  /* end every lifetime and value (unsafe escape hatch) */
int rsd_manager_close(struct rsd_manager *m, unsigned flags);
/* Frees a manager; one still open is force-closed first. NULL is ignored. */
void rsd_manager_destroy(struct rsd_manager *m);

/* Lock-free; works during a source callback and after close. 0 for NULL. */
uint64_t rsd_manager_id(const struct rsd_manager *m);
/*
 * Lock-free read of the last published version. Returns 0 and sets
 * rsd_last_error() (ECLOSED, ETYPE) on failure; use
 * rsd_manager_state_version_get() to tell 0 from an error.
 */
uint64_t rsd_manager_state_version(struct rsd_manager *m);
int rsd_manager_state_version_get(struct rsd_manager *m, uint64_t *out);
/*
 * Known locations in recording order; returns how many there are (copies
 * at most cap). Works after close. Lock-free.
 */
size_t rsd_manager_locations(struct rsd_manager *m, struct rsd_location *out, size_t cap);
/* Writer call: finalize pending leases whose events completed. */
int rsd_manager_reap(struct rsd_manager *m);

/* at NULL: inferred from the resident's buffers. On success the resident is
 * the manager's; on failure it stays the caller's. */
int rsd_adopt(struct rsd_manager *m, struct rsd_resident *value, const struct rsd_location *at,
	      enum rsd_replica_mode mode, struct rsd_handle *out);
int rsd_register_source(struct rsd_manager *m, const struct rsd_value_spec *spec,
			const struct rsd_source *source, struct rsd_location source_location,
			struct rsd_handle *out);

/* Each transition takes an optional report (NULL: not wanted). */
int rsd_ensure(struct rsd_manager *m, struct rsd_handle h, struct rsd_location at, void *stream,
	       struct rsd_transition *report);
/* An exact alias of rsd_ensure (its report's action is an ensure). */
int rsd_copy(struct rsd_manager *m, struct rsd_handle h, struct rsd_location to, void *stream,
	     struct rsd_transition *report);
int rsd_move(struct rsd_manager *m, struct rsd_handle h, struct rsd_location to,
	     const struct rsd_location *from, void *stream, struct rsd_transition *report);
int rsd_drop(struct rsd_manager *m, struct rsd_handle h, struct rsd_location at,
	     struct rsd_transition *report);
int rsd_discard(struct rsd_manager *m, struct rsd_handle h, struct rsd_transition *report);

#ifdef __cplusplus
}
#endif
#endif
