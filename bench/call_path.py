#!/usr/bin/env python3
"""The path of one captured kernel through the shim's own code, counted by callgrind: how many calls into the
project's functions, how many distinct functions and how many source files one kernel goes through, from the
interposed symbol to the bytes on disk (launching thread and writer threads together).

bench_passthrough (a C++ host: per iteration aclnnAdd's two phases by direct calls and a no-op aclnn pair found
with dlsym, two captured kernels) runs under each shim given, with N1 and then N2 iterations, under
`valgrind --tool=callgrind`; a function's calls per iteration are the difference of its call counts over N2 - N1 (start-up, warm-up and exit cancel). Only functions whose source file is in the
project's product directories (shim/, collector/, format/, record/) count. Calls the compiler inlined are not
calls: the figure is what remains after inlining, as a profiler sees it.

    bench/call_path.py --shim old=A/lib/libmsprobe_shim.so --shim new=build/lib/libmsprobe_shim.so
        [--build build] [--task statistics] [--n1 50] [--n2 250] [--list]

Prints a markdown table, one row per shim; --list also prints each shim's functions with their calls per iteration.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from compare_shims import clean_env  # noqa: E402

PRODUCT_DIRS = ("shim", "collector", "format", "record")
TOTAL = ("", "instructions")  # the whole process's, every thread (callgrind's summary line)
COMPRESSED = re.compile(r"^\((\d+)\)(?: (.*))?$")


def product_file(path):
    """The path relative to a product directory ('shim/capture/kernel_launch.cpp'), or None."""
    parts = path.split("/")
    for i, p in enumerate(parts[:-1]):
        if p in PRODUCT_DIRS and "test" not in parts[:i] and "usr" not in parts[:i]:
            return "/".join(parts[i:])
    return None


def calls_by_function(outfile):
    """{(file, function): calls received} from one callgrind output file (name compression resolved)."""
    names = {"file": {}, "fn": {}}

    def resolve(kind, text):
        m = COMPRESSED.match(text)
        if not m:
            return text
        if m.group(2) is not None:
            names[kind][m.group(1)] = m.group(2)
        return names[kind].get(m.group(1), text)

    calls = {}
    total = 0
    current_file = callee_file = callee = None
    with open(outfile, errors="replace") as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                total = int(line.split()[1])
                continue
            key, _, value = line.rstrip("\n").partition("=")
            if key in ("fl", "fi", "fe"):
                current_file = resolve("file", value)
            elif key == "fn":
                resolve("fn", value)
            elif key in ("cfi", "cfl"):
                callee_file = resolve("file", value)
            elif key == "cfn":
                callee = resolve("fn", value)
            elif key == "calls":
                where = (callee_file or current_file, callee)
                calls[where] = calls.get(where, 0) + int(value.split()[0])
                callee_file = None
    calls[TOTAL] = total
    return calls


def run(binary, env, iters, out):
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", binary, "--iters", str(iters),
           "--warmup", "0"]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"call_path.py: {' '.join(cmd)} failed:\n{p.stderr[-3000:]}")
    return calls_by_function(out)


def per_kernel(shim, a, tmp):
    label, lib = shim
    env = clean_env(a.build, {"LD_PRELOAD": lib, "MSPROBE_TASK": a.task,
                              "MSPROBE_DUMP_PATH": os.path.join(tmp, label + "-dump")})
    binary = os.path.join(a.build, "bench", "bench_passthrough")
    low = run(binary, env, a.n1, os.path.join(tmp, f"{label}-low.out"))
    high = run(binary, env, a.n2, os.path.join(tmp, f"{label}-high.out"))
    got = {TOTAL: (high[TOTAL] - low[TOTAL]) / (a.n2 - a.n1)}
    for (path, fn), n in high.items():
        rel = product_file(path or "")
        if rel is None:
            continue
        k = (n - low.get((path, fn), 0)) / (a.n2 - a.n1)
        if k >= 0.5:  # called for (nearly) every iteration
            got[(rel, fn)] = k
    return got


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shim", action="append", required=True, metavar="LABEL=LIB")
    ap.add_argument("--build", default=os.environ.get("MSPROBE_BUILD_DIR", os.path.join(SOURCE, "build")),
                    help="the build whose stand-in and bench_passthrough are used (default: build/)")
    ap.add_argument("--task", default="statistics")
    ap.add_argument("--n1", type=int, default=50)
    ap.add_argument("--n2", type=int, default=250)
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    shims = []
    for s in a.shim:
        label, sep, lib = s.partition("=")
        if not sep or not os.path.isfile(lib):
            sys.exit(f"call_path.py: --shim {s}: expected LABEL=PATH of an existing libmsprobe_shim.so")
        shims.append((label, lib))
    if a.n2 <= a.n1 or a.n1 < 1:
        sys.exit("call_path.py: need 1 <= --n1 < --n2")
    if not os.path.isfile(os.path.join(a.build, "bench", "bench_passthrough")):
        sys.exit(f"call_path.py: {a.build}/bench/bench_passthrough: not built")

    with tempfile.TemporaryDirectory(prefix="msprobe-callpath-") as tmp:
        results = [(label, per_kernel((label, lib), a, tmp)) for label, lib in shims]
    print(f"MSPROBE_TASK={a.task}; bench_passthrough, {a.n2} - {a.n1} iterations (two captured kernels each: "
          "aclnnAdd and a no-op pair); project functions called at least once per iteration\n")
    print("| shim | calls per iteration | distinct functions | source files | instructions per iteration (process) |")
    print("|---|---|---|---|---|")
    for label, got in results:
        instructions = got.pop(TOTAL)
        files = {rel for rel, _ in got}
        print(f"| {label} | {sum(got.values()):.0f} | {len(got)} | {len(files)} | {instructions:,.0f} |")
    if a.list:
        for label, got in results:
            print(f"\n{label}:")
            for (rel, fn), k in sorted(got.items(), key=lambda kv: (kv[0][0], -kv[1])):
                print(f"  {k:7.1f}  {rel}  {fn}")


if __name__ == "__main__":
    main()
