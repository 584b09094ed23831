// SPDX-License-Identifier: MIT
/*
 * Automatic residency: a controller decides what to evict so that a request
 * fits, under a deterministic tiered-LRU policy, and `use` admits and
 * borrows the values in one step.
 *
 * Pinned memory holds two of the three weight blocks. Each stage asks for
 * one block in pinned memory; the least recently used one is dropped (it
 * still has a pageable copy), and a block marked important is kept longer.
 */
#include <stdio.h>

#include <rsd/rsd.h>

#define BLOCK (8u << 10)

int main(void)
{
	struct rsd_budget budget = { RSD_LOC_PINNED_HOST, 2 * (uint64_t)BLOCK };
	struct rsd_manager_config cfg = { .budgets = &budget, .nbudgets = 1 };
	struct rsd_manager *m;
	struct rsd_controller *c;
	struct rsd_handle w[3];
	int order[] = { 0, 1, 2, 0, 1, 2 };
	int rc = 1;

	if (rsd_manager_create(&cfg, &m))
		return 1;
	for (int i = 0; i < 3; i++) {
		struct rsd_resident *r;
		uint64_t n = BLOCK;

		if (rsd_resident_alloc(m, &rsd_resident_type, RSD_LOC_PAGEABLE_HOST, 1, &n, NULL, 0,
				       &r) ||
		    rsd_adopt(m, r, NULL, RSD_REPLICABLE, &w[i]))
			goto out;
	}
	/* NULL policy: a tiered LRU with no fallback tiers; 0: default limit. */
	if (rsd_controller_create(m, NULL, 0, &c))
		goto out;
	/* Block 2 matters more: evicted only after lower priorities. */
	rsd_controller_set_policy_metadata(c, w[2], 1, "block-2");
	for (size_t s = 0; s < sizeof(order) / sizeof(order[0]); s++) {
		struct rsd_requirement req = { w[order[s]], RSD_LOC_PINNED_HOST };
		struct rsd_request request = { .name = "stage",
					       .requirements = &req,
					       .nrequirements = 1 };
		const struct rsd_decision *d;
		const struct rsd_resident *v;
		struct rsd_use *u;

		if (rsd_controller_use(c, &request, NULL, 0, NULL, 0, &u)) {
			fprintf(stderr, "use: %s\n", rsd_last_error()->message);
			goto out_ctrl;
		}
		d = rsd_use_decision(u);
		rsd_use_value(u, w[order[s]], RSD_LOC_PINNED_HOST, &v);
		printf("stage %zu: block %d in pinned, %zu evictions", s, order[s], d->nevictions);
		for (size_t i = 0; i < d->nevictions; i++)
			printf(" [%s %llu: %s]", rsd_action_kind_name(d->evictions[i].action.kind),
			       (unsigned long long)d->evictions[i].action.handle.id,
			       d->evictions[i].reason);
		printf(", explored %llu states\n", (unsigned long long)d->explored_states);
		rsd_use_close(u, NULL);
		rsd_use_free(u);
	}
	rc = 0;
out_ctrl:
	rsd_controller_free(c);
out:
	rsd_manager_close(m, RSD_CLOSE_FORCE);
	rsd_manager_destroy(m);
	return rc;
}
