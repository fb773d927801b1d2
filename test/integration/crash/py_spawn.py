#!/usr/bin/env python3
"""fork+exec under the shim, for test_shim_process.py: the parent launches N tiny_npu ops, runs a child copy of
this script (which inherits LD_PRELOAD and MSPROBE_DUMP_PATH, plus CHILD_ENV=K=V,... ) that launches N ops of its
own, then launches N more itself.

    py_spawn.py parent N      |   py_spawn.py child N
"""
import os
import subprocess
import sys

import numpy as np

import tiny_npu
from tiny_npu import ops


def launch(rt, n, seed):
    rng = np.random.RandomState(seed)
    for _ in range(n):
        x = tiny_npu.Tensor.from_numpy(rng.uniform(-2, 2, (3, 5)).astype(np.float32))
        ops.muls(x, 1.5)
    rt.synchronize()


def main():
    role, n = sys.argv[1], int(sys.argv[2])
    rt = tiny_npu.init(device=0)
    launch(rt, n, 1 if role == "parent" else 2)
    if role == "parent":
        env = dict(os.environ)
        for kv in filter(None, os.environ.get("CHILD_ENV", "").split(",")):
            k, v = kv.split("=", 1)
            env[k] = v
        child = subprocess.run([sys.executable, os.path.abspath(__file__), "child", str(n)], env=env,
                               capture_output=True, text=True)
        sys.stderr.write(child.stderr)
        print(f"child exited {child.returncode}", flush=True)
        launch(rt, n, 3)
    tiny_npu.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
