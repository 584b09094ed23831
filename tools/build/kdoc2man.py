#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""kdoc2man: man pages from the kernel-doc comments of include/rsd/*.h.

usage: python3 tools/build/kdoc2man.py -o OUTDIR [--version V] [--pages DIR]
                                 [--docdir DIR] [--strict] HEADER...

The headers are the single source of the section-3 pages. Each "DOC: NAME -
summary" comment starts a page NAME(3) (before the first one, a header's
declarations go to a page named after it, rsd_HEADER(3)); every documented
declaration that follows it in the header (functions "name() - ...", "struct name - ...",
"enum name - ...", macros and constants "NAME - ...") belongs to that page,
and each of their names (enum constants too) gets a link page
(".so man3/NAME.3"), so `man rsd_lease_release` opens the lease page.
Nothing is listed here: a new header, group or function is picked up as it
is written.

Hand-written pages in --pages DIR (Documentation/man/*.1, *.7) are copied
into OUTDIR/manN/; a line ".\\\" @PAGES@" in one is replaced by a table of
every generated page and ".\\\" @SEE_ALSO@" by a SEE ALSO list of every page.

Every page names the documents it cites (reference.md, drivers.md, written
"Documentation/NAME.md" or "NAME.md" in the sources) by their path under
--docdir, where `make install` puts them ($(PREFIX)/share/doc/librsd).

Besides the pages, OUTDIR gets two data files the tests read:
  symbols.txt  one documented name per line, with its page: "NAME PAGE"
  returns.txt  "FUNCTION CODE..." the RSD_E* codes each Return: section names

Problems (a declaration of an rsd_ function with no kernel-doc, a function
without Context:, an int function without Return:, a parameter the comment
does not describe) are printed as "kdoc2man: FILE:LINE: ..."; with --strict
they make the exit status 1.
"""

import argparse
import glob
import os
import re
import sys
import time

problems = []


def problem(path, line, msg):
    problems.append("%s:%d: %s" % (path, line, msg))


# ---------------------------------------------------------------------------
# Parsing


class Item:
    """One documented declaration (or a DOC: block when kind == 'doc')."""

    def __init__(self, kind, name, summary, path, line):
        self.kind = kind  # doc, function, struct, enum, macro, var
        self.name = name
        self.summary = summary
        self.path = path
        self.line = line
        self.params = []  # [(name, text)]
        self.body = []  # description paragraphs (lists of lines)
        self.context = ""
        self.returns = []  # lines of the Return: section
        self.decl = ""
        self.members = []  # enum constants


HEAD_RE = re.compile(
    r"^(?:(DOC):\s*(\S+)|(struct|enum|union)\s+(\w+)|(\w+)\(\)|(\w+))\s+-\s+(.*)$")
PARAM_RE = re.compile(r"^@(\w+|\.\.\.):\s*(.*)$")


def parse_comment(lines, path, line):
    head = lines[0].strip() if lines else ""
    m = HEAD_RE.match(head)
    if not m:
        return None
    if m.group(1):
        it = Item("doc", m.group(2), m.group(7), path, line)
    elif m.group(3):
        it = Item(m.group(3), m.group(4), m.group(7), path, line)
    elif m.group(5):
        it = Item("function", m.group(5), m.group(7), path, line)
    else:
        it = Item("macro", m.group(6), m.group(7), path, line)
    section = "params"
    para = []

    def flush():
        if para:
            it.body.append(list(para))
            para.clear()

    for raw in lines[1:]:
        text = raw.rstrip()
        pm = PARAM_RE.match(text)
        if section == "params" and pm:
            it.params.append([pm.group(1), pm.group(2)])
            continue
        if section == "params" and it.params and text[:1] in ("\t", " ") and text.strip():
            it.params[-1][1] += " " + text.strip()
            continue
        if text.startswith("Context:"):
            flush()
            section = "context"
            it.context = text[len("Context:"):].strip()
            continue
        if text.startswith("Return:"):
            flush()
            section = "return"
            rest = text[len("Return:"):].strip()
            if rest:
                it.returns.append(rest)
            continue
        if section == "context":
            if text.strip():
                it.context += " " + text.strip()
            else:
                section = "body"
            continue
        if section == "return":
            it.returns.append(text)
            continue
        section = "body" if section == "params" else section
        if text.strip():
            para.append(text.strip())
        else:
            flush()
    flush()
    return it


def raw_comment_lines(block):
    """Comment lines keeping the indentation after the leading ' * '."""
    out = []
    for ln in block.split("\n"):
        s = ln.strip()
        if s.startswith("/**"):
            s = s[3:]
        if s.endswith("*/"):
            s = s[:-2]
        t = ln.lstrip()
        if t.startswith("/**"):
            t = t[3:]
        if t.startswith("*") and not t.startswith("*/"):
            t = t[1:]
            if t.startswith(" "):
                t = t[1:]
        if t.endswith("*/"):
            t = t[:-2]
        out.append(t.rstrip())
    while out and not out[0].strip():
        out.pop(0)
    while out and not out[-1].strip():
        out.pop()
    return out


def next_decl(text, pos):
    """The declaration after pos: a #define line, or C text up to ';'."""
    rest = text[pos:]
    m = re.match(r"\s*", rest)
    start = pos + m.end()
    if text.startswith("#define", start):
        end = text.find("\n", start)
        return text[start:end if end >= 0 else len(text)].strip()
    depth = 0
    i = start
    while i < len(text):
        c = text[i]
        if c == "/" and text.startswith("/*", i):
            j = text.find("*/", i)
            i = j + 2 if j >= 0 else len(text)
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif c == ";" and depth == 0:
            return text[start:i + 1].strip()
        i += 1
    return text[start:].strip()


FUNC_DECL_RE = re.compile(r"\b(rsd_\w+)\s*\(")


def decl_params(decl):
    """Parameter names of a function prototype."""
    m = FUNC_DECL_RE.search(decl)
    if not m:
        return []
    inner = decl[m.end():decl.rfind(")")]
    names = []
    depth = 0
    cur = ""
    for c in inner + ",":
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        if c == "," and depth == 0:
            cur = cur.strip()
            fp = re.search(r"\(\s*\*\s*(\w+)\s*\)", cur)
            if fp:
                names.append(fp.group(1))
            elif cur and cur != "void":
                w = re.findall(r"\w+", cur)
                if w:
                    names.append(w[-1])
            cur = ""
        else:
            cur += c
    return names


def parse_header(path):
    text = open(path, encoding="utf-8").read()
    items = []
    documented_at = set()
    for m in re.finditer(r"/\*\*(?!\*).*?\*/", text, re.S):
        line = text.count("\n", 0, m.start()) + 1
        lines = raw_comment_lines(m.group(0))
        it = parse_comment(lines, path, line)
        if it is None:
            problem(path, line, "a /** comment that is not kernel-doc: %r" % (lines[:1],))
            continue
        if it.kind != "doc":
            it.decl = next_decl(text, m.end())
            documented_at.add(text.count("\n", 0, m.end()) + 1)
            if it.kind == "macro" and not it.decl.startswith("#define"):
                it.kind = "var"
            check_item(it)
        items.append(it)
    # Every rsd_ prototype must have a comment.
    names = {i.name for i in items}
    for m in re.finditer(r"^[A-Za-z].*?\b(rsd_[a-z]\w*)\s*\(", text, re.M):
        if m.group(1) not in names and not text[m.start():].startswith("#define"):
            problem(path, text.count("\n", 0, m.start()) + 1,
                    "%s() is declared without a kernel-doc comment" % m.group(1))
    return items


def check_item(it):
    where = (it.path, it.line)
    if it.kind == "function":
        if it.name not in it.decl:
            problem(*where, "comment names %s() but documents: %s" % (it.name, it.decl[:60]))
        if not it.context:
            problem(*where, "%s(): no Context: line" % it.name)
        rettype = it.decl.split(it.name)[0]
        if not re.match(r"^\s*(static\s+)?void\s*$", rettype) and not it.returns:
            problem(*where, "%s(): no Return: section" % it.name)
        want = decl_params(it.decl)
        have = [p[0] for p in it.params]
        for p in want:
            if p not in have:
                problem(*where, "%s(): parameter %s is not described" % (it.name, p))
        for p in have:
            if p not in want:
                problem(*where, "%s(): @%s is not a parameter" % (it.name, p))
    elif it.kind in ("struct", "enum", "union"):
        body = it.decl[it.decl.find("{") + 1:it.decl.rfind("}")]
        body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
        if it.kind == "enum":
            want = re.findall(r"\b([A-Z][A-Z0-9_]+)\b\s*(?:=[^,]*)?,?", body)
            it.members = want
        else:
            want = []
            for field in body.split(";"):
                field = field.strip()
                if not field:
                    continue
                fp = re.search(r"\(\s*\*\s*(\w+)\s*\)", field)
                if fp:
                    want.append(fp.group(1))
                    continue
                decl = re.sub(r"\[.*?\]", "", field)
                parts = decl.split(",")
                want.append(re.findall(r"\w+", parts[0])[-1])
                for p in parts[1:]:
                    want.append(re.findall(r"\w+", p)[-1])
        have = [p[0] for p in it.params]
        for p in want:
            if p not in have:
                problem(*where, "%s %s: member %s is not described" % (it.kind, it.name, p))


# ---------------------------------------------------------------------------
# roff output

def esc(s):
    s = s.replace("\\", "\\e")
    s = s.replace("-RSD_E", "\\-RSD_E")
    return s


def inline(s):
    """Escape text and mark up names: func() bold, @param italic."""
    s = esc(s)
    s = re.sub(r"\b(\w+)\(\)", r"\\fB\1\\fP()", s)
    s = re.sub(r"@(\w+)", r"\\fI\1\\fP", s)
    s = re.sub(r"\b(rsd_\w+)\((\d)\)", r"\\fB\1\\fP(\2)", s)
    return s


def line_safe(s):
    return "\\&" + s if s[:1] in (".", "'") else s


def para(lines):
    return line_safe(inline(" ".join(lines)))


def returns_roff(lines):
    out = []
    cur = None
    for ln in lines:
        m = re.match(r"^\*\s+(.*)$", ln.strip())
        if m:
            if cur is not None:
                out.append(cur)
            cur = [m.group(1)]
        elif cur is not None and ln.strip():
            cur.append(ln.strip())
        elif ln.strip():
            out.append(ln.strip())
    if cur is not None:
        out.append(cur)
    r = []
    for x in out:
        if isinstance(x, list):
            text = " ".join(x)
            m = re.match(r"^(\S+(?:, \S+)*)\s+-\s+(.*)$", text)
            if m:
                r.append(".TP")
                r.append(line_safe("\\fB" + esc(m.group(1)) + "\\fP"))
                r.append(para([m.group(2)]))
            else:
                r.append(".IP \\(bu 2")
                r.append(para([text]))
        else:
            r.append(".PP" if r else "")
            r.append(para([x]))
    return [x for x in r if x != ""]


def codes_of(lines):
    # Codes are written negated (-RSD_EBUDGET); RSD_EXCLUSIVE and the
    # like, mentioned in the text, are not codes.
    return sorted(set(re.findall(r"-(RSD_E[A-Z]+)\b", " ".join(lines))))


def decl_roff(decl):
    out = []
    for ln in decl.split("\n"):
        ln = ln.replace("\t", "        ")
        out.append(line_safe(esc(ln.rstrip())))
    return out


class Page:
    def __init__(self, doc, header):
        self.name = doc.name
        self.summary = doc.summary
        self.doc = doc
        self.header = header
        self.items = []

    def names(self):
        names = [self.name]
        for it in self.items:
            for n in [it.name] + it.members:
                if n not in names:
                    names.append(n)
        return names


def render_page(page, all_pages, version, date):
    title = page.name.upper()
    L = ['.\\" Generated by tools/build/kdoc2man.py from %s; edit the header, not this file.'
         % page.header,
         '.TH "%s" 3 "%s" "librsd %s" "librsd Manual"' % (title, date, version),
         ".SH NAME"]
    func_names = [i.name for i in page.items if i.kind == "function"]
    other = [n for n in page.names() if n != page.name and n not in func_names]
    shown = [page.name] if page.name not in func_names else []
    shown += func_names + [n for n in other if n not in shown]
    L.append(esc(", ".join(shown)) + " \\- " + esc(page.summary))
    L.append(".SH SYNOPSIS")
    L.append(".nf")
    L.append("\\fB#include <rsd/rsd.h>\\fP    /* declared in <%s> */" % page.header)
    for it in page.items:
        if it.kind == "function" or it.kind in ("macro", "var"):
            L.append("")
            L.extend(decl_roff(it.decl))
    L.append(".fi")
    L.append(".SH DESCRIPTION")
    first = True
    for p in page.doc.body:
        if not first:
            L.append(".PP")
        L.append(para(p))
        first = False
    for it in page.items:
        if it.kind == "function":
            L.append('.SS "%s()"' % it.name)
        elif it.kind in ("struct", "enum", "union"):
            L.append('.SS "%s %s"' % (it.kind, it.name))
        else:
            L.append('.SS "%s"' % it.name)
        L.append(para([it.summary]))
        if it.kind in ("struct", "enum", "union"):
            L.append(".PP")
            L.append(".nf")
            L.extend(decl_roff(it.decl))
            L.append(".fi")
        for name, text in it.params:
            L.append(".TP")
            L.append("\\fI%s\\fP" % esc(name) if it.kind == "function"
                     else "\\fB%s\\fP" % esc(name))
            L.append(para([text]) if text else "\\&")
        for p in it.body:
            L.append(".PP")
            L.append(para(p))
        if it.context:
            L.append(".PP")
            L.append("\\fIContext:\\fP " + inline(it.context))
        if it.returns:
            L.append(".PP")
            L.append("\\fIReturn:\\fP")
            L.extend(returns_roff(it.returns))
    L.append(".SH SEE ALSO")
    refs = []
    text = " ".join(" ".join(p) for it in [page.doc] + page.items
                    for p in it.body + [[it.context]] + [it.returns] + [[x[1] for x in it.params]])
    owner = {}
    for pg in all_pages:
        for n in pg.names():
            owner.setdefault(n, pg.name)
    for n in re.findall(r"\b(rsd_\w+)\(", text):
        pg = owner.get(n)
        if pg and pg != page.name and pg not in refs:
            refs.append(pg)
    L.append(",\n".join(["\\fBlibrsd\\fP(7)"] + ["\\fB%s\\fP(3)" % esc(r) for r in refs]))
    return "\n".join(L) + "\n"


def docpaths(text, docdir):
    """Name the cited documents (Documentation/NAME.md, NAME.md) by their
    installed path."""
    return re.sub(r"(?<![\w/.-])(?:Documentation/)?([a-z][a-z-]*\.md)\b",
                  lambda m: "%s/%s" % (docdir.rstrip("/"), m.group(1)), text)


def main():
    ap = argparse.ArgumentParser(description="man pages from kernel-doc")
    ap.add_argument("-o", "--outdir", required=True)
    ap.add_argument("--version", default="0")
    ap.add_argument("--pages", help="directory of hand-written pages (*.1, *.7)")
    ap.add_argument("--docdir", default="Documentation",
                    help="where the cited documents are installed")
    ap.add_argument("--strict", action="store_true")
    ap.add_argument("headers", nargs="+")
    a = ap.parse_args()

    pages = []
    symbols = []
    returns = []
    for h in a.headers:
        rel = "rsd/" + os.path.basename(h)
        page = None
        for it in parse_header(h):
            if it.kind == "doc":
                # A DOC: name seen before resumes that page (declarations
                # of one page need not be contiguous in the header).
                page = next((p for p in pages if p.name == it.name), None)
                if page is None:
                    page = Page(it, rel)
                    pages.append(page)
                else:
                    page.doc.body += it.body
                continue
            if page is None:
                # A header without a DOC: comment still gets a page, named
                # after the header, so its names are found.
                name = "rsd_" + os.path.basename(h)[:-2]
                page = next((p for p in pages if p.name == name), None)
                if page is None:
                    doc = Item("doc", name, "declarations of <%s>" % rel, h, it.line)
                    page = Page(doc, rel)
                    pages.append(page)
            page.items.append(it)
            if it.kind == "function":
                returns.append((it.name, codes_of(it.returns)))

    mtime = max(os.path.getmtime(h) for h in a.headers)
    date = time.strftime("%Y-%m-%d", time.gmtime(float(os.environ.get("SOURCE_DATE_EPOCH", mtime))))
    man3 = os.path.join(a.outdir, "man3")
    os.makedirs(man3, exist_ok=True)
    written = set()
    for pg in pages:
        with open(os.path.join(man3, pg.name + ".3"), "w") as f:
            f.write(docpaths(render_page(pg, pages, a.version, date), a.docdir))
        written.add(pg.name)
    owner = {}
    for pg in pages:
        for n in pg.names():
            if n in owner and owner[n] != pg.name:
                problem(pg.header, 0, "%s is documented on %s(3) and %s(3)" % (n, owner[n], pg.name))
                continue
            owner[n] = pg.name
            symbols.append((n, pg.name))
            if n in written:
                continue
            with open(os.path.join(man3, n + ".3"), "w") as f:
                f.write(".so man3/%s.3\n" % pg.name)
            written.add(n)

    extra = []
    if a.pages:
        for src in sorted(glob.glob(os.path.join(a.pages, "*.[1-9]"))):
            sec = src[-1]
            extra.append((os.path.basename(src)[:-2], sec, src))
    see_all = sorted([(p.name, "3") for p in pages] + [(n, s) for n, s, _ in extra],
                     key=lambda x: (x[1], x[0]))
    for name, sec, src in extra:
        text = open(src, encoding="utf-8").read()
        table = []
        for pg in pages:
            table += [".TP", "\\fB%s\\fP(3)" % esc(pg.name), para([pg.summary])]
        text = text.replace('.\\" @PAGES@\n', "\n".join(table) + "\n")
        see = ",\n".join("\\fB%s\\fP(%s)" % (esc(n), s) for n, s in see_all if n != name)
        text = text.replace('.\\" @SEE_ALSO@\n', see + "\n")
        text = docpaths(text, a.docdir)
        d = os.path.join(a.outdir, "man" + sec)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "%s.%s" % (name, sec)), "w") as f:
            f.write(text)
        symbols.append((name, name))

    with open(os.path.join(a.outdir, "symbols.txt"), "w") as f:
        for n, p in symbols:
            f.write("%s %s\n" % (n, p))
    with open(os.path.join(a.outdir, "returns.txt"), "w") as f:
        for n, codes in returns:
            f.write(" ".join([n] + codes) + "\n")
    for p in problems:
        print("kdoc2man: " + p, file=sys.stderr)
    return 1 if (problems and a.strict) else 0


if __name__ == "__main__":
    sys.exit(main())
