#! /usr/bin/env atf-sh
# SPDX-License-Identifier: MIT
#
# The README's minimal program, as a user builds it: its source is cut out
# of the README, compiled with the flags of this build's librsd.pc (its
# prefix pointed at the build and source trees, as `make install` points it
# at PREFIX), run without LD_LIBRARY_PATH, and run under valgrind with the
# suppression file make install installs, which must come out clean.

. "$(atf_get_srcdir)/find_lib.sh"

# Writes prog.c and builds ./prog with the README's command line.
build_prog()
{
	src=$(find_src README tests/supp/librsd.supp)
	lib=$(find_lib) || atf_skip "librsd.so not found beside the test tree"
	libdir=$(cd "$(dirname "$lib")" && pwd)
	[ -f "$libdir/librsd.pc" ] || atf_skip "no librsd.pc beside $lib"
	# A sanitized library leaves the runtime's symbols to the executable.
	if nm -D "$lib" 2>/dev/null | grep -q -E ' U __(asan|ubsan|tsan)_'; then
		atf_skip "a sanitized librsd links only into sanitized programs"
	fi
	awk '/^    #include <stdio.h>/ { on = 1 } on && /^[^ ]/ { exit } on' "$src/README" \
		| sed 's/^    //' >prog.c
	atf_check -s exit:0 grep -q rsd_manager_destroy prog.c
	# The README's line: cc prog.c $(pkg-config --cflags --libs librsd)
	flags=$(PKG_CONFIG_PATH="$libdir" pkg-config --define-variable=libdir="$libdir" \
		--define-variable=includedir="$src/include" --cflags --libs librsd) ||
		atf_fail "pkg-config cannot read $libdir/librsd.pc"
	case " $flags " in
	*" -Wl,-rpath,$libdir "*) ;;
	*) atf_fail "librsd.pc's Libs carry no run path: $flags" ;;
	esac
	# shellcheck disable=SC2086
	atf_check -s exit:0 cc prog.c $flags -o prog
}

atf_test_case builds_and_runs
builds_and_runs_head()
{
	atf_set "descr" "the README's program builds with pkg-config's flags and runs as built"
	atf_set "require.progs" "cc nm pkg-config"
}
builds_and_runs_body()
{
	build_prog
	atf_check -s exit:0 env -u LD_LIBRARY_PATH ./prog
}

atf_test_case valgrind_clean
valgrind_clean_head()
{
	atf_set "descr" "the README's program is clean under valgrind --leak-check=full" \
		"with the installed suppression file"
	atf_set "require.progs" "cc nm pkg-config valgrind"
	atf_set "timeout" "300"
}
valgrind_clean_body()
{
	[ -z "${RSD_UNDER_VALGRIND:-}" ] || atf_skip "already under valgrind"
	build_prog
	atf_check -s exit:0 -e ignore valgrind --leak-check=full --error-exitcode=1 \
		--suppressions="$src/tests/supp/librsd.supp" ./prog
}

atf_init_test_cases()
{
	atf_add_test_case builds_and_runs
	atf_add_test_case valgrind_clean
}
