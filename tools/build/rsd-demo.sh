#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The main job: run the rsd-demo workload, recorded with LTTng when the tools
# are here, then summarize the trace with rsd-trace and draw its plot, and
# write beside it the Trace Event file (trace.json, for Perfetto) and the
# report page (report.html); with RSD_DEMO_SCREENSHOT=1 (make demo-report)
# also a PNG screenshot of the page, taken by headless Chromium.
#
# Root's LTTng session daemon is shared by the whole machine, so the
# recording is made by rsd-record (beside this script): a private mount
# namespace with fresh tmpfs on /run/lttng and /dev/shm and its own
# lttng-sessiond, stopped by pid afterwards. When rsd-record says recording
# is impossible here (no lttng or unshare, unshare not permitted), or
# babeltrace2 or python3 (for rsd-trace) is missing, the workload runs
# unrecorded.
#
# With RSD_DEMO_RANKS=N (make demo RANKS=N) the workload runs as an MPI job
# instead: mpirun -np N rsd-demo-mpi, one manager per rank, recorded as one
# session with the vpid context so that rsd-trace can tell the ranks apart
# (the job's own output, kept in demo.out, says which pid is which rank).
# RSD_MPIRUN names the launcher (default mpirun) and RSD_MPIRUN_ARGS adds
# arguments to it (--host, --hostfile...).
#
# usage: rsd-demo.sh [rsd-demo options]   (make demo [RANKS=N] DEMO_ARGS="...")
set -u

# This script is tools/build/rsd-demo.sh; rsd-record and rsd-trace are in
# tools/, the programs in the build directory.
here=$(cd "$(dirname "$0")/.." && pwd)
build=${RSD_BUILD_DIR:-$here/../build}
demo=$build/tools/rsd-demo
out=${RSD_DEMO_OUT:-$build/demo}

[ -x "$demo" ] || { echo "rsd-demo.sh: $demo is not built (run make)" >&2; exit 2; }

ranks=${RSD_DEMO_RANKS:-}
launch=("$demo")
context=()
if [ -n "$ranks" ]; then
	case $ranks in
	*[!0-9]* | 0*) echo "rsd-demo.sh: RANKS must be a positive number, not '$ranks'" >&2; exit 2 ;;
	esac
	demo=$(dirname "$demo")/rsd-demo-mpi
	[ -x "$demo" ] || {
		echo "rsd-demo.sh: RANKS=$ranks needs $demo, which is built only with Open MPI" \
			"(libopenmpi-dev; tools/build/install-deps installs it)" >&2
		exit 2
	}
	mpirun=${RSD_MPIRUN:-mpirun}
	command -v "$mpirun" >/dev/null 2>&1 ||
		{ echo "rsd-demo.sh: RANKS=$ranks needs $mpirun, which is not installed" >&2; exit 2; }
	# More ranks than cores is fine for a demo; Open MPI refuses root
	# unless told.
	launch=("$mpirun" -np "$ranks" --oversubscribe)
	[ "$(id -u)" = 0 ] && launch+=(--allow-run-as-root)
	# shellcheck disable=SC2206 # RSD_MPIRUN_ARGS is a list of words
	launch+=(${RSD_MPIRUN_ARGS:-} "$demo")
	context=(-c vpid)
fi

can_record() {
	local t why
	[ -x "$here/rsd-record" ] || { echo "not recording: $here/rsd-record is missing"; return 1; }
	for t in babeltrace2 python3; do
		command -v "$t" >/dev/null 2>&1 || { echo "not recording: $t is not installed"; return 1; }
	done
	why=$("$here/rsd-record" --check) || { echo "not recording: $why"; return 1; }
	return 0
}

if ! why=$(can_record); then
	echo "rsd-demo.sh: $why"
	exec "${launch[@]}" "$@"
fi

rm -rf "$out"
mkdir -p "$out"
trace=$out/trace

echo "recording with LTTng (isolated lttng-sessiond) into $trace"
"$here/rsd-record" -q "${context[@]+"${context[@]}"}" -s rsd-demo "$trace" -- \
	"${launch[@]}" "$@" | tee "$out/demo.out"
rc=${PIPESTATUS[0]}
if [ "$rc" -eq 70 ]; then
	echo "rsd-demo.sh: recording failed; running unrecorded" >&2
	exec "${launch[@]}" "$@"
fi
echo
echo "=== rsd-trace summary of $trace ==="
"$here/rsd-trace" ${ranks:+--ranks "$out/demo.out"} -o "$out/managed-bytes.svg" \
	--chrome "$out/trace.json" --html "$out/report.html" "$trace" ||
	echo "rsd-demo.sh: rsd-trace failed" >&2
# make demo-report: a picture of the page, taken by headless Chromium.
if [ -n "${RSD_DEMO_SCREENSHOT:-}" ] && [ -s "$out/report.html" ]; then
	if ! command -v chromium >/dev/null 2>&1; then
		echo "rsd-demo.sh: no screenshot: chromium is not installed (make deps)" >&2
	elif timeout 120 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
		--user-data-dir="$out/chromium.profile" --window-size=1400,2600 \
		--screenshot="$out/report.png" "file://$out/report.html" >"$out/chromium.log" 2>&1 &&
		[ -s "$out/report.png" ]; then
		echo
		echo "screenshot: $out/report.png"
	else
		echo "rsd-demo.sh: chromium could not take the screenshot: see $out/chromium.log" >&2
	fi
	rm -rf "$out/chromium.profile"
fi
exit "$rc"
