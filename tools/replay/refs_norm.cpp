// Softmax family and normalizations: Softmax, LogSoftmax, SoftmaxBackward, LogSoftmaxBackward, LayerNorm(+Backward),
// RmsNorm(+Grad).
#include <algorithm>
#include <cmath>
#include <limits>

#include "tools/reader/dump_reader.h"
#include "tools/replay/refs.h"

namespace msprobe::tools::replay {
namespace {

// A tensor seen as [outer, len, inner] around `dim`.
struct Split {
  size_t outer = 1, len = 1, inner = 1;
  size_t at(size_t o, size_t i, size_t j) const { return (o * len + i) * inner + j; }
};
Split split_at(const Shape &s, int64_t dim) {
  Split sp;
  const int64_t d = wrap_dim(dim, static_cast<int64_t>(s.size()));
  for (int64_t k = 0; k < static_cast<int64_t>(s.size()); ++k) {
    const auto n = static_cast<size_t>(s[static_cast<size_t>(k)]);
    (k < d ? sp.outer : k == d ? sp.len : sp.inner) *= n;
  }
  return sp;
}

Tensor softmax(const Tensor &x, int64_t dim, bool log) {
  const Split sp = split_at(x.shape, dim);
  Tensor out(x.shape, x.v);
  for (size_t o = 0; o < sp.outer; ++o)
    for (size_t j = 0; j < sp.inner; ++j) {
      double m = -std::numeric_limits<double>::infinity();
      for (size_t i = 0; i < sp.len; ++i) m = std::max(m, x.v[sp.at(o, i, j)]);
      double sum = 0;
      for (size_t i = 0; i < sp.len; ++i) sum += std::exp(x.v[sp.at(o, i, j)] - m);
      for (size_t i = 0; i < sp.len; ++i) {
        const double z = x.v[sp.at(o, i, j)] - m;
        out.v[sp.at(o, i, j)] = log ? z - std::log(sum) : std::exp(z) / sum;
      }
    }
  return out;
}

Outputs softmax_op(const Call &c) { return {softmax(c.tensor(0), c.integer(1), false)}; }
Outputs log_softmax_op(const Call &c) { return {softmax(c.tensor(0), c.integer(1), true)}; }

Outputs softmax_backward(const Call &c) {  // (gradOutput, output, dim): y * (g - sum(g * y))
  const Tensor &g = c.tensor(0), &y = c.tensor(1);
  if (g.shape != y.shape) throw RefError("SoftmaxBackward: gradOutput and output shapes differ");
  const Split sp = split_at(y.shape, c.integer(2));
  Tensor out(y.shape, y.v);
  for (size_t o = 0; o < sp.outer; ++o)
    for (size_t j = 0; j < sp.inner; ++j) {
      double dot = 0;
      for (size_t i = 0; i < sp.len; ++i) dot += g.v[sp.at(o, i, j)] * y.v[sp.at(o, i, j)];
      for (size_t i = 0; i < sp.len; ++i) out.v[sp.at(o, i, j)] = y.v[sp.at(o, i, j)] * (g.v[sp.at(o, i, j)] - dot);
    }
  return {std::move(out)};
}

// (gradOutput, output, dim): g - exp(output) * sum(g) (aclnnLogSoftmaxBackward's formula).
Outputs log_softmax_backward(const Call &c) {
  const Tensor &g = c.tensor(0), &y = c.tensor(1);
  if (g.shape != y.shape) throw RefError("LogSoftmaxBackward: gradOutput and output shapes differ");
  const Split sp = split_at(y.shape, c.integer(2));
  Tensor out(y.shape, y.v);
  for (size_t o = 0; o < sp.outer; ++o)
    for (size_t j = 0; j < sp.inner; ++j) {
      double sum = 0;
      for (size_t i = 0; i < sp.len; ++i) sum += g.v[sp.at(o, i, j)];
      for (size_t i = 0; i < sp.len; ++i)
        out.v[sp.at(o, i, j)] = g.v[sp.at(o, i, j)] - std::exp(y.v[sp.at(o, i, j)]) * sum;
    }
  return {std::move(out)};
}

// Rows of a tensor normalized over its last `k` dims (normalizedShape): [rows, row_len].
struct Rows {
  size_t rows = 1, len = 1;
  Shape stat_shape;  // the leading dims followed by k ones (mean / rstd)
};
Rows norm_rows(const Tensor &x, const std::vector<int64_t> &normalized) {
  const size_t k = normalized.size();
  if (k > x.shape.size() || !std::equal(normalized.begin(), normalized.end(), x.shape.end() - static_cast<long>(k)))
    throw RefError("normalizedShape " + shape_text(normalized) + " is not the trailing shape of " +
                   shape_text(x.shape));
  Rows r;
  for (size_t i = 0; i < x.shape.size(); ++i) {
    const bool lead = i < x.shape.size() - k;
    (lead ? r.rows : r.len) *= static_cast<size_t>(x.shape[i]);
    r.stat_shape.push_back(lead ? x.shape[i] : 1);
  }
  return r;
}

// (input, normalizedShape, weight?, bias?, eps) -> out, mean, rstd (biased variance, as torch).
Outputs layer_norm(const Call &c) {
  c.expect_at_least(5);
  const Tensor &x = c.tensor(0);
  const Rows r = norm_rows(x, c.int_list(1));
  const Tensor *w = c.optional_tensor(2), *b = c.optional_tensor(3);
  const double eps = c.number(4);
  for (const Tensor *p : {w, b})
    if (p && p->size() != r.len) throw RefError("LayerNorm: weight/bias size is not the normalized size");
  Tensor out(x.shape, x.v), mean = Tensor::zeros(r.stat_shape), rstd = Tensor::zeros(r.stat_shape);
  for (size_t row = 0; row < r.rows; ++row) {
    const double *in = x.v.data() + row * r.len;
    double mu = 0, var = 0;
    for (size_t i = 0; i < r.len; ++i) mu += in[i];
    mu /= static_cast<double>(r.len);
    for (size_t i = 0; i < r.len; ++i) var += (in[i] - mu) * (in[i] - mu);
    var /= static_cast<double>(r.len);
    const double rs = 1.0 / std::sqrt(var + eps);
    mean.v[row] = mu;
    rstd.v[row] = rs;
    for (size_t i = 0; i < r.len; ++i) {
      double y = (in[i] - mu) * rs;
      if (w) y *= w->v[i];
      if (b) y += b->v[i];
      out.v[row * r.len + i] = y;
    }
  }
  Outputs o{std::move(out), std::move(mean), std::move(rstd)};
  for (size_t i = 1; i < 3 && i < c.outputs.size(); ++i)
    if (!c.outputs[i].present) o[i].reset();  // meanOutOptional / rstdOutOptional not given
  return o;
}

// (gradOut, input, normalizedShape, mean, rstd, weight?, bias?, outputMask) -> dx, dweight, dbias (torch's
// native_layer_norm_backward), each only where outputMask asks.
Outputs layer_norm_backward(const Call &c) {
  c.expect_at_least(8);
  const Tensor &g = c.tensor(0), &x = c.tensor(1);
  const Rows r = norm_rows(x, c.int_list(2));
  const Tensor &mean = c.tensor(3), &rstd = c.tensor(4);
  const Tensor *w = c.optional_tensor(5);
  const std::vector<bool> mask = c.bool_list(7);
  if (g.shape != x.shape || mean.size() != r.rows || rstd.size() != r.rows || (w && w->size() != r.len))
    throw RefError("LayerNormBackward: argument shapes do not fit together");
  Tensor dx(x.shape, x.v),
      dw = Tensor::zeros(Shape(x.shape.end() - static_cast<long>(c.int_list(2).size()), x.shape.end()));
  Tensor db = dw;
  const auto n = static_cast<double>(r.len);
  std::vector<double> xhat(r.len), dxhat(r.len);
  for (size_t row = 0; row < r.rows; ++row) {
    const size_t base = row * r.len;
    double sum_dxhat = 0, sum_dxhat_xhat = 0;
    for (size_t i = 0; i < r.len; ++i) {
      xhat[i] = (x.v[base + i] - mean.v[row]) * rstd.v[row];
      dxhat[i] = g.v[base + i] * (w ? w->v[i] : 1.0);
      sum_dxhat += dxhat[i];
      sum_dxhat_xhat += dxhat[i] * xhat[i];
      dw.v[i] += g.v[base + i] * xhat[i];
      db.v[i] += g.v[base + i];
    }
    for (size_t i = 0; i < r.len; ++i)
      dx.v[base + i] = rstd.v[row] / n * (n * dxhat[i] - sum_dxhat - xhat[i] * sum_dxhat_xhat);
  }
  Outputs o{std::move(dx), std::move(dw), std::move(db)};
  for (size_t i = 0; i < 3; ++i)
    if (i >= mask.size() || !mask[i]) o[i].reset();
  return o;
}

// (x, gamma, epsilon) -> y = x * rstd * gamma, rstd = 1 / sqrt(mean(x^2) + eps) over gamma's trailing dims.
Outputs rms_norm(const Call &c) {
  c.expect_at_least(3);
  const Tensor &x = c.tensor(0), &gamma = c.tensor(1);
  const Rows r = norm_rows(x, gamma.shape);
  const double eps = c.number(2);
  Tensor y(x.shape, x.v), rstd = Tensor::zeros(r.stat_shape);
  for (size_t row = 0; row < r.rows; ++row) {
    double ss = 0;
    for (size_t i = 0; i < r.len; ++i) ss += x.v[row * r.len + i] * x.v[row * r.len + i];
    const double rs = 1.0 / std::sqrt(ss / static_cast<double>(r.len) + eps);
    rstd.v[row] = rs;
    for (size_t i = 0; i < r.len; ++i) y.v[row * r.len + i] = x.v[row * r.len + i] * rs * gamma.v[i];
  }
  return {std::move(y), std::move(rstd)};
}

// (dy, x, rstd, gamma) -> dx, dgamma, from the forward's rstd as given (aclnnRmsNormGrad's formula):
// dx = (dy * g - rstd * x * mean(dy * g * x * rstd)) * rstd, dgamma = sum over rows of rstd * x * dy.
Outputs rms_norm_grad(const Call &c) {
  c.expect_at_least(4);
  const Tensor &dy = c.tensor(0), &x = c.tensor(1), &rstd = c.tensor(2), &gamma = c.tensor(3);
  const Rows r = norm_rows(x, gamma.shape);
  if (dy.shape != x.shape) throw RefError("RmsNormGrad: dy and x shapes differ");
  if (rstd.size() != r.rows) throw RefError("RmsNormGrad: rstd is not one value per row of x");
  Tensor dx(x.shape, x.v), dgamma = Tensor::zeros(gamma.shape);
  for (size_t row = 0; row < r.rows; ++row) {
    const double rs = rstd.v[row];
    const size_t at = row * r.len;
    double mean = 0;
    for (size_t i = 0; i < r.len; ++i) mean += dy.v[at + i] * gamma.v[i] * x.v[at + i] * rs;
    mean /= static_cast<double>(r.len);
    for (size_t i = 0; i < r.len; ++i) {
      dx.v[at + i] = (dy.v[at + i] * gamma.v[i] - rs * x.v[at + i] * mean) * rs;
      dgamma.v[i] += rs * x.v[at + i] * dy.v[at + i];
    }
  }
  return {std::move(dx), std::move(dgamma)};
}

const RefEntry kRefs[] = {
    {"Softmax", softmax_op},
    {"LogSoftmax", log_softmax_op},
    {"SoftmaxBackward", softmax_backward},
    {"LogSoftmaxBackward", log_softmax_backward},
    {"LayerNorm", layer_norm},
    {"LayerNormBackward", layer_norm_backward},
    {"RmsNorm", rms_norm},
    {"RmsNormGrad", rms_norm_grad},
};

}  // namespace

std::span<const RefEntry> norm_refs() { return kRefs; }

}  // namespace msprobe::tools::replay
