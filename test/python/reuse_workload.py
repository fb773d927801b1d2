#!/usr/bin/env python3
"""Kernels that make the shim's statistics executors (kept per tensor layout and place, issue 29) meet every way a
kernel can differ from the one before it: the same shapes on other tensors (new addresses), other shapes, other
dtypes, views (strided, offset, transposed), a tensor list, in-place ops, kernels with more and fewer tensors, and
back to earlier ones. Every tensor holds values of its own (tensor k: about k), so statistics that went to the
wrong kernel or tensor show. Every tensor is over 1 KiB even in fp16, so that the shim reduces it on the device
(smaller ones are copied whole: shim/device/device_stats.h).

    python3 reuse_workload.py [--rounds 3]

Prints one line per tensor made, `tensor {k} mean {m}`, which tests may use; the dump is what they check.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))

import tiny_npu  # noqa: E402
from tiny_npu import ops, runtime  # noqa: E402
from tiny_npu.tensor import Tensor  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    tiny_npu.init(device=0)
    rng = np.random.RandomState(29)
    made = [0]

    def t(shape, dtype=tiny_npu.float32):
        made[0] += 1
        k = made[0]
        v = (k + rng.uniform(-0.25, 0.25, shape)).astype(np.float32)
        return Tensor.from_numpy(v, dtype)

    for r in range(args.rounds):
        for dt in (tiny_npu.float32, tiny_npu.float16, tiny_npu.bfloat16):
            # The same kernel on fresh tensors each round: same places, new addresses.
            a, b = t((64, 16), dt), t((64, 16), dt)
            s = ops.add(a, b)
            ops.mul(s, a)
            # Other shapes at the same places, then the first again.
            ops.add(t((48, 12), dt), t((48, 12), dt))
            ops.add(t((3, 15, 14), dt), t((3, 15, 14), dt))
            ops.add(a, b)
            # Views: strided, offset, transposed.
            wide = t((64, 32), dt)
            ops.add(wide[:, ::2], b)
            off = t((66, 16), dt)[2:]
            ops.sub(off, a, alpha=0.5)
            sq = t((32, 32), dt)
            ops.matmul(sq, sq.T)
            # Fewer and more tensors than the kernels before.
            ops.relu(t((640,), dt))
            ops.cat([t((40, 16), dt), t((48, 16), dt), t((36, 16), dt), t((40, 16), dt)], 0)
            ops.foreach_norm([t((600,), dt), t((40, 16), dt), t((700,), dt)], 2.0)
            # In place: the input's statistics are taken before the kernel writes it.
            acc = t((64, 16), dt)
            ops.inplace_add(acc, t((64, 16), dt), alpha=2.0)
            ops.inplace_add(acc, b)
            # The same tensor twice in one kernel, and an output written over its own input's storage.
            ops.add(a, a)
            ops.add(b, a, out=b)
        # A mixed-dtype kernel: float16 inputs, a float32 output.
        ops.cast(t((64, 16), tiny_npu.float16), tiny_npu.float32)
    runtime.current().synchronize()
    print(f"tensors {made[0]}")


if __name__ == "__main__":
    main()
