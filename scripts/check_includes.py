#!/usr/bin/env python3
"""The include graph of the product code (format/, record/, collector/, shim/, tools/) must have no cycle.

    scripts/check_includes.py [--build BUILD_DIR]

Checks, each failing the run with the offending files named:
  1. no cycle between modules (a module is x.h with x.cpp): Tarjan's strongly connected components;
  2. no cycle between folders (shim/base, shim/capture, format, tools/reader, ...);
  3. every project include is spelt from the root ("shim/base/log.h"), never relative ("../x.h", "log.h"), so that
     the layers' include views (cmake/layers.cmake) see every include;
  4. with --build: a deliberately wrong-way include (a device-layer file including the capture layer's session.h)
     fails to compile against the device layer's include view, i.e. CMake really enforces the direction.
Prints one line per finding and a closing "N passed, N failed" line.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRODUCT = ("format", "record", "collector", "shim", "tools")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def product_files():
    for top in PRODUCT:
        for dirpath, _, names in os.walk(os.path.join(ROOT, top)):
            for n in names:
                if n.endswith((".h", ".cpp")):
                    yield os.path.relpath(os.path.join(dirpath, n), ROOT)


def module_of(path):
    return os.path.splitext(path)[0]


def strongly_connected(graph):
    """Tarjan's algorithm, iterative; returns the components with more than one node or a self edge."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            advanced = False
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1 or node in graph.get(node, ()):
                    out.append(sorted(comp))
    return out


def check_graph(failures):
    files = sorted(product_files())
    known = set(files)
    modules, folders = {}, {}
    for f in files:
        text = open(os.path.join(ROOT, f), encoding="utf-8", errors="replace").read()
        m = module_of(f)
        modules.setdefault(m, set())
        folders.setdefault(os.path.dirname(f), set())
        for inc in INCLUDE.findall(text):
            if inc in known:
                if module_of(inc) != m:
                    modules[m].add(module_of(inc))
                if os.path.dirname(inc) != os.path.dirname(f):
                    folders[os.path.dirname(f)].add(os.path.dirname(inc))
            elif os.path.exists(os.path.normpath(os.path.join(ROOT, os.path.dirname(f), inc))):
                failures.append(f"{f}: #include \"{inc}\" is relative; spell it from the root")
    for comp in strongly_connected(modules):
        failures.append("module cycle: " + " -> ".join(comp))
    for comp in strongly_connected(folders):
        failures.append("folder cycle: " + " -> ".join(comp))
    return len(files)


def check_wrong_way(build, failures):
    view = os.path.join(build, "include_views", "msprobe_shim_device")
    if not os.path.isdir(view):
        failures.append(f"{view} missing: configure {build} first")
        return
    cxx = os.environ.get("CXX", "c++")
    with tempfile.TemporaryDirectory() as tmp:
        probe = os.path.join(tmp, "wrong_way.cpp")
        with open(probe, "w") as f:
            f.write('#include "shim/capture/session.h"  // device may not see capture\n')
        r = subprocess.run([cxx, "-std=c++20", "-fsyntax-only", "-I" + view, probe], capture_output=True, text=True)
    if r.returncode == 0:
        failures.append("a device-layer file including shim/capture/session.h compiled: the layers are not enforced")
    elif "session.h" not in r.stderr:
        failures.append("the wrong-way probe failed for another reason: " + r.stderr.strip().splitlines()[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", help="build directory whose include views to probe")
    args = ap.parse_args()
    failures = []
    n = check_graph(failures)
    checks = 3
    if args.build:
        check_wrong_way(args.build, failures)
        checks += 1
    for f in failures:
        print("check_includes: " + f)
    print(f"check_includes: {n} product files")
    failed = min(len(failures), checks)
    print(f"{checks - failed} passed, {failed} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
