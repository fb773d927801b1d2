#!/usr/bin/env python3
"""A Python host for test_shim_crash.py: launches tiny_npu ops, synchronizes, prints `launched`, then ends the
way MODE says. Run with and without libmsprobe_shim.so, its exit status, stdout and the relevant stderr lines
must be the same.

    py_host.py MODE N
MODE: os_exit, keyboard_interrupt (uncaught: Python exits by re-raising SIGINT), keyboard_interrupt_caught
(launches N more, exits 0), faulthandler_segv, sigterm_handler (a Python handler raising SystemExit(3)),
sigterm (no handler).
"""
import ctypes
import faulthandler
import os
import signal
import sys
import time

import numpy as np

import tiny_npu
from tiny_npu import ops


def launch(n, seed):
    rng = np.random.RandomState(seed)
    for _ in range(n):
        x = tiny_npu.Tensor.from_numpy(rng.uniform(-2, 2, (4, 8)).astype(np.float32))
        y = tiny_npu.Tensor.from_numpy(rng.uniform(-2, 2, (4, 8)).astype(np.float32))
        ops.mul(ops.add(x, y), y)


def main():
    mode, n = sys.argv[1], int(sys.argv[2])
    rt = tiny_npu.init(device=0)
    if mode == "faulthandler_segv":
        faulthandler.enable()
    if mode == "sigterm_handler":
        def on_term(signum, frame):
            raise SystemExit(3)
        signal.signal(signal.SIGTERM, on_term)
    launch(n, 1)
    rt.synchronize()
    print("launched", flush=True)
    if mode == "os_exit":
        os._exit(9)
    if mode in ("keyboard_interrupt", "keyboard_interrupt_caught"):
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(30)
        except KeyboardInterrupt:
            print("KeyboardInterrupt caught", flush=True)
            if mode == "keyboard_interrupt":
                raise
        launch(n, 2)
        rt.synchronize()
        print("launched after", flush=True)
        tiny_npu.shutdown()
        return 0
    if mode == "faulthandler_segv":
        ctypes.string_at(0)
    if mode in ("sigterm", "sigterm_handler"):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)
    return 1


if __name__ == "__main__":
    sys.exit(main())
