/* SPDX-License-Identifier: MIT */
/*
 * Locations: pageable host RAM, pinned host RAM and indexed CUDA devices.
 * Records passed by value; canonical order pageable < pinned < cuda:0 < ...
 */
#ifndef RSD_LOCATION_H
#define RSD_LOCATION_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum rsd_location_kind { RSD_PAGEABLE_HOST, RSD_PINNED_HOST, RSD_CUDA };

/*
 * device is -1 for host kinds, 0..127 for RSD_CUDA. Every entry point that
 * takes a location refuses a record of another kind, or a host record with
 * a device, with -RSD_ETYPE (not a location), and a CUDA record whose
 * device is outside 0..127 (-1 included) with -RSD_EINVAL.
 */
struct rsd_location {
	enum rsd_location_kind kind;
	int device;
};

#define RSD_CUDA_MAX_DEVICE 127
/* Longest canonical name ("pageable-host") plus NUL. */
#define RSD_LOCATION_NAME_MAX 16

extern const struct rsd_location RSD_LOC_PAGEABLE_HOST;
extern const struct rsd_location RSD_LOC_PINNED_HOST;

/* -RSD_EINVAL when device is outside 0..127; -RSD_ETYPE for NULL out. */
int rsd_cuda_location(int device, struct rsd_location *out);
/*
 * "pageable-host", "pinned-host" (optionally ":cpu" / "cpu:N" device spellings
 * are not accepted textually), or "cuda:N" with N canonical decimal 0..127.
 * Bare "cuda", "cuda:01", "cuda:-1" and "cuda:128" are -RSD_EINVAL.
 */
int rsd_location_parse(const char *text, struct rsd_location *out);
/* Host kinds with any device collapse to device -1; -RSD_EINVAL otherwise bad. */
int rsd_location_make(enum rsd_location_kind kind, int device, struct rsd_location *out);
/* Writes the canonical name into buf (at most len bytes) and returns buf;
 * "<invalid>" for a record that is not statically valid. */
const char *rsd_location_name(struct rsd_location loc, char *buf, size_t len);
bool rsd_location_equal(struct rsd_location a, struct rsd_location b);
/* Canonical order: <0, 0, >0 like strcmp. */
int rsd_location_cmp(struct rsd_location a, struct rsd_location b);
/* Statically valid: a known kind, host device -1, cuda device 0..127. */
bool rsd_location_valid(struct rsd_location loc);

#ifdef __cplusplus
}
#endif
#endif
