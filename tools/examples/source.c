// SPDX-License-Identifier: MIT
/*
 * A reconstruction source: a rotation key that can be regenerated
 * deterministically, so the manager may drop its last copy and reload it on
 * demand. The load callback runs on the manager's writer path with the
 * callback guard raised: it may allocate residents but must not call the
 * manager otherwise.
 */
#include <stdio.h>
#include <string.h>

#include <rsd/rsd.h>

#define KEY_BYTES (32u << 10)

struct keygen {
	struct rsd_manager *m;
	unsigned seed;
	unsigned loads;
};

static int regenerate(void *ctx, struct rsd_resident **out)
{
	struct keygen *g = ctx;
	uint64_t n = KEY_BYTES;
	unsigned char *p;
	int err;

	err = rsd_resident_alloc(g->m, &rsd_resident_type, RSD_LOC_PAGEABLE_HOST, 1, &n, NULL, 0,
				 out);
	if (err)
		return err;
	p = rsd_resident_data(*out, 0);
	for (unsigned i = 0; i < KEY_BYTES; i++)
		p[i] = (unsigned char)(g->seed * 131u + i * 7u);
	g->loads++;
	return 0;
}

int main(void)
{
	struct rsd_manager_config cfg = { 0 };
	struct rsd_value_spec spec = { &rsd_resident_type, KEY_BYTES, KEY_BYTES, RSD_REPLICABLE,
				       RSD_RECONSTRUCTIBLE };
	struct keygen gen = { .seed = 42 };
	struct rsd_source src = { regenerate, NULL, &gen };
	struct rsd_snapshot *s;
	struct rsd_handle key;

	if (rsd_manager_create(&cfg, &gen.m))
		return 1;
	/* Registering never loads. */
	if (rsd_register_source(gen.m, &spec, &src, RSD_LOC_PAGEABLE_HOST, &key))
		return 1;
	/* The first ensure loads at the source location and keeps it there. */
	rsd_ensure(gen.m, key, RSD_LOC_PAGEABLE_HOST, NULL, NULL);
	/* A pinned replica is copied from the pageable one: no second load. */
	rsd_ensure(gen.m, key, RSD_LOC_PINNED_HOST, NULL, NULL);
	/* Sourced values may lose every copy ... */
	rsd_drop(gen.m, key, RSD_LOC_PAGEABLE_HOST, NULL);
	rsd_drop(gen.m, key, RSD_LOC_PINNED_HOST, NULL);
	/* ... and come back on demand. */
	if (rsd_ensure(gen.m, key, RSD_LOC_PINNED_HOST, NULL, NULL)) {
		fprintf(stderr, "%s\n", rsd_last_error()->message);
		return 1;
	}
	if (rsd_snapshot_take(gen.m, &s))
		return 1;
	printf("loads=%u, key resident at %zu location(s), state_version %llu\n", gen.loads,
	       s->values[0].nmaterializations, (unsigned long long)s->state_version);
	rsd_snapshot_free(s);
	rsd_manager_close(gen.m, 0);
	rsd_manager_destroy(gen.m);
	return gen.loads == 2 ? 0 : 1;
}
