"""Independent numpy references of the CANN stand-in's aclnn ops, written from the op semantics (CANN /
torch definitions, as test/fake_cann documents them), not from the stand-in's code.

A reference takes the dumped phase-1 arguments of one kernel, in declaration order (`input_args` of a
dump.json entry: tensors as float64 arrays read from their files, None for an absent optional tensor,
plain Python values for scalars, int/bool arrays and by-value numbers) and returns the values the
kernel must have written to its `output` tensors, in order (None where nothing is written, UNSPECIFIED where the
op's docs leave the value open), computed in float64. `round_to(values, dtype)` then rounds them the way a kernel stores them, and
`compare(actual, expected, dtype)` checks a dumped output against it within the dtype's precision.

In-place tensors (`*Ref` parameters: ApplyAdamWV2's varRef/mRef/vRef, InplaceZero, InplaceCopy,
InplaceAdd) are in `input_args` with their PRE-kernel values and in `output` with their POST-kernel
values: the references compute the latter from the former, which is what proves the capture order.
"""
import math
from types import SimpleNamespace

import numpy as np

REDUCTION_NONE, REDUCTION_MEAN, REDUCTION_SUM = 0, 1, 2
_SQRT2 = math.sqrt(2.0)
_erf = np.vectorize(math.erf, otypes=[np.float64])


# ---- rounding to device dtypes ------------------------------------------------------------------------------
def bf16_round(x):
    """float32 -> nearest bfloat16 (ties to even), returned as float32 values."""
    f = np.array(x, dtype=np.float32, order="C")  # (ascontiguousarray would make 0-d arrays 1-d)
    u = np.uint64
    bits = f.view(np.uint32).astype(u)
    bits = (bits + u(0x7FFF) + ((bits >> u(16)) & u(1))) & u(0xFFFF0000)
    out = bits.astype(np.uint32).view(np.float32).reshape(f.shape)
    return np.where(np.isnan(f), f, out)


FLOAT_DTYPES = {"Float32", "Float16", "BFloat16", "Float64"}
INT_DTYPES = {"Int8": np.int8, "Int16": np.int16, "Int32": np.int32, "Int64": np.int64, "UInt8": np.uint8,
              "UInt16": np.uint16, "UInt32": np.uint32, "UInt64": np.uint64}


def round_to(values, dtype):
    """float64 results -> the values a kernel stores for `dtype` (dump.json spelling), as float64."""
    v = np.asarray(values, dtype=np.float64)
    if dtype == "Float64":
        return v
    if dtype == "Float32":
        return v.astype(np.float32).astype(np.float64)
    if dtype == "Float16":
        return v.astype(np.float32).astype(np.float16).astype(np.float64)
    if dtype == "BFloat16":
        return bf16_round(v.astype(np.float32)).astype(np.float64)
    if dtype == "Bool":
        return (v != 0).astype(np.float64)
    if dtype in INT_DTYPES:
        return np.trunc(v)
    raise ValueError(f"no rounding rule for dtype {dtype}")


# Relative precision of one unit in the last place.
EPS = {"Float64": 2.0 ** -52, "Float32": 2.0 ** -23, "Float16": 2.0 ** -10, "BFloat16": 2.0 ** -7}


def compare(actual, expected, dtype):
    """None when `actual` (dumped) matches `expected` (float64 reference, not yet rounded), else a message.

    The kernel and the reference both compute in float64 and round once to the dtype, so they can differ
    only where the float64 results straddle a rounding boundary: one unit in the last place of the dtype
    (two for float32, whose last place is finer than the summation-order noise near cancellations).
    """
    a = np.asarray(actual, dtype=np.float64)
    e = round_to(expected, dtype)
    if a.size == e.size == 1:
        e = e.reshape(a.shape)  # one value: the caller makes its tensor () or (1,) (NLLLoss's totalWeight)
    if a.shape != e.shape:
        return f"shape {a.shape} != expected {e.shape}"
    if dtype not in EPS:
        bad = a != e
    else:
        ulps = 2.0 if dtype == "Float32" else 1.0
        finite = np.abs(e[np.isfinite(e)])  # an inf in the reference must not widen every element's tolerance
        scale = float(np.max(finite)) if finite.size else 0.0
        with np.errstate(invalid="ignore"):
            tol = ulps * EPS[dtype] * np.abs(e) + 1e-6 * EPS[dtype] * scale
            bad = ~((np.abs(a - e) <= tol) | (a == e) | (np.isnan(a) & np.isnan(e)))
    if not bad.any():
        return None
    i = np.unravel_index(np.argmax(bad), a.shape) if a.ndim else ()
    return (f"{int(bad.sum())} of {a.size} elements differ; first at {tuple(int(k) for k in i)}: "
            f"dumped {a[i]!r}, reference {e[i]!r} (max |diff| {float(np.nanmax(np.abs(a - e)[bad])):.3g})")


# ---- helpers -----------------------------------------------------------------------------------------------
def _gelu(x):
    return 0.5 * x * (1.0 + _erf(x / _SQRT2))


def _gelu_grad(x):
    # d/dx [x Phi(x)] = Phi(x) + x phi(x)
    return 0.5 * (1.0 + _erf(x / _SQRT2)) + x * np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _softmax(x, dim):
    z = x - np.max(x, axis=dim, keepdims=True)
    e = np.exp(z)
    return e / np.sum(e, axis=dim, keepdims=True)


def log_softmax(x, dim):
    m = np.max(x, axis=dim, keepdims=True)
    return x - m - np.log(np.sum(np.exp(x - m), axis=dim, keepdims=True))


def _norm_axes(x, normalized_shape):
    k = len(normalized_shape)
    assert tuple(x.shape[x.ndim - k:]) == tuple(normalized_shape), (x.shape, normalized_shape)
    return tuple(range(x.ndim - k, x.ndim))


def _hf32(x):
    """fp32 operand as the cube unit reads it in HF32 mode: mantissa rounded to 10 bits (ties to even)."""
    f = np.array(x, dtype=np.float32, order="C")  # (ascontiguousarray would make 0-d arrays 1-d)
    u = np.uint64
    bits = f.view(np.uint32).astype(u)
    finite = (bits & u(0x7F800000)) != u(0x7F800000)
    r = (bits + u(0xFFF) + ((bits >> u(13)) & u(1))) & ~u(0x1FFF)
    return np.where(finite, r, bits).astype(np.uint32).view(np.float32).reshape(f.shape).astype(np.float64)


def _cube_operand(x, dtype, cube):
    """cubeMathType: 0 keep dtype / 4 fp32 add, 1 and 3 HF32, 2 fp16 — for fp32 operands only."""
    if dtype != "Float32" or cube in (0, 4):
        return x
    if cube == 2:
        return x.astype(np.float32).astype(np.float16).astype(np.float64)
    return _hf32(x)


def _reduction(loss, reduction):
    if reduction == REDUCTION_NONE:
        return loss
    if reduction == REDUCTION_SUM:
        return np.sum(loss)
    return np.mean(loss)


# ---- the references: op type -> fn(args, dtypes) -> outputs ---------------------------------------------
# `args` are the input_args values; `dtypes` their dump.json dtypes (None for non-tensors).
REFS = {}
UNSPECIFIED = "unspecified"  # an output the kernel writes with a value the op's docs do not define: not compared


def ref(*names):
    def deco(fn):
        for n in names:
            REFS[n] = fn
        return fn
    return deco


@ref("Add")
def _add(a, d):
    x, y, alpha = a
    return [x + alpha * y]


@ref("Sub")
def _sub(a, d):
    x, y, alpha = a
    return [x - alpha * y]


@ref("Mul")
def _mul(a, d):
    return [a[0] * a[1]]


@ref("Div")
def _div(a, d):
    return [a[0] / a[1]]


@ref("Adds")
def _adds(a, d):
    x, other, alpha = a
    return [x + other * alpha]


@ref("Muls")
def _muls(a, d):
    return [a[0] * a[1]]


@ref("InplaceAdd")
def _inplace_add(a, d):
    self_ref, other, alpha = a
    return [self_ref + alpha * np.broadcast_to(other, self_ref.shape)]


@ref("Relu")
def _relu(a, d):
    x = a[0]
    return [np.where((x > 0) | np.isnan(x), x, 0.0)]


@ref("Gelu")
def _gelu_ref(a, d):
    return [_gelu(a[0])]  # exact (erf) form, as torch's default approximate='none'


@ref("Silu")
def _silu(a, d):
    return [a[0] * sigmoid(a[0])]


@ref("Exp")
def _exp(a, d):
    return [np.exp(a[0])]


@ref("Log")
def _log(a, d):
    with np.errstate(divide="ignore", invalid="ignore"):
        return [np.log(a[0])]


@ref("Sqrt")
def _sqrt(a, d):
    with np.errstate(invalid="ignore"):
        return [np.sqrt(a[0])]


@ref("Neg")
def _neg(a, d):
    return [-a[0]]


@ref("GeluBackward")
def _gelu_backward(a, d):
    g, x = a
    return [g * _gelu_grad(x)]


@ref("SiluBackward")
def _silu_backward(a, d):
    g, x = a
    s = sigmoid(x)
    return [g * s * (1.0 + x * (1.0 - s))]


@ref("ThresholdBackward")
def _threshold_backward(a, d):
    g, x, threshold = a
    return [np.where(x > threshold, g, 0.0)]


@ref("ReluGrad")
def _relu_grad(a, d):
    """aclop ReluGrad(gradients, features): gradients where features > 0."""
    g, features = a
    return [np.where(features > 0, g, 0.0)]


@ref("GatherV2")
def _gather_v2(a, d):
    """AI CPU GatherV2(params, indices, axis)."""
    params, indices, axis = a
    return [np.take(params, np.asarray(indices).astype(np.int64), axis=int(np.asarray(axis).reshape(-1)[0]))]


@ref("Matmul", "Mm", "BatchMatMul")
def _matmul(a, d):
    x, y, cube = a
    return [np.matmul(_cube_operand(x, d[0], cube), _cube_operand(y, d[1], cube))]


@ref("Softmax")
def _softmax_ref(a, d):
    x, dim = a
    return [_softmax(x, dim)]


@ref("LogSoftmax")
def _log_softmax_ref(a, d):
    x, dim = a
    return [log_softmax(x, dim)]


@ref("SoftmaxBackward")
def _softmax_backward(a, d):
    g, y, dim = a
    return [y * (g - np.sum(g * y, axis=dim, keepdims=True))]


@ref("LayerNorm")
def _layer_norm(a, d):
    x, normalized_shape, w, b, eps = a
    axes = _norm_axes(x, normalized_shape)
    mean = np.mean(x, axis=axes, keepdims=True)
    var = np.mean((x - mean) ** 2, axis=axes, keepdims=True)  # biased
    rstd = 1.0 / np.sqrt(var + eps)
    out = (x - mean) * rstd
    if w is not None:
        out = out * w
    if b is not None:
        out = out + b
    return [out, mean, rstd]


@ref("LayerNormBackward")
def _layer_norm_backward(a, d):
    """torch's native_layer_norm_backward: dx, dweight, dbias (each only if outputMask asks)."""
    g, x, normalized_shape, mean, rstd, w, b, mask = a
    axes = _norm_axes(x, normalized_shape)
    lead = tuple(range(x.ndim - len(axes)))
    xhat = (x - mean) * rstd
    dxhat = g * (w if w is not None else 1.0)
    n = float(np.prod([x.shape[i] for i in axes]))
    dx = rstd / n * (n * dxhat - np.sum(dxhat, axis=axes, keepdims=True)
                     - xhat * np.sum(dxhat * xhat, axis=axes, keepdims=True))
    dw = np.sum(g * xhat, axis=lead)
    db = np.sum(g, axis=lead)
    return [dx if mask[0] else None, dw if mask[1] else None, db if mask[2] else None]


@ref("RmsNorm")
def _rms_norm_ref(a, d):
    x, gamma, eps = a
    return list(rms_norm(x, gamma, eps))


@ref("Cast")
def _cast(a, d):
    return [a[0]]  # the value itself; compare() rounds it to the output's dtype


@ref("InplaceCopy")
def _inplace_copy(a, d):
    self_ref, src = a
    return [np.broadcast_to(src, self_ref.shape)]


@ref("InplaceZero")
def _inplace_zero(a, d):
    return [np.zeros_like(a[0])]


@ref("Permute")
def _permute(a, d):
    x, dims = a
    return [np.transpose(x, dims)]


@ref("Cat")
def _cat(a, d):
    tensors, dim = a
    return [np.concatenate(tensors, axis=dim)]


@ref("ForeachMulScalarList")
def _foreach_mul_scalar_list(a, d):
    """One output, a tensor list: x[i] * scalars[i] (a bool scalar as 0/1)."""
    tensors, scalars = a
    return [[x * float(s) for x, s in zip(tensors, scalars)]]


@ref("Embedding")
def _embedding(a, d):
    weight, indices = a
    return [weight[indices.astype(np.int64)]]


@ref("EmbeddingDenseBackward")
def _embedding_dense_backward(a, d):
    """torch.embedding_dense_backward: grad rows summed into their index's row; padding row stays 0."""
    grad, indices, num_weights, padding_idx, scale_grad_by_freq = a
    idx = indices.astype(np.int64).reshape(-1)
    g = grad.reshape(idx.size, -1)
    out = np.zeros((num_weights, g.shape[1]))
    counts = np.bincount(idx, minlength=num_weights).astype(np.float64)
    pad = padding_idx if padding_idx < (1 << 63) else padding_idx - (1 << 64)  # uint64 -1: no padding
    for row, i in zip(g, idx):
        if i == pad:
            continue
        out[i] += row / counts[i] if scale_grad_by_freq else row
    return [out]


def _reduce_dims(x, dims):
    return tuple(range(x.ndim)) if len(dims) == 0 else tuple(int(v) % x.ndim for v in dims)


@ref("ReduceSum")
def _reduce_sum(a, d):
    x, dims, keep, _dtype = a
    return [np.sum(x, axis=_reduce_dims(x, dims), keepdims=keep)]


@ref("Mean")
def _mean(a, d):
    x, dims, keep, _dtype = a
    return [np.mean(x, axis=_reduce_dims(x, dims), keepdims=keep)]


@ref("Amax")
def _amax(a, d):
    x, dims, keep = a
    return [np.max(x, axis=_reduce_dims(x, dims), keepdims=keep)]


@ref("Amin")
def _amin(a, d):
    x, dims, keep = a
    return [np.min(x, axis=_reduce_dims(x, dims), keepdims=keep)]


@ref("AminmaxAll")
def _aminmax_all(a, d):
    x = a[0]
    return [np.min(x), np.max(x)]  # NaN propagates, as torch.aminmax


def _vector_norm(x, p, dims, keep):
    axes = _reduce_dims(x, dims)
    v = np.abs(x)
    if np.isinf(p):
        return (np.max if p > 0 else np.min)(v, axis=axes, keepdims=keep)
    if p == 0:
        return np.sum(v != 0, axis=axes, keepdims=keep).astype(np.float64)
    return np.sum(v ** p, axis=axes, keepdims=keep) ** (1.0 / p)


@ref("Norm")
def _norm(a, d):
    x, p, dims, keep = a
    return [_vector_norm(x, p, dims, keep)]


@ref("LinalgVectorNorm")
def _linalg_vector_norm(a, d):
    x, p, dims, keep, _dtype = a
    return [_vector_norm(x, p, dims, keep)]


@ref("ForeachNorm")
def _foreach_norm(a, d):
    """One output, a tensor list: the ord-norm of each tensor of x over all of its elements."""
    xs, p = a[0], a[1]
    return [[_vector_norm(x, p, [], False) for x in xs]]


@ref("IsFinite")
def _is_finite(a, d):
    return [np.isfinite(a[0])]


@ref("IsPosInf")
def _is_pos_inf(a, d):
    return [np.isposinf(a[0])]


@ref("IsNegInf")
def _is_neg_inf(a, d):
    return [np.isneginf(a[0])]


@ref("MseLoss")
def _mse_loss(a, d):
    x, t, reduction = a
    return [_reduction((x - t) ** 2, reduction)]


@ref("MseLossBackward")
def _mse_loss_backward(a, d):
    g, x, t, reduction = a
    scale = 2.0 / np.broadcast(x, t).size if reduction == REDUCTION_MEAN else 2.0
    return [scale * (x - t) * g]


@ref("ApplyAdamWV2")
def _apply_adamw_v2(a, d):
    """torch.optim.AdamW, one step; `step` is the (already incremented) step count, read not advanced."""
    var, m, v, max_grad_norm, grad, step, lr, beta1, beta2, wd, eps, amsgrad, maximize = a
    t = float(np.asarray(step).reshape(-1)[0])
    g = -grad if maximize else grad
    var = var * (1.0 - lr * wd)
    m = beta1 * m + (1.0 - beta1) * g
    v = beta2 * v + (1.0 - beta2) * g * g
    second = np.maximum(max_grad_norm, v) if amsgrad else v
    bias1 = 1.0 - beta1 ** t
    bias2 = 1.0 - beta2 ** t
    var = var - (lr / bias1) * m / (np.sqrt(second) / math.sqrt(bias2) + eps)
    # maxGradNormOptionalRef holds max(v) only with amsgrad; without it the kernel leaves it alone.
    kept = None if max_grad_norm is None else (second if amsgrad else max_grad_norm)
    return [var, m, v, kept]


# ---- transformer ops (issue 41): attention, RoPE, SwiGlu, RmsNorm, cross entropy --------------------------------
# The formulas of the ops' docs pages (ops-transformer attention/flash_attention_score*/docs,
# posembedding/rotary_position_embedding*/docs; ops-nn activation/swi_glu*/docs, norm/rms_norm*/docs,
# loss/nll_loss*/docs, activation/log_softmax_grad/docs), in float64. The stand-in's own unit tests
# (test_aclnn_transformer_ops.py) check its kernels with these same functions: one copy of each formula.
FLT_MAX = float(np.finfo(np.float32).max)


def rms_norm(x, gamma, eps):
    """y = x / Rms(x) * gamma over gamma's trailing dims, and rstd = 1 / Rms(x) (dims kept)."""
    axes = tuple(range(x.ndim - gamma.ndim, x.ndim))
    rstd = 1.0 / np.sqrt(np.mean(x * x, axis=axes, keepdims=True) + eps)
    return x * rstd * gamma, rstd


def rms_norm_grad(dy, x, rstd, gamma):
    """dx = (dy g - rstd x mean(dy g x rstd)) rstd, dgamma = the rows' sum of rstd x dy. rstd holds one value per row
    (x's dims before gamma's), in whatever shape the caller gave it."""
    k = gamma.ndim
    r = np.reshape(rstd, x.shape[:x.ndim - k] + (1,) * k)
    mean = np.mean(dy * gamma * x * r, axis=tuple(range(x.ndim - k, x.ndim)), keepdims=True)
    return (dy * gamma - r * x * mean) * r, np.sum(r * x * dy, axis=tuple(range(x.ndim - k)))


def swiglu(x, dim):
    """Swish(A) * B, A and B the first and second half of x along dim."""
    a, b = np.split(x, 2, axis=dim)
    return a * sigmoid(a) * b


def swiglu_grad(g, x, dim):
    """[g (s + s (1 - s) A) B, g s A] along dim, s = sigmoid(A)."""
    a, b = np.split(x, 2, axis=dim)
    s = sigmoid(a)
    return np.concatenate([g * (s + s * (1.0 - s) * a) * b, g * s * a], axis=dim)


def _rope_halves(t, mode):
    """The two operands of a rotation: the chunks (half, mode 0) or the even and odd lanes (interleave, mode 1), the
    modes the Atlas A2/A3 kernels run."""
    if mode == 0:
        return np.split(t, 2, axis=-1)
    if mode == 1:
        return t[..., 0::2], t[..., 1::2]
    raise ValueError(f"rotary mode {mode}: the reference has half (0) and interleave (1), the modes of Atlas A2/A3")


def _rope_join(first, second, mode):
    """The inverse of _rope_halves."""
    if mode == 0:
        return np.concatenate([first, second], axis=-1)
    return np.stack([first, second], axis=-1).reshape(first.shape[:-1] + (2 * first.shape[-1],))


def rope_rotate(x, mode):
    """x_rotate of the docs: (-x2, x1) put back in the mode's places."""
    x1, x2 = _rope_halves(x, mode)
    return _rope_join(-x2, x1, mode)


def rope(x, cos, sin, mode):
    return x * cos + rope_rotate(x, mode) * sin


def rope_grad(dy, cos, sin, x, mode):
    """dx = (cos1 dy1 + sin2 dy2, cos2 dy2 - sin1 dy1) in the mode's places; dcos and dsin are dy * x and
    dy * x_rotate summed over the dims cos and sin broadcast over (kept, as cos's shape)."""
    (dy1, dy2), (c1, c2), (s1, s2) = (_rope_halves(t, mode) for t in (dy, cos, sin))
    dx = _rope_join(c1 * dy1 + s2 * dy2, c2 * dy2 - s1 * dy1, mode)
    dims = tuple(i for i in range(dy.ndim - 1) if cos.shape[i] != dy.shape[i])
    return dx, np.sum(dy * x, axis=dims, keepdims=True), np.sum(dy * rope_rotate(x, mode), axis=dims, keepdims=True)


def nll_loss(logp, target, weight, reduction, ignore):
    """torch's nll_loss, (C) with a 0-d target or (N, C) with (N) targets: the loss and the total weight (the summed
    weights of the targets; ignoreIndex weighs nothing)."""
    lp, t = np.atleast_2d(logp), np.atleast_1d(target).astype(np.int64)
    kept = t != ignore
    cls = np.where(kept, t, 0)
    w = np.where(kept, weight[cls], 0.0)
    loss = -w * lp[np.arange(t.size), cls]
    total = np.sum(w)
    if reduction == REDUCTION_NONE:
        return (loss if logp.ndim == 2 else loss.reshape(())), total
    return (np.sum(loss) / total if reduction == REDUCTION_MEAN else np.sum(loss)), total


def nll_loss_backward(g, logp, target, weight, reduction, ignore, total):
    """d(loss)/d(self): -g w[target] at each sample's target (divided by the total weight for mean), 0 elsewhere and
    for ignoreIndex; g is per sample with reduction none, one value otherwise."""
    lp, t = np.atleast_2d(logp), np.atleast_1d(target).astype(np.int64)
    kept = t != ignore
    cls = np.where(kept, t, 0)
    up = np.reshape(g, -1) if reduction == REDUCTION_NONE else np.full(t.shape, np.reshape(g, -1)[0])
    scale = np.where(kept, weight[cls] * up, 0.0)
    if reduction == REDUCTION_MEAN:
        scale = scale / np.reshape(total, -1)[0]
    out = np.zeros(lp.shape)
    out[np.arange(t.size), cls] = -scale
    return out.reshape(np.shape(logp))


def log_softmax_backward(g, y, dim):
    """gradOutput - sum(gradOutput) * exp(output) along dim."""
    return g - np.sum(g, axis=dim, keepdims=True) * np.exp(y)


# FlashAttention works on [B, N, S, D] here; the layouts are views of it.
def to_layout(x, layout):
    """[B, N, S, D] -> the layout's shape."""
    b, n, s, d = x.shape
    return {"BNSD": x, "BSND": x.transpose(0, 2, 1, 3), "BSH": x.transpose(0, 2, 1, 3).reshape(b, s, n * d),
            "SBH": x.transpose(2, 0, 1, 3).reshape(s, b, n * d)}[layout]


def from_layout(x, layout, heads):
    """The layout's shape -> [B, N, S, D] (`heads` splits H = N * D of BSH and SBH)."""
    if layout == "BNSD":
        return x
    if layout == "BSND":
        return x.transpose(0, 2, 1, 3)
    if layout == "BSH":
        b, s, h = x.shape
        return x.reshape(b, s, heads, h // heads).transpose(0, 2, 1, 3)
    if layout == "SBH":
        s, b, h = x.shape
        return x.reshape(s, b, heads, h // heads).transpose(1, 2, 0, 3)
    raise ValueError(f"inputLayout {layout!r}: the reference has BSH, SBH, BSND and BNSD")


def attention_band(sq, skv, pre, nxt, shift=0):
    """The scores outside the band of preTokens before and nextTokens after the diagonal, its origin `shift` columns
    right of the top-left (sparse mode 4 counts from the bottom-right: shift Skv - Sq); True = masked."""
    i, j = np.arange(sq)[:, None], np.arange(skv)[None, :]
    return (j - i > nxt + shift) | (i - j > pre - shift)


def attention_hidden(mask, sparse, pre, nxt, sq, skv):
    """The scores sparseMode masks (True), broadcastable to [B, N, Sq, Skv] (docs/context/sparse_mode参数说明.md): 0
    the mask within the preTokens/nextTokens band, 1 and 5 the mask as given, 2 and 3 causal from the top-left and
    from the bottom-right, 4 the band from the bottom-right (the compressed [2048, 2048] mask of 2-4 only stands for
    its geometry). Without a mask nothing is masked, whatever the mode (the docs: "固定为全计算")."""
    if mask is None:
        return None
    given = np.asarray(mask) != 0
    never = sq + skv  # a band this wide masks nothing on its side
    if sparse == 0:
        return given | attention_band(sq, skv, pre, nxt)
    if sparse in (1, 5):
        return given
    if sparse in (2, 3):
        return attention_band(sq, skv, never, 0, 0 if sparse == 2 else skv - sq)
    if sparse == 4:
        return attention_band(sq, skv, pre, nxt, skv - sq)
    raise ValueError(f"sparseMode {sparse}: the reference has modes 0-5 (6 needs prefix geometry, 7 and 8 are varlen)")


def attention_scores(q, k, scale, pse=None, pse_first=True):
    """[B, N1, Sq, Skv]: scale * (q k^T + pse) (pse first: V1, pseType 1) or scale * q k^T + pse (pseType 0), key
    head n2 read by its group of N1 / N2 query heads."""
    kk = np.repeat(k, q.shape[1] // k.shape[1], axis=1)
    s = q @ np.swapaxes(kk, -1, -2)
    if pse is None:
        return scale * s
    return scale * (s + pse) if pse_first else scale * s + pse


def attention_forward(q, k, v, scale, hidden=None, pse=None, pse_first=True, keep=None):
    """Out, scores, row max and row sum on [B, N, S, D] arrays; keep: each score's dropout factor (0 or 1/keepProb). A
    row whose scores are all masked (an invalid line) gives 0, max -FLT_MAX and sum Skv (CANN's invalid-line
    handling)."""
    s = attention_scores(q, k, scale, pse, pse_first)
    hidden = np.zeros(s.shape, bool) if hidden is None else np.broadcast_to(hidden, s.shape)
    valid = ~hidden.all(axis=-1, keepdims=True)
    mx = np.where(valid, np.where(hidden, -np.inf, s).max(axis=-1, keepdims=True), -FLT_MAX)
    e = np.where(hidden, 0.0, np.exp(np.where(hidden, 0.0, s - np.where(valid, mx, 0.0))))
    total = np.where(valid, e.sum(axis=-1, keepdims=True), s.shape[-1])
    p = e / total if keep is None else e / total * keep
    return p @ np.repeat(v, q.shape[1] // v.shape[1], axis=1), s, mx[..., 0], total[..., 0]


def attention_backward(q, k, v, dy, out, s, hidden, mx, total, scale, keep=None):
    """dq, dk, dv, the probabilities rebuilt from the forward's row max and sum as the kernel rebuilds them:
    dV = P^T dY, dS = P (dP - rowsum(dY * out)), dQ = scale dS K, dK = scale dS^T Q, a key head's gradient summed over
    its query heads."""
    g = q.shape[1] // k.shape[1]
    kk, vv = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
    hidden = np.broadcast_to(np.zeros(s.shape, bool) if hidden is None else hidden, s.shape)
    p = np.where(hidden, 0.0, np.exp(np.where(hidden, 0.0, s - mx[..., None])) / total[..., None])
    keep = np.ones(s.shape) if keep is None else keep
    dp = (dy @ np.swapaxes(vv, -1, -2)) * keep
    ds = p * (dp - np.sum(dy * out, axis=-1, keepdims=True))

    def fold(x):
        b, n1, skv, d = x.shape
        return x.reshape(b, n1 // g, g, skv, d).sum(axis=2)
    return scale * ds @ kk, fold(scale * np.swapaxes(ds, -1, -2) @ q), fold(np.swapaxes(p * keep, -1, -2) @ dy)


def dropout_keep(drop_mask, keep_prob, shape):
    """Each score's dropout factor from the caller's dropMask (a bit per score of [B, N, Sq, Skv], LSB first, 1 =
    kept) over keepProb; None at keepProb 1, where the mask is not read."""
    if keep_prob >= 1.0:
        return None
    bits = np.unpackbits(np.asarray(drop_mask).astype(np.uint8).reshape(-1), bitorder="little")
    return bits[:int(np.prod(shape))].reshape(shape) / keep_prob


def _flash_attention(a, grad):
    """The [B, N, S, D] problem of a FlashAttentionScore(Grad)(V2) call, from its dumped arguments (V2's have three
    more: qStartIdx, kvStartIdx and pseType)."""
    a = list(a)
    v2 = len(a) == (24 if grad else 19)
    pse_type = a.pop() if v2 else 1
    if v2:
        del a[-10:-8]  # qStartIdx, kvStartIdx: positions for the alibi pse types, which the ops refuse
    scale, keep_prob, pre, nxt, heads, layout, _, sparse = a[-8:]
    names = ("dy",) * grad + ("pse", "drop", "padding", "mask", "max", "sum", "softmax_in", "out")
    t = dict(zip(names, a[3:-9]))  # the optional tensors (and the grad's inputs), up to prefixOptional
    n2 = a[1].shape[-1] // (a[0].shape[-1] // heads) if layout in ("BSH", "SBH") else None
    p = SimpleNamespace(layout=layout, scale=scale, pse=t["pse"], pse_first=pse_type == 1,
                        q=from_layout(a[0], layout, heads), k=from_layout(a[1], layout, n2),
                        v=from_layout(a[2], layout, n2))
    b, n1, sq, _ = p.q.shape
    skv = p.k.shape[2]
    p.hidden = attention_hidden(t["mask"], sparse, pre, nxt, sq, skv)
    p.keep = dropout_keep(t["drop"], keep_prob, (b, n1, sq, skv))
    if grad:
        p.dy, p.out = from_layout(t["dy"], layout, heads), from_layout(t["out"], layout, heads)
        p.max, p.sum = t["max"][..., 0], t["sum"][..., 0]  # [B, N, Sq, 8]: each value 8 times
    return p


def _flash_attention_forward(a, d):
    p = _flash_attention(a, grad=False)
    out, _, mx, total = attention_forward(p.q, p.k, p.v, p.scale, p.hidden, p.pse, p.pse_first, p.keep)
    return [np.repeat(mx[..., None], 8, axis=-1), np.repeat(total[..., None], 8, axis=-1),
            None, to_layout(out, p.layout)]  # softmaxOutOut is not written


def _flash_attention_backward(a, d):
    p = _flash_attention(a, grad=True)
    s = attention_scores(p.q, p.k, p.scale, p.pse, p.pse_first)
    grads = attention_backward(p.q, p.k, p.v, p.dy, p.out, s, p.hidden, p.max, p.sum, p.scale, p.keep)
    return [to_layout(g, p.layout) for g in grads] + [None]  # dpseOut is not written


REFS["FlashAttentionScore"] = REFS["FlashAttentionScoreV2"] = _flash_attention_forward
REFS["FlashAttentionScoreGrad"] = REFS["FlashAttentionScoreGradV2"] = _flash_attention_backward


@ref("RotaryPositionEmbeddingGrad")
def _rotary_position_embedding_grad(a, d):
    """Without x the kernel writes dx only (dcos, dsin are the caller's placeholders): those are not recomputed."""
    dy, cos, sin, x, mode = a
    if x is None:
        raise ValueError("RotaryPositionEmbeddingGrad without x leaves dcos and dsin unwritten: not recomputed")
    return list(rope_grad(dy, cos, sin, x, mode))


@ref("NLLLoss")
def _nll_loss(a, d):
    """totalWeightOut is valid for reduction mean and sum only (the docs): unspecified with none."""
    logp, target, weight, reduction, ignore = a
    loss, total = nll_loss(logp, target, weight, reduction, ignore)
    return [loss, total if reduction != REDUCTION_NONE else UNSPECIFIED]


def _formula(fn, outputs=1):
    """The reference of an op whose outputs are `fn` of its arguments in declaration order (a tuple for several)."""
    return (lambda a, d: [fn(*a)]) if outputs == 1 else (lambda a, d: list(fn(*a)))


REFS.update({"RotaryPositionEmbedding": _formula(rope), "SwiGlu": _formula(swiglu), "SwiGluGrad": _formula(swiglu_grad),
             "RmsNormGrad": _formula(rms_norm_grad, 2), "NLLLossBackward": _formula(nll_loss_backward),
             "LogSoftmaxBackward": _formula(log_softmax_backward)})


# ---- collectives: one kernel per rank, recomputed from every rank's inputs -----------------------------------
# fn(per_rank, dtypes, rank) -> the outputs of the kernel of comm rank `rank`, with per_rank[r] = the input_args
# values of the same collective on comm rank r (every member of the communicator, in comm-rank order) and dtypes
# those of the kernel checked. A collective's outputs may differ from rank to rank (an all-to-all, a reduce-scatter).
COLLECTIVE_REFS = {}


def collective(*names):
    def deco(fn):
        for n in names:
            COLLECTIVE_REFS[n] = fn
        return fn
    return deco


_REDUCE_OPS = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}


@collective("HcclAllReduce")
def _all_reduce(per_rank, d, rank):
    op = per_rank[0][1]
    if any(a[1] != op for a in per_rank):
        raise ValueError(f"the ranks disagree on the reduce op: {[a[1] for a in per_rank]}")
    return [_REDUCE_OPS[op](np.stack([a[0] for a in per_rank]), axis=0)]


@collective("HcclAllGather")
def _all_gather(per_rank, d, rank):
    """Every member's send buffer, in comm-rank order."""
    return [np.concatenate([a[0] for a in per_rank])]


@collective("HcclAlltoAllV")
def _all_to_all_v(per_rank, d, rank):
    """Member q's block for this rank (its sendCounts[rank] elements from sdispls[rank]) lands at rdispls[q]. The
    receive buffer spans the furthest block (as the shim dumps it); elements between blocks are not written: NaN."""
    recv_counts, rdispls = per_rank[rank][3], per_rank[rank][4]
    out = np.full(max([o + c for o, c in zip(rdispls, recv_counts) if c] or [0]), np.nan)
    for q, (send, send_counts, sdispls, _, _) in enumerate(per_rank):
        n = send_counts[rank]
        if n != recv_counts[q]:
            raise ValueError(f"rank {q} sends {n} elements to rank {rank}, which receives {recv_counts[q]}")
        if n:
            out[rdispls[q]:rdispls[q] + n] = send[sdispls[rank]:sdispls[rank] + n]
    return [out]


# ---- MoE and MC2 ops (issue 41; ops-transformer moe/*/docs, gmm/grouped_matmul/docs, mc2/*/docs) -------------
def _top_k(x, k):
    """The k largest along the last axis, largest first, the lower index first among equals."""
    idx = np.argsort(-x, axis=-1, kind="stable")[..., :k]
    return np.take_along_axis(x, idx, axis=-1), idx


@ref("MoeGatingTopKSoftmax")
def _moe_gating_top_k_softmax(a, d):
    x, finished, k = a
    y, idx = _top_k(_softmax(x, -1), k)
    if finished is not None:
        idx = np.where(np.asarray(finished, bool)[..., None], x.shape[-1], idx)
    rows = int(np.prod(x.shape[:-1]))
    return [y, idx, np.arange(rows * k).reshape(k, rows).T.reshape(idx.shape)]


@ref("MoeGatingTopKSoftmaxV2")
def _moe_gating_top_k_softmax_v2(a, d):
    x, finished, k, renorm, want_softmax = a
    if renorm == 0:
        y, idx = _top_k(_softmax(x, -1), k)
    else:
        top, idx = _top_k(x, k)
        y = _softmax(top, -1)
    if finished is not None:
        idx = np.where(np.asarray(finished, bool)[..., None], x.shape[-1], idx)
    return [y, idx, _softmax(x, -1) if renorm == 0 and want_softmax else None]


@ref("MoeInitRouting")
def _moe_init_routing(a, d):
    """Experts sorted stably; expandedRowIdx[rowIdx at sorted place i] = i; expandedX rows x[that % N]."""
    x, row_idx, expert_idx, active = a
    n, k = expert_idx.shape
    order = np.argsort(expert_idx.reshape(-1), kind="stable")
    sorted_rows = row_idx.reshape(-1)[order]
    expanded_row_idx = np.empty(n * k)
    expanded_row_idx[sorted_rows] = np.arange(n * k)
    return [x[sorted_rows[:min(active, n) * k] % n], expanded_row_idx, expert_idx.reshape(-1)[order]]


@ref("MoeInitRoutingV2")
def _moe_init_routing_v2(a, d):
    x, expert_idx, active, capacity, experts, drop_pad, count_flag, before_flag = a
    n, k = expert_idx.shape
    flat = expert_idx.reshape(-1)
    order = np.argsort(flat, kind="stable")
    counts = np.bincount(flat, minlength=max(experts, 1))[:experts] if experts > 0 else None
    row_idx = np.full(n * k, -1.0)
    if drop_pad == 0:
        rows = min(active, n * k) if active > 0 else n * k
        row_idx[order] = np.arange(n * k)
        count_out = None if count_flag == 0 else (np.cumsum(counts) if count_flag == 1 else counts)
        return [x[order[:rows] // k], row_idx, count_out, None]
    out = np.zeros((experts * capacity, x.shape[1]))
    seen = np.zeros(experts, int)
    for p in order:
        e = flat[p]
        if seen[e] < capacity:
            row_idx[p] = e * capacity + seen[e]
            out[int(row_idx[p])] = x[p // k]
        seen[e] += 1
    return [out.reshape(experts, capacity, -1), row_idx, None, counts if before_flag else None]


@ref("MoeInitRoutingV3")
def _moe_init_routing_v3(a, d):
    """Not quantized. Experts outside activeExpertRange sort last and take no row; rowIdxType 0 maps source positions
    to rows (-1 for the others), 1 rows to source positions. What the kernel leaves unwritten is NaN here."""
    x, expert_idx, scale, _, active, capacity, experts, drop_pad, tokens_type, tokens_flag, _, rng, row_type = a
    n, k = expert_idx.shape
    start, end = rng if rng else (0, experts)
    flat = expert_idx.reshape(-1)
    inside = (flat >= start) & (flat < end)
    order = np.argsort(np.where(inside, flat, np.iinfo(np.int64).max), kind="stable")
    available = int(inside.sum())
    counts = np.bincount(flat[inside] - start, minlength=end - start).astype(np.float64)
    tokens = None
    if tokens_flag:
        tokens = np.cumsum(counts) if tokens_type == 0 else counts
        if tokens_type == 2:
            used = np.flatnonzero(counts)
            tokens = np.zeros((experts, 2))
            tokens[:used.size] = np.stack([used + start, counts[used]], axis=1)
    if drop_pad == 1:
        ex, rows, _, _ = _moe_init_routing_v2([x, expert_idx, 0, capacity, experts, 1, 0, False], d)
        return [ex, rows, tokens, None]
    rows_out = min(active, n * k) if active > 0 else n * k
    written = min(active, available) if active > 0 else available
    ex = np.full((rows_out, x.shape[1]), np.nan)
    ex[:written] = x[order[:written] // k]
    if row_type == 0:
        row_idx = np.full(n * k, -1.0)
        row_idx[order[:available]] = np.arange(available)
    else:
        row_idx = np.full(n * k, np.nan)
        row_idx[:available] = order[:available]
    scales = None
    if scale is not None:
        scales = np.full(rows_out, np.nan)
        scales[:written] = scale[order[:written] // k]
    return [ex, row_idx, tokens, scales]


@ref("MoeInitRoutingV2Grad")
def _moe_init_routing_v2_grad(a, d):
    """gradX[i] = sum over t of gradExpandedX[expandedRowIdx[i * topK + t]] (-1 and rows past the active: none)."""
    g, rows, k, drop_pad, active = a
    flat = g.reshape(-1, g.shape[-1])
    out = np.zeros((rows.size // k, g.shape[-1]))
    for p, r in enumerate(np.asarray(rows, dtype=np.int64)):
        if 0 <= r < flat.shape[0]:
            out[p // k] += flat[r]
    return [out]


def _combine(ex, rows, x1, x2, bias, scales, experts, n, k, by_row):
    h = ex.shape[-1]
    flat = ex.reshape(-1, h)
    out = np.zeros((n, h)) + (0 if x1 is None else x1) + (0 if x2 is None else x2)
    for i in range(n):
        for j in range(k):
            r = int(rows[i * k + j] if by_row else rows[i + j * n])
            if r >= 0:
                b = 0 if bias is None else bias[int(experts[i, j])]
                out[i] += (1.0 if scales is None else scales[i, j]) * (flat[r] + b)
    return out


@ref("MoeFinalizeRouting")
def _moe_finalize_routing(a, d):
    ex, x1, x2, bias, scales, rows, experts = a
    return [_combine(ex, rows, x1, x2, bias, scales, experts, x1.shape[0], scales.shape[1], False)]


@ref("MoeFinalizeRoutingV2")
def _moe_finalize_routing_v2(a, d):
    """dropPadMode 0/1: expandedRowIdx laid out by column (MoeInitRouting's), 2/3 by row (MoeInitRoutingV2's)."""
    ex, rows, x1, x2, bias, scales, experts, mode = a
    k = 1 if scales is None else scales.shape[1]
    return [_combine(ex, rows, x1, x2, bias, scales, experts, rows.size // k, k, mode >= 2)]


@ref("MoeFinalizeRoutingV2Grad")
def _moe_finalize_routing_v2_grad(a, d):
    gy, rows, ex, scales, experts, bias, drop_pad, active, expert_num, capacity = a
    n, h = gy.shape
    k = 1 if scales is None else scales.shape[1]
    if drop_pad == 1:
        shape = (expert_num, capacity, h)
    else:
        shape = (active if 0 < active < n * k else n * k, h)
    gex, gsc = np.zeros((int(np.prod(shape[:-1])), h)), np.zeros(n * k)
    for i, r in enumerate(np.asarray(rows, dtype=np.int64)):
        if not 0 <= r < gex.shape[0]:
            continue
        s = 1.0 if scales is None else scales.reshape(-1)[i]
        gex[r] = gy[i // k] * s
        if ex is not None:
            b = 0 if bias is None else bias[int(experts.reshape(-1)[i])]
            gsc[i] = np.dot(ex.reshape(-1, h)[r] + b, gy[i // k])
    return [gex.reshape(shape), None if scales is None else gsc.reshape(n, k)]


def _group_sizes(group_list, list_type):
    g = np.asarray(group_list, dtype=np.int64)
    return np.diff(g, prepend=0) if list_type == 0 else g


@ref("GroupedMatmulV4", "GroupedMatmulV5")
def _grouped_matmul(a, d):
    """The non-quantized cases: y_i = x_i @ weight_i + bias_i, groups from the lists or from groupList along M
    (groupType 0) or K (groupType 2)."""
    xs, ws, bs, group_list = a[0], a[1], a[2] or [], a[8]
    split_item, group_type, list_type = a[12], a[13], a[14]
    if group_type == -1 or (group_type == 2 and len(ws) > 1):
        ks = np.cumsum([0] + [w.shape[0] for w in ws])
        ys = [(xs[i] if group_type == -1 else xs[0][:, ks[i]:ks[i + 1]]) @ w + (bs[i] if bs else 0)
              for i, w in enumerate(ws)]
        return [ys, None, None]
    if group_type == 2:
        sizes = _group_sizes(group_list, list_type)
        at = np.cumsum(np.concatenate([[0], sizes]))
        return [[np.stack([xs[0][:, at[g]:at[g + 1]] @ ws[0][at[g]:at[g + 1]] for g in range(len(sizes))])],
                None, None]
    sizes = [x.shape[0] for x in xs] if group_list is None else _group_sizes(group_list, list_type)
    x = np.concatenate(xs)
    weights = list(ws[0]) if len(ws) == 1 and ws[0].ndim == 3 else ws
    biases = list(bs[0]) if len(bs) == 1 and len(weights) > 1 else bs
    at = np.cumsum(np.concatenate([[0], sizes])).astype(int)
    y = np.concatenate([x[at[g]:at[g + 1]] @ weights[g] + (biases[g] if biases else 0) for g in range(len(sizes))])
    return [[y], None, None]


# MC2: a matmul fused with a collective; every rank's operands make the result (as for HcclAllReduce below).
def _mc2_partials(per_rank, d):
    """Each rank's x1 @ x2 + bias as its kernel hands it to the collective: rounded to the dtype."""
    return [round_to(x1 @ x2 + (0 if bias is None else bias), d[0]) for x1, x2, bias, *_ in per_rank]


@collective("MatmulAllReduce")
def _matmul_all_reduce(per_rank, d, rank):
    return [np.sum(_mc2_partials(per_rank, d), axis=0)]


@collective("AllGatherMatmul")
def _all_gather_matmul(per_rank, d, rank):
    """gatherOut holds every member's x1 in comm-rank order; the output is gatherOut @ this rank's own x2 + bias."""
    gathered = np.concatenate([r[0] for r in per_rank])
    x2, bias = per_rank[rank][1], per_rank[rank][2]
    return [gathered @ x2 + (0 if bias is None else bias), gathered]


@collective("MatmulReduceScatter")
def _matmul_reduce_scatter(per_rank, d, rank):
    """Rows [rank * m / ranks, (rank + 1) * m / ranks) of the members' summed x1 @ x2 + bias."""
    return [np.split(np.sum(_mc2_partials(per_rank, d), axis=0), len(per_rank))[rank]]
