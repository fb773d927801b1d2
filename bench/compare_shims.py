#!/usr/bin/env python3
"""Two builds of libmsprobe_shim.so side by side, for a change that should make capture cheaper: the statistics
task's cost on the launching threads (bench_writer_workload.py's launch loop: CPU time of the threads that launch,
and the loop's wall time) and examples/train.py's step time,
each configuration in its own process, no shim / A / B alternated round by round (the machines are shared and
noisy: only ratios taken in one run mean anything). Both libraries run against the stand-in of --build.

    bench/compare_shims.py --a OLD/lib/libmsprobe_shim.so --b NEW/lib/libmsprobe_shim.so [--rounds 7]
        [--task statistics] [--env KEY=VALUE ...]

Prints a markdown table: medians over the rounds, and B's median of the per-round ratios B/A.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from statistics import median

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
WORKLOAD = os.path.join(HERE, "bench_writer_workload.py")
TRAIN = os.path.join(SOURCE, "examples", "train.py")


def clean_env(build, extra):
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith(("MSPROBE_", "FAKE_CANN_", "TINY_NPU_")) or k in ("LD_PRELOAD", "RANK", "RANK_ID"))}
    env.update(ASCEND_HOME_PATH=os.path.join(build, "fake_cann"), PYTHONPATH=os.path.join(SOURCE, "examples"),
               PYTHONDONTWRITEBYTECODE="1")
    env.update(extra)
    return env


def launch_ns(env, kernels):
    """(CPU time of the launching threads, the loop's wall time) per kernel, ns: bench_writer_workload.py's."""
    out = subprocess.run([sys.executable, WORKLOAD, "--time-launches", "--kernels", str(kernels), "--elements", "1024"],
                         env=env, capture_output=True, text=True, check=True).stdout
    got = dict(line.split()[:2] for line in out.splitlines() if line.count(" ") == 1)
    return float(got["launch_cpu_ns_per_kernel"]), float(got["launch_ns_per_kernel"])


def step_ms(env, steps, skip=5):
    p = subprocess.Popen([sys.executable, TRAIN, "--steps", str(steps)], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    arrivals = []
    for line in p.stdout:
        if line.startswith("step ") and "loss" in line:
            arrivals.append(time.monotonic())
    err = p.stderr.read()
    if p.wait() != 0 or len(arrivals) != steps:
        raise RuntimeError(f"train.py failed after {len(arrivals)} steps: {err[-2000:]}")
    return (arrivals[-1] - arrivals[skip]) / (steps - 1 - skip) * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--a", required=True, help="the baseline libmsprobe_shim.so")
    ap.add_argument("--b", required=True, help="the changed libmsprobe_shim.so")
    ap.add_argument("--build", default=os.environ.get("MSPROBE_BUILD_DIR", os.path.join(SOURCE, "build")),
                    help="the build whose stand-in both run against (default: build/)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--kernels", type=int, default=3000, help="kernels of the launch loop")
    ap.add_argument("--steps", type=int, default=60, help="train.py steps (the first 5 are warm-up)")
    ap.add_argument("--task", default="statistics")
    ap.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="more environment for A and B")
    a = ap.parse_args()
    for lib in (a.a, a.b):
        if not os.path.isfile(lib):
            sys.exit(f"compare_shims.py: {lib}: no such file")
    if a.rounds < 1 or a.steps < 8 or a.kernels < 1:
        sys.exit("compare_shims.py: --rounds and --kernels must be at least 1, --steps at least 8")
    extra = dict(kv.split("=", 1) for kv in a.env)

    with tempfile.TemporaryDirectory(prefix="msprobe-compare-") as tmp:
        def env_for(which):
            if which == "none":
                return clean_env(a.build, {})
            dump = os.path.join(tmp, which)
            shutil.rmtree(dump, ignore_errors=True)
            return clean_env(a.build, {"LD_PRELOAD": a.a if which == "A" else a.b, "MSPROBE_TASK": a.task,
                                       "MSPROBE_DUMP_PATH": dump, **extra})

        cpu_label = "launching threads' CPU, ns per kernel (Add of 1,024 float32)"
        wall_label = "launch loop's wall time, ns per kernel"
        rows = {cpu_label: {}, wall_label: {}, "train.py step, ms": {}}
        for r in range(a.rounds):
            order = ["none", "A", "B"][r % 3:] + ["none", "A", "B"][:r % 3]  # no fixed position
            for which in order:
                cpu, wall = launch_ns(env_for(which), a.kernels)
                rows[cpu_label].setdefault(which, []).append(cpu)
                rows[wall_label].setdefault(which, []).append(wall)
                rows["train.py step, ms"].setdefault(which, []).append(step_ms(env_for(which), a.steps))
            print(f"  round {r + 1}/{a.rounds}", file=sys.stderr)

    print(f"A = `{a.a}`, B = `{a.b}`; MSPROBE_TASK={a.task}{''.join(' ' + kv for kv in a.env)}; "
          f"{a.rounds} rounds, no shim / A / B alternated\n")
    print("| measure | no shim | A | B | A over no shim | B over no shim | B / A (median of rounds) |")
    print("|---|---|---|---|---|---|---|")
    for label, got in rows.items():
        n, x, y = median(got["none"]), median(got["A"]), median(got["B"])
        per_round = median(b / aa for aa, b in zip(got["A"], got["B"]))
        fmt = (lambda v: f"{v:,.0f}") if "ns" in label else (lambda v: f"{v:.2f}")
        print(f"| {label} | {fmt(n)} | {fmt(x)} | {fmt(y)} | {fmt(x - n)} ({x / n:.2f}x) | {fmt(y - n)} "
              f"({y / n:.2f}x) | {per_round:.2f} |")


if __name__ == "__main__":
    main()
