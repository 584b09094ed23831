/* SPDX-License-Identifier: MIT */
/*
 * The offline bound (bound.c): the fewest bytes any residency policy
 * could load into one budgeted tier (the device) for a declared schedule.
 * Shared by rsd-demo and rsd-bench.
 */
#ifndef RSD_DEMO_BOUND_H
#define RSD_DEMO_BOUND_H

#include <stdbool.h>
#include <stdint.h>

/*
 * One step: the values it needs in the tier at once (indices into the
 * size array; a value listed twice counts once) and the bytes reserved
 * there beside them while it runs.
 */
struct bound_step {
	const uint32_t *values;
	uint32_t n;
	uint64_t reserve;
};

/*
 * Bytes loaded into a tier of capacity bytes, starting empty, when steps[]
 * run in order (repeated `repeat` times). *exact is true when every size is
 * equal: the figure is then Belady's optimum (evict the value needed
 * farthest ahead); otherwise it is a lower bound, Belady's rule on single
 * bytes (a value may be part resident). Returns 0, or -1 when a step
 * cannot fit at all or memory ran out.
 */
int bound_min_loads(const uint64_t *size, uint32_t nvalues, const struct bound_step *steps,
		    uint32_t nsteps, uint32_t repeat, uint64_t capacity, uint64_t *out,
		    bool *exact);

#endif
