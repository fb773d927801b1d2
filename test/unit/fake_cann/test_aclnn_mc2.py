"""The stand-in's MC2 ops (a matmul fused with a collective): MatmulAllReduce, AllGatherMatmul, MatmulReduceScatter.

Two ranks run as two processes with a root-info communicator whose name (HcclGetCommName) is the ops' `group`. Each
rank's operands are written by the test; the results are compared with numpy's unfused computation over the ranks'
operands: each rank's matmul rounded to the dtype (what the kernel hands to the collective), then the collective,
rounded once more (fp16/bf16: within one rounding). The argument errors are checked on one rank, a thread of pytest.
"""
import ctypes

import numpy as np
import pytest

import ranks
from ranks import load
from test_aclnn_ops import BF16, FLOAT, FLOAT16, INVALID, NULLPTR, as_dtype, close, ident
from tiny_npu import acl

RUNTIME_ERROR = 361001  # ACLNN_ERR_RUNTIME_ERROR: nnopbase's answer when HCCL does not know the group
DTYPES = {"fp16": FLOAT16, "bf16": BF16}
N_RANKS, M, K, N = 2, 4, 256, 8  # AllGatherMatmul and MatmulReduceScatter want k in [256, 65535)


def cstr(text):
    buf = ctypes.create_string_buffer(text)
    return buf, ctypes.addressof(buf)


def operands(rng, dtype, x1_shape):
    """x1, x2 and bias of one rank, as the dtype holds them."""
    x1 = rng.uniform(-1, 1, x1_shape)
    x2 = rng.uniform(-1, 1, (x1_shape[-1], N))
    bias = rng.uniform(-1, 1, (N,))
    return [as_dtype(v, dtype) for v in (x1, x2, bias)]


# --------------------------------------------------------------------------------------------- rank bodies


def case_mc2(rk):
    """The three ops in each dtype, then a plain HcclAllReduce on the same communicator (the order of collectives
    holds across fused and plain ones)."""
    name_buf, group = cstr(rk.comm_name())
    sum_buf, reduce_op = cstr(b"sum")
    outs = []
    for dname, dt in DTYPES.items():
        x1, x2, bias = (rk.load(f"ar_{dname}_{v}{rk.rank}") for v in ("x1", "x2", "bias"))
        t1, _ = rk.tensor(x1, dt)
        t2, _ = rk.tensor(x2, dt, transposed=True)  # x2 may be transposed
        tb, _ = rk.tensor(bias, dt)
        out, out_p = rk.tensor(np.zeros(x1.shape[:-1] + (N,)), dt)
        acl.check(rk.run("MatmulAllReduce", t1, t2, tb, group, reduce_op, 0, 1, out), "MatmulAllReduce")
        outs.append((f"ar_{dname}", out_p, x1.size // K * N, dt))

        x1, x2 = rk.load(f"ag_{dname}_x1{rk.rank}"), rk.load(f"ag_{dname}_x2{rk.rank}")
        t1, _ = rk.tensor(x1, dt)
        t2, _ = rk.tensor(x2, dt)
        out, out_p = rk.tensor(np.zeros((M * rk.n, N)), dt)
        gathered, g_p = rk.tensor(np.zeros((M * rk.n, K)), dt)
        acl.check(rk.run("AllGatherMatmul", t1, t2, None, group, 0, 0, 1, out, gathered), "AllGatherMatmul")
        outs += [(f"ag_{dname}", out_p, M * rk.n * N, dt), (f"ag_gather_{dname}", g_p, M * rk.n * K, dt)]

        x1, x2, bias = (rk.load(f"rs_{dname}_{v}{rk.rank}") for v in ("x1", "x2", "bias"))
        t1, _ = rk.tensor(x1, dt)
        t2, _ = rk.tensor(x2, dt)
        tb, _ = rk.tensor(bias, dt)
        out, out_p = rk.tensor(np.zeros((M // rk.n, N)), dt)
        acl.check(rk.run("MatmulReduceScatter", t1, t2, tb, group, reduce_op, 0, 1, out), "MatmulReduceScatter")
        outs.append((f"rs_{dname}", out_p, M // rk.n * N, dt))
    plain = rk.device(np.full(4, rk.rank + 1.0), FLOAT)
    acl.check(rk.h.HcclAllReduce(plain, plain, 4, ranks.HCCL_TYPE[FLOAT], 0, rk.comm, rk.stream), "HcclAllReduce")
    acl.check(rk.sync(), "aclrtSynchronizeStream")
    for name, ptr, count, dt in outs:
        rk.save(name, rk.host(ptr, count, dt))
    rk.save("plain", rk.host(plain, 4, FLOAT))


# ----------------------------------------------------------------------------------------------------- tests


def test_mc2_ops_two_processes(tmp_path):
    rng = np.random.default_rng(2)
    data = {}
    for dname, dt in DTYPES.items():
        for r in range(N_RANKS):
            data[("ar", dname, r)] = operands(rng, dt, (3, 2, K))  # x1 [b, s, k]
            data[("ag", dname, r)] = operands(rng, dt, (M, K))[:2]
            data[("rs", dname, r)] = operands(rng, dt, (M, K))
            for op in ("ar", "ag", "rs"):
                for name, v in zip(("x1", "x2", "bias"), data[(op, dname, r)]):
                    np.save(tmp_path / f"{op}_{dname}_{name}{r}.npy", v)
    ranks.spawn(__file__, "case_mc2", N_RANKS, tmp_path)
    for dname, dt in DTYPES.items():
        # Each rank's x1 @ x2 + bias rounded to the dtype, summed over the ranks.
        reduced = {op: sum(as_dtype(x1 @ x2 + bias, dt) for x1, x2, bias in (data[(op, dname, r)] for r in range(N_RANKS)))
                   for op in ("ar", "rs")}
        gathered = np.concatenate([data[("ag", dname, r)][0] for r in range(N_RANKS)])
        for r in range(N_RANKS):
            close(load(tmp_path, r, f"ar_{dname}"), as_dtype(reduced["ar"], dt).reshape(-1), dt)
            rows = reduced["rs"][r * M // N_RANKS:(r + 1) * M // N_RANKS]
            close(load(tmp_path, r, f"rs_{dname}"), as_dtype(rows, dt).reshape(-1), dt)
            np.testing.assert_array_equal(load(tmp_path, r, f"ag_gather_{dname}"), gathered.reshape(-1))
            close(load(tmp_path, r, f"ag_{dname}"), as_dtype(gathered @ data[("ag", dname, r)][1], dt).reshape(-1), dt,
                  scale=2)
    for r in range(N_RANKS):
        np.testing.assert_array_equal(load(tmp_path, r, "plain"), np.full(4, 3.0))


@pytest.mark.parametrize("dtype", [FLOAT16, BF16], ids=ident)
def test_mc2_one_rank_and_argument_errors(tmp_path, dtype):
    def body(rk):
        name_buf, group = cstr(rk.comm_name())
        other_buf, unknown = cstr(b"no-such-group")
        sum_buf, reduce_op = cstr(b"sum")
        max_buf, reduce_max = cstr(b"max")
        x1, x2, bias = operands(np.random.default_rng(5), dtype, (M, K))
        t1, t2, tb = rk.tensor(x1, dtype)[0], rk.tensor(x2, dtype)[0], rk.tensor(bias, dtype)[0]
        out, out_p = rk.tensor(np.zeros((M, N)), dtype)
        run = rk.run
        assert run("MatmulAllReduce", t1, t2, tb, None, reduce_op, 0, 1, out) == NULLPTR
        assert run("MatmulAllReduce", t1, t2, tb, unknown, reduce_op, 0, 1, out) == RUNTIME_ERROR
        assert run("MatmulAllReduce", t1, t2, tb, group, reduce_max, 0, 1, out) == INVALID
        assert run("MatmulAllReduce", t1, t2, tb, group, reduce_op, 0, 0, out) == INVALID  # streamMode
        assert run("MatmulAllReduce", t1, t2, tb, group, reduce_op, 0, 1, rk.tensor(np.zeros((M, N + 1)), dtype)[0]) \
            == INVALID
        f32 = rk.tensor(np.zeros((M, K)), FLOAT)[0]
        assert run("MatmulAllReduce", f32, t2, tb, group, reduce_op, 0, 1, out) == INVALID  # fp16/bf16 only
        t1_t = rk.tensor(np.zeros((M, K)), dtype, transposed=True)[0]
        assert run("AllGatherMatmul", t1_t, t2, None, group, 0, 0, 1, out, None) == INVALID  # x1 not transposed
        assert run("AllGatherMatmul", t1, t2, None, group, 1, 0, 1, out, None) == INVALID  # gatherIndex
        small = rk.tensor(np.zeros((M, 128)), dtype)[0]
        x2_small = rk.tensor(np.zeros((128, N)), dtype)[0]
        assert run("MatmulReduceScatter", small, x2_small, None, group, reduce_op, 0, 1, out) == INVALID  # k < 256
        # One rank: the collective is the identity; gatherOut may be absent.
        acl.check(run("MatmulAllReduce", t1, t2, tb, group, reduce_op, 0, 1, out), "MatmulAllReduce")
        acl.check(rk.sync(), "aclrtSynchronizeStream")
        close(rk.host(out_p, M * N, dtype), as_dtype(x1 @ x2 + bias, dtype).reshape(-1), dtype)
        acl.check(run("AllGatherMatmul", t1, t2, None, group, 0, 0, 1, out, None), "AllGatherMatmul")
        acl.check(rk.sync(), "aclrtSynchronizeStream")
        close(rk.host(out_p, M * N, dtype), as_dtype(x1 @ x2, dtype).reshape(-1), dtype)

    ranks.threads(body, 1, tmp_path)


if __name__ == "__main__":
    ranks.child_main(globals())
