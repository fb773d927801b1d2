"""The stand-in's MoE ops against numpy: gating (MoeGatingTopKSoftmax, V2), routing (MoeInitRouting, V2, V2Grad),
combine (MoeFinalizeRouting, V2, V2Grad) and GroupedMatmul (V4, V5), then a MoE layer's forward and backward chained
from them as torch_npu and MindSpeed run one, against a dense numpy MoE and its hand-derived gradients.

The references are test/python/npu_refs.py's (written from the ops' docs, ops-transformer moe/*/docs and
gmm/grouped_matmul/docs, not from the stand-in's code; the shim's tests recompute dumped kernels with them too) and,
for the layer, a dense MoE written here. Devices, tensors and tolerances are test_aclnn_ops.py's (one rounding for
fp16/bf16).
"""
import ctypes

import numpy as np
import pytest
from npu_refs import REFS

from test_aclnn_ops import BF16, BOOL, FLOAT, FLOAT16, FP, INT32, INT64, INVALID, NULLPTR, Handle, as_dtype, close, \
    dev, device, ident  # noqa: F401 (dev and device are fixtures)
from tiny_npu import acl

TILING = 561002  # ACLNN_ERR_INNER_TILING_ERROR: what CANN's generated ops say of shapes and attribute values
rng = np.random.default_rng(4141)


def distinct(shape, lo=-3.0, hi=3.0):
    """Random values without ties, so that a top-k has one answer in every dtype."""
    n = int(np.prod(shape))
    return (rng.permutation(n) * (hi - lo) / n + lo).reshape(shape)


def ref(op, *args):
    """npu_refs' outputs of `op` for these inputs (tensors as float64 or int arrays, in declaration order)."""
    return REFS[op]([np.asarray(a, np.float64) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a
                     for a in args], None)


# ------------------------------------------------------------------------------------------------------ gating


@pytest.mark.parametrize("shape", [(5, 8), (2, 3, 6)])
@pytest.mark.parametrize("dtype", FP, ids=ident)
def test_gating_top_k_softmax(dev, dtype, shape):
    k = 3
    x = dev.tensor(distinct(shape), dtype, "transposed")
    lead = shape[:-1]
    finished = rng.integers(0, 2, lead).astype(bool)
    y, idx, row = dev.empty(lead + (k,), dtype), dev.empty(lead + (k,), INT32), dev.empty(lead + (k,), INT32)
    dev.run("MoeGatingTopKSoftmax", x, dev.tensor(finished, BOOL), k, y, idx, row)
    want_y, want_idx, want_row = ref("MoeGatingTopKSoftmax", x.host, finished, k)
    close(y.read(), as_dtype(want_y, dtype), dtype)
    np.testing.assert_array_equal(idx.read(), want_idx)
    np.testing.assert_array_equal(row.read(), want_row)


def test_gating_argument_errors(dev):
    x, y, i = dev.tensor(distinct((4, 6)), FLOAT), dev.empty((4, 2), FLOAT), dev.empty((4, 2), INT32)
    assert dev.phase1("MoeGatingTopKSoftmax", None, None, 2, y, i, i) == NULLPTR
    assert dev.phase1("MoeGatingTopKSoftmax", x, None, 2, y, dev.empty((4, 2), INT64), i) == INVALID
    assert dev.phase1("MoeGatingTopKSoftmax", x, None, 2, dev.empty((4, 2), FLOAT16), i, i) == INVALID
    assert dev.phase1("MoeGatingTopKSoftmax", x, None, 0, y, i, i) == TILING
    assert dev.phase1("MoeGatingTopKSoftmax", x, None, 7, y, i, i) == TILING
    assert dev.phase1("MoeGatingTopKSoftmax", x, None, 3, y, i, i) == TILING  # outputs are [4, 2]
    assert dev.phase1("MoeGatingTopKSoftmax", x, dev.tensor(np.zeros(3, bool), BOOL), 2, y, i, i) == TILING
    assert dev.phase1("MoeGatingTopKSoftmax", dev.tensor(np.zeros(6), FLOAT), None, 2, y, i, i) == TILING
    assert dev.phase1("MoeGatingTopKSoftmaxV2", x, None, 2, 2, False, y, i, None) == TILING  # renorm 2
    assert dev.phase1("MoeGatingTopKSoftmaxV2", x, None, 2, 0, True, y, i, dev.empty((4, 6), FLOAT16)) == TILING


@pytest.mark.parametrize("renorm", [0, 1])
@pytest.mark.parametrize("dtype", FP, ids=ident)
def test_gating_top_k_softmax_v2(dev, dtype, renorm):
    shape, k = (2, 3, 7), 4
    x = dev.tensor(distinct(shape), dtype, "offset")
    finished = np.zeros(shape[:-1], bool)
    finished[1, 2] = True
    y, idx = dev.empty((2, 3, k), dtype), dev.empty((2, 3, k), INT32)
    soft = dev.empty(shape, FLOAT)
    dev.run("MoeGatingTopKSoftmaxV2", x, dev.tensor(finished, BOOL), k, renorm, True, y, idx, soft)
    want_y, want_idx, want_soft = ref("MoeGatingTopKSoftmaxV2", x.host, finished, k, renorm, True)
    if renorm == 0:
        close(soft.read(), as_dtype(want_soft, FLOAT), FLOAT)
    else:
        assert want_soft is None and np.isnan(soft.read()).all()  # renorm 1 never writes the softmax
    close(y.read(), as_dtype(want_y, dtype), dtype)
    np.testing.assert_array_equal(idx.read(), want_idx)


# ----------------------------------------------------------------------------------------------------- routing


@pytest.mark.parametrize("dtype", FP, ids=ident)
def test_init_routing(dev, dtype):
    n, k, h, experts, active = 6, 3, 5, 4, 4
    expert_idx = rng.integers(0, experts, (n, k))
    row_idx = np.arange(n * k).reshape(k, n).T  # what MoeGatingTopKSoftmax's rowIdxOut holds
    x = dev.tensor(rng.uniform(-2, 2, (n, h)), dtype, "strided")
    ex, er, ee = dev.empty((active * k, h), dtype), dev.empty((n * k,), INT32), dev.empty((n * k,), INT32)
    dev.run("MoeInitRouting", x, dev.tensor(row_idx, INT32), dev.tensor(expert_idx, INT32), active, ex, er, ee)
    want_x, want_rows, want_experts = ref("MoeInitRouting", x.host, row_idx, expert_idx, active)
    np.testing.assert_array_equal(ex.read(), want_x)  # rows are copied, never rounded
    np.testing.assert_array_equal(er.read(), want_rows)
    np.testing.assert_array_equal(ee.read(), want_experts)
    assert dev.phase1("MoeInitRouting", x, dev.tensor(row_idx, INT32), dev.tensor(expert_idx, INT32), -1, ex, er,
                      ee) == TILING
    assert dev.phase1("MoeInitRouting", x, dev.tensor(row_idx, INT32), dev.tensor(expert_idx, INT32), active + 1, ex,
                      er, ee) == TILING


@pytest.mark.parametrize("mode", ["dropless", "active", "drop_pad"])
@pytest.mark.parametrize("dtype", FP, ids=ident)
def test_init_routing_v2_and_grad(dev, dtype, mode):
    n, k, h, experts = 7, 2, 4, 5
    expert_idx = rng.integers(0, experts, (n, k))
    expert_idx[:3, 0] = 1  # expert 1 gets more tokens than the capacity
    active, capacity = {"dropless": (0, 0), "active": (9, 0), "drop_pad": (0, 2)}[mode]
    x = dev.tensor(rng.uniform(-2, 2, (n, h)), dtype)
    flag = 1 if mode == "dropless" else 2  # cumulative sums, or counts
    want_x, want_rows, want_counts, want_before = ref("MoeInitRoutingV2", x.host, expert_idx, active, capacity,
                                                      experts, int(capacity > 0), flag, True)
    ex, er = dev.empty(want_x.shape, dtype), dev.empty((n * k,), INT32)
    count_out, before_out = dev.empty((experts,), INT32), dev.empty((experts,), INT32)
    dev.run("MoeInitRoutingV2", x, dev.tensor(expert_idx, INT32), active, capacity, experts, int(capacity > 0), flag,
            True, ex, er, count_out, before_out)
    np.testing.assert_array_equal(ex.read(), want_x)
    np.testing.assert_array_equal(er.read(), want_rows)
    if capacity == 0:
        np.testing.assert_array_equal(count_out.read(), want_counts)
        if mode == "dropless":  # the cumulative sums end at every position
            assert want_counts[-1] == n * k
    else:
        np.testing.assert_array_equal(before_out.read(), want_before)
        assert want_before.sum() == n * k and want_before[1] > capacity  # expert 1 overflowed
    # Backward: every token's gradient is the sum of the rows it was copied to.
    g, gx = dev.tensor(rng.uniform(-1, 1, want_x.shape), dtype), dev.empty((n, h), dtype)
    dev.run("MoeInitRoutingV2Grad", g, er, k, int(capacity > 0), active, gx)
    (want,) = ref("MoeInitRoutingV2Grad", g.host, want_rows, k, int(capacity > 0), active)
    close(gx.read(), as_dtype(want, dtype), dtype, scale=2)


def written(got, want):
    """Where the reference knows the value (not NaN: what the kernel writes), the device has it."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    known = ~np.isnan(want)
    np.testing.assert_array_equal(got[known], want[known])
    return known


@pytest.mark.parametrize("row_type", [0, 1])
@pytest.mark.parametrize("tokens_type", [0, 1, 2])
@pytest.mark.parametrize("dtype", FP, ids=ident)
def test_init_routing_v3(dev, dtype, tokens_type, row_type):
    """npu_moe_init_routing_v2's op: experts 1 and 2 of 0..3 active, 7 of the positions at most, a scale per token."""
    n, k, h, experts, active, expert_range = 6, 2, 3, 4, 7, [1, 3]
    expert_idx = rng.integers(0, experts, (n, k))
    expert_idx[0] = [1, 2]  # at least two positions inside the range
    x, scale = dev.tensor(rng.uniform(-2, 2, (n, h)), dtype), dev.tensor(rng.uniform(0, 1, (n,)), FLOAT)
    ex, er, es = dev.empty((active, h), dtype), dev.empty((n * k,), INT32), dev.empty((active,), FLOAT)
    tokens = dev.empty((experts, 2) if tokens_type == 2 else (2,), INT64)
    dev.run("MoeInitRoutingV3", x, dev.tensor(expert_idx, INT32), scale, None, active, 0, experts, 0, tokens_type,
            True, -1, dev.ints(expert_range), row_type, ex, er, tokens, es)
    want_x, want_rows, want_tokens, want_scale = ref("MoeInitRoutingV3", x.host, expert_idx, scale.host, None, active,
                                                     0, experts, 0, tokens_type, True, -1, expert_range, row_type)
    known = written(ex.read(), want_x)
    assert known.any() and np.isnan(ex.read()[~known]).all()  # rows past the available positions stay untouched
    written(er.read(), want_rows)
    written(es.read(), want_scale)
    np.testing.assert_array_equal(tokens.read(), want_tokens)
    # Drop/pad (the full expert range): V2's layout, counts of the experts.
    exd, erd = dev.empty((experts, 2, h), dtype), dev.empty((n * k,), INT32)
    dev.run("MoeInitRoutingV3", x, dev.tensor(expert_idx, INT32), None, None, 0, 2, experts, 1, 1, True, -1, None, 0,
            exd, erd, dev.empty((experts,), INT64), None)
    want_x, want_rows, _, _ = ref("MoeInitRoutingV3", x.host, expert_idx, None, None, 0, 2, experts, 1, 1, True, -1,
                                  None, 0)
    np.testing.assert_array_equal(exd.read(), want_x)
    np.testing.assert_array_equal(erd.read(), want_rows)


def test_init_routing_v3_argument_errors(dev):
    x, e = dev.tensor(np.zeros((4, 3)), FLOAT), dev.tensor(np.zeros((4, 2)), INT32)
    ex, er, t = dev.empty((8, 3), FLOAT), dev.empty((8,), INT32), dev.empty((3,), INT64)
    run = lambda *a: dev.phase1("MoeInitRoutingV3", x, e, *a)  # noqa: E731
    assert run(None, None, 0, 0, 3, 0, 1, True, -1, None, 0, ex, er, t, None) == 0
    assert run(None, None, 0, 0, 3, 0, 1, True, 1, None, 0, ex, er, t, None) == INVALID  # quantized
    assert run(None, x, 0, 0, 3, 0, 1, True, -1, None, 0, ex, er, t, None) == INVALID  # offset: quantized only
    assert run(None, None, 0, 0, 3, 0, 1, True, -1, dev.ints([2, 1]), 0, ex, er, t, None) == TILING
    assert run(None, None, 0, 0, 3, 0, 1, True, -1, dev.ints([0, 4]), 0, ex, er, t, None) == TILING
    assert run(None, None, 0, 0, 3, 0, 3, True, -1, None, 0, ex, er, t, None) == TILING  # expertTokensNumType
    assert run(None, None, 0, 0, 3, 0, 1, True, -1, None, 2, ex, er, t, None) == TILING  # rowIdxType
    assert run(None, None, 0, 0, 3, 0, 1, True, -1, None, 0, ex, er, dev.empty((3,), INT32), None) == INVALID
    assert run(None, None, 0, 2, 3, 1, 1, True, -1, None, 1, dev.empty((3, 2, 3), FLOAT), er, t, None) == INVALID


def test_init_routing_v2_argument_errors(dev):
    x, e = dev.tensor(np.zeros((4, 3)), FLOAT), dev.tensor(np.zeros((4, 2)), INT32)
    ex, er, c = dev.empty((8, 3), FLOAT), dev.empty((8,), INT32), dev.empty((3,), INT32)
    run = lambda *a: dev.phase1("MoeInitRoutingV2", x, e, *a)  # noqa: E731
    assert run(0, 0, 3, 0, 0, False, ex, er, None, None) == 0
    assert run(0, 0, 3, 2, 0, False, ex, er, None, None) == TILING  # dropPadMode 2
    assert run(0, 0, 3, 0, 3, False, ex, er, c, None) == TILING  # flag 3
    assert run(0, 0, 0, 0, 1, False, ex, er, c, None) == TILING  # counts without expertNum
    assert run(0, 0, 3, 1, 0, False, ex, er, None, None) == TILING  # drop/pad without capacity
    assert run(-1, 0, 3, 0, 0, False, ex, er, None, None) == TILING
    assert run(0, 0, 3, 0, 1, False, ex, er, None, None) == NULLPTR  # counts asked for, no tensor
    assert run(0, 0, 3, 0, 0, False, dev.empty((8, 3), FLOAT16), er, None, None) == INVALID
    assert run(0, 0, 3, 0, 0, False, dev.empty((7, 3), FLOAT), er, None, None) == TILING


# ----------------------------------------------------------------------------------------------------- combine


@pytest.mark.parametrize("dtype", FP, ids=ident)
def test_finalize_routing_v1_after_init_routing(dev, dtype):
    n, k, h, experts = 5, 2, 6, 3
    expert_idx = rng.integers(0, experts, (n, k))
    row_idx = np.arange(n * k).reshape(k, n).T
    _, rows, _ = ref("MoeInitRouting", rng.uniform(-2, 2, (n, h)), row_idx, expert_idx, n)
    rows = rows.astype(np.int64)
    ffn = dev.tensor(rng.uniform(-2, 2, (n * k, h)), dtype)
    x1, x2, bias = (dev.tensor(rng.uniform(-1, 1, s), dtype) for s in ((n, h), (n, h), (experts, h)))
    scales = dev.tensor(rng.uniform(0, 1, (n, k)), dtype)
    out = dev.empty((n, h), dtype)
    dev.run("MoeFinalizeRouting", ffn, x1, x2, bias, scales, dev.tensor(rows, INT32), dev.tensor(expert_idx, INT32),
            out)
    (want,) = ref("MoeFinalizeRouting", ffn.host, x1.host, x2.host, bias.host, scales.host, rows, expert_idx)
    close(out.read(), as_dtype(want, dtype), dtype, scale=4)


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
@pytest.mark.parametrize("dtype", FP, ids=ident)
def test_finalize_routing_v2(dev, dtype, mode):
    n, k, h, experts, capacity = 6, 2, 4, 3, 3
    expert_idx = rng.integers(0, experts, (n, k))
    if mode in (1, 3):
        expanded = rng.uniform(-2, 2, (experts, capacity, h))
        rows = rng.permutation(np.concatenate([np.arange(experts * capacity), [-1] * (n * k - experts * capacity)]))
    else:
        expanded = rng.uniform(-2, 2, (n * k, h))
        rows = rng.permutation(n * k)
    x1 = dev.tensor(rng.uniform(-1, 1, (n, h)), dtype)
    bias = dev.tensor(rng.uniform(-1, 1, (experts, h)), dtype)
    scales = dev.tensor(rng.uniform(0, 1, (n, k)), FLOAT if dtype == BF16 else dtype)  # mixed precision for bf16
    ex, out = dev.tensor(expanded, dtype, "transposed" if mode == 0 else "contig"), dev.empty((n, h), dtype)
    dev.run("MoeFinalizeRoutingV2", ex, dev.tensor(rows, INT32), x1, None, bias, scales, dev.tensor(expert_idx, INT32),
            mode, out)
    (want,) = ref("MoeFinalizeRoutingV2", ex.host, rows, x1.host, None, bias.host, scales.host, expert_idx, mode)
    close(out.read(), as_dtype(want, dtype), dtype, scale=4)
    # Without scales K is 1 and every row is taken once (row layout), without x1 and bias nothing is added.
    plain, perm, one = dev.tensor(rng.uniform(-2, 2, (n, h)), dtype), rng.permutation(n), dev.empty((n, h), dtype)
    dev.run("MoeFinalizeRoutingV2", plain, dev.tensor(perm, INT32), None, None, None, None, None, 2, one)
    np.testing.assert_array_equal(one.read(), plain.host[perm])
    assert dev.phase1("MoeFinalizeRoutingV2", ex, dev.tensor(rows, INT32), None, x1, None, None, None, mode,
                      out) == TILING  # x2 without x1
    assert dev.phase1("MoeFinalizeRoutingV2", ex, dev.tensor(rows, INT32), None, None, bias, scales, None, mode,
                      out) == TILING  # bias without expertIdx
    assert dev.phase1("MoeFinalizeRoutingV2", ex, dev.tensor(rows, INT32), None, None, None, None, None, 4,
                      out) == TILING


@pytest.mark.parametrize("drop_pad", [0, 1])
@pytest.mark.parametrize("dtype", FP, ids=ident)
def test_finalize_routing_v2_grad(dev, dtype, drop_pad):
    n, k, h, experts, capacity = 5, 2, 3, 4, 2
    expert_idx = rng.integers(0, experts, (n, k))
    if drop_pad:
        rows = rng.permutation(np.concatenate([np.arange(experts * capacity), [-1] * (n * k - experts * capacity)]))
        shape = (experts, capacity, h)
    else:
        rows, shape = rng.permutation(n * k), (n * k, h)
    gy, ex = dev.tensor(rng.uniform(-1, 1, (n, h)), dtype), dev.tensor(rng.uniform(-1, 1, shape), dtype)
    scales, bias = dev.tensor(rng.uniform(0, 1, (n, k)), dtype), dev.tensor(rng.uniform(-1, 1, (experts, h)), dtype)
    gex, gsc = dev.empty(shape, dtype), dev.empty((n, k), dtype)
    dev.run("MoeFinalizeRoutingV2Grad", gy, dev.tensor(rows, INT32), ex, scales, dev.tensor(expert_idx, INT32), bias,
            drop_pad, 0, experts, capacity, gex, gsc)
    want_gex, want_gsc = ref("MoeFinalizeRoutingV2Grad", gy.host, rows, ex.host, scales.host, expert_idx, bias.host,
                             drop_pad, 0, experts, capacity)
    close(gex.read(), as_dtype(want_gex, dtype), dtype)
    close(gsc.read(), as_dtype(want_gsc, dtype), dtype, scale=4)


# ------------------------------------------------------------------------------------------------ grouped matmul

GMM = ["GroupedMatmulV4", "GroupedMatmulV5"]


def gmm(dev, name, x, w, bias, group_list, split_item, group_type, list_type, out, act=0):
    """Both phases of GroupedMatmulV4/V5 with every quantization list NULL."""
    lists = [dev.tensor_list(t) if t is not None else None for t in (x, w, bias)]
    tail = [split_item, group_type, list_type, act] + ([None] if name.endswith("V5") else [])
    args = lists + [None] * 5 + [group_list] + [None] * 3 + tail + [dev.tensor_list(out), None, None]
    return args


def bias_dtype(dtype):
    return FLOAT16 if dtype == FLOAT16 else FLOAT


@pytest.mark.parametrize("list_type", [0, 1])
@pytest.mark.parametrize("name", GMM)
@pytest.mark.parametrize("dtype", FP, ids=ident)
def test_gmm_groups_of_rows_one_weight(dev, dtype, name, list_type):
    m, kk, n, sizes = 11, 6, 5, [3, 0, 4, 2]  # 2 rows after the groups: not written
    x, w = dev.tensor(rng.uniform(-1, 1, (m, kk)), dtype), dev.tensor(rng.uniform(-1, 1, (4, kk, n)), dtype)
    b = dev.tensor(rng.uniform(-1, 1, (4, n)), bias_dtype(dtype))
    gl = np.cumsum(sizes) if list_type == 0 else np.array(sizes)
    y = dev.empty((m, n), dtype)
    dev.run(name, *gmm(dev, name, [x], [w], [b], dev.tensor(gl, INT64), 3, 0, list_type, [y]))
    got, at = y.read(), 0
    for g, size in enumerate(sizes):
        want = x.host[at:at + size].astype(np.float64) @ w.host[g] + b.host[g]
        close(got[at:at + size], as_dtype(want, dtype), dtype, scale=4)
        at += size
    assert np.isnan(got[at:]).all()


@pytest.mark.parametrize("dtype", FP, ids=ident)
def test_gmm_weight_lists_transposed_and_x_lists(dev, dtype):
    name, kk, n = "GroupedMatmulV5", 4, 3
    ws = [dev.tensor(rng.uniform(-1, 1, (kk, n)), dtype, "transposed") for _ in range(3)]
    # One x, weights as a list, groups of rows.
    x = dev.tensor(rng.uniform(-1, 1, (7, kk)), dtype)
    y = dev.empty((7, n), dtype)
    dev.run(name, *gmm(dev, name, [x], ws, None, dev.tensor(np.array([2, 2, 3]), INT64), 2, 0, 1, [y]))
    want = np.concatenate([x.host[0:2] @ ws[0].host, x.host[2:4] @ ws[1].host, x.host[4:7] @ ws[2].host])
    close(y.read(), as_dtype(want, dtype), dtype, scale=4)
    # x as a list too, no groupList: the rows of each x.
    xs = [dev.tensor(rng.uniform(-1, 1, (r, kk)), dtype) for r in (1, 3, 2)]
    y = dev.empty((6, n), dtype)
    dev.run(name, *gmm(dev, name, xs, ws, None, None, 2, 0, 0, [y]))
    close(y.read(), as_dtype(np.concatenate([a.host @ b.host for a, b in zip(xs, ws)]), dtype), dtype, scale=4)
    # groupType -1: a matmul per list entry, with bias.
    bs = [dev.tensor(rng.uniform(-1, 1, (n,)), bias_dtype(dtype)) for _ in range(3)]
    ys = [dev.empty((a.shape[0], n), dtype) for a in xs]
    dev.run(name, *gmm(dev, name, xs, ws, bs, None, 0, -1, 0, ys))
    for a, b, c, y in zip(xs, ws, bs, ys):
        close(y.read(), as_dtype(a.host @ b.host + c.host, dtype), dtype, scale=4)


@pytest.mark.parametrize("dtype", FP, ids=ident)
def test_gmm_groups_of_k(dev, dtype):
    """The weight gradient of a MoE layer: x = activations^T [H, T] (transposed), weight = gradients [T, N]."""
    t, hh, n, sizes = 9, 4, 3, [4, 0, 5]
    act, grad = rng.uniform(-1, 1, (t, hh)), rng.uniform(-1, 1, (t, n))
    x = dev.tensor(act.T, dtype, "transposed")
    w = dev.tensor(grad, dtype)
    y = dev.empty((3, hh, n), dtype)
    dev.run("GroupedMatmulV4", *gmm(dev, "GroupedMatmulV4", [x], [w], None, dev.tensor(np.cumsum(sizes), INT64), 3, 2,
                                    0, [y]))
    at, got = 0, y.read()
    for g, s in enumerate(sizes):
        want = x.host[:, at:at + s].astype(np.float64) @ w.host[at:at + s]  # an empty group is all zeros
        close(got[g], as_dtype(want, dtype), dtype, scale=4)
        at += s
    # Weights as a list: their first dims split K, one y each.
    ws = [dev.tensor(grad[:4], dtype), dev.tensor(grad[4:9], dtype)]
    ys = [dev.empty((hh, n), dtype) for _ in ws]
    dev.run("GroupedMatmulV4", *gmm(dev, "GroupedMatmulV4", [x], ws, None, None, 0, 2, 0, ys))
    close(ys[1].read(), as_dtype(x.host[:, 4:9].astype(np.float64) @ ws[1].host, dtype), dtype, scale=4)


def test_gmm_refuses_what_it_does_not_emulate(dev):
    name = "GroupedMatmulV5"
    x, w = dev.tensor(rng.uniform(-1, 1, (4, 3)), FLOAT), dev.tensor(rng.uniform(-1, 1, (2, 3, 2)), FLOAT)
    gl, y = dev.tensor(np.array([2, 4]), INT64), dev.empty((4, 2), FLOAT)
    ok = gmm(dev, name, [x], [w], None, gl, 3, 0, 0, [y])
    assert dev.phase1(name, *ok) == 0
    for i, value in [(3, dev.tensor_list([dev.tensor(np.ones(2), FLOAT)])),  # scaleOptional: quantized
                     (15, 1),  # actType RELU
                     (13, 1),  # groupType 1
                     (12, 0),  # splitItem 0 with one out
                     (14, 2)]:  # groupListType 2 (quantized only)
        bad = list(ok)
        bad[i] = value
        assert dev.phase1(name, *bad) == INVALID, i
    xt = dev.tensor(rng.uniform(-1, 1, (4, 3)), FLOAT, "transposed")
    assert dev.phase1(name, *gmm(dev, name, [xt], [w], None, gl, 3, 0, 0, [y])) == INVALID  # x may not be transposed
    assert dev.phase1(name, *gmm(dev, name, [x], [w], None, gl, 3, 0, 0, [dev.empty((4, 3), FLOAT)])) == INVALID
    assert dev.phase1(name, *gmm(dev, name, [x], [w], None, None, 3, 0, 0, [y])) == INVALID  # groupList required
    assert dev.phase1(name, *gmm(dev, name, [dev.tensor(np.ones((4, 3)), INT32)], [w], None, gl, 3, 0, 0, [y])) == \
        INVALID
    assert dev.phase1(name, None, None, None, None, None, None, None, None, None, None, None, None, 3, 0, 0, 0, None,
                      None, None, None) == NULLPTR
    # Groups that do not fit are the kernel's to find: the synchronization fails.
    dev.run(name, *gmm(dev, name, [x], [w], None, dev.tensor(np.array([3, 2]), INT64), 3, 0, 0, [y]),
            expect_sync=507015)


# ----------------------------------------------------------------------------------------- a MoE layer, end to end


def view_of(dev, base, shape, strides):
    """Another aclTensor over base's storage (what torch passes for base.transpose(...))."""
    nd = len(shape)
    dims, st = (ctypes.c_int64 * nd)(*shape), (ctypes.c_int64 * nd)(*strides)
    sdims = (ctypes.c_int64 * 1)(base.storage_len)
    h = dev.n.aclCreateTensor(dims, nd, base.dtype, st, base.offset, acl.FORMAT_ND, sdims, 1, base.ptr)
    assert h
    dev.tensors.append(h)
    return Handle(h)


def test_moe_layer_forward_and_backward(dev):
    """Gating -> MoeInitRoutingV2 -> GroupedMatmulV5 (rows grouped by expert) -> MoeFinalizeRoutingV2, then the
    backward MindSpeed runs: MoeFinalizeRoutingV2Grad -> GroupedMatmulV5 over the transposed weights (input gradient)
    and over the transposed activations with groups of K (weight gradient) -> MoeInitRoutingV2Grad. Against a dense
    numpy MoE, y[t] = sum_j p[t, j] * x[t] @ W[e(t, j)], and its gradients for dy, in fp32 (the dtypes are the single
    ops' tests' business; here the indices must meet)."""
    t, h, n, experts, k, dt = 8, 6, 5, 4, 2, FLOAT
    x, w = dev.tensor(rng.uniform(-1, 1, (t, h)), dt), dev.tensor(rng.uniform(-1, 1, (experts, h, n)), dt)
    probs, idx, rowi = dev.empty((t, k), dt), dev.empty((t, k), INT32), dev.empty((t, k), INT32)
    dev.run("MoeGatingTopKSoftmax", dev.tensor(distinct((t, experts)), dt), None, k, probs, idx, rowi)
    ex, er, cum = dev.empty((t * k, h), dt), dev.empty((t * k,), INT32), dev.empty((experts,), INT32)
    dev.run("MoeInitRoutingV2", x, idx, 0, 0, experts, 0, 1, False, ex, er, cum, None)
    group_list = dev.tensor(cum.read().astype(np.int64), INT64)  # the cumulative counts, as an INT64 groupList
    hid, y = dev.empty((t * k, n), dt), dev.empty((t, n), dt)
    dev.run("GroupedMatmulV5", *gmm(dev, "GroupedMatmulV5", [ex], [w], None, group_list, 3, 0, 0, [hid]))
    dev.run("MoeFinalizeRoutingV2", hid, er, None, None, None, probs, None, 2, y)

    xs, ws, e, p = x.host.astype(np.float64), w.host.astype(np.float64), idx.read(), probs.read().astype(np.float64)
    close(y.read(), sum(p[:, j:j + 1] * np.einsum("th,thn->tn", xs, ws[e[:, j]]) for j in range(k)), dt, scale=16)

    dy = dev.tensor(rng.uniform(-1, 1, (t, n)), dt)
    dhid, dp, dex = dev.empty((t * k, n), dt), dev.empty((t, k), dt), dev.empty((t * k, h), dt)
    dw, dx = dev.empty((experts, h, n), dt), dev.empty((t, h), dt)
    dev.run("MoeFinalizeRoutingV2Grad", dy, er, hid, probs, None, None, 0, 0, 0, 0, dhid, dp)
    w_t = view_of(dev, w, (experts, n, h), (h * n, 1, n))  # w.transpose(1, 2)
    dev.run("GroupedMatmulV5", *gmm(dev, "GroupedMatmulV5", [dhid], [w_t], None, group_list, 3, 0, 0, [dex]))
    ex_t = view_of(dev, ex, (h, t * k), (1, h))  # ex.t()
    dev.run("GroupedMatmulV5", *gmm(dev, "GroupedMatmulV5", [ex_t], [dhid], None, group_list, 3, 2, 0, [dw]))
    dev.run("MoeInitRoutingV2Grad", dex, er, k, 0, 0, dx)

    dys = dy.host.astype(np.float64)
    want_dw = np.zeros_like(ws)
    for j in range(k):
        for s in range(t):
            want_dw[e[s, j]] += p[s, j] * np.outer(xs[s], dys[s])
    close(dx.read(), sum(p[:, j:j + 1] * np.einsum("tn,thn->th", dys, ws[e[:, j]]) for j in range(k)), dt, scale=16)
    close(dw.read(), want_dw, dt, scale=16)
    close(dp.read(), np.stack([np.einsum("th,thn,tn->t", xs, ws[e[:, j]], dys) for j in range(k)], axis=1), dt,
          scale=16)
