#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The main job: run the rsd-demo workload, recorded with LTTng when the tools
# are here, then summarize the trace with rsd-trace and draw its plot.
#
# Root's LTTng session daemon is shared by the whole machine, so the
# recording runs in a private mount namespace with fresh tmpfs on /run/lttng
# and /dev/shm and its own lttng-sessiond, stopped by pid afterwards.
# Without lttng, babeltrace2 or unshare the workload runs unrecorded.
#
# usage: rsd-demo.sh [rsd-demo options]   (make demo DEMO_ARGS="...")
set -u

here=$(cd "$(dirname "$0")" && pwd)
build=${RSD_BUILD_DIR:-$here/../build}
demo=$build/tools/rsd-demo
out=${RSD_DEMO_OUT:-$build/demo}
# Installed: rsd-demo and rsd-trace sit beside this script.
if [ ! -x "$demo" ] && [ -x "$here/rsd-demo" ]; then
	demo=$here/rsd-demo
	out=${RSD_DEMO_OUT:-${TMPDIR:-/tmp}/rsd-demo.$$}
fi

[ -x "$demo" ] || { echo "rsd-demo.sh: $demo is not built (run make)" >&2; exit 2; }

can_record() {
	for t in lttng lttng-sessiond babeltrace2 unshare python3; do
		command -v "$t" >/dev/null 2>&1 || { echo "not recording: $t is not installed"; return 1; }
	done
	unshare --mount --propagation private true 2>/dev/null ||
		{ echo "not recording: unshare --mount is not permitted here"; return 1; }
	return 0
}

if ! why=$(can_record); then
	echo "rsd-demo.sh: $why"
	exec "$demo" "$@"
fi

rm -rf "$out"
mkdir -p "$out/work"
trace=$out/trace
cat >"$out/record.sh" <<'REC'
set -u
W=$1; OUT=$2; shift 2
fail() { echo "rsd-demo.sh: $*" >&2; exit 70; }
if [ -d /run/lttng ]; then
	mount -t tmpfs -o mode=0755 rsd-lttng /run/lttng || fail "mount /run/lttng"
else
	mount -t tmpfs -o mode=0755 rsd-run /run || fail "mount /run"
	mkdir /run/lttng || fail "mkdir /run/lttng"
fi
mount -t tmpfs -o mode=1777 rsd-shm /dev/shm || fail "mount /dev/shm"
export HOME=$W/home LTTNG_HOME=$W/home
mkdir -p "$HOME"
lttng-sessiond --no-kernel --daemonize --pidfile="$W/sessiond.pid" >"$W/sessiond.log" 2>&1 ||
	fail "lttng-sessiond did not start: $(cat "$W/sessiond.log")"
SD=$(cat "$W/sessiond.pid")
stop() {
	kill "$SD" 2>/dev/null
	for _ in $(seq 100); do kill -0 "$SD" 2>/dev/null || return 0; sleep 0.1; done
	kill -9 "$SD" 2>/dev/null
}
trap stop EXIT
{ lttng create rsd-demo --output="$OUT" && lttng enable-event --userspace 'rsd:*' &&
  lttng start; } >"$W/lttng.log" 2>&1 || fail "lttng: $(cat "$W/lttng.log")"
"$@"
rc=$?
{ lttng stop && lttng destroy; } >>"$W/lttng.log" 2>&1 || fail "lttng stop: $(cat "$W/lttng.log")"
exit $rc
REC

echo "recording with LTTng (isolated lttng-sessiond) into $trace"
unshare --mount --propagation private /bin/bash "$out/record.sh" "$out/work" "$trace" "$demo" "$@"
rc=$?
if [ $rc -eq 70 ]; then
	echo "rsd-demo.sh: recording failed; running unrecorded" >&2
	exec "$demo" "$@"
fi
echo
echo "=== rsd-trace summary of $trace ==="
"$here/rsd-trace" -o "$out/managed-bytes.svg" "$trace" || echo "rsd-demo.sh: rsd-trace failed" >&2
exit $rc
