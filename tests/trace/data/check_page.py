#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Check the DOM of an rsd-trace --html page as a browser built it.

usage: check_page.py DOM.html SUMMARY.json

DOM.html is what `chromium --headless --dump-dom` printed for the page
(the document after its script ran), SUMMARY.json what rsd-trace --json
said about the same trace. Checks that:
  - the page's script ran (body data-ready is the number of legend entries);
  - nothing is fetched: no element has an http(s) src or href, no <link>;
  - the six sections are there, each with its heading: occupancy, links,
    residency, engines, evictions, summary;
  - occupancy has one chart per location of the summary's peak-use table
    (per process in a job), each with a "used" and a "used+reserved" series
    per manager, and a "budget" series where the location has one;
  - links has one series per source -> destination pair the summary moved
    bytes over;
  - residency draws at least one bar per location values lived at;
  - engines draws one row per device engine of the summary, with as many
    bars as the copies and kernels it ran;
  - the evictions table has one row per completed drop and discard (up
    to the page's limit, which it then says);
  - the summary section holds the text report.
Series names carry the manager's label when it has one. Prints a digest,
or each defect, exiting 1.
"""

import json
import re
import sys
from html.parser import HTMLParser


class Dom(HTMLParser):
    def __init__(self):
        super().__init__()
        self.stack, self.sections, self.series, self.bars = [], {}, {}, 0
        self.nran = 0  # bars of the engines chart
        self.body, self.external, self.rows, self.texts = {}, [], 0, {}
        self.svgs = {}

    def section(self):
        return next((a.get("id") for t, a in reversed(self.stack) if t == "section"), None)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "body":
            self.body = a
        if tag == "link" or re.match(r"(?i)https?:", a.get("src", "") + a.get("href", "")):
            self.external.append((tag, a))
        if tag not in ("br", "meta", "rect", "path", "polyline", "link", "img", "input"):
            self.stack.append((tag, a))
        sec = self.section()
        if tag == "section":
            self.sections[a.get("id")] = []
        if tag == "svg" and sec:
            self.svgs.setdefault(sec, []).append(a.get("id"))
        if tag == "g" and "data-series" in a and sec:
            self.series.setdefault(sec, []).append(a["data-series"])
        if tag == "rect" and "lived" in a.get("class", ""):
            self.bars += 1
        if tag == "rect" and "ran" in a.get("class", "").split():
            self.nran += 1
        if tag == "tr" and sec == "evictions":
            self.rows += 1

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                break

    def handle_data(self, data):
        sec = self.section()
        if sec:
            self.texts[sec] = self.texts.get(sec, "") + data
            if self.stack and self.stack[-1][0] == "h2":
                self.sections[sec].append(data.strip())


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().split("\n")[2], file=sys.stderr)
        return 2
    dom = Dom()
    with open(argv[0]) as fh:
        dom.feed(fh.read())
    with open(argv[1]) as fh:
        d = json.load(fh)
    bad = []
    if dom.body.get("data-ready") in (None, "", "0"):
        bad.append("the page's script did not run (body data-ready %r)" % dom.body.get("data-ready"))
    for tag, a in dom.external:
        bad.append("an external resource: <%s %s>" % (tag, a))
    for sec in ("occupancy", "links", "residency", "engines", "evictions", "summary"):
        if not dom.sections.get(sec):
            bad.append("section %s is missing or has no heading" % sec)
    occ = dom.series.get("occupancy", [])
    procs = d.get("processes") or [d]
    labelled = {}
    for p in procs:
        for r in p["peak_use"]:
            labelled.setdefault(r["location"].split("@")[0], 0)
            labelled[r["location"].split("@")[0]] += 1
    for loc, nmanagers in labelled.items():
        for what in ("used", "used+reserved"):
            got = [s for s in occ if s.startswith("%s %s, " % (loc, what))]
            if len(got) != nmanagers:
                bad.append("occupancy of %s: %d '%s' series for %d manager(s): %s"
                           % (loc, len(got), what, nmanagers, got))
    if len(dom.svgs.get("occupancy", [])) != len(labelled):
        bad.append("occupancy: %d charts for %d locations" % (len(dom.svgs.get("occupancy", [])),
                                                              len(labelled)))
    if not any(" budget, " in s for s in occ) and any(r.get("budget") for r in
                                                      d.get("budget_rejections", [])):
        bad.append("occupancy: no budget series though a budget refused")
    links = dom.series.get("links", [])
    for p in procs:
        for r in p["bytes_moved"]:
            key = "%s -> %s, " % (r["source"].split("@")[0], r["destination"].split("@")[0])
            if not any(s.startswith(key) for s in links):
                bad.append("links: no series for %s" % key)
    locs_lived = {s.split(", ")[0] for s in occ}
    if locs_lived and not dom.bars:
        bad.append("residency: no bars")
    nitems = sum(r["items"] for r in d.get("engines", []))
    if dom.nran != nitems:
        bad.append("engines: %d bars for the %d copies and kernels the summary counts"
                   % (dom.nran, nitems))
    nev = sum(e["count"] for p in procs for e in p["evictions"]
              if e["action"] in ("drop", "discard"))
    m = re.search(r"(\d+) evictions", dom.texts.get("evictions", ""))
    if not m or int(m.group(1)) != nev:
        bad.append("evictions: the page says %s, the summary %d" % (m and m.group(1), nev))
    elif dom.rows - 1 != min(nev, 300):
        bad.append("evictions: %d table rows for %d evictions" % (dom.rows - 1, nev))
    if "rsd events" not in dom.texts.get("summary", ""):
        bad.append("summary: no text report")
    for b in bad:
        print("check_page: " + b, file=sys.stderr)
    if bad:
        return 1
    print("sections %d, occupancy charts %d, series %d, link series %d, residency bars %d, "
          "eviction rows %d, legend entries %s" % (
              len(dom.sections), len(dom.svgs.get("occupancy", [])), len(occ), len(links),
              dom.bars, dom.rows - 1, dom.body.get("data-ready")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
