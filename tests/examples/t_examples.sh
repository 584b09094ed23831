#! /usr/bin/env atf-sh
# SPDX-License-Identifier: MIT
# The examples in tools/examples are built by make and run here, so they
# cannot rot: each must exit 0 and print what it promises.

example() {
	for d in "${RSD_BUILD_DIR:-}/tools/examples" "$(atf_get_srcdir)/../../tools/examples" \
		"$(atf_get_srcdir)/../../bin"; do
		if [ -x "$d/$1" ]; then
			echo "$d/$1"
			return 0
		fi
	done
	atf_skip "example $1 not built (set RSD_BUILD_DIR)"
}

atf_test_case explicit
explicit_head() {
	atf_set "descr" "explicit residency: adopt, move, lease, explain and a scope"
}
explicit_body() {
	prog=$(example explicit) || return
	atf_check -s exit:0 -o match:"moved 32768 bytes, no_op=0" \
		-o match:"metadata travelled: level=3 scale=2\^40" \
		-o match:"plan stage-1 feasible=1, predicted pinned peak 49152 bytes" \
		-o match:"scope ran 2 transitions" "$prog"
}

atf_test_case source
source_head() {
	atf_set "descr" "a reconstruction source reloads a dropped key exactly once"
}
source_body() {
	prog=$(example source) || return
	atf_check -s exit:0 -o match:"loads=2, key resident at 1 location" "$prog"
}

atf_test_case automatic
automatic_head() {
	atf_set "descr" "automatic residency: controller, policy metadata, use"
}
automatic_body() {
	prog=$(example automatic) || return
	atf_check -s exit:0 -o match:"evictions" "$prog"
}

atf_init_test_cases() {
	atf_add_test_case explicit
	atf_add_test_case source
	atf_add_test_case automatic
}
