#! /usr/bin/env atf-sh
# SPDX-License-Identifier: MIT
#
# The shared library exports exactly the public names: rsd_* functions and
# RSD_* constants of include/rsd/. rsd__* helpers and everything else stay
# local (lib/librsd.map). Finds the library in the build tree
# ($O/tests/selftest/../../) or the install tree ($PREFIX/tests/rsd/selftest/
# ../../../lib/).

. "$(atf_get_srcdir)/find_lib.sh"

atf_test_case exports_only_public_names
exports_only_public_names_head()
{
	atf_set "descr" "librsd.so exports rsd_* and RSD_* only, never rsd__*"
	atf_set "require.progs" "nm"
}
exports_only_public_names_body()
{
	lib=$(find_lib) || atf_skip "librsd.so not found beside the test tree"
	nm -D --defined-only "$lib" | awk '$2 ~ /^[A-Z]$/ && $2 != "A" { print $3 }' \
		| sed 's/@.*//' | sort -u >exported
	atf_check -s exit:0 test -s exported
	atf_check -s exit:0 grep -qx rsd_strerror exported
	atf_check -s exit:0 grep -qx rsd_location_parse exported
	atf_check -s exit:0 grep -qx RSD_LOC_PAGEABLE_HOST exported
	atf_check -s exit:1 grep -v -E '^(rsd_[^_]|RSD_)' exported
}

atf_test_case soname
soname_head()
{
	atf_set "descr" "librsd.so carries soname librsd.so.0 and resolves to it"
	atf_set "require.progs" "readelf"
}
soname_body()
{
	lib=$(find_lib) || atf_skip "librsd.so not found beside the test tree"
	atf_check -s exit:0 -o match:'\(SONAME\).*\[librsd\.so\.0\]' readelf -d "$lib"
	atf_check -s exit:0 test -e "$(dirname "$lib")/librsd.so.0"
}

atf_init_test_cases()
{
	atf_add_test_case exports_only_public_names
	atf_add_test_case soname
}
