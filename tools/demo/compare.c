// SPDX-License-Identifier: MIT
/*
 * rsd-demo's policies side by side: the workload's schedule (which values
 * each stage needs), the offline bound on what any policy must bring to
 * the device for it, and the comparison table.
 */
#include <stdlib.h>

#include "bound.h"
#include "demo.h"

const char *const demo_policy_name[NPOLICIES] = {
	[DP_LRU] = "deterministic-tiered-lru",
	[DP_NEXT_USE] = "deterministic-next-use",
};

/* Two ciphertexts (a stride-5 sweep, the second 3 further on), a key and a
 * weight block per stage. */
void demo_stage_values(const struct demo_opts *o, unsigned s, uint32_t idx[DEMO_NSTAGE_VALUES])
{
	unsigned a, b;

	if (!o->ciphertexts || !o->keys || !o->weights)
		return; /* parse refuses such options */
	a = (s * 5) % o->ciphertexts;
	b = (s * 5 + 3) % o->ciphertexts;
	idx[0] = a;
	idx[1] = b == a ? (b + 1) % o->ciphertexts : b;
	idx[2] = o->ciphertexts + s % o->keys;
	idx[3] = o->ciphertexts + o->keys + (s * 7) % o->weights;
}

/*
 * The stages whose two ciphertexts fill the device and pinned budgets
 * together: a ciphertext needed within them is worth keeping on pinned
 * host; one needed later would only push a sooner one out of it.
 */
uint64_t demo_default_near(const struct demo_opts *o)
{
	return (o->device_budget + o->pinned_budget) / (2 * o->ct_bytes);
}

int demo_bound(const struct demo_opts *o, uint64_t *h2d, bool *exact)
{
	uint32_t nv = o->ciphertexts + o->keys + o->weights;
	uint64_t *size = calloc(nv, sizeof(*size));
	uint32_t *idx = calloc((size_t)o->stages * DEMO_NSTAGE_VALUES + 1, sizeof(*idx));
	struct bound_step *steps = calloc(o->stages + 1, sizeof(*steps));
	int rc = -1;

	if (size && idx && steps) {
		for (uint32_t v = 0; v < nv; v++)
			size[v] = v < o->ciphertexts	       ? o->ct_bytes :
				  v < o->ciphertexts + o->keys ? o->key_bytes :
								 o->weight_bytes;
		for (unsigned s = 0; s < o->stages; s++) {
			demo_stage_values(o, s, idx + (size_t)s * DEMO_NSTAGE_VALUES);
			steps[s] = (struct bound_step){ idx + (size_t)s * DEMO_NSTAGE_VALUES,
							DEMO_NSTAGE_VALUES, o->workspace };
		}
		rc = bound_min_loads(size, nv, steps, o->stages, 1, o->device_budget, h2d, exact);
	}
	free(size);
	free(idx);
	free(steps);
	return rc;
}

static uint64_t to_device(const struct demo_result *r)
{
	return r->moved[T_PAGEABLE][T_DEVICE] + r->moved[T_PINNED][T_DEVICE];
}

void demo_print_compare(FILE *out, const struct demo_opts *o, const struct demo_result *r)
{
	static const int pairs[][2] = {
		{ T_PAGEABLE, T_DEVICE }, { T_PINNED, T_DEVICE },   { T_DEVICE, T_PINNED },
		{ T_DEVICE, T_PAGEABLE }, { T_PINNED, T_PAGEABLE }, { T_PAGEABLE, T_PINNED },
	};
	const struct demo_result *lru = &r[DP_LRU], *nu = &r[DP_NEXT_USE];
	uint64_t bound = 0;
	bool exact = false, have = !demo_bound(o, &bound, &exact);

	fprintf(out, "=== side by side: MiB moved by the %u stages ===\n", o->stages);
	fprintf(out, "%-22s %26s %26s\n", "", demo_policy_name[DP_LRU],
		demo_policy_name[DP_NEXT_USE]);
	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
		char label[32];

		snprintf(label, sizeof(label), "%s -> %s", demo_tier_name[pairs[i][0]],
			 demo_tier_name[pairs[i][1]]);
		fprintf(out, "%-22s %26.1f %26.1f\n", label,
			demo_mib(lru->moved[pairs[i][0]][pairs[i][1]]),
			demo_mib(nu->moved[pairs[i][0]][pairs[i][1]]));
	}
	fprintf(out, "%-22s %26.1f %26.1f\n", "host -> device", demo_mib(to_device(lru)),
		demo_mib(to_device(nu)));
	fprintf(out, "%-22s %26u %26u\n", "evictions", lru->evictions, nu->evictions);
	fprintf(out, "%-22s %26u %26u\n", "  spills", lru->spills, nu->spills);
	fprintf(out, "%-22s %26llu %26llu\n", "explored states", (unsigned long long)lru->explored,
		(unsigned long long)nu->explored);
	if (!have) {
		fprintf(out, "offline bound: not computable (a stage does not fit the device)\n");
		return;
	}
	fprintf(out, "%-22s %26.1f %26s\n", "offline bound", demo_mib(bound),
		exact ? "(Belady, exact)" : "(Belady on bytes, lower)");
	if (to_device(lru) && bound)
		fprintf(out,
			"host -> device: next-use moves %.1f%% less than the tiered LRU; "
			"%.2fx the bound (the tiered LRU %.2fx)\n",
			100.0 * (1.0 - (double)to_device(nu) / (double)to_device(lru)),
			(double)to_device(nu) / (double)bound,
			(double)to_device(lru) / (double)bound);
}

void demo_print_prefetch(FILE *out, const struct demo_opts *o, const struct demo_result *wait,
			 const struct demo_result *pre)
{
	fprintf(out, "=== waiting or prefetching: elapsed time of the %u stages ===\n", o->stages);
	fprintf(out, "%-26s %14s %14s %8s\n", "policy", "waiting", "prefetching", "saved");
	for (int p = 0; p < NPOLICIES; p++) {
		double w = (double)wait[p].stages_ns / 1e9, f = (double)pre[p].stages_ns / 1e9;

		if (!wait[p].ran || !pre[p].ran)
			continue;
		fprintf(out, "%-26s %12.3f s %12.3f s %7.1f%%\n", demo_policy_name[p], w, f,
			w > 0 ? 100.0 * (1.0 - f / w) : 0.0);
	}
}
