#!/usr/bin/env python3
"""Instructions per captured kernel on the two launching threads, counted by callgrind: a figure that does not move
with the machine's load (the shared 2-core machines make CPU times swing), to go beside compare_shims.py's.

bench_writer_workload.py's launch loop (Add of 1,024 float32 through tiny_npu and its task queue) runs under
`valgrind --tool=callgrind --separate-threads=yes` twice, with N1 and N2 kernels; what a thread executes per kernel
is the difference of its totals over N2 - N1 (start-up, warm-up and exit cancel). The Python thread runs aclnn
phase 1 (argument objects, GetWorkspaceSize), the queue thread phase 2 (TASK_QUEUE_ENABLE=1).

    bench/callgrind_capture.py [--a OLD.so] [--b NEW.so] [--task statistics] [--n1 40] [--n2 240]

Prints a markdown table: instructions per kernel, no shim / A / B.
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
WORKLOAD = os.path.join(HERE, "bench_writer_workload.py")
sys.path.insert(0, HERE)
from compare_shims import clean_env  # noqa: E402


def thread_totals(outdir):
    """{'python': Ir, 'queue': Ir} from callgrind's per-thread files of one run."""
    got = {}
    for path in glob.glob(os.path.join(outdir, "callgrind.out-*")):
        m = re.search(r"-(\d+)$", path)
        if not m:
            continue
        text = open(path, errors="replace").read()
        total = re.search(r"^(?:summary|totals):\s+(\d+)", text, re.M)
        if not total:
            continue
        ir = int(total.group(1))
        if m.group(1) == "01":
            got["python"] = ir
        elif "TaskQueue::execute" in text:  # tiny_npu's queue thread (taskqueue.cpp)
            got["queue"] = got.get("queue", 0) + ir
    return got


def run(env, kernels, tmp, tag):
    out = os.path.join(tmp, tag)
    os.makedirs(out, exist_ok=True)
    cmd = ["valgrind", "--tool=callgrind", "--separate-threads=yes", f"--callgrind-out-file={out}/callgrind.out",
           sys.executable, WORKLOAD, "--time-launches", "--no-checksum", "--kernels", str(kernels), "--elements", "1024"]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"callgrind run failed:\n{p.stderr[-3000:]}")
    return thread_totals(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--a")
    ap.add_argument("--b")
    ap.add_argument("--build", default=os.environ.get("MSPROBE_BUILD_DIR", os.path.join(SOURCE, "build")))
    ap.add_argument("--task", default="statistics")
    ap.add_argument("--n1", type=int, default=40)
    ap.add_argument("--n2", type=int, default=240)
    ap.add_argument("--env", action="append", default=[], metavar="KEY=VALUE")
    a = ap.parse_args()
    extra = dict(kv.split("=", 1) for kv in a.env)
    extra.setdefault("PYTHONHASHSEED", "0")
    configs = {"no shim": None}
    if a.a:
        configs["A"] = a.a
    if a.b:
        configs["B"] = a.b
    per = {}
    with tempfile.TemporaryDirectory(prefix="msprobe-callgrind-") as tmp:
        for name, lib in configs.items():
            env = dict(extra)
            if lib:
                env.update(LD_PRELOAD=lib, MSPROBE_TASK=a.task, MSPROBE_DUMP_PATH=os.path.join(tmp, "dump-" + name[0]))
            env = clean_env(a.build, env)
            t1 = run(env, a.n1, tmp, f"{name[0]}1")
            t2 = run(env, a.n2, tmp, f"{name[0]}2")
            per[name] = {k: (t2.get(k, 0) - t1.get(k, 0)) / (a.n2 - a.n1) for k in ("python", "queue")}
            print(f"  {name}: {per[name]}", file=sys.stderr)
    base = per["no shim"]
    print(f"Instructions per kernel (callgrind, {a.n2} - {a.n1} kernels; MSPROBE_TASK={a.task}"
          f"{''.join(' ' + kv for kv in a.env)})\n")
    print("| thread | " + " | ".join(configs) + " | " + " | ".join(f"{n} adds" for n in configs if n != "no shim") + " |")
    print("|---|" + "---|" * (2 * len(configs) - 1))
    for k, label in (("python", "Python thread (phase 1)"), ("queue", "queue thread (phase 2)")):
        print(f"| {label} | " + " | ".join(f"{per[n][k]:,.0f}" for n in configs) + " | " +
              " | ".join(f"{per[n][k] - base[k]:+,.0f}" for n in configs if n != "no shim") + " |")


if __name__ == "__main__":
    main()
