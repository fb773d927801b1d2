"""Training shaped like MindSpore's kernel-by-kernel graph mode (jit_level O0 on ms_backend, MindSpore 2.5-2.7): the
Python thread builds the graph once and then, each step, feeds the step's batch and waits while the runtime's actor
thread (ActorThread_0) launches every kernel: aclnn kernels through executors made once at build (phase 1 and
aclSetAclOpExecutorRepeatable) and rebound each step (aclSetTensorAddr / aclSetDynamicTensorAddr, then phase 2), an
aclop kernel (aclopCompileAndExecuteV2) and two AI CPU kernels (rtCpuKernelLaunchWithFlag). The runtime is
examples/mindspore/kbk_runtime.cpp (libms_kbk.so), its profiler examples/mindspore/profiler.cpp
(libmindspore_profiler.so): with MS_ENABLE_RUNTIME_PROFILER=1 every launch is recorded as MindSpore records it.

    /usr/bin/python3 examples/ms_kbk_train.py                  # 5 steps: "step {i} loss {value:.6f}"
    /usr/bin/python3 examples/ms_kbk_train.py --capture        # ACL graph capture: step 0 captures, later steps replay
    /usr/bin/python3 examples/ms_kbk_train.py --steps 3 --dump run.npz

The network: y = relu(x @ w1 + b1) @ w2 + b2 with x, t = X[idx], T[idx] (AI CPU GatherV2), MSE loss, backward from a
static loss scale, the gradients unscaled in one ForeachMulScalarList kernel, AdamW (ApplyAdamWV2). Each step trains on
another batch of rows. --dump saves the data, each step's indices and loss, the hyper-parameters and the initial and
final parameters, for an independent numpy replay of the training (test/integration/examples/test_ms_kbk.py).
"""
import argparse
import ctypes
import os
import sys

import numpy as np

N, D_IN, HIDDEN, D_OUT, BATCH = 64, 8, 16, 4, 8
LR, BETA1, BETA2, WEIGHT_DECAY, EPS, LOSS_SCALE = 0.01, 0.9, 0.999, 0.01, 1e-8, 1024.0


def library():
    explicit = os.environ.get("MS_KBK_LIB")
    if explicit:
        return explicit
    build = os.environ.get("MSPROBE_BUILD_DIR")
    home = os.environ.get("ASCEND_HOME_PATH", "")
    for d in ([os.path.join(build, "examples")] if build else []) + \
             [os.path.join(os.path.dirname(os.path.abspath(home)), "examples")] + \
             [os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "examples")]:
        path = os.path.join(d, "libms_kbk.so")
        if os.path.exists(path):
            return path
    sys.exit("libms_kbk.so not found: build the `examples` target, or set MS_KBK_LIB")


class Profiler:
    """mindspore::runtime::ProfilerAnalyzer::GetInstance().<method>(), through the exported C++ symbols."""

    MANGLED = {"StartStep": "_ZN9mindspore7runtime16ProfilerAnalyzer9StartStepEv",
               "EndStep": "_ZN9mindspore7runtime16ProfilerAnalyzer7EndStepEv",
               "Clear": "_ZN9mindspore7runtime16ProfilerAnalyzer5ClearEv"}

    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        get = self.lib["_ZN9mindspore7runtime16ProfilerAnalyzer11GetInstanceEv"]
        get.restype = ctypes.c_void_p
        self.instance = get()

    def call(self, method):
        f = self.lib[self.MANGLED[method]]
        f.argtypes = [ctypes.c_void_p]
        f(self.instance)


def data(seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N, D_IN)).astype(np.float32)
    proj = rng.standard_normal((D_IN, D_OUT)).astype(np.float32)
    t = np.tanh(x @ proj).astype(np.float32)
    w1 = (rng.standard_normal((D_IN, HIDDEN)) * 0.4).astype(np.float32)
    b1 = (rng.standard_normal(HIDDEN) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((HIDDEN, D_OUT)) * 0.4).astype(np.float32)
    b2 = (rng.standard_normal(D_OUT) * 0.1).astype(np.float32)
    return rng, x, t, [w1, b1, w2, b2]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--capture", action="store_true", help="ACL graph capture (set_kernel_launch_capture(True))")
    ap.add_argument("--dump", help="save data, indices, losses and parameters to this .npz")
    ap.add_argument("--time", action="store_true",
                    help="print the actor thread's CPU time per kernel launched after step 0 (stderr)")
    ap.add_argument("--profile-steps", action="store_true",
                    help="StartStep/EndStep of MindSpore's runtime profiler around each step and Clear at the end, as "
                         "Model.train's _FrameworkProfilerCallback and MindSpore's exit do")
    args = ap.parse_args()

    lib = ctypes.CDLL(library())  # CDLL: the GIL is released around every call, as MindSpore's graph run releases it
    P, F = ctypes.c_void_p, ctypes.POINTER(ctypes.c_float)
    lib.kbk_last_error.restype = ctypes.c_char_p
    lib.kbk_init.argtypes = [ctypes.c_char_p, ctypes.c_int32, ctypes.c_int32]
    lib.kbk_build.argtypes = [P, P, P, P, P, P, P, P]
    lib.kbk_feed.argtypes = [P]
    lib.kbk_loss.argtypes = [F]
    lib.kbk_read.argtypes = [ctypes.c_int32, P, ctypes.c_uint64]
    lib.kbk_actor_cpu_ns.restype = lib.kbk_kernels.restype = ctypes.c_uint64

    def check(rc, what):
        if rc != 0:
            sys.exit(f"{what}: {lib.kbk_last_error().decode(errors='replace')}")

    profiler = Profiler(os.path.join(os.path.dirname(library()), "libmindspore_profiler.so")) \
        if args.profile_steps else None
    rng, x, t, params = data(args.seed)
    home = os.environ.get("ASCEND_HOME_PATH", "")
    check(lib.kbk_init(home.encode(), 0, 1 if args.capture else 0), "kbk_init")
    dims = np.array([N, D_IN, HIDDEN, D_OUT, BATCH], dtype=np.int64)
    hyper = np.array([LR, BETA1, BETA2, WEIGHT_DECAY, EPS, LOSS_SCALE], dtype=np.float32)
    ptr = lambda a: a.ctypes.data_as(P)  # noqa: E731
    check(lib.kbk_build(ptr(dims), ptr(hyper), ptr(x), ptr(t), *[ptr(p) for p in params]), "kbk_build")

    indices, losses = [], []
    cpu0 = 0
    for step in range(args.steps):
        if step == 1:
            cpu0 = lib.kbk_actor_cpu_ns()
        idx = rng.choice(N, BATCH, replace=False).astype(np.int32)
        indices.append(idx)
        check(lib.kbk_feed(ptr(idx)), "kbk_feed")
        if profiler:
            profiler.call("StartStep")
        check(lib.kbk_step(), "kbk_step")
        loss = ctypes.c_float(0.0)
        check(lib.kbk_loss(ctypes.byref(loss)), "kbk_loss")
        losses.append(loss.value)
        if profiler:
            profiler.call("EndStep")
        print(f"step {step} loss {loss.value:.6f}", flush=True)

    if args.time and args.steps > 1:
        per_kernel = (lib.kbk_actor_cpu_ns() - cpu0) / ((args.steps - 1) * lib.kbk_kernels())
        print(f"actor_cpu_ns_per_kernel {per_kernel:.0f}", file=sys.stderr)
    final = []
    for i, p in enumerate(params):
        out = np.empty_like(p)
        check(lib.kbk_read(i, ptr(out), out.size), "kbk_read")
        final.append(out)
    check(lib.kbk_finalize(), "kbk_finalize")
    if profiler:
        profiler.call("Clear")
    if args.dump:
        np.savez(args.dump, x=x, t=t, indices=np.array(indices), losses=np.array(losses, dtype=np.float32),
                 hyper=hyper, w1=params[0], b1=params[1], w2=params[2], b2=params[3],
                 final_w1=final[0], final_b1=final[1], final_w2=final[2], final_b2=final[3])


if __name__ == "__main__":
    main()
