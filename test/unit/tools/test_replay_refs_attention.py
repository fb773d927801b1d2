"""replay's references of FlashAttentionScore(V2) and FlashAttentionScoreGrad(V2) against numpy written here from the ops'
docs (ops-transformer attention/flash_attention_score*/docs, docs/context/sparse_mode参数说明.md):

    attention_out = Dropout(Softmax(Mask(scale * (pse + query @ key^T), atten_mask)), keep_prob) @ value

in the four layouts, with grouped-query heads, each sparse mode's geometry, pse, a dropout mask and the softmax statistics
outputs ([B, N, Sq, 8]). The backward is checked twice: against the closed form of FlashAttention's backward and against
central differences of the numpy forward (no formula for the gradient at all). A kernel dumped with an output computed
from a plausible misreading (the other causal corner, query heads mapped round-robin onto the key heads, pse added after
the scaling in V1) is an error: the reference tells them apart. Each test writes a hand-made tensor dump
(replay_dumps.py) and reads replay's CSVs.
"""
import numpy as np
import pytest

from replay_dumps import Dump, Replay, T

RNG = np.random.default_rng(42)
COMPRESSED = np.triu(np.ones((2048, 2048), dtype=bool), 1)  # the [2048, 2048] mask modes 2, 3, 4 and 6 take


# ---- numpy: the definition ----------------------------------------------------------------------------------------
def to_bnsd(x, layout, n):
    if layout == "BSH":
        b, s, h = x.shape
        return x.reshape(b, s, n, h // n).transpose(0, 2, 1, 3)
    if layout == "SBH":
        s, b, h = x.shape
        return x.reshape(s, b, n, h // n).transpose(1, 2, 0, 3)
    if layout == "BSND":
        return x.transpose(0, 2, 1, 3)
    return x


def from_bnsd(y, layout):
    b, n, s, d = y.shape
    if layout == "BSH":
        return y.transpose(0, 2, 1, 3).reshape(b, s, n * d)
    if layout == "SBH":
        return y.transpose(2, 0, 1, 3).reshape(s, b, n * d)
    if layout == "BSND":
        return y.transpose(0, 2, 1, 3)
    return y


def masked(mode, shape, mask, pre, nxt, prefix):
    """True where a score is masked: [B, N, Sq, Skv]."""
    b, n, sq, skv = shape
    i, j = np.arange(sq)[:, None], np.arange(skv)[None, :]
    corner = skv - sq  # the bottom-right diagonal
    if mask is None:
        return np.zeros(shape, bool)
    if mode in (0, 1, 5):  # the mask as given
        given = np.broadcast_to(mask.astype(bool), shape)
        return given | (j - i > nxt) | (i - j > pre) if mode == 0 else given
    # the compressed mask's values are not read: the mode's geometry
    if mode == 6:
        m = (j > i + corner)[None] & (j[None] >= np.asarray(prefix)[:, None, None])
        return np.broadcast_to(m[:, None], shape)
    geometry = {2: j > i, 3: j > i + corner, 4: (j > i + corner + nxt) | (j < i + corner - pre)}
    return np.broadcast_to(geometry[mode], shape)


class Attention:
    """One FlashAttention problem: inputs in their layout, and the forward computed from the definition."""

    def __init__(self, layout="BSND", b=2, nq=4, nkv=2, sq=5, skv=5, d=8, dv=None, mode=0, mask=None, pre=65536,
                 nxt=65536, prefix=None, pse=None, drop=None, keep=1.0, scale=None, gqa="repeat", pse_after=False):
        self.layout, self.nq, self.nkv, self.mode = layout, nq, nkv, mode
        self.mask, self.pre, self.nxt, self.prefix, self.pse, self.drop, self.keep = mask, pre, nxt, prefix, pse, drop, keep
        dv = dv or d
        self.scale = scale if scale is not None else 1 / np.sqrt(d)
        self.q = from_bnsd(RNG.normal(size=(b, nq, sq, d)), layout)
        self.k = from_bnsd(RNG.normal(size=(b, nkv, skv, d)), layout)
        self.v = from_bnsd(RNG.normal(size=(b, nkv, skv, dv)), layout)
        self.gqa, self.pse_after = gqa, pse_after
        self.smax, self.ssum, self.out = self.forward(self.q, self.k, self.v)

    def heads(self, k):
        """Key / value heads per query head: head n reads n // (Nq / Nkv); "tile" is the misreading n % Nkv."""
        g = self.nq // self.nkv
        return np.repeat(k, g, axis=1) if self.gqa == "repeat" else np.tile(k, (1, g, 1, 1))

    def keep_factor(self, shape):
        if self.drop is None:
            return np.ones(shape)
        bits = np.unpackbits(self.drop, bitorder="little")[:int(np.prod(shape))].reshape(shape)
        return bits / self.keep

    def probabilities(self, q, k):
        Q, K = to_bnsd(q, self.layout, self.nq), self.heads(to_bnsd(k, self.layout, self.nkv))
        qk = Q @ K.transpose(0, 1, 3, 2)
        pse = 0 if self.pse is None else self.pse
        s = self.scale * qk + pse if self.pse_after else self.scale * (qk + pse)
        m = masked(self.mode, s.shape, self.mask, self.pre, self.nxt, self.prefix)
        s = np.where(m, -np.inf, s)
        mx = s.max(-1, keepdims=True)
        with np.errstate(invalid="ignore"):  # a fully masked row: NaN, not judged
            e = np.exp(s - mx)
            return s, e / e.sum(-1, keepdims=True), mx, e.sum(-1, keepdims=True)

    def forward(self, q, k, v):
        _, p, mx, sm = self.probabilities(q, k)
        V = self.heads(to_bnsd(v, self.layout, self.nkv))
        out = (p * self.keep_factor(p.shape)) @ V
        return np.repeat(mx, 8, -1), np.repeat(sm, 8, -1), from_bnsd(out, self.layout)

    def backward(self, dy):
        """FlashAttention's backward in closed form, P rebuilt from the statistics the forward wrote:
        dS = P * (dP * keep - rowsum(dO * O))."""
        s, _, _, _ = self.probabilities(self.q, self.k)
        with np.errstate(invalid="ignore"):
            p = np.where(np.isneginf(s), 0.0, np.exp(s - self.smax[..., :1]) / self.ssum[..., :1])
        keep = self.keep_factor(p.shape)
        Q, dO, O = (to_bnsd(x, self.layout, self.nq) for x in (self.q, dy, self.out))
        K, V = (self.heads(to_bnsd(x, self.layout, self.nkv)) for x in (self.k, self.v))
        dP = dO @ V.transpose(0, 1, 3, 2)
        dS = p * (dP * keep - (dO * O).sum(-1, keepdims=True))
        dQ = self.scale * dS @ K
        dK = self.scale * dS.transpose(0, 1, 3, 2) @ Q
        dV = (p * keep).transpose(0, 1, 3, 2) @ dO
        b, _, skv, _ = dK.shape
        group = lambda x: x.reshape(b, self.nkv, self.nq // self.nkv, skv, x.shape[-1]).sum(2)  # noqa: E731
        return from_bnsd(dQ, self.layout), from_bnsd(group(dK), self.layout), from_bnsd(group(dV), self.layout)

    def numeric_backward(self, dy, h=1e-6):
        """d sum(dy * out) / d(q, k, v) by central differences of the forward."""
        grads = []
        for which in range(3):
            args = [self.q.copy(), self.k.copy(), self.v.copy()]
            g = np.zeros_like(args[which])
            for idx in np.ndindex(g.shape):
                x = args[which][idx]
                args[which][idx] = x + h
                up = (dy * self.forward(*args)[2]).sum()
                args[which][idx] = x - h
                down = (dy * self.forward(*args)[2]).sum()
                args[which][idx] = x
                g[idx] = (up - down) / (2 * h)
            grads.append(g)
        return grads

    def inputs(self, v2=False, pse_type=1):
        pse = None if self.pse is None else T(self.pse)
        drop = None if self.drop is None else T(self.drop, "UInt8")
        mask = None if self.mask is None else T(self.mask, "Bool")
        head = [T(self.q), T(self.k), T(self.v), pse, drop, None, mask, self.prefix]
        tail = [float(self.scale), float(self.keep), self.pre, self.nxt, self.nq, self.layout, 0, self.mode]
        return head + ([None, None] if v2 else []) + tail + ([pse_type] if v2 else [])

    def grad_inputs(self, dy, v2=False):
        fwd = self.inputs(v2)
        head = fwd[:3] + [T(dy)] + fwd[3:7] + [T(self.smax), T(self.ssum), None, T(self.out)]
        return head + fwd[7:]

    def outputs(self):
        return [T(self.smax), T(self.ssum), None, T(self.out)]


def run(tmp_path, cases):
    """cases: (op, case, inputs, outputs). Returns the replay."""
    d = Dump(tmp_path / "dump")
    for op, case, inputs, outputs in cases:
        d.kernel(op, case, inputs, outputs)
    d.close()
    return Replay(d.root, tmp_path / "out")


# ---- forward ------------------------------------------------------------------------------------------------------
FORWARD = {
    "bsnd_causal": dict(layout="BSND", mode=2, mask=COMPRESSED),
    "bsh_gqa_nomask": dict(layout="BSH", nq=4, nkv=1),
    "sbh_band": dict(layout="SBH", mode=0, mask=np.zeros((5, 5), bool), pre=1, nxt=1),
    "bnsd_full_mask": dict(layout="BNSD", mode=1, mask=RNG.random((2, 1, 5, 5)) < 0.3),
    "bnsd_right_down": dict(layout="BNSD", mode=3, sq=3, skv=6, mask=COMPRESSED),
    "bsnd_left_up_wide": dict(layout="BSND", mode=2, sq=3, skv=6, mask=COMPRESSED),
    "bsnd_band_corner": dict(layout="BSND", mode=4, sq=4, skv=7, pre=2, nxt=1, mask=COMPRESSED),
    "bsnd_prefix": dict(layout="BSND", mode=6, sq=4, skv=6, prefix=[1, 3], mask=COMPRESSED),
    "bsnd_no_mask_mode_2": dict(layout="BSND", mode=2),  # no mask: nothing is masked, whatever the mode
    "bsnd_pse": dict(layout="BSND", pse=RNG.normal(size=(1, 4, 5, 5))),
    "bsnd_dropout": dict(layout="BSND", drop=RNG.integers(0, 256, size=(2 * 4 * 5 * 5 + 7) // 8, dtype=np.uint8),
                         keep=0.75),
    "bsh_value_dim": dict(layout="BSH", d=8, dv=4),
}


def test_forward_matches_the_definition(tmp_path):
    problems = {case: Attention(**kw) for case, kw in FORWARD.items()}
    r = run(tmp_path, [("FlashAttentionScore", case, a.inputs(), a.outputs()) for case, a in problems.items()])
    for case in problems:
        r.expect_close(f"FlashAttentionScore.{case}.0.forward", [0, 1, 3])
    # softmaxOut is never written: it is not in the dump and not in the details.
    assert not any(k[1].endswith(".output.2") for k in r.details)
    assert r.returncode == 0


def test_v2_with_pse_after_the_scaling(tmp_path):
    before = Attention(layout="BSND", pse=RNG.normal(size=(2, 4, 5, 5)))
    after = Attention(layout="BSND", pse=RNG.normal(size=(2, 4, 1, 5)), pse_after=True)
    r = run(tmp_path, [("FlashAttentionScoreV2", "type1", before.inputs(v2=True, pse_type=1), before.outputs()),
                       ("FlashAttentionScoreV2", "type0", after.inputs(v2=True, pse_type=0), after.outputs())])
    r.expect_close("FlashAttentionScoreV2.type1.0.forward", [0, 1, 3])
    r.expect_close("FlashAttentionScoreV2.type0.0.forward", [0, 1, 3])


@pytest.mark.parametrize("case,misread", [
    ("top_left_for_mode_3", dict(layout="BSND", mode=2, sq=3, skv=6, mask=COMPRESSED)),
    ("round_robin_heads", dict(layout="BSND", gqa="tile")),
    ("pse_after_scale_in_v1", dict(layout="BSND", pse=RNG.normal(size=(2, 4, 5, 5)), pse_after=True, scale=0.5)),
])
def test_a_misread_definition_is_an_error(tmp_path, case, misread):
    """The dumped outputs follow a misreading of the definition; the kernel's recorded arguments say what it is."""
    a = Attention(**misread)
    inputs = a.inputs()
    if case == "top_left_for_mode_3":
        inputs[15] = 3  # sparseMode: causal from the bottom right
    r = run(tmp_path, [("FlashAttentionScore", case, inputs, a.outputs())])
    assert r.status(f"FlashAttentionScore.{case}.0.forward") == "error"
    assert r.output(f"FlashAttentionScore.{case}.0.forward", 3)["Status"] == "error"


def test_fully_masked_row_is_not_judged(tmp_path):
    """A row whose every score is masked has no softmax: its outputs hold anything and are left out."""
    mask = np.zeros((5, 5), bool)
    mask[2] = True
    a = Attention(layout="BSND", mode=1, mask=mask)
    smax, ssum, out = (np.nan_to_num(x, nan=123.0, neginf=-7.0) for x in (a.smax, a.ssum, a.out))
    r = run(tmp_path, [("FlashAttentionScore", "invalid_row", a.inputs(),
                        [T(smax), T(ssum), None, T(out)])])
    name = "FlashAttentionScore.invalid_row.0.forward"
    r.expect_close(name, [0, 1, 3])
    # 2 batches x 4 heads: one row of 8 statistics each, one row of D = 8 outputs each.
    assert "64 element(s) the kernel does not write not judged" in r.output(name, 0)["Message"]
    assert "64 element(s) the kernel does not write not judged" in r.output(name, 3)["Message"]


# ---- backward -----------------------------------------------------------------------------------------------------
BACKWARD = {
    "bsnd_causal": dict(layout="BSND", mode=2, mask=COMPRESSED),
    "bsh_gqa": dict(layout="BSH", nq=4, nkv=2),
    "sbh_band": dict(layout="SBH", mode=0, mask=np.zeros((5, 5), bool), pre=2, nxt=0),
    "bnsd_right_down": dict(layout="BNSD", mode=3, sq=3, skv=6, mask=COMPRESSED),
    "bsnd_pse_dropout": dict(layout="BSND", pse=RNG.normal(size=(2, 4, 5, 5)),
                             drop=RNG.integers(0, 256, size=25, dtype=np.uint8), keep=0.8),
    "bsh_value_dim": dict(layout="BSH", d=8, dv=4),
}


def test_backward_matches_the_closed_form(tmp_path):
    cases = []
    for case, kw in BACKWARD.items():
        a = Attention(**kw)
        dy = RNG.normal(size=a.out.shape)
        cases.append(("FlashAttentionScoreGrad", case, a.grad_inputs(dy), [T(x) for x in a.backward(dy)] + [None]))
    r = run(tmp_path, cases)
    for _, case, _, _ in cases:
        r.expect_close(f"FlashAttentionScoreGrad.{case}.0.forward", [0, 1, 2])


@pytest.mark.parametrize("layout,mode", [("BSND", 2), ("SBH", 0)])
def test_backward_matches_central_differences(tmp_path, layout, mode):
    a = Attention(layout=layout, b=1, nq=2, nkv=1, sq=3, skv=4, d=3, mode=mode,
                  mask=COMPRESSED if mode == 2 else np.array([[0, 0, 1, 1], [0, 0, 0, 1], [1, 0, 0, 0]], bool))
    dy = RNG.normal(size=a.out.shape)
    numeric = a.numeric_backward(dy)
    r = run(tmp_path, [("FlashAttentionScoreGrad", "fd", a.grad_inputs(dy), [T(x) for x in numeric] + [None]),
                       ("FlashAttentionScoreGradV2", "fd", a.grad_inputs(dy, v2=True), [T(x) for x in numeric] + [None])])
    for op in ("FlashAttentionScoreGrad", "FlashAttentionScoreGradV2"):
        r.expect_close(f"{op}.fd.0.forward", [0, 1, 2], tol=1e-7)


def test_backward_uses_the_statistics_it_is_given(tmp_path):
    """The kernel rebuilds P from softmaxMax / softmaxSum: with a NaN in one row's max, what depends on that row is NaN
    in the reference too (the kernel computed right from what it was given), the rest is unchanged."""
    a = Attention(layout="BSND", b=1, nq=2, nkv=1, sq=4, skv=4, d=4, mode=2, mask=COMPRESSED)
    dy = RNG.normal(size=a.out.shape)
    a.smax = a.smax.copy()
    a.smax[0, 1, 2, :] = np.nan  # batch 0, head 1, row 2
    with np.errstate(invalid="ignore"):
        dq, dk, dv = a.backward(dy)
    assert np.isnan(dq).sum() == 4 and np.isnan(dk).sum() == 12 and not np.isnan(dk[0, 3]).any()  # causal: keys 0-2
    r = run(tmp_path, [("FlashAttentionScoreGrad", "nan_stat", a.grad_inputs(dy), [T(dq), T(dk), T(dv), None])])
    r.expect_close("FlashAttentionScoreGrad.nan_stat.0.forward", [0, 1, 2])
