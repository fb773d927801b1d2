#!/usr/bin/env python3
"""The flight task (issue 20): train.py's step time beside the statistics and tensor tasks, and the memory the shim
holds against MSPROBE_BUFFER_MB.

Runs examples/train.py (--hidden H, S steps) without the shim and under the statistics, tensor and flight tasks,
interleaved over R rounds (the machine is shared: the ratios of one round are what counts). Step time is the time
from the first to the last step line / (S-1); the table gives the median over rounds. Memory is the process's peak
resident set (ru_maxrss of the child) minus the run without the shim: on the CANN stand-in device memory is host
memory, so the flight ring (MSPROBE_BUFFER_MB of device memory on an NPU) is counted in it, which makes the
comparison with the budget strict. No NaN is planted, so the flight runs write nothing; the last column says so.

    /usr/bin/python3 bench/bench_flight.py [--quick] [--build build] [--budget-mb 64,256]
"""
import argparse
import os
import platform
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
PYTHON = "/usr/bin/python3"
TRAIN = os.path.join(SOURCE, "examples", "train.py")

sys.path.insert(0, HERE)
from step_timing import run_timed  # noqa: E402


def env_for(build, workdir, task, budget_mb):
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("MSPROBE_", "FAKE_CANN_", "TINY_NPU_")) and k not in ("LD_PRELOAD", "RANK", "RANK_ID")}
    e["ASCEND_HOME_PATH"] = os.path.join(build, "fake_cann")
    e["PYTHONPATH"] = os.pathsep.join([os.path.join(SOURCE, "examples"), os.path.join(SOURCE, "test", "python")])
    e["PYTHONDONTWRITEBYTECODE"] = "1"
    e["PYTHONUNBUFFERED"] = "1"
    if task is not None:
        e["LD_PRELOAD"] = os.path.join(build, "lib", "libmsprobe_shim.so")
        e["MSPROBE_DUMP_PATH"] = os.path.join(workdir, "dump")
        e["MSPROBE_TASK"] = task
        e["MSPROBE_BUFFER_MB"] = str(budget_mb)
        e["MSPROBE_LOG_LEVEL"] = "info"
    return e


def one_run(build, args, task, budget_mb):
    """(seconds per step, peak RSS in bytes, stdout, stderr, files written)."""
    with tempfile.TemporaryDirectory(prefix="bench_flight_") as d:
        r = run_timed([PYTHON, TRAIN, *args], env_for(build, d, task, budget_mb), d, f"train.py ({task})")
        files = sum(len(n) for _, _, n in os.walk(os.path.join(d, "dump")))
    return r.step_s, r.max_rss, r.stdout, r.stderr, files


def ring_line(err):
    for line in err.splitlines():
        if "flight: ring of" in line:
            return line.split("msprobe-shim: ", 1)[-1]
    return ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer steps and rounds")
    ap.add_argument("--build", default=os.environ.get("MSPROBE_BUILD_DIR", os.path.join(SOURCE, "build")))
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--budget-mb", default="64,256")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    steps, rounds = (6, 1) if args.quick else (20, 5)
    budgets = [int(b) for b in args.budget_mb.split(",")]
    train_args = ["--steps", str(steps), "--hidden", str(args.hidden)]
    configs = [("no shim", None, budgets[0]), ("statistics", "statistics", budgets[0]),
               ("tensor", "tensor", budgets[0])] + [(f"flight, {b} MiB", "flight", b) for b in budgets]
    results = {name: [] for name, _, _ in configs}
    for _ in range(rounds):
        for name, task, budget in configs:
            results[name].append(one_run(build, train_args, task, budget))
    plain_step = statistics.median(r[0] for r in results["no shim"])
    plain_rss = statistics.median(r[1] for r in results["no shim"])
    stats_step = statistics.median(r[0] for r in results["statistics"])
    out = [f"### Flight task: train.py --hidden {args.hidden}, {steps} steps (bench/bench_flight.py"
           + (" --quick" if args.quick else "") + ")", "",
           f"Machine: {platform.machine()}, {os.cpu_count()} cores (shared); CANN stand-in (its device memory is host "
           f"memory, so the ring counts in the resident set). {rounds} interleaved round(s), medians; step time = "
           f"time from the first to the last step line / (S-1).", "",
           "| run | step time | vs no shim | vs statistics | peak RSS over no shim | budget | files written |",
           "|---|---|---|---|---|---|---|"]
    same_losses = True
    for name, task, budget in configs:
        rs = results[name]
        step = statistics.median(r[0] for r in rs)
        extra = statistics.median(r[1] for r in rs) - plain_rss
        same_losses = same_losses and all(r[2] == results["no shim"][0][2] for r in rs)
        out.append(f"| {name} | {step * 1e3:.1f} ms | {step / plain_step:.2f}x | {step / stats_step:.2f}x | "
                   f"{extra / 2**20:+.1f} MiB | {budget if task else '-'} MiB | "
                   f"{statistics.median(r[4] for r in rs):.0f} |")
    out += ["", f"Losses identical to the run without the shim in every run: {same_losses}."]
    for b in budgets:
        line = ring_line(results[f"flight, {b} MiB"][-1][3])
        if line:
            out += ["", f"flight, {b} MiB, last round: `{line}`"]
    print("\n".join(out))


if __name__ == "__main__":
    main()
