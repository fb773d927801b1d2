#!/usr/bin/env python3
"""What capture costs, side by side in one run: no shim, build A of libmsprobe_shim.so (optional: the build before a
change) and build B, each configuration in its own process, alternated round by round (the machines are shared and
noisy: only ratios taken in one run mean anything). Both libraries run against the stand-in of --build.

Per task (--tasks; the statistics task by default):
  - bench_writer_workload.py's launch loop (Add of 1,024 float32, tiny_npu with its task queue, TASK_QUEUE_ENABLE=1
    unless --env says otherwise): CPU time of the Python thread (aclnn phase 1 runs there) and of the queue thread
    (phase 2), per captured kernel, the loop's wall time, and the stream workers' busy CPU per kernel (below);
  - the host calls per captured kernel, by kind, counted by the stand-in (fakecann/call_counters.h) over the same
    loop: what the shim adds is the difference from the run without it (deterministic: one run is enough);
  - the step time of each --workload: examples/train.py (`train`, the default: tensors of 1 to 8,192 elements) and
    examples/llm_train.py (`llm`: a bf16 decoder-only transformer, tensors of up to 4 Mi elements, FlashAttention's
    compressed causal mask among them).
  - over the steps, the busy time per step of the stand-in's stream workers (their threads' CPU from
    /proc/PID/task/*/schedstat, told apart by their names, fake_stream<N>): the compute stream's (the busiest worker:
    where the host's kernels, and the shim's copies and reductions in stream order, run) and the other streams'
    together (any side stream the host or the shim makes). It is the critical path a real device would serialize, and
    it does not depend on how many cores the machine has.

    bench/compare_shims.py [--a OLD/lib/libmsprobe_shim.so] --b NEW/lib/libmsprobe_shim.so [--rounds 7]
        [--tasks statistics,tensor,flight] [--workload train,llm] [--llm-args "--moe"] [--env KEY=VALUE ...]

Prints markdown tables: medians over the rounds, and the median of the per-round ratios B/A.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from statistics import median

from stream_cpu import STREAM_THREAD, any_stream, stream_busy_ns, thread_cpu_ns

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
WORKLOAD = os.path.join(HERE, "bench_writer_workload.py")
TRAIN = os.path.join(SOURCE, "examples", "train.py")
LLM = os.path.join(SOURCE, "examples", "llm_train.py")

# The launch loop's figures: (label, key printed by bench_writer_workload.py).
LOOP = [
    ("Python thread's CPU, ns per kernel (aclnn phase 1)", "phase1_cpu_ns_per_kernel"),
    ("queue thread's CPU, ns per kernel (phase 2)", "queue_cpu_ns_per_kernel"),
    ("launching threads' CPU, ns per kernel (both)", "launch_cpu_ns_per_kernel"),
    ("launch loop's wall time, ns per kernel", "launch_ns_per_kernel"),
    ("compute stream's busy CPU, ns per kernel", "compute_stream_cpu_ns_per_kernel"),
    ("other streams' busy CPU, ns per kernel", "side_streams_cpu_ns_per_kernel"),
]
# The step-time workloads: (script, row label, warm-up steps left out).
WORKLOADS = {"train": (TRAIN, "train.py", 5), "llm": (LLM, "llm_train.py", 3)}
# What step_ms measures besides the step: row labels, each after the workload's script name.
STEP_ROWS = ("step, ms", "compute stream's busy CPU per step, ms", "other streams' busy CPU per step, ms")
CALL_KINDS = ["phase1", "phase2", "argument_created", "argument_destroyed", "executor_address", "executor_repeatable",
              "executor_destroyed", "copy", "event_record", "event_wait", "kernel_launch"]


def clean_env(build, extra):
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith(("MSPROBE_", "FAKE_CANN_", "TINY_NPU_")) or k in ("LD_PRELOAD", "RANK", "RANK_ID",
                                                                                   "TASK_QUEUE_ENABLE"))}
    env.update(ASCEND_HOME_PATH=os.path.join(build, "fake_cann"), PYTHONPATH=os.path.join(SOURCE, "examples"),
               PYTHONDONTWRITEBYTECODE="1")
    env.update(extra)
    return env


def launch_loop(env, kernels):
    """bench_writer_workload.py --time-launches: {key: value} (CPU and wall ns per kernel, calls per kernel)."""
    out = subprocess.run([sys.executable, WORKLOAD, "--time-launches", "--kernels", str(kernels), "--elements", "1024"],
                         env=env, capture_output=True, text=True, check=True).stdout
    return {k: float(v) for k, v in (line.split()[:2] for line in out.splitlines() if line.count(" ") == 1)}


def step_ms(env, script, steps, skip, extra=()):
    """Mean time between step lines after the first `skip` steps, and the stream workers' busy ms per step over the
    same steps (stream_busy_ns: sampled as each bounding line arrives; the host syncs before printing its loss)."""
    p = subprocess.Popen([sys.executable, script, "--steps", str(steps), *extra], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    arrivals, samples = [], {}
    for line in p.stdout:
        if line.startswith("step ") and "loss" in line:
            arrivals.append(time.monotonic())
            # The last lines may come when the host is already ending (its streams gone): the last three are read.
            if len(arrivals) == skip + 1 or len(arrivals) >= steps - 2:
                samples[len(arrivals) - 1] = thread_cpu_ns(p.pid)
    err = p.stderr.read()
    if p.wait() != 0 or len(arrivals) != steps:
        raise RuntimeError(f"{os.path.basename(script)} failed after {len(arrivals)} steps: {err[-2000:]}")
    last = max(i for i, threads in samples.items() if i == skip or any_stream(threads))
    if last == skip:
        raise RuntimeError(f"{os.path.basename(script)}: no {STREAM_THREAD}<N> thread seen in its last steps "
                           "(is the stand-in older than its named stream workers?)")
    compute, side = stream_busy_ns(samples[skip], samples[last])
    return ((arrivals[-1] - arrivals[skip]) / (steps - 1 - skip) * 1e3, compute / (last - skip) / 1e6,
            side / (last - skip) / 1e6)


def fmt(label, v):
    return f"{v:,.0f}" if "ns" in label else f"{v:.2f}"


def over(label, v, n):
    """What a configuration adds to no shim's figure, and their ratio where it has one."""
    return f"{fmt(label, v - n)} ({v / n:.2f}x)" if n else fmt(label, v - n)


def ratio(xs, ys):
    """The median of the per-round ratios y / x (rounds with x = 0 left out), or "-"."""
    r = [y / x for x, y in zip(xs, ys) if x]
    return f"{median(r):.2f}" if r else "-"


def print_task(task, rows, libs):
    """One task's table: medians of the rounds, what each shim adds, B/A of the rounds."""
    have_a = "A" in libs
    head = "| measure | no shim |" + (" A |" if have_a else "") + " B |" + (" A over no shim |" if have_a else "") \
        + " B over no shim |" + (" B / A (median of rounds) |" if have_a else "")
    print(f"\n### MSPROBE_TASK={task}\n")
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for label, got in rows.items():
        n, b = median(got["none"]), median(got["B"])
        cells = [fmt(label, n)]
        if have_a:
            a = median(got["A"])
            cells += [fmt(label, a), fmt(label, b), over(label, a, n), over(label, b, n), ratio(got["A"], got["B"])]
        else:
            cells += [fmt(label, b), over(label, b, n)]
        print(f"| {label} | " + " | ".join(cells) + " |")


def print_calls(task, calls, libs):
    """Host calls per captured kernel by kind: what each shim adds to the host's own (one run each: the counts do not
    depend on load)."""
    have_a = "A" in libs
    print(f"\nHost calls per captured kernel, MSPROBE_TASK={task} (the stand-in's counters over the launch loop; "
          "the shim's = with it - without it)\n")
    head = "| kind | no shim (the host's own) |" + (" A adds |" if have_a else "") + " B adds |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    total = {w: 0.0 for w in libs}
    for kind in CALL_KINDS:
        key = f"calls_{kind}_per_kernel"
        if key not in calls["none"]:
            continue
        n = calls["none"][key]
        cells = [f"{n:.2f}"]
        for w in libs:
            d = calls[w][key] - n
            total[w] += d if kind not in ("kernel_launch", "event_wait") else 0.0
            cells.append(f"{d:+.2f}")
        print(f"| {kind} | " + " | ".join(cells) + " |")
    print("| all of the above but kernel_launch and event_wait (the writer's waits) | |" +
          "".join(f" {total[w]:+.2f} |" for w in libs))


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--a", help="the baseline libmsprobe_shim.so (optional)")
    ap.add_argument("--b", required=True, help="the changed libmsprobe_shim.so")
    ap.add_argument("--build", default=os.environ.get("MSPROBE_BUILD_DIR", os.path.join(SOURCE, "build")),
                    help="the build whose stand-in both run against (default: build/)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--kernels", type=int, default=3000, help="kernels of the launch loop")
    ap.add_argument("--steps", type=int, default=60, help="train.py steps (the first 5 are warm-up)")
    ap.add_argument("--workload", default="train",
                    help="comma-separated step-time workloads: train (train.py), llm (llm_train.py); default train")
    ap.add_argument("--llm-steps", type=int, default=16, help="llm_train.py steps (the first 3 are warm-up)")
    ap.add_argument("--llm-args", default="", help="more llm_train.py arguments, e.g. \"--moe\" (one rank only)")
    ap.add_argument("--tasks", default=None, help="comma-separated MSPROBE_TASK values (default: statistics)")
    ap.add_argument("--task", default=None, help="one task (the same as --tasks with one)")
    ap.add_argument("--no-loop", action="store_true", help="the workloads' steps only")
    ap.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="more environment for every run")
    a = ap.parse_args()
    a.workloads = a.workload.split(",")
    if any(w not in WORKLOADS for w in a.workloads):
        ap.error(f"--workload takes {', '.join(WORKLOADS)}, not {a.workload}")
    if a.rounds < 1 or a.steps < 8 or a.kernels < 1 or a.llm_steps < 6:
        ap.error("--rounds and --kernels must be at least 1, --steps at least 8, --llm-steps at least 6")
    a.llm_args = a.llm_args.split()
    if "--ranks" in a.llm_args:  # its launcher prints the ranks' lines at the end: no step times to read
        ap.error("--llm-args: the step time is measured on one rank; --ranks is not taken")
    return a


def main():
    a = parse_args()
    libs = {"B": a.b} if a.a is None else {"A": a.a, "B": a.b}
    for lib in libs.values():
        if not os.path.isfile(lib):
            sys.exit(f"compare_shims.py: {lib}: no such file")
    tasks = (a.tasks or a.task or "statistics").split(",")
    extra = dict(kv.split("=", 1) for kv in a.env)
    runs = {w: (WORKLOADS[w], a.steps if w == "train" else a.llm_steps, a.llm_args if w == "llm" else [])
            for w in a.workloads}

    with tempfile.TemporaryDirectory(prefix="msprobe-compare-") as tmp:
        def env_for(which, task):
            if which == "none":
                return clean_env(a.build, extra)
            dump = os.path.join(tmp, which)
            shutil.rmtree(dump, ignore_errors=True)
            return clean_env(a.build, {**extra, "LD_PRELOAD": libs[which], "MSPROBE_TASK": task,
                                       "MSPROBE_DUMP_PATH": dump})

        configs = ["none"] + list(libs)
        step_rows = [(f"{name} {row}", None) for (_, name, _), _, _ in runs.values() for row in STEP_ROWS]
        rows = {t: {label: {} for label, _ in ([] if a.no_loop else LOOP) + step_rows} for t in tasks}
        calls = {t: {} for t in tasks}
        for r in range(a.rounds):
            order = configs[r % len(configs):] + configs[:r % len(configs)]  # no fixed position
            for which in order:
                for task in tasks:
                    # Without a shim the task changes nothing: measured once per round, shared by every task.
                    if which == "none" and task != tasks[0]:
                        for label in rows[task]:
                            rows[task][label].setdefault("none", []).append(rows[tasks[0]][label]["none"][-1])
                        if not a.no_loop:
                            calls[task].setdefault("none", calls[tasks[0]]["none"])
                        continue
                    if not a.no_loop:
                        got = launch_loop(env_for(which, task), a.kernels)
                        for label, key in LOOP:
                            rows[task][label].setdefault(which, []).append(got[key])
                        calls[task].setdefault(which, got)
                    for (script, name, skip), steps, args in runs.values():
                        got = step_ms(env_for(which, task), script, steps, skip, args)
                        for row, v in zip(STEP_ROWS, got):
                            rows[task][f"{name} {row}"].setdefault(which, []).append(v)
            print(f"  round {r + 1}/{a.rounds}", file=sys.stderr)

    desc = ", ".join(f"{w} = `{p}`" for w, p in libs.items())
    steps = ", ".join(f"{n} {os.path.basename(script)} steps{''.join(' ' + x for x in args)}"
                      for (script, _, _), n, args in runs.values())
    print(f"{desc}; {a.rounds} rounds, no shim / " + " / ".join(libs) + " alternated; "
          f"{a.kernels} kernels per launch loop, {steps}{''.join(' ' + kv for kv in a.env)}")
    for task in tasks:
        print_task(task, rows[task], libs)
        if not a.no_loop and calls[task].get("none") and any(k.startswith("calls_") for k in calls[task]["none"]):
            print_calls(task, calls[task], list(libs))


if __name__ == "__main__":
    main()
