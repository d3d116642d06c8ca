#!/usr/bin/env python3
"""The floor check: no #include runs from a lower floor of vexp's tree to a higher one,
and no two folders include each other, directly or around a cycle.

The floors are written once, in docs/architecture.md, in its ```floors block:

    N  FOLDER [FOLDER ...]

A file in a folder of floor N may include headers of its own folder and of folders on
floors N and below; an include of a folder on a higher floor is "up" and fails the
check, as does a cycle between folders (on the same floor included). Each folder is a
unit: libs/NAME, pkg/NAME, plugins/KIND/NAME, tools/NAME, or a top-level folder (sdk,
dsl, runtime). tests/ folders and test sources (test_*.cpp) are not checked (tests may
use everything).

An include is resolved as the compiler would with vexp's include paths: beside the
including file, from its unit's root, then from every include/ folder of the tree. An
include spelled "vexp/..." that resolves to no file of the tree is an error too (it
would hide an upward include).

Usage: floors.py [ROOT]   (ROOT: the source tree, default: two folders above this file)
       floors.py --self-test (a made-up tree with one upward include and one cycle must
                              fail with exactly those; a clean one must pass)
Prints one line per problem and a summary; exits 1 when there is a problem.
"""
import os
import re
import sys
from collections import defaultdict

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] != "--self-test"
                       else os.path.join(os.path.dirname(__file__), "..", ".."))
SOURCES = (".cpp", ".hpp", ".h", ".cu", ".cuh", ".inc")
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)


def read_floors():
    path = os.path.join(ROOT, "docs", "architecture.md")
    text = open(path, encoding="utf-8").read()
    m = re.search(r"```floors\n(.*?)```", text, re.S)
    if not m:
        sys.exit(f"{path}: no ```floors block")
    floors = {}
    for n, line in enumerate(m.group(1).splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        level, *folders = line.split()
        for f in folders:
            floors[f.rstrip("/")] = int(level)
    return floors


def unit_of(rel):
    parts = rel.split("/")
    if parts[0] in ("libs", "pkg", "tools") and len(parts) > 2:
        return "/".join(parts[:2])
    if parts[0] == "plugins" and len(parts) > 3:
        return "/".join(parts[:3])
    return parts[0]


def floor_of(unit, floors):
    # the longest folder of the table that holds the unit
    best = None
    for f, level in floors.items():
        if unit == f or unit.startswith(f + "/"):
            if best is None or len(f) > len(best[0]):
                best = (f, level)
    return best[1] if best else None


def skipped(rel):
    parts = rel.split("/")
    return (parts[0] in ("build", "tests", "docs", "recipes", "examples", "cmake", "clusters") or parts[0].startswith(".")
            or "tests" in parts or "fixtures" in parts or os.path.basename(rel).startswith("test_")
            or parts[0].startswith("build"))


def main():
    floors = read_floors()
    files = []
    for d, dirs, names in os.walk(ROOT):
        rel_d = os.path.relpath(d, ROOT)
        dirs[:] = [x for x in dirs if not x.startswith(".") and not (rel_d == "." and x.startswith("build"))]
        for n in names:
            if n.endswith(SOURCES):
                files.append(os.path.normpath(os.path.join(rel_d, n)))
    files = [f for f in files if not f.startswith("..")]
    # every include/ folder of the tree: "vexp/x.hpp" -> file
    by_include = {}
    for f in files:
        parts = f.split("/")
        if "include" in parts:
            i = parts.index("include")
            by_include.setdefault("/".join(parts[i + 1:]), f)
    known = set(files)
    problems, edges, checked, between = [], defaultdict(set), 0, 0
    for f in sorted(files):
        if skipped(f):
            continue
        unit = unit_of(f)
        level = floor_of(unit, floors)
        if level is None:
            problems.append(f"{f}: its folder '{unit}' is on no floor of docs/architecture.md")
            continue
        checked += 1
        text = open(os.path.join(ROOT, f), encoding="utf-8", errors="replace").read()
        for m in INCLUDE.finditer(text):
            inc = m.group(1)
            line = text.count("\n", 0, m.start()) + 1
            target = None
            for cand in (os.path.normpath(os.path.join(os.path.dirname(f), inc)), os.path.normpath(os.path.join(unit, inc))):
                if cand in known:
                    target = cand
                    break
            if target is None:
                target = by_include.get(inc)
            if target is None:
                if inc.startswith("vexp/"):
                    problems.append(f"{f}:{line}: includes '{inc}', which is no header of the tree")
                continue
            to = unit_of(target)
            if to == unit:
                continue
            between += 1
            to_level = floor_of(to, floors)
            if to_level is None:
                problems.append(f"{f}:{line}: includes '{inc}' of '{to}', which is on no floor")
                continue
            edges[unit].add(to)
            if to_level > level:
                problems.append(f"{f}:{line}: includes '{inc}' of {to} (floor {to_level}) from {unit} (floor {level}): up")
    # cycles between units (Tarjan's strongly connected components)
    index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(set(edges) | {w for ws in edges.values() for w in ws}):
        if v not in index:
            visit(v)
    for comp in sccs:
        problems.append("cycle between folders: " + " <-> ".join(comp))
    for p in problems:
        print("floors: " + p)
    ups = sum(1 for p in problems if p.endswith(": up"))
    print(f"floors: {checked} files checked, {between} includes between {len({u for u in edges} | {w for ws in edges.values() for w in ws})} "
          f"folders, {ups} up, {len(sccs)} cycles, {len(problems) - ups - len(sccs)} other problems")
    return 1 if problems else 0


def self_test():
    import contextlib
    import io
    import tempfile
    global ROOT
    files = {
        "docs/architecture.md": "x\n```floors\n0 libs/base\n1 runtime\n2 pkg\n```\n",
        "libs/base/include/vexp/base/a.hpp": "#pragma once\n",
        "runtime/include/vexp/runtime/r.hpp": '#include "vexp/base/a.hpp"\n',
        "pkg/p/include/vexp/p/p.hpp": '#include "vexp/runtime/r.hpp"\n#include "vexp/q/q.hpp"\n',
        "pkg/q/include/vexp/q/q.hpp": '#include <vector>\n',
        "pkg/q/tests/test_q.cpp": '#include "vexp/p/p.hpp"\n',  # tests may use everything
    }
    bad = {
        "libs/base/src/a.cpp": '#include "vexp/runtime/r.hpp"\n',  # up
        "pkg/q/src/q.cpp": '#include "vexp/p/p.hpp"\n',  # p <-> q
    }
    results = []
    for extra in ({}, bad):
        with tempfile.TemporaryDirectory() as d:
            for name, text in {**files, **extra}.items():
                os.makedirs(os.path.dirname(os.path.join(d, name)), exist_ok=True)
                open(os.path.join(d, name), "w").write(text)
            ROOT = d
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                rc = main()
            results.append((rc, out.getvalue()))
    (rc0, out0), (rc1, out1) = results
    ok = (rc0 == 0 and rc1 == 1 and "libs/base/src/a.cpp:1: includes 'vexp/runtime/r.hpp'" in out1
          and "1 up, 2 cycles, 0 other problems" in out1 and "pkg/p <-> pkg/q" in out1)
    print(out0 + out1 + ("floors self-test: ok" if ok else "floors self-test: FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(self_test() if sys.argv[1:] == ["--self-test"] else main())
