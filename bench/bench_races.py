#!/usr/bin/env python3
"""What the race check between streams costs (MSPROBE_RACECHECK=1, docs/races.md), side by side in one run: each task
of --tasks with the check off and on, each configuration in its own process, alternated round by round (the machine is
shared and noisy: only differences taken in one run mean anything).

  - bench_writer_workload.py's launch loop (compare_shims.py's): CPU time of the launching threads (the Python
    thread's phase 1 and the queue thread's phase 2) per captured kernel: what the check adds there is the stamp and
    the accesses carried in the record (target: at most +1 us per kernel);
  - examples/train.py's step time.

    bench/bench_races.py [--build build] [--rounds 5] [--kernels 4000] [--tasks structure,statistics]

Prints a markdown table: medians over the rounds, and the median of the per-round differences (on - off).
"""
import argparse
import os
import shutil
import sys
import tempfile
from statistics import median

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from compare_shims import LOOP, TRAIN, clean_env, launch_loop, step_ms  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                                   "build"))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--kernels", type=int, default=4000)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--tasks", default="structure,statistics")
    a = p.parse_args()
    shim = os.path.join(a.build, "lib", "libmsprobe_shim.so")
    if not os.path.isfile(shim):
        sys.exit(f"bench_races.py: {shim}: no such file")
    configs = [(task, check) for task in a.tasks.split(",") for check in ("0", "1")]
    loop_key = dict(LOOP)
    rows = {c: {"cpu": [], "wall": [], "step": []} for c in configs}
    with tempfile.TemporaryDirectory(prefix="msprobe-races-") as tmp:
        for r in range(a.rounds):
            for task, check in configs[r % len(configs):] + configs[:r % len(configs)]:
                dump = os.path.join(tmp, f"{task}-{check}")
                shutil.rmtree(dump, ignore_errors=True)
                env = clean_env(a.build, {"LD_PRELOAD": shim, "MSPROBE_TASK": task, "MSPROBE_DUMP_PATH": dump,
                                          "MSPROBE_RACECHECK": check})
                got = launch_loop(env, a.kernels)
                rows[(task, check)]["cpu"].append(got[loop_key["launching threads' CPU, ns per kernel (both)"]])
                rows[(task, check)]["wall"].append(got[loop_key["launch loop's wall time, ns per kernel"]])
                shutil.rmtree(dump, ignore_errors=True)
                rows[(task, check)]["step"].append(step_ms(env, TRAIN, a.steps, 5)[0])
            print(f"  round {r + 1}/{a.rounds}", file=sys.stderr)
    print(f"`{shim}`; {a.rounds} rounds, configurations alternated; {a.kernels} kernels per launch loop (Add of "
          f"1,024 float32), {a.steps} train.py steps (first 5 left out)\n")
    print("| task | figure | check off | check on | on - off (median of rounds) |")
    print("|---|---|---|---|---|")
    labels = {"cpu": "launching threads' CPU, ns per kernel", "wall": "launch loop's wall time, ns per kernel",
              "step": "train.py step, ms"}
    for task in a.tasks.split(","):
        off, on = rows[(task, "0")], rows[(task, "1")]
        for key, label in labels.items():
            diff = median(b - c for b, c in zip(on[key], off[key]))
            f = (lambda v: f"{v:.2f}") if key == "step" else (lambda v: f"{v:,.0f}")
            print(f"| {task} | {label} | {f(median(off[key]))} | {f(median(on[key]))} | {f(diff)} |")


if __name__ == "__main__":
    main()
