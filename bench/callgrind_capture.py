#!/usr/bin/env python3
"""Instructions per captured kernel on the two launching threads, counted by callgrind: a figure that does not move
with the machine's load (the shared 2-core machines make CPU times swing), to go beside compare_shims.py's.

bench_writer_workload.py's launch loop (Add of 1,024 float32 through tiny_npu and its task queue) runs under
`valgrind --tool=callgrind --separate-threads=yes` twice, with N1 and N2 kernels; what a thread executes per kernel
is the difference of its totals over N2 - N1 (start-up, warm-up and exit cancel). The Python thread runs aclnn
phase 1 (argument objects, GetWorkspaceSize), the queue thread phase 2 (TASK_QUEUE_ENABLE=1).

    bench/callgrind_capture.py [--a OLD.so] [--b NEW.so] [--task statistics] [--n1 40] [--n2 240] [--cache-sim]

Prints a markdown table: instructions per kernel, no shim / A / B.

With --cache-sim, callgrind also simulates the caches (its model of the machine's L1 and last level), and the table
gains, per thread, the simulated misses per kernel and callgrind's cycle estimate (instructions + 10 per L1 miss +
100 per last-level miss), and the Python thread's share as time: the no-shim Python thread's own CPU per kernel,
measured natively (the least of --calibrate runs), scaled by the estimate's ratio. That derived figure is what the
shim's own work costs the Python thread with the caches it disturbs, without the swings that the other threads on
the same two cores put into a measured thread CPU time.
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
from compare_shims import clean_env, launch_loop  # noqa: E402


EVENTS = ("Ir", "L1 misses", "LL misses", "est. cycles")


def thread_events(text):
    """(Ir, L1 misses, LL misses, estimated cycles) of one per-thread callgrind file."""
    names = re.search(r"^events:\s+(.*)$", text, re.M).group(1).split()
    total = re.search(r"^(?:summary|totals):\s+(.*)$", text, re.M).group(1).split()
    ev = dict(zip(names, (int(v) for v in total)))
    l1 = sum(ev.get(k, 0) for k in ("I1mr", "D1mr", "D1mw"))
    ll = sum(ev.get(k, 0) for k in ("ILmr", "DLmr", "DLmw"))
    return (ev["Ir"], l1, ll, ev["Ir"] + 10 * l1 + 100 * ll)


def thread_totals(outdir):
    """{'python': events, 'queue': events} from callgrind's per-thread files of one run (thread_events' tuple)."""
    got = {}
    for path in glob.glob(os.path.join(outdir, "callgrind.out-*")):
        m = re.search(r"-(\d+)$", path)
        if not m:
            continue
        text = open(path, errors="replace").read()
        if not re.search(r"^(?:summary|totals):", text, re.M):
            continue
        ev = thread_events(text)
        if m.group(1) == "01":
            got["python"] = ev
        elif "TaskQueue::execute" in text:  # tiny_npu's queue thread (taskqueue.cpp)
            got["queue"] = tuple(a + b for a, b in zip(got.get("queue", (0, 0, 0, 0)), ev))
    return got


def run(env, kernels, tmp, tag, cache_sim):
    out = os.path.join(tmp, tag)
    os.makedirs(out, exist_ok=True)
    cmd = ["valgrind", "--tool=callgrind", "--separate-threads=yes", f"--callgrind-out-file={out}/callgrind.out",
           *(["--cache-sim=yes"] if cache_sim else []), sys.executable, WORKLOAD, "--time-launches", "--no-checksum",
           "--kernels", str(kernels), "--elements", "1024"]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"callgrind run failed:\n{p.stderr[-3000:]}")
    return thread_totals(out)


def python_thread_cpu_ns(env, runs):
    """The Python thread's CPU per kernel of the launch loop, natively: the least of `runs` runs."""
    return min(launch_loop(env, 3000)["phase1_cpu_ns_per_kernel"] for _ in range(runs))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--a")
    ap.add_argument("--b")
    ap.add_argument("--build", default=os.environ.get("MSPROBE_BUILD_DIR", os.path.join(SOURCE, "build")))
    ap.add_argument("--task", default="statistics")
    ap.add_argument("--n1", type=int, default=40)
    ap.add_argument("--n2", type=int, default=240)
    ap.add_argument("--env", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--cache-sim", action="store_true", help="simulate the caches too (about 2x slower)")
    ap.add_argument("--calibrate", type=int, default=7, help="with --cache-sim: native no-shim runs for the time scale")
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
            t1 = run(env, a.n1, tmp, f"{name[0]}1", a.cache_sim)
            t2 = run(env, a.n2, tmp, f"{name[0]}2", a.cache_sim)
            per[name] = {k: [(y - x) / (a.n2 - a.n1) for x, y in zip(t1.get(k, (0,) * 4), t2.get(k, (0,) * 4))]
                         for k in ("python", "queue")}
            print(f"  {name}: {per[name]}", file=sys.stderr)
        host_ns = python_thread_cpu_ns(clean_env(a.build, dict(extra)), a.calibrate) if a.cache_sim else None
    base = per["no shim"]
    shown = range(len(EVENTS)) if a.cache_sim else range(1)
    print(f"{'Callgrind events' if a.cache_sim else 'Instructions'} per kernel ({a.n2} - {a.n1} kernels; "
          f"MSPROBE_TASK={a.task}{''.join(' ' + kv for kv in a.env)})\n")
    print("| thread | " + " | ".join(configs) + " | " + " | ".join(f"{n} adds" for n in configs if n != "no shim") + " |")
    print("|---|" + "---|" * (2 * len(configs) - 1))
    for k, label in (("python", "Python thread (phase 1)"), ("queue", "queue thread (phase 2)")):
        for i in shown:
            row = label + (f", {EVENTS[i]}" if a.cache_sim else "")
            print(f"| {row} | " + " | ".join(f"{per[n][k][i]:,.0f}" for n in configs) + " | " +
                  " | ".join(f"{per[n][k][i] - base[k][i]:+,.0f}" for n in configs if n != "no shim") + " |")
    if host_ns and base["python"][3] > 0:
        scale = host_ns / base["python"][3]
        print(f"\nThe Python thread without the shim: {host_ns:,.0f} ns of CPU per kernel (least of {a.calibrate} "
              f"native runs), {base['python'][3]:,.0f} estimated cycles: {scale * 1e3:.3f} ns per thousand.")
        for n in configs:
            if n != "no shim":
                added = per[n]["python"][3] - base["python"][3]
                print(f"{n} adds {added:+,.0f} estimated cycles on the Python thread: about "
                      f"{added * scale / 1e3:+.2f} µs per captured kernel (derived).")


if __name__ == "__main__":
    main()
