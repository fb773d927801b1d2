#!/usr/bin/env python3
"""Launches every aclnn op of the CANN stand-in through tiny_npu (fp32, fp16, bf16; all twice), with
the argument forms a framework uses: strided and offset views, broadcasting, tensor lists, optional
tensors present and absent, output masks, every reduction, amsgrad/maximize, padding and frequency
scaling. Run under the shim it gives a dump in which every op type can be recomputed (npu_refs).

    python3 ops_workload.py [--dtypes fp32,fp16,bf16] [--moe-mc2]

--moe-mc2 adds the MoE and MC2 ops (issue 41), which msprobe-inspect replay has no CPU reference for yet: the
shim's tests launch them, replay's leave them out.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))

import tiny_npu  # noqa: E402
from tiny_npu import ops  # noqa: E402
from tiny_npu.tensor import Tensor  # noqa: E402

F32 = tiny_npu.float32


def foreach_mul_scalar_list(xs, scalars, outs):
    """aclnnForeachMulScalarList, out[i] = xs[i] * scalars[i], with a scalar list of Python scalars as torch_npu
    passes them (int64, double, bool). tiny_npu binds no aclScalarList op: the handles are made here with its own
    helpers, and the kernel goes through its launch queue as every op does."""
    import ctypes
    import types
    from tiny_npu import acl
    from tiny_npu import runtime
    rt = runtime.current()
    n = rt.libs.nnopbase
    n.aclCreateScalarList.argtypes, n.aclCreateScalarList.restype = [ctypes.c_void_p, ctypes.c_uint64], ctypes.c_void_p
    op = acl.AclnnOp(rt.libs, "ForeachMulScalarList", "TTT")

    def tensor_list(ts):
        hs = [ops._create_tensor(rt, x) for x in ts]
        return n.aclCreateTensorList((ctypes.c_void_p * len(hs))(*hs), len(hs))

    values = [ops._scalar_value(v) for v in scalars]
    members = [n.aclCreateScalar(ctypes.byref(v), dt) for v, dt in values]
    sl = n.aclCreateScalarList((ctypes.c_void_p * len(members))(*members), len(members))
    xl, ol = tensor_list(xs), tensor_list(outs)
    ws, ex = op.prepare(xl, sl, ol)
    releases = [(rt.destroy_fn["tensor_list"], xl), (rt.destroy_fn["tensor_list"], ol),
                (ops._addr(n.aclDestroyScalarList), sl)]  # each list destroys its members
    ops._launch(rt, types.SimpleNamespace(name=op.name, phase2=op.phase2_address()), ws, ex, releases)


def raw_op(name, letters, *args):
    """aclnn<name> with a parameter list tiny_npu does not bind, by letter: T a tensor or None, L a list of tensors or
    None, I a list of ints (aclIntArray) or None, s a str, l an int64, b a bool. As foreach_mul_scalar_list: the handles are made with tiny_npu's helpers and
    the kernel goes through its launch queue, as every op does."""
    import ctypes
    import types
    from tiny_npu import acl
    from tiny_npu import runtime
    rt = runtime.current()
    n = rt.libs.nnopbase
    values, releases, strings = [], [], []
    for kind, v in zip(letters, args):
        if kind in "TL" and v is None:
            values.append(None)
        elif kind == "T":
            values.append(ops._create_tensor(rt, v))
            releases.append((rt.destroy_fn["tensor"], values[-1]))
        elif kind == "L":
            hs = [ops._create_tensor(rt, x) for x in v]
            values.append(n.aclCreateTensorList((ctypes.c_void_p * max(len(hs), 1))(*hs), len(hs)))
            releases.append((rt.destroy_fn["tensor_list"], values[-1]))  # destroys its members
        elif kind == "I":
            values.append(None if v is None else n.aclCreateIntArray((ctypes.c_int64 * max(len(v), 1))(*v), len(v)))
            if v is not None:
                releases.append((rt.destroy_fn["int_array"], values[-1]))
        elif kind == "s":
            strings.append(ctypes.create_string_buffer(v.encode()))
            values.append(ctypes.addressof(strings[-1]))
        else:
            values.append(v)
    op = acl.AclnnOp(rt.libs, name, "".join({"T": "T", "L": "T", "I": "T", "s": "T", "l": "L", "b": "B"}[c]
                                            for c in letters))
    ws, ex = op.prepare(*values)
    ops._launch(rt, types.SimpleNamespace(name=op.name, phase2=op.phase2_address()), ws, ex, releases)


def named_comm(name):
    """A one-rank communicator named `name` (HcclCommInitRootInfoConfig): the MC2 ops' group, the same in every run."""
    import ctypes
    from tiny_npu import distributed, runtime
    h = runtime.current().libs.hccl
    h.HcclCommInitRootInfoConfig.argtypes = [ctypes.c_uint32, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p,
                                             ctypes.c_void_p]
    info, comm, config = (ctypes.c_char * 4108)(), ctypes.c_void_p(), distributed.comm_config(name)
    assert h.HcclGetRootInfo(info) == 0
    assert h.HcclCommInitRootInfoConfig(1, info, 0, ctypes.byref(config), ctypes.byref(comm)) == 0
    return comm.value


def moe_and_mc2(dt, t, group):
    """The MoE ops (gating, routing, grouped matmul, combine and their grads) and, in fp16/bf16, the MC2 ops on a
    one-rank communicator (issue 41)."""
    from tiny_npu import acl
    i32 = acl.INT32
    n_tok, h, experts, k = 6, 4, 3, 2
    empty = Tensor.empty
    logits = t((n_tok, experts), dt)
    probs, idx, rows = empty((n_tok, k), dt), empty((n_tok, k), i32), empty((n_tok, k), i32)
    raw_op("MoeGatingTopKSoftmax", "TTlTTT", logits, None, k, probs, idx, rows)
    finished = Tensor.from_numpy(np.array([False, True, False, False, True, False]))
    raw_op("MoeGatingTopKSoftmaxV2", "TTllbTTT", logits, finished, k, 0, True, empty((n_tok, k), dt),
           empty((n_tok, k), i32), empty((n_tok, experts), F32))
    raw_op("MoeGatingTopKSoftmaxV2", "TTllbTTT", t((2, 3, experts), dt), None, k, 1, False, empty((2, 3, k), dt),
           empty((2, 3, k), i32), None)
    x = t((n_tok, h), dt)
    ex1, er1 = empty((n_tok * k, h), dt), empty((n_tok * k,), i32)
    raw_op("MoeInitRouting", "TTTlTTT", x, rows, idx, n_tok, ex1, er1, empty((n_tok * k,), i32))
    rows3 = Tensor.from_numpy(np.arange(3 * k, dtype=np.int32).reshape(k, 3).T.copy())  # gating's rowIdx for 3 rows
    raw_op("MoeInitRouting", "TTTlTTT", x[::2], rows3, idx[::2], 2, empty((2 * k, h), dt), empty((3 * k,), i32),
           empty((3 * k,), i32))
    ex, er, cum = empty((n_tok * k, h), dt), empty((n_tok * k,), i32), empty((experts,), i32)
    raw_op("MoeInitRoutingV2", "TTlllllbTTTT", x, idx, 0, 0, experts, 0, 1, False, ex, er, cum, None)
    exd, erd = empty((experts, 2, h), dt), empty((n_tok * k,), i32)
    raw_op("MoeInitRoutingV2", "TTlllllbTTTT", x, idx, 0, 2, experts, 1, 0, True, exd, erd, None, empty((experts,), i32))
    # V3 (npu_moe_init_routing_v2): every row written, as recomputation needs (full expert range, activeNum 0).
    v3 = "TTTTlllllblIlTTTT"
    raw_op("MoeInitRoutingV3", v3, x, idx, t((n_tok,), F32, 0.0, 1.0), None, 0, 0, experts, 0, 0, True, -1, None, 0,
           empty((n_tok * k, h), dt), empty((n_tok * k,), i32), empty((experts,), acl.INT64), empty((n_tok * k,), F32))
    raw_op("MoeInitRoutingV3", v3, x, idx, None, None, 0, 0, experts, 0, 2, True, -1, [0, experts], 1,
           empty((n_tok * k, h), dt), empty((n_tok * k,), i32), empty((experts, 2), acl.INT64), None)
    raw_op("MoeInitRoutingV2Grad", "TTlllT", t((n_tok * k, h), dt), er, k, 0, 0, empty((n_tok, h), dt))
    raw_op("MoeInitRoutingV2Grad", "TTlllT", t((experts, 2, h), dt), erd, k, 1, 0, empty((n_tok, h), dt))
    raw_op("MoeFinalizeRouting", "TTTTTTTT", ex1, t((n_tok, h), dt), None, t((experts, h), dt), t((n_tok, k), dt), er1,
           idx, empty((n_tok, h), dt))
    raw_op("MoeFinalizeRoutingV2", "TTTTTTTlT", ex, er, t((n_tok, h), dt), t((n_tok, h), dt), t((experts, h), dt),
           t((n_tok, k), dt), idx, 2, empty((n_tok, h), dt))
    raw_op("MoeFinalizeRoutingV2", "TTTTTTTlT", exd, erd, None, None, None, t((n_tok, k), dt), None, 3,
           empty((n_tok, h), dt))
    raw_op("MoeFinalizeRoutingV2Grad", "TTTTTTllllTT", t((n_tok, h), dt), er, ex, t((n_tok, k), dt), idx,
           t((experts, h), dt), 0, 0, 0, 0, empty((n_tok * k, h), dt), empty((n_tok, k), dt))
    # Grouped matmuls: rows grouped by expert (groupList the cumulative counts, INT64), weights transposed, K grouped.
    gl = Tensor.from_numpy(np.array([4, 9, 12], np.int64))
    w = t((experts, h, 5), dt)
    gmm_tail = [None] * 5
    for name in ("GroupedMatmulV4", "GroupedMatmulV5"):
        v5 = [None] if name.endswith("V5") else []
        letters = "LLLLLLLLTLLLllll" + ("T" if v5 else "") + "LLL"
        raw_op(name, letters, [ex], [w], [t((experts, 5), F32 if dt != tiny_npu.float16 else dt)], *gmm_tail, gl,
               None, None, None, 3, 0, 0, 0, *v5, [empty((n_tok * k, 5), dt)], None, None)
        raw_op(name, letters, [t((12, 5), dt)], [t((experts, 4, 5), dt).transpose(1, 2)], None, *gmm_tail, gl, None,
               None, None, 3, 0, 0, 0, *v5, [empty((12, 4), dt)], None, None)
        raw_op(name, letters, [ex.T], [t((12, 5), dt)], None, *gmm_tail, gl, None, None, None, 3, 2, 0, 0, *v5,
               [empty((experts, h, 5), dt)], None, None)
        raw_op(name, letters, [t((3, h), dt), t((2, h), dt)], [t((h, 5), dt), t((h, 5), dt)], None, *gmm_tail, None,
               None, None, None, 0, -1, 0, 0, *v5, [empty((3, 5), dt), empty((2, 5), dt)], None, None)
    if dt == F32:
        return
    # MC2 on one rank: the collective leaves each rank's result as it is (k >= 256 for the gather and the scatter).
    x1, x2, b = t((2, 3, 256), dt), t((256, 5), dt), t((5,), dt)
    raw_op("MatmulAllReduce", "TTTssllT", x1, x2, b, group, "sum", 0, 1, empty((2, 3, 5), dt))
    raw_op("AllGatherMatmul", "TTTslllTT", x1[0], t((5, 256), dt).T, None, group, 0, 0, 1, empty((3, 5), dt),
           empty((3, 256), dt))
    raw_op("MatmulReduceScatter", "TTTssllT", x1[1], x2, b, group, "sum", 0, 1, empty((3, 5), dt))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtypes", default="fp32,fp16,bf16")
    ap.add_argument("--moe-mc2", action="store_true", help="also the MoE and MC2 ops (issue 41)")
    args = ap.parse_args()
    rt = tiny_npu.init(device=0)
    comm, group = (named_comm("ops_workload"), "ops_workload") if args.moe_mc2 else (None, None)
    rng = np.random.RandomState(7)
    keep = []  # inputs stay alive: the second pass gets new addresses (and new values) for the same ops

    def t(shape, dtype=F32, lo=-2.0, hi=2.0):
        keep.append(Tensor.from_numpy(rng.uniform(lo, hi, shape).astype(np.float32), dtype))
        return keep[-1]

    def idx(shape, high):
        keep.append(Tensor.from_numpy(rng.randint(0, high, size=shape).astype(np.int64)))
        return keep[-1]

    # Two passes: with TINY_NPU_EXECUTOR_CACHE=1 the second one reuses every executor of the first.
    for name in args.dtypes.split(",") * 2:
        dt = tiny_npu.DTYPES[name]
        x, y, row = t((4, 6), dt), t((4, 6), dt), t((6,), dt)
        wide = t((4, 12), dt)
        strided = wide[:, ::2]          # stride (12, 2)
        offset = t((6, 6), dt)[2:]      # offset 12, shape (4, 6)
        # Elementwise, broadcasting and tensor-scalar forms.
        ops.add(x, row, alpha=0.5)
        ops.add(strided, offset)
        ops.sub(x, y, alpha=2.0)
        ops.mul(offset, row)
        ops.div(x, t((4, 6), dt, 0.5, 2.0))
        ops.adds(x, 3.0, alpha=0.5)
        ops.muls(strided, -1.5)
        acc = t((4, 6), dt)
        ops.inplace_add(acc, row, alpha=0.25)
        ops.inplace_add(acc, y)  # twice on the same tensor: PRE of the second is POST of the first
        # Matrix products (transposed views, batch).
        ops.matmul(x, y.T)
        ops.mm(offset, t((6, 3), dt))
        ops.bmm(t((2, 3, 4), dt), t((2, 4, 5), dt))
        # Unary math and activations.
        for fn in (ops.relu, ops.gelu, ops.silu, ops.exp, ops.neg):
            fn(strided)
        pos = t((4, 6), dt, 0.1, 3.0)
        ops.log(pos)
        ops.sqrt(pos)
        ops.softmax(x, 0)
        ops.log_softmax(strided, -1)
        # Normalizations.
        x3 = t((2, 3, 6), dt)
        w6, b6 = t((6,), dt), t((6,), dt)
        out, mean, rstd = ops.layer_norm(x3, (6,), w6, b6, 1e-5)
        ops.layer_norm(x3, (3, 6), None, None, 1e-3)
        ops.rms_norm(x, row, 1e-6)
        g3 = t((2, 3, 6), dt)
        ops.layer_norm_backward(g3, x3, (6,), mean, rstd, w6, b6)
        ops.layer_norm_backward(g3, x3, (6,), mean, rstd, w6, b6, mask=(True, False, True))
        # Backward of activations and softmax.
        ops.gelu_backward(y, x)
        ops.silu_backward(y, strided)
        ops.relu_backward(y, x)
        sm = ops.softmax(x, -1)
        ops.softmax_backward(y, sm, -1)
        # Data movement.
        ops.cast(x, F32 if dt != F32 else tiny_npu.bfloat16)
        ops.cat([x, offset[1:3], strided], 0)
        foreach_mul_scalar_list([x, strided, x3], [2, 0.5, True], [t((4, 6), dt), t((4, 6), dt), t((2, 3, 6), dt)])
        ops.permute(x3, (2, 0, 1))
        dst = t((4, 6), dt)
        ops.inplace_copy(dst, row)  # broadcast source
        ops.inplace_copy(dst, strided)
        ops.inplace_zero(t((3, 5), dt))
        # Embedding and reductions.
        table = t((10, 6), dt)
        ids = idx((3, 4), 10)
        ops.embedding(table, ids)
        ops.embedding_dense_backward(t((3, 4, 6), dt), ids, 10)
        ops.embedding_dense_backward(t((3, 4, 6), dt), ids, 10, padding_idx=2, scale_grad_by_freq=True)
        ops.reduce_sum(x, (1,), keepdim=True)
        ops.reduce_sum(strided, (0, -1))
        ops.mean(x3, (0, 2))
        ops.amax(strided, (0, 1))  # every dim: one element out
        ops.amin(x3, (1,), keepdim=True)
        ops.aminmax_all(strided)
        ops.norm(x, 2.0, (0, 1))
        ops.norm(x3, 1.0, (2,), keepdim=True)
        ops.linalg_vector_norm(strided, 2.0, (-1,), dtype=F32)
        ops.foreach_norm([x, strided, offset], 2.0)  # out's format is each x's: tiny_npu's 0-d outs are ND
        ops.foreach_norm([offset, row], 1.0)
        for pred in (ops.is_finite, ops.is_pos_inf, ops.is_neg_inf):
            pred(strided)
        for red in (ops.REDUCTION_NONE, ops.REDUCTION_MEAN, ops.REDUCTION_SUM):
            loss = ops.mse_loss(x, y, red)
            ops.mse_loss_backward(t(loss.shape, dt) if red == ops.REDUCTION_NONE else t((), dt), x, y, red)
        if args.moe_mc2:
            moe_and_mc2(dt, t, group)

    # fp32 only: cube math types on matmul, and the optimizer (fp32 master weights as AdamW keeps them).
    if "fp32" in args.dtypes.split(","):
        a, b = t((5, 7)), t((7, 3))
        for cube in (1, 2, 3):
            ops.matmul(a, b, cube_math_type=cube)
        step = Tensor.from_numpy(np.array([3.0], np.float32))
        var, m, v, grad = t((4, 6)), t((4, 6), lo=-0.1, hi=0.1), t((4, 6), lo=0.0, hi=0.1), t((4, 6))
        ops.apply_adamw_v2(var, m, v, grad, step, 0.01, 0.9, 0.999, 0.01, 1e-8)
        ops.apply_adamw_v2(var, m, v, grad, step, 0.01, 0.8, 0.99, 0.1, 1e-6, maximize=True)
        max_v = t((4, 6), lo=0.0, hi=0.2)
        ops.apply_adamw_v2(var, m, v, grad, step, 0.02, 0.9, 0.999, 0.0, 1e-8, amsgrad=True, max_grad_norm=max_v)
    rt.synchronize()
    if rt.executor_cache is not None:
        print(f"executor cache: {rt.executor_cache.hits} hits, {rt.executor_cache.misses} misses", file=sys.stderr)
    tiny_npu.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
