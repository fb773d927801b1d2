#!/usr/bin/env python3
"""ACL graph capture and replay (issue 43): what seeing inside the replays costs.

Runs test/integration/shim/acl_graph_host.py (an ACL graph of aclnnAdd in a task group and aclnnMul over tensors of
--n float32 elements, captured once and replayed once per step, a task update at step 3) without the shim and under
each task, interleaved over R rounds. Per configuration, medians over the rounds: step 0 (an eager warm-up, then the
capture, which runs nothing),
the mean replay step (aclmdlRIExecuteAsync + aclrtSynchronizeStream), and the tasks the graph holds
(aclmdlRIDebugJsonPrint): the shim's device-to-device copies are the extra ones.

    /usr/bin/python3 bench/bench_acl_graphs.py [--quick] [--build build]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
PYTHON = "/usr/bin/python3"
HOST = os.path.join(SOURCE, "test", "integration", "shim", "acl_graph_host.py")
TASKS = [None, "structure", "statistics", "md5", "tensor", "overflow_check"]


def one_run(build, steps, n, task):
    with tempfile.TemporaryDirectory(prefix="bench_acl_graphs_") as d:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("MSPROBE_", "FAKE_CANN_")) and k != "LD_PRELOAD"}
        env.update(ASCEND_HOME_PATH=os.path.join(build, "fake_cann"),
                   PYTHONPATH=os.pathsep.join([os.path.join(SOURCE, "examples"), os.path.join(SOURCE, "test", "python")]))
        if task:
            summary = {}
            if task == "md5":
                task, summary = "statistics", {"MSPROBE_SUMMARY_MODE": "md5"}
            env.update(LD_PRELOAD=os.path.join(build, "lib", "libmsprobe_shim.so"), MSPROBE_TASK=task,
                       MSPROBE_DUMP_PATH=os.path.join(d, "dump"), **summary)
        out, tasks = os.path.join(d, "values.json"), os.path.join(d, "tasks.json")
        subprocess.run([PYTHON, HOST, "--mode", "graph", "--steps", str(steps), "--n", str(n), "--tasks-json", tasks,
                        out], env=env, check=True, capture_output=True, timeout=600)
        with open(out) as f:
            seconds = json.load(f)["seconds"]
        with open(tasks) as f:
            held = len(json.load(f)["tasks"])
        return seconds["warmup"], seconds["steps"] / steps, held


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(SOURCE, "build"))
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    rounds, steps, n = (2, 50, 4096) if args.quick else (3, 100, 16384)
    results = {t: [] for t in TASKS}
    for _ in range(rounds):
        for t in TASKS:
            results[t].append(one_run(args.build, steps, n, t))
    print(f"acl_graph_host.py: {steps} replays, tensors of {n} float32, {rounds} rounds (medians)\n")
    print("| task | step 0: warm-up + capture (ms) | replay step (ms) | tasks in the graph |")
    print("|---|---|---|---|")
    for t in TASKS:
        cap = statistics.median(r[0] for r in results[t]) * 1e3
        rep = statistics.median(r[1] for r in results[t]) * 1e3
        print(f"| {t or 'no shim'} | {cap:.2f} | {rep:.3f} | {results[t][0][2]} |")


if __name__ == "__main__":
    main()
