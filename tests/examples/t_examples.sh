#! /usr/bin/env atf-sh
# SPDX-License-Identifier: MIT
# The examples in tools/examples are built by make and run here, so they
# cannot rot: each must exit 0 and print what it promises.

# Sets $prog to the example's path, or leaves it empty.
find_example() {
	prog=
	for d in "${RSD_BUILD_DIR:-/nonexistent}/tools/examples" \
		"$(atf_get_srcdir)/../../tools/examples" \
		"$(atf_get_srcdir)/../../../share/rsd/examples"; do
		if [ -x "$d/$1" ]; then
			prog=$d/$1
			return 0
		fi
	done
	return 1
}

need_example() {
	find_example "$1" || atf_skip "example $1 is not built (set RSD_BUILD_DIR)"
}

# Sets $prog to the tool's path (build tree, source tree, installed), or
# leaves it empty.
find_tool() {
	prog=
	for d in "${RSD_BUILD_DIR:-/nonexistent}/tools" "$(atf_get_srcdir)/../../tools" \
		"$(atf_get_srcdir)/../../../bin"; do
		if [ -x "$d/$1" ]; then
			prog=$d/$1
			return 0
		fi
	done
	return 1
}

atf_test_case explicit
explicit_head() {
	atf_set "descr" "explicit residency: adopt, move, lease, explain and a scope"
}
explicit_body() {
	need_example explicit
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
	need_example source
	atf_check -s exit:0 -o match:"loads=2, key resident at 1 location" "$prog"
}

atf_test_case automatic
automatic_head() {
	atf_set "descr" "automatic residency: the LRU evicts the least recently used block"
}
automatic_body() {
	need_example automatic
	atf_check -s exit:0 -o save:out "$prog"
	# Ids: manager 1, blocks 2, 3, 4. Stage 2 evicts block 0 (id 2),
	# stage 3 the older block 1 (id 3), stage 4 block 0 again: block 2
	# has a higher priority.
	atf_check -o match:"stage 2: block 2 in pinned, 1 evictions \[drop 2:" cat out
	atf_check -o match:"stage 3: block 0 in pinned, 1 evictions \[drop 3:" cat out
	atf_check -o match:"stage 4: block 1 in pinned, 1 evictions \[drop 2:" cat out
	atf_check -o match:"stage 5: block 2 in pinned, 0 evictions" cat out
}

atf_test_case output
output_head() {
	atf_set "descr" "a kernel's output adopted into its reservation: the device stays exactly full"
}
output_body() {
	need_example output
	atf_check -s exit:0 -o inline:"entered: cuda:0 used 4096, reserved 4096 of 8192 bytes\nadopted: cuda:0 used 8192, reserved 0 of 8192 bytes\nresult: 4096 bytes, 0 wrong\n" \
		"$prog"
}

atf_test_case prefetch
prefetch_head() {
	atf_set "descr" "prefetching: each batch's copies are queued while the previous" \
		"batch's kernel runs, and every kernel reads its own batch's bytes"
}
prefetch_body() {
	need_example prefetch
	atf_check -s exit:0 -o save:out "$prog"
	# Room for the weights and two batches: from batch 2 on, deciding a
	# batch drops the one two back (its kernel was waited for).
	for i in 0 1 2 3 4 5 6 7; do
		n=1
		[ "$i" -lt 2 ] && n=0
		atf_check -o match:"^batch $i: $n evictions; kernel read 65536 input and 32768 weight bytes: intact$" cat out
	done
	atf_check -o match:"^8 of 8 batches intact; the host waited 7 times \(6 for the kernel two batches back, 1 for the last\)$" cat out
	# When kernel i ends is the device's business: only the count's range.
	atf_check -o match:"^the next batch's copies were queued before the current kernel finished in [0-7] of 7 batches$" cat out
}

atf_test_case mpi
mpi_head() {
	atf_set "descr" "two MPI ranks: a value sent by one is adopted by the other under a new handle"
	atf_set "timeout" "120"
}
mpi_body() {
	command -v mpirun >/dev/null 2>&1 || atf_skip "MPI is absent: mpirun is not installed"
	find_example mpi_exchange || atf_skip "example mpi_exchange is not built (no mpicc?)"
	# Open MPI's own allocations are never freed: LeakSanitizer (in a
	# SANITIZE build) must look only at what librsd does, which the
	# other examples and tests cover.
	ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
	export ASAN_OPTIONS
	atf_check -s exit:0 -o save:out -e ignore \
		mpirun --allow-run-as-root --oversubscribe -x ASAN_OPTIONS -np 2 "$prog"
	atf_check -o match:"rank 0 pid [0-9]+: manager [0-9]+ adopted handle [0-9]+, checksum ok" cat out
	atf_check -o match:"rank 1 pid [0-9]+: manager [0-9]+ adopted handle [0-9]+, checksum ok, metadata level=5" cat out
}

atf_test_case demo
demo_head() {
	atf_set "descr" "the demo workload finishes with every value intact"
	atf_set "timeout" "300"
}
demo_body() {
	find_tool rsd-demo || atf_skip "rsd-demo is not built"
	atf_check -s exit:0 -o save:out -e ignore "$prog" -s 12 -q
	# Both policies run, each verified, then side by side with the bound.
	atf_check_equal "$(grep -c 'verified 24 ciphertexts and 6 keys .*: all intact' out)" 2
	atf_check -o match:"device: cuda:0 (is the simulated device|through the CUDA runtime)" cat out
	atf_check -o inline:"=== policy: deterministic-tiered-lru ===\n=== policy: deterministic-next-use ===\n=== side by side: MiB moved by the 12 stages ===\n" \
		grep '^===' out
	atf_check -o match:"^host -> device +[0-9.]+ +[0-9.]+$" cat out
	atf_check -o match:"^offline bound +[0-9.]+ +\(Belady on bytes, lower\)$" cat out
	# The table: the first three stages, then one line per run of equal
	# stages (the steady state from stage 7 is one line), then totals that
	# are the sums of the rows.
	atf_check -s exit:0 -o save:table "$prog" -s 12 --policy lru
	awk '/^stage /{on=1; next} on && NF {print $1} /^total/{exit}' table >rows
	if grep -q "is the simulated device" out; then
		# Immediate progress: every lease completes as it is released, so
		# the run is deterministic and its figures exact.
		atf_check -o inline:"0\n1\n2\n3\n4-6\n7-11\ntotal\n" cat rows
		atf_check -o inline:"total       52     32    20      120.0       44.0       20.0      24.0M       64\n" \
			grep '^total' table
	else
		# An asynchronous device (the CUDA driver): when a stage's leases
		# complete depends on timing, so only the table's shape is fixed.
		atf_check -o inline:"0\n1\n2\n" head -n 3 rows
		atf_check -o inline:"total\n" tail -n 1 rows
		atf_check -s exit:1 grep -Ev '^([0-9]+(-[0-9]+)?|total)$' rows
		atf_check -o match:"^total +[0-9]+ +[0-9]+ +[0-9]+ +120.0 " grep '^total' table
	fi
	atf_check -o match:"^  device   -> pinned .* spilled: the device budget was full$" cat table
	# By default each stage's use is made while the stage before computes.
	atf_check -o match:"^12 stages in [0-9.]+ s, prefetching: each stage's copies queued while the stage before computed$" cat table
	if grep -q "is the simulated device" out; then
		atf_check -o match:"^the stages' kernels read 48 values on the device: all intact$" cat table
	fi
}

atf_test_case demo_prefetch
demo_prefetch_head() {
	atf_set "descr" "the demo's stages waiting for their copies or prefetching: the same" \
		"figures on an immediate device, both verified and timed on the link model"
	atf_set "timeout" "300"
}
demo_prefetch_body() {
	find_tool rsd-demo || atf_skip "rsd-demo is not built"
	atf_check -s exit:0 -o save:pre "$prog" -s 12 --policy lru
	atf_check -s exit:0 -o save:wait "$prog" -s 12 --policy lru --no-prefetch
	atf_check -o match:"^12 stages in [0-9.]+ s, waiting for each stage's copies$" cat wait
	grep -q "is the simulated device" wait || atf_skip "timing modes need the simulated device"
	# Work runs as it is queued: prefetching decides exactly as waiting.
	atf_check -o save:pre.table sed -n '/^stage /,/^total/p' pre
	atf_check -o file:pre.table sed -n '/^stage /,/^total/p' wait
	atf_check -o match:"^the stages' kernels read 48 values on the device: all intact$" cat wait

	# On the link model, in the background: both modes, verified, timed.
	atf_check -s exit:0 -o save:cmp -e ignore "$prog" -s 6 --policy lru --compare-prefetch -q
	atf_check -o inline:"=== policy: deterministic-tiered-lru, waiting for each stage's copies ===\n=== policy: deterministic-tiered-lru, prefetching ===\n=== waiting or prefetching: elapsed time of the 6 stages ===\n" \
		grep '^===' cmp
	atf_check_equal "$(grep -c 'its links modelled, work run in the background$' cmp)" 2
	atf_check_equal "$(grep -c "^the stages' kernels read 24 values on the device: all intact$" cmp)" 2
	atf_check_equal "$(grep -c 'verified 24 ciphertexts and 6 keys .*: all intact' cmp)" 2
	atf_check -o match:"^deterministic-tiered-lru +[0-9]+\.[0-9]{3} s +[0-9]+\.[0-9]{3} s +-?[0-9]+\.[0-9]%$" cat cmp

	# A device for one stage (5 MiB of 6) and kernels of 200 ms: deciding
	# stage s + 1 while kernel s protects its 4 MiB is infeasible, so both
	# modes decide it again once kernel s has run, and still finish intact.
	atf_check -s exit:0 -o save:small -e ignore "$prog" -s 3 --policy lru --compare-prefetch \
		-q --kernel-us 2000 --ct-mib 1 --key-mib 1 --weight-mib 1 --workspace-mib 1 \
		--device-mib 6 --pinned-mib 6
	atf_check_equal "$(grep -c "^2 times the device could not hold two stages' values: the next stage was decided again once this one's kernel had run$" small)" 2
	atf_check_equal "$(grep -c "^the stages' kernels read 12 values on the device: all intact$" small)" 2
}

atf_test_case demo_ranks
demo_ranks_head() {
	atf_set "descr" "the demo as a two-rank MPI job: ciphertexts travel the ring and every" \
		"one is verified, exactly once, on the rank that owns it"
	atf_set "timeout" "300"
}
demo_ranks_body() {
	command -v mpirun >/dev/null 2>&1 || atf_skip "MPI is absent: mpirun is not installed"
	find_tool rsd-demo-mpi || atf_skip "rsd-demo-mpi is not built (no Open MPI when it was built)"
	ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
	export ASAN_OPTIONS
	atf_check -s exit:0 -o save:out -e ignore \
		mpirun --allow-run-as-root --oversubscribe -x ASAN_OPTIONS -np 2 "$prog" -s 36
	# Rank 0's report, then rank 1's, then the job's; each rank on its own
	# cuda:<local rank>.
	atf_check -o inline:"== rank 0 (pid N) of 2 ==\n== rank 1 (pid N) of 2 ==\n== job: 2 ranks ==\n" \
		sh -c "grep '^== ' out | sed -E 's/pid [0-9]+/pid N/'"
	atf_check -o match:"device: cuda:0 (is the simulated device|through the CUDA runtime)" cat out
	atf_check -o match:"device: cuda:1 (is the simulated device|through the CUDA runtime)" cat out
	# One ciphertext each way per stage, staged on pinned host.
	atf_check -o match:"sent 36 ciphertexts \(72.0 MiB\) to rank 1 from pinned-host leases; received 36 from rank 1" cat out
	atf_check -o match:"sent 36 ciphertexts \(72.0 MiB\) to rank 0 from pinned-host leases; received 36 from rank 0" cat out
	atf_check -o match:"staged on pinned host for an MPI send" cat out
	atf_check_equal "$(grep -c 'verified 24 ciphertexts and 6 keys .*: all intact' out)" 2
	atf_check -o match:"^ring: 72 ciphertexts sent, 72 received and adopted \(144.0 MiB\)$" cat out
	atf_check -o match:"^verified 48 ciphertexts \(each owned by exactly one rank: yes\) and 12 keys .* on 2 ranks: all intact$" cat out
	# Compact tables: stages 0-2 in full, then runs, the 12-stage cycle of
	# the steady state once, then totals.
	atf_check_equal "$(grep -c '^total ' out)" 2
	atf_check_equal "$(grep -c '^19-35    (stages 7-18 again, every 12 stages)$' out)" 2
	[ "$(awk '/^per stage/,/^total/' out | wc -l)" -lt 50 ] || atf_fail "the per-stage tables are not compact"
}

atf_init_test_cases() {
	atf_add_test_case explicit
	atf_add_test_case source
	atf_add_test_case automatic
	atf_add_test_case output
	atf_add_test_case prefetch
	atf_add_test_case mpi
	atf_add_test_case demo
	atf_add_test_case demo_prefetch
	atf_add_test_case demo_ranks
}
