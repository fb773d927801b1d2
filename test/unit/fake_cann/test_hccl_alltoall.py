"""HcclAlltoAll, HcclAlltoAllV and HcclAlltoAllVC of the stand-in's libhccl.

Ranks run as processes (and, once, as threads of one process); each rank's send buffer is written by the test, and
what every rank received is compared bit for bit with numpy's own rearrangement of all the send buffers. The argument
errors are HCCL's (hccl src/ops/all_to_all_v/all_to_all_v_op.cc); a disagreement between ranks fails the collective
on every rank instead of hanging.
"""
import ctypes

import numpy as np
import pytest

import ranks
from ranks import HCCL_TYPE, load
from tiny_npu import acl

E_PARA, E_PTR, E_NOT_SUPPORT = 1, 2, 5
INT128 = 12
DTYPES = {"fp32": acl.FLOAT, "fp16": acl.FLOAT16, "bf16": acl.BF16, "int32": acl.INT32, "int64": acl.INT64,
          "int8": acl.INT8}
SENTINEL = -7


def values(rng, count, dtype):
    """Values exactly representable in dtype (so that the comparison can be bit for bit)."""
    if dtype in (acl.INT8,):
        return rng.integers(-128, 128, count).astype(np.int8)
    if dtype in (acl.INT32, acl.INT64):
        return rng.integers(-2**31, 2**31, count).astype(acl.NUMPY_OF[dtype])
    x = rng.standard_normal(count).astype(np.float32) * 100
    if dtype == acl.BF16:
        return acl.bf16_to_float(acl.bf16_bits(x))
    return x.astype(acl.NUMPY_OF[dtype])


def u64(values):
    a = np.ascontiguousarray(values, dtype=np.uint64)
    return a, a.ctypes.data


# --------------------------------------------------------------------------------------------- rank bodies


def case_alltoall(rk):
    """HcclAlltoAll of every dtype in turn, on one stream, one synchronization at the end."""
    pending = []
    for name, dt in DTYPES.items():
        send = rk.load(f"send{rk.rank}_{name}")
        count = send.size // rk.n
        sp, rp = rk.device(send, dt), rk.device(np.full(send.size, SENTINEL), dt)
        acl.check(rk.h.HcclAlltoAll(sp, count, HCCL_TYPE[dt], rp, count, HCCL_TYPE[dt], rk.comm, rk.stream),
                  f"HcclAlltoAll {name}")
        pending.append((name, dt, rp, send.size))
    acl.check(rk.sync(), "aclrtSynchronizeStream")
    for name, dt, rp, size in pending:
        rk.save(name, rk.host(rp, size, dt))


def case_alltoallv(rk):
    """HcclAlltoAllV with the test's counts and displacements (gaps, reversed blocks, empty pairs), then
    HcclAlltoAllVC over the same count matrix (packed blocks)."""
    matrix = rk.load("matrix")
    send, sd, rd = rk.load(f"send{rk.rank}"), rk.load(f"sdispls{rk.rank}"), rk.load(f"rdispls{rk.rank}")
    recv_size = int(rk.load(f"recv_size{rk.rank}"))
    sc, rc = matrix[rk.rank, :], matrix[:, rk.rank]
    t = HCCL_TYPE[acl.FLOAT]
    sp, rp = rk.device(send, acl.FLOAT), rk.device(np.full(recv_size, SENTINEL), acl.FLOAT)
    arrays = [u64(a) for a in (sc, sd, rc, rd)]
    acl.check(rk.h.HcclAlltoAllV(sp, arrays[0][1], arrays[1][1], t, rp, arrays[2][1], arrays[3][1], t, rk.comm,
                                 rk.stream), "HcclAlltoAllV")
    packed = rk.load(f"packed{rk.rank}")
    pp, qp = rk.device(packed, acl.FLOAT16), rk.device(np.full(int(matrix[:, rk.rank].sum()), SENTINEL),
                                                       acl.FLOAT16)
    m = u64(matrix.reshape(-1))
    acl.check(rk.h.HcclAlltoAllVC(pp, m[1], HCCL_TYPE[acl.FLOAT16], qp, HCCL_TYPE[acl.FLOAT16], rk.comm, rk.stream),
              "HcclAlltoAllVC")
    acl.check(rk.sync(), "aclrtSynchronizeStream")
    rk.save("v", rk.host(rp, recv_size, acl.FLOAT))
    rk.save("vc", rk.host(qp, int(matrix[:, rk.rank].sum()), acl.FLOAT16))


def case_disagree(rk):
    """Rank 1 expects one element more from rank 0 than rank 0 sends: both synchronizations fail, and the
    communicator refuses what comes next (an AllReduce)."""
    t = HCCL_TYPE[acl.FLOAT]
    sc = np.array([2, 2], np.uint64)
    rc = np.array([3, 2], np.uint64) if rk.rank == 1 else sc.copy()
    d = u64([0, 4])
    sp, rp = rk.device(np.ones(8), acl.FLOAT), rk.device(np.zeros(8), acl.FLOAT)
    acl.check(rk.h.HcclAlltoAllV(sp, sc.ctypes.data, d[1], t, rp, rc.ctypes.data, d[1], t, rk.comm, rk.stream),
              "HcclAlltoAllV")
    assert rk.sync() == ranks.AICORE_EXCEPTION
    rk.save("message", np.array(rk.error_message()))
    acl.check(rk.h.HcclAllReduce(sp, rp, 8, t, 0, rk.comm, rk.stream), "HcclAllReduce")
    assert rk.sync() == ranks.AICORE_EXCEPTION


def case_mixed(rk):
    """Rank 0 runs an all-to-all where rank 1 runs an AllReduce: both fail, neither hangs."""
    t = HCCL_TYPE[acl.FLOAT]
    sp, rp = rk.device(np.ones(8), acl.FLOAT), rk.device(np.zeros(8), acl.FLOAT)
    if rk.rank == 0:
        acl.check(rk.h.HcclAlltoAll(sp, 4, t, rp, 4, t, rk.comm, rk.stream), "HcclAlltoAll")
    else:
        acl.check(rk.h.HcclAllReduce(sp, rp, 8, t, 0, rk.comm, rk.stream), "HcclAllReduce")
    assert rk.sync() == ranks.AICORE_EXCEPTION
    assert "different collectives" in rk.error_message(), rk.error_message()


# ----------------------------------------------------------------------------------------------------- tests


def write(workdir, name, array):
    np.save(workdir / f"{name}.npy", np.asarray(array))


def test_alltoall_every_dtype_two_processes(tmp_path):
    n, count = 2, 37
    rng = np.random.default_rng(41)
    sends = {(r, name): values(rng, n * count, dt) for r in range(n) for name, dt in DTYPES.items()}
    for (r, name), v in sends.items():
        write(tmp_path, f"send{r}_{name}", v)
    ranks.spawn(__file__, "case_alltoall", n, tmp_path)
    for me in range(n):
        for name in DTYPES:
            want = np.concatenate([sends[(j, name)][me * count:(me + 1) * count] for j in range(n)])
            got = load(tmp_path, me, name)
            assert got.tobytes() == want.astype(got.dtype).tobytes(), (me, name)


def layout(rng, n, matrix):
    """Per rank: send buffer, send displacements (blocks in reverse rank order, gaps of 3), receive displacements
    (rank order, gaps of 2) and receive size."""
    out = []
    for r in range(n):
        sd, at = np.zeros(n, np.uint64), 1
        for j in reversed(range(n)):
            sd[j], at = at, at + int(matrix[r, j]) + 3
        send = values(rng, at, acl.FLOAT)
        rd, at = np.zeros(n, np.uint64), 2
        for q in range(n):
            rd[q], at = at, at + int(matrix[q, r]) + 2
        out.append((send, sd, rd, at))
    return out


def test_alltoallv_and_vc_three_processes_in_chunks(tmp_path):
    n = 3
    rng = np.random.default_rng(7)
    matrix = rng.integers(0, 60, (n, n)).astype(np.uint64)
    matrix[0, 2] = matrix[2, 2] = 0  # empty pairs, one of them a rank with itself
    matrix[1, 0] = 59  # 256-byte slots: 21 fp32 elements per pair and round, so 3 rounds
    write(tmp_path, "matrix", matrix)
    plans = layout(rng, n, matrix)
    packed = [values(rng, int(matrix[r, :].sum()), acl.FLOAT16) for r in range(n)]
    for r, (send, sd, rd, size) in enumerate(plans):
        for name, v in (("send", send), ("sdispls", sd), ("rdispls", rd), ("recv_size", size), ("packed", packed[r])):
            write(tmp_path, f"{name}{r}", v)
    ranks.spawn(__file__, "case_alltoallv", n, tmp_path, env={"FAKE_HCCL_SLOT_BYTES": "256"})
    for me in range(n):
        want = np.full(plans[me][3], SENTINEL, np.float32)  # what no block covers keeps its old value
        for q in range(n):
            c, src, dst = int(matrix[q, me]), int(plans[q][1][me]), int(plans[me][2][q])
            want[dst:dst + c] = plans[q][0][src:src + c]
        assert load(tmp_path, me, "v").tobytes() == want.tobytes(), me
        starts = [np.concatenate([[0], np.cumsum(matrix[q, :])]).astype(int) for q in range(n)]
        want_vc = np.concatenate([packed[q][starts[q][me]:starts[q][me + 1]] for q in range(n)])
        assert load(tmp_path, me, "vc").tobytes() == want_vc.tobytes(), me


def test_alltoall_ranks_as_threads_of_one_process(tmp_path):
    n, count = 2, 11
    rng = np.random.default_rng(3)
    sends = [values(rng, n * count, acl.FLOAT) for _ in range(n)]
    got = {}

    def body(rk):
        t = HCCL_TYPE[acl.FLOAT]
        sp, rp = rk.device(sends[rk.rank], acl.FLOAT), rk.device(np.zeros(n * count), acl.FLOAT)
        acl.check(rk.h.HcclAlltoAll(sp, count, t, rp, count, t, rk.comm, rk.stream), "HcclAlltoAll")
        acl.check(rk.sync(), "aclrtSynchronizeStream")
        got[rk.rank] = rk.host(rp, n * count, acl.FLOAT)

    ranks.threads(body, n, tmp_path)
    for me in range(n):
        want = np.concatenate([sends[j][me * count:(me + 1) * count] for j in range(n)])
        np.testing.assert_array_equal(got[me], want)


def test_disagreeing_counts_fail_every_rank(tmp_path):
    ranks.spawn(__file__, "case_disagree", 2, tmp_path)
    assert "expects 3 elements from rank 0, which sends 2" in str(load(tmp_path, 1, "message"))


def test_alltoall_against_another_collective_fails_both(tmp_path):
    ranks.spawn(__file__, "case_mixed", 2, tmp_path)


def test_argument_errors(tmp_path):
    def body(rk):
        h, c, s, t = rk.h, rk.comm, rk.stream, HCCL_TYPE[acl.FLOAT]
        a, b = rk.device(np.zeros(8), acl.FLOAT), rk.device(np.zeros(8), acl.FLOAT)
        one, zero = u64([4]), u64([0])
        # AlltoAll: both counts 0 succeed before anything is looked at; then HCCL's checks in its order.
        assert h.HcclAlltoAll(None, 0, t, None, 0, t, None, None) == 0
        assert h.HcclAlltoAll(a, 4, t, b, 4, t, None, s) == E_PTR
        assert h.HcclAlltoAll(None, 4, t, b, 4, t, c, s) == E_PTR
        assert h.HcclAlltoAll(a, 4, t, b, 5, t, c, s) == E_PARA
        assert h.HcclAlltoAll(a, 4, t, b, 4, HCCL_TYPE[acl.FLOAT16], c, s) == E_PARA
        assert h.HcclAlltoAll(a, 4, t, a, 4, t, c, s) == E_PARA
        assert h.HcclAlltoAll(a, 4, t, b, 4, t, c, None) == E_PTR
        assert h.HcclAlltoAll(a, 4, INT128, b, 4, INT128, c, s) == E_NOT_SUPPORT
        assert h.HcclAlltoAll(a, 4, 42, b, 4, 42, c, s) == E_PARA
        assert h.HcclAlltoAll(a, 4, t, b, 4, t, ctypes.addressof(ctypes.c_int(0)), s) == E_PARA  # not a comm
        # AlltoAllV: every array is required; a buffer only when its counts are not all 0; no in-place call.
        assert h.HcclAlltoAllV(a, None, zero[1], t, b, one[1], zero[1], t, c, s) == E_PTR
        assert h.HcclAlltoAllV(a, one[1], zero[1], t, b, one[1], None, t, c, s) == E_PTR
        assert h.HcclAlltoAllV(a, one[1], zero[1], t, a, one[1], zero[1], t, c, s) == E_PARA
        assert h.HcclAlltoAllV(None, one[1], zero[1], t, b, one[1], zero[1], t, c, s) == E_PTR
        assert h.HcclAlltoAllV(a, one[1], zero[1], t, None, one[1], zero[1], t, c, s) == E_PTR
        assert h.HcclAlltoAllV(None, zero[1], zero[1], t, None, zero[1], zero[1], t, c, s) == 0
        huge = u64([2**63])
        assert h.HcclAlltoAllV(a, one[1], huge[1], t, b, one[1], zero[1], t, c, s) == E_PARA
        # sendType is not looked at (real HCCL moves recvType's elements).
        assert h.HcclAlltoAllV(a, one[1], zero[1], 99, b, one[1], zero[1], t, c, s) == 0
        # AlltoAllVC
        assert h.HcclAlltoAllVC(a, None, t, b, t, c, s) == E_PTR
        assert h.HcclAlltoAllVC(a, one[1], t, a, t, c, s) == E_PARA
        assert h.HcclAlltoAllVC(a, one[1], t, b, INT128, c, s) == E_NOT_SUPPORT
        acl.check(rk.sync(), "aclrtSynchronizeStream")
        # With one rank, an all-to-all is a copy.
        src = rk.device(np.arange(8), acl.FLOAT)
        acl.check(h.HcclAlltoAll(src, 8, t, b, 8, t, c, s), "HcclAlltoAll")
        acl.check(rk.sync(), "aclrtSynchronizeStream")
        assert rk.host(b, 8, acl.FLOAT).tolist() == list(range(8))

    ranks.threads(body, 1, tmp_path)


if __name__ == "__main__":
    ranks.child_main(globals())
