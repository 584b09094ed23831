# SPDX-License-Identifier: MIT
#
# find_lib: print the path of librsd.so for a test program in DIR (default:
# the calling test's srcdir), in the build tree ($O/tests/AREA/../../) or the
# install tree ($PREFIX/tests/rsd/AREA/../../../lib/); return 1 when there
# is none. Sourced by tests/selftest/t_symbols.sh and tests/doc/t_doc.sh.

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
