/* SPDX-License-Identifier: MIT */
/*
 * Values: types, residents (one value at one location), specs, handles and
 * reconstruction sources.
 */
#ifndef RSD_VALUE_H
#define RSD_VALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rsd/location.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A value type, identified by address; single inheritance through parent. */
struct rsd_type {
	const char *name;
	const struct rsd_type *parent;
};
/* The abstract root of every value type. */
extern const struct rsd_type rsd_resident_type;
/* t equals base or derives from it. False when either is NULL. */
bool rsd_type_is_a(const struct rsd_type *t, const struct rsd_type *base);

struct rsd_manager;
struct rsd_resident;

/*
 * Allocate a resident of nbuf buffers at a location through that location's
 * allocator (pooled for pinned and CUDA memory). Only m's device driver is
 * used, never its state: a source's load callback may call it. The buffers
 * share one backing allocation, so storage bytes equal logical bytes.
 * meta (meta_len bytes, may be 0) is copied and travels with the value.
 */
int rsd_resident_alloc(struct rsd_manager *m, const struct rsd_type *type, struct rsd_location at,
		       size_t nbuf, const uint64_t *nbytes, const void *meta, size_t meta_len,
		       struct rsd_resident **out);

/*
 * One buffer of a wrapped value: nbytes at data, inside the backing
 * allocation [base, base + base_nbytes) that lives at location.
 */
struct rsd_buffer_view {
	void *data;
	uint64_t nbytes;
	void *base;
	uint64_t base_nbytes;
	struct rsd_location location;
};

/*
 * Wrap caller memory. The resident's location is the buffers' common one;
 * mixed locations are allowed here and rejected where a location is needed.
 * release (may be NULL) is called once when the resident is freed.
 */
int rsd_resident_wrap(const struct rsd_type *type, size_t nbuf, const struct rsd_buffer_view *bufs,
		      const void *meta, size_t meta_len,
		      void (*release)(void *ctx, struct rsd_resident *r), void *ctx,
		      struct rsd_resident **out);

size_t rsd_resident_nbuffers(const struct rsd_resident *r);
void *rsd_resident_data(const struct rsd_resident *r, size_t i);
uint64_t rsd_resident_buffer_nbytes(const struct rsd_resident *r, size_t i);
const void *rsd_resident_meta(const struct rsd_resident *r, size_t *len);
/* Sum of buffer payload bytes (shared buffers each count fully). */
uint64_t rsd_resident_nbytes(const struct rsd_resident *r);
/* Sum of distinct non-empty backing allocations; UINT64_MAX when two buffers
 * name one allocation with different sizes. */
uint64_t rsd_resident_storage_nbytes(const struct rsd_resident *r);
/* The common location; kind RSD_PAGEABLE_HOST with device -2 when mixed. */
struct rsd_location rsd_resident_location(const struct rsd_resident *r);
const struct rsd_type *rsd_resident_type_of(const struct rsd_resident *r);
/* Free a resident the manager does not own (never one it adopted). */
void rsd_resident_free(struct rsd_resident *r);

enum rsd_replica_mode { RSD_EXCLUSIVE, RSD_REPLICABLE };
enum rsd_recoverability { RSD_MUST_PRESERVE, RSD_RECONSTRUCTIBLE };

struct rsd_value_spec {
	const struct rsd_type *type;
	uint64_t logical_nbytes; /* every materialization must match exactly */
	uint64_t storage_nbytes; /* the charge of one materialization, >= logical */
	enum rsd_replica_mode replica_mode;
	enum rsd_recoverability recoverability;
};

/*
 * Issued by one manager; ids are never 0 and never reused in a process. A
 * handle with manager_id or id 0 is malformed (-RSD_EINVAL), and so is one
 * whose type is NULL or does not derive from rsd_resident_type
 * (-RSD_ETYPE): every entry point refuses it, directly or inside actions,
 * requirements and handle arrays, before it resolves any handle.
 */
struct rsd_handle {
	uint64_t manager_id;
	uint64_t id;
	const struct rsd_type *type;
};
bool rsd_handle_equal(struct rsd_handle a, struct rsd_handle b);

/*
 * A reconstruction source. load runs on the writer path with the callback
 * guard raised: it must not call the manager (rsd_resident_alloc is fine).
 * It returns 0 and a fresh resident, a negative RSD_E* code (returned
 * unchanged), or any other nonzero value (-RSD_ESOURCE, value kept as cause).
 * release (may be NULL) is called once when the value is discarded or the
 * manager closes.
 */
struct rsd_source {
	int (*load)(void *ctx, struct rsd_resident **out);
	void (*release)(void *ctx);
	void *ctx;
};

#ifdef __cplusplus
}
#endif
#endif
