#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Check a Trace Event format file written by rsd-trace --chrome.

usage: check_chrome.py FILE.json [COUNTS]

Checks what Perfetto's UI and chrome://tracing need to load the file as
is, and that it says what the trace said:
  - the file is one JSON object with a traceEvents list;
  - every event is well-formed for its phase (B E X i C M b e s f): the
    keys it needs, of the right types; X durations and counter values
    numbers >= 0;
  - every pid has a process_name, every thread used a thread_name;
  - B/E pairs match per thread, each E at or after its B, none left open;
    X slices on one thread nest or are disjoint;
  - async spans (b/e) match by (cat, id), each closed once, not before it
    opened;
  - flow arrows: each start (s) has one finish (f) at or after it, and
    each sits inside a slice of its own thread;
  - every counter track's samples are in time order;
  - with COUNTS (lines "rsd:NAME COUNT", what babeltrace2 read), the
    events marked rsd_event number exactly COUNT for each NAME, and no
    other name is marked.
Prints a one-line digest ("events N, slices B/E N, ...") and exits 0, or
prints each defect and exits 1.
"""

import json
import numbers
import sys

PHASES = set("BEXiCMbesf")


def check(path, counts_path=None):
    bad = []
    with open(path) as fh:
        doc = json.load(fh)
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        return ["the top level is not an object with a traceEvents list"], {}
    evs = doc["traceEvents"]
    num = lambda v: isinstance(v, numbers.Real) and not isinstance(v, bool)
    named_pids, named_tids, used_tids = set(), set(), set()
    stacks, xs, spans, flows, counters, marked = {}, {}, {}, {}, {}, {}
    slices = {}  # (pid, tid) -> [(begin, end)], B/E and X alike
    npairs = 0
    for i, e in enumerate(evs):
        where = "event %d (%s)" % (i, json.dumps(e)[:120])
        if not isinstance(e, dict):
            bad.append(where + ": not an object")
            continue
        ph = e.get("ph")
        if ph not in PHASES:
            bad.append(where + ": unknown phase %r" % ph)
            continue
        if not isinstance(e.get("pid"), int) or not isinstance(e.get("tid"), int):
            bad.append(where + ": pid and tid must be integers")
            continue
        if ph != "E" and not isinstance(e.get("name"), str):
            bad.append(where + ": no name")
        if "args" in e and not isinstance(e["args"], dict):
            bad.append(where + ": args is not an object")
        if ph == "M":
            if e.get("name") == "process_name":
                named_pids.add(e["pid"])
            elif e.get("name") == "thread_name":
                named_tids.add((e["pid"], e["tid"]))
            continue
        if not num(e.get("ts")):
            bad.append(where + ": ts is not a number")
            continue
        ts, key = e["ts"], (e["pid"], e["tid"])
        if "rsd_event" in e:
            marked[e["rsd_event"]] = marked.get(e["rsd_event"], 0) + 1
        if e["tid"]:
            used_tids.add(key)
        if ph == "B":
            stacks.setdefault(key, []).append(ts)
        elif ph == "E":
            st = stacks.get(key)
            if not st:
                bad.append(where + ": E with no open B on its thread")
            else:
                b = st.pop()
                if ts < b:
                    bad.append(where + ": E before its B (%s)" % b)
                slices.setdefault(key, []).append((b, ts))
                npairs += 1
        elif ph == "X":
            if not num(e.get("dur")) or e["dur"] < 0:
                bad.append(where + ": X without a duration >= 0")
            else:
                xs.setdefault(key, []).append((ts, ts + e["dur"]))
                slices.setdefault(key, []).append((ts, ts + e["dur"]))
        elif ph == "i":
            if e.get("s", "t") not in ("t", "p", "g"):
                bad.append(where + ": instant scope %r" % e.get("s"))
        elif ph == "C":
            args = e.get("args")
            if not args or not all(num(v) and v >= 0 for v in args.values()):
                bad.append(where + ": counter args must be numbers >= 0")
            ck = (e["pid"], e["name"])
            if ck in counters and ts < counters[ck]:
                bad.append(where + ": counter %s goes back in time" % (ck,))
            counters[ck] = ts
        elif ph in "be":
            if "id" not in e or not isinstance(e.get("cat"), str):
                bad.append(where + ": async event without id and cat")
                continue
            sk = (e["cat"], e["id"])
            if ph == "b":
                if sk in spans and spans[sk] is not None:
                    bad.append(where + ": async span %s opened twice" % (sk,))
                spans[sk] = ts
            else:
                if spans.get(sk) is None:
                    bad.append(where + ": async end with no open span %s" % (sk,))
                elif ts < spans[sk]:
                    bad.append(where + ": async span %s ends before it begins" % (sk,))
                spans[sk] = None
        elif ph in "sf":
            if "id" not in e:
                bad.append(where + ": flow event without id")
                continue
            fl = flows.setdefault(e["id"], {})
            if ph in fl:
                bad.append(where + ": flow %s has two %s events" % (e["id"], ph))
            fl[ph] = (ts, key)
    for key, st in stacks.items():
        if st:
            bad.append("thread %s: %d B event(s) never ended" % (key, len(st)))
    for sk, ts in spans.items():
        if ts is not None:
            bad.append("async span %s never ended" % (sk,))
    for key, lst in xs.items():
        lst.sort(key=lambda s: (s[0], -s[1]))
        open_ends = []
        for b, en in lst:
            while open_ends and open_ends[-1] <= b:
                open_ends.pop()
            if open_ends and en > open_ends[-1]:
                bad.append("thread %s: X slices overlap without nesting at %s" % (key, b))
                break
            open_ends.append(en)
    inside = lambda key, ts: any(b <= ts <= en for b, en in slices.get(key, ()))
    for fid, fl in flows.items():
        if set(fl) != {"s", "f"}:
            bad.append("flow %s: has %s, needs s and f" % (fid, sorted(fl)))
            continue
        if fl["f"][0] < fl["s"][0]:
            bad.append("flow %s: finishes before it starts" % fid)
        for ph in "sf":
            if not inside(fl[ph][1], fl[ph][0]):
                bad.append("flow %s: its %s is in no slice of thread %s" % (fid, ph, fl[ph][1]))
    for pid in {k[0] for k in used_tids} | {k[0] for k in counters}:
        if pid not in named_pids:
            bad.append("pid %d has no process_name" % pid)
    for key in used_tids - named_tids:
        bad.append("thread %s has no thread_name" % (key,))
    if counts_path:
        want = {}
        with open(counts_path) as fh:
            for line in fh:
                if line.strip():
                    n, c = line.split()
                    want[n] = int(c)
        if want != marked:
            for n in sorted(set(want) | set(marked)):
                if want.get(n, 0) != marked.get(n, 0):
                    bad.append("%s: the trace has %d, the JSON %d"
                               % (n, want.get(n, 0), marked.get(n, 0)))
    digest = {"events": len(evs), "pairs": npairs, "spans": len(spans), "flows": len(flows),
              "counters": len(counters), "processes": len(named_pids),
              "marked": sum(marked.values())}
    return bad, digest


def main(argv):
    if len(argv) not in (1, 2):
        print(__doc__.strip().split("\n")[2], file=sys.stderr)
        return 2
    bad, digest = check(*argv)
    for b in bad[:50]:
        print("check_chrome: " + b, file=sys.stderr)
    if bad:
        return 1
    print("events %(events)d, B/E pairs %(pairs)d, async spans %(spans)d, flows %(flows)d, "
          "counter tracks %(counters)d, processes %(processes)d, rsd events %(marked)d" % digest)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
