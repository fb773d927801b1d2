#!/usr/bin/env python3
"""Pass-through cost of the shim (issue 6), side by side in one run, printed as markdown.

1. Per aclnn op (both phases: aclnnAddGetWorkspaceSize + aclnnAdd on 1-element tensors, build/bench/bench_passthrough),
   one process per configuration and round, configurations interleaved round by round (the machine is shared):
     none        no shim
     enable0     shim loaded, MSPROBE_ENABLE=0                              target: <= 20 ns over none
     list        shim, MSPROBE_LIST=Mul: Add is filtered out by op type      target: <= 200 ns over none
     step        shim, MSPROBE_STEP=0, timed ops in step 1 (msprobe_shim_step after the warm-up)   same target
     statistics  shim, statistics task, every op captured (for scale)
   Each process times every op alone; the table gives the median over rounds of each run's median and p99.
2. examples/train.py step time (from the arrival times of its `step i loss` lines, warm-up steps skipped):
     none / shim, nothing captured (MSPROBE_LIST=NoSuchOp) / statistics (device path, the default, and host path) /
     tensor; targets 1.3x (statistics), 2x
   (tensor). Whole-process wall time is given too (includes start-up and the dump's final flush).

    /usr/bin/python3 bench/bench_passthrough.py [--quick] [--build build] [--rounds N] [--iters N] [--steps N]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)

OP_CONFIGS = [
    ("none", "no shim", None, []),
    ("enable0", "shim, `MSPROBE_ENABLE=0`", {"MSPROBE_ENABLE": "0"}, []),
    ("list", "shim, Add filtered out by `MSPROBE_LIST=Mul`", {"MSPROBE_LIST": "Mul"}, []),
    ("step", "shim, filtered out by `MSPROBE_STEP=0` (ops in step 1)", {"MSPROBE_STEP": "0"}, ["--next-step"]),
    ("statistics", "shim, statistics, every op captured", {"MSPROBE_TASK": "statistics"}, []),
]
TRAIN_CONFIGS = [
    ("none", "no shim", None),
    ("nothing", "shim, nothing captured (`MSPROBE_LIST=NoSuchOp`)", {"MSPROBE_LIST": "NoSuchOp"}),
    ("statistics", "shim, statistics", {"MSPROBE_TASK": "statistics"}),
    ("statistics_host", "shim, statistics, host path (`MSPROBE_DEVICE_STATS=off`)",
     {"MSPROBE_TASK": "statistics", "MSPROBE_DEVICE_STATS": "off"}),
    ("tensor", "shim, tensor", {"MSPROBE_TASK": "tensor"}),
]


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def run_op_bench(shimtest, exe, cfg, iters, warmup, workdir):
    name, _, env, args = cfg
    e = {}
    if env is not None:
        e.update(env)
        e["LD_PRELOAD"] = shimtest.SHIM
        e["MSPROBE_DUMP_PATH"] = os.path.join(workdir, name)
    p = subprocess.run([exe, "--iters", str(iters), "--warmup", str(warmup), *args], env=shimtest.clean_env(e),
                       cwd=workdir, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"bench_passthrough ({name}) failed with {p.returncode}: {p.stderr[-2000:]}")
    r = json.loads(p.stdout.strip().splitlines()[-1])
    if r["shim"] != (env is not None):
        raise RuntimeError(f"{name}: shim loaded = {r['shim']}, expected {env is not None}")
    # Without the shim or with MSPROBE_ENABLE=0 nothing is wrapped: the program's calls reach the real functions.
    wrapped = name not in ("none", "enable0")
    want = ("libmsprobe_shim.so", "libmsprobe_shim.so") if wrapped else ("libopapi.so", "bench_passthrough")
    if (r["add_in"], r["nop_in"]) != want:
        raise RuntimeError(f"{name}: aclnnAdd resolves into {r['add_in']}, the no-op pair into {r['nop_in']}; "
                           f"expected {want}")
    return r


def run_train(shimtest, cfg, steps, skip, workdir):
    name, _, env = cfg
    e = {}
    if env is not None:
        e.update(env)
        e["LD_PRELOAD"] = shimtest.SHIM
        e["MSPROBE_DUMP_PATH"] = os.path.join(workdir, "dump-" + name)
        shutil.rmtree(e["MSPROBE_DUMP_PATH"], ignore_errors=True)
    t0 = time.monotonic()
    p = subprocess.Popen([shimtest.PYTHON, shimtest.TRAIN, "--steps", str(steps)], env=shimtest.clean_env(e),
                         cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    arrivals = {}
    for line in p.stdout:
        m = shimtest.LOSS_LINE.match(line.strip())
        if m:
            arrivals[int(m.group(2))] = time.monotonic()
    err = p.stderr.read()
    rc = p.wait()
    wall = time.monotonic() - t0
    if rc != 0 or len(arrivals) != steps:
        raise RuntimeError(f"train.py ({name}) failed with {rc} after {len(arrivals)} steps: {err[-2000:]}")
    step_time = (arrivals[steps - 1] - arrivals[skip]) / (steps - 1 - skip)
    if env is not None and name != "nothing":
        kernels = 0
        for root, _, files in os.walk(e["MSPROBE_DUMP_PATH"]):
            if "dump.json" in files:
                with open(os.path.join(root, "dump.json")) as f:
                    kernels += len(json.load(f).get("data", {}))
        if kernels == 0:
            raise RuntimeError(f"train.py ({name}): nothing was dumped")
    return step_time, wall


def fmt_ns(v):
    return f"{v:,.0f} ns" if v < 10000 else f"{v / 1000:,.1f} µs"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="few iterations (smoke test)")
    ap.add_argument("--build", default=os.environ.get("MSPROBE_BUILD_DIR", os.path.join(SOURCE, "build")))
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--iters", type=int)
    ap.add_argument("--steps", type=int)
    ap.add_argument("--shim", help="another libmsprobe_shim.so (a build before a change), run against --build's "
                                   "stand-in and bench_passthrough (default: --build's own)")
    a = ap.parse_args()
    rounds = a.rounds or (1 if a.quick else 7)
    iters = a.iters or (300 if a.quick else 20000)
    warmup = 100 if a.quick else 2000
    steps = a.steps or (4 if a.quick else 60)
    skip = 1 if a.quick else 5
    train_rounds = 1 if a.quick else 3

    os.environ["MSPROBE_BUILD_DIR"] = os.path.abspath(a.build)
    sys.path.insert(0, os.path.join(SOURCE, "test", "python"))
    import shimtest  # noqa: E402  (reads MSPROBE_BUILD_DIR)
    if a.shim:
        shimtest.SHIM = os.path.abspath(a.shim)

    exe = os.path.join(shimtest.BUILD, "bench", "bench_passthrough")
    for path in (exe, shimtest.SHIM):
        if not os.path.exists(path):
            sys.exit(f"bench_passthrough.py: {path} is missing (ninja bench_passthrough msprobe_shim examples)")

    with tempfile.TemporaryDirectory(prefix="msprobe-bench-") as tmp:
        per = {c[0]: [] for c in OP_CONFIGS}
        for r in range(rounds):
            order = OP_CONFIGS[r % len(OP_CONFIGS):] + OP_CONFIGS[:r % len(OP_CONFIGS)]  # rotate: no fixed position
            for cfg in order:
                per[cfg[0]].append(run_op_bench(shimtest, exe, cfg, iters, warmup, tmp))
                shutil.rmtree(os.path.join(tmp, cfg[0]), ignore_errors=True)

        targets = {"enable0": 20, "list": 200, "step": 200}
        print(f"### Shim cost per aclnn op, both phases, on a no-op op pair (`bench_passthrough`; {rounds} "
              f"interleaved rounds x {iters:,} calls, direct and through the shim's wrappers alternating)\n")
        print("The program's own aclnnBenchNop{GetWorkspaceSize,} pair, called directly and through what `dlsym` "
              "returns (the shim's wrappers, header-less), in the same loop: the difference is the shim's cost "
              "alone. Times include two clock reads.\n")
        print("| configuration | direct (median) | through the shim (median / p99) | shim cost (median) | target |")
        print("|---|---|---|---|---|")
        for name, label, _, _ in OP_CONFIGS:
            if name == "statistics":
                continue  # the no-op pair has no tensors: nothing to capture
            d = median([x["nop_direct_median_ns"] for x in per[name]])
            w = median([x["nop_wrapped_median_ns"] for x in per[name]])
            wp = median([x["nop_wrapped_p99_ns"] for x in per[name]])
            tgt = targets.get(name)
            verdict = "" if tgt is None else f"≤ {tgt} ns: {'met' if w - d <= tgt else 'MISSED'}"
            print(f"| {label} | {d:,.0f} ns | {w:,.0f} / {wp:,.0f} ns | {w - d:+,.0f} ns | {verdict} |")
        print()

        base_med = median([x["median_ns"] for x in per["none"]])
        print(f"### Per aclnn op, both phases, real stand-in op (`bench_passthrough`: aclnnAdd on 1 element; "
              f"{rounds} interleaved rounds x {iters:,} ops per configuration)\n")
        print("| configuration | median | p99 | over no shim (median) | ratio |")
        print("|---|---|---|---|---|")
        for name, label, _, _ in OP_CONFIGS:
            med = median([x["median_ns"] for x in per[name]])
            p99 = median([x["p99_ns"] for x in per[name]])
            over = med - base_med
            print(f"| {label} | {fmt_ns(med)} | {fmt_ns(p99)} | "
                  f"{'' if name == 'none' else f'{over:+,.0f} ns'} | {med / base_med:.2f}x |")
        spread = [x["median_ns"] for x in per["none"]]
        print(f"\nNo-shim medians over the rounds: {min(spread):,}–{max(spread):,} ns: the stand-in's op (allocations, "
              f"a hand-over to its device thread) varies far more than the shim's cost, which the no-op table "
              f"measures.\n")

        times = {c[0]: [] for c in TRAIN_CONFIGS}
        for r in range(train_rounds):
            order = TRAIN_CONFIGS[r % len(TRAIN_CONFIGS):] + TRAIN_CONFIGS[:r % len(TRAIN_CONFIGS)]
            for cfg in order:
                times[cfg[0]].append(run_train(shimtest, cfg, steps, skip, tmp))
        base_step = median([t[0] for t in times["none"]])
        base_wall = median([t[1] for t in times["none"]])
        print(f"### examples/train.py ({steps} steps, step time over steps {skip}..{steps - 1}; "
              f"{train_rounds} interleaved rounds)\n")
        print("| configuration | step time | ratio | whole process | ratio | target |")
        print("|---|---|---|---|---|---|")
        ttargets = {"statistics": 1.3, "statistics_host": 1.3, "tensor": 2.0}
        for name, label, _ in TRAIN_CONFIGS:
            st = median([t[0] for t in times[name]])
            wall = median([t[1] for t in times[name]])
            tgt = ttargets.get(name)
            verdict = "" if tgt is None else f"≤ {tgt}x: {'met' if st / base_step <= tgt else 'MISSED'}"
            print(f"| {label} | {st * 1000:.2f} ms | {st / base_step:.2f}x | {wall:.2f} s | {wall / base_wall:.2f}x "
                  f"| {verdict} |")
        print()


if __name__ == "__main__":
    main()
