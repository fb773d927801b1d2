#!/usr/bin/env python3
"""Graph-sunk kernels through CANN's data dump (issue 22): what capturing them costs the host.

Runs examples/graph_train.py (one model of 24 kernels, one aclmdlExecute per step, MindSpore's step hook) without the
shim and under the statistics and tensor tasks, interleaved over R rounds. Per configuration: step time (from the
first to the last step line / (S-1), median over rounds), and from the shim's own summary at exit
(MSPROBE_LOG_LEVEL=info, "graph dump: ..."): the bytes CANN delivered to the host through the dump callback, the files
(one per kernel per step) and the CPU time the shim spent on CANN's record thread reassembling, decoding and handing
them to the writer, per kernel.

    /usr/bin/python3 bench/bench_graph.py [--quick] [--build build]
"""
import argparse
import os
import platform
import re
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
PYTHON = "/usr/bin/python3"
GRAPH_TRAIN = os.path.join(SOURCE, "examples", "graph_train.py")
sys.path.insert(0, HERE)
from step_timing import run_timed  # noqa: E402

SUMMARY = re.compile(r"graph dump: (\d+) chunks \((\d+) bytes\) made (\d+) files, (\d+) kernels recorded; "
                     r"([\d.]+) ms of CPU in the callback")


def one_run(build, steps, task):
    with tempfile.TemporaryDirectory(prefix="bench_graph_") as d:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("MSPROBE_", "FAKE_CANN_", "MS_HOOK", "HOOK_TOOL")) and k != "LD_PRELOAD"}
        env.update(ASCEND_HOME_PATH=os.path.join(build, "fake_cann"), PYTHONUNBUFFERED="1",
                   PYTHONPATH=os.pathsep.join([os.path.join(SOURCE, "examples"), os.path.join(SOURCE, "test", "python")]))
        if task:
            env.update(LD_PRELOAD=os.path.join(build, "lib", "libmsprobe_shim.so"), MSPROBE_TASK=task,
                       MSPROBE_DUMP_PATH=os.path.join(d, "dump"), MSPROBE_LOG_LEVEL="info")
        r = run_timed([PYTHON, GRAPH_TRAIN, "--steps", str(steps)], env, d, f"graph_train.py ({task})")
    m = SUMMARY.search(r.stderr)
    summary = tuple(float(g) for g in m.groups()) if m else None
    if task and not summary:
        sys.exit(f"no graph dump summary in the {task} run's stderr:\n{r.stderr}")
    return r.step_s, summary, r.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--build", default=os.environ.get("MSPROBE_BUILD_DIR", os.path.join(SOURCE, "build")))
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    steps, rounds = (6, 1) if args.quick else (30, 5)
    configs = [("no shim", None), ("statistics", "statistics"), ("tensor", "tensor")]
    results = {name: [] for name, _ in configs}
    for _ in range(rounds):
        for name, task in configs:
            results[name].append(one_run(build, steps, task))
    plain = statistics.median(r[0] for r in results["no shim"])
    out = [f"### examples/graph_train.py, {steps} steps (bench/bench_graph.py" + (" --quick" if args.quick else "") + ")",
           "", f"Machine: {platform.machine()}, {os.cpu_count()} cores (shared); CANN stand-in. {rounds} interleaved "
           "round(s), medians. Bytes: the dump files' bytes CANN delivered to the host through the callback.", "",
           "| run | step time | vs no shim | kernels recorded | bytes to the host | per kernel | callback CPU per kernel |",
           "|---|---|---|---|---|---|---|"]
    same = True
    for name, task in configs:
        rs = results[name]
        step = statistics.median(r[0] for r in rs)
        same = same and all(r[2] == results["no shim"][0][2] for r in rs)
        if not task:
            out.append(f"| {name} | {step * 1e3:.2f} ms | 1.00x | - | - | - | - |")
            continue
        chunks, nbytes, files, kernels, cpu_ms = rs[-1][1]
        cpu = statistics.median(r[1][4] / max(r[1][2], 1) * 1e3 for r in rs)
        out.append(f"| {name} | {step * 1e3:.2f} ms | {step / plain:.2f}x | {kernels:.0f} | {nbytes:,.0f} B | "
                   f"{nbytes / max(files, 1):,.0f} B | {cpu:.1f} us |")
    out += ["", f"Losses identical to the run without the shim in every run: {same}."]
    print("\n".join(out))


if __name__ == "__main__":
    main()
