#!/usr/bin/env python3
"""Launches every aclnn op of the CANN stand-in through tiny_npu (fp32, fp16, bf16; all twice), with
the argument forms a framework uses: strided and offset views, broadcasting, tensor lists, optional
tensors present and absent, output masks, every reduction, amsgrad/maximize, padding and frequency
scaling. Run under the shim it gives a dump in which every op type can be recomputed (npu_refs).

    python3 ops_workload.py [--dtypes fp32,fp16,bf16]
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtypes", default="fp32,fp16,bf16")
    args = ap.parse_args()
    rt = tiny_npu.init(device=0)
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
