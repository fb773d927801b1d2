"""The stand-in's transformer ops (issue 41) against independent numpy computations.

FlashAttentionScore(+Grad), RotaryPositionEmbedding(+Grad), SwiGlu(+Grad), RmsNorm(+Grad), the cross entropy path
torch_npu launches (LogSoftmax, NLLLoss and their backwards) and the common ops of CANN's examples. The device
harness (tensors through plain, offset, strided and transposed views, both phases) is test_aclnn_ops.py's;
references are computed in float64 from the values the device holds, and every fp32, fp16 and bf16 result must be
that reference rounded once to its dtype, give or take one unit in the last place (rounded()).
"""
import numpy as np
import pytest

import test_aclnn_ops as base
from npu_refs import (FLT_MAX, attention_backward, attention_band, attention_forward, from_layout, log_softmax,
                      log_softmax_backward, nll_loss, nll_loss_backward, rms_norm, rms_norm_grad, rope, rope_grad,
                      sigmoid, swiglu, swiglu_grad, to_layout)
from test_aclnn_ops import INVALID, NULLPTR, as_dtype, close, ident, rand
from tiny_npu.acl import BF16, BOOL, FLOAT, FLOAT16, INT8, INT32, INT64, UINT8, UINT16

FP = [FLOAT, FLOAT16, BF16]
TILING = 561002  # ACLNN_ERR_INNER_TILING_ERROR: the shape checks of ops whose aclnn layer is generated


@pytest.fixture(scope="module")
def device():
    return base.Device()


@pytest.fixture
def dev(device):
    yield device
    device.release()


rng = np.random.default_rng(41)


def f64(x):
    """Device values for a reference (numpy would compute in float16 on float16 arrays)."""
    return np.asarray(x, dtype=np.float64)


def ulp(x, dtype):
    """The spacing of `dtype` at each |x| (bf16 keeps 16 mantissa bits fewer than fp32)."""
    a = np.abs(np.asarray(x, np.float64))
    with np.errstate(over="ignore", invalid="ignore"):  # at the largest finite value and NaN: no spacing
        if dtype == FLOAT16:
            return np.spacing(a.astype(np.float16)).astype(np.float64)
        return np.spacing(a.astype(np.float32)).astype(np.float64) * (65536 if dtype == BF16 else 1)


def rounded(got, want, dtype):
    """`got` is the float64 `want` rounded once to `dtype`: within one unit in the last place of that rounding (a
    different summation order may flip it), plus float64 noise where a result cancels to about zero."""
    r = as_dtype(want, dtype)
    err = np.abs(np.asarray(got, np.float64) - r)
    bad = ~(err <= ulp(r, dtype) + 1e-12) & ~(np.isnan(r) & np.isnan(np.asarray(got, np.float64)))
    assert not bad.any(), f"{bad.sum()} beyond one rounding: got {np.asarray(got)[bad][:3]}, want {r[bad][:3]}"


# ------------------------------------------------------------------------------------------ attention

class Attn:
    """One attention problem on the device: q, k, v in a layout (through the given views) and their values."""

    def __init__(self, dev, dtype, layout, b=2, n1=4, n2=2, s1=5, s2=7, d=8, dv=8, views=("contig",) * 3):
        self.dev, self.dtype, self.layout, self.n1, self.n2 = dev, dtype, layout, n1, n2
        self.shape = (b, n1, n2, s1, s2, d, dv)
        qv, kv, vv = rand((b, n1, s1, d), -1, 1), rand((b, n2, s2, d), -1, 1), rand((b, n2, s2, dv), -1, 1)
        self.tq, self.tk, self.tv = (dev.tensor(to_layout(x, layout), dtype, view)
                                     for x, view in zip((qv, kv, vv), views))
        self.q, self.k = f64(from_layout(self.tq.host, layout, n1)), f64(from_layout(self.tk.host, layout, n2))
        self.v = f64(from_layout(self.tv.host, layout, n2))
        self.scale = 1 / np.sqrt(d)

    def outputs(self):
        b, n1, _, s1, _, _, dv = self.shape
        return (self.dev.empty((b, n1, s1, 8), FLOAT), self.dev.empty((b, n1, s1, 8), FLOAT),
                self.dev.empty(to_layout(np.zeros((b, n1, s1, dv)), self.layout).shape, self.dtype))

    def forward(self, mask=None, sparse=0, pre=2147483647, nxt=2147483647, pse=None, keep_prob=1.0, drop=None,
                prefix=None, op="FlashAttentionScore", pse_type=1):
        mx, sm, out = self.outputs()
        v2 = (None, None) if op.endswith("V2") else ()
        extra = (pse_type,) if op.endswith("V2") else ()
        self.dev.run(op, self.tq, self.tk, self.tv, pse, drop, None, mask, prefix, *v2, self.scale, keep_prob, pre,
                     nxt, self.n1, self.layout.encode(), 0, sparse, *extra, mx, sm, None, out)
        return mx, sm, out

    def read_out(self, out):
        return from_layout(out.read(), self.layout, self.n1)


LAYOUTS = ["BSND", "BNSD", "BSH", "SBH"]


@pytest.mark.parametrize("dtype", FP, ids=ident)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_flash_attention_layouts_and_grouped_heads(dev, layout, dtype):
    at = Attn(dev, dtype, layout, views=("transposed", "offset", "strided"), dv=6)
    mx, sm, out = at.forward()
    want, _, wmax, wsum = attention_forward(at.q, at.k, at.v, at.scale)
    rounded(at.read_out(out), want, dtype)
    rounded(mx.read(), np.repeat(wmax[..., None], 8, -1), FLOAT)
    rounded(sm.read(), np.repeat(wsum[..., None], 8, -1), FLOAT)


def causal_compressed(rows=2048):
    """The optimized lower-triangle mask of the causal sparse modes (1 above the diagonal = masked)."""
    return np.triu(np.ones((rows, 2048), np.uint8), 1)


MASK_CASES = {
    "mode0_value_mask": dict(sparse=0),
    "mode0_band": dict(sparse=0, pre=1, nxt=0),
    "mode1_all_mask_batched": dict(sparse=1),
    "mode2_left_up_causal": dict(sparse=2),
    "mode3_right_down_causal": dict(sparse=3),
    "mode4_band": dict(sparse=4, pre=2, nxt=1),
}


def mask_case(name, s1, s2, b):
    """(device mask values, [.., S1, S2] hidden scores) for a MASK_CASES entry."""
    i, j = np.arange(s1)[:, None], np.arange(s2)[None, :]
    if name == "mode0_value_mask":
        m = rng.random((s1, s2)) < 0.3
        m[2] = True  # a whole row masked: an invalid line
        return m, m
    if name == "mode0_band":
        m = np.zeros((s1, s2), bool)
        return m, attention_band(s1, s2, 1, 0)
    if name == "mode1_all_mask_batched":
        m = rng.random((b, 1, s1, s2)) < 0.4
        return m, m
    if name == "mode2_left_up_causal":
        return causal_compressed(), j > i
    if name == "mode3_right_down_causal":
        return causal_compressed(), j > i + (s2 - s1)
    return causal_compressed(), attention_band(s1, s2, 2, 1, s2 - s1)


@pytest.mark.parametrize("dtype", [FLOAT, BF16], ids=ident)
@pytest.mark.parametrize("case", sorted(MASK_CASES))
@pytest.mark.parametrize("s1,s2", [(5, 7), (7, 4)])
def test_flash_attention_masks_and_sparse_modes(dev, case, s1, s2, dtype):
    at = Attn(dev, dtype, "BNSD", s1=s1, s2=s2)
    values, hidden = mask_case(case, s1, s2, 2)
    mtype = BOOL if values.dtype == bool else UINT8
    kw = MASK_CASES[case]
    mx, _, out = at.forward(mask=dev.tensor(values, mtype), **kw)
    want, _, wmax, _ = attention_forward(at.q, at.k, at.v, at.scale, hidden)
    rounded(at.read_out(out), want, dtype)
    rounded(mx.read()[..., 0], wmax, FLOAT)
    invalid = np.broadcast_to(hidden, want.shape[:2] + hidden.shape[-2:]).all(axis=-1)
    assert (at.read_out(out)[invalid] == 0).all() and (mx.read()[..., 0][invalid] == -FLT_MAX).all()


def test_flash_attention_without_a_mask_ignores_the_sparse_mode(dev):
    at = Attn(dev, FLOAT, "BSND")
    _, _, out = at.forward(sparse=3, pre=0, nxt=0)
    rounded(at.read_out(out), attention_forward(at.q, at.k, at.v, at.scale)[0], FLOAT)


def test_flash_attention_pse_before_and_after_the_scale(dev):
    at = Attn(dev, FLOAT, "BSND")
    b, n1, _, s1, s2, _, _ = at.shape
    full, row = dev.tensor(rand((b, n1, s1, s2)), FLOAT), dev.tensor(rand((b, n1, 1, s2)), FLOAT, "strided")
    _, _, out = at.forward(pse=full)  # V1: scale * (qk + pse)
    rounded(at.read_out(out), attention_forward(at.q, at.k, at.v, at.scale, pse=f64(full.host))[0], FLOAT)
    _, _, out = at.forward(pse=row, op="FlashAttentionScoreV2", pse_type=0)  # scale * qk + pse
    want = attention_forward(at.q, at.k, at.v, at.scale, pse=f64(row.host), pse_first=False)[0]
    rounded(at.read_out(out), want, FLOAT)
    _, _, out = at.forward(pse=row, op="FlashAttentionScoreV2", pse_type=1)
    rounded(at.read_out(out), attention_forward(at.q, at.k, at.v, at.scale, pse=f64(row.host))[0], FLOAT)


def drop_mask(shape, keep_prob):
    """(uint8 bit mask as the kernel reads it, LSB first; the per-score factor 0 or 1/keep_prob)."""
    kept = rng.random(int(np.prod(shape))) < keep_prob
    return np.packbits(kept, bitorder="little"), kept.reshape(shape) / keep_prob


def test_flash_attention_dropout_uses_the_callers_mask(dev):
    at = Attn(dev, FLOAT, "BNSD")
    b, n1, _, s1, s2, _, _ = at.shape
    bits, keep = drop_mask((b, n1, s1, s2), 0.75)
    _, _, out = at.forward(keep_prob=0.75, drop=dev.tensor(bits, UINT8))
    rounded(at.read_out(out), attention_forward(at.q, at.k, at.v, at.scale, keep=keep)[0], FLOAT)


@pytest.mark.parametrize("dtype", [FLOAT, BF16], ids=ident)
def test_flash_attention_propagates_nan_as_softmax_does(dev, dtype):
    """A NaN in query makes its own row NaN (output, softmax max and sum); a NaN in a key row makes NaN every query
    row that sees it under the causal mask, and none that the mask hides. The rest is the reference (numpy's max,
    like softmax's formula, keeps NaN): real CANN propagates NaN through the softmax, and a max that drops it would
    turn a row of NaN scores into an "invalid" row of zeros, hiding the NaN from every later kernel."""
    at = Attn(dev, dtype, "BNSD", s1=6, s2=6)
    q, k = at.q.copy(), at.k.copy()
    q[0, 1, 2, 3] = np.nan  # batch 0, query head 1, row 2
    k[1, 0, 3, 0] = np.nan  # batch 1, key head 0 (query heads 0 and 1), row 3
    at.tq, at.tk = dev.tensor(q, dtype, "strided"), dev.tensor(k, dtype)
    at.q, at.k = f64(at.tq.host), f64(at.tk.host)
    values, hidden = mask_case("mode2_left_up_causal", 6, 6, 2)
    mx, sm, out = at.forward(mask=dev.tensor(values, UINT8), sparse=2)
    want, _, wmax, wsum = attention_forward(at.q, at.k, at.v, at.scale, hidden)
    rows = np.zeros(want.shape[:3], bool)
    rows[0, 1, 2] = True
    rows[1, 0:2, 3:] = True  # rows 3-5 see key row 3; rows 0-2 do not
    got = at.read_out(out)
    assert (np.isnan(got).any(-1) == rows).all() and (np.isnan(got).all(-1) == rows).all()
    assert (np.isnan(mx.read()[..., 0]) == rows).all() and (np.isnan(sm.read()[..., 0]) == rows).all()
    rounded(got, want, dtype)
    rounded(mx.read()[..., 0], wmax, FLOAT)
    rounded(sm.read()[..., 0], wsum, FLOAT)


def grad_case(dev, dtype, layout, hidden=None, keep=None, **fw):
    """Runs FlashAttentionScoreGrad on a problem whose forward statistics come from the float64 reference."""
    at = Attn(dev, dtype, layout, views=("strided", "transposed", "offset"))
    b, n1, n2, s1, s2, d, dv = at.shape
    want, s, mx, total = attention_forward(at.q, at.k, at.v, at.scale, hidden, keep=keep)
    tout = dev.tensor(to_layout(want, layout), dtype)
    tdy = dev.tensor(to_layout(rand((b, n1, s1, dv)), layout), dtype, "transposed")
    tmx = dev.tensor(np.repeat(mx[..., None], 8, -1), FLOAT)
    tsum = dev.tensor(np.repeat(total[..., None], 8, -1), FLOAT, "offset")
    dq, dk, dv_ = (dev.empty(t.shape, dtype) for t in (at.tq, at.tk, at.tv))
    dev.run("FlashAttentionScoreGrad", at.tq, at.tk, at.tv, tdy, None, fw.get("drop"), None, fw.get("mask"), tmx,
            tsum, None, tout, None, at.scale, fw.get("keep_prob", 1.0), 2147483647, 2147483647, n1,
            layout.encode(), 0, fw.get("sparse", 0), dq, dk, dv_, None)
    ref = attention_backward(at.q, at.k, at.v, f64(from_layout(tdy.host, layout, n1)),
                             f64(from_layout(tout.host, layout, n1)),
                             s, hidden, mx.astype(np.float32), total.astype(np.float32), at.scale, keep)
    for got, r, heads in zip((dq, dk, dv_), ref, (n1, n2, n2)):
        rounded(from_layout(got.read(), layout, heads), r, dtype)


@pytest.mark.parametrize("dtype", FP, ids=ident)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_flash_attention_grad_matches_the_analytic_gradient(dev, layout, dtype):
    grad_case(dev, dtype, layout)


def test_flash_attention_grad_with_causal_mask_and_dropout(dev):
    s1, s2 = 5, 7
    hidden = np.arange(s2)[None, :] > np.arange(s1)[:, None] + (s2 - s1)
    bits, keep = drop_mask((2, 4, s1, s2), 0.8)
    grad_case(dev, FLOAT, "BSND", hidden, keep, mask=dev.tensor(causal_compressed(), UINT8), sparse=3,
              keep_prob=0.8, drop=dev.tensor(bits, UINT8))


def test_flash_attention_grad_refusals(dev):
    at = Attn(dev, FLOAT, "BNSD")
    b, n1, n2, s1, s2, d, dv = at.shape
    stats = [dev.tensor(np.ones((b, n1, s1, 8)), FLOAT) for _ in range(2)]
    dy, attn_in = dev.tensor(rand((b, n1, s1, dv)), FLOAT), dev.tensor(rand((b, n1, s1, dv)), FLOAT)
    grads = [dev.empty(t.shape, FLOAT) for t in (at.tq, at.tk, at.tv)]

    def fag(dy=dy, smax=stats[0], attn_in=attn_in, dq=grads[0], layout=b"BNSD"):
        return dev.phase1("FlashAttentionScoreGrad", at.tq, at.tk, at.tv, dy, None, None, None, None, smax, stats[1],
                          None, attn_in, None, 0.5, 1.0, 65536, 65536, n1, layout, 0, 0, dq, grads[1], grads[2], None)

    assert fag() == 0
    assert fag(dy=dev.tensor(rand((b, n1, s1, dv)), FLOAT16)) == INVALID
    assert fag(dy=dev.tensor(rand((b, n1, s1 + 1, dv)), FLOAT)) == INVALID
    assert fag(dq=dev.empty((b, n2, s1, d), FLOAT)) == INVALID  # dq has query's heads
    assert fag(smax=dev.tensor(np.ones((b, n1, s1, 8)), FLOAT16)) == INVALID
    assert fag(layout=b"BSND") == INVALID  # the tensors are BNSD-shaped
    assert fag(smax=None) == NULLPTR and fag(attn_in=None) == NULLPTR and fag(dy=None) == NULLPTR


def test_the_analytic_reference_is_the_derivative_of_the_forward():
    """Guards the reference itself: its dq matches finite differences of sum(dy * out) in float64."""
    q, k, v, dy = rand((1, 2, 3, 4)), rand((1, 1, 5, 4)), rand((1, 1, 5, 4)), rand((1, 2, 3, 4))
    out, s, mx, total = attention_forward(q, k, v, 0.5)
    dq = attention_backward(q, k, v, dy, out, s, None, mx, total, 0.5)[0]
    h, num = 1e-6, np.zeros_like(q)

    def loss(x):
        return (dy * attention_forward(x, k, v, 0.5)[0]).sum()
    for idx in np.ndindex(q.shape):
        e = np.zeros_like(q)
        e[idx] = h
        num[idx] = (loss(q + e) - loss(q - e)) / (2 * h)
    np.testing.assert_allclose(dq, num, rtol=1e-6, atol=1e-8)


def test_flash_attention_refusals(dev):
    at = Attn(dev, FLOAT, "BSND")
    mx, sm, out = at.outputs()
    b, n1, n2, s1, s2, d, dv = at.shape

    def fa(q=at.tq, k=at.tk, v=at.tv, layout=b"BSND", heads=n1, keep=1.0, sparse=0, mask=None, smax=mx, o=out):
        return dev.phase1("FlashAttentionScore", q, k, v, None, None, None, mask, None, 0.5, keep, 65536, 65536, heads,
                          layout, 0, sparse, smax, sm, None, o)

    assert fa() == 0
    for bad in (b"bsnd", b"TND", b"BSN", b""):
        assert fa(layout=bad) == INVALID, bad
    assert fa(layout=None) == NULLPTR
    assert fa(heads=3) == INVALID  # query has 4 heads
    assert fa(heads=0) == INVALID
    assert fa(k=dev.tensor(rand((b + 1, s2, n2, d)), FLOAT)) == INVALID  # batch differs
    assert fa(v=dev.tensor(rand((b, s2 + 1, n2, dv)), FLOAT)) == INVALID  # key and value differ in Skv
    assert fa(k=dev.tensor(rand((b, s2, 3, d)), FLOAT), v=dev.tensor(rand((b, s2, 3, dv)), FLOAT)) == INVALID  # 4 % 3
    assert fa(q=dev.tensor(np.zeros((b, s1, n1, d)), INT32)) == INVALID
    assert fa(k=dev.tensor(rand((b, s2, n2, d)), FLOAT16)) == INVALID  # dtypes must match
    assert fa(smax=dev.empty((b, n1, s1, 1), FLOAT)) == INVALID
    assert fa(smax=dev.empty((b, n1, s1, 8), FLOAT16)) == INVALID
    assert fa(o=dev.empty((b, s1, n1, d), FLOAT16)) == INVALID
    assert fa(smax=None) == NULLPTR
    assert fa(keep=0.0) == INVALID and fa(keep=1.5) == INVALID
    assert fa(keep=0.5) == INVALID  # dropout without the caller's mask
    assert fa(sparse=7, mask=dev.tensor(causal_compressed(), UINT8)) == INVALID
    assert fa(mask=dev.tensor(np.zeros((s1, s2 + 1)), BOOL)) == INVALID
    assert fa(mask=dev.tensor(np.zeros((s1, s2)), FLOAT)) == INVALID
    assert fa(sparse=3, mask=dev.tensor(np.zeros((s1, s2)), BOOL)) == INVALID  # causal modes take [2048, 2048]
    assert fa(layout=b"bsnd") == INVALID
    assert b'inputLayout "bsnd" is not BSH, SBH, BSND or BNSD' in dev.a.aclGetRecentErrMsg()


# ------------------------------------------------------------------------------------------------ RoPE

X_SHAPE = (2, 3, 4, 8)  # (B, S, N, D) read as BSND; the layouts only differ in which dims cos broadcasts over
ROPE_CASES = [(0, (1, 3, 1, 8)), (0, (2, 3, 4, 8)), (0, (2, 1, 4, 8)), (0, (1, 1, 1, 8)), (1, (1, 3, 1, 8)),
              (1, (1, 1, 4, 8)), (1, (2, 1, 1, 8))]


@pytest.mark.parametrize("dtype", FP, ids=ident)
@pytest.mark.parametrize("mode,cshape", ROPE_CASES)
def test_rotary_position_embedding(dev, mode, cshape, dtype):
    angles = rand(cshape, -3, 3)
    tx = dev.tensor(rand(X_SHAPE), dtype, "transposed")
    tc, ts = dev.tensor(np.cos(angles), dtype, "strided"), dev.tensor(np.sin(angles), dtype, "offset")
    out = dev.empty(X_SHAPE, dtype, "strided")
    dev.run("RotaryPositionEmbedding", tx, tc, ts, mode, out)
    x, c, s = (f64(t.host) for t in (tx, tc, ts))
    rounded(out.read(), rope(x, c, s, mode), dtype)


@pytest.mark.parametrize("dtype", FP, ids=ident)
@pytest.mark.parametrize("mode,cshape", ROPE_CASES)
def test_rotary_position_embedding_grad(dev, mode, cshape, dtype):
    angles = rand(cshape, -3, 3)
    tdy, tx = dev.tensor(rand(X_SHAPE), dtype, "offset"), dev.tensor(rand(X_SHAPE), dtype, "transposed")
    tc, ts = dev.tensor(np.cos(angles), dtype), dev.tensor(np.sin(angles), dtype, "strided")
    dx, dcos, dsin = dev.empty(X_SHAPE, dtype), dev.empty(cshape, dtype, "strided"), dev.empty(cshape, dtype)
    dev.run("RotaryPositionEmbeddingGrad", tdy, tc, ts, tx, mode, dx, dcos, dsin)
    want = rope_grad(*(f64(t.host) for t in (tdy, tc, ts, tx)), mode)
    for got, w in zip((dx, dcos, dsin), want):
        rounded(got.read(), w, dtype)


def test_rotary_position_embedding_grad_without_x_leaves_dcos_dsin(dev):
    """CANN's own example: no x, and empty [1,1,1,0] placeholders for dcos / dsin."""
    tdy, tc, ts = (dev.tensor(rand((1, 1, 1, 8)), FLOAT) for _ in range(3))
    dx, dcos, dsin = dev.empty((1, 1, 1, 8), FLOAT), dev.empty((1, 1, 1, 0), FLOAT), dev.empty((1, 1, 1, 0), FLOAT)
    dev.run("RotaryPositionEmbeddingGrad", tdy, tc, ts, None, 1, dx, dcos, dsin)
    rounded(dx.read(), rope_grad(*(f64(t.host) for t in (tdy, tc, ts)), np.zeros((1, 1, 1, 8)), 1)[0], FLOAT)
    assert dev.phase1("RotaryPositionEmbeddingGrad", tdy, tc, ts, None, 1, dx, None, dsin) == NULLPTR


def test_rotary_position_embedding_refusals(dev):
    x, out = dev.tensor(rand(X_SHAPE), FLOAT), dev.empty(X_SHAPE, FLOAT)

    def rope(cshape=(1, 3, 1, 8), mode=0, dtype=FLOAT, xx=x, o=out):
        c = dev.tensor(rand(cshape), dtype)
        return dev.phase1("RotaryPositionEmbedding", xx, c, c, mode, o)

    assert rope() == 0
    assert rope(mode=2) == TILING and rope(mode=3) == TILING and rope(mode=-1) == TILING  # A2/A3: half, interleave
    assert rope(cshape=(1, 3, 4, 8)) == TILING  # (1, S, N, D) is not a layout
    assert rope(cshape=(2, 3, 1, 8), mode=1) == TILING  # interleave broadcasts over two of the three dims
    assert rope(cshape=(1, 3, 1, 6)) == TILING
    assert rope(o=dev.empty((2, 3, 4, 6), FLOAT)) == TILING
    odd = dev.tensor(rand((2, 3, 4, 7)), FLOAT)
    assert rope(cshape=(1, 3, 1, 7), xx=odd, o=dev.empty((2, 3, 4, 7), FLOAT)) == TILING
    assert rope(dtype=FLOAT16) == INVALID  # cos / sin must have x's dtype
    assert rope(o=dev.empty(X_SHAPE, BF16)) == INVALID
    assert rope(xx=dev.tensor(rand((2, 3, 8)), FLOAT)) == TILING


# ---------------------------------------------------------------------------------------------- SwiGlu

@pytest.mark.parametrize("dtype", FP, ids=ident)
@pytest.mark.parametrize("dim", [-1, 1, 0])
def test_swiglu_and_its_grad(dev, dim, dtype):
    shape = (4, 6, 8)
    half = list(shape)
    half[dim] //= 2
    tx = dev.tensor(rand(shape, -3, 3), dtype, "transposed")
    out = dev.empty(half, dtype, "strided")
    dev.run("SwiGlu", tx, dim, out)
    rounded(out.read(), swiglu(f64(tx.host), dim), dtype)
    tg, dx = dev.tensor(rand(half), dtype, "offset"), dev.empty(shape, dtype)
    dev.run("SwiGluGrad", tg, tx, dim, dx)
    rounded(dx.read(), swiglu_grad(f64(tg.host), f64(tx.host), dim), dtype)


def test_swiglu_refusals(dev):
    x = dev.tensor(rand((4, 6)), FLOAT)
    assert dev.phase1("SwiGlu", x, -1, dev.empty((4, 3), FLOAT)) == 0
    assert dev.phase1("SwiGlu", x, 2, dev.empty((4, 3), FLOAT)) == INVALID  # dim outside [-2, 1]
    assert dev.phase1("SwiGlu", x, -3, dev.empty((4, 3), FLOAT)) == INVALID
    assert dev.phase1("SwiGlu", x, -1, dev.empty((4, 3), FLOAT16)) == INVALID  # out has x's dtype
    assert dev.phase1("SwiGlu", dev.tensor(np.zeros((4, 6)), INT32), -1, dev.empty((4, 3), INT32)) == INVALID
    assert dev.phase1("SwiGlu", x, -1, dev.empty((4, 6), FLOAT)) == TILING
    assert dev.phase1("SwiGlu", dev.tensor(rand((4, 5)), FLOAT), -1, dev.empty((4, 2), FLOAT)) == TILING  # odd
    assert dev.phase1("SwiGluGrad", dev.tensor(rand((4, 6)), FLOAT), x, -1, dev.empty((4, 6), FLOAT)) == TILING
    assert dev.phase1("SwiGluGrad", dev.tensor(rand((4, 3)), FLOAT), x, -1, dev.empty((4, 3), FLOAT)) == TILING


# --------------------------------------------------------------------------------------------- RmsNorm

RMS_DTYPES = [(FLOAT, FLOAT), (FLOAT16, FLOAT16), (FLOAT16, FLOAT), (BF16, BF16), (BF16, FLOAT)]


@pytest.mark.parametrize("xdt,gdt", RMS_DTYPES, ids=lambda v: base.DTYPE_NAMES[v])
@pytest.mark.parametrize("gshape,rshape", [((16,), (2, 3, 1)), ((3, 16), (2, 1, 1)), ((16,), (2, 3))])
def test_rms_norm_dtype_pairs_and_rstd_shapes(dev, xdt, gdt, gshape, rshape):
    tx, tg = dev.tensor(rand((2, 3, 16)), xdt, "strided"), dev.tensor(rand(gshape, 0.5, 1.5), gdt, "offset")
    y, rstd = dev.empty((2, 3, 16), xdt), dev.empty(rshape, FLOAT, "strided")
    dev.run("RmsNorm", tx, tg, 1e-5, y, rstd)
    want, r = rms_norm(f64(tx.host), f64(tg.host), 1e-5)
    rounded(y.read(), want, xdt)
    rounded(rstd.read(), r.reshape(rshape), FLOAT)


@pytest.mark.parametrize("xdt,gdt", RMS_DTYPES, ids=lambda v: base.DTYPE_NAMES[v])
@pytest.mark.parametrize("xshape,gshape,rshape", [((2, 3, 16), (16,), (2, 3, 1)), ((2, 1, 16), (16,), (2,)),
                                                  ((2, 3, 16), (3, 16), (2,))])
def test_rms_norm_grad(dev, xdt, gdt, xshape, gshape, rshape):
    x, g = rand(xshape), rand(gshape, 0.5, 1.5)
    _, r = rms_norm(x, g, 1e-6)
    tx, tdy = dev.tensor(x, xdt, "transposed"), dev.tensor(rand(xshape), xdt, "offset")
    tr, tg = dev.tensor(r.reshape(rshape), FLOAT), dev.tensor(g, gdt, "strided")
    dx, dg = dev.empty(xshape, xdt, "strided"), dev.empty(gshape, FLOAT)
    dev.run("RmsNormGrad", tdy, tx, tr, tg, dx, dg)
    want_dx, want_dg = rms_norm_grad(f64(tdy.host), f64(tx.host), f64(tr.host), f64(tg.host))
    rounded(dx.read(), want_dx, xdt)
    rounded(dg.read(), want_dg, FLOAT)


def test_rms_norm_grad_is_the_derivative_of_rms_norm(dev):
    """The device's forward and backward agree: dx matches finite differences of sum(dy * RmsNorm(x))."""
    x, g, dy = rand((3, 8)), rand((8,), 0.5, 1.5), rand((3, 8))
    tx, tg, tdy = dev.tensor(x, FLOAT), dev.tensor(g, FLOAT), dev.tensor(dy, FLOAT)
    y, rstd = dev.empty((3, 8), FLOAT), dev.empty((3, 1), FLOAT)
    dev.run("RmsNorm", tx, tg, 1e-6, y, rstd)
    dx, dg = dev.empty((3, 8), FLOAT), dev.empty((8,), FLOAT)
    dev.run("RmsNormGrad", tdy, tx, rstd, tg, dx, dg)
    xs, gs, ds, h, num = f64(tx.host), f64(tg.host), f64(tdy.host), 1e-6, np.zeros((3, 8))

    def loss(v):
        return (ds * rms_norm(v, gs, 1e-6)[0]).sum()
    for idx in np.ndindex(xs.shape):
        e = np.zeros_like(xs)
        e[idx] = h
        num[idx] = (loss(xs + e) - loss(xs - e)) / (2 * h)
    close(dx.read(), num, FLOAT, scale=10)


def test_rms_norm_refusals(dev):
    x, g = dev.tensor(rand((4, 16)), FLOAT), dev.tensor(rand((16,)), FLOAT)
    y, r = dev.empty((4, 16), FLOAT), dev.empty((4, 1), FLOAT)
    assert dev.phase1("RmsNorm", x, dev.tensor(rand((16,)), FLOAT16), 1e-6, y, r) == INVALID  # fp32 x, fp16 gamma
    assert dev.phase1("RmsNorm", x, g, 1e-6, dev.empty((4, 16), FLOAT16), r) == INVALID
    assert dev.phase1("RmsNorm", x, dev.tensor(rand((8,)), FLOAT), 1e-6, y, r) == TILING
    assert dev.phase1("RmsNorm", x, g, 1e-6, y, dev.empty((2, 1), FLOAT)) == TILING
    assert dev.phase1("RmsNorm", x, g, -1.0, y, r) == TILING
    dx, dg = dev.empty((4, 16), FLOAT), dev.empty((16,), FLOAT)
    assert dev.phase1("RmsNormGrad", x, x, r, g, dx, dg) == 0
    assert dev.phase1("RmsNormGrad", x, x, r, g, dx, dev.empty((16,), FLOAT16)) == INVALID  # dgamma is FLOAT
    assert dev.phase1("RmsNormGrad", x, x, dev.tensor(rand((2, 1)), FLOAT), g, dx, dg) == TILING
    assert dev.phase1("RmsNormGrad", x, x, r, dev.tensor(rand((8,)), FLOAT), dx, dg) == TILING
    assert dev.phase1("RmsNormGrad", dev.tensor(rand((4, 8)), FLOAT), x, r, g, dx, dg) == TILING
    assert dev.phase1("RmsNormGrad", x, x, r, g, None, dg) == NULLPTR


# ------------------------------------------------------------------------------------------ cross entropy

@pytest.mark.parametrize("dtype", FP, ids=ident)
@pytest.mark.parametrize("ttype", [INT64, INT32, UINT8], ids=ident)
@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_cross_entropy_forward_and_backward_as_torch_npu_runs_it(dev, dtype, ttype, reduction):
    """log_softmax -> nll_loss -> nll_loss_backward -> log_softmax_backward equals the analytic gradient."""
    n, c, ignore = 6, 5, 3
    tx, tw = dev.tensor(rand((n, c), -3, 3), dtype, "transposed"), dev.tensor(rand((c,), 0.5, 2), dtype, "strided")
    target = rng.integers(0, c, n)
    target[1] = ignore  # ignoreIndex is a real class here: its samples drop out
    tt = dev.tensor(target, ttype, "offset")
    logp = dev.empty((n, c), dtype)
    dev.run("LogSoftmax", tx, 1, logp)
    loss, total = dev.empty((n,) if reduction == 0 else (), dtype), dev.empty((1,), dtype)
    dev.run("NLLLoss", logp, tt, tw, reduction, ignore, loss, total)
    x, w = f64(tx.host), f64(tw.host)
    want_loss, want_total = nll_loss(f64(logp.read()), target, w, reduction, ignore)
    rounded(loss.read(), want_loss, dtype)
    if reduction:
        rounded(total.read(), want_total, dtype)
    tg = dev.tensor(rand((n,)) if reduction == 0 else np.array(1.5), dtype)
    dlogp, dx = dev.empty((n, c), dtype, "strided"), dev.empty((n, c), dtype)
    dev.run("NLLLossBackward", tg, logp, tt, tw, reduction, ignore, total, dlogp)
    dev.run("LogSoftmaxBackward", dlogp, logp, -1, dx)
    want_dlogp = nll_loss_backward(f64(tg.host), f64(logp.read()), target, w, reduction, ignore, f64(total.read()))
    rounded(dlogp.read(), want_dlogp, dtype)
    rounded(dx.read(), log_softmax_backward(f64(dlogp.read()), f64(logp.read()), -1), dtype)
    if dtype == FLOAT:  # and the chain is the gradient of cross entropy itself: (softmax(x) - onehot(t)) times the
        # weight each sample's loss carries (w[t] g, over the total weight for mean: minus its dlogp entry)
        carried = -want_dlogp.sum(axis=1, keepdims=True)
        close(dx.read(), (np.exp(log_softmax(x, -1)) - np.eye(c)[target]) * carried, FLOAT, scale=20)


def test_nll_loss_of_one_sample_and_empty_batch(dev):
    tx, tw = dev.tensor(log_softmax(rand((4,)), -1), FLOAT), dev.tensor(np.ones(4), FLOAT)
    out, total = dev.empty((), FLOAT), dev.empty((1,), FLOAT)
    dev.run("NLLLoss", tx, dev.tensor(np.array(2), INT64), tw, 0, -100, out, total)  # (C) with a 0-d target
    rounded(out.read(), -f64(tx.host[2]), FLOAT)
    empty, et = dev.tensor(np.zeros((0, 4)), FLOAT), dev.tensor(np.zeros((0,)), INT64)
    dev.run("NLLLoss", empty, et, tw, 1, -100, out, total)
    assert np.isnan(out.read()) and total.read()[0] == 0  # mean of nothing, as torch


def test_nll_loss_target_out_of_range_is_a_kernel_fault(dev):
    tx, tw = dev.tensor(rand((2, 3)), FLOAT), dev.tensor(np.ones(3), FLOAT)
    out, total = dev.empty((), FLOAT), dev.empty((1,), FLOAT)
    dev.run("NLLLoss", tx, dev.tensor(np.array([0, 7]), INT64), tw, 2, -100, out, total,
            expect_sync=base.AICORE_EXCEPTION)


def test_cross_entropy_refusals(dev):
    x, w, t = dev.tensor(rand((4, 3)), FLOAT), dev.tensor(np.ones(3), FLOAT), dev.tensor(np.zeros(4), INT64)
    out, total = dev.empty((4,), FLOAT), dev.empty((1,), FLOAT)
    assert dev.phase1("NLLLoss", x, t, w, 0, -100, out, total) == 0
    assert dev.phase1("NLLLoss", x, t, w, 3, -100, out, total) == INVALID  # reduction 0-2
    assert dev.phase1("NLLLoss", x, t, None, 0, -100, out, total) == NULLPTR  # weight is required
    assert dev.phase1("NLLLoss", x, t, dev.tensor(np.ones(3), FLOAT16), 0, -100, out, total) == INVALID
    assert dev.phase1("NLLLoss", x, dev.tensor(np.zeros(4), FLOAT), w, 0, -100, out, total) == INVALID
    assert dev.phase1("NLLLoss", x, dev.tensor(np.zeros(5), INT64), w, 0, -100, out, total) == INVALID
    assert dev.phase1("NLLLoss", x, t, dev.tensor(np.ones(4), FLOAT), 0, -100, out, total) == INVALID
    assert dev.phase1("NLLLoss", x, t, w, 1, -100, out, total) == INVALID  # a mean is one element
    assert dev.phase1("NLLLoss", x, t, w, 0, -100, dev.empty((4,), INT32), total) == INVALID  # float -> int
    dx = dev.empty((4, 3), FLOAT)
    assert dev.phase1("NLLLossBackward", dev.tensor(rand((4,)), FLOAT), x, t, w, 0, -100, total, dx) == 0
    assert dev.phase1("NLLLossBackward", dev.tensor(rand((3,)), FLOAT), x, t, w, 0, -100, total, dx) == INVALID
    assert dev.phase1("NLLLossBackward", dev.tensor(rand((4,)), FLOAT16), x, t, w, 0, -100, total, dx) == INVALID
    assert dev.phase1("LogSoftmaxBackward", x, dev.tensor(rand((4, 3)), FLOAT16), 1, dx) == INVALID
    assert dev.phase1("LogSoftmaxBackward", x, x, 2, dx) == INVALID
    assert dev.phase1("LogSoftmaxBackward", x, x, 1, dev.empty((3, 4), FLOAT)) == INVALID


# ------------------------------------------------------------------------------------------- common ops

INTS = [INT32, INT64, INT8]


def values_for(dtype, shape, lo=-4, hi=4):
    if dtype == BOOL:
        return rng.random(shape) < 0.5
    return rng.integers(lo, hi, shape) if dtype in INTS + [UINT8] else rand(shape, lo, hi)


def exact_or_rounded(got, want, dtype):
    if dtype in INTS + [UINT8, BOOL]:
        np.testing.assert_array_equal(got, want)
    else:
        rounded(got, want, dtype)


@pytest.mark.parametrize("dtype", FP + INTS + [BOOL], ids=ident)
def test_abs(dev, dtype):
    tx = dev.tensor(values_for(dtype, (3, 4)), dtype, "transposed")
    out = dev.empty((3, 4), dtype, "strided")
    dev.run("Abs", tx, out)
    exact_or_rounded(out.read(), np.abs(f64(tx.host)).astype(out.read().dtype), dtype)
    assert dev.phase1("Abs", tx, dev.empty((3, 4), FLOAT if dtype != FLOAT else FLOAT16)) == INVALID


UNARY = {"Rsqrt": (lambda x: 1 / np.sqrt(x), (0.2, 4)), "Sigmoid": (sigmoid, (-6, 6)), "Tanh": (np.tanh, (-3, 3))}


@pytest.mark.parametrize("dtype", FP, ids=ident)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_float_unary_ops(dev, name, dtype):
    fn, (lo, hi) = UNARY[name]
    tx, out = dev.tensor(rand((3, 5), lo, hi), dtype, "offset"), dev.empty((3, 5), dtype, "transposed")
    dev.run(name, tx, out)
    rounded(out.read(), fn(f64(tx.host)), dtype)


def test_unary_ops_on_integers_give_floats(dev):
    ti = dev.tensor(np.array([[1, 2, 3], [4, 9, 16]]), INT32)
    for name, fn in (("Rsqrt", lambda x: 1 / np.sqrt(x)), ("Tanh", np.tanh)):
        out = dev.empty((2, 3), FLOAT)
        dev.run(name, ti, out)
        rounded(out.read(), fn(f64(ti.host)), FLOAT)
        assert dev.phase1(name, ti, dev.empty((2, 3), INT32)) == INVALID  # the result is floating
    assert dev.phase1("Sigmoid", ti, dev.empty((2, 3), FLOAT)) == INVALID  # Sigmoid takes floats only


@pytest.mark.parametrize("dtype", FP, ids=ident)
def test_inplace_exp_and_sqrt(dev, dtype):
    for name, fn in (("InplaceExp", np.exp), ("InplaceSqrt", np.sqrt)):
        t = dev.tensor(rand((4, 3), 0.1, 3), dtype, "transposed")
        dev.run(name, t)
        rounded(t.read(), fn(f64(t.host)), dtype)
        assert dev.phase1(name, dev.tensor(np.ones(3), INT32)) == INVALID


@pytest.mark.parametrize("dtype", FP + [INT32], ids=ident)
def test_clamp(dev, dtype):
    x = values_for(dtype, (4, 5), -5, 5)
    if dtype != INT32:
        x[0, 0] = np.nan
    tx = dev.tensor(x, dtype, "strided")
    for lo, hi in ((-1, 2), (None, 0), (1, None), (3, -2)):  # the last: min wins, as the docs' max(min(x, hi), lo)
        out = dev.empty((4, 5), dtype)
        args = [dev.scalar(v, INT64) if v is not None else None for v in (lo, hi)]
        dev.run("Clamp", tx, *args, out)
        want = f64(tx.host)
        want = np.minimum(want, hi) if hi is not None else want
        want = np.maximum(want, lo) if lo is not None else want
        exact_or_rounded(out.read(), want.astype(out.read().dtype) if dtype == INT32 else want, dtype)
    assert dev.phase1("Clamp", tx, None, None, dev.empty((4, 5), dtype)) == NULLPTR


def test_inplace_tanh_and_inplace_pow_tensor_scalar(dev):
    t = dev.tensor(rand((3, 4)), BF16, "transposed")
    dev.run("InplaceTanh", t)
    rounded(t.read(), np.tanh(f64(t.host)), BF16)
    p = dev.tensor(rand((3, 4), 0.5, 2), FLOAT16, "strided")
    dev.run("InplacePowTensorScalar", p, dev.scalar(1.5))
    rounded(p.read(), f64(p.host) ** 1.5, FLOAT16)
    ti = dev.tensor(np.array([1, 2, 3]), INT32)
    dev.run("InplacePowTensorScalar", ti, dev.scalar(2, INT64))
    np.testing.assert_array_equal(ti.read(), [1, 4, 9])
    assert dev.phase1("InplacePowTensorScalar", ti, dev.scalar(0.5)) == INVALID  # fp32 result into int32
    assert dev.phase1("InplaceTanh", dev.tensor(np.ones(3), INT32)) == INVALID


def test_clamp_of_integers_by_a_float_bound_is_floating(dev):
    ti = dev.tensor(np.arange(-3, 3), INT32)
    out = dev.empty((6,), FLOAT)
    dev.run("Clamp", ti, dev.scalar(-1.5), dev.scalar(1.25), out)
    np.testing.assert_array_equal(out.read(), np.clip(np.arange(-3, 3), -1.5, 1.25))
    assert dev.phase1("Clamp", ti, dev.scalar(-1.5), None, dev.empty((6,), INT32)) == INVALID


@pytest.mark.parametrize("dtype", FP, ids=ident)
def test_pow_tensor_scalar_and_tensor_tensor(dev, dtype):
    tx = dev.tensor(rand((3, 1, 4), 0.5, 2), dtype, "transposed")
    out = dev.empty((3, 1, 4), dtype)
    dev.run("PowTensorScalar", tx, dev.scalar(2.5), out)
    rounded(out.read(), f64(tx.host) ** 2.5, dtype)
    te = dev.tensor(rand((2, 4), -2, 2), FLOAT16, "strided")  # promoted with dtype: fp32 unless both fp16
    want_dtype = FLOAT16 if dtype == FLOAT16 else FLOAT
    out2 = dev.empty((3, 2, 4), want_dtype)
    dev.run("PowTensorTensor", tx, te, out2)
    rounded(out2.read(), f64(tx.host) ** f64(te.host), want_dtype)


def test_pow_promotion_and_refusals(dev):
    ti = dev.tensor(np.array([1, 2, 3, 4]), INT32)
    out = dev.empty((4,), INT32)
    dev.run("PowTensorScalar", ti, dev.scalar(3, INT64), out)
    np.testing.assert_array_equal(out.read(), [1, 8, 27, 64])
    fout = dev.empty((4,), FLOAT)
    dev.run("PowTensorScalar", ti, dev.scalar(0.5), fout)  # an int tensor with a float exponent: fp32
    rounded(fout.read(), np.sqrt([1.0, 2, 3, 4]), FLOAT)
    assert dev.phase1("PowTensorScalar", ti, dev.scalar(0.5), out) == INVALID  # fp32 result into int32
    assert dev.phase1("PowTensorScalar", ti, dev.scalar(-1, INT64), out) == INVALID  # integral power below 0
    tb = dev.tensor(np.array([True, False]), BOOL)
    assert dev.phase1("PowTensorScalar", tb, dev.scalar(1, BOOL), dev.empty((2,), BOOL)) == INVALID
    assert dev.phase1("PowTensorTensor", tb, tb, dev.empty((2,), BOOL)) == INVALID
    assert dev.phase1("PowTensorTensor", ti, dev.tensor(np.ones(3), FLOAT), fout) == INVALID  # no broadcast
    assert dev.phase1("PowTensorTensor", ti, dev.tensor(np.ones(4), UINT16), fout) == INVALID  # no promotion


@pytest.mark.parametrize("sdt,odt", [(FLOAT, FLOAT), (FLOAT16, FLOAT), (FLOAT, BF16), (INT32, INT32), (INT64, INT8)],
                         ids=ident)
def test_inplace_sub_and_div(dev, sdt, odt):
    s, o = values_for(sdt, (3, 4), 1, 9), values_for(odt, (4,), 1, 5)
    alpha_type = INT64 if sdt in INTS else FLOAT
    for name, fn in (("InplaceSub", lambda a, b: a - 2 * b), ("InplaceDiv", lambda a, b: a / b)):
        t, other = dev.tensor(s, sdt, "transposed"), dev.tensor(o, odt, "strided")
        args = (dev.scalar(2, alpha_type),) if name == "InplaceSub" else ()
        dev.run(name, t, other, *args)
        want = fn(f64(t.host), f64(other.host))
        exact_or_rounded(t.read(), np.trunc(want).astype(np.int64) if sdt in INTS else want, sdt)


def test_inplace_sub_and_div_refusals(dev):
    ti, tf = dev.tensor(np.ones((2, 3)), INT32), dev.tensor(rand((2, 3)), FLOAT)
    assert dev.phase1("InplaceSub", ti, tf, dev.scalar(1, INT64)) == INVALID  # fp32 result into int32
    assert dev.phase1("InplaceSub", ti, ti, dev.scalar(0.5)) == INVALID  # a floating alpha for integers
    assert dev.phase1("InplaceSub", tf, dev.tensor(rand((3, 3)), FLOAT), dev.scalar(1.0)) == INVALID
    assert dev.phase1("InplaceDiv", dev.tensor(rand((3,)), FLOAT), tf) == INVALID  # (2,3) does not fit (3,)
    assert dev.phase1("InplaceDiv", ti, tf) == INVALID
    assert dev.phase1("InplaceSub", tf, tf, None) == NULLPTR


def test_swhere_broadcasts_and_promotes(dev):
    cond = rng.random((2, 1, 4)) < 0.5
    tc, ts = dev.tensor(cond, BOOL, "strided"), dev.tensor(rng.integers(-9, 9, (3, 4)), INT32)
    to = dev.tensor(rand((4,)), FLOAT16, "offset")
    out = dev.empty((2, 3, 4), FLOAT)  # int32 with fp16 computes in fp16, cast to the fp32 out
    dev.run("SWhere", tc, ts, to, out)
    rounded(out.read(), np.where(cond, as_dtype(f64(ts.host), FLOAT16), f64(to.host)), FLOAT)
    dev.run("SWhere", dev.tensor(cond.astype(np.uint8), UINT8), ts, to, out)
    rounded(out.read(), np.where(cond, as_dtype(f64(ts.host), FLOAT16), f64(to.host)), FLOAT)
    assert dev.phase1("SWhere", tc, ts, to, dev.empty((2, 3, 4), INT32)) == INVALID  # fp16 into int32
    assert dev.phase1("SWhere", tc, ts, to, dev.empty((3, 4), FLOAT)) == INVALID
    assert dev.phase1("SWhere", dev.tensor(cond, FLOAT), ts, to, out) == INVALID


@pytest.mark.parametrize("dtype", FP, ids=ident)
@pytest.mark.parametrize("bias", [(5,), (4, 1), (4, 5)])
def test_addmm(dev, dtype, bias):
    tb, t1 = dev.tensor(rand(bias), dtype, "strided"), dev.tensor(rand((4, 3)), dtype, "transposed")
    t2, out = dev.tensor(rand((3, 5)), dtype, "offset"), dev.empty((4, 5), dtype)
    ws = dev.run("Addmm", tb, t1, t2, dev.scalar(0.5), dev.scalar(2.0), out, 0)
    assert ws > 0
    rounded(out.read(), 0.5 * f64(tb.host) + 2 * f64(t1.host) @ f64(t2.host), dtype)


@pytest.mark.parametrize("dtype", FP, ids=ident)
def test_inplace_addmm(dev, dtype):
    ts, t1, t2 = dev.tensor(rand((4, 5)), dtype, "transposed"), dev.tensor(rand((4, 3)), dtype), dev.tensor(
        rand((3, 5)), dtype, "strided")
    dev.run("InplaceAddmm", ts, t1, t2, dev.scalar(1.5), dev.scalar(-1.0), 0)
    rounded(ts.read(), 1.5 * f64(ts.host) - f64(t1.host) @ f64(t2.host), dtype)
    one = dev.scalar(1.0)
    assert dev.phase1("InplaceAddmm", dev.tensor(rand((5,)), dtype), t1, t2, one, one, 0) == INVALID  # selfRef (m,n)


def test_addmm_beta_zero_drops_self_and_refusals(dev):
    tb, t1, t2 = dev.tensor(np.full((2, 2), np.nan), FLOAT), dev.tensor(rand((2, 3)), FLOAT), dev.tensor(rand((3, 2)),
                                                                                                       FLOAT)
    out = dev.empty((2, 2), FLOAT)
    dev.run("Addmm", tb, t1, t2, dev.scalar(0.0), dev.scalar(1.0), out, 0)
    rounded(out.read(), f64(t1.host) @ f64(t2.host), FLOAT)
    one = dev.scalar(1.0)
    assert dev.phase1("Addmm", tb, t1, t1, one, one, out, 0) == INVALID  # (2,3) @ (2,3)
    assert dev.phase1("Addmm", dev.tensor(rand((3,)), FLOAT), t1, t2, one, one, out, 0) == INVALID
    assert dev.phase1("Addmm", tb, t1, t2, one, one, dev.empty((2, 2), FLOAT16), 0) == INVALID  # promoted: fp32
    assert dev.phase1("Addmm", tb, t1, t2, one, one, out, 9) == INVALID
    assert dev.phase1("Addmm", tb, t1, t2, None, one, out, 0) == NULLPTR


@pytest.mark.parametrize("dtype", [FLOAT, FLOAT16, BF16, INT64], ids=ident)
@pytest.mark.parametrize("dim,keep", [(1, False), (-1, True), (0, False)])
def test_argmax_and_max_dim(dev, dtype, dim, keep):
    x = values_for(dtype, (3, 4, 5), -3, 3)  # small integers: ties, resolved to the first index
    if dtype == FLOAT:
        x[1, 2, 3] = np.nan
    tx = dev.tensor(x, dtype, "transposed")
    xs = f64(tx.host)
    nan = np.isnan(xs)
    idx = np.where(nan.any(axis=dim), np.argmax(nan, axis=dim), np.argmax(np.where(nan, -np.inf, xs), axis=dim))
    mx = np.where(nan.any(axis=dim), np.nan, np.nanmax(np.where(nan, -np.inf, xs), axis=dim))
    shape = np.expand_dims(idx, dim).shape if keep else idx.shape
    out_idx = dev.empty(shape, INT64)
    dev.run("ArgMax", tx, dim, keep, out_idx)
    np.testing.assert_array_equal(out_idx.read().reshape(idx.shape), idx)
    values, indices = dev.empty(shape, dtype, "strided"), dev.empty(shape, INT32)
    dev.run("MaxDim", tx, dim, keep, values, indices)
    np.testing.assert_array_equal(indices.read().reshape(idx.shape), idx)
    np.testing.assert_array_equal(f64(values.read()).reshape(mx.shape), mx)


def test_argmax_and_max_dim_refusals(dev):
    tx = dev.tensor(rand((3, 4)), FLOAT)
    assert dev.phase1("ArgMax", tx, 2, False, dev.empty((3,), INT64)) == INVALID
    assert dev.phase1("ArgMax", tx, 1, False, dev.empty((3,), FLOAT)) == INVALID  # indices are int32 / int64
    assert dev.phase1("ArgMax", tx, 1, False, dev.empty((3, 1), INT64)) == INVALID  # keepdim false: (3,)
    assert dev.phase1("MaxDim", tx, 1, True, dev.empty((3, 1), FLOAT16), dev.empty((3, 1), INT64)) == INVALID
    assert dev.phase1("MaxDim", dev.tensor(np.ones((3, 4)), INT32), 1, True, dev.empty((3, 1), INT32),
                      dev.empty((3, 1), INT64)) == INVALID  # A2/A3: no int32 self
    assert dev.phase1("MaxDim", tx, 1, True, None, dev.empty((3, 1), INT64)) == NULLPTR


@pytest.mark.parametrize("dtype", [FLOAT, FLOAT16, BF16, INT32], ids=ident)
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dim,k", [(-1, 3), (0, 2), (1, 0)])
def test_topk(dev, dtype, largest, dim, k):
    x = values_for(dtype, (4, 6), -20, 20)
    tx = dev.tensor(x, dtype, "strided")
    xs = f64(tx.host)
    order = np.argsort(-xs if largest else xs, axis=dim, kind="stable")  # ties: the lower index first
    idx = np.take(order, np.arange(k), axis=dim)
    shape = idx.shape
    values, indices = dev.empty(shape, dtype, "transposed"), dev.empty(shape, INT64)
    dev.run("Topk", tx, k, dim, largest, True, values, indices)
    np.testing.assert_array_equal(indices.read(), idx)
    np.testing.assert_array_equal(f64(values.read()), np.take_along_axis(xs, idx, axis=dim))


def test_topk_ranks_nan_highest_and_refusals(dev):
    tx = dev.tensor(np.array([1.0, np.nan, 3.0, 2.0]), FLOAT)
    values, indices = dev.empty((2,), FLOAT), dev.empty((2,), INT64)
    dev.run("Topk", tx, 2, 0, True, True, values, indices)
    np.testing.assert_array_equal(indices.read(), [1, 2])
    dev.run("Topk", tx, 2, 0, False, True, values, indices)
    np.testing.assert_array_equal(indices.read(), [0, 3])
    assert dev.phase1("Topk", tx, 5, 0, True, True, dev.empty((5,), FLOAT), dev.empty((5,), INT64)) == INVALID
    assert dev.phase1("Topk", tx, 2, 0, True, True, values, dev.empty((2,), INT32)) == INVALID
    assert dev.phase1("Topk", tx, 2, 1, True, True, values, indices) == INVALID


@pytest.mark.parametrize("itype", [INT32, INT64], ids=ident)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_select(dev, itype, dim):
    x = rand((3, 4, 5))
    tx = dev.tensor(x, BF16, "transposed")
    ids = rng.integers(0, x.shape[dim], 6)
    ti = dev.tensor(ids, itype, "strided")
    out = dev.empty(np.take(x, ids, axis=dim).shape, BF16)
    dev.run("IndexSelect", tx, dim, ti, out)
    np.testing.assert_array_equal(out.read(), np.take(tx.host, ids, axis=dim))
    one = dev.empty(np.take(x, [2], axis=dim).shape, BF16)
    dev.run("IndexSelect", tx, dim, dev.tensor(np.array(2), itype), one)  # a 0-d index is one index
    np.testing.assert_array_equal(one.read(), np.take(tx.host, [2], axis=dim))


def test_index_select_refusals_and_fault(dev):
    tx, out = dev.tensor(rand((3, 4)), FLOAT), dev.empty((3, 2), FLOAT)
    assert dev.phase1("IndexSelect", tx, 1, dev.tensor(np.zeros((1, 2)), INT64), out) == INVALID  # 2-D index
    assert dev.phase1("IndexSelect", tx, 1, dev.tensor(np.zeros(2), FLOAT), out) == INVALID
    assert dev.phase1("IndexSelect", tx, 2, dev.tensor(np.zeros(2), INT64), out) == INVALID
    assert dev.phase1("IndexSelect", tx, 1, dev.tensor(np.zeros(2), INT64), dev.empty((3, 2), FLOAT16)) == INVALID
    dev.run("IndexSelect", tx, 1, dev.tensor(np.array([0, 4]), INT64), out, expect_sync=base.AICORE_EXCEPTION)


@pytest.mark.parametrize("sdt,odt", [(FLOAT, FLOAT), (FLOAT16, FLOAT16), (BF16, FLOAT), (FLOAT, FLOAT16),
                                     (INT32, INT64), (INT32, FLOAT)], ids=ident)
@pytest.mark.parametrize("dim", [0, -1])
def test_cumsum(dev, sdt, odt, dim):
    tx = dev.tensor(values_for(sdt, (4, 6), -5, 5), sdt, "transposed")
    out = dev.empty((4, 6), odt, "strided")
    dev.run("Cumsum", tx, dim, odt, out)
    # self is cast to out's dtype first (the docs), then summed
    want = np.cumsum(as_dtype(f64(tx.host), odt) if odt not in INTS else f64(tx.host), axis=dim)
    exact_or_rounded(out.read(), want, odt)


def test_cumsum_refusals(dev):
    tx, out = dev.tensor(rand((2, 3)), FLOAT), dev.empty((2, 3), FLOAT)
    assert dev.phase1("Cumsum", tx, 0, FLOAT16, out) == INVALID  # dtype must be out's
    assert dev.phase1("Cumsum", tx, 0, INT32, dev.empty((2, 3), INT32)) == INVALID  # fp32 cannot become int32
    assert dev.phase1("Cumsum", tx, 2, FLOAT, out) == INVALID
    assert dev.phase1("Cumsum", tx, 0, FLOAT, dev.empty((3, 2), FLOAT)) == INVALID
