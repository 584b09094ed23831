// SPDX-License-Identifier: MIT
/*
 * The offline bound on bytes loaded into one tier (bound.h).
 *
 * Belady's rule: when the tier must make room, evict what is needed
 * farthest ahead (never again first), never a value of the running step.
 * For values of one size it is optimal (Belady 1966; the usual exchange
 * argument holds with a step's set protected and a per-step reservation,
 * because the rule never keeps a value needed later than one it evicts).
 * For mixed sizes optimal caching is NP-hard, so the bound relaxes the
 * problem instead: every byte is its own page, requested whenever its
 * value is. Any real policy is a policy for the relaxed problem that moves
 * the same bytes, and Belady on single bytes is optimal for it, so its
 * figure is a lower bound: it may keep part of a value resident.
 */
#include <stdlib.h>

#include "bound.h"

struct uses {
	uint32_t *at; /* steps of one cycle naming the value, ascending */
	uint32_t n;
};

/* The first step after t (of nsteps * repeat) that needs the value. */
static uint64_t next_use(const struct uses *u, uint64_t t, uint32_t nsteps, uint32_t repeat)
{
	uint64_t cycle = t / nsteps;
	uint32_t idx = (uint32_t)(t % nsteps), lo = 0, hi = u->n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (u->at[mid] <= idx)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < u->n)
		return cycle * nsteps + u->at[lo];
	if (u->n && cycle + 1 < repeat)
		return (cycle + 1) * nsteps + u->at[0];
	return UINT64_MAX;
}

static int index_uses(uint32_t nvalues, const struct bound_step *steps, uint32_t nsteps,
		      struct uses *u)
{
	for (uint32_t i = 0; i < nsteps; i++)
		for (uint32_t k = 0; k < steps[i].n; k++) {
			struct uses *x = &u[steps[i].values[k]];
			uint32_t *at;

			if (steps[i].values[k] >= nvalues)
				return -1;
			if (x->n && x->at[x->n - 1] == i)
				continue; /* listed twice in one step */
			at = realloc(x->at, (x->n + 1) * sizeof(*at));
			if (!at)
				return -1;
			x->at = at;
			x->at[x->n++] = i;
		}
	return 0;
}

int bound_min_loads(const uint64_t *size, uint32_t nvalues, const struct bound_step *steps,
		    uint32_t nsteps, uint32_t repeat, uint64_t capacity, uint64_t *out, bool *exact)
{
	struct uses *u = calloc(nvalues ? nvalues : 1, sizeof(*u));
	uint64_t *res = calloc(nvalues ? nvalues : 1, sizeof(*res));
	uint64_t *stamp = calloc(nvalues ? nvalues : 1, sizeof(*stamp));
	uint64_t used = 0, loads = 0;
	bool equal = true;
	int rc = -1;

	if (!u || !res || !stamp || !nsteps || index_uses(nvalues, steps, nsteps, u))
		goto out;
	for (uint32_t v = 1; v < nvalues; v++)
		equal &= size[v] == size[0];
	for (uint64_t t = 0; t < (uint64_t)nsteps * repeat; t++) {
		const struct bound_step *s = &steps[t % nsteps];
		uint64_t need = 0, limit;

		for (uint32_t k = 0; k < s->n; k++) {
			uint32_t v = s->values[k];

			if (stamp[v] == t + 1)
				continue;
			stamp[v] = t + 1;
			need += size[v];
			loads += size[v] - res[v];
			used += size[v] - res[v];
			res[v] = size[v];
		}
		if (s->reserve > capacity || need > capacity - s->reserve)
			goto out; /* the step does not fit in the tier at all */
		limit = capacity - s->reserve;
		while (used > limit) {
			uint64_t far = 0, nu;
			uint32_t victim = UINT32_MAX;

			for (uint32_t v = 0; v < nvalues; v++) {
				if (!res[v] || stamp[v] == t + 1)
					continue;
				nu = next_use(&u[v], t, nsteps, repeat);
				if (victim == UINT32_MAX || nu > far) {
					victim = v;
					far = nu;
				}
			}
			/* the step fits, so something outside it is resident */
			if (victim == UINT32_MAX)
				goto out;
			nu = equal || res[victim] < used - limit ? res[victim] : used - limit;
			res[victim] -= nu;
			used -= nu;
		}
	}
	*out = loads;
	*exact = equal;
	rc = 0;
out:
	for (uint32_t v = 0; u && v < nvalues; v++)
		free(u[v].at);
	free(u);
	free(res);
	free(stamp);
	return rc;
}
