#!/usr/bin/python3
"""layers.py - checks the source tree against the layer map of docs/architecture.md.

The map is the table under "## Layers" in docs/architecture.md: one row per
folder, with the folders its code may include. This test fails when
  - a product file (.c/.h outside tests/, bench/) includes a header of a folder
    its row does not list (an upward or sideways include),
  - a folder is missing from the map, or the map's "may use" lists form a cycle,
  - two modules (a .c with its .h) include each other, directly or around a loop,
  - with a build tree (DCM_BIN), two object files call each other around a loop
    (nm: one defines what the other leaves undefined), or an object calls a
    function of a folder its row does not list.
It then runs the same checker on a small synthetic tree with one upward include,
one include cycle and one call cycle, and fails unless each is reported: the
checker itself can fail.

Run: /usr/bin/python3 tests/layers.py  (DCM_SRC = source root, DCM_BIN = build dir)
"""
import os
import re
import subprocess
import sys
import tempfile

INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
PRODUCT_EXCLUDE = ("tests", "bench", "build", "docs", "deploy", "examples", "models", "scripts")


def parse_map(arch_md):
    """Rows of the "## Layers" table: folder -> set of folders it may include."""
    text = open(arch_md, encoding="utf-8").read()
    m = re.search(r"^## Layers\b(.*?)(?=^## |\Z)", text, re.S | re.M)
    if not m:
        raise SystemExit("layers: docs/architecture.md has no '## Layers' section")
    allowed = {}
    for line in m.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[1].startswith("`"):
            continue
        folder = cells[1].strip("`").rstrip("/")
        uses = set()
        for u in re.findall(r"`([^`]+)`", cells[2]):
            uses.add(u.rstrip("/"))
        allowed[folder] = uses
    if not allowed:
        raise SystemExit("layers: the '## Layers' table has no rows")
    return allowed


def product_files(root):
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        top = rel.split(os.sep)[0]
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        if rel != "." and (top in PRODUCT_EXCLUDE or top.startswith(".") or top.startswith("build")):
            dirnames[:] = []
            continue
        for f in filenames:
            if f.endswith((".c", ".h", ".cu", ".cuh")):
                out.append(os.path.join(rel, f) if rel != "." else f)
    return sorted(out)


def find_cycle(graph):
    """One cycle of graph (node -> set of nodes) as a list, or None."""
    WHITE, GREY, BLACK = 0, 1, 2
    color = {n: WHITE for n in graph}
    stack = []

    def visit(n):
        color[n] = GREY
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if m == n:
                continue
            if color.get(m, WHITE) == GREY:
                return stack[stack.index(m):] + [m]
            if color.get(m, WHITE) == WHITE:
                color.setdefault(m, WHITE)
                c = visit(m)
                if c:
                    return c
        stack.pop()
        color[n] = BLACK
        return None

    for n in sorted(graph):
        if color[n] == WHITE:
            c = visit(n)
            if c:
                return c
    return None


def unit_of(path):
    """A module: x.c with x.h; a private x_int.h belongs to module x."""
    u = os.path.splitext(path)[0]
    return u[:-4] if u.endswith("_int") else u


def folder_of(path):
    return os.path.dirname(path).replace(os.sep, "/") or "."


def check_tree(root, allowed, objects=None):
    """Returns a list of problems (strings)."""
    problems = []
    files = product_files(root)
    headers = {}
    for f in files:
        if f.endswith((".h", ".cuh")):
            headers.setdefault(os.path.basename(f), []).append(f)
    for name, where in headers.items():
        if len(where) > 1:
            problems.append("header %s exists twice: %s" % (name, ", ".join(where)))
    folders = {folder_of(f) for f in files}
    for d in sorted(folders - set(allowed)):
        problems.append("folder %s/ is not in the layer map of docs/architecture.md" % d)
    c = find_cycle({d: {u for u in uses if u != d} for d, uses in allowed.items()})
    if c:
        problems.append("the layer map has a cycle: " + " -> ".join(c))

    unit_graph = {}
    for f in files:
        src = open(os.path.join(root, f), encoding="utf-8", errors="replace").read()
        fd = folder_of(f)
        unit = unit_of(f)
        unit_graph.setdefault(unit, set())
        for inc in INCLUDE_RE.findall(src):
            base = os.path.basename(inc)
            if base.endswith(".pb-c.h"):
                target_folder, target = "proto", None
            elif base in headers:
                target = headers[base][0]
                target_folder = folder_of(target)
            else:
                problems.append("%s includes \"%s\", which is not in the tree" % (f, inc))
                continue
            if target_folder != fd and target_folder not in allowed.get(fd, set()):
                problems.append("%s includes %s: %s/ may not include %s/ (docs/architecture.md, "
                                "## Layers)" % (f, target or inc, fd, target_folder))
            if target:
                tu = unit_of(target)
                if tu != unit:
                    unit_graph[unit].add(tu)
    c = find_cycle(unit_graph)
    if c:
        problems.append("include cycle between modules: " + " -> ".join(c))

    if objects:
        defined, undefined = {}, {}
        for src, obj in objects.items():
            d, u = nm_symbols(obj)
            undefined[src] = u
            for s in d:
                defined.setdefault(s, src)
        call_graph = {src: set() for src in objects}
        for src, syms in undefined.items():
            fd = folder_of(src)
            for s in syms:
                t = defined.get(s)
                if t is None or t == src:
                    continue
                call_graph[src].add(t)
                tf = folder_of(t)
                if tf != fd and tf not in allowed.get(fd, set()):
                    problems.append("%s calls %s of %s: %s/ may not use %s/" % (src, s, t, fd, tf))
        c = find_cycle(call_graph)
        if c:
            problems.append("call cycle between files: " + " -> ".join(c))
    return problems


def nm_symbols(obj):
    out = subprocess.run(["nm", "--defined-only", "-g", obj], capture_output=True, text=True).stdout
    defined = {l.split()[-1] for l in out.splitlines() if len(l.split()) >= 3}
    out = subprocess.run(["nm", "-u", obj], capture_output=True, text=True).stdout
    undefined = {l.split()[-1] for l in out.splitlines() if l.strip()}
    return defined, undefined


def build_objects(root, bindir):
    """Source path (relative to root) -> object file, for the product's libraries."""
    objs = {}
    cmf = os.path.join(bindir, "CMakeFiles")
    if not os.path.isdir(cmf):
        return objs
    for lib in os.listdir(cmf):
        if not (lib.startswith("dcm_") and lib.endswith(".dir")) or "_closed" in lib:
            continue
        if lib in ("dcm_proto.dir", "dcm_testutil.dir"):
            continue
        base = os.path.join(cmf, lib)
        for dirpath, _, filenames in os.walk(base):
            for f in filenames:
                if f.endswith(".c.o"):
                    rel = os.path.relpath(os.path.join(dirpath, f[:-2]), base)
                    if os.path.exists(os.path.join(root, rel)):
                        objs[rel] = os.path.join(dirpath, f)
    return objs


def selftest():
    """The checker must report an upward include, an include cycle and a call cycle."""
    allowed = {"low": set(), "high": {"low"}}
    with tempfile.TemporaryDirectory() as t:
        os.makedirs(os.path.join(t, "low"))
        os.makedirs(os.path.join(t, "high"))
        files = {
            "low/a.h": "int a(void);\n",
            "low/a.c": '#include "a.h"\n#include "b.h"\n#include "h.h"\nint a(void) { return b(); }\n',
            "low/b.h": "int b(void);\n",
            "low/b.c": '#include "b.h"\n#include "a.h"\nint b(void) { return 0; }\nint c(void) { return a(); }\n',
            "high/h.h": "int h(void);\n",
            "high/h.c": '#include "h.h"\n#include "a.h"\nint h(void) { return a(); }\n',
        }
        for p, s in files.items():
            open(os.path.join(t, p), "w").write(s)
        objs = {}
        for p in ("low/a.c", "low/b.c", "high/h.c"):
            o = os.path.join(t, p + ".o")
            inc = ["-I" + os.path.join(t, "low"), "-I" + os.path.join(t, "high")]
            subprocess.run(["cc", "-c", "-o", o] + inc + [os.path.join(t, p)], check=True)
            objs[p] = o
        got = check_tree(t, allowed, objs)
    want = ["low/a.c includes high/h.h: low/ may not include high/",
            "include cycle between modules:", "call cycle between files:"]
    missing = [w for w in want if not any(w in g for g in got)]
    return missing, got


def main():
    root = os.environ.get("DCM_SRC") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    root = os.path.abspath(root)
    bindir = os.environ.get("DCM_BIN")
    allowed = parse_map(os.path.join(root, "docs", "architecture.md"))
    objects = build_objects(root, bindir) if bindir else {}
    problems = check_tree(root, allowed, objects)
    nfiles = len(product_files(root))
    missing, got = selftest()
    if missing:
        problems.append("self-test: the checker did not report %s (it said %s)" % (missing, got))
    for p in problems:
        print("layers: " + p)
    print("layers: %d files in %d folders, %d object files checked against docs/architecture.md"
          % (nfiles, len(allowed), len(objects)))
    print("%d passed, %d failed" % (0 if problems else 1, 1 if problems else 0))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
