// A transformer layer's fused elementwise ops: RotaryPositionEmbedding(+Grad) (torch_npu's npu_rotary_mul), SwiGlu
// (+Grad). Definitions: ops-transformer posembedding/rotary_position_embedding*/docs and ops-nn
// activation/swi_glu*/docs.
#include <cmath>

#include "tools/reader/dump_reader.h"
#include "tools/replay/refs.h"

namespace msprobe::tools::replay {
namespace {

// ---- RoPE -----------------------------------------------------------------------------------------------------------
// y = A(x) * cos + B(x) * sin, where A and B pick (and B negates) elements of the last dim, by mode:
//   0 half:             A = x,                       B = cat(-x2, x1)            (x1, x2 the halves)
//   1 interleave:       A = x,                       B = (-x[1], x[0], -x[3], x[2], ...)
//   2 quarter:          A = x,                       B = cat(-x2, x1, -x4, x3)   (the quarters)
//   3 interleave-half:  A = cat(x[::2], x[1::2]),    B = cat(-x[1::2], x[::2])
// Each is "element i of the result is sign * x[src(i)]".
struct Pick {
  std::vector<size_t> src;
  std::vector<double> sign;
};
struct Rotation {
  Pick a, b;
};

Rotation rotation(int64_t mode, size_t d) {
  const size_t h = d / 2, q = d / 4;
  if (mode < 0 || mode > 3) throw RefError("RotaryPositionEmbedding: unknown mode " + std::to_string(mode));
  if ((mode == 2 && d % 4 != 0) || d % 2 != 0)
    throw RefError("RotaryPositionEmbedding: the last dim " + std::to_string(d) + " does not split for mode " +
                   std::to_string(mode));
  Rotation r;
  for (size_t i = 0; i < d; ++i) {
    const bool low = i < h;
    size_t a = i, b = 0;
    double s = 1.0;
    if (mode == 0) {
      b = low ? i + h : i - h, s = low ? -1.0 : 1.0;
    } else if (mode == 1) {
      b = i % 2 == 0 ? i + 1 : i - 1, s = i % 2 == 0 ? -1.0 : 1.0;
    } else if (mode == 2) {
      const bool first = (i / q) % 2 == 0;
      b = first ? i + q : i - q, s = first ? -1.0 : 1.0;
    } else {
      a = low ? 2 * i : 2 * (i - h) + 1;
      b = low ? 2 * i + 1 : 2 * (i - h), s = low ? -1.0 : 1.0;
    }
    r.a.src.push_back(a), r.a.sign.push_back(1.0);
    r.b.src.push_back(b), r.b.sign.push_back(s);
  }
  return r;
}

// p applied to every row of the last dim of x.
Tensor apply(const Pick &p, const Tensor &x) {
  const size_t d = p.src.size();
  Tensor out(x.shape, x.v);
  for (size_t row = 0; row < x.size() / d; ++row)
    for (size_t i = 0; i < d; ++i) out.v[row * d + i] = p.sign[i] * x.v[row * d + p.src[i]];
  return out;
}

// x, cos, sin and the rotation of x's last dim; cos and sin broadcast to x (the layouts the docs list).
struct RopeArgs {
  Rotation r;
  std::vector<double> cos, sin;
};
RopeArgs rope_args(const Call &c, const Tensor &x, size_t cos_at, int64_t mode) {
  if (x.rank() < 1 || x.shape.back() == 0) throw RefError(std::string(c.op) + ": x has no last dim");
  return {rotation(mode, static_cast<size_t>(x.shape.back())), broadcast_to(c.tensor(cos_at), x.shape),
          broadcast_to(c.tensor(cos_at + 1), x.shape)};
}

Outputs rope(const Call &c) {  // (x, cos, sin, mode)
  c.expect_at_least(4);
  const Tensor &x = c.tensor(0);
  const RopeArgs r = rope_args(c, x, 1, c.integer(3));
  const Tensor ax = apply(r.r.a, x), bx = apply(r.r.b, x);
  Tensor y(x.shape, x.v);
  for (size_t k = 0; k < y.size(); ++k) y.v[k] = ax.v[k] * r.cos[k] + bx.v[k] * r.sin[k];
  return {std::move(y)};
}

// (dy, cos, sin, xOptional, mode) -> dx, dcos, dsin: dx is the transpose of the forward's linear map applied to dy;
// dcos = dy * A(x) and dsin = dy * B(x) summed over the dims cos and sin were broadcast along (not written without x).
Outputs rope_grad(const Call &c) {
  c.expect_at_least(5);
  const Tensor &dy = c.tensor(0), &cos = c.tensor(1), &sin = c.tensor(2);
  const Tensor *x = c.optional_tensor(3);
  const RopeArgs r = rope_args(c, dy, 1, c.integer(4));
  if (x && x->shape != dy.shape) throw RefError("RotaryPositionEmbeddingGrad: x and dy shapes differ");
  const size_t d = r.r.a.src.size();
  Tensor dx = Tensor::zeros(dy.shape);
  for (size_t row = 0; row < dy.size() / d; ++row)
    for (size_t i = 0; i < d; ++i) {
      const size_t k = row * d + i;
      dx.v[row * d + r.r.a.src[i]] += r.r.a.sign[i] * dy.v[k] * r.cos[k];
      dx.v[row * d + r.r.b.src[i]] += r.r.b.sign[i] * dy.v[k] * r.sin[k];
    }
  if (!x) return {std::move(dx), std::nullopt, std::nullopt};
  const auto times_dy = [&](Tensor t) {
    for (size_t k = 0; k < t.size(); ++k) t.v[k] *= dy.v[k];
    return t;
  };
  Tensor dcos = sum_to(times_dy(apply(r.r.a, *x)), cos.shape), dsin = sum_to(times_dy(apply(r.r.b, *x)), sin.shape);
  return {std::move(dx), std::move(dcos), std::move(dsin)};
}

// ---- SwiGlu ---------------------------------------------------------------------------------------------------------
// x split in two along `dim`: A the first half, B the second.
struct Halves {
  size_t outer = 1, half = 0, inner = 1;
  size_t a(size_t o, size_t i, size_t j) const { return (o * 2 * half + i) * inner + j; }
  size_t b(size_t o, size_t i, size_t j) const { return a(o, i + half, j); }
};
Halves halves(const Call &c, const Tensor &x, int64_t dim) {
  const auto d = static_cast<size_t>(wrap_dim(dim, x.rank()));
  if (x.rank() == 0 || x.shape[d] % 2 != 0)
    throw RefError(std::string(c.op) + ": dim " + std::to_string(dim) + " of " + shape_text(x.shape) +
                   " does not split in two");
  Halves h;
  for (size_t k = 0; k < x.shape.size(); ++k) {
    const auto n = static_cast<size_t>(x.shape[k]);
    if (k < d)
      h.outer *= n;
    else if (k == d)
      h.half = n / 2;
    else
      h.inner *= n;
  }
  return h;
}

double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

Outputs swiglu(const Call &c) {  // (x, dim): Swish(A) * B, Swish(a) = a * sigmoid(a)
  c.expect_at_least(2);
  const Tensor &x = c.tensor(0);
  const Halves h = halves(c, x, c.integer(1));
  Shape s = x.shape;
  s[static_cast<size_t>(wrap_dim(c.integer(1), x.rank()))] = static_cast<int64_t>(h.half);
  Tensor out = Tensor::zeros(s);
  size_t k = 0;
  for (size_t o = 0; o < h.outer; ++o)
    for (size_t i = 0; i < h.half; ++i)
      for (size_t j = 0; j < h.inner; ++j, ++k) {
        const double a = x.v[h.a(o, i, j)];
        out.v[k] = a * sigmoid(a) * x.v[h.b(o, i, j)];
      }
  return {std::move(out)};
}

// (yGrad, x, dim): outA = g * (sig(A) + sig(A) * (1 - sig(A)) * A) * B, outB = g * sig(A) * A, out = cat(outA, outB).
Outputs swiglu_grad(const Call &c) {
  c.expect_at_least(3);
  const Tensor &g = c.tensor(0), &x = c.tensor(1);
  const Halves h = halves(c, x, c.integer(2));
  if (g.size() * 2 != x.size()) throw RefError("SwiGluGrad: yGrad is not half of x");
  Tensor out = Tensor::zeros(x.shape);
  size_t k = 0;
  for (size_t o = 0; o < h.outer; ++o)
    for (size_t i = 0; i < h.half; ++i)
      for (size_t j = 0; j < h.inner; ++j, ++k) {
        const double a = x.v[h.a(o, i, j)], b = x.v[h.b(o, i, j)], s = sigmoid(a);
        out.v[h.a(o, i, j)] = g.v[k] * (s + s * (1.0 - s) * a) * b;
        out.v[h.b(o, i, j)] = g.v[k] * s * a;
      }
  return {std::move(out)};
}

const RefEntry kRefs[] = {
    {"RotaryPositionEmbedding", rope},
    {"RotaryPositionEmbeddingGrad", rope_grad},
    {"SwiGlu", swiglu},
    {"SwiGluGrad", swiglu_grad},
};

}  // namespace

std::span<const RefEntry> transformer_refs() { return kRefs; }

}  // namespace msprobe::tools::replay
