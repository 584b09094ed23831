// SPDX-License-Identifier: MIT
/*
 * Values (reference.md §2, §3.2, §6.1, §4.5 alias rule): types, residents
 * and their accessors, logical versus unique storage bytes, adopt's derived
 * spec, conformance, the storage-independence rule and failed adopts.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atf-c.h>

#include "cfx.h"

ATF_TC_WITHOUT_HEAD(type_is_a);
ATF_TC_BODY(type_is_a, tc)
{
	ATF_CHECK(rsd_type_is_a(&rsd_resident_type, &rsd_resident_type));
	ATF_CHECK(rsd_type_is_a(&cfx_base_type, &rsd_resident_type));
	ATF_CHECK(rsd_type_is_a(&cfx_derived_type, &cfx_base_type));
	ATF_CHECK(rsd_type_is_a(&cfx_derived_type, &rsd_resident_type));
	ATF_CHECK(rsd_type_is_a(&cfx_derived_type, &cfx_derived_type));
	ATF_CHECK(!rsd_type_is_a(&cfx_base_type, &cfx_derived_type));
	ATF_CHECK(!rsd_type_is_a(&rsd_resident_type, &cfx_base_type));
	ATF_CHECK(!rsd_type_is_a(&cfx_other_type, &cfx_base_type));
	ATF_CHECK(!rsd_type_is_a(&cfx_rogue_type, &rsd_resident_type));
	ATF_CHECK(!rsd_type_is_a(NULL, &rsd_resident_type));
	ATF_CHECK(!rsd_type_is_a(&cfx_base_type, NULL));
}

ATF_TC_WITHOUT_HEAD(alloc_accessors);
ATF_TC_BODY(alloc_accessors, tc)
{
	const uint64_t sizes[3] = { 100, 0, 64 };
	char meta[4] = "abc";
	const char *got;
	struct rsd_resident *r = NULL;
	size_t len = 99;
	struct cfx f;

	cfx_host(&f, NULL, 0);
	OK(rsd_resident_alloc(f.m, &cfx_derived_type, PAGEABLE, 3, sizes, meta, sizeof(meta), &r));
	meta[0] = 'X'; /* copied, not retained */
	ATF_CHECK_EQ(rsd_resident_nbuffers(r), 3);
	ATF_CHECK(rsd_resident_data(r, 0) != NULL);
	ATF_CHECK(rsd_resident_data(r, 2) != NULL);
	ATF_CHECK(rsd_resident_data(r, 0) != rsd_resident_data(r, 2));
	ATF_CHECK(rsd_resident_data(r, 3) == NULL);
	ATF_CHECK_EQ(rsd_resident_buffer_nbytes(r, 0), 100);
	ATF_CHECK_EQ(rsd_resident_buffer_nbytes(r, 1), 0);
	ATF_CHECK_EQ(rsd_resident_buffer_nbytes(r, 2), 64);
	ATF_CHECK_EQ(rsd_resident_buffer_nbytes(r, 3), 0);
	memset(rsd_resident_data(r, 0), 0xab, 100);
	memset(rsd_resident_data(r, 2), 0xcd, 64);
	ATF_CHECK_EQ(rsd_resident_nbytes(r), 164);
	ATF_CHECK_EQ(rsd_resident_storage_nbytes(r), 164);
	ATF_CHECK(rsd_location_equal(rsd_resident_location(r), PAGEABLE));
	ATF_CHECK(rsd_resident_type_of(r) == &cfx_derived_type);
	got = rsd_resident_meta(r, &len);
	ATF_CHECK_EQ(len, 4);
	ATF_REQUIRE(got);
	ATF_CHECK_STREQ(got, "abc");
	rsd_resident_free(r);

	r = cfx_alloc(&f, PINNED, 10);
	ATF_CHECK(rsd_location_equal(rsd_resident_location(r), PINNED));
	ATF_CHECK_EQ(rsd_resident_nbytes(r), 10);
	ATF_CHECK_EQ(rsd_resident_storage_nbytes(r), 10);
	got = rsd_resident_meta(r, &len);
	ATF_CHECK_EQ(len, 0);
	rsd_resident_free(r);
	cfx_fini(&f);
}

ATF_TC_WITHOUT_HEAD(alloc_rejects);
ATF_TC_BODY(alloc_rejects, tc)
{
	struct rsd_location bad = { (enum rsd_location_kind)7, 0 };
	uint64_t n = 8;
	struct rsd_resident *r = NULL;
	struct cfx f;

	cfx_host(&f, NULL, 0);
	ERR(RSD_ETYPE, rsd_resident_alloc(f.m, NULL, PAGEABLE, 1, &n, NULL, 0, &r));
	ERR(RSD_ETYPE, rsd_resident_alloc(f.m, &cfx_rogue_type, PAGEABLE, 1, &n, NULL, 0, &r));
	ERR(RSD_ETYPE, rsd_resident_alloc(NULL, &rsd_resident_type, PAGEABLE, 1, &n, NULL, 0, &r));
	ERR(RSD_ETYPE, rsd_resident_alloc(f.m, &rsd_resident_type, PAGEABLE, 1, &n, NULL, 0, NULL));
	ERR(RSD_EINVAL, rsd_resident_alloc(f.m, &rsd_resident_type, PAGEABLE, 0, &n, NULL, 0, &r));
	ATF_CHECK(rsd_resident_alloc(f.m, &rsd_resident_type, bad, 1, &n, NULL, 0, &r) < 0);
	ATF_CHECK(r == NULL);
	CHECK_VERSION(&f, 0);
	cfx_fini(&f);
}

struct block {
	void *mem;
	unsigned releases;
};

static void block_release(void *ctx, struct rsd_resident *r)
{
	struct block *b = ctx;

	(void)r;
	b->releases++;
	free(b->mem);
	b->mem = NULL;
}

static struct rsd_buffer_view view(void *data, uint64_t n, void *base, uint64_t base_n,
				   struct rsd_location at)
{
	struct rsd_buffer_view v = { data, n, base, base_n, at };

	return v;
}

/* §18.7: two fields sharing one allocation. */
ATF_TC_WITHOUT_HEAD(shared_allocation_bytes);
ATF_TC_BODY(shared_allocation_bytes, tc)
{
	struct block b = { malloc(128), 0 };
	struct rsd_buffer_view v[2];
	const struct rsd_value_snapshot *vs;
	struct rsd_snapshot *s;
	struct rsd_resident *r;
	struct rsd_handle h;
	struct cfx f;

	ATF_REQUIRE(b.mem);
	cfx_host(&f, NULL, 0);
	v[0] = view(b.mem, 128, b.mem, 128, PAGEABLE);
	v[1] = view(b.mem, 128, b.mem, 128, PAGEABLE);
	OK(rsd_resident_wrap(&rsd_resident_type, 2, v, NULL, 0, block_release, &b, &r));
	ATF_CHECK_EQ(rsd_resident_nbytes(r), 256);
	ATF_CHECK_EQ(rsd_resident_storage_nbytes(r), 128);
	OK(rsd_adopt(f.m, r, NULL, RSD_EXCLUSIVE, &h));
	s = cfx_snap(&f);
	vs = cfx_val(s, h);
	ATF_REQUIRE(vs && vs->nmaterializations == 1);
	ATF_CHECK_EQ(vs->spec.logical_nbytes, 256);
	ATF_CHECK_EQ(vs->spec.storage_nbytes, 256);
	ATF_CHECK(rsd_location_equal(vs->materializations[0].location, PAGEABLE));
	ATF_CHECK_EQ(vs->materializations[0].logical_nbytes, 256);
	ATF_CHECK_EQ(vs->materializations[0].storage_nbytes, 128);
	ATF_CHECK_EQ(vs->materializations[0].charged_nbytes, 256);
	ATF_CHECK_EQ(cfx_loc(s, PAGEABLE)->used_bytes, 256);
	rsd_snapshot_free(s);
	/* The manager owns it until discard; then release runs exactly once. */
	ATF_CHECK_EQ(b.releases, 0);
	OK(rsd_discard(f.m, h, NULL));
	ATF_CHECK_EQ(b.releases, 1);
	cfx_fini(&f);
	ATF_CHECK_EQ(b.releases, 1);
}

/* §18.8: a strided view is charged its whole allocation; a copy compacts. */
ATF_TC_WITHOUT_HEAD(strided_view_bytes);
ATF_TC_BODY(strided_view_bytes, tc)
{
	struct block b = { malloc(4096), 0 };
	struct rsd_buffer_view v;
	const struct rsd_value_snapshot *vs;
	const struct rsd_materialization_snapshot *mp;
	struct rsd_transition rep;
	struct rsd_action a;
	struct rsd_snapshot *s;
	struct rsd_resident *r;
	struct rsd_handle h;
	struct cfx f;

	ATF_REQUIRE(b.mem);
	memset(b.mem, 0x5a, 4096);
	cfx_host(&f, NULL, 0);
	v = view((char *)b.mem + 128, 64, b.mem, 4096, PAGEABLE);
	OK(rsd_resident_wrap(&rsd_resident_type, 1, &v, NULL, 0, block_release, &b, &r));
	ATF_CHECK_EQ(rsd_resident_nbytes(r), 64);
	ATF_CHECK_EQ(rsd_resident_storage_nbytes(r), 4096);
	OK(rsd_adopt(f.m, r, NULL, RSD_REPLICABLE, &h));
	{
		struct rsd_resident *probe = cfx_alloc(&f, PINNED, 1);

		rsd_resident_free(probe); /* skips when pinned memory is unavailable */
	}
	OK(rsd_copy(f.m, h, PINNED, NULL, &rep));
	a = rsd_action_ensure(h, PINNED);
	CHECK_REPORT(&rep, &a, false, &PAGEABLE, &PINNED, 64, 4096, NULL);
	s = cfx_snap(&f);
	vs = cfx_val(s, h);
	ATF_REQUIRE(vs && vs->nmaterializations == 2);
	ATF_CHECK_EQ(vs->spec.logical_nbytes, 64);
	ATF_CHECK_EQ(vs->spec.storage_nbytes, 4096);
	ATF_CHECK_EQ(cfx_mat(vs, PAGEABLE)->storage_nbytes, 4096);
	mp = cfx_mat(vs, PINNED);
	ATF_REQUIRE(mp);
	ATF_CHECK(mp->storage_nbytes <= 4096);
	ATF_CHECK(mp->storage_nbytes >= 64);
	ATF_CHECK_EQ(mp->charged_nbytes, 4096);
	ATF_CHECK_EQ(mp->logical_nbytes, 64);
	ATF_CHECK_EQ(cfx_loc(s, PINNED)->used_bytes, 4096);
	ATF_CHECK_EQ(cfx_loc(s, PAGEABLE)->used_bytes, 4096);
	rsd_snapshot_free(s);
	cfx_fini(&f);
	ATF_CHECK_EQ(b.releases, 1);
}

/* Two buffers naming one allocation with different sizes: S(V) undefined. */
ATF_TC_WITHOUT_HEAD(inconsistent_allocation_sizes);
ATF_TC_BODY(inconsistent_allocation_sizes, tc)
{
	char *mem = malloc(256);
	struct rsd_buffer_view v[2];
	struct rsd_snapshot *before, *after;
	struct rsd_resident *r;
	struct rsd_handle h;
	struct cfx f;

	ATF_REQUIRE(mem);
	cfx_host(&f, NULL, 0);
	cfx_adopt(&f, PAGEABLE, 8, RSD_EXCLUSIVE);
	v[0] = view(mem, 16, mem, 256, PAGEABLE);
	v[1] = view(mem + 16, 16, mem, 128, PAGEABLE);
	OK(rsd_resident_wrap(&rsd_resident_type, 2, v, NULL, 0, NULL, NULL, &r));
	ATF_CHECK_EQ(rsd_resident_storage_nbytes(r), UINT64_MAX);
	before = cfx_snap(&f);
	ATF_CHECK(rsd_adopt(f.m, r, NULL, RSD_EXCLUSIVE, &h) < 0);
	after = cfx_snap(&f);
	CHECK_SAME(before, after, false);
	rsd_snapshot_free(before);
	rsd_snapshot_free(after);
	rsd_resident_free(r);
	free(mem);
	cfx_fini(&f);
}

ATF_TC_WITHOUT_HEAD(wrap_rejects);
ATF_TC_BODY(wrap_rejects, tc)
{
	char mem[64];
	struct rsd_buffer_view v;
	struct rsd_resident *r = NULL;

	v = view(mem, 16, mem, 64, PAGEABLE);
	ERR(RSD_ETYPE, rsd_resident_wrap(NULL, 1, &v, NULL, 0, NULL, NULL, &r));
	ERR(RSD_ETYPE, rsd_resident_wrap(&cfx_rogue_type, 1, &v, NULL, 0, NULL, NULL, &r));
	ERR(RSD_ETYPE, rsd_resident_wrap(&rsd_resident_type, 1, &v, NULL, 0, NULL, NULL, NULL));
	ERR(RSD_EINVAL, rsd_resident_wrap(&rsd_resident_type, 0, &v, NULL, 0, NULL, NULL, &r));
	/* The view must lie inside its backing allocation. */
	v = view(mem + 60, 16, mem, 64, PAGEABLE);
	ERR(RSD_EINVAL, rsd_resident_wrap(&rsd_resident_type, 1, &v, NULL, 0, NULL, NULL, &r));
	v = view(mem, 16, mem + 8, 56, PAGEABLE);
	ERR(RSD_EINVAL, rsd_resident_wrap(&rsd_resident_type, 1, &v, NULL, 0, NULL, NULL, &r));
	v = view(NULL, 16, mem, 64, PAGEABLE);
	ERR(RSD_EINVAL, rsd_resident_wrap(&rsd_resident_type, 1, &v, NULL, 0, NULL, NULL, &r));
	ATF_CHECK(r == NULL);
	/* A view ending exactly at the end of its allocation is fine. */
	v = view(mem + 48, 16, mem, 64, PAGEABLE);
	OK(rsd_resident_wrap(&rsd_resident_type, 1, &v, NULL, 0, NULL, NULL, &r));
	ATF_CHECK_EQ(rsd_resident_storage_nbytes(r), 64);
	rsd_resident_free(r);
}

/*
 * A view or allocation whose address plus size wraps past the end of the
 * address space is refused, the message naming the buffer, the address,
 * the size and the room there; one ending exactly at the top is fine.
 * Only the addresses are recorded, never read.
 */
ATF_TC_WITHOUT_HEAD(wrap_rejects_wrapping_range);
ATF_TC_BODY(wrap_rejects_wrapping_range, tc)
{
	/* Addresses made from integers: no pointer arithmetic near the top. */
	void *top16 = (void *)(uintptr_t)(UINTPTR_MAX - 15);
	void *top4 = (void *)(uintptr_t)(UINTPTR_MAX - 3);
	void *top64 = (void *)(uintptr_t)(UINTPTR_MAX - 63);
	void *top32 = (void *)(uintptr_t)(UINTPTR_MAX - 31);
	struct rsd_buffer_view v[2];
	struct rsd_resident *r = NULL;
	char mem[64], want[160];

	/* The allocation wraps; the view inside it does not. */
	v[0] = view(top16, 16, top16, 64, PAGEABLE);
	ERR(RSD_EINVAL, rsd_resident_wrap(&rsd_resident_type, 1, v, NULL, 0, NULL, NULL, &r));
	snprintf(want, sizeof(want),
		 "buffer 0: backing allocation at %p of 64 bytes wraps the address space "
		 "(16 bytes fit above it)",
		 top16);
	ATF_CHECK_STREQ(rsd_last_error()->message, want);
	/* The second buffer's view wraps (its allocation is elsewhere). */
	v[0] = view(mem, 16, mem, 64, PAGEABLE);
	v[1] = view(top4, 8, mem, 64, PAGEABLE);
	ERR(RSD_EINVAL, rsd_resident_wrap(&rsd_resident_type, 2, v, NULL, 0, NULL, NULL, &r));
	snprintf(want, sizeof(want),
		 "buffer 1: view at %p of 8 bytes wraps the address space (4 bytes fit above it)",
		 top4);
	ATF_CHECK_STREQ(rsd_last_error()->message, want);
	ATF_CHECK(r == NULL);
	/* Ending at the last byte of the address space does not wrap. */
	v[0] = view(top32, 32, top64, 64, PAGEABLE);
	OK(rsd_resident_wrap(&rsd_resident_type, 1, v, NULL, 0, NULL, NULL, &r));
	ATF_CHECK_EQ(rsd_resident_storage_nbytes(r), 64);
	rsd_resident_free(r);
}

/* §3.2: adopt's spec is (exact type, L, max(L, S), mode, MUST_PRESERVE). */
ATF_TC_WITHOUT_HEAD(adopt_derives_spec);
ATF_TC_BODY(adopt_derives_spec, tc)
{
	uint64_t n = 48;
	const struct rsd_value_snapshot *vs;
	struct rsd_snapshot *s;
	struct rsd_resident *r, *p;
	struct rsd_handle h, hp;
	struct cfx f;

	cfx_host(&f, NULL, 0);
	OK(rsd_resident_alloc(f.m, &cfx_derived_type, PAGEABLE, 1, &n, NULL, 0, &r));
	OK(rsd_adopt(f.m, r, NULL, RSD_REPLICABLE, &h));
	ATF_CHECK(h.type == &cfx_derived_type);
	ATF_CHECK_EQ(h.manager_id, rsd_manager_id(f.m));
	ATF_CHECK(h.id != 0);
	p = cfx_alloc(&f, PINNED, 16);
	OK(rsd_adopt(f.m, p, NULL, RSD_EXCLUSIVE, &hp));
	ATF_CHECK(hp.id != h.id);
	s = cfx_snap(&f);
	vs = cfx_val(s, h);
	ATF_REQUIRE(vs);
	ATF_CHECK(vs->spec.type == &cfx_derived_type);
	ATF_CHECK_EQ(vs->spec.logical_nbytes, 48);
	ATF_CHECK_EQ(vs->spec.storage_nbytes, 48);
	ATF_CHECK_EQ(vs->spec.replica_mode, RSD_REPLICABLE);
	ATF_CHECK_EQ(vs->spec.recoverability, RSD_MUST_PRESERVE);
	ATF_CHECK(!vs->has_source && !vs->has_source_location && !vs->discarded);
	ATF_REQUIRE_EQ(vs->nmaterializations, 1);
	ATF_CHECK(rsd_location_equal(vs->materializations[0].location, PAGEABLE));
	/* A fully pinned value is inferred to live at pinned-host. */
	vs = cfx_val(s, hp);
	ATF_REQUIRE(vs && vs->nmaterializations == 1);
	ATF_CHECK(rsd_location_equal(vs->materializations[0].location, PINNED));
	ATF_CHECK_EQ(vs->spec.replica_mode, RSD_EXCLUSIVE);
	rsd_snapshot_free(s);
	CHECK_LOCATIONS(&f, PAGEABLE, PINNED);
	CHECK_VERSION(&f, 4);
	cfx_fini(&f);
}

/* §2.3: a GPU value is inferred at cuda:N. */
ATF_TC_WITHOUT_HEAD(adopt_infers_cuda);
ATF_TC_BODY(adopt_infers_cuda, tc)
{
	struct rsd_resident *r = NULL, *h0;
	struct rsd_handle h;
	uint64_t n = 32;
	struct cfx f;

	cfx_sim(&f, NULL, 0, 2);
	OK(rsd_resident_alloc(f.m, &rsd_resident_type, cfx_cuda(1), 1, &n, NULL, 0, &r));
	ATF_CHECK(rsd_location_equal(rsd_resident_location(r), cfx_cuda(1)));
	OK(rsd_adopt(f.m, r, NULL, RSD_EXCLUSIVE, &h));
	ATF_CHECK(cfx_resident(&f, h, cfx_cuda(1)));
	CHECK_LOCATIONS(&f, cfx_cuda(1));
	/* A host value does not conform to a GPU location, nor the reverse. */
	h0 = cfx_alloc(&f, PAGEABLE, 8);
	{
		struct rsd_location c0 = cfx_cuda(0);

		ERR(RSD_EMATERIAL, rsd_adopt(f.m, h0, &c0, RSD_EXCLUSIVE, &h));
	}
	rsd_resident_free(h0);
	OK(rsd_resident_alloc(f.m, &rsd_resident_type, cfx_cuda(0), 1, &n, NULL, 0, &r));
	ERR(RSD_EMATERIAL, rsd_adopt(f.m, r, &PAGEABLE, RSD_EXCLUSIVE, &h));
	{
		struct rsd_location c1 = cfx_cuda(1);

		ERR(RSD_EMATERIAL, rsd_adopt(f.m, r, &c1, RSD_EXCLUSIVE, &h));
	}
	rsd_resident_free(r);
	CHECK_LOCATIONS(&f, cfx_cuda(1));
	CHECK_VERSION(&f, 2);
	cfx_fini(&f);
}

/* §2.2, §18.11: pinning conformance; nothing is recorded on failure. */
ATF_TC_WITHOUT_HEAD(adopt_conformance);
ATF_TC_BODY(adopt_conformance, tc)
{
	char *mem = malloc(64), *mem2 = malloc(64);
	struct rsd_buffer_view v[2];
	struct rsd_resident *pg, *pn, *mixed;
	struct rsd_handle h;
	struct cfx f;

	ATF_REQUIRE(mem && mem2);
	cfx_host(&f, NULL, 0);
	pg = cfx_alloc(&f, PAGEABLE, 16);
	pn = cfx_alloc(&f, PINNED, 16);
	v[0] = view(mem, 64, mem, 64, PAGEABLE);
	v[1] = view(mem2, 64, mem2, 64, PINNED);
	OK(rsd_resident_wrap(&rsd_resident_type, 2, v, NULL, 0, NULL, NULL, &mixed));

	ERR(RSD_EMATERIAL, rsd_adopt(f.m, pg, &PINNED, RSD_EXCLUSIVE, &h));
	ERR(RSD_EMATERIAL, rsd_adopt(f.m, pn, &PAGEABLE, RSD_EXCLUSIVE, &h));
	ERR(RSD_EMATERIAL, rsd_adopt(f.m, mixed, NULL, RSD_EXCLUSIVE, &h));
	ERR(RSD_EMATERIAL, rsd_adopt(f.m, mixed, &PAGEABLE, RSD_EXCLUSIVE, &h));
	ERR(RSD_EMATERIAL, rsd_adopt(f.m, mixed, &PINNED, RSD_EXCLUSIVE, &h));
	CHECK_VERSION(&f, 0);
	ATF_CHECK_EQ(rsd_manager_locations(f.m, NULL, 0), 0);
	/* They are still the caller's, and conforming adopts work. */
	OK(rsd_adopt(f.m, pg, &PAGEABLE, RSD_EXCLUSIVE, &h));
	OK(rsd_adopt(f.m, pn, &PINNED, RSD_EXCLUSIVE, &h));
	CHECK_VERSION(&f, 4);
	rsd_resident_free(mixed);
	free(mem);
	free(mem2);
	cfx_fini(&f);
}

/* §4.5, §18.9: the same object twice, or a second view of a managed allocation. */
ATF_TC_WITHOUT_HEAD(adopt_alias_rejected);
ATF_TC_BODY(adopt_alias_rejected, tc)
{
	struct rsd_buffer_view v;
	struct rsd_snapshot *before, *after;
	struct rsd_resident *r, *alias, *clone;
	struct rsd_handle h, x;
	char *data;
	struct cfx f;

	cfx_host(&f, NULL, 0);
	r = cfx_alloc(&f, PAGEABLE, 4096);
	data = rsd_resident_data(r, 0);
	OK(rsd_adopt(f.m, r, NULL, RSD_REPLICABLE, &h));
	before = cfx_snap(&f);
	ERR(RSD_EOWNERSHIP, rsd_adopt(f.m, r, NULL, RSD_REPLICABLE, &x));
	v = view(data + 64, 128, data, 4096, PAGEABLE);
	OK(rsd_resident_wrap(&rsd_resident_type, 1, &v, NULL, 0, NULL, NULL, &alias));
	ERR(RSD_EOWNERSHIP, rsd_adopt(f.m, alias, NULL, RSD_REPLICABLE, &x));
	after = cfx_snap(&f);
	CHECK_SAME(before, after, false);
	ATF_CHECK_EQ(after->nvalues, 1);
	rsd_snapshot_free(before);
	rsd_snapshot_free(after);
	rsd_resident_free(alias);
	/* A fresh clone owns its storage. */
	clone = cfx_alloc(&f, PAGEABLE, 4096);
	OK(rsd_adopt(f.m, clone, NULL, RSD_REPLICABLE, &x));
	ATF_CHECK(!rsd_handle_equal(h, x));
	CHECK_VERSION(&f, 3);
	cfx_fini(&f);
}

/* §18.10: zero-size values have no storage keys and charge 0. */
ATF_TC_WITHOUT_HEAD(adopt_zero_size_repeatedly);
ATF_TC_BODY(adopt_zero_size_repeatedly, tc)
{
	const struct rsd_budget b[] = { { { RSD_PAGEABLE_HOST, -1 }, 0 } };
	static char anchor[1];
	struct rsd_handle h[6];
	struct rsd_snapshot *s;
	struct cfx f;

	cfx_host(&f, b, 1);
	for (int i = 0; i < 3; i++)
		h[i] = cfx_adopt(&f, PAGEABLE, 0, RSD_EXCLUSIVE);
	/* Zero-size views of one address never collide either. */
	for (int i = 3; i < 6; i++) {
		struct rsd_buffer_view v = view(anchor, 0, anchor, 0, PAGEABLE);
		struct rsd_resident *r;

		OK(rsd_resident_wrap(&rsd_resident_type, 1, &v, NULL, 0, NULL, NULL, &r));
		OK(rsd_adopt(f.m, r, NULL, RSD_EXCLUSIVE, &h[i]));
	}
	for (int i = 0; i < 6; i++)
		for (int j = 0; j < i; j++)
			ATF_CHECK(!rsd_handle_equal(h[i], h[j]) && h[i].id != h[j].id);
	s = cfx_snap(&f);
	ATF_CHECK_EQ(s->nvalues, 6);
	ATF_CHECK_EQ(cfx_loc(s, PAGEABLE)->used_bytes, 0);
	ATF_CHECK_EQ(cfx_loc(s, PAGEABLE)->value_count, 6);
	ATF_CHECK_EQ(cfx_val(s, h[0])->spec.storage_nbytes, 0);
	ATF_CHECK_EQ(cfx_val(s, h[0])->materializations[0].storage_nbytes, 0);
	rsd_snapshot_free(s);
	CHECK_VERSION(&f, 6);
	cfx_fini(&f);
}

/* §6.1 step 8, §18.12: a failed adopt leaves no record and no version change. */
ATF_TC_WITHOUT_HEAD(adopt_failure_leaves_nothing);
ATF_TC_BODY(adopt_failure_leaves_nothing, tc)
{
	const struct rsd_budget b[] = { { { RSD_PAGEABLE_HOST, -1 }, 100 } };
	struct rsd_snapshot *before, *after;
	struct rsd_resident *big, *ok, *alias;
	struct rsd_handle h = { 0 }, first, x;
	struct rsd_buffer_view v;
	struct cfx f, g;
	char *data;

	cfx_host(&f, b, 1);
	{
		struct rsd_resident *r = cfx_alloc(&f, PAGEABLE, 40);

		data = rsd_resident_data(r, 0);
		OK(rsd_adopt(f.m, r, NULL, RSD_EXCLUSIVE, &first));
	}
	big = cfx_alloc(&f, PAGEABLE, 61);
	ok = cfx_alloc(&f, PAGEABLE, 8);
	v = view(data, 8, data, 40, PAGEABLE);
	OK(rsd_resident_wrap(&rsd_resident_type, 1, &v, NULL, 0, NULL, NULL, &alias));
	before = cfx_snap(&f);
	/* Budget, invalid replica mode, alias of the managed allocation. */
	ERR(RSD_EBUDGET, rsd_adopt(f.m, big, NULL, RSD_EXCLUSIVE, &h));
	ERR(RSD_ETYPE, rsd_adopt(f.m, ok, NULL, (enum rsd_replica_mode)7, &h));
	ERR(RSD_EOWNERSHIP, rsd_adopt(f.m, alias, NULL, RSD_EXCLUSIVE, &h));
	ATF_CHECK_EQ(h.id, 0); /* out untouched on failure */
	after = cfx_snap(&f);
	CHECK_SAME(before, after, false);
	ATF_CHECK_EQ(after->nvalues, 1);
	ATF_CHECK_EQ(cfx_loc(after, PAGEABLE)->used_bytes, 40);
	rsd_snapshot_free(before);
	rsd_snapshot_free(after);
	rsd_resident_free(alias);

	/* The rejected residents are still the caller's: another manager takes one. */
	cfx_host(&g, NULL, 0);
	OK(rsd_adopt(g.m, big, NULL, RSD_EXCLUSIVE, &x));
	ATF_CHECK(x.id != first.id);
	OK(rsd_adopt(f.m, ok, NULL, RSD_EXCLUSIVE, &x));
	ATF_CHECK(x.id != first.id);
	CHECK_VERSION(&f, 2);
	cfx_fini(&g);
	cfx_fini(&f);
}

/* A copy carries the exact bytes, metadata and type into fresh storage. */
ATF_TC_WITHOUT_HEAD(copy_preserves_content);
ATF_TC_BODY(copy_preserves_content, tc)
{
	const uint64_t sizes[2] = { 100, 28 };
	const char meta[] = "ckks:level=3";
	const struct rsd_resident *got;
	struct rsd_resident *r;
	struct rsd_lease *l;
	struct rsd_handle h;
	unsigned char *d0, *d1;
	size_t len;
	struct cfx f;

	cfx_host(&f, NULL, 0);
	OK(rsd_resident_alloc(f.m, &cfx_derived_type, PAGEABLE, 2, sizes, meta, sizeof(meta), &r));
	d0 = rsd_resident_data(r, 0);
	d1 = rsd_resident_data(r, 1);
	for (int i = 0; i < 100; i++)
		d0[i] = (unsigned char)i;
	for (int i = 0; i < 28; i++)
		d1[i] = (unsigned char)(200 + i);
	OK(rsd_adopt(f.m, r, NULL, RSD_REPLICABLE, &h));
	/* The manager refuses to let the caller free what it owns. */
	rsd_resident_free(r);
	ATF_CHECK_EQ(rsd_last_error()->code, RSD_EOWNERSHIP);
	{
		struct rsd_resident *probe = cfx_alloc(&f, PINNED, 1);

		rsd_resident_free(probe);
	}
	OK(rsd_ensure(f.m, h, PINNED, NULL, NULL));
	OK(rsd_acquire(f.m, &h, 1, PINNED, NULL, &l));
	OK(rsd_lease_value(l, h, &got));
	ATF_CHECK(got != r);
	ATF_CHECK(rsd_resident_type_of(got) == &cfx_derived_type);
	ATF_CHECK(rsd_location_equal(rsd_resident_location(got), PINNED));
	ATF_REQUIRE_EQ(rsd_resident_nbuffers(got), 2);
	ATF_CHECK(rsd_resident_data(got, 0) != d0);
	ATF_CHECK_EQ(memcmp(rsd_resident_data(got, 0), d0, 100), 0);
	ATF_CHECK_EQ(memcmp(rsd_resident_data(got, 1), d1, 28), 0);
	ATF_CHECK_STREQ(rsd_resident_meta(got, &len), meta);
	ATF_CHECK_EQ(len, sizeof(meta));
	OK(rsd_lease_release(l, 0));
	rsd_lease_free(l);
	cfx_fini(&f);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, type_is_a);
	ATF_TP_ADD_TC(tp, alloc_accessors);
	ATF_TP_ADD_TC(tp, alloc_rejects);
	ATF_TP_ADD_TC(tp, shared_allocation_bytes);
	ATF_TP_ADD_TC(tp, strided_view_bytes);
	ATF_TP_ADD_TC(tp, inconsistent_allocation_sizes);
	ATF_TP_ADD_TC(tp, wrap_rejects);
	ATF_TP_ADD_TC(tp, wrap_rejects_wrapping_range);
	ATF_TP_ADD_TC(tp, adopt_derives_spec);
	ATF_TP_ADD_TC(tp, adopt_infers_cuda);
	ATF_TP_ADD_TC(tp, adopt_conformance);
	ATF_TP_ADD_TC(tp, adopt_alias_rejected);
	ATF_TP_ADD_TC(tp, adopt_zero_size_repeatedly);
	ATF_TP_ADD_TC(tp, adopt_failure_leaves_nothing);
	ATF_TP_ADD_TC(tp, copy_preserves_content);
	return 0;
}
