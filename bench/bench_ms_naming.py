#!/usr/bin/env python3
"""Kernel names from MindSpore's runtime profiler (issue 33 item 3): what the naming costs per kernel on the host.

Runs examples/ms_kbk_train.py (the MindSpore-KBK-shaped host: 21 kernels per step, all launched by its actor thread)
and reads the actor thread's CPU time per kernel after step 0 (`--time`), interleaved over R rounds, median per
configuration:

    no shim, profiler off                  MindSpore's high-performance launch path (no records)
    no shim, MS_ENABLE_RUNTIME_PROFILER=1  MindSpore's own records (PROFILER_START/END), kept by its profiler
    shim, MS_ENABLE_RUNTIME_PROFILER=0     the shim without the naming: the launch path of HP mode, today's names
    shim (default)                         the shim turns the profiler on and names every kernel from its records

for the structure task (the capture's cheapest: names and descriptions, no data) and the statistics task. The naming
cost is the last line minus the one before it: MindSpore's records plus the shim's reading them and naming the
kernels that waited for them.

    /usr/bin/python3 bench/bench_ms_naming.py [--quick] [--build build]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
PYTHON = "/usr/bin/python3"
KBK = os.path.join(SOURCE, "examples", "ms_kbk_train.py")
PER_KERNEL = re.compile(r"actor_cpu_ns_per_kernel (\d+)")


def one_run(build, steps, shim_task, profiler):
    with tempfile.TemporaryDirectory(prefix="bench_ms_naming_") as d:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("MSPROBE_", "FAKE_CANN_", "MS_ENABLE_RUNTIME")) and k != "LD_PRELOAD"}
        env.update(ASCEND_HOME_PATH=os.path.join(build, "fake_cann"), MSPROBE_BUILD_DIR=build)
        if profiler is not None:
            env["MS_ENABLE_RUNTIME_PROFILER"] = profiler
        if shim_task:
            env.update(LD_PRELOAD=os.path.join(build, "lib", "libmsprobe_shim.so"), MSPROBE_TASK=shim_task,
                       MSPROBE_DUMP_PATH=os.path.join(d, "dump"))
        p = subprocess.run([PYTHON, KBK, "--steps", str(steps), "--time"], env=env, cwd=d, capture_output=True,
                           text=True, timeout=600)
    m = PER_KERNEL.search(p.stderr)
    if p.returncode != 0 or not m:
        sys.exit(f"ms_kbk_train.py failed ({shim_task}, profiler {profiler}):\n{p.stdout}\n{p.stderr}")
    return int(m.group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--build", default=os.environ.get("MSPROBE_BUILD_DIR", os.path.join(SOURCE, "build")))
    ap.add_argument("--rounds", type=int)
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    steps, rounds = (40, 1) if args.quick else (200, 5)
    rounds = args.rounds or rounds
    configs = [("no shim, profiler off", None, None), ("no shim, MS_ENABLE_RUNTIME_PROFILER=1", None, "1")]
    for task in ("structure", "statistics"):
        configs += [(f"shim {task}, MS_ENABLE_RUNTIME_PROFILER=0 (no naming)", task, "0"),
                    (f"shim {task}, naming from the profiler (default)", task, None)]
    results = {name: [] for name, _, _ in configs}
    for _ in range(rounds):
        for name, task, profiler in configs:
            results[name].append(one_run(build, steps, task, profiler))
    med = {name: statistics.median(v) for name, v in results.items()}
    print("## MindSpore KBK: kernel names from the runtime profiler (issue 33)\n")
    print(f"examples/ms_kbk_train.py, {steps} steps of 21 kernels, the actor thread's CPU per kernel after step 0, "
          f"median of {rounds} interleaved rounds.\n")
    print("| configuration | actor CPU per kernel (median) | rounds (min–max) | vs no shim |")
    print("|---|---|---|---|")
    base = med["no shim, profiler off"]
    for name, _, _ in configs:
        lo, hi = min(results[name]), max(results[name])
        print(f"| {name} | {med[name] / 1000:.1f} µs | {lo / 1000:.1f}–{hi / 1000:.1f} µs | {med[name] / base:.2f}x |")
    print()
    mindspore = med["no shim, MS_ENABLE_RUNTIME_PROFILER=1"] - base
    print(f"- MindSpore's own records: +{mindspore / 1000:.1f} µs per kernel.")
    for task in ("structure", "statistics"):
        off = med[f"shim {task}, MS_ENABLE_RUNTIME_PROFILER=0 (no naming)"]
        on = med[f"shim {task}, naming from the profiler (default)"]
        print(f"- {task}: the naming costs {(on - off) / 1000:+.1f} µs per kernel ({off / 1000:.1f} → {on / 1000:.1f} µs, "
              f"{on / off:.2f}x), MindSpore's records included.")


if __name__ == "__main__":
    main()
