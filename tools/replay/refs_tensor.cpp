// Data movement, reductions and predicates: Permute, Cat, Embedding, EmbeddingDenseBackward, ReduceSum, Mean, Amax,
// Amin, AminmaxAll, Norm, LinalgVectorNorm, ForeachNorm, IsFinite, IsPosInf, IsNegInf.
#include <algorithm>
#include <cmath>
#include <limits>

#include "tools/reader/dump_reader.h"
#include "tools/replay/refs.h"

namespace msprobe::tools::replay {
namespace {

// For each element of `s` in C order, calls f(flat index, multi-index).
template <class F>
void for_each_index(const Shape &s, F f) {
  const auto n = static_cast<size_t>(numel(s));
  Shape idx(s.size(), 0);
  for (size_t k = 0; k < n; ++k) {
    f(k, idx);
    for (size_t d = s.size(); d-- > 0;) {
      if (++idx[d] < s[d]) break;
      idx[d] = 0;
    }
  }
}

Outputs permute(const Call &c) {  // (self, dims): out.shape[i] = self.shape[dims[i]]
  const Tensor &x = c.tensor(0);
  const std::vector<int64_t> dims = c.int_list(1);
  if (dims.size() != x.shape.size()) throw RefError("Permute: dims do not match the rank");
  Shape out_shape, src_strides;
  const Shape st = strides_of(x.shape);
  for (int64_t d : dims) {
    const auto w = static_cast<size_t>(wrap_dim(d, x.rank()));
    out_shape.push_back(x.shape[w]);
    src_strides.push_back(st[w]);
  }
  Tensor out = Tensor::zeros(out_shape);
  for_each_index(out_shape, [&](size_t k, const Shape &idx) {
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * src_strides[d];
    out.v[k] = x.v[static_cast<size_t>(off)];
  });
  return {std::move(out)};
}

Outputs cat(const Call &c) {  // (tensors, dim); empty 1-D tensors are skipped, as torch does
  std::vector<const Tensor *> parts;
  for (const Tensor *t : c.tensor_list(0))
    if (!(t->shape.size() == 1 && t->shape[0] == 0)) parts.push_back(t);
  if (parts.empty()) return {Tensor(Shape{0}, {})};
  const Shape &first = parts[0]->shape;
  const auto d = static_cast<size_t>(wrap_dim(c.integer(1), static_cast<int64_t>(first.size())));
  Shape out_shape = first;
  out_shape[d] = 0;
  for (const Tensor *t : parts) {
    for (size_t k = 0; k < first.size(); ++k)
      if (k != d && (t->shape.size() != first.size() || t->shape[k] != first[k]))
        throw RefError("Cat: shapes " + shape_text(first) + " and " + shape_text(t->shape) + " do not fit");
    out_shape[d] += t->shape[d];
  }
  size_t outer = 1, inner = 1;
  for (size_t k = 0; k < d; ++k) outer *= static_cast<size_t>(first[k]);
  for (size_t k = d + 1; k < first.size(); ++k) inner *= static_cast<size_t>(first[k]);
  Tensor out = Tensor::zeros(out_shape);
  size_t at = 0;
  for (size_t o = 0; o < outer; ++o)
    for (const Tensor *t : parts) {
      const size_t chunk = static_cast<size_t>(t->shape[d]) * inner;
      std::copy_n(t->v.begin() + static_cast<long>(o * chunk), chunk, out.v.begin() + static_cast<long>(at));
      at += chunk;
    }
  return {std::move(out)};
}

size_t row_index(double v, int64_t rows, const char *op) {
  if (!(v >= 0) || v >= static_cast<double>(rows))
    throw RefError(std::string(op) + ": index " + std::to_string(v) + " out of range [0, " + std::to_string(rows) +
                   ")");
  return static_cast<size_t>(v);
}

Outputs embedding(const Call &c) {  // (weight, indices): out[..., :] = weight[indices[...], :]
  const Tensor &w = c.tensor(0), &idx = c.tensor(1);
  if (w.rank() != 2) throw RefError("Embedding: weight is not 2-D");
  const auto cols = static_cast<size_t>(w.shape[1]);
  Shape out_shape = idx.shape;
  out_shape.push_back(w.shape[1]);
  Tensor out = Tensor::zeros(out_shape);
  for (size_t k = 0; k < idx.size(); ++k) {
    const size_t r = row_index(idx.v[k], w.shape[0], "Embedding");
    std::copy_n(w.v.begin() + static_cast<long>(r * cols), cols, out.v.begin() + static_cast<long>(k * cols));
  }
  return {std::move(out)};
}

// (grad, indices, numWeights, paddingIdx, scaleGradByFreq): each grad row summed into its index's row; the padding
// row stays zero; with scaleGradByFreq a row is divided by how often its index occurs.
Outputs embedding_dense_backward(const Call &c) {
  c.expect_at_least(5);
  const Tensor &g = c.tensor(0), &idx = c.tensor(1);
  const int64_t rows = c.integer(2), padding = c.integer(3);
  const bool scale = c.boolean(4);
  if (idx.size() == 0 || g.size() % idx.size() != 0)
    throw RefError("EmbeddingDenseBackward: grad does not fit indices");
  const size_t cols = g.size() / idx.size();
  Tensor out = Tensor::zeros({rows, static_cast<int64_t>(cols)});
  std::vector<double> count(static_cast<size_t>(rows), 0.0);
  for (double v : idx.v) count[row_index(v, rows, "EmbeddingDenseBackward")] += 1;
  for (size_t k = 0; k < idx.size(); ++k) {
    const size_t r = row_index(idx.v[k], rows, "EmbeddingDenseBackward");
    if (static_cast<int64_t>(r) == padding) continue;
    for (size_t j = 0; j < cols; ++j) out.v[r * cols + j] += scale ? g.v[k * cols + j] / count[r] : g.v[k * cols + j];
  }
  return {std::move(out)};
}

// A reduction over `dims` (all dims when empty), keeping them as 1 with keepDim: each output element folds its
// inputs with `step` from `init`, then `finish(acc, count)`.
template <class Step, class Finish>
Tensor reduce(const Tensor &x, const std::vector<int64_t> &dims, bool keep, double init, Step step, Finish finish) {
  std::vector<bool> reduced(x.shape.size(), dims.empty());
  for (int64_t d : dims) reduced[static_cast<size_t>(wrap_dim(d, x.rank()))] = true;
  Shape kept_shape, out_shape;
  double n = 1;
  for (size_t d = 0; d < x.shape.size(); ++d) {
    kept_shape.push_back(reduced[d] ? 1 : x.shape[d]);
    if (reduced[d])
      n *= static_cast<double>(x.shape[d]);
    else
      out_shape.push_back(x.shape[d]);
  }
  if (keep) out_shape = kept_shape;
  const Shape st = strides_of(kept_shape);
  Tensor out(out_shape, std::vector<double>(static_cast<size_t>(numel(out_shape)), init));
  for_each_index(x.shape, [&](size_t k, const Shape &idx) {
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d)
      if (!reduced[d]) off += idx[d] * st[d];
    double &acc = out.v[static_cast<size_t>(off)];
    acc = step(acc, x.v[k]);
  });
  for (double &v : out.v) v = finish(v, n);
  return out;
}

double plus(double a, double b) { return a + b; }
double as_is(double a, double) { return a; }
// NaN propagates, as torch's amax / amin.
double max_nan(double a, double b) { return std::isnan(a) || std::isnan(b) ? std::nan("") : std::max(a, b); }
double min_nan(double a, double b) { return std::isnan(a) || std::isnan(b) ? std::nan("") : std::min(a, b); }
constexpr double kInf = std::numeric_limits<double>::infinity();

Outputs reduce_sum(const Call &c) { return {reduce(c.tensor(0), c.int_list(1), c.boolean(2), 0.0, plus, as_is)}; }
Outputs mean(const Call &c) {
  return {reduce(c.tensor(0), c.int_list(1), c.boolean(2), 0.0, plus, [](double s, double n) { return s / n; })};
}
Outputs amax(const Call &c) { return {reduce(c.tensor(0), c.int_list(1), c.boolean(2), -kInf, max_nan, as_is)}; }
Outputs amin(const Call &c) { return {reduce(c.tensor(0), c.int_list(1), c.boolean(2), kInf, min_nan, as_is)}; }
// (self, minOut, maxOut): each output one element, in the shape the kernel's output slot has (0-d or [1]).
Outputs aminmax_all(const Call &c) {
  const Tensor &x = c.tensor(0);
  if (x.v.empty()) throw RefError("AminmaxAll: an empty tensor has no extremes");
  double lo = kInf, hi = -kInf;
  for (double v : x.v) lo = min_nan(lo, v), hi = max_nan(hi, v);
  const auto shaped = [&](size_t out, double v) {
    Shape s = out < c.outputs.size() && c.outputs[out].present ? c.outputs[out].shape : Shape{};
    if (numel(s) != 1) throw RefError("AminmaxAll: output " + std::to_string(out) + " is not one element");
    return Tensor(std::move(s), {v});
  };
  return {shaped(0, lo), shaped(1, hi)};
}

// The vector p-norm: max |x| for p = inf, min |x| for -inf, the count of non-zeros for 0, else (sum |x|^p)^(1/p).
Tensor vector_norm(const Tensor &x, double p, const std::vector<int64_t> &dims, bool keep) {
  const Tensor a = unary(x, [](double v) { return std::fabs(v); });
  if (std::isinf(p))
    return p > 0 ? reduce(a, dims, keep, -kInf, max_nan, as_is) : reduce(a, dims, keep, kInf, min_nan, as_is);
  if (p == 0)
    return reduce(
        a, dims, keep, 0.0, [](double s, double v) { return s + (v != 0); }, as_is);
  return reduce(
      a, dims, keep, 0.0, [p](double s, double v) { return s + std::pow(v, p); },
      [p](double s, double) { return std::pow(s, 1.0 / p); });
}
Outputs norm(const Call &c) {  // (self, p, dim, keepdim)
  return {vector_norm(c.tensor(0), c.number(1), c.int_list(2), c.boolean(3))};
}
Outputs linalg_vector_norm(const Call &c) {  // (self, ord, dims, keepDims, dtype)
  return {vector_norm(c.tensor(0), c.number(1), c.int_list(2), c.boolean(3))};
}
Outputs foreach_norm(const Call &c) {  // (x, scalar, out): the p-norm of each tensor of x over all its elements
  c.expect_at_least(2);
  const double p = c.number(1);
  Outputs out;
  for (const Tensor *x : c.tensor_list(0)) out.push_back(vector_norm(*x, p, {}, false));
  return out;
}

template <bool (*P)(double)>
Outputs predicate(const Call &c) {
  return {unary(c.tensor(0), [](double v) { return P(v) ? 1.0 : 0.0; })};
}
bool is_finite(double v) { return std::isfinite(v); }
bool is_pos_inf(double v) { return std::isinf(v) && v > 0; }
bool is_neg_inf(double v) { return std::isinf(v) && v < 0; }

const RefEntry kRefs[] = {
    {"Permute", permute},
    {"Cat", cat},
    {"Embedding", embedding},
    {"EmbeddingDenseBackward", embedding_dense_backward},
    {"ReduceSum", reduce_sum},
    {"Mean", mean},
    {"Amax", amax},
    {"Amin", amin},
    {"AminmaxAll", aminmax_all},
    {"Norm", norm},
    {"LinalgVectorNorm", linalg_vector_norm},
    {"ForeachNorm", foreach_norm},
    {"IsFinite", predicate<is_finite>},
    {"IsPosInf", predicate<is_pos_inf>},
    {"IsNegInf", predicate<is_neg_inf>},
};

}  // namespace

std::span<const RefEntry> tensor_refs() { return kRefs; }

}  // namespace msprobe::tools::replay
