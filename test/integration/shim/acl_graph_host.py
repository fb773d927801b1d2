"""A host that runs two aclnn kernels per step, eagerly or as an ACL graph replayed once per step (as vLLM-Ascend
runs its decode steps): out = x + alpha * y (aclnnAdd, alpha 1, in a task group), res = out * w (aclnnMul). x changes
every step; from step --update-at on, a task update (aclmdlRICaptureTaskUpdateBegin/End on another stream, ordered by
an event) gives the Add alpha 2.5 (as vLLM-Ascend updates the attention's sequence lengths); the eager run launches
that Add from then on.

    acl_graph_host.py --mode graph|eager --steps N --update-at U [--n ELEMENTS] [--inf-at S] OUT.json

Step 0 is the warm-up (the kernels once, eagerly, in both modes; graph: then the capture, which runs nothing); steps
1..N run (graph: one replay each). --alpha-per-step --skip-update-at K plants graph mode's known bug (a skipped update
of the attention's parameters) for first-diff. OUT.json holds
the inputs and results of every step, for the test's numpy."""
import argparse
import ctypes
import json
import threading
import time

import numpy as np

from tiny_npu import acl

N = 6
ALPHA2 = 2.5
P = ctypes.c_void_p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=("graph", "eager"), required=True)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--update-at", type=int, default=3)
    ap.add_argument("--n", type=int, default=6, help="elements of each tensor")
    ap.add_argument("--inf-at", type=int, default=-1, help="a step whose x holds +Inf (overflow_check)")
    ap.add_argument("--drop-a-capture", action="store_true",
                    help="eager mode: first a GLOBAL capture of the Add that another thread ends (CANN drops it)")
    ap.add_argument("--alpha-per-step", action="store_true",
                    help="the Add's alpha is 1 + step / 2, given each step (graph: a task update before each replay)")
    ap.add_argument("--skip-update-at", type=int, default=-1,
                    help="graph mode, with --alpha-per-step: the update of this step is skipped (the planted bug: "
                         "the replay keeps the previous step's alpha)")
    ap.add_argument("--tasks-json", help="graph mode: aclmdlRIDebugJsonPrint of the graph to this file (the bench)")
    ap.add_argument("out")
    args = ap.parse_args()
    global N
    N = args.n
    libs = acl.Libraries()
    a = libs.ascendcl
    for fn, types in [(a.aclmdlRICaptureBegin, [P, ctypes.c_int]), (a.aclmdlRICaptureEnd, [P, P]),
                      (a.aclmdlRIExecuteAsync, [P, P]), (a.aclmdlRIDestroy, [P]),
                      (a.aclmdlRICaptureTaskGrpBegin, [P]), (a.aclmdlRICaptureTaskGrpEnd, [P, P]),
                      (a.aclmdlRICaptureTaskUpdateBegin, [P, P]), (a.aclmdlRICaptureTaskUpdateEnd, [P]),
                      (a.aclmdlRIDebugJsonPrint, [P, ctypes.c_char_p, ctypes.c_uint32])]:
        fn.argtypes, fn.restype = types, ctypes.c_int
    acl.check(a.aclInit(None), "aclInit")
    acl.check(a.aclrtSetDevice(0), "aclrtSetDevice")
    stream, side = P(), P()
    acl.check(a.aclrtCreateStream(ctypes.byref(stream)), "aclrtCreateStream")
    acl.check(a.aclrtCreateStream(ctypes.byref(side)), "aclrtCreateStream")
    here = ctypes.CDLL(None)
    step = getattr(here, "msprobe_shim_step", None)
    if step is not None:
        step.restype = None

    rng = np.random.RandomState(7)
    host = {"y": rng.randn(N), "w": rng.randn(N)}
    dev = {}

    def buffer(name, values):
        d = P()
        acl.check(a.aclrtMalloc(ctypes.byref(d), N * 4, 0), "aclrtMalloc")
        upload(d, values)
        dev[name] = d
        return d

    def upload(d, values):
        h = np.ascontiguousarray(values, dtype=np.float32)
        acl.check(a.aclrtMemcpy(d, N * 4, h.ctypes.data, N * 4, acl.MEMCPY_H2D), "aclrtMemcpy")

    def download(d):
        h = np.zeros(N, dtype=np.float32)
        acl.check(a.aclrtMemcpy(h.ctypes.data, N * 4, d, N * 4, acl.MEMCPY_D2H), "aclrtMemcpy")
        return h

    for name in ("x", "y", "w", "out", "res"):
        buffer(name, host.get(name, np.zeros(N)))
    shape = (ctypes.c_int64 * 1)(N)
    stride = (ctypes.c_int64 * 1)(1)

    def tensor(name):
        return libs.nnopbase.aclCreateTensor(shape, 1, acl.FLOAT, stride, 0, acl.FORMAT_ND, shape, 1, dev[name])

    one, two_and_half = ctypes.c_float(1.0), ctypes.c_float(ALPHA2)
    alpha = libs.nnopbase.aclCreateScalar(ctypes.byref(one), acl.FLOAT)
    alpha2 = libs.nnopbase.aclCreateScalar(ctypes.byref(two_and_half), acl.FLOAT)
    add, mul = acl.AclnnOp(libs, "Add", "TTTT"), acl.AclnnOp(libs, "Mul", "TTT")

    def executor(op, *args):
        ws, ex = op.prepare(*args)
        assert ws == 0, "the host gives Add and Mul no workspace"
        acl.check(libs.nnopbase.aclSetAclOpExecutorRepeatable(ex), "aclSetAclOpExecutorRepeatable")
        return ex

    add_ex = executor(add, tensor("x"), tensor("y"), alpha, tensor("out"))
    add2_ex = executor(add, tensor("x"), tensor("y"), alpha2, tensor("out"))
    mul_ex = executor(mul, tensor("out"), tensor("w"), tensor("res"))

    def step_add(s):
        value = ctypes.c_float(1.0 + s / 2)
        scalar = libs.nnopbase.aclCreateScalar(ctypes.byref(value), acl.FLOAT)
        return executor(add, tensor("x"), tensor("y"), scalar, tensor("out"))

    def run_add(ex, s):
        acl.check(add.phase2(None, 0, ex, s), "aclnnAdd")

    def run_mul(s):
        acl.check(mul.phase2(None, 0, mul_ex, s), "aclnnMul")

    ri, grp = P(), P()
    if args.drop_a_capture:
        acl.check(a.aclmdlRICaptureBegin(stream, 0), "aclmdlRICaptureBegin")
        run_add(add_ex, stream)
        ended = []

        def end_elsewhere():
            acl.check(a.aclrtSetDevice(0), "aclrtSetDevice")
            ended.append(a.aclmdlRICaptureEnd(stream, ctypes.byref(ri)))

        t = threading.Thread(target=end_elsewhere)
        t.start()
        t.join()
        assert ended == [107038], ended  # ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD: the capture is dropped
    began = time.perf_counter()
    run_add(add_ex, stream)  # step 0: the warm-up, eager in both modes (as vLLM runs one before capturing)
    run_mul(stream)
    if args.mode == "graph":  # then the capture (RELAXED: vLLM's mode), which runs nothing
        acl.check(a.aclmdlRICaptureBegin(stream, 2), "aclmdlRICaptureBegin")
        acl.check(a.aclmdlRICaptureTaskGrpBegin(stream), "aclmdlRICaptureTaskGrpBegin")
        run_add(add_ex, stream)
        acl.check(a.aclmdlRICaptureTaskGrpEnd(stream, ctypes.byref(grp)), "aclmdlRICaptureTaskGrpEnd")
        run_mul(stream)
        acl.check(a.aclmdlRICaptureEnd(stream, ctypes.byref(ri)), "aclmdlRICaptureEnd")
        if args.tasks_json:
            acl.check(a.aclmdlRIDebugJsonPrint(ri, args.tasks_json.encode(), 0), "aclmdlRIDebugJsonPrint")
    acl.check(a.aclrtSynchronizeStream(stream), "aclrtSynchronizeStream")
    warmup_s, run_s = time.perf_counter() - began, 0.0
    if step:
        step()
    event = P()
    acl.check(a.aclrtCreateEvent(ctypes.byref(event)), "aclrtCreateEvent")
    record = {"y": host["y"].astype(np.float32).tolist(), "w": host["w"].astype(np.float32).tolist(),
              "alpha2": ALPHA2, "steps": []}
    for s in range(1, args.steps + 1):
        x = rng.randn(N).astype(np.float32)
        if s == args.inf_at:
            x[1] = np.inf
        upload(dev["x"], x)
        updated = s >= args.update_at
        new_add = add2_ex if updated else None
        if args.alpha_per_step:  # an executor of this step's alpha, as a decode step builds its attention's
            updated, new_add = True, step_add(s)
        began = time.perf_counter()
        if args.mode == "graph":
            if (s == args.update_at or args.alpha_per_step) and s != args.skip_update_at:
                # the update, ordered before the replay by an event
                acl.check(a.aclmdlRICaptureTaskUpdateBegin(side, grp), "aclmdlRICaptureTaskUpdateBegin")
                run_add(new_add, side)
                acl.check(a.aclmdlRICaptureTaskUpdateEnd(side), "aclmdlRICaptureTaskUpdateEnd")
                acl.check(a.aclrtRecordEvent(event, side), "aclrtRecordEvent")
                acl.check(a.aclrtStreamWaitEvent(stream, event), "aclrtStreamWaitEvent")
            acl.check(a.aclmdlRIExecuteAsync(ri, stream), "aclmdlRIExecuteAsync")
        else:
            run_add(new_add if updated else add_ex, stream)
            run_mul(stream)
        acl.check(a.aclrtSynchronizeStream(stream), "aclrtSynchronizeStream")
        run_s += time.perf_counter() - began
        record["steps"].append({"x": x.tolist(), "out": download(dev["out"]).tolist(),
                                "res": download(dev["res"]).tolist(), "updated": updated})
        if step:
            step()
    if args.mode == "graph":
        acl.check(a.aclmdlRIDestroy(ri), "aclmdlRIDestroy")
    record["seconds"] = {"warmup": warmup_s, "steps": run_s}  # step 0 (the capture), steps 1..N (the replays)
    with open(args.out, "w") as f:
        json.dump(record, f)
    acl.check(a.aclrtSynchronizeStream(side), "aclrtSynchronizeStream")
    acl.check(a.aclFinalize(), "aclFinalize")


if __name__ == "__main__":
    main()
