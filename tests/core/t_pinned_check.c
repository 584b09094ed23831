// SPDX-License-Identifier: MIT
/*
 * Pinned memory that is not pinned (the simulated device's unpinned-host
 * switch): rsd_resident_alloc at pinned-host and every transition that
 * would place a value there fail with -RSD_EDEVICE ("pinned host storage is
 * unavailable"), return nothing and change nothing: state_version and the
 * snapshot are as before. With the switch off again the same calls work.
 */
#include <atf-c.h>
#include <string.h>

#include <rsd/rsd.h>

#include "cfx.h"

static bool says_unavailable(void)
{
	return strstr(rsd_last_error()->message, "pinned host storage is unavailable") != NULL;
}

ATF_TC_WITHOUT_HEAD(unpinned_alloc_fails_cleanly);
ATF_TC_BODY(unpinned_alloc_fails_cleanly, tc)
{
	struct rsd_resident *r = (void *)1;
	struct rsd_snapshot *before, *after;
	uint64_t n = N, v;
	struct cfx f;

	cfx_sim(&f, NULL, 0, 1);
	cfx_adopt(&f, PAGEABLE, N, RSD_REPLICABLE);
	v = cfx_version(&f);
	before = cfx_snap(&f);
	rsd_simdev_set_unpinned_host(f.sd, true);
	ERR(RSD_EDEVICE, rsd_resident_alloc(f.m, &rsd_resident_type, PINNED, 1, &n, NULL, 0, &r));
	ATF_CHECK_MSG(says_unavailable(), "message: %s", rsd_last_error()->message);
	ATF_CHECK_EQ(r, (void *)1);
	CHECK_VERSION(&f, v);
	after = cfx_snap(&f);
	CHECK_SAME(before, after, false);
	rsd_snapshot_free(after);
	rsd_simdev_set_unpinned_host(f.sd, false);
	OK(rsd_resident_alloc(f.m, &rsd_resident_type, PINNED, 1, &n, NULL, 0, &r));
	rsd_resident_free(r);
	rsd_snapshot_free(before);
	cfx_fini(&f);
}

ATF_TC_WITHOUT_HEAD(unpinned_transitions_fail_cleanly);
ATF_TC_BODY(unpinned_transitions_fail_cleanly, tc)
{
	struct rsd_snapshot *before, *after;
	struct rsd_location c0 = cfx_cuda(0);
	struct rsd_handle a, g;
	struct rsd_transition rep;
	uint64_t v;
	struct cfx f;

	cfx_sim(&f, NULL, 0, 1);
	a = cfx_adopt(&f, PAGEABLE, N, RSD_REPLICABLE);
	g = cfx_adopt(&f, c0, N, RSD_REPLICABLE);
	/* Known locations first, so that only the failed placement differs. */
	OK(rsd_ensure(f.m, a, PINNED, NULL, NULL));
	OK(rsd_drop(f.m, a, PINNED, NULL));
	v = cfx_version(&f);
	before = cfx_snap(&f);
	rsd_simdev_set_unpinned_host(f.sd, true);
	ERR(RSD_EDEVICE, rsd_ensure(f.m, a, PINNED, NULL, &rep));
	ATF_CHECK_MSG(says_unavailable(), "message: %s", rsd_last_error()->message);
	ERR(RSD_EDEVICE, rsd_copy(f.m, g, PINNED, NULL, &rep));
	ERR(RSD_EDEVICE, rsd_move(f.m, a, PINNED, NULL, NULL, &rep));
	ERR(RSD_EDEVICE, rsd_move(f.m, g, PINNED, &c0, NULL, &rep));
	ATF_CHECK(says_unavailable());
	CHECK_VERSION(&f, v);
	after = cfx_snap(&f);
	CHECK_SAME(before, after, false);
	rsd_snapshot_free(after);
	ATF_CHECK(!cfx_resident(&f, a, PINNED));
	ATF_CHECK(cfx_resident(&f, g, c0));
	rsd_simdev_set_unpinned_host(f.sd, false);
	OK(rsd_move(f.m, g, PINNED, &c0, NULL, NULL));
	ATF_CHECK(cfx_resident(&f, g, PINNED));
	ATF_CHECK(!cfx_resident(&f, g, c0));
	rsd_snapshot_free(before);
	cfx_fini(&f);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, unpinned_alloc_fails_cleanly);
	ATF_TP_ADD_TC(tp, unpinned_transitions_fail_cleanly);
	return atf_no_error();
}
