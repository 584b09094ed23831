/* SPDX-License-Identifier: MIT */
/*
 * Comparing what librsd reported with what the model (model.h) expects:
 * transition reports and the state a snapshot shows. Shared by the
 * sequential interpreter (interp.c) and the multi-threaded replay
 * (linearize.c). Each returns true, or false with a description in why.
 */
#ifndef RSD_TEST_COMPARE_H
#define RSD_TEST_COMPARE_H

#include <stdbool.h>
#include <stddef.h>

#include <rsd/rsd.h>

#include "model.h"

/*
 * A concurrent run: peaks may exceed the model's (two transfers admitted at
 * once hold their charges at once, which no sequential order does), but
 * never a budget.
 */
#define MC_CONCURRENT 1u

/* got against exp for action a on the value whose handle is h. */
bool mc_report(const char *what, const struct rsd_transition *got, const struct rsd_transition *exp,
	       const struct mact *a, struct rsd_handle h, char *why, size_t len);

/*
 * The values (h[v] is model value v's handle), locations and reservations
 * of s against md; not the version, loads or invariants (the caller's).
 */
bool mc_state(const struct model *md, const struct rsd_handle *h, const struct rsd_snapshot *s,
	      unsigned flags, char *why, size_t len);

#endif
