#!/usr/bin/env python3
"""Statistics on the device vs on the host (issue 9): bytes moved across the host link and step time.

Runs examples/train.py in the statistics task three ways: without the shim, with the shim's host path
(MSPROBE_DEVICE_STATS=off: every tensor copied and reduced by the collector) and with statistics on the device
(the default). The CANN stand-in's FAKE_CANN_COPY_COUNTERS gives the bytes copied device->host and host->device,
split into the host program's and the shim's own. Step time is the time between the first and the last step line
train.py prints, over S-1 (start-up and the first step excluded); the best of R repeats. A second workload with 256x256 tensors shows
the large-tensor case, a third examples/llm_train.py (bf16 transformer: tensors of up to 4 Mi elements). Prints a markdown
section.

    /usr/bin/python3 bench/bench_device_stats.py [--quick] [--build build]
"""
import argparse
import json
import os
import platform
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
PYTHON = "/usr/bin/python3"

sys.path.insert(0, HERE)
from step_timing import run_timed  # noqa: E402

LARGE = """
import sys
import numpy as np
import tiny_npu
from tiny_npu import ops
from tiny_npu.tensor import Tensor
dt = tiny_npu.DTYPES[sys.argv[1]]
steps = int(sys.argv[2])
rng = np.random.RandomState(3)
tiny_npu.init(device=0)
x0 = Tensor.from_numpy(rng.uniform(-1, 1, (256, 256)).astype(np.float32), dt)
w = Tensor.from_numpy(rng.uniform(-0.1, 0.1, (256, 256)).astype(np.float32), dt)
for step in range(steps):
    x = x0
    for _ in range(4):
        x = ops.gelu(ops.matmul(x, w))
    print("step %d sum %.6f" % (step, float(np.asarray(x.numpy(), dtype=np.float64).sum())))
"""


def env_for(build, workdir, mode):
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("MSPROBE_", "FAKE_CANN_", "TINY_NPU_")) and k not in ("LD_PRELOAD", "RANK", "RANK_ID")}
    e["ASCEND_HOME_PATH"] = os.path.join(build, "fake_cann")
    e["PYTHONPATH"] = os.pathsep.join([os.path.join(SOURCE, "examples"), os.path.join(SOURCE, "test", "python")])
    e["PYTHONDONTWRITEBYTECODE"] = "1"
    e["FAKE_CANN_COPY_COUNTERS"] = os.path.join(workdir, "copies.json")
    if mode != "plain":
        e["LD_PRELOAD"] = os.path.join(build, "lib", "libmsprobe_shim.so")
        e["MSPROBE_DUMP_PATH"] = os.path.join(workdir, "dump")
        e["MSPROBE_TASK"] = "statistics"
        e["MSPROBE_DEVICE_STATS"] = "on" if mode == "device" else "off"
    return e


def one_run(build, cmd, mode):
    """(seconds per step from the time stamps of the step lines, copy counters, stdout)."""
    with tempfile.TemporaryDirectory(prefix="bench_devstats_") as d:
        env = env_for(build, d, mode)
        env["PYTHONUNBUFFERED"] = "1"  # each step line arrives when it is printed
        r = run_timed(cmd, env, d, f"{' '.join(cmd)} ({mode})")
        with open(os.path.join(d, "copies.json")) as f:
            copies = json.load(f)
    return r.step_s, copies, r.stdout


def measure(build, make_cmd, steps, repeats, modes):
    out = {}
    for mode in modes:
        best, copies, stdout = None, None, None
        for _ in range(repeats):
            t, copies, stdout = one_run(build, make_cmd(steps), mode)
            best = t if best is None else min(best, t)
        out[mode] = {"step_s": best, "copies": copies, "stdout": stdout}
    return out


def table(title, res, steps):
    plain, host, dev = res["plain"], res["host"], res["device"]
    lines = [f"#### {title}", "",
             "| path | D2H by the shim | H2D by the shim | D2H by the host program | step time | vs no shim |",
             "|---|---|---|---|---|---|"]
    for name, r in (("no shim", plain), ("host path (MSPROBE_DEVICE_STATS=off)", host), ("device path (default)", dev)):
        c = r["copies"]
        lines.append(f"| {name} | {c['preloaded']['d2h']:,} B | {c['preloaded']['h2d']:,} B | "
                     f"{c['d2h'] - c['preloaded']['d2h']:,} B | {r['step_s'] * 1e3:.1f} ms | "
                     f"{r['step_s'] / plain['step_s']:.2f}x |")
    hb, db = host["copies"]["preloaded"]["d2h"], dev["copies"]["preloaded"]["d2h"]
    lines += ["", f"Over {steps} steps: the device path moves {db:,} B to the host where the host path moves {hb:,} B "
              f"({hb / max(db, 1):.0f}x less; {100.0 * db / max(hb, 1):.2f}% of the captured tensors' bytes, which "
              f"the host path copies whole). Device-path step time / host-path step time: "
              f"{dev['step_s'] / host['step_s']:.2f}. Losses identical in all three runs: "
              f"{plain['stdout'] == host['stdout'] == dev['stdout']}.", ""]
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer steps and repeats")
    ap.add_argument("--build", default=os.environ.get("MSPROBE_BUILD_DIR", os.path.join(SOURCE, "build")))
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    steps, repeats = (5, 1) if args.quick else (12, 3)
    modes = ("plain", "host", "device")
    lines = ["### Statistics on the device (bench/bench_device_stats.py" + (" --quick" if args.quick else "") + ")", "",
             f"Machine: {platform.machine()}, {os.cpu_count()} cores (shared); CANN stand-in (CPU kernels). "
             f"Best of {repeats} run(s); step time = time from the first to the last step line / (S-1), S = {steps}. "
             "The stand-in's reductions run on the same CPU cores as the host (a real NPU reduces at device "
             "bandwidth), so step times here overstate the device path's cost; the bytes are exact.", ""]
    train = os.path.join(SOURCE, "examples", "train.py")
    for dtype in ("fp32", "bf16"):
        res = measure(build, lambda s: [PYTHON, train, "--steps", str(s), "--dtype", dtype], steps, repeats, modes)
        lines += table(f"examples/train.py --dtype {dtype} (default width 64: tensors of 1 to 8,192 elements)", res, steps)
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(LARGE)
        large = f.name
    try:
        res = measure(build, lambda s: [PYTHON, large, "fp32", str(s)], steps, repeats, modes)
        lines += table("4 x (Matmul + Gelu) on 256x256 fp32 tensors", res, steps)
    finally:
        os.unlink(large)
    llm = os.path.join(SOURCE, "examples", "llm_train.py")
    res = measure(build, lambda s: [PYTHON, llm, "--steps", str(s)], steps, repeats, modes)
    lines += table("examples/llm_train.py (bf16; tensors of 1 to 4,194,304 elements, FlashAttention's [2048, 2048] "
                   "bool mask the largest)", res, steps)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
