// SPDX-License-Identifier: MIT
/*
 * Build smoke test: the library links, its feature macros reach the
 * compiler, and two entry points of the API layer behave as specified.
 * If this program fails, look at the Makefile before anything else.
 */
#include <string.h>

#include <atf-c.h>
#include "../check.h"

#include <rsd/rsd.h>

#include "internal.h"

#if !defined(RSD_HAVE_CUDA) || !defined(RSD_TRACE)
#error "the Makefile must define RSD_HAVE_CUDA and RSD_TRACE (0 or 1)"
#endif
#if (RSD_HAVE_CUDA != 0 && RSD_HAVE_CUDA != 1) || (RSD_TRACE != 0 && RSD_TRACE != 1)
#error "RSD_HAVE_CUDA and RSD_TRACE must be 0 or 1"
#endif

ATF_TC_WITHOUT_HEAD(strerror_codes);
ATF_TC_BODY(strerror_codes, tc)
{
	ATF_CHECK_STREQ(rsd_strerror(-RSD_EBUDGET), "residency budget exceeded");
	ATF_CHECK_STREQ(rsd_strerror(RSD_EBUDGET), rsd_strerror(-RSD_EBUDGET));
	ATF_CHECK_STREQ(rsd_strerror(0), "success");
	ATF_CHECK_STREQ(rsd_strerror(RSD_EMAX), "unknown error");
	ATF_CHECK_STREQ(rsd_strerror(-100000), "unknown error");
}

ATF_TC_WITHOUT_HEAD(location_parse_cuda);
ATF_TC_BODY(location_parse_cuda, tc)
{
	struct rsd_location loc = { .kind = RSD_PAGEABLE_HOST, .device = -1 };

	RSD_REQUIRE_OK(rsd_location_parse("cuda:7", &loc));
	ATF_CHECK_EQ(loc.kind, RSD_CUDA);
	ATF_CHECK_EQ(loc.device, 7);

	RSD_REQUIRE_OK(rsd_location_parse("pageable-host", &loc));
	ATF_CHECK_EQ(loc.kind, RSD_PAGEABLE_HOST);
	ATF_CHECK_EQ(loc.device, -1);
}

ATF_TC_WITHOUT_HEAD(location_parse_rejects_noncanonical);
ATF_TC_BODY(location_parse_rejects_noncanonical, tc)
{
	struct rsd_location loc = { .kind = RSD_PINNED_HOST, .device = -1 };

	RSD_CHECK_ERR(RSD_EINVAL, rsd_location_parse("cuda:07", &loc));
	ATF_CHECK_EQ(rsd_last_error()->code, RSD_EINVAL);
	ATF_CHECK(strlen(rsd_last_error()->message) > 0);
	RSD_CHECK_ERR(RSD_EINVAL, rsd_location_parse("cuda", &loc));
	RSD_CHECK_ERR(RSD_EINVAL, rsd_location_parse("cuda:128", &loc));
}

/* Tests link librsd.a, so the private helpers are reachable here. */
ATF_TC_WITHOUT_HEAD(private_helpers_link);
ATF_TC_BODY(private_helpers_link, tc)
{
	ATF_CHECK(rsd__nonblank(" x "));
	ATF_CHECK(!rsd__nonblank(" \t"));
	ATF_CHECK_EQ(rsd__err(RSD_ENOTFOUND, "probe %d", 42), -RSD_ENOTFOUND);
	ATF_CHECK_STREQ(rsd_last_error()->message, "probe 42");
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, strerror_codes);
	ATF_TP_ADD_TC(tp, location_parse_cuda);
	ATF_TP_ADD_TC(tp, location_parse_rejects_noncanonical);
	ATF_TP_ADD_TC(tp, private_helpers_link);
	return atf_no_error();
}
