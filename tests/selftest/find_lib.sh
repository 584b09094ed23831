# SPDX-License-Identifier: MIT
#
# find_lib: print the path of librsd.so for a test program in DIR (default:
# the calling test's srcdir), in the build tree ($O/tests/AREA/../../) or the
# install tree ($PREFIX/tests/rsd/AREA/../../../lib/); return 1 when there
# is none. Sourced by tests/selftest/t_symbols.sh, t_readme.sh and
# tests/doc/t_doc.sh, which also use find_src.

find_lib()
{
	for d in "$(atf_get_srcdir)/../.." "$(atf_get_srcdir)/../../../lib"; do
		if [ -f "$d/librsd.so" ]; then
			echo "$d/librsd.so"
			return 0
		fi
	done
	return 1
}

# find_src FILE...: print the source tree that holds every FILE (relative
# paths): $RSD_SRCDIR (set by make check), else the tree the build
# directory sits in; skip the test when there is none (an installed suite).
find_src()
{
	for d in "${RSD_SRCDIR:-}" "$(atf_get_srcdir)/../../.."; do
		[ -n "$d" ] || continue
		for f in "$@"; do
			[ -f "$d/$f" ] || continue 2
		done
		(cd "$d" && pwd)
		return 0
	done
	atf_skip "librsd sources not found (set RSD_SRCDIR)"
}
