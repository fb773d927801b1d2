#!/usr/bin/env python3
"""The collector's writer (issue 6): statistics, tensor files, lz4 and memory, each against a reference measured
side by side in the same run. Prints one markdown section (machine, date, commands, tables with ratios).

  statistics  launching-thread cost per kernel for small tensors (shim, statistics task, vs no shim), and the
              statistics pass (format/stats.cpp, one fused pass) vs numpy computing max, min, mean and norm of
              the same arrays                                          targets: <= 5 us/kernel, >= 3x numpy
  tensor      the Collector writing tensor files vs `dd` writing the same bytes to the same file system, and vs a
              loop of numpy.save of the same arrays; lz4 throughput and ratio on train.py's tensors
                                                                       targets: >= 0.8x dd, >= 2x numpy.save
  memory      peak RSS of a producer faster than the writer (1 MiB tensors, tensor task) under several
              MSPROBE_BUFFER_MB, minus the same workload without the shim     target: <= budget + 100 MB

    /usr/bin/python3 bench/bench_writer.py [--quick] [--build build] [--dir /tmp/...]
"""
import argparse
import collections
import datetime
import glob
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
WORKLOAD = os.path.join(HERE, "bench_writer_workload.py")
TRAIN = os.path.join(SOURCE, "examples", "train.py")
PYTHON = sys.executable  # the interpreter that runs the benchmark (an arm64 one under qemu)


def machine():
    model = "?"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        m = re.search(r"Model name:\s*(.+)", out)
        model = m.group(1).strip() if m else model
    except OSError:
        pass
    load = os.getloadavg()[0]
    return (f"`{model}`, {os.cpu_count()} vCPUs, {platform.system()} {platform.release()}, "
            f"Python {platform.python_version()}, numpy {np.__version__}; load average {load:.1f} at start")


def env_for(build, extra=None):
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith(("MSPROBE_", "FAKE_CANN_", "TINY_NPU_")) or k in ("LD_PRELOAD", "RANK", "RANK_ID"))}
    env["ASCEND_HOME_PATH"] = os.path.join(build, "fake_cann")
    env["PYTHONPATH"] = os.path.join(SOURCE, "examples")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update({k: str(v) for k, v in (extra or {}).items()})
    return env


def run(cmd, env, cwd=None, timeout=900):
    p = subprocess.run([str(c) for c in cmd], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, cmd))} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p


def fields(text):
    """'key value key value' -> {key: float}."""
    toks = text.split()
    return {toks[i]: float(toks[i + 1]) for i in range(0, len(toks) - 1, 2)}


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def mb(x):
    return f"{x / 1e6:,.0f} MB"


def rate(bytes_, seconds):
    return bytes_ / seconds / 1e9


class Bench:
    def __init__(self, args):
        self.args = args
        self.build = os.path.abspath(args.build)
        self.helper = os.path.join(self.build, "bench", "bench_writer_helper")
        self.shim = os.path.join(self.build, "lib", "libmsprobe_shim.so")
        for p in (self.helper, self.shim):
            if not os.path.exists(p):
                raise SystemExit(f"{p} is missing: build it first (ninja -C {self.build} bench_writer_helper "
                                 "msprobe_shim)")
        self.dir = args.dir or tempfile.mkdtemp(prefix="bench_writer_")
        self.quick = args.quick
        self.out = []
        self.commands = []

    def say(self, line=""):
        self.out.append(line)

    def helper_run(self, *args, label=None):
        self.commands.append("bench_writer_helper " + (label or " ".join(map(str, args))))
        return fields(run([self.helper, *args], env_for(self.build)).stdout)

    # ---- statistics -----------------------------------------------------------------------------------------
    def launch_cost(self):
        kernels = 300 if self.quick else 3000
        cmd = [PYTHON, WORKLOAD, "--time-launches", "--kernels", kernels, "--elements", 1024]
        self.commands.append(" ".join(map(str, cmd[1:])) + "   (with and without LD_PRELOAD, MSPROBE_TASK=statistics)")
        reps = 1 if self.quick else 5
        keys = ("launch_ns_per_kernel", "launch_cpu_ns_per_kernel", "phase1_cpu_ns_per_kernel",
                "queue_cpu_ns_per_kernel")
        got = {name: {k: [] for k in keys} for name in ("plain", "device", "host")}
        for r in range(reps):  # alternated, so that the machine's load hits all alike
            for name, extra in (("plain", None), ("device", {}), ("host", {"MSPROBE_DEVICE_STATS": "off"})):
                e = env_for(self.build) if extra is None else env_for(self.build, {
                    "LD_PRELOAD": self.shim, "MSPROBE_TASK": "statistics",
                    "MSPROBE_DUMP_PATH": os.path.join(self.dir, f"launch_dump{r}"), **extra})
                f = fields(run(cmd, e, cwd=self.dir).stdout)
                for k in keys:
                    got[name][k].append(f[k])
                shutil.rmtree(os.path.join(self.dir, f"launch_dump{r}"), ignore_errors=True)
        m = {name: {k: median(v) for k, v in d.items()} for name, d in got.items()}
        self.say("### Statistics task: cost on the launching thread (Add of 1,024 float32, 3 tensors per kernel)")
        self.say()
        self.say(f"tiny_npu launch loop, {kernels} kernels, median of {reps} alternated runs, per kernel. tiny_npu "
                 "launches as torch_npu does: phase 1 on the Python thread, phase 2 on its task queue's native thread. "
                 "**CPU** is the CPU time of those two launching threads (`time.thread_time_ns` and the queue "
                 "thread's `pthread_getcpuclockid` clock), which is the cost the shim puts on the launching side; "
                 "**wall** is the loop's elapsed time, which also pays for the stand-in's device thread computing "
                 "the kernels (and the shim's reductions) on the same 2 cores. Both include tiny_npu's own Python "
                 "and the stand-in's µs per aclnn call.")
        self.say()
        self.say("| run | CPU, launching threads (phase 1 + queue) | shim's share (CPU) | wall | shim's share (wall) |")
        self.say("|---|---|---|---|---|")
        labels = {"plain": "no shim",
                  "device": "shim, statistics, default (device statistics: 3 reductions per tensor + 1 copy)",
                  "host": "shim, statistics, MSPROBE_DEVICE_STATS=off (3 async copies to pinned buffers, event)"}
        p = m["plain"]
        for name, label in labels.items():
            c, w, ph, q = (m[name][k] for k in keys[1:2] + keys[0:1] + keys[2:])
            share = "" if name == "plain" else \
                f"**+{(c - p['launch_cpu_ns_per_kernel']) / 1000:.1f} µs** ({c / p['launch_cpu_ns_per_kernel']:.2f}×)"
            wshare = "" if name == "plain" else \
                f"+{(w - p['launch_ns_per_kernel']) / 1000:.1f} µs ({w / p['launch_ns_per_kernel']:.2f}×)"
            self.say(f"| {label} | {c:,.0f} ns ({ph:,.0f} + {q:,.0f}) | {share} | {w:,.0f} ns | {wshare} |")
        self.say()

    def stats_pass(self):
        n = (1 << 16) if self.quick else (1 << 22)
        reps, rounds = (3, 1) if self.quick else (10, 5)
        rng = np.random.default_rng(1)
        a32 = rng.standard_normal(n).astype(np.float32)
        rows = []
        for name, arr, dtype, via in (
                ("float32", a32, "float32", None),
                ("float16", a32.astype(np.float16), "float16", None),
                ("bfloat16", (a32.view(np.uint32) >> 16).astype(np.uint16), "bfloat16", "float32")):
            path = os.path.join(self.dir, f"stats_{name}.raw")
            arr.tofile(path)
            # numpy on the same values (bfloat16 has no numpy dtype: numpy gets them widened to float32).
            ref = arr if via is None else (arr.astype(np.uint32) << 16).view(np.float32)

            def numpy_stats():
                return ref.max(), ref.min(), ref.mean(), np.linalg.norm(ref)
            numpy_stats()
            # Alternating rounds (collector, then numpy), so that a neighbour's burst on this shared machine hits
            # both sides alike; each side's figure is the median over every pass of every round.
            ours_rounds, times = [], []
            for _ in range(rounds):
                ours_rounds.append(self.helper_run("stats", dtype, path, reps)["ns_per_pass"])
                for _ in range(reps):
                    t0 = time.perf_counter_ns()
                    numpy_stats()
                    times.append(time.perf_counter_ns() - t0)
            rows.append((name, n, median(ours_rounds), median(times), via))
        self.say(f"### Statistics pass vs numpy ({n:,} elements; {rounds} alternating rounds of {reps} passes each, "
                 "medians)")
        self.say()
        self.say("collector: `compute_stats` (one fused pass: max, min, sum, sum of squares, NaN/Inf counts, fp16/bf16 "
                 "converted on the fly); numpy: `a.max(), a.min(), a.mean(), np.linalg.norm(a)` on the same values.")
        self.say()
        self.say("| dtype | collector | numpy | ratio |")
        self.say("|---|---|---|---|")
        for name, n_, ours, theirs, via in rows:
            note = f" (numpy on the {via} values)" if via else ""
            self.say(f"| {name}{note} | {n_ / ours:.2f} G elem/s ({ours / 1e6:.2f} ms) | "
                     f"{n_ / theirs:.2f} G elem/s ({theirs / 1e6:.2f} ms) | **{theirs / ours:.1f}×** |")
        self.say()

    # ---- tensor -----------------------------------------------------------------------------------------------
    def tensor_write(self):
        # Large tensors (4 MiB) measure sustained bandwidth; small ones (16 KiB, the size of train.py's) measure
        # what a file costs, which dominates a real dump's thousands of activations.
        self.tensor_write_case(1 << 20, 16 if self.quick else 256, tools=True)
        self.tensor_write_case(1 << 12, 512 if self.quick else 8192, tools=False)
        # The same small files in memory (tmpfs): the writers' own per-file cost, without ext4's journal, whose
        # file creation cost swings several-fold on this shared machine.
        shm = "/dev/shm"
        if not self.quick and os.path.isdir(shm) and os.access(shm, os.W_OK) and shutil.disk_usage(shm).free > 1 << 30:
            where = tempfile.mkdtemp(prefix="bench_writer_", dir=shm)
            try:
                self.tensor_write_case(1 << 12, 8192, tools=False, where=where)
            finally:
                shutil.rmtree(where, ignore_errors=True)

    def tensor_write_case(self, elements, kernels, tools, where=None):
        where = where or self.dir
        rng = np.random.default_rng(2)
        # An activation after ReLU: half zeros, half random floats (what lz4 meets in a real dump).
        arr = np.maximum(rng.standard_normal(elements), 0).astype(np.float32)
        src = os.path.join(where, "tensor.raw")
        arr.tofile(src)
        total = kernels * arr.nbytes
        # Small files are bound by file creation on this file system, whose cost swings 4x from run to run
        # (journal commits, discards of the previous round's files): more rounds, and the best beside the median.
        reps = 1 if self.quick else (3 if tools else 7)
        res = {"collector": [], "dd": [], "numpy.save": []}
        if tools:
            res.update({"collector lz4": [], "collector, statistics only": [], "lz4 tool": []})
        ratio_lz4 = None
        block = f"{arr.nbytes // 1024}K"

        def clean(d):
            # Every writer starts with the previous one's files removed and the removal written back: unlinking
            # thousands of files queues journal work that would otherwise land on whoever writes next.
            shutil.rmtree(d, ignore_errors=True)
            os.sync()

        for r in range(reps):
            d = os.path.join(where, "w_collector")
            clean(d)
            f = self.helper_run("write", d, kernels, src)
            res["collector"].append(f["seconds"])
            clean(d)
            if tools:
                d = os.path.join(where, "w_lz4")
                f = self.helper_run("write", d, kernels, src, "lz4")
                res["collector lz4"].append(f["seconds"])
                ratio_lz4 = f["tensor_bytes"] / f["file_bytes"]
                clean(d)
                d = os.path.join(where, "w_stats")
                res["collector, statistics only"].append(self.helper_run("write", d, kernels, src, "nofiles")["seconds"])
                clean(d)
                # The lz4 tool (same library, -1) on the same bytes, file by file, for scale.
                d = os.path.join(where, "w_lz4tool")
                os.makedirs(d, exist_ok=True)
                t0 = time.perf_counter()
                for i in range(kernels):
                    subprocess.run(["lz4", "-1", "-q", "-f", src, f"{d}/t{i}.lz4"], check=True)
                res["lz4 tool"].append(time.perf_counter() - t0)
                clean(d)
            # dd: the same number of bytes in one sequential file, tensor-sized blocks (page cache, no fsync): the
            # file system's sustained write rate, without per-file costs.
            d = os.path.join(where, "w_dd")
            os.makedirs(d, exist_ok=True)
            t0 = time.perf_counter()
            subprocess.run(["dd", "if=/dev/zero", f"of={d}/all.raw", f"bs={block}", f"count={kernels}", "status=none"],
                           check=True)
            res["dd"].append(time.perf_counter() - t0)
            clean(d)
            d = os.path.join(where, "w_np")
            os.makedirs(d, exist_ok=True)
            t0 = time.perf_counter()
            for i in range(kernels):
                np.save(os.path.join(d, f"t{i}.npy"), arr)
            res["numpy.save"].append(time.perf_counter() - t0)
            clean(d)
        self.commands.append(f"dd if=/dev/zero of=all.raw bs={block} count={kernels}; numpy.save(t{{i}}.npy, a)  "
                             f"(x{kernels})" + (f"; lz4 -1 tensor.raw t{{i}}.lz4  (x{kernels})" if tools else ""))
        t = {k: median(v) for k, v in res.items()}
        # findmnt names ext4 as such (stat -f reports its magic number as "ext2/ext3").
        fs_type = (subprocess.run(["findmnt", "-n", "-o", "FSTYPE", "-T", where], capture_output=True, text=True).stdout
                   or subprocess.run(["stat", "-f", "-c", "%T", where], capture_output=True, text=True).stdout).strip()
        fs_type = fs_type.splitlines()[-1] if fs_type else "unknown"  # stacked mounts: the top one is last
        size = f"{arr.nbytes / 2**20:g} MiB" if arr.nbytes >= 2**20 else f"{arr.nbytes // 1024} KiB"
        self.say(f"### Tensor files: {kernels:,} tensors of {size} float32 ({total / 2**20:,.0f} MiB), {fs_type} "
                 f"({where}), page cache (no fsync), median of {reps}")
        self.say()
        self.say("collector: the Collector (tensor task: statistics + one npy file per tensor, writer threads) from "
                 f"first submit to close(); dd: the same bytes as one file (`dd bs={block}`, process start included); "
                 "numpy.save: a Python loop writing the same arrays, one file each.")
        self.say()
        best = {k: min(v) for k, v in res.items()}
        self.say("| writer | seconds (median) | GB/s | files/s | collector vs it | seconds (best) | best vs best |")
        self.say("|---|---|---|---|---|---|---|")
        for k in res:
            mine = k in ("dd", "numpy.save")
            vs = f"**{t[k] / t['collector']:.2f}×**" if mine else ""
            vs_best = f"{best[k] / best['collector']:.2f}×" if mine else ""
            per_file = "" if k == "dd" or k == "collector, statistics only" else f"{kernels / t[k]:,.0f}"
            self.say(f"| {k} | {t[k]:.3f} | {rate(total, t[k]):.2f} | {per_file} | {vs} | {best[k]:.3f} | {vs_best} |")
        self.say()
        if ratio_lz4 is not None:
            self.say(f"lz4 on this tensor (ReLU of a normal: half zeros): ratio {ratio_lz4:.2f}.")
            self.say()

    def lz4_on_train(self):
        d = os.path.join(self.dir, "train_dump")
        shutil.rmtree(d, ignore_errors=True)
        steps = "2" if self.quick else "5"
        e = env_for(self.build, {"LD_PRELOAD": self.shim, "MSPROBE_TASK": "tensor", "MSPROBE_DUMP_PATH": d})
        run([PYTHON, TRAIN, "--steps", steps], e, cwd=self.dir)
        self.commands.append(f"train.py --steps {steps} (MSPROBE_TASK=tensor), then bench_writer_helper lz4 <its npy files>")
        files = sorted(glob.glob(os.path.join(d, "step*", "rank*", "dump_tensor_data", "*.npy")))
        f = self.helper_run("lz4", *files, label=f"lz4 <the {len(files)} npy files>")
        dz = os.path.join(self.dir, "train_dump_lz4")
        shutil.rmtree(dz, ignore_errors=True)
        e["MSPROBE_DUMP_PATH"], e["MSPROBE_COMPRESS"] = dz, "lz4"
        run([PYTHON, TRAIN, "--steps", steps], e, cwd=self.dir)
        zfiles = glob.glob(os.path.join(dz, "step*", "rank*", "dump_tensor_data", "*.lz4"))
        on_disk = sum(os.path.getsize(x) for x in zfiles)
        self.say(f"### lz4 on train.py's tensors ({len(files)} npy files, {f['in_bytes'] / 1e6:.2f} MB)")
        self.say()
        self.say("| measure | value |")
        self.say("|---|---|")
        self.say(f"| compression throughput (one thread, in memory) | {rate(f['in_bytes'], f['seconds']):.2f} GB/s |")
        self.say(f"| ratio (npy bytes / lz4 bytes) | {f['in_bytes'] / f['out_bytes']:.2f} |")
        self.say(f"| MSPROBE_COMPRESS=lz4 run: files, bytes on disk | {len(zfiles)}, {on_disk / 1e6:.2f} MB |")
        self.say()
        shutil.rmtree(d, ignore_errors=True)
        shutil.rmtree(dz, ignore_errors=True)

    # ---- memory -----------------------------------------------------------------------------------------------
    def memory(self):
        kernels = 24 if self.quick else 200
        budgets = [16] if self.quick else [16, 64, 256]
        cmd = [PYTHON, WORKLOAD, "--kernels", kernels, "--elements", 1 << 20, "--distinct", 8]
        self.commands.append(" ".join(map(str, cmd[1:])) + "   (MSPROBE_TASK=tensor, MSPROBE_BUFFER_MB=B)")
        base = fields(run(cmd, env_for(self.build), cwd=self.dir).stdout.replace("checksum", "checksum_"))
        self.say(f"### Memory: {kernels} Add kernels of 4 MiB float32 tensors (12 MiB staged per kernel), tensor task")
        self.say()
        self.say(f"Peak RSS (VmHWM) of the process minus that of the same workload without the shim "
                 f"({base['vmhwm_kb'] / 1024:.0f} MiB); the staging high water mark and waits from the shim's exit "
                 "report.")
        self.say()
        self.say("| MSPROBE_BUFFER_MB | extra peak RSS | budget + 100 MB | staging high water | budget waits |")
        self.say("|---|---|---|---|---|")
        for b in budgets:
            d = os.path.join(self.dir, f"mem_dump_{b}")
            e = env_for(self.build, {"LD_PRELOAD": self.shim, "MSPROBE_TASK": "tensor", "MSPROBE_BUFFER_MB": b,
                                     "MSPROBE_DUMP_PATH": d, "MSPROBE_LOG_LEVEL": "info"})
            p = run(cmd, e, cwd=self.dir)
            got = fields(p.stdout.replace("checksum", "checksum_"))
            m = re.search(r"staging high water (\d+) of (\d+) bytes.*?(\d+) budget waits", p.stderr)
            hw, waits = (int(m.group(1)), int(m.group(3))) if m else (-1, -1)
            extra = (got["vmhwm_kb"] - base["vmhwm_kb"]) * 1024
            limit = b * 2**20 + 100e6
            verdict = "ok" if extra <= limit else "**over**"
            self.say(f"| {b} | {extra / 2**20:,.0f} MiB | {limit / 2**20:,.0f} MiB ({verdict}) | "
                     f"{hw / 2**20:,.1f} MiB | {waits} |")
            shutil.rmtree(d, ignore_errors=True)
        self.say()

    def report(self):
        print("## Writer: statistics, tensor files, lz4, memory (issue 6, points 1-3)")
        print()
        print(f"- Machine: {machine()}")
        print(f"- Date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; "
              f"`/usr/bin/python3 bench/bench_writer.py{' --quick' if self.quick else ''}` "
              f"(build {self.build})")
        print("- Commands run (from the script):")
        for c, n in collections.Counter(self.commands).items():  # first-seen order; repeats counted, not listed
            print(f"  - `{c}`" + (f" (x{n})" if n > 1 else ""))
        print()
        for line in self.out:
            print(line)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test, not a measurement")
    ap.add_argument("--build", default=os.environ.get("MSPROBE_BUILD_DIR", os.path.join(SOURCE, "build")))
    ap.add_argument("--dir", help="scratch folder on the file system to measure (default: a new one in $TMPDIR)")
    ap.add_argument("--only", help="comma-separated parts: launch,stats,tensor,lz4,memory")
    args = ap.parse_args()
    b = Bench(args)
    parts = {"launch": b.launch_cost, "stats": b.stats_pass, "tensor": b.tensor_write, "lz4": b.lz4_on_train,
             "memory": b.memory}
    chosen = args.only.split(",") if args.only else list(parts)
    try:
        for name in chosen:
            parts[name]()
    finally:
        if not args.dir:
            shutil.rmtree(b.dir, ignore_errors=True)
    b.report()


if __name__ == "__main__":
    main()
