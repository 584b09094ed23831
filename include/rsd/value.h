/* SPDX-License-Identifier: MIT */
/**
 * DOC: rsd_value - Values: types, residents, specs, handles and reconstruction sources
 *
 * A value is a set of byte buffers with a type and an opaque metadata blob.
 * One copy of a value at one location is a resident (struct rsd_resident,
 * opaque): its buffers are views into backing allocations, and its metadata
 * travels verbatim when the value is copied or moved. A manager owns the
 * values handed to it (rsd_adopt(), rsd_register_source()) and names each by
 * a struct rsd_handle. A value's struct rsd_value_spec fixes its type, its
 * logical size (what every copy must hold), its storage size (what one copy
 * is charged against a budget), whether copies may coexist and whether it
 * can be rebuilt from a source. See Documentation/reference.md §2 and §3.
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

/**
 * struct rsd_type - A value type, identified by its address.
 * @name: a name for messages.
 * @parent: the type it derives from (single inheritance); every type
 *	derives, directly or not, from rsd_resident_type.
 */
struct rsd_type {
	const char *name;
	const struct rsd_type *parent;
};

/**
 * rsd_resident_type - The abstract root of every value type.
 */
extern const struct rsd_type rsd_resident_type;

/**
 * rsd_type_is_a() - Whether a type equals another or derives from it.
 * @t: the type to test.
 * @base: the type it may derive from.
 *
 * Context: Any thread; callable from a source callback.
 * Return: true when @t is @base or one of @t's ancestors is; false when
 * either is NULL.
 */
bool rsd_type_is_a(const struct rsd_type *t, const struct rsd_type *base);

struct rsd_manager;
struct rsd_resident;

/**
 * DOC: rsd_resident - Residents: one value's buffers at one location
 *
 * A resident is allocated through a manager's driver (rsd_resident_alloc())
 * or wraps caller memory (rsd_resident_wrap()); the accessors read its
 * buffers, metadata and sizes. Until a manager adopts it, the caller frees
 * it with rsd_resident_free(). See Documentation/reference.md §2.
 */
/**
 * rsd_resident_alloc() - Allocate a resident at a location.
 * @m: the manager whose device driver serves pinned and CUDA memory.
 * @type: the value type; must derive from rsd_resident_type.
 * @at: where the buffers live.
 * @nbuf: the number of buffers, at least 1.
 * @nbytes: the size of each buffer (@nbuf entries).
 * @meta: the metadata blob, copied; may be NULL when @meta_len is 0.
 * @meta_len: its size in bytes.
 * @out: receives the resident on success; the caller owns it until a
 *	manager adopts it.
 *
 * Pinned and CUDA buffers come from the driver's pools. The buffers share
 * one backing allocation, so the resident's storage bytes equal its logical
 * bytes. Only the manager's device driver is used, never its state, so a
 * source's load callback may call this. Nothing is charged to a budget: a
 * charge happens when the manager installs the value.
 *
 * Context: Any thread, without the transition lock; callable from a source
 * callback.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @m, @out or a needed array is NULL; @type is NULL or does
 *   not derive from rsd_resident_type; @at's kind is not one of the three.
 * * -RSD_EINVAL - @nbuf is 0; the sizes overflow; @at is a CUDA location
 *   outside 0..127 or one the driver does not see.
 * * -RSD_ENOMEM - host memory for the header or pageable buffers ran out.
 * * -RSD_EDEVICE - the driver failed to allocate pinned or device memory.
 */
int rsd_resident_alloc(struct rsd_manager *m, const struct rsd_type *type, struct rsd_location at,
		       size_t nbuf, const uint64_t *nbytes, const void *meta, size_t meta_len,
		       struct rsd_resident **out);

/**
 * struct rsd_buffer_view - One buffer of a wrapped value.
 * @data: the first byte of the buffer.
 * @nbytes: the buffer's size.
 * @base: the start of the backing allocation that holds it.
 * @base_nbytes: the size of that allocation.
 * @location: where the allocation lives.
 *
 * The buffer [@data, @data + @nbytes) lies inside [@base, @base +
 * @base_nbytes). Two buffers naming one base share its storage.
 */
struct rsd_buffer_view {
	void *data;
	uint64_t nbytes;
	void *base;
	uint64_t base_nbytes;
	struct rsd_location location;
};

/**
 * rsd_resident_wrap() - Wrap caller memory as a resident.
 * @type: the value type; must derive from rsd_resident_type.
 * @nbuf: the number of buffers, at least 1.
 * @bufs: the buffer views (@nbuf entries), copied.
 * @meta: the metadata blob, copied; may be NULL when @meta_len is 0.
 * @meta_len: its size in bytes.
 * @release: called once with @ctx when the resident is freed; may be NULL.
 * @ctx: passed to @release.
 * @out: receives the resident on success.
 *
 * The resident's location is its buffers' common location; buffers at
 * different locations are accepted here and refused where a location is
 * needed (rsd_adopt()).
 *
 * Context: Any thread; callable from a source callback.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @out is NULL, @bufs or @meta is NULL while needed, or
 *   @type does not derive from rsd_resident_type.
 * * -RSD_EINVAL - @nbuf is 0; a buffer's location is invalid; a non-empty
 *   buffer has no data or base, or lies outside its backing allocation; a
 *   buffer's view or backing allocation runs past the end of the address
 *   space (its address plus its size wraps).
 * * -RSD_ENOMEM - the resident header could not be allocated.
 */
int rsd_resident_wrap(const struct rsd_type *type, size_t nbuf, const struct rsd_buffer_view *bufs,
		      const void *meta, size_t meta_len,
		      void (*release)(void *ctx, struct rsd_resident *r), void *ctx,
		      struct rsd_resident **out);

/**
 * rsd_resident_nbuffers() - A resident's number of buffers.
 * @r: the resident.
 *
 * Context: Any thread; callable from a source callback.
 * Return: the buffer count; 0 for NULL.
 */
size_t rsd_resident_nbuffers(const struct rsd_resident *r);

/**
 * rsd_resident_data() - The first byte of one buffer.
 * @r: the resident.
 * @i: the buffer index.
 *
 * Context: Any thread; callable from a source callback.
 * Return: the buffer's data pointer; NULL for NULL @r or @i out of range.
 */
void *rsd_resident_data(const struct rsd_resident *r, size_t i);

/**
 * rsd_resident_buffer_nbytes() - The size of one buffer.
 * @r: the resident.
 * @i: the buffer index.
 *
 * Context: Any thread; callable from a source callback.
 * Return: the size in bytes; 0 for NULL @r or @i out of range.
 */
uint64_t rsd_resident_buffer_nbytes(const struct rsd_resident *r, size_t i);

/**
 * rsd_resident_meta() - A resident's metadata blob.
 * @r: the resident.
 * @len: receives the blob's size when not NULL (0 for NULL @r).
 *
 * Context: Any thread; callable from a source callback.
 * Return: the blob, owned by the resident; NULL for NULL @r or no blob.
 */
const void *rsd_resident_meta(const struct rsd_resident *r, size_t *len);

/**
 * rsd_resident_nbytes() - A resident's logical size.
 * @r: the resident.
 *
 * Buffers that share storage each count in full.
 *
 * Context: Any thread; callable from a source callback.
 * Return: the sum of the buffers' sizes; 0 for NULL.
 */
uint64_t rsd_resident_nbytes(const struct rsd_resident *r);

/**
 * rsd_resident_storage_nbytes() - A resident's storage size.
 * @r: the resident.
 *
 * Context: Any thread; callable from a source callback.
 * Return: the sum of the distinct non-empty backing allocations; 0 for
 * NULL; UINT64_MAX when two buffers name one allocation with different
 * sizes.
 */
uint64_t rsd_resident_storage_nbytes(const struct rsd_resident *r);

/**
 * rsd_resident_location() - Where a resident's buffers live.
 * @r: the resident.
 *
 * Context: Any thread; callable from a source callback.
 * Return: the buffers' common location; a record of kind
 * RSD_PAGEABLE_HOST with device -2 (not a valid location) when the buffers
 * disagree, when there are none, or for NULL.
 */
struct rsd_location rsd_resident_location(const struct rsd_resident *r);

/**
 * rsd_resident_type_of() - A resident's type.
 * @r: the resident.
 *
 * Context: Any thread; callable from a source callback.
 * Return: the type; NULL for NULL.
 */
const struct rsd_type *rsd_resident_type_of(const struct rsd_resident *r);

/**
 * rsd_resident_free() - Free a resident that no manager owns.
 * @r: the resident; NULL is ignored.
 *
 * Calls the wrap release callback, or returns allocated memory to its
 * allocator. A resident a manager adopted or loaded is the manager's: it is
 * left alone and the refusal is recorded as RSD_EOWNERSHIP in
 * rsd_last_error().
 *
 * Context: Any thread.
 */
void rsd_resident_free(struct rsd_resident *r);

/**
 * DOC: rsd_value - Value specs, handles and sources
 */

/**
 * enum rsd_replica_mode - Whether a value may have several materializations.
 * @RSD_EXCLUSIVE: at most one materialization; ensure elsewhere is refused,
 *	move is the way to relocate it.
 * @RSD_REPLICABLE: copies may coexist at several locations.
 * @RSD_DURABLE: not a mode but a flag, OR'd into RSD_REPLICABLE when a value
 *	is adopted (rsd_adopt(), rsd_adopt_reserved(), rsd_scope_adopt(),
 *	rsd_use_adopt()): the value must outlive the loss of a device. Whenever
 *	its only copies are on devices, the manager writes one back to host
 *	memory (pinned host, else pageable host, each admitted under its
 *	budget) at the end of the call that left it so: after a move or drop
 *	of its last host copy, after an adopt on a device, and, for an output
 *	a producer stream still writes, at the end of the call whose reap sees
 *	the producer finish. The host copy is an ordinary materialization
 *	(charged, shown in snapshots; the value's snapshot shows durable).
 *	When no host tier admits it, the call still succeeds and a warning
 *	says the value has no host copy; the next call that changes the value
 *	tries again. Writes a kernel makes through a lease are not seen: only
 *	what the manager copies or adopts. Refused (RSD_ETYPE) with
 *	RSD_EXCLUSIVE and in a value spec (a source rebuilds those values).
 */
enum rsd_replica_mode {
	RSD_EXCLUSIVE,
	RSD_REPLICABLE,
	RSD_DURABLE = 0x100
};

/**
 * enum rsd_recoverability - Whether a value can be rebuilt.
 * @RSD_MUST_PRESERVE: the last materialization may not be dropped.
 * @RSD_RECONSTRUCTIBLE: a source can load the value again; only these may
 *	be registered with a source.
 */
enum rsd_recoverability {
	RSD_MUST_PRESERVE,
	RSD_RECONSTRUCTIBLE
};

/**
 * struct rsd_value_spec - What a managed value is.
 * @type: the value type; every materialization's type derives from it.
 * @logical_nbytes: the payload size every materialization must hold exactly.
 * @storage_nbytes: the charge of one materialization against its
 *	location's budget, at least @logical_nbytes.
 * @replica_mode: exclusive or replicable.
 * @recoverability: must-preserve or reconstructible.
 */
struct rsd_value_spec {
	const struct rsd_type *type;
	uint64_t logical_nbytes;
	uint64_t storage_nbytes;
	enum rsd_replica_mode replica_mode;
	enum rsd_recoverability recoverability;
};

/**
 * struct rsd_handle - The name of one managed value.
 * @manager_id: the manager that issued it; never 0.
 * @id: the value's id; never 0, never reused in a process.
 * @type: the value's type.
 *
 * A handle whose @manager_id or @id is 0 is malformed (-RSD_EINVAL), one
 * whose @type is NULL or not derived from rsd_resident_type is too
 * (-RSD_ETYPE); both are refused before any handle is resolved. A
 * well-formed handle of another manager, of an unknown id or of a
 * discarded value is -RSD_EHANDLE.
 */
struct rsd_handle {
	uint64_t manager_id;
	uint64_t id;
	const struct rsd_type *type;
};

/**
 * rsd_handle_equal() - Whether two handles are the same.
 * @a: a handle.
 * @b: another.
 *
 * Context: Any thread; callable from a source callback.
 * Return: true when manager id, id and type are all equal.
 */
bool rsd_handle_equal(struct rsd_handle a, struct rsd_handle b);

/**
 * struct rsd_source - A reconstruction source.
 * @load: builds a fresh resident of the value; runs on the writer path
 *	with the callback guard raised, so it must not call the manager
 *	(rsd_resident_alloc() is allowed). It returns 0 and a resident, a
 *	negative RSD_E* code (returned unchanged to the caller), or any other
 *	nonzero value (-RSD_ESOURCE, the value kept as rsd_error.cause).
 * @release: called once when the value is discarded or the manager closes;
 *	may be NULL.
 * @ctx: passed to both callbacks.
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
