"""aclnn and aclop kernels launch through the runtime's exported rtKernelLaunchWithHandleV2, as on real CANN
(issue 17 item 4): the shim must still dump each of them exactly once, never again as a raw rt kernel named
after the op libraries' device kernel, and never its own device-statistics kernels.

The reference is the stand-in's FAKE_CANN_LAUNCH_LOG (the host's aclnn and aclop kernels, written by the
runtime side, independent of the shim), plus the HCCL calls and raw rt kernels the programs make.
"""
import collections
import os
import textwrap

import numpy as np
import pytest

import shimtest
from shimtest import op_type

ACL_APP = os.path.join(shimtest.BUILD, "bin", "acl_app")
OP_KERNEL = "fake_op_task_1"  # the op libraries' device kernel (test/fake_cann/device_kernels)
# Everything the shim launches for device statistics (shim/device/device_stats_ops.h); none is a host kernel here.
STATS_OPS = {"AminmaxAll", "Mean", "LinalgVectorNorm", "ForeachNorm", "IsFinite", "IsPosInf", "IsNegInf",
             "ReduceSum"}
STEPS = 2


def raw_kinds(counts):
    """Op types a raw rt capture of an op library's launch would have."""
    return {k for k in counts if k.startswith("fake_op_task") or k == "UnknownRtKernel"}


def no_hccl(counts):
    return collections.Counter({k: v for k, v in counts.items() if not k.startswith("Hccl")})


def check_once(r, extra=None):
    """The dump holds every logged kernel once, plus `extra` (raw rt kernels, HCCL), and nothing else."""
    logged = r.launches()
    assert sum(logged.values()) > 0, "the stand-in logged no kernel"
    dumped = r.dump.op_counts()
    want = logged + collections.Counter(extra or {})
    assert not raw_kinds(dumped), f"an op library's launch dumped as a raw rt kernel: {sorted(dumped.items())}"
    assert dumped == want, f"dump {sorted(dumped.items())} != launched {sorted(want.items())}"
    return logged


# ---- train.py: aclnn, phase 2 on tiny_npu's task-queue thread or inline -------------------------------------
@pytest.mark.parametrize("queue", ["1", "0"], ids=["task-queue", "inline"])
@pytest.mark.parametrize("task", ["statistics", "tensor"])
def test_train_aclnn_kernels_dumped_exactly_once(tmp_path, task, queue):
    r = shimtest.run_train(tmp_path, "--steps", str(STEPS), task=task, env={"TASK_QUEUE_ENABLE": queue})
    logged = check_once(r)
    assert sum(logged.values()) > 50, logged
    # The statistics task reduces tensors on the device with aclnn kernels of the shim's own (the .preloaded log),
    # launched through the same rtKernelLaunchWithHandleV2: none is dumped, none is counted as the host's.
    dumped = r.dump.op_counts()
    own = r.launch_log + ".preloaded"
    if task == "statistics":
        with open(own) as f:
            shim_ops = collections.Counter(line.strip() for line in f if line.strip())
        assert set(shim_ops) <= STATS_OPS and sum(shim_ops.values()) > 0, shim_ops
        assert not (STATS_OPS - set(logged)) & set(dumped), sorted(dumped)


def test_train_tensor_dump_values_unchanged_by_the_launch_path(tmp_path):
    """The dumped Add outputs still equal x + alpha * y (broadcast): the kernels ran once, on the data the shim
    copied."""
    r = shimtest.run_train(tmp_path, "--steps", "1", task="tensor")
    checked = 0
    for f, name, e in r.dump.kernels():
        if op_type(name) != "Add" or len(e["input_args"]) < 3:
            continue
        x, y, alpha, out = f.load(e["input_args"][0]), f.load(e["input_args"][1]), e["input_args"][2], e["output"][0]
        if x is None or y is None or x.dtype != np.float32:
            continue
        np.testing.assert_allclose(f.load(out), x + np.float32(alpha["value"]) * y, rtol=1e-6, atol=1e-6)
        checked += 1
    assert checked > 0, "no fp32 Add with tensor inputs in train.py's dump"


@pytest.mark.parametrize("queue", ["1", "0"], ids=["task-queue", "inline"])
def test_train_list_of_one_op_type_dumps_only_it(tmp_path, queue):
    r = shimtest.run_train(tmp_path, "--steps", str(STEPS), task="tensor",
                           env={"MSPROBE_LIST": "Matmul", "TASK_QUEUE_ENABLE": queue})
    logged = r.launches()
    assert logged["Matmul"] > 0 and len(logged) > 1, logged
    assert r.dump.op_counts() == {"Matmul": logged["Matmul"]}, sorted(r.dump.op_counts().items())


def test_train_step_selection_dumps_no_raw_kernels(tmp_path):
    r = shimtest.run_train(tmp_path / "one", "--steps", "3", task="statistics", env={"MSPROBE_STEP": "1"})
    assert r.dump.steps() == [1], r.dump.steps()
    dumped = r.dump.op_counts()
    assert not raw_kinds(dumped) and sum(dumped.values()) > 0, sorted(dumped.items())
    # Exactly step 1's kernels of a run that dumps every step (itself checked against the launch log).
    full = shimtest.run_train(tmp_path / "all", "--steps", "3", task="statistics")
    check_once(full)
    assert dumped == full.dump.folder(1).op_counts(), (sorted(dumped.items()),
                                                       sorted(full.dump.folder(1).op_counts().items()))


# ---- acl_app: aclop, a raw rt kernel, aclnn and HCCL ---------------------------------------------------------
def test_acl_app_each_family_once_and_raw_rt_kernel_still_captured(tmp_path):
    r = shimtest.run([ACL_APP], tmp_path, env={"MSPROBE_TASK": "tensor"}).check()
    assert r.stdout.splitlines()[-1] == "acl_app: all results match", r.stdout
    assert r.launches() == {"Add": 1, "Mul": 1}
    check_once(r, {"fake_vector_add": 1, "HcclAllReduce": 1})


@pytest.mark.parametrize("only", ["Add", "Mul", "fake_vector_add"])
def test_acl_app_list_of_one_op_type_dumps_only_it(tmp_path, only):
    r = shimtest.run([ACL_APP], tmp_path, env={"MSPROBE_TASK": "tensor", "MSPROBE_LIST": only}).check()
    assert r.dump.op_counts() == {only: 1}, sorted(r.dump.op_counts().items())


# ---- an aclop workload: aclopExecuteV2 / aclopCompileAndExecute(V2) on two threads ------------------------------
ACLOP_HOST = textwrap.dedent('''
    """Add, Sub and Mul through the three aclop entry points, on the main thread and on a second one (its own
    stream), ROUNDS times each; checks every result with numpy and prints "ok <kernels>"."""
    import ctypes, os, sys, threading
    import numpy as np
    from aclop_ctypes import acl, compiler, P, I64, device_copy
    sig = [ctypes.c_char_p, ctypes.c_int, P, P, ctypes.c_int, P, P, P]
    compiler.aclopCompileAndExecute.argtypes = sig + [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, P]
    compiler.aclopCompileAndExecuteV2.argtypes = sig + [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, P]
    acl.aclopExecuteV2.argtypes = sig + [P]
    ROUNDS, n = 3, 16
    FN = {b"Add": np.add, b"Sub": np.subtract, b"Mul": np.multiply}
    assert acl.aclInit(None) == 0
    launched = [0]
    lock = threading.Lock()

    def work(seed):
        assert acl.aclrtSetDevice(0) == 0
        stream = P()
        assert acl.aclrtCreateStream(ctypes.byref(stream)) == 0
        dims = (I64 * 1)(n)
        rng = np.random.default_rng(seed)
        attr = acl.aclopCreateAttr()
        for _ in range(ROUNDS):
            for op, fn in FN.items():
                for entry in range(3):
                    x = rng.standard_normal(n).astype(np.float32)
                    y = rng.standard_normal(n).astype(np.float32)
                    dx, dy, dz = device_copy(x), device_copy(y), device_copy(np.zeros(n, np.float32))
                    descs = (P * 3)(*[acl.aclCreateTensorDesc(0, 1, dims, 2) for _ in range(3)])
                    bufs = (P * 3)(*[acl.aclCreateDataBuffer(d, 4 * n) for d in (dx, dy, dz)])
                    ins, outs = ctypes.cast(bufs, P), ctypes.c_void_p(ctypes.addressof(bufs) + 16)
                    idesc, odesc = ctypes.cast(descs, P), ctypes.c_void_p(ctypes.addressof(descs) + 16)
                    if entry == 0:
                        rc = acl.aclopExecuteV2(op, 2, idesc, ins, 1, odesc, outs, attr, stream)
                    elif entry == 1:
                        rc = compiler.aclopCompileAndExecute(op, 2, idesc, ins, 1, odesc, outs, attr, 0, 0, None, stream)
                    else:
                        rc = compiler.aclopCompileAndExecuteV2(op, 2, idesc, ins, 1, odesc, outs, attr, 0, 0, None,
                                                               stream)
                    assert rc == 0, (op, entry, rc)
                    assert acl.aclrtSynchronizeStream(stream) == 0
                    z = np.zeros(n, np.float32)
                    assert acl.aclrtMemcpy(z.ctypes.data, z.nbytes, dz, z.nbytes, 2) == 0
                    np.testing.assert_array_equal(z, fn(x, y))
                    with lock:
                        launched[0] += 1

    t = threading.Thread(target=work, args=(2,))
    t.start()
    work(1)
    t.join()
    print("ok", launched[0])
''')


@pytest.fixture(scope="module")
def aclop_host(tmp_path_factory):
    path = tmp_path_factory.mktemp("aclop_host") / "aclop_host.py"
    path.write_text(ACLOP_HOST)
    return path


def test_aclop_workload_kernels_dumped_exactly_once(tmp_path, aclop_host):
    r = shimtest.run([shimtest.PYTHON, aclop_host], tmp_path, env={"MSPROBE_TASK": "tensor"}).check()
    assert r.stdout.strip() == "ok 54", r.stdout  # 2 threads x 3 rounds x 3 ops x 3 entry points
    logged = check_once(r)
    assert logged == {"Add": 18, "Sub": 18, "Mul": 18}, logged
    # Each dumped kernel holds the data it ran on: z = x op y.
    fn = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply}
    for f, name, e in r.dump.kernels():
        x, y = (f.load(a) for a in e["input_args"][:2])
        np.testing.assert_array_equal(f.load(e["output"][0]), fn[op_type(name)](x, y))


def test_aclop_workload_list_of_one_op_type_dumps_only_it(tmp_path, aclop_host):
    r = shimtest.run([shimtest.PYTHON, aclop_host], tmp_path, env={"MSPROBE_TASK": "statistics",
                                                                    "MSPROBE_LIST": "Sub"}).check()
    assert r.launches()["Sub"] == 18
    assert r.dump.op_counts() == {"Sub": 18}, sorted(r.dump.op_counts().items())
