/* SPDX-License-Identifier: MIT */
/*
 * Checks of librsd calls that say why they failed. A bare
 * ATF_REQUIRE_EQ(rsd_x(...), 0) reports only "rsd_x(...) != 0"; these
 * report the call as written, the code it returned with its name, and the
 * message rsd_last_error() recorded:
 *
 *   t_use.c:120: rsd_acquire(m, &h, 1, at, NULL, &l) returned -5 (RSD_EBUDGET,
 *   "budget exceeded"), expected 0: Residency budget exceeded at pinned-host: ...
 *
 *   RSD_REQUIRE_OK(call)         call returns 0, else the test fails here
 *   RSD_CHECK_OK(call)           the same; the test goes on
 *   RSD_REQUIRE_ERR(code, call)  call returns -code (code: RSD_EBUDGET, ...)
 *   RSD_CHECK_ERR(code, call)    the same; the test goes on
 *
 * Every test area includes it ("../check.h"); it needs only atf-c and the
 * public header.
 */
#ifndef RSD_TESTS_CHECK_H
#define RSD_TESTS_CHECK_H

#include <atf-c.h>

#include <rsd/rsd.h>

static inline const char *tcheck_codename(int rc)
{
	return rc ? rsd_strerror(rc) : "success";
}

/* Whether rc is want; otherwise fails (requirement or check) saying why. */
static inline bool tcheck_rc(int rc, int want, bool require, const char *expr, const char *file,
			     int line)
{
	if (rc == want)
		return true;
	if (require)
		atf_tc_fail_requirement(file, (size_t)line,
					"%s returned %d (%s), expected %d (%s): %s", expr, rc,
					tcheck_codename(rc), want, tcheck_codename(want),
					rsd_last_error()->message);
	else
		atf_tc_fail_check(file, (size_t)line, "%s returned %d (%s), expected %d (%s): %s",
				  expr, rc, tcheck_codename(rc), want, tcheck_codename(want),
				  rsd_last_error()->message);
	return false;
}

#define RSD_REQUIRE_OK(call) tcheck_rc((call), 0, true, #call, __FILE__, __LINE__)
#define RSD_CHECK_OK(call) tcheck_rc((call), 0, false, #call, __FILE__, __LINE__)
#define RSD_REQUIRE_ERR(code, call) tcheck_rc((call), -(code), true, #call, __FILE__, __LINE__)
#define RSD_CHECK_ERR(code, call) tcheck_rc((call), -(code), false, #call, __FILE__, __LINE__)

#endif
