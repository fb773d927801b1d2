"""replay's references of RmsNormGrad, LogSoftmaxBackward, NLLLoss and NLLLossBackward (the backward of llm_train.py's
norms and of cross entropy as torch_npu runs it) against numpy written here from the ops' docs (ops-nn
norm/rms_norm_grad, activation/log_softmax_grad, loss/nll_loss, loss/nll_loss_grad). The gradients are checked twice:
against the docs' closed forms and against central differences of the numpy forward (no gradient formula at all).
Each test writes a hand-made tensor dump (replay_dumps.py) and reads replay's CSVs."""
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


def numeric_grad(f, x, h=1e-6):
    """d f / d x by central differences (f: array -> scalar)."""
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        keep = x[idx]
        x[idx] = keep + h
        up = f(x)
        x[idx] = keep - h
        down = f(x)
        x[idx] = keep
        g[idx] = (up - down) / (2 * h)
    return g


# ---- RmsNormGrad --------------------------------------------------------------------------------------------------
def rms_norm(x, gamma, eps):
    axes = tuple(range(x.ndim - gamma.ndim, x.ndim))
    rstd = 1 / np.sqrt((x * x).mean(axis=axes, keepdims=True) + eps)
    return x * rstd * gamma, rstd


@pytest.mark.parametrize("shape,gamma_dims", [((3, 5, 8), 1), ((4, 2, 6), 2)])
def test_rms_norm_grad(tmp_path, shape, gamma_dims):
    eps = 1e-6
    x, dy = RNG.normal(size=shape), RNG.normal(size=shape)
    gamma = RNG.normal(size=shape[-gamma_dims:])
    _, rstd = rms_norm(x, gamma, eps)
    dx = numeric_grad(lambda v: (dy * rms_norm(v, gamma, eps)[0]).sum(), x.copy())
    dgamma = numeric_grad(lambda v: (dy * rms_norm(x, v, eps)[0]).sum(), gamma.copy())
    # The docs' closed form agrees with the differences.
    axes = tuple(range(x.ndim - gamma_dims, x.ndim))
    mean = (dy * gamma * x * rstd).mean(axis=axes, keepdims=True)
    np.testing.assert_allclose((dy * gamma - rstd * x * mean) * rstd, dx, atol=1e-7)
    rows = int(np.prod(shape[:-gamma_dims]))
    r = run(tmp_path, [("RmsNormGrad", "fd", [T(dy), T(x), T(rstd.reshape(rows)), T(gamma)], [T(dx), T(dgamma)]),
                       ("RmsNormGrad", "stat_shape", [T(dy), T(x), T(rstd), T(gamma)], [T(dx), T(dgamma)])])
    for case in ("fd", "stat_shape"):
        r.expect_close(f"RmsNormGrad.{case}.0.forward", [0, 1], tol=1e-7)


def test_rms_norm_grad_uses_the_rstd_it_is_given(tmp_path):
    """The kernel takes rstd as the forward wrote it: a wrong rstd row gives another dx, and the reference follows it."""
    x, dy, gamma = RNG.normal(size=(3, 8)), RNG.normal(size=(3, 8)), RNG.normal(size=8)
    _, rstd = rms_norm(x, gamma, 1e-6)
    rstd = rstd.reshape(3)
    rstd[1] *= 2
    r2 = rstd[:, None]
    mean = (dy * gamma * x * r2).mean(-1, keepdims=True)
    dx, dgamma = (dy * gamma - r2 * x * mean) * r2, (r2 * x * dy).sum(0)
    right = [T(dx), T(dgamma)]
    r = run(tmp_path, [("RmsNormGrad", "given", [T(dy), T(x), T(rstd), T(gamma)], right),
                       ("RmsNormGrad", "recomputed", [T(dy), T(x), T(rstd), T(gamma)],
                        [T(numeric_grad(lambda v: (dy * rms_norm(v, gamma, 1e-6)[0]).sum(), x.copy())), T(dgamma)])])
    r.expect_close("RmsNormGrad.given.0.forward", [0, 1])
    assert r.status("RmsNormGrad.recomputed.0.forward") == "error"


# ---- LogSoftmaxBackward ------------------------------------------------------------------------------------------
def log_softmax(x, dim):
    m = x.max(dim, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(dim, keepdims=True))


@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_log_softmax_backward(tmp_path, dim):
    x, g = RNG.normal(size=(3, 4, 5)), RNG.normal(size=(3, 4, 5))
    y = log_softmax(x, dim)
    dx = numeric_grad(lambda v: (g * log_softmax(v, dim)).sum(), x.copy())
    np.testing.assert_allclose(g - np.exp(y) * g.sum(dim, keepdims=True), dx, atol=1e-7)  # the docs' formula
    r = run(tmp_path, [("LogSoftmaxBackward", "fd", [T(g), T(y), dim], [T(dx)]),
                       ("LogSoftmaxBackward", "f32", [T(g, "Float32"), T(y, "Float32"), dim], [T(dx, "Float32")])])
    r.expect_close("LogSoftmaxBackward.fd.0.forward", [0], tol=1e-7)
    assert r.status("LogSoftmaxBackward.f32.0.forward") == "pass"


# ---- NLLLoss ------------------------------------------------------------------------------------------------------
def nll(x, target, weight, reduction, ignore):
    """The docs' formula: l_n = -w_{y_n} x_{n, y_n}, w_c = weight[c] * (c != ignoreIndex)."""
    safe = np.where(target == ignore, 0, target)
    w = np.where(target == ignore, 0.0, weight[safe])
    loss = -w * x[np.arange(len(target)), safe]
    total = w.sum()
    return {0: loss, 1: loss.sum() / total, 2: loss.sum()}[reduction], total


@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_nll_loss_and_its_backward(tmp_path, reduction):
    n, c, ignore = 6, 5, 3
    x = log_softmax(RNG.normal(size=(n, c)), -1)
    target = np.array([0, 3, 4, 1, 3, 2])  # two samples ignored
    weight = RNG.uniform(0.5, 2, size=c)
    loss, total = nll(x, target, weight, reduction, ignore)
    g = RNG.normal(size=loss.shape) if reduction == 0 else np.array(0.7)
    dx = numeric_grad(lambda v: (g * nll(v, target, weight, reduction, ignore)[0]).sum(), x.copy())
    assert not dx[1].any() and not dx[4].any()  # the ignored samples take no gradient
    out = T(loss if reduction == 0 else np.reshape(loss, (1,)))
    args = [T(x), T(target, "Int64"), T(weight), reduction, ignore]
    cases = [("NLLLoss", "r", args, [out, T(np.reshape(total, (1,)))]),
             ("NLLLossBackward", "r", [T(g.reshape(-1) if reduction == 0 else g.reshape(1))] + args[:4] +
              [ignore, T(np.reshape(total, (1,)))], [T(dx)])]
    r = run(tmp_path, cases)
    # none: totalWeight is not defined (the docs: valid when reduced), so it is not judged.
    r.expect_close("NLLLoss.r.0.forward", [0] if reduction == 0 else [0, 1])
    if reduction == 0:
        assert "Not compared: output.1." in r.message("NLLLoss.r.0.forward")
    r.expect_close("NLLLossBackward.r.0.forward", [0], tol=1e-7)


def test_nll_loss_bf16_and_a_wrong_class(tmp_path):
    """torch_npu's cross entropy: fp32 log-probabilities; a loss taken at the wrong class is an error."""
    n, c = 8, 6
    x = log_softmax(RNG.normal(size=(n, c)), -1).astype(np.float32).astype(np.float64)
    target = RNG.integers(0, c, size=n)
    weight = np.ones(c)
    loss, total = nll(x, target, weight, 1, -100)
    wrong, _ = nll(x, (target + 1) % c, weight, 1, -100)
    args = [T(x, "Float32"), T(target, "Int64"), T(weight, "Float32"), 1, -100]
    r = run(tmp_path, [("NLLLoss", "right", args, [T(np.float32(loss).reshape(1), "Float32"), T([total], "Float32")]),
                       ("NLLLoss", "wrong", args, [T(np.float32(wrong).reshape(1), "Float32"), T([total], "Float32")])])
    assert r.status("NLLLoss.right.0.forward") == "pass"
    assert r.status("NLLLoss.wrong.0.forward") == "error"
