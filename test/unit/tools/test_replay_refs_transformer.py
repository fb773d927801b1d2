"""replay's references of a transformer layer's other fused ops against numpy written here from their docs: RoPE and its
grad in the four modes of the formula page (ops-transformer posembedding/rotary_position_embedding*/docs: the docs' own
chunk / cat / stack formulas, dcos and dsin summed over the broadcast dims), SwiGlu and SwiGluGrad (ops-nn
activation/swi_glu*/docs), RmsNormGrad (ops-nn norm/rms_norm_grad/docs: the docs' derivation, with the forward's rstd),
LogSoftmaxBackward and NLLLoss / NLLLossBackward (ops-nn loss/nll_loss*/docs: weights, ignoreIndex, the three
reductions, totalWeight). A kernel dumped with outputs of a plausible misreading (the other RoPE mode, Swish on the
second half) is an error. Each test writes a hand-made tensor dump (replay_dumps.py) and reads replay's CSVs.
"""
import numpy as np
import pytest

from replay_dumps import Dump, Replay, T

RNG = np.random.default_rng(7)


def run(tmp_path, cases):
    d = Dump(tmp_path / "dump")
    for op, case, inputs, outputs in cases:
        d.kernel(op, case, inputs, outputs)
    d.close()
    return Replay(d.root, tmp_path / "out")


def sum_to(x, shape):
    """x summed over the dims along which an array of `shape` was broadcast to x's shape."""
    lead = x.ndim - len(shape)
    x = x.sum(axis=tuple(range(lead))) if lead else x
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and x.shape[i] != 1)
    return x.sum(axis=axes, keepdims=True) if axes else x


# ---- RoPE: the docs' formulas -------------------------------------------------------------------------------------
def rope(x, cos, sin, mode):
    if mode == 0:
        x1, x2 = np.split(x, 2, axis=-1)
        return x * cos + np.concatenate((-x2, x1), -1) * sin
    if mode == 1:
        x1, x2 = x[..., ::2].reshape(-1, 1), x[..., 1::2].reshape(-1, 1)
        return x * cos + np.concatenate((-x2, x1), -1).reshape(x.shape) * sin
    if mode == 2:
        x1, x2, x3, x4 = np.split(x, 4, axis=-1)
        return x * cos + np.concatenate((-x2, x1, -x4, x3), -1) * sin
    x1, x2 = x[..., ::2], x[..., 1::2]
    return np.concatenate((x1, x2), -1) * cos + np.concatenate((-x2, x1), -1) * sin


def rope_grad(dy, cos, sin, x, mode):
    """dx, dcos, dsin as the grad's docs page writes them per mode."""
    cos, sin = np.broadcast_to(cos, dy.shape), np.broadcast_to(sin, dy.shape)
    if mode in (0, 3):
        (dy1, dy2), (c1, c2), (s1, s2) = (np.split(a, 2, axis=-1) for a in (dy, cos, sin))
        parts = (c1 * dy1 + s2 * dy2, c2 * dy2 - s1 * dy1)
        dx = np.concatenate(parts, -1) if mode == 0 else np.stack(parts, -1).reshape(dy.shape)
    elif mode == 1:
        dy1, dy2, c1, c2, s1, s2 = dy[..., ::2], dy[..., 1::2], cos[..., ::2], cos[..., 1::2], sin[..., ::2], sin[..., 1::2]
        dx = np.stack((c1 * dy1 + s2 * dy2, c2 * dy2 - s1 * dy1), -1).reshape(dy.shape)
    else:
        (d1, d2, d3, d4), (c1, c2, c3, c4), (s1, s2, s3, s4) = (np.split(a, 4, axis=-1) for a in (dy, cos, sin))
        dx = np.concatenate((c1 * d1 + s2 * d2, c2 * d2 - s1 * d1, c3 * d3 + s4 * d4, c4 * d4 - s3 * d3), -1)
    if x is None:
        return dx, None, None
    if mode == 0:
        x1, x2 = np.split(x, 2, axis=-1)
        a, b = x, np.concatenate((-x2, x1), -1)
    elif mode == 1:
        a, b = x, np.stack((-x[..., 1::2], x[..., ::2]), -1).reshape(x.shape)
    elif mode == 2:
        x1, x2, x3, x4 = np.split(x, 4, axis=-1)
        a, b = x, np.concatenate((-x2, x1, -x4, x3), -1)
    else:
        x1, x2 = x[..., ::2], x[..., 1::2]
        a, b = np.concatenate((x1, x2), -1), np.concatenate((-x2, x1), -1)
    return dx, dy * a, dy * b


ROPE = {  # x's shape, cos / sin's shape (the layouts the docs list)
    "bsnd": ((2, 6, 3, 8), (1, 6, 1, 8)),
    "bnsd": ((2, 3, 6, 8), (1, 1, 6, 8)),
    "sbnd": ((6, 2, 3, 8), (6, 1, 1, 8)),
    "full": ((2, 3, 4, 8), (2, 3, 4, 8)),
}


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_rope_and_its_grad(tmp_path, mode):
    cases = []
    for case, (xs, cs) in ROPE.items():
        x, cos, sin, dy = RNG.normal(size=xs), RNG.normal(size=cs), RNG.normal(size=cs), RNG.normal(size=xs)
        cases.append(("RotaryPositionEmbedding", case, [T(x), T(cos), T(sin), mode], [T(rope(x, cos, sin, mode))]))
        dx, dcos, dsin = rope_grad(dy, cos, sin, x, mode)
        cases.append(("RotaryPositionEmbeddingGrad", case, [T(dy), T(cos), T(sin), T(x), mode],
                      [T(dx), T(sum_to(dcos, cs)), T(sum_to(dsin, cs))]))
        dx, _, _ = rope_grad(dy, cos, sin, None, mode)
        cases.append(("RotaryPositionEmbeddingGrad", case + "_no_x", [T(dy), T(cos), T(sin), None, mode],
                      [T(dx), T(np.zeros(cs)), T(np.zeros(cs))]))
    r = run(tmp_path, cases)
    for op, case, _, _ in cases:
        name = f"{op}.{case}.0.forward"
        if case.endswith("_no_x"):  # without x, dcos and dsin are not written: only dx is judged
            r.expect_close(name, [0])
            assert "Not compared: output.1, output.2." in r.message(name)
        else:
            r.expect_close(name, [0] if op == "RotaryPositionEmbedding" else [0, 1, 2])


def test_rope_grad_is_the_transpose_of_the_forward():
    """The grad's formulas are the forward's adjoint: <dy, rope(x)> = <rope_grad(dy), x> (no replay: the numpy here)."""
    for mode in range(4):
        x, dy, cos, sin = RNG.normal(size=(2, 4, 8)), RNG.normal(size=(2, 4, 8)), RNG.normal(size=(4, 8)), RNG.normal(size=(4, 8))
        assert np.isclose((dy * rope(x, cos, sin, mode)).sum(), (rope_grad(dy, cos, sin, x, mode)[0] * x).sum())


def test_rope_in_the_wrong_mode_is_an_error(tmp_path):
    x, cos, sin = RNG.normal(size=(2, 6, 3, 8)), RNG.normal(size=(1, 6, 1, 8)), RNG.normal(size=(1, 6, 1, 8))
    r = run(tmp_path, [("RotaryPositionEmbedding", "interleave_for_half", [T(x), T(cos), T(sin), 0],
                        [T(rope(x, cos, sin, 1))])])
    assert r.status("RotaryPositionEmbedding.interleave_for_half.0.forward") == "error"


# ---- SwiGlu -------------------------------------------------------------------------------------------------------
def swish(a):
    return a / (1 + np.exp(-a))


def swiglu(x, dim):
    a, b = np.split(x, 2, axis=dim)
    return swish(a) * b


def swiglu_grad(g, x, dim):
    a, b = np.split(x, 2, axis=dim)
    s = 1 / (1 + np.exp(-a))
    return np.concatenate((g * (s + s * (1 - s) * a) * b, g * s * a), axis=dim)


def test_swiglu_and_its_grad(tmp_path):
    cases = []
    for case, (shape, dim) in {"last": ((5, 12), -1), "first": ((6, 3, 4), 0), "middle": ((2, 8, 3), 1)}.items():
        x = RNG.normal(size=shape)
        g = RNG.normal(size=swiglu(x, dim).shape)
        cases.append(("SwiGlu", case, [T(x), dim], [T(swiglu(x, dim))]))
        cases.append(("SwiGluGrad", case, [T(g), T(x), dim], [T(swiglu_grad(g, x, dim))]))
    x = RNG.normal(size=(5, 12))
    a, b = np.split(x, 2, axis=-1)
    cases.append(("SwiGlu", "swish_of_second_half", [T(x), -1], [T(swish(b) * a)]))
    r = run(tmp_path, cases)
    for op, case, _, _ in cases[:-1]:
        r.expect_close(f"{op}.{case}.0.forward", [0])
    assert r.status("SwiGlu.swish_of_second_half.0.forward") == "error"


# ---- RmsNormGrad, LogSoftmaxBackward --------------------------------------------------------------------------------
def test_rms_norm_grad(tmp_path):
    cases = []
    for case, (shape, norm) in {"rows": ((6, 16), 1), "two_dims": ((3, 4, 8), 2)}.items():
        x, dy = RNG.normal(size=shape), RNG.normal(size=shape)
        gamma = RNG.normal(size=shape[-norm:])
        axes = tuple(range(-norm, 0))
        rms = np.sqrt((x * x).mean(axis=axes, keepdims=True) + 1e-6)
        mean_y = (dy * gamma * x / rms).mean(axis=axes, keepdims=True)
        dx = (dy * gamma - x / rms * mean_y) / rms
        dgamma = (x / rms * dy).reshape(-1, *gamma.shape).sum(0)
        cases.append(("RmsNormGrad", case, [T(dy), T(x), T(1 / rms), T(gamma)], [T(dx), T(dgamma)]))
    x, dy, gamma = RNG.normal(size=(6, 16)), RNG.normal(size=(6, 16)), RNG.normal(size=16)
    rstd = 1 / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6)
    cases.append(("RmsNormGrad", "dgamma_without_rstd", [T(dy), T(x), T(rstd), T(gamma)],
                  [T((dy * gamma - x * rstd * (dy * gamma * x * rstd).mean(-1, keepdims=True)) * rstd),
                   T((x * dy).sum(0))]))
    r = run(tmp_path, cases)
    for _, case, _, _ in cases[:-1]:
        r.expect_close(f"RmsNormGrad.{case}.0.forward", [0, 1])
    assert r.output("RmsNormGrad.dgamma_without_rstd.0.forward", 1)["Status"] == "error"


def test_log_softmax_backward(tmp_path):
    cases = []
    for case, (shape, dim) in {"last": ((4, 10), -1), "first": ((5, 3), 0), "middle": ((2, 6, 3), 1)}.items():
        logits, g = RNG.normal(size=shape), RNG.normal(size=shape)
        y = logits - np.log(np.exp(logits).sum(axis=dim, keepdims=True))
        cases.append(("LogSoftmaxBackward", case, [T(g), T(y), dim],
                      [T(g - g.sum(axis=dim, keepdims=True) * np.exp(y))]))
    r = run(tmp_path, cases)
    for _, case, _, _ in cases:
        r.expect_close(f"LogSoftmaxBackward.{case}.0.forward", [0])


# ---- NLLLoss ------------------------------------------------------------------------------------------------------
def nll(x, t, w, reduction, ignore):
    """The docs' l_n = -w_{y_n} x_{n, y_n}, w_c = weight[c] * (c != ignoreIndex); mean divides by sum of w_{y_n}."""
    x2 = x.reshape(-1, x.shape[-1])
    t1 = np.asarray(t).reshape(-1)
    wn = np.array([0.0 if c == ignore else w[c] for c in t1])
    ln = np.array([0.0 if c == ignore else -w[c] * x2[n, c] for n, c in enumerate(t1)])
    if reduction == 0:
        return ln, None
    total = wn.sum()
    return np.array(ln.sum() / total if reduction == 1 else ln.sum()), np.array(total)


def nll_grad(g, x, t, w, reduction, ignore, total):
    out = np.zeros(x.reshape(-1, x.shape[-1]).shape)
    for n, c in enumerate(np.asarray(t).reshape(-1)):
        if c != ignore:
            gn = g[n] if reduction == 0 else g
            out[n, c] = -gn * w[c] / (total if reduction == 1 else 1.0)
    return out.reshape(x.shape)


def test_nll_loss_and_its_backward(tmp_path):
    cases, checks = [], []
    x, w = RNG.normal(size=(8, 5)), RNG.uniform(0.5, 2, size=5)
    t = RNG.integers(0, 5, size=8)
    t[3] = -100
    for reduction, label in ((1, "mean"), (2, "sum"), (0, "none")):
        loss, total = nll(x, t, w, reduction, -100)
        outputs = [T(loss), T(total) if total is not None else T(np.zeros(1))]
        cases.append(("NLLLoss", label, [T(x), T(t, "Int64"), T(w), reduction, -100], outputs))
        checks.append((f"NLLLoss.{label}.0.forward", [0, 1] if reduction else [0]))
        g = RNG.normal(size=8) if reduction == 0 else np.array(RNG.normal())
        tw = total if total is not None else np.array(1.0)
        cases.append(("NLLLossBackward", label, [T(g), T(x), T(t, "Int64"), T(w), reduction, -100, T(tw)],
                      [T(nll_grad(g, x, t, w, reduction, -100, tw))]))
        checks.append((f"NLLLossBackward.{label}.0.forward", [0]))
    x1 = RNG.normal(size=5)
    loss, total = nll(x1, [2], w, 1, -100)
    cases.append(("NLLLoss", "one_row", [T(x1), T(np.array(2), "Int64"), T(w), 1, -100], [T(loss), T(total)]))
    checks.append(("NLLLoss.one_row.0.forward", [0, 1]))
    cases.append(("NLLLoss", "mean_without_weights", [T(x), T(t, "Int64"), T(w), 1, -100],
                  [T(np.array(nll(x, t, np.ones(5), 2, -100)[0] / 7)), T(np.array(w[t[t != -100]].sum()))]))
    r = run(tmp_path, cases)
    for name, slots in checks:
        r.expect_close(name, slots)
    # totalWeightOut is defined for mean and sum only: with none it is not compared.
    assert "Not compared: output.1." in r.message("NLLLoss.none.0.forward")
    assert r.output("NLLLoss.mean_without_weights.0.forward", 0)["Status"] == "error"
