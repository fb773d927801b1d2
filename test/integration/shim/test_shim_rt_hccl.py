"""Raw runtime kernels and HCCL collectives under libmsprobe_shim.so (issue 4, items 2 and 3).

* examples/acl_app (directly linked, PLT path): its rtKernelLaunch of fake_vector_add is dumped with the three
  device buffers as raw UInt8 inputs and outputs (z reinterpreted as float32 = x + y), its one-rank
  HcclAllReduce with typed data, and every family in launch order.
* train.py --ranks 2 (ctypes, dlsym path): every HcclAllReduce output on both ranks equals the sum of the two
  ranks' inputs.
* A two-rank ctypes worker (this file run as a script) covering what the examples do not: handle launches
  named by tiling key, rtKernelLaunchWithFlag with tiling data in the blob, memory from rtMalloc, interior
  pointers, a blob with a partial last slot, and AllGather / ReduceScatter / Broadcast / typed AllReduce.

Every expected value is computed here with numpy from the dumped inputs or from the programs' own inputs.
"""
import ctypes
import os
import struct
import subprocess
import sys
import time

import numpy as np
import pytest

import shimtest
from shimtest import op_type

APP = os.path.join(shimtest.BUILD, "bin", "acl_app")
N = 8  # acl_app's kN
X = 0.5 * np.arange(N, dtype=np.float32) - 1.0  # acl_app's hx, hy
Y = 2.0 + 0.25 * np.arange(N, dtype=np.float32)


def kernels_of(dump, op):
    return [(f, n, e) for f, n, e in dump.kernels() if op_type(n) == op]


def only(dump, op):
    found = kernels_of(dump, op)
    assert len(found) == 1, f"{op}: {len(found)} kernels dumped; have {sorted(n for _, n, _ in dump.kernels())}"
    return found[0]


def raw_bytes(folder, arg, nbytes):
    """A raw rt-kernel buffer: UInt8 [nbytes], loaded from its file."""
    assert shimtest.is_tensor(arg), arg
    assert arg["dtype"] == "UInt8" and arg["shape"] == [nbytes], arg
    data = folder.load(arg)
    assert data.dtype == np.uint8 and data.shape == (nbytes,)
    return data


def value(v, type_, n, name=None):
    want = {"type": type_, "value": n}
    if name is not None:
        want["name"] = name
    return v == want


# ---- acl_app ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def acl_app(tmp_path_factory):
    r = shimtest.run([APP], tmp_path_factory.mktemp("acl_app"), env={"MSPROBE_TASK": "tensor"}).check()
    assert r.stdout.splitlines()[-1] == "acl_app: all results match", r.stdout
    return r


def test_acl_app_rt_kernel_is_dumped_as_raw_device_buffers(acl_app):
    f, name, e = only(acl_app.dump, "fake_vector_add")
    ins, outs = e["input_args"], e["output"]
    assert len(ins) == 4 and len(outs) == 3, e
    # The blob: x, y, z device addresses (each a 32-byte allocation), then n.
    assert value(ins[3], "uint64", N), ins[3]
    x_in, y_in, z_in = (raw_bytes(f, a, 4 * N) for a in ins[:3])
    x_out, y_out, z_out = (raw_bytes(f, a, 4 * N) for a in outs)
    np.testing.assert_array_equal(x_in.view(np.float32), X)
    np.testing.assert_array_equal(y_in.view(np.float32), Y)
    np.testing.assert_array_equal(x_out, x_in)
    np.testing.assert_array_equal(y_out, y_in)
    np.testing.assert_array_equal(z_out.view(np.float32), x_in.view(np.float32) + y_in.view(np.float32))
    # z was a fresh buffer before the launch: its input is not the sum.
    assert not np.array_equal(z_in, z_out)


def test_acl_app_hccl_all_reduce_is_typed(acl_app):
    f, name, e = only(acl_app.dump, "HcclAllReduce")
    (t_in, op), (t_out,) = e["input_args"], e["output"]
    assert value(op, "str", "sum", "op"), op
    for t in (t_in, t_out):
        assert t["dtype"] == "Float32" and t["shape"] == [N], t
    prod = X * Y  # z_nn = x * y from aclnnMul; one rank: the sum is itself
    np.testing.assert_array_equal(f.load(t_in), prod)
    np.testing.assert_array_equal(f.load(t_out), prod)


def test_acl_app_families_in_launch_order(acl_app):
    index = {op_type(n): e["launch"]["index"] for _, n, e in acl_app.dump.kernels()}
    order = [op for op in ("Add", "fake_vector_add", "Mul", "HcclAllReduce") if op in index]
    for op in ("fake_vector_add", "Mul", "HcclAllReduce"):
        assert op in index, f"{op} not dumped; have {sorted(index)}"
    got = [index[op] for op in order]
    assert got == sorted(got) and len(set(got)) == len(got), {op: index[op] for op in order}
    # No kernel twice: the shim's own copies go through the runtime without being captured.
    assert len(index) == sum(1 for _ in acl_app.dump.kernels())


def test_acl_app_structure_task_copies_nothing(tmp_path):
    r = shimtest.run([APP], tmp_path, env={"MSPROBE_TASK": "structure"}).check()
    f, _, e = only(r.dump, "fake_vector_add")
    assert [a["shape"] for a in e["input_args"][:3]] == [[4 * N]] * 3
    assert not any(os.path.isdir(fl.tensor_dir) for fl in r.dump.folders())


# ---- train.py, two ranks ---------------------------------------------------------------------------------------
def test_train_two_ranks_all_reduce_outputs_are_the_sum_of_both_inputs(tmp_path):
    r = shimtest.run_train(tmp_path, "--steps", "2", "--ranks", "2", task="tensor")
    assert r.dump.ranks() == [0, 1], [f.path for f in r.dump.folders()]
    checked = 0
    for step in r.dump.steps():
        folders = [r.dump.folder(step, rank) for rank in (0, 1)]
        reduces = [{n: e for n, e in fl.entries() if op_type(n) == "HcclAllReduce"} for fl in folders]
        assert reduces[0].keys() == reduces[1].keys(), reduces
        if step < 2:
            assert reduces[0], f"step {step}: no HcclAllReduce dumped"
        for name in reduces[0]:
            e0, e1 = reduces[0][name], reduces[1][name]
            assert e0["input_args"][1] == {"type": "str", "value": "sum", "name": "op"}
            in0, in1 = folders[0].load(e0["input_args"][0]), folders[1].load(e1["input_args"][0])
            assert in0.dtype == np.float32 and in0.shape == in1.shape
            assert not np.array_equal(in0, in1), f"{name}: both ranks sent the same data"
            want = in0 + in1
            for fl, e in zip(folders, (e0, e1)):
                assert e["output"][0]["dtype"] == "Float32"
                np.testing.assert_array_equal(fl.load(e["output"][0]), want, err_msg=f"step {step} {name}")
            checked += 1
    assert checked >= 4


# ---- two-rank ctypes worker -----------------------------------------------------------------------------------
class RtDevBinary(ctypes.Structure):
    _fields_ = [("magic", ctypes.c_uint32), ("version", ctypes.c_uint32), ("data", ctypes.c_void_p),
                ("length", ctypes.c_uint64)]


class RtArgsEx(ctypes.Structure):
    _fields_ = [("args", ctypes.c_void_p), ("hostInputInfoPtr", ctypes.c_void_p), ("argsSize", ctypes.c_uint32),
                ("tilingAddrOffset", ctypes.c_uint32), ("tilingDataOffset", ctypes.c_uint32),
                ("hostInputInfoNum", ctypes.c_uint16), ("hasTiling", ctypes.c_uint8),
                ("isNoNeedH2DCopy", ctypes.c_uint8), ("reserved", ctypes.c_uint8 * 4)]


RT_DEV_BINARY_MAGIC_ELF = 0x43554245
HCCL_FP32, HCCL_INT32, HCCL_BFP16 = 4, 2, 11
HCCL_SUM, HCCL_MAX = 0, 2
WORKER_COUNT = 4
SCALE = 1.5
TILING = b"tiling-data-1234"  # 16 bytes of tiling data behind the slots


def worker_inputs(rank):
    """Every rank's inputs, so that the test can compute the collectives' results for any rank."""
    base = np.arange(WORKER_COUNT, dtype=np.float32)
    return {
        "x": np.array([-2.0, -0.5, 0.0, 0.25, 1.0, 3.0, -7.0, 8.5], dtype=np.float32) * (rank + 1),
        "gather": base + 10 * rank,
        "scatter": np.arange(WORKER_COUNT * 2, dtype=np.float32) * (rank + 1),
        "bcast": base - 100 * rank,
        "bf16": np.array([0x3F80, 0xC000, 0x4040 + rank, 0x0000], dtype=np.uint16),  # bf16 bits
        "int32": np.array([1, -2, 3, 2 ** 20], dtype=np.int32) * (rank + 2),
    }


def bf16_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def worker(rank, nranks, root_info_path):
    home = os.environ["ASCEND_HOME_PATH"]
    lib = lambda n: ctypes.CDLL(os.path.join(home, "lib64", n))
    acl, rt, hccl = lib("libascendcl.so"), lib("libruntime.so"), lib("libhccl.so")
    P, U32, U64 = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64
    acl.aclrtMalloc.argtypes = [P, ctypes.c_size_t, ctypes.c_int]
    acl.aclrtMemcpy.argtypes = [P, ctypes.c_size_t, P, ctypes.c_size_t, ctypes.c_int]
    acl.aclrtFree.argtypes = [P]
    acl.aclrtSynchronizeStream.argtypes = [P]
    rt.rtMalloc.argtypes = [P, U64, U32, ctypes.c_uint16]
    rt.rtFree.argtypes = [P]
    rt.rtKernelLaunchWithHandleV2.argtypes = [P, U64, U32, P, P, P, P]
    rt.rtKernelLaunchWithHandle.argtypes = [P, U64, U32, P, P, P, P]
    rt.rtKernelLaunchWithFlag.argtypes = [P, U32, P, P, P, U32]
    rt.rtFunctionRegister.argtypes = [P, P, ctypes.c_char_p, ctypes.c_char_p, U32]
    rt.rtDevBinaryUnRegister.argtypes = [P]
    hccl.HcclCommInitRootInfo.argtypes = [U32, P, U32, P]
    hccl.HcclAllReduce.argtypes = [P, P, U64, ctypes.c_int, ctypes.c_int, P, P]
    hccl.HcclAllGather.argtypes = [P, P, U64, ctypes.c_int, P, P]
    hccl.HcclReduceScatter.argtypes = [P, P, U64, ctypes.c_int, ctypes.c_int, P, P]
    hccl.HcclBroadcast.argtypes = [P, U64, ctypes.c_int, U32, P, P]
    hccl.HcclCommDestroy.argtypes = [P]

    def ok(rc, what):
        if rc != 0:
            raise SystemExit(f"rank {rank}: {what} failed with {rc}")

    ok(acl.aclInit(None), "aclInit")
    ok(acl.aclrtSetDevice(rank), "aclrtSetDevice")
    stream = P()
    ok(acl.aclrtCreateStream(ctypes.byref(stream)), "aclrtCreateStream")

    def dev(nbytes, rt_malloc=False):
        p = P()
        if rt_malloc:
            ok(rt.rtMalloc(ctypes.byref(p), nbytes, 2, 0), "rtMalloc")
        else:
            ok(acl.aclrtMalloc(ctypes.byref(p), nbytes, 0), "aclrtMalloc")
        return p.value

    def h2d(ptr, a):
        a = np.ascontiguousarray(a)
        ok(acl.aclrtMemcpy(ptr, a.nbytes, a.ctypes.data, a.nbytes, 1), "aclrtMemcpy H2D")

    def d2h(ptr, n, dtype):
        ok(acl.aclrtSynchronizeStream(stream), "aclrtSynchronizeStream")
        out = np.empty(n, dtype=dtype)
        ok(acl.aclrtMemcpy(out.ctypes.data, out.nbytes, ptr, out.nbytes, 2), "aclrtMemcpy D2H")
        return out

    inp = worker_inputs(rank)
    # ---- raw kernels ----
    with open(os.path.join(home, "opp", "kernel", "fake_kernels.o"), "rb") as fh:
        image = ctypes.create_string_buffer(fh.read())
    binary = RtDevBinary(RT_DEV_BINARY_MAGIC_ELF, 0, ctypes.addressof(image), len(image.raw) - 1)
    all_kernels, stubs_bin = P(), P()
    ok(rt.rtRegisterAllKernel(ctypes.byref(binary), ctypes.byref(all_kernels)), "rtRegisterAllKernel")
    ok(rt.rtDevBinaryRegister(ctypes.byref(binary), ctypes.byref(stubs_bin)), "rtDevBinaryRegister")
    stub = ctypes.create_string_buffer(1)  # any unique host address
    ok(rt.rtFunctionRegister(stubs_bin, ctypes.addressof(stub), b"add_stub", b"fake_vector_add", 0),
       "rtFunctionRegister")

    big = dev(256, rt_malloc=True)  # x lives 64 bytes into an rtMalloc allocation (interior pointer)
    x = big + 64
    y, z = dev(32), dev(32)
    h2d(x, inp["x"])
    keep = []

    def args_ex(blob, **extra):
        buf = ctypes.create_string_buffer(blob, len(blob))
        keep.append(buf)
        a = RtArgsEx(args=ctypes.addressof(buf), argsSize=len(blob), **extra)
        keep.append(a)
        return ctypes.byref(a)

    # 1. handle launch, tiling key 2 (fake_elementwise_2 = scale): x, y, n, float scale -> 28 bytes
    ok(rt.rtKernelLaunchWithHandleV2(all_kernels, 2, 1, args_ex(struct.pack("<QQQf", x, y, 8, SCALE)), None,
                                     stream, None), "rtKernelLaunchWithHandleV2")
    # 2. stub launch with tiling data in the blob: x, y, z, n, <tiling address slot>, tiling data
    blob = struct.pack("<QQQQQ", x, y, z, 8, 0) + TILING
    ok(rt.rtKernelLaunchWithFlag(ctypes.addressof(stub), 1, args_ex(blob, hasTiling=1, tilingAddrOffset=32,
                                                                     tilingDataOffset=40), None, stream, 0),
       "rtKernelLaunchWithFlag")
    # 3. handle launch, tiling key 3 (relu) in place on z
    ok(rt.rtKernelLaunchWithHandle(all_kernels, 3, 1, args_ex(struct.pack("<QQQ", z, z, 8)), None, stream, None),
       "rtKernelLaunchWithHandle")
    got = d2h(z, 8, np.float32)
    want = np.maximum(inp["x"] + inp["x"] * np.float32(SCALE), 0)
    assert np.array_equal(got, want), (got, want)
    ok(rt.rtDevBinaryUnRegister(stubs_bin), "rtDevBinaryUnRegister")

    # ---- collectives ----
    info = ctypes.create_string_buffer(4108)
    if rank == 0:
        ok(hccl.HcclGetRootInfo(info), "HcclGetRootInfo")
        tmp = f"{root_info_path}.tmp"
        with open(tmp, "wb") as fh:
            fh.write(info.raw)
        os.replace(tmp, root_info_path)
    else:
        deadline = time.monotonic() + 60
        while not os.path.exists(root_info_path):
            assert time.monotonic() < deadline, "no root info"
            time.sleep(0.01)
        with open(root_info_path, "rb") as fh:
            ctypes.memmove(info, fh.read(), 4108)
    comm = P()
    ok(hccl.HcclCommInitRootInfo(nranks, info, rank, ctypes.byref(comm)), "HcclCommInitRootInfo")
    c = WORKER_COUNT
    g_send, g_recv = dev(4 * c), dev(4 * c * nranks)
    h2d(g_send, inp["gather"])
    ok(hccl.HcclAllGather(g_send, g_recv, c, HCCL_FP32, comm, stream), "HcclAllGather")
    s_send, s_recv = dev(4 * c * nranks), dev(4 * c)
    h2d(s_send, inp["scatter"])
    ok(hccl.HcclReduceScatter(s_send, s_recv, c, HCCL_FP32, HCCL_SUM, comm, stream), "HcclReduceScatter")
    b = dev(4 * c)
    h2d(b, inp["bcast"])
    ok(hccl.HcclBroadcast(b, c, HCCL_FP32, 1, comm, stream), "HcclBroadcast")
    bf = dev(2 * c)
    h2d(bf, inp["bf16"])
    ok(hccl.HcclAllReduce(bf, bf, c, HCCL_BFP16, HCCL_MAX, comm, stream), "HcclAllReduce(bf16)")
    i_send, i_recv = dev(4 * c), dev(4 * c)
    h2d(i_send, inp["int32"])
    ok(hccl.HcclAllReduce(i_send, i_recv, c, HCCL_INT32, HCCL_SUM, comm, stream), "HcclAllReduce(int32)")
    d2h(i_recv, c, np.int32)
    for p in (g_send, g_recv, s_send, s_recv, b, bf, i_send, i_recv, y, z):
        ok(acl.aclrtFree(p), "aclrtFree")
    ok(rt.rtFree(big), "rtFree")
    ok(hccl.HcclCommDestroy(comm), "HcclCommDestroy")
    ok(acl.aclrtDestroyStream(stream), "aclrtDestroyStream")
    ok(acl.aclrtResetDevice(rank), "aclrtResetDevice")
    ok(acl.aclFinalize(), "aclFinalize")


WORKER_ORDER = ["fake_elementwise_2", "fake_vector_add", "fake_elementwise_3", "HcclAllGather", "HcclReduceScatter",
                "HcclBroadcast", "HcclAllReduce", "HcclAllReduce"]


@pytest.fixture(scope="module")
def workers(tmp_path_factory):
    work = tmp_path_factory.mktemp("rt_hccl_workers")
    env = shimtest.clean_env({"LD_PRELOAD": shimtest.SHIM, "MSPROBE_DUMP_PATH": str(work / "dump"),
                              "MSPROBE_TASK": "tensor"})
    procs = []
    for rank in range(2):
        e = dict(env, RANK_ID=str(rank))
        procs.append(subprocess.Popen([shimtest.PYTHON, os.path.abspath(__file__), "worker", str(rank), "2",
                                       str(work / "root_info")], env=e, cwd=work, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, f"worker exited {p.returncode}\n{out}\n{err}"
    return shimtest.Dump(str(work / "dump"))


def test_worker_kernels_in_launch_order_on_both_ranks(workers):
    assert workers.ranks() == [0, 1]
    for rank in (0, 1):
        kernels = sorted(((e["launch"]["index"], op_type(n)) for f, n, e in workers.kernels() if f.rank == rank))
        assert [op for _, op in kernels] == WORKER_ORDER, kernels


def rank_kernels(dump, rank, op):
    return sorted(((f, n, e) for f, n, e in dump.kernels() if f.rank == rank and op_type(n) == op),
                  key=lambda k: k[2]["launch"]["index"])


def test_handle_launch_named_by_tiling_key_with_interior_pointer_and_partial_slot(workers):
    for rank in (0, 1):
        (f, name, e), = rank_kernels(workers, rank, "fake_elementwise_2")
        ins, outs = e["input_args"], e["output"]
        assert len(ins) == 4 and len(outs) == 2, e
        x_in = raw_bytes(f, ins[0], 256 - 64)  # from the interior pointer to the allocation's end
        y_in = raw_bytes(f, ins[1], 32)
        assert value(ins[2], "uint64", 8)
        assert value(ins[3], "uint32", struct.unpack("<I", struct.pack("<f", SCALE))[0])
        np.testing.assert_array_equal(x_in[:32].view(np.float32), worker_inputs(rank)["x"])
        x_out, y_out = raw_bytes(f, outs[0], 192), raw_bytes(f, outs[1], 32)
        np.testing.assert_array_equal(x_out, x_in)
        np.testing.assert_array_equal(y_out.view(np.float32), x_in[:32].view(np.float32) * np.float32(SCALE))


def test_flag_launch_with_tiling_records_only_the_slots(workers):
    for rank in (0, 1):
        (f, _, scale), = rank_kernels(workers, rank, "fake_elementwise_2")
        (f, name, e), = rank_kernels(workers, rank, "fake_vector_add")
        ins, outs = e["input_args"], e["output"]
        assert len(ins) == 5 and len(outs) == 3, e  # x, y, z, n, tiling slot; the tiling data is not a slot
        assert value(ins[3], "uint64", 8) and value(ins[4], "uint64", 0)
        x, y = raw_bytes(f, ins[0], 192), raw_bytes(f, ins[1], 32)
        np.testing.assert_array_equal(y, f.load(scale["output"][1]))  # y as the previous kernel left it
        z_out = raw_bytes(f, outs[2], 32)
        np.testing.assert_array_equal(z_out.view(np.float32), x[:32].view(np.float32) + y.view(np.float32))


def test_in_place_handle_launch_keeps_pre_and_post_values(workers):
    for rank in (0, 1):
        (f, _, add), = rank_kernels(workers, rank, "fake_vector_add")
        (f, name, e), = rank_kernels(workers, rank, "fake_elementwise_3")
        (z_in, z_in2, n), (z_out, z_out2) = e["input_args"], e["output"]
        pre, post = raw_bytes(f, z_in, 32), raw_bytes(f, z_out, 32)
        np.testing.assert_array_equal(pre, f.load(add["output"][2]))
        np.testing.assert_array_equal(post.view(np.float32), np.maximum(pre.view(np.float32), 0))
        assert (pre.view(np.float32) < 0).any(), "the test data must make relu change something"
        np.testing.assert_array_equal(f.load(z_in2), pre)
        np.testing.assert_array_equal(f.load(z_out2), post)


def one_per_rank(dump, op, index=0):
    out = []
    for rank in (0, 1):
        ks = rank_kernels(dump, rank, op)
        f, n, e = ks[index]
        out.append((f, e))
    return out


def test_all_gather_output_is_every_ranks_input(workers):
    per_rank = one_per_rank(workers, "HcclAllGather")
    inputs = []
    for rank, (f, e) in enumerate(per_rank):
        (t_in,), (t_out,) = e["input_args"], e["output"]
        assert t_in["dtype"] == "Float32" and t_in["shape"] == [WORKER_COUNT]
        assert t_out["dtype"] == "Float32" and t_out["shape"] == [WORKER_COUNT * 2]  # count * nRanks
        inputs.append(f.load(t_in))
        np.testing.assert_array_equal(inputs[-1], worker_inputs(rank)["gather"])
    for f, e in per_rank:
        np.testing.assert_array_equal(f.load(e["output"][0]), np.concatenate(inputs))


def test_reduce_scatter_output_is_this_ranks_share_of_the_sum(workers):
    per_rank = one_per_rank(workers, "HcclReduceScatter")
    ins = []
    for f, e in per_rank:
        (t_in, op), (t_out,) = e["input_args"], e["output"]
        assert t_in["shape"] == [WORKER_COUNT * 2] and t_out["shape"] == [WORKER_COUNT]  # input = count * nRanks
        assert value(op, "str", "sum", "op")
        ins.append(f.load(t_in))
    total = ins[0] + ins[1]
    for rank, (f, e) in enumerate(per_rank):
        np.testing.assert_array_equal(f.load(e["output"][0]), total[rank * WORKER_COUNT:(rank + 1) * WORKER_COUNT])


def test_broadcast_records_root_and_in_place_buffer(workers):
    per_rank = one_per_rank(workers, "HcclBroadcast")
    root_input = None
    for rank, (f, e) in enumerate(per_rank):
        (t_in, root), (t_out,) = e["input_args"], e["output"]
        assert value(root, "int", 1, "root")
        np.testing.assert_array_equal(f.load(t_in), worker_inputs(rank)["bcast"])
        if rank == 1:
            root_input = f.load(t_in)
    for f, e in per_rank:
        np.testing.assert_array_equal(f.load(e["output"][0]), root_input)


def test_all_reduce_types_from_hccl_data_type(workers):
    bf = one_per_rank(workers, "HcclAllReduce", 0)
    ints = one_per_rank(workers, "HcclAllReduce", 1)
    bf_in = []
    for rank, (f, e) in enumerate(bf):
        (t_in, op), (t_out,) = e["input_args"], e["output"]
        assert t_in["dtype"] == "BFloat16" and t_out["dtype"] == "BFloat16" and t_in["shape"] == [WORKER_COUNT]
        assert value(op, "str", "max", "op")
        bf_in.append(f.load(t_in))  # widened to float32
        np.testing.assert_array_equal(bf_in[-1], bf16_to_f32(worker_inputs(rank)["bf16"]))
    for f, e in bf:
        np.testing.assert_array_equal(f.load(e["output"][0]), np.maximum(bf_in[0], bf_in[1]))
    int_in = []
    for rank, (f, e) in enumerate(ints):
        (t_in, op), (t_out,) = e["input_args"], e["output"]
        assert t_in["dtype"] == "Int32" and t_out["dtype"] == "Int32"
        int_in.append(f.load(t_in))
        np.testing.assert_array_equal(int_in[-1], worker_inputs(rank)["int32"])
    for f, e in ints:
        np.testing.assert_array_equal(f.load(e["output"][0]), int_in[0] + int_in[1])


if __name__ == "__main__" and len(sys.argv) == 5 and sys.argv[1] == "worker":
    worker(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
