#!/usr/bin/env python3
"""A producer faster than any writer: launches --kernels Add kernels on --elements-element float32 tensors
back to back, without synchronizing, then synchronizes once. Used by bench_writer.py (tensor throughput,
memory against MSPROBE_BUFFER_MB) and by test_shim_writer.py (backpressure: nothing lost).

Prints `checksum {sum of every output}` and `vmhwm_kb {peak RSS}` (so a run under the shim can be compared
with one without it).

    python3 bench/bench_writer_workload.py [--kernels 40] [--elements 262144] [--distinct 4]
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))

import tiny_npu  # noqa: E402
from tiny_npu import ops  # noqa: E402
from tiny_npu.tensor import Tensor  # noqa: E402
from stream_cpu import stream_busy_ns, thread_cpu_ns  # noqa: E402


def vmhwm_kb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return -1


def call_counters(rt):
    """The stand-in's call counters ({kind: calls so far}, fakecann/call_counters.h); {} from a runtime without them."""
    import ctypes
    try:
        lib = ctypes.CDLL(os.path.join(rt.libs.lib64, "libruntime.so"))
        get, name = lib.fakeCannGetCallCounters, lib.fakeCannCallCounterName
    except (OSError, AttributeError):
        return {}
    get.argtypes, get.restype = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t], ctypes.c_size_t
    name.argtypes, name.restype = [ctypes.c_size_t], ctypes.c_char_p
    n = get(None, 0)
    counts = (ctypes.c_uint64 * n)()
    get(counts, n)
    return {name(i).decode(): counts[i] for i in range(n)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernels", type=int, default=40)
    ap.add_argument("--elements", type=int, default=256 * 1024)
    ap.add_argument("--distinct", type=int, default=4, help="outputs kept alive at once (device memory)")
    ap.add_argument("--time-launches", action="store_true",
                    help="keep every output (no synchronization in the loop) and print the launch loop's time per kernel")
    ap.add_argument("--no-checksum", action="store_true",
                    help="with --time-launches: synchronize and stop after the loop (no read-back of the outputs)")
    args = ap.parse_args()
    rt = tiny_npu.init(device=0)
    rng = np.random.RandomState(3)
    # Values with some structure (a ramp plus noise), so that compression has something to find, as in real
    # activations, without being trivially constant.
    base = (np.arange(args.elements, dtype=np.float32) % 1024) / 64.0
    x = Tensor.from_numpy((base + rng.normal(0, 0.01, args.elements)).astype(np.float32))
    y = Tensor.from_numpy(rng.uniform(-1, 1, args.elements).astype(np.float32))
    outs = []
    checksum = 0.0
    if args.time_launches:
        for i in range(20):  # warm-up: executors, pools, stack table
            outs.append(ops.add(x, y, alpha=float(i % 7)))
        rt.synchronize()
        calls0, threads0 = call_counters(rt), thread_cpu_ns()
        queue0, t0, cpu0 = rt.queue_thread_cpu_ns(), time.perf_counter_ns(), time.thread_time_ns()
        for i in range(args.kernels):
            outs.append(ops.add(x, y, alpha=float(i % 7)))
        dt, cpu = time.perf_counter_ns() - t0, time.thread_time_ns() - cpu0
        rt.synchronize()
        queue = rt.queue_thread_cpu_ns() - queue0
        compute, side = stream_busy_ns(threads0, thread_cpu_ns())  # synchronized: the streams' share is all in
        # Calls into the runtime per launch of the loop, by kind (the host's own and a tool's): a tool's share is the
        # difference from a run without it.
        for kind, n in call_counters(rt).items():
            print(f"calls_{kind}_per_kernel {(n - calls0[kind]) / args.kernels:.3f}")
        print(f"launch_ns_per_kernel {dt / args.kernels:.0f}")
        # CPU time of the two threads that launch (phase 1 on this one, phase 2 on the task queue's), per kernel:
        # unlike the loop's wall time, not inflated by the stand-in's device threads computing on the same cores.
        print(f"launch_cpu_ns_per_kernel {(cpu + queue) / args.kernels:.0f}")
        print(f"phase1_cpu_ns_per_kernel {cpu / args.kernels:.0f}")
        print(f"queue_cpu_ns_per_kernel {queue / args.kernels:.0f}")
        # The streams' workers' CPU per kernel: the device's busy time in the stand-in (the critical path on a device).
        print(f"compute_stream_cpu_ns_per_kernel {compute / args.kernels:.0f}")
        print(f"side_streams_cpu_ns_per_kernel {side / args.kernels:.0f}")
        args.kernels = 0
        if args.no_checksum:
            return
    for i in range(args.kernels):
        outs.append(ops.add(x, y, alpha=float(i % 7)))
        if len(outs) > args.distinct:
            checksum += float(np.sum(outs.pop(0).numpy(), dtype=np.float64))  # a sync, only every few kernels
    rt.synchronize()
    for o in outs:
        checksum += float(np.sum(o.numpy(), dtype=np.float64))
    print(f"checksum {checksum:.6f}")
    print(f"vmhwm_kb {vmhwm_kb()}")


if __name__ == "__main__":
    main()
