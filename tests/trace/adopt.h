/* SPDX-License-Identifier: MIT */
/*
 * A helper linked into every tests/trace program (adopt.c): a value of
 * nbytes bytes, each set to fill, adopted at pageable host memory.
 */
#ifndef RSD_TESTS_TRACE_ADOPT_H
#define RSD_TESTS_TRACE_ADOPT_H
#include <stdint.h>

#include <rsd/rsd.h>

struct rsd_handle trace_adopt_bytes(struct rsd_manager *m, const struct rsd_type *type,
				    uint64_t nbytes, int fill, enum rsd_replica_mode mode);
#endif
