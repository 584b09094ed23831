#! /usr/bin/env atf-sh
# SPDX-License-Identifier: MIT
#
# The reference stays true: every exported symbol has kernel-doc and a man
# page, every page renders cleanly, every code a Return: section names
# exists and the codes real error paths return are listed, and the tree
# cites only its own reference. Nothing here lists symbols, pages or codes:
# they are discovered from librsd.so, the headers and the built pages, so a
# symbol another branch adds without kernel-doc fails this test.
#
# The built pages are $O/man (beside the test tree: srcdir/../../man); the
# sources are $RSD_SRCDIR (set by make check), else srcdir/../../.. when
# the build directory sits in the source tree. Installed, without sources,
# the source checks are skipped.

mandir()
{
	d="$(atf_get_srcdir)/../../man"
	[ -f "$d/symbols.txt" ] || atf_skip "no built man pages at $d (make man)"
	(cd "$d" && pwd)
}

srcdir()
{
	find_src include/rsd/rsd.h tools/build/kdoc2man.py
}

. "$(atf_get_srcdir)/../selftest/find_lib.sh"

# grep_tree SRC GREP-OPTIONS... PATTERN: grep the tree's text files (without
# build outputs and version control) from SRC; prints what grep prints.
grep_tree()
{
	src=$1
	shift
	if [ -d "$src/.git" ] || [ -f "$src/.git" ]; then
		git -C "$src" ls-files --cached --others --exclude-standard
	else
		(cd "$src" && find . -type f ! -path './build*' ! -path './.git/*' | sed 's|^\./||')
	fi >files
	[ -s files ] || atf_fail "no files found in $src"
	(cd "$src" && tr '\n' '\0' <"$OLDPWD/files" | xargs -0 grep -IE "$@" -- 2>/dev/null) || true
}

# subset_of SUB SUPER WHAT: fail naming the lines of sorted file SUB that
# sorted file SUPER lacks.
subset_of()
{
	[ -s "$1" ] || atf_fail "$3: nothing to check ($1 is empty)"
	comm -23 "$1" "$2" >extra
	[ ! -s extra ] || atf_fail "$3: $(tr '\n' ' ' <extra)"
}

atf_test_case exported_symbols_documented
exported_symbols_documented_head()
{
	atf_set "descr" "every symbol librsd.so exports has kernel-doc and a page man -w finds"
	atf_set "require.progs" "nm man"
}
exported_symbols_documented_body()
{
	man=$(mandir)
	lib=$(find_lib) || atf_skip "librsd.so not found beside the test tree"
	nm -D --defined-only "$lib" | awk '$2 ~ /^[A-Z]$/ && $2 != "A" { print $3 }' \
		| sed 's/@.*//' | sort -u >exported
	atf_check -s exit:0 test -s exported
	cut -d' ' -f1 "$man/symbols.txt" | sort -u >documented
	subset_of exported documented "exported without kernel-doc in include/rsd/"
	: >unfound
	while read -r s; do
		man -M "$man" -w "$s" >/dev/null 2>&1 || echo "$s" >>unfound
	done <exported
	if [ -s unfound ]; then
		atf_fail "man -M $man -w finds no page for: $(tr '\n' ' ' <unfound)"
	fi
	# The overview and the tools' pages.
	for p in librsd rsd-demo rsd-trace rsd-record rsd-bench rsd-soak; do
		atf_check -s exit:0 -o ignore man -M "$man" -w "$p"
	done
}

atf_test_case overview_links_every_page
overview_links_every_page_head()
{
	atf_set "descr" "librsd(7) lists every other page in SEE ALSO"
}
overview_links_every_page_body()
{
	man=$(mandir)
	for f in "$man"/man[1-9]/*; do
		case $(head -c3 "$f") in .so) continue ;; esac
		b=${f##*/}
		echo "${b%.*}(${b##*.})"
	done | grep -vx 'librsd(7)' | sort -u >pages
	sed -n '/^\.SH SEE ALSO/,$p' "$man/man7/librsd.7" | sed 's/\\f[BRP]//g; s/,$//' \
		| grep -E '^[A-Za-z_.-]+\([0-9]\)$' | sort -u >linked
	subset_of pages linked "pages librsd(7) does not list in SEE ALSO"
}

atf_test_case kdoc_complete
kdoc_complete_head()
{
	atf_set "descr" "every rsd_ declaration in include/rsd/ has complete kernel-doc"
	atf_set "require.progs" "python3"
}
kdoc_complete_body()
{
	src=$(srcdir)
	atf_check -s exit:0 -o empty -e empty python3 "$src/tools/build/kdoc2man.py" --strict -o out \
		"$src"/include/rsd/*.h
}

atf_test_case pages_render
pages_render_head()
{
	atf_set "descr" "every built page renders with groff -ww -man without a warning"
	atf_set "require.progs" "groff"
}
pages_render_body()
{
	man=$(mandir)
	n=0
	for f in "$man"/man[1-9]/*; do
		rel=${f#"$man"/}
		# A link page renders as its target: check the target exists.
		target=$(sed -n '1s/^\.so //p' "$f")
		if [ -n "$target" ]; then
			[ -f "$man/$target" ] || atf_fail "$rel links to missing $target"
			continue
		fi
		out=$(cd "$man" && groff -ww -z -man -Tutf8 "$rel" 2>&1 | tr '\n' ' ')
		[ -z "$out" ] || atf_fail "$rel: $out"
		n=$((n + 1))
	done
	atf_check -s exit:0 test "$n" -gt 20
}

atf_test_case return_codes_exist
return_codes_exist_head()
{
	atf_set "descr" "every RSD_E* code a Return: section names is one of include/rsd/error.h"
}
return_codes_exist_body()
{
	man=$(mandir)
	src=$(srcdir)
	sed -n '/^enum rsd_err {/,/^};/p' "$src/include/rsd/error.h" \
		| grep -oE '\bRSD_E[A-Z]+\b' | grep -vx RSD_EMAX | sort -u >codes
	atf_check -s exit:0 test "$(wc -l <codes)" -ge 20
	awk '{ for (i = 2; i <= NF; i++) print $i }' "$man/returns.txt" | sort -u >listed
	subset_of listed codes "Return: sections name codes error.h lacks"
}

atf_test_case error_paths_listed
error_paths_listed_head()
{
	atf_set "descr" "the code each probed error path returns is on its function's page"
}
error_paths_listed_body()
{
	man=$(mandir)
	probe="$(atf_get_srcdir)/errprobe"
	atf_check -s exit:0 test -x "$probe"
	atf_check -s exit:0 -o save:probed -e ignore "$probe"
	atf_check -s exit:0 test "$(wc -l <probed)" -ge 40
	while read -r fn code; do
		[ "$code" != 0 ] || atf_fail "$fn succeeded on an error path the probe expected to fail"
		line=$(grep -E "^$fn( |\$)" "$man/returns.txt") ||
			atf_fail "$fn has no Return: section in the pages"
		case " $line " in
		*" $code "*) ;;
		*) atf_fail "$fn returned -$code, which its page does not list: $line" ;;
		esac
	done <probed
}

atf_test_case error_messages_name_c
error_messages_name_c_head()
{
	atf_set "descr" "error messages name C things (rsd_ensure, RSD_EXCLUSIVE), not" \
		"the Python manager's API; only reference.md's fixed reason texts keep it"
}
error_messages_name_c_body()
{
	# The Python manager's names, and its enum members without RSD_.
	forbid='EnsureResident|MoveResident|DropResident|DiscardResident|AdoptResident'
	forbid="$forbid|ResidencyManager|ResidencyLocation|ResidencyPlan|ResidencyRequest"
	forbid="$forbid|ResidencyController|ResidencyDecision|preserve-only"
	forbid="$forbid|(^|[^_A-Za-z])(EXCLUSIVE|REPLICABLE|MUST_PRESERVE|PRESERVE|RECONSTRUCTIBLE)\b"
	forbid="$forbid|(^|[^_A-Za-z])(Ensure|Move|Drop|Discard|Decision|Lease|Hold|Snapshot)\b"

	# Every string literal of every rsd__err() call in lib/.
	src=$(srcdir)
	(cd "$src" && perl -0777 -ne '
		while (/\brsd__err\s*\(((?:"(?:[^"\\]|\\.)*"|[^;"])*)\)/gs) {
			my $args = $1;
			print "$ARGV: $1\n" while $args =~ /"((?:[^"\\]|\\.)*)"/g;
		}' lib/*.c lib/*/*.c) >literals
	atf_check -s exit:0 test "$(wc -l <literals)" -ge 300
	grep -E "$forbid" literals >hits || true
	[ ! -s hits ] || atf_fail "messages naming the Python API: $(head -5 hits | tr '\n' ' ')"

	# The messages real error paths produce (errprobe's stderr), less the
	# explain reasons reference.md §10.3 fixes for parity, which an
	# infeasible plan's RSD_EPLAN message carries.
	probe="$(atf_get_srcdir)/errprobe"
	atf_check -s exit:0 -o ignore -e save:messages "$probe"
	atf_check -s exit:0 test "$(wc -l <messages)" -ge 40
	sed -e 's/EnsureResident would replicate an EXCLUSIVE value//' \
	    -e 's/cannot drop final MUST_PRESERVE materialization//' \
	    -e "s/ResidencyLocation([^)]*)//g" messages | grep -E "$forbid" >hits || true
	[ ! -s hits ] || atf_fail "messages naming the Python API: $(head -5 hits | tr '\n' ' ')"
}

atf_test_case pages_name_installed_docs
pages_name_installed_docs_head()
{
	atf_set "descr" "the pages cite the documentation by the path make install puts it at"
}
pages_name_installed_docs_body()
{
	man=$(mandir)
	src=$(srcdir)
	(cd "$man" && cat man[1-9]/*) | grep -oE '[^[:space:](]*[a-z-]+\.md' | sort -u >cited
	atf_check -s exit:0 test "$(wc -l <cited)" -ge 3
	sed 's|/[^/]*$||' cited | sort -u >dirs
	[ "$(wc -l <dirs)" -eq 1 ] || atf_fail "documents cited from several places: $(tr '\n' ' ' <dirs)"
	case "$(cat dirs)" in
	*/share/doc/librsd) ;;
	*) atf_fail "documents cited in $(cat dirs), not in PREFIX/share/doc/librsd" ;;
	esac
	while read -r f; do
		[ -f "$src/Documentation/${f##*/}" ] || atf_fail "$f: no such document in Documentation/"
	done <cited
}

atf_test_case no_outside_references
no_outside_references_head()
{
	atf_set "descr" "no file in the tree points at documents outside it"
}
no_outside_references_body()
{
	src=$(srcdir)
	# Spelled in pieces so this file does not match itself.
	up='\.\./'"shared"
	spec='semantics'"\\.md"
	grep_tree "$src" -n "$up|$spec" >hits
	[ ! -s hits ] || atf_fail "outside references: $(head -5 hits | tr '\n' ' ')"
}

atf_test_case cited_sections_exist
cited_sections_exist_head()
{
	atf_set "descr" "every section a file cites with § exists in Documentation/reference.md"
}
cited_sections_exist_body()
{
	src=$(srcdir)
	ref="$src/Documentation/reference.md"
	atf_check -s exit:0 test -f "$ref"
	# Headings "## 8. ..." and "### 8.9 ...", and the numbered items of the
	# two chapters that are lists ("## 18. Edge cases": 18.1, 18.2, ...).
	awk '/^##+ [0-9]/ { n = $2; sub(/\.$/, "", n); print n
	                    ch = ($1 == "##" && /Edge cases|easy to get wrong/) ? n : ""; next }
	     /^[0-9]+\. / && ch != "" { i = $1; sub(/\.$/, "", i); print ch "." i }' "$ref" \
		| sort -u >sections
	atf_check -s exit:0 test "$(wc -l <sections)" -ge 50
	grep_tree "$src" -oh '§[0-9]+(\.[0-9]+)*' | sed 's/^§//; s/\.$//' | sort -u >cited
	subset_of cited sections "cited but not in reference.md"
}

atf_init_test_cases()
{
	atf_add_test_case exported_symbols_documented
	atf_add_test_case overview_links_every_page
	atf_add_test_case kdoc_complete
	atf_add_test_case pages_render
	atf_add_test_case return_codes_exist
	atf_add_test_case error_paths_listed
	atf_add_test_case error_messages_name_c
	atf_add_test_case pages_name_installed_docs
	atf_add_test_case no_outside_references
	atf_add_test_case cited_sections_exist
}
