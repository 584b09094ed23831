// SPDX-License-Identifier: MIT
/*
 * The published per-location member bitmaps (lib/core/image.c) must list
 * exactly the values that have a materialization at each location, in
 * registration order, whatever sequence of installs and removals led there.
 * The controller lists eviction candidates from them.
 */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>

#include <atf-c.h>
#include "../check.h"

#include <rsd/rsd.h>

#include "core/core.h"

#define NVAL 700 /* more than one bitmap word and one vector level */

static int load(void *ctx, struct rsd_resident **out)
{
	uint64_t n = 64;

	return rsd_resident_alloc(ctx, &rsd_resident_type, RSD_LOC_PAGEABLE_HOST, 1, &n, NULL, 0,
				  out);
}

/* Compare every row's bitmap with the snapshot of the same image. */
static void check_members(struct rsd_manager *m)
{
	const struct rsd_image *img = rsd__read_begin(m);

	for (uint32_t r = 0; r < img->nlocs; r++) {
		const struct rsd_img_loc *row = &img->locs[r];
		uint64_t i = 0, listed = 0;

		for (uint64_t v = 0; v < img->values.count; v++) {
			const struct rsd_img_value *iv = rsd__pv_get(&img->values, v);
			bool here = false, next;

			/* A location not recorded yet (only arriving copies
			 * there) lists none. */
			for (uint32_t k = 0; k < iv->nmats && row->acct.known; k++)
				here |= rsd_location_equal(iv->mats[k].loc, row->loc);
			i = v;
			next = rsd__img_loc_next(row, &i);
			if (here) {
				ATF_CHECK_MSG(next && i == v, "value %llu missing from row %u",
					      (unsigned long long)v, r);
				listed++;
			} else {
				ATF_CHECK_MSG(!next || i != v, "value %llu wrongly in row %u",
					      (unsigned long long)v, r);
			}
		}
		ATF_CHECK_EQ(listed, row->acct.known ? row->acct.value_count : 0);
		i = img->values.count;
		ATF_CHECK(!rsd__img_loc_next(row, &i));
	}
	rsd__read_end();
}

ATF_TC_WITHOUT_HEAD(members_follow_materializations);
ATF_TC_BODY(members_follow_materializations, tc)
{
	struct rsd_value_spec spec = { &rsd_resident_type, 64, 64, RSD_REPLICABLE,
				       RSD_RECONSTRUCTIBLE };
	struct rsd_manager_config cfg = { .host_only = true };
	struct rsd_handle h[NVAL];
	struct rsd_manager *m;
	unsigned seed = 7;

	RSD_REQUIRE_OK(rsd_manager_create(&cfg, &m));
	for (int i = 0; i < NVAL; i++) {
		struct rsd_source src = { load, NULL, m };

		RSD_REQUIRE_OK(rsd_register_source(m, &spec, &src, RSD_LOC_PAGEABLE_HOST, &h[i]));
	}
	check_members(m);
	for (int step = 0; step < 4000; step++) {
		int v = (int)(rand_r(&seed) % NVAL), op = (int)(rand_r(&seed) % 5);
		struct rsd_location at = rand_r(&seed) % 2 ? RSD_LOC_PINNED_HOST :
							     RSD_LOC_PAGEABLE_HOST;

		if (op < 2)
			RSD_REQUIRE_OK(rsd_ensure(m, h[v], at, NULL, NULL));
		else if (op < 4)
			RSD_REQUIRE_OK(rsd_drop(m, h[v], at, NULL));
		else
			RSD_REQUIRE_OK(rsd_move(m, h[v], at, NULL, NULL, NULL));
		if (step % 500 == 0)
			check_members(m);
	}
	/* A discarded value leaves every row. */
	for (int v = 0; v < NVAL; v += 3)
		RSD_REQUIRE_OK(rsd_discard(m, h[v], NULL));
	check_members(m);
	RSD_REQUIRE_OK(rsd_manager_close(m, 0));
	rsd_manager_destroy(m);
}

struct arrival {
	struct rsd_manager *m;
	struct rsd_handle h;
	void *stream;
	int rc;
};

static void *ensure_cuda0(void *arg)
{
	struct arrival *a = arg;
	struct rsd_location cuda0 = { RSD_CUDA, 0 };

	a->rc = rsd_ensure(a->m, a->h, cuda0, a->stream, NULL);
	return NULL;
}

/*
 * Two waiting copies to cuda:0, a location nothing used before, each on its
 * own stream of a device that runs on command. The first commit records
 * cuda:0 while the second copy is still in flight: from then on the row
 * lists the value arriving there too, and both once the second commits.
 */
ATF_TC_WITHOUT_HEAD(members_of_a_location_recorded_mid_transfer);
ATF_TC_BODY(members_of_a_location_recorded_mid_transfer, tc)
{
	struct rsd_simdev_config sc = { .ndevices = 1 };
	struct rsd_manager_config cfg = { 0 };
	struct rsd_simdev *sd;
	struct rsd_manager *m;
	struct arrival a[2];
	pthread_t th[2];
	uint64_t n = 64;

	ATF_REQUIRE_EQ(setenv("RSD_STAGING", "off", 1), 0);
	RSD_REQUIRE_OK(rsd_simdev_create(&sc, &sd));
	rsd_simdev_set_progress(sd, RSD_SIMDEV_ON_COMMAND, 0);
	cfg.driver = rsd_simdev_ops();
	cfg.driver_ctx = sd;
	RSD_REQUIRE_OK(rsd_manager_create(&cfg, &m));
	for (int i = 0; i < 2; i++) {
		struct rsd_resident *r;

		a[i].m = m;
		RSD_REQUIRE_OK(rsd_resident_alloc(m, &rsd_resident_type, RSD_LOC_PINNED_HOST, 1, &n,
						  NULL, 0, &r));
		RSD_REQUIRE_OK(rsd_adopt(m, r, NULL, RSD_REPLICABLE, &a[i].h));
		RSD_REQUIRE_OK(rsd_simdev_stream_create(sd, 0, &a[i].stream));
		ATF_REQUIRE_EQ(pthread_create(&th[i], NULL, ensure_cuda0, &a[i]), 0);
		/* In flight: its copy's event is pending on its stream. */
		while (!rsd_simdev_pending_events(sd, a[i].stream))
			sched_yield();
	}
	/* Another writer's commit publishes both arriving copies (the
	 * values are not dirty when the first commit records cuda:0). */
	{
		struct rsd_resident *r;
		struct rsd_handle h;

		RSD_REQUIRE_OK(rsd_resident_alloc(m, &rsd_resident_type, RSD_LOC_PINNED_HOST, 1, &n,
						  NULL, 0, &r));
		RSD_REQUIRE_OK(rsd_adopt(m, r, NULL, RSD_REPLICABLE, &h));
	}
	check_members(m);
	rsd_simdev_stream_complete(sd, a[0].stream);
	pthread_join(th[0], NULL);
	RSD_CHECK_OK(a[0].rc);
	check_members(m);
	rsd_simdev_stream_complete(sd, a[1].stream);
	pthread_join(th[1], NULL);
	RSD_CHECK_OK(a[1].rc);
	check_members(m);
	RSD_REQUIRE_OK(rsd_manager_close(m, 0));
	rsd_manager_destroy(m);
	for (int i = 0; i < 2; i++)
		rsd_simdev_stream_destroy(sd, a[i].stream);
	rsd_simdev_destroy(sd);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, members_follow_materializations);
	ATF_TP_ADD_TC(tp, members_of_a_location_recorded_mid_transfer);
	return atf_no_error();
}
