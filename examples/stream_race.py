#!/usr/bin/env python3
"""Two streams sharing device memory, the way torch_npu programs share it, with each ordering that correct code needs
and a seam that leaves one out (the race check's end-to-end host, docs/races.md). The compute stream makes `g`; a
second stream uses it; the compute stream then overwrites it.

    python3 stream_race.py [--op adds|allreduce|reuse] [--plant none|no-wait-before|no-wait-after|both]

--op adds: an op run under `with torch.npu.stream(side):` reads g. allreduce: g's in-place all-reduce on the HCCL
stream, as ProcessGroupHCCL runs it (one rank). reuse: a tensor the side stream reads is freed to the caching
allocator and its block handed to the compute stream's next output; the ordering is torch's record_stream (the
block goes back to the pool only once an event recorded on the side stream after the read has completed).
--plant leaves a wait out: no-wait-before, the second stream may use g before it is written; no-wait-after, the
compute stream may overwrite g (or reuse the block) before the second stream is done with it. Prints a checksum.
"""
import argparse
import contextlib
import ctypes
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tiny_npu  # noqa: E402
from tiny_npu import distributed, ops  # noqa: E402
from tiny_npu.tensor import Tensor  # noqa: E402

ACL_EVENT_STATUS_COMPLETE = 0  # aclrtEventStatus


@contextlib.contextmanager
def on_stream(rt, stream):
    """torch.npu.stream(stream): the ops launched inside go to `stream`."""
    previous, rt.stream = rt.stream, stream
    try:
        yield
    finally:
        rt.stream = previous


def ordered(rt, plant, which, event, after, waiter):
    """`waiter` waits for what `after` has so far, unless --plant leaves this wait (`which`) out."""
    if plant in (which, "both"):
        return
    rt.record_event(event, after)
    rt.wait_event(waiter, event)


def share(rt, a, side, events, x):
    """g made on the compute stream, used on `side`, overwritten on the compute stream; returns the side's result."""
    compute = rt.stream
    g = ops.muls(x, 2.0)
    ordered(rt, a.plant, "no-wait-before", events[0], compute, side)
    if a.op == "adds":
        with on_stream(rt, side):
            s = ops.adds(g, 1.0)
    else:
        group = distributed.ProcessGroup(0, 1)
        group.all_reduce(g, stream=side)
        s = g
    ordered(rt, a.plant, "no-wait-after", events[1], side, compute)
    ops.muls(x, 3.0, out=g)  # the compute stream overwrites g
    return s


def wait_complete(rt, event, timeout=30.0):
    """Polls `event` until it has completed, as torch's caching allocator does for a block's recorded streams."""
    status = ctypes.c_int(1)
    deadline = time.monotonic() + timeout
    while True:
        rt.check(rt.libs.ascendcl.aclrtQueryEvent(ctypes.c_void_p(event), ctypes.byref(status)), "aclrtQueryEvent")
        if status.value == ACL_EVENT_STATUS_COMPLETE:
            return
        if time.monotonic() > deadline:
            raise TimeoutError("the side stream's event did not complete")
        time.sleep(0.0005)


def reuse(rt, a, side, events, x):
    """A block freed after a side-stream read and handed to the compute stream's next output of the same size."""
    compute = rt.stream
    t = ops.muls(x, 2.0)
    ordered(rt, a.plant, "no-wait-before", events[0], compute, side)
    with on_stream(rt, side):
        s = ops.adds(t, 1.0)
    if a.plant not in ("no-wait-after", "both"):
        # record_stream(side): the block goes back to the pool once an event recorded on the side stream after the
        # read has completed, which the caching allocator learns by polling the event (aclrtQueryEvent).
        rt.record_event(events[1], side)
        wait_complete(rt, events[1])
    block = t.storage.ptr
    del t  # back to the caching allocator, which orders reuse on the compute stream only
    u = ops.muls(x, 3.0)  # the compute stream's next output of that size: the same block
    assert u.storage.ptr == block, "the caching allocator did not hand the block out again"
    return s


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--op", choices=["adds", "allreduce", "reuse"], default="adds")
    p.add_argument("--plant", choices=["none", "no-wait-before", "no-wait-after", "both"], default="none")
    p.add_argument("--elements", type=int, default=1024)
    p.add_argument("--hold", type=float, default=0.0,
                   help="after the work, print 'holding' and sleep this many seconds before exiting (a test kills "
                        "the process meanwhile)")
    a = p.parse_args()
    if a.elements < 1:
        p.error("--elements must be at least 1")
    rt = tiny_npu.init()
    side = rt.create_stream()
    events = [rt.create_event(), rt.create_event()]
    x = Tensor.from_numpy(np.arange(a.elements, dtype=np.float32))
    s = (reuse if a.op == "reuse" else share)(rt, a, side, events, x)
    rt.drain()
    rt.check(rt.libs.ascendcl.aclrtSynchronizeStream(ctypes.c_void_p(side)), "aclrtSynchronizeStream(side)")
    print(f"sum {float(s.numpy().sum()):.1f}", flush=True)
    if a.hold > 0:
        print("holding", flush=True)
        time.sleep(a.hold)
    tiny_npu.shutdown()


if __name__ == "__main__":
    main()
