/* SPDX-License-Identifier: MIT */
/**
 * DOC: rsd_location - Locations: pageable host RAM, pinned host RAM and CUDA devices
 *
 * A location is a small record passed by value: a kind and a device index
 * (-1 for the two host kinds, 0..127 for RSD_CUDA). Its canonical names are
 * "pageable-host", "pinned-host" and "cuda:N", and its canonical order,
 * used for every deterministic choice, is pageable < pinned < cuda:0 <
 * cuda:1 < ... A record is statically valid when its kind is one of the three
 * and its device index fits that kind; a manager additionally checks that a
 * CUDA location names a device its driver sees. Every entry point that takes
 * a location answers a kind that is not one of the three with -RSD_ETYPE and
 * a CUDA device index outside 0..127 (-1 included) with -RSD_EINVAL.
 * See Documentation/reference.md §1.
 */
#ifndef RSD_LOCATION_H
#define RSD_LOCATION_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * enum rsd_location_kind - The three memory tiers.
 * @RSD_PAGEABLE_HOST: ordinary (pageable) host memory.
 * @RSD_PINNED_HOST: page-locked host memory, served by the device driver.
 * @RSD_CUDA: memory of one CUDA device, served by the device driver.
 */
enum rsd_location_kind {
	RSD_PAGEABLE_HOST,
	RSD_PINNED_HOST,
	RSD_CUDA
};

/**
 * struct rsd_location - One memory location.
 * @kind: the tier.
 * @device: -1 for the host kinds, the device index 0..127 for RSD_CUDA.
 *
 * Every entry point that takes a location refuses a record of another kind,
 * or a host record with a device, with -RSD_ETYPE (not a location), and a
 * CUDA record whose device is outside 0..127 (-1 included) with -RSD_EINVAL.
 */
struct rsd_location {
	enum rsd_location_kind kind;
	int device;
};

/**
 * RSD_CUDA_MAX_DEVICE - The largest CUDA device index a location may name (127).
 */
#define RSD_CUDA_MAX_DEVICE 127
/**
 * RSD_LOCATION_NAME_MAX - Buffer size that holds any canonical location name.
 *
 * The longest name ("pageable-host") plus its NUL.
 */
#define RSD_LOCATION_NAME_MAX 16

/**
 * RSD_LOC_PAGEABLE_HOST - The pageable host location ({RSD_PAGEABLE_HOST, -1}).
 */
extern const struct rsd_location RSD_LOC_PAGEABLE_HOST;
/**
 * RSD_LOC_PINNED_HOST - The pinned host location ({RSD_PINNED_HOST, -1}).
 */
extern const struct rsd_location RSD_LOC_PINNED_HOST;

/**
 * rsd_cuda_location() - Build the location of CUDA device @device.
 * @device: the device index, 0..127.
 * @out: receives the location on success.
 *
 * Whether the device exists is a manager's question, not this one's.
 *
 * Context: Any thread; callable from a source callback.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @out is NULL.
 * * -RSD_EINVAL - @device is outside 0..127.
 */
int rsd_cuda_location(int device, struct rsd_location *out);

/**
 * rsd_location_parse() - Parse a canonical location name.
 * @text: "pageable-host", "pinned-host" or "cuda:N" with N a canonical
 *	decimal 0..127 (no sign, no leading zero).
 * @out: receives the location on success.
 *
 * Bare "cuda", "cuda:01", "cuda:-1" and "cuda:128" are refused.
 *
 * Context: Any thread; callable from a source callback.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @text or @out is NULL.
 * * -RSD_EINVAL - @text is not a canonical location name.
 */
int rsd_location_parse(const char *text, struct rsd_location *out);

/**
 * rsd_location_make() - Build a location from a kind and a device index.
 * @kind: the tier.
 * @device: the CUDA device index; ignored for the host kinds, which always
 *	get device -1.
 * @out: receives the location on success.
 *
 * Context: Any thread; callable from a source callback.
 * Return: 0 on success, or
 * * -RSD_ETYPE - @out is NULL.
 * * -RSD_EINVAL - @kind is not one of the three, or @kind is RSD_CUDA and
 *   @device is outside 0..127.
 */
int rsd_location_make(enum rsd_location_kind kind, int device, struct rsd_location *out);

/**
 * rsd_location_name() - Write a location's canonical name.
 * @loc: the location.
 * @buf: the buffer; RSD_LOCATION_NAME_MAX bytes hold any name.
 * @len: the size of @buf; the name is truncated to fit.
 *
 * Context: Any thread; callable from a source callback.
 * Return: @buf, holding the name or "<invalid>" for a record that is not
 * statically valid; "" when @buf is NULL or @len is 0.
 */
const char *rsd_location_name(struct rsd_location loc, char *buf, size_t len);

/**
 * rsd_location_equal() - Whether two location records are the same.
 * @a: a location.
 * @b: another.
 *
 * Context: Any thread; callable from a source callback.
 * Return: true when kind and device are equal.
 */
bool rsd_location_equal(struct rsd_location a, struct rsd_location b);

/**
 * rsd_location_cmp() - Compare two locations in canonical order.
 * @a: a location.
 * @b: another.
 *
 * Canonical order is pageable-host < pinned-host < cuda:0 < cuda:1 < ...
 *
 * Context: Any thread; callable from a source callback.
 * Return: a negative number, 0 or a positive number as @a sorts before,
 * with or after @b, like strcmp().
 */
int rsd_location_cmp(struct rsd_location a, struct rsd_location b);

/**
 * rsd_location_valid() - Whether a record is a statically valid location.
 * @loc: the record.
 *
 * Context: Any thread; callable from a source callback.
 * Return: true for a known kind with device -1 (host) or 0..127 (CUDA).
 */
bool rsd_location_valid(struct rsd_location loc);

#ifdef __cplusplus
}
#endif
#endif
