#! /usr/bin/env atf-sh
# SPDX-License-Identifier: MIT
#
# The layering of lib/ as the sources say it: the controller (lib/ctrl)
# reads the core only through its read side, lib/core/image.h, so no file
# of lib/ctrl reaches another lib/core header, directly or through the
# headers it includes (lib/plan/plan.h includes core.h; plan_api.h does
# not). And every source file a comment in lib/ names exists.

. "$(atf_get_srcdir)/find_lib.sh"

# reach FILE: print the project headers FILE includes, directly or not
# ("..." includes, resolved beside the including file), one per line.
reach()
{
	todo=$1
	seen=
	while [ -n "$todo" ]; do
		set -- $todo
		f=$1
		shift
		todo=$*
		d=$(dirname "$f")
		for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
			h=$(cd "$d" 2>/dev/null && cd "$(dirname "$inc")" 2>/dev/null &&
			    echo "$(pwd)/$(basename "$inc")")
			[ -f "$h" ] || continue
			case " $seen " in *" $h "*) continue ;; esac
			seen="$seen $h"
			todo="$todo $h"
			echo "$h"
		done
	done
}

# check_ctrl TREE: fail naming each lib/ctrl file of TREE that reaches a
# lib/core header other than image.h.
check_ctrl()
{
	root=$(cd "$1" && pwd)
	bad=0
	for f in "$root"/lib/ctrl/*.c "$root"/lib/ctrl/*.h; do
		[ -f "$f" ] || continue
		for h in $(reach "$f"); do
			case "$h" in
			"$root"/lib/core/image.h) ;;
			"$root"/lib/core/*)
				echo "${f#$root/} reaches ${h#$root/}"
				bad=1
				;;
			esac
		done
	done
	return $bad
}

atf_test_case ctrl_reads_image_only
ctrl_reads_image_only_head()
{
	atf_set "descr" "lib/ctrl includes no lib/core header but image.h, not even through others"
}
ctrl_reads_image_only_body()
{
	src=$(find_src lib/core/image.h lib/ctrl/ctrl.h)
	check_ctrl "$src" >out || atf_fail "lib/ctrl reaches the writer's headers: $(cat out)"
	# The controller does read the image: the check is not vacuous.
	reach "$src/lib/ctrl/pstate.h" >reached
	atf_check -s exit:0 grep -q '/lib/core/image.h$' reached
}

atf_test_case check_catches_writer_headers
check_catches_writer_headers_head()
{
	atf_set "descr" "the layering check names a direct and an indirect include of core.h"
}
check_catches_writer_headers_body()
{
	mkdir -p t/lib/core t/lib/ctrl t/lib/plan
	: >t/lib/core/image.h
	echo '#include "image.h"' >t/lib/core/core.h
	echo '#include "../core/core.h"' >t/lib/plan/plan.h
	echo '#include "../core/image.h"' >t/lib/plan/plan_api.h
	echo '#include "../plan/plan_api.h"' >t/lib/ctrl/good.c
	check_ctrl t >out || atf_fail "a clean tree was refused: $(cat out)"
	echo '#include "../plan/plan.h"' >t/lib/ctrl/indirect.c
	echo '#include "../core/core.h"' >t/lib/ctrl/direct.h
	check_ctrl t >out && atf_fail "the check let lib/ctrl reach core.h"
	atf_check -s exit:0 -o inline:'lib/ctrl/direct.h reaches lib/core/core.h
lib/ctrl/indirect.c reaches lib/core/core.h
' sort out
}

atf_test_case comments_name_existing_files
comments_name_existing_files_head()
{
	atf_set "descr" "every foo.c or foo.h named in lib/ is a file of the tree or a system header"
}
comments_name_existing_files_body()
{
	src=$(find_src lib/core/image.h)
	# System headers: whatever lib/ includes with <...>.
	grep -rhoE '#[[:space:]]*include[[:space:]]*<[^>]*>' "$src/lib" |
		sed 's/.*<\(.*\)>/\1/; s,.*/,,' | sort -u >system
	grep -rhoE '(^|[^-/.a-zA-Z0-9_])[a-z0-9_]+\.[ch]\b' "$src/lib" |
		sed 's/^[^a-z0-9_]//' | sort -u >named
	atf_check -s exit:0 test -s named
	: >missing
	while read -r n; do
		grep -qx "$n" system && continue
		[ -n "$(find "$src/lib" "$src/include" "$src/tests" "$src/tools" \
			-name "$n" -print 2>/dev/null | head -n 1)" ] && continue
		echo "$n" >>missing
	done <named
	atf_check -s exit:0 -o empty cat missing
}

atf_init_test_cases()
{
	atf_add_test_case ctrl_reads_image_only
	atf_add_test_case check_catches_writer_headers
	atf_add_test_case comments_name_existing_files
}
