// Mixture-of-experts ops: MoeGatingTopKSoftmax(V2), MoeInitRoutingV2(+Grad), MoeFinalizeRoutingV2(+Grad) and
// GroupedMatmulV4 / V5 (not quantized). Definitions: ops-transformer moe/*/README.md and gmm/grouped_matmul/README.md
// (their formulas and argument tables). Positions in a routing are those of expertIdx [N, K] flattened row by row
// (p = n * K + k); the sort of the routing is by expert, positions of one expert in order (a stable key-value sort).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "tools/reader/dump_reader.h"
#include "tools/replay/refs.h"

namespace msprobe::tools::replay {
namespace {

// Rows of a [..., len] tensor.
size_t rows_of(const Tensor &t) { return t.rank() == 0 || t.shape.back() == 0 ? 0 : t.size() / t.shape.back(); }
size_t width_of(const Tensor &t) { return t.rank() == 0 ? 1 : static_cast<size_t>(t.shape.back()); }

size_t index_of(double v, size_t n, const char *what) {
  if (!(v >= 0) || v >= static_cast<double>(n))
    throw RefError(std::string(what) + " " + std::to_string(v) + " outside [0, " + std::to_string(n) + ")");
  return static_cast<size_t>(v);
}

// ---- Gating ---------------------------------------------------------------------------------------------------------
std::vector<double> softmax_row(const double *x, size_t n) {
  double m = -std::numeric_limits<double>::infinity(), sum = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, x[i]);
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) sum += out[i] = std::exp(x[i] - m);
  for (double &v : out) v /= sum;
  return out;
}

// The k largest of a row, largest first, the lower index first among equals.
std::vector<size_t> top_k(const std::vector<double> &row, size_t k) {
  std::vector<size_t> idx(row.size());
  std::iota(idx.begin(), idx.end(), size_t{0});
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return row[a] > row[b]; });
  idx.resize(k);
  return idx;
}

struct Gating {
  Tensor y, expert, softmax;
};

// renorm 0: softmax, then top-k of it; renorm 1: top-k of x, then the softmax of those k. A finished row's experts are
// the expert count.
Gating gating(const Call &c, int64_t k, bool renorm) {
  const Tensor &x = c.tensor(0);
  const Tensor *finished = c.optional_tensor(1);
  const size_t rows = rows_of(x), e = width_of(x);
  if (k <= 0 || static_cast<size_t>(k) > e) throw RefError(std::string(c.op) + ": k outside [1, experts]");
  if (finished && finished->size() != rows) throw RefError(std::string(c.op) + ": finished is not one per row");
  Shape ks(x.shape.begin(), x.shape.end() - 1);
  ks.push_back(k);
  Gating g{Tensor::zeros(ks), Tensor::zeros(ks), Tensor::zeros(x.shape)};
  const auto kk = static_cast<size_t>(k);
  for (size_t r = 0; r < rows; ++r) {
    const std::vector<double> in(x.v.begin() + static_cast<long>(r * e), x.v.begin() + static_cast<long>((r + 1) * e));
    const std::vector<double> sm = softmax_row(in.data(), e);
    const std::vector<size_t> idx = top_k(renorm ? in : sm, kk);
    std::vector<double> picked;
    for (size_t i : idx) picked.push_back(renorm ? in[i] : sm[i]);
    if (renorm) picked = softmax_row(picked.data(), kk);
    const bool done = finished && finished->v[r] != 0;
    for (size_t j = 0; j < kk; ++j) {
      g.y.v[r * kk + j] = picked[j];
      g.expert.v[r * kk + j] = done ? static_cast<double>(e) : static_cast<double>(idx[j]);
    }
    std::copy(sm.begin(), sm.end(), g.softmax.v.begin() + static_cast<long>(r * e));
  }
  return g;
}

// (x, finishedOptional, k) -> y, expertIdx, rowIdx = arange(rows * k).reshape(k, rows).T.
Outputs gating_top_k_softmax(const Call &c) {
  c.expect_at_least(3);
  Gating g = gating(c, c.integer(2), false);
  Tensor row_idx = Tensor::zeros(g.expert.shape);
  const size_t k = width_of(g.expert), rows = rows_of(g.expert);
  for (size_t r = 0; r < rows; ++r)
    for (size_t j = 0; j < k; ++j) row_idx.v[r * k + j] = static_cast<double>(j * rows + r);
  return {std::move(g.y), std::move(g.expert), std::move(row_idx)};
}

// (x, finishedOptional, k, renorm, outputSoftmaxResultFlag) -> y, expertIdx, softmaxResultOutOptional (renorm 0 only).
Outputs gating_top_k_softmax_v2(const Call &c) {
  c.expect_at_least(5);
  const int64_t renorm = c.integer(3);
  if (renorm != 0 && renorm != 1) throw RefError("MoeGatingTopKSoftmaxV2: renorm " + std::to_string(renorm));
  Gating g = gating(c, c.integer(2), renorm == 1);
  std::optional<Tensor> softmax;
  if (renorm == 0 && c.boolean(4)) softmax = std::move(g.softmax);
  return {std::move(g.y), std::move(g.expert), std::move(softmax)};
}

// ---- Routing --------------------------------------------------------------------------------------------------------
// The positions of expertIdx sorted by expert (stably).
std::vector<size_t> sorted_positions(const Tensor &expert) {
  std::vector<size_t> order(expert.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return expert.v[a] < expert.v[b]; });
  return order;
}

// Tokens per expert of [0, experts) (others not counted).
std::vector<double> histogram(const Tensor &expert, int64_t experts) {
  std::vector<double> h(static_cast<size_t>(std::max<int64_t>(experts, 0)), 0.0);
  for (double e : expert.v)
    if (e >= 0 && e < static_cast<double>(h.size())) h[static_cast<size_t>(e)] += 1;
  return h;
}

// Drop / pad: expert e's first `capacity` positions (in sorted order) take rows e * capacity + j of expandedX
// [E, capacity, H], zeros elsewhere; the others are dropped (-1).
Outputs drop_pad_routing(const Tensor &x, const Tensor &expert, int64_t capacity, int64_t experts, bool before_flag) {
  if (capacity <= 0 || experts <= 0) throw RefError("MoeInitRoutingV2: drop / pad needs expertNum and capacity");
  const size_t h = width_of(x), k = width_of(expert);
  Tensor ex = Tensor::zeros({experts, capacity, static_cast<int64_t>(h)});
  Tensor row_idx = Tensor::zeros({static_cast<int64_t>(expert.size())});
  std::vector<int64_t> seen(static_cast<size_t>(experts), 0);
  for (size_t p : sorted_positions(expert)) {
    const size_t e = index_of(expert.v[p], static_cast<size_t>(experts), "MoeInitRoutingV2: expert");
    const int64_t slot = seen[e]++;
    if (slot >= capacity) {
      row_idx.v[p] = -1.0;
      continue;
    }
    const auto row = static_cast<size_t>(static_cast<int64_t>(e) * capacity + slot);
    row_idx.v[p] = static_cast<double>(row);
    std::copy_n(x.v.begin() + static_cast<long>(p / k * h), h, ex.v.begin() + static_cast<long>(row * h));
  }
  std::optional<Tensor> before;
  if (before_flag) before = Tensor({experts}, histogram(expert, experts));
  return {std::move(ex), std::move(row_idx), std::nullopt, std::move(before)};
}

// (x, expertIdx, activeNum, expertCapacity, expertNum, dropPadMode, expertTokensCountOrCumsumFlag,
// expertTokensBeforeCapacityFlag) -> expandedX, expandedRowIdx, expertTokensCountOrCumsum, expertTokensBeforeCapacity.
// Dropless (mode 0): expandedRowIdx[sorted[i]] = i, expandedX[i] = x[sorted[i] / K] for the first activeNum rows (all
// when activeNum is 0); the tokens per expert (flag 2) or their cumulative sum (flag 1). Drop / pad: mode 1.
Outputs init_routing_v2(const Call &c) {
  c.expect_at_least(8);
  const Tensor &x = c.tensor(0), &expert = c.tensor(1);
  const int64_t active = c.integer(2), experts = c.integer(4), mode = c.integer(5), count_flag = c.integer(6);
  const size_t h = width_of(x), k = width_of(expert), total = expert.size();
  if (x.rank() != 2 || expert.rank() != 2 || rows_of(expert) != rows_of(x))
    throw RefError("MoeInitRoutingV2: x [N, H] and expertIdx [N, K] do not fit");
  if (mode == 1) return drop_pad_routing(x, expert, c.integer(3), experts, c.boolean(7));
  if (mode != 0) throw RefError("MoeInitRoutingV2: dropPadMode " + std::to_string(mode));
  const std::vector<size_t> order = sorted_positions(expert);
  const size_t rows = active > 0 ? std::min<size_t>(static_cast<size_t>(active), total) : total;
  Tensor ex = Tensor::zeros({static_cast<int64_t>(rows), static_cast<int64_t>(h)});
  Tensor row_idx = Tensor::zeros({static_cast<int64_t>(total)});
  for (size_t i = 0; i < total; ++i) row_idx.v[order[i]] = static_cast<double>(i);
  for (size_t i = 0; i < rows; ++i)
    std::copy_n(x.v.begin() + static_cast<long>(order[i] / k * h), h, ex.v.begin() + static_cast<long>(i * h));
  std::optional<Tensor> counts;
  if (count_flag == 1 || count_flag == 2) {
    counts = Tensor({experts}, histogram(expert, experts));
    if (count_flag == 1) std::partial_sum(counts->v.begin(), counts->v.end(), counts->v.begin());
  }
  return {std::move(ex), std::move(row_idx), std::move(counts), std::nullopt};
}

// (gradExpandedX, expandedRowIdx, topK, dropPadMode, activeNum) -> gradX: gradX[n] = sum over t of
// gradExpandedX[expandedRowIdx[n * topK + t]] (dropped positions, -1, and rows past the active ones add nothing).
Outputs init_routing_v2_grad(const Call &c) {
  c.expect_at_least(5);
  const Tensor &g = c.tensor(0), &rows = c.tensor(1);
  const int64_t k = c.integer(2);
  const size_t h = width_of(g), avail = rows_of(g);
  if (k <= 0 || rows.size() % static_cast<size_t>(k) != 0)
    throw RefError("MoeInitRoutingV2Grad: expandedRowIdx is not N * topK");
  const size_t n = rows.size() / static_cast<size_t>(k);
  Tensor out = Tensor::zeros({static_cast<int64_t>(n), static_cast<int64_t>(h)});
  for (size_t p = 0; p < rows.size(); ++p) {
    const double r = rows.v[p];
    if (r < 0 || r >= static_cast<double>(avail)) continue;
    for (size_t j = 0; j < h; ++j) out.v[p / static_cast<size_t>(k) * h + j] += g.v[static_cast<size_t>(r) * h + j];
  }
  return {std::move(out)};
}

// The expandedX row of token n's k-th expert: dropPadMode 0 / 1 lay expandedRowIdx out by column (n + k * N, the V1
// routing's), 2 / 3 by row (n * K + k, MoeInitRoutingV2's); -1 is a dropped token.
double routed_row(const Tensor &rows, int64_t mode, size_t n, size_t k, size_t tokens, size_t top) {
  return rows.v[mode >= 2 ? n * top + k : n + k * tokens];
}

// (expandedX, expandedRowIdx, x1Optional, x2Optional, biasOptional, scalesOptional, expertIdxOptional, dropPadMode):
// out[n] = x1[n] + x2[n] + sum over k of scales[n, k] * (expandedX[row(n, k)] + bias[expertIdx[n, k]]).
Outputs finalize_routing_v2(const Call &c) {
  c.expect_at_least(8);
  const Tensor &ex = c.tensor(0), &rows = c.tensor(1);
  const Tensor *x1 = c.optional_tensor(2), *x2 = c.optional_tensor(3), *bias = c.optional_tensor(4),
               *scales = c.optional_tensor(5), *experts = c.optional_tensor(6);
  const int64_t mode = c.integer(7);
  const size_t h = width_of(ex), avail = rows_of(ex);
  size_t tokens = x1 ? rows_of(*x1) : scales ? rows_of(*scales) : 0;
  if (tokens == 0 && !c.outputs.empty() && c.outputs[0].present && !c.outputs[0].shape.empty())
    tokens = static_cast<size_t>(c.outputs[0].shape[0]);
  if (tokens == 0 || rows.size() % tokens != 0) throw RefError("MoeFinalizeRoutingV2: the token count is unknown");
  const size_t top = rows.size() / tokens;
  if ((scales && scales->size() != rows.size()) || (bias && !experts))
    throw RefError("MoeFinalizeRoutingV2: scales or bias do not fit expandedRowIdx");
  Tensor out = Tensor::zeros({static_cast<int64_t>(tokens), static_cast<int64_t>(h)});
  for (size_t n = 0; n < tokens; ++n)
    for (size_t k = 0; k < top; ++k) {
      const double r = routed_row(rows, mode, n, k, tokens, top);
      if (r < 0) continue;
      const size_t row = index_of(r, avail, "MoeFinalizeRoutingV2: expandedRowIdx");
      const double s = scales ? scales->v[n * top + k] : 1.0;
      const size_t e = bias ? index_of(experts->v[n * top + k], rows_of(*bias), "MoeFinalizeRoutingV2: expert") : 0;
      for (size_t j = 0; j < h; ++j) out.v[n * h + j] += s * (ex.v[row * h + j] + (bias ? bias->v[e * h + j] : 0.0));
    }
  for (const Tensor *add : {x1, x2})
    if (add) {
      if (add->size() != out.size()) throw RefError("MoeFinalizeRoutingV2: x1 / x2 is not [N, H]");
      for (size_t i = 0; i < out.size(); ++i) out.v[i] += add->v[i];
    }
  return {std::move(out)};
}

// (gradY, expandedRowIdx, expandedXOptional, scalesOptional, expertIdxOptional, biasOptional, dropPadMode, activeNum,
// expertNum, expertCapacity) -> gradExpandedX, gradScales. For position i = n * K + k with row r = expandedRowIdx[i]:
// gradExpandedX[r] = gradY[n] * scales[i] (1 without scales), gradScales[i] = (expandedX[r] + bias[expertIdx[i]]) .
// gradY[n]. Rows no position maps to (padding) are 0; -1 and rows past the output add nothing.
Outputs finalize_routing_v2_grad(const Call &c) {
  c.expect_at_least(10);
  const Tensor &gy = c.tensor(0), &rows = c.tensor(1);
  const Tensor *ex = c.optional_tensor(2), *scales = c.optional_tensor(3), *experts = c.optional_tensor(4),
               *bias = c.optional_tensor(5);
  const int64_t mode = c.integer(6), active = c.integer(7), expert_num = c.integer(8), capacity = c.integer(9);
  const size_t n = rows_of(gy), h = width_of(gy);
  if (n == 0 || rows.size() % n != 0) throw RefError("MoeFinalizeRoutingV2Grad: expandedRowIdx is not N * K");
  Shape shape;
  if (!c.outputs.empty() && c.outputs[0].present)
    shape = c.outputs[0].shape;
  else if (mode == 1)
    shape = {expert_num, capacity, static_cast<int64_t>(h)};
  else
    shape = {
        active > 0 ? std::min<int64_t>(active, static_cast<int64_t>(rows.size())) : static_cast<int64_t>(rows.size()),
        static_cast<int64_t>(h)};
  Tensor gex = Tensor::zeros(shape),
         gsc = Tensor::zeros({static_cast<int64_t>(n), static_cast<int64_t>(rows.size() / n)});
  const size_t avail = gex.size() / std::max<size_t>(h, 1);
  if ((bias && !experts) || (scales && scales->size() != rows.size()) || (scales && !ex))
    throw RefError("MoeFinalizeRoutingV2Grad: scales, expandedX, bias and expertIdx do not fit");
  for (size_t i = 0; i < rows.size(); ++i) {
    const double r = rows.v[i];
    if (r < 0 || r >= static_cast<double>(avail)) continue;
    const auto row = static_cast<size_t>(r), t = i / (rows.size() / n);
    const size_t e = bias ? index_of(experts->v[i], rows_of(*bias), "MoeFinalizeRoutingV2Grad: expert") : 0;
    double dot = 0;
    for (size_t j = 0; j < h; ++j) {
      gex.v[row * h + j] = gy.v[t * h + j] * (scales ? scales->v[i] : 1.0);
      if (scales) dot += (ex->v[row * h + j] + (bias ? bias->v[e * h + j] : 0.0)) * gy.v[t * h + j];
    }
    gsc.v[i] = dot;
  }
  if (!scales) return {std::move(gex), std::nullopt};
  return {std::move(gex), std::move(gsc)};
}

// ---- GroupedMatmul --------------------------------------------------------------------------------------------------
std::vector<const Tensor *> list_or_none(const Call &c, size_t i) {
  if (i >= c.count() || c.args[i].kind == Arg::Kind::Absent) return {};
  if (c.args[i].kind == Arg::Kind::Tensor) return {c.args[i].tensor};
  return c.tensor_list(i);
}

// x [m, k] (leading dims flattened) @ w [k, n] + bias, on rows [r0, r1) of x and columns [k0, k1) of x's k.
void product(const Tensor &x, size_t r0, size_t r1, size_t k0, size_t k1, const double *w, size_t n, const double *bias,
             double *y) {
  const size_t k = width_of(x);
  for (size_t r = r0; r < r1; ++r)
    for (size_t j = 0; j < n; ++j) {
      double acc = bias ? bias[j] : 0.0;
      for (size_t kk = k0; kk < k1; ++kk) acc += x.v[r * k + kk] * w[(kk - k0) * n + j];
      y[(r - r0) * n + j] = acc;
    }
}

struct GmmArgs {
  std::vector<const Tensor *> x, w, bias;
  std::vector<int64_t> sizes;  // per group, from groupList (empty without one)
  int64_t split = 0, type = 0;
};

GmmArgs gmm_args(const Call &c) {
  c.expect_at_least(16);
  GmmArgs a{list_or_none(c, 0), list_or_none(c, 1), list_or_none(c, 2), {}, c.integer(12), c.integer(13)};
  for (size_t q = 3; q <= 11; ++q)
    if (q != 8 && !list_or_none(c, q).empty())
      throw RefError("GroupedMatmul: quantization and activation inputs are not covered (input " + std::to_string(q) +
                     ")");
  if (c.integer(15) != 0) throw RefError("GroupedMatmul: actType " + std::to_string(c.integer(15)) + " is not covered");
  if (const Tensor *gl = c.optional_tensor(8)) {
    const int64_t list_type = c.integer(14);
    if (list_type != 0 && list_type != 1)
      throw RefError("GroupedMatmul: groupListType " + std::to_string(list_type) + " is not covered");
    int64_t prev = 0;
    for (double v : gl->v) {
      const auto g = static_cast<int64_t>(v);
      a.sizes.push_back(list_type == 0 ? g - prev : g);
      prev = g;
    }
  }
  if (a.x.empty() || a.w.empty()) throw RefError("GroupedMatmul: x or weight is empty");
  return a;
}

// One group's weight [k, n] (of a [E, k, n] weight or of a list) and bias [n] (of [E, n] or a list).
const double *group_weight(const GmmArgs &a, size_t g, size_t *k, size_t *n) {
  const Tensor &w = a.w.size() == 1 && a.w[0]->rank() == 3 ? *a.w[0] : *a.w.at(g);
  const bool stacked = w.rank() == 3;
  *k = static_cast<size_t>(w.shape[w.shape.size() - 2]), *n = static_cast<size_t>(w.shape.back());
  return w.v.data() + (stacked ? g * *k * *n : 0);
}
const double *group_bias(const GmmArgs &a, size_t g, size_t n) {
  if (a.bias.empty()) return nullptr;
  if (a.bias.size() == 1 && a.bias[0]->size() > n) return a.bias[0]->v.data() + g * n;
  return a.bias.at(g)->v.data();
}

// groupType 0 with one x: groups of rows, from groupList; rows past the groups are not written.
Outputs gmm_rows(const GmmArgs &a) {
  const Tensor &x = *a.x[0];
  const size_t m = rows_of(x), groups = a.sizes.size();
  size_t k = 0, n = 0;
  group_weight(a, 0, &k, &n);
  if (k != width_of(x)) throw RefError("GroupedMatmul: x's k is not the weight's");
  Tensor y = Tensor::zeros({static_cast<int64_t>(m), static_cast<int64_t>(n)});
  y.written.assign(y.size(), false);
  size_t r0 = 0;
  Outputs split;
  for (size_t g = 0; g < groups; ++g) {
    const size_t r1 = r0 + static_cast<size_t>(std::max<int64_t>(a.sizes[g], 0));
    if (r1 > m) throw RefError("GroupedMatmul: groupList covers more rows than x has");
    const double *w = group_weight(a, g, &k, &n);
    product(x, r0, r1, 0, k, w, n, group_bias(a, g, n), y.v.data() + r0 * n);
    std::fill(y.written.begin() + static_cast<long>(r0 * n), y.written.begin() + static_cast<long>(r1 * n), true);
    if (a.split <= 1)
      split.push_back(Tensor(
          {static_cast<int64_t>(r1 - r0), static_cast<int64_t>(n)},
          std::vector<double>(y.v.begin() + static_cast<long>(r0 * n), y.v.begin() + static_cast<long>(r1 * n))));
    r0 = r1;
  }
  if (a.split <= 1) return split;
  return {std::move(y)};
}

// groupType 2: groups of k; with one weight y is [E, m, n], with a weight list one y per weight.
Outputs gmm_k(const GmmArgs &a) {
  const Tensor &x = *a.x[0];
  const size_t m = rows_of(x);
  std::vector<int64_t> sizes = a.sizes;
  if (a.w.size() > 1)
    for (const Tensor *w : a.w) sizes.push_back(w->shape.front());
  Outputs out;
  Tensor stacked;
  size_t k0 = 0;
  for (size_t g = 0; g < sizes.size(); ++g) {
    const size_t k1 = k0 + static_cast<size_t>(std::max<int64_t>(sizes[g], 0));
    const Tensor &w = a.w.size() > 1 ? *a.w[g] : *a.w[0];
    const size_t n = width_of(w), wk = rows_of(w);
    if (k1 > width_of(x) || (a.w.size() == 1 && k1 > wk)) throw RefError("GroupedMatmul: groups of k past x or weight");
    Tensor y = Tensor::zeros({static_cast<int64_t>(m), static_cast<int64_t>(n)});
    product(x, 0, m, k0, k1, w.v.data() + (a.w.size() > 1 ? 0 : k0 * n), n, nullptr, y.v.data());
    if (a.w.size() > 1) {
      out.push_back(std::move(y));
    } else {
      stacked.shape = {static_cast<int64_t>(g + 1), static_cast<int64_t>(m), static_cast<int64_t>(n)};
      stacked.v.insert(stacked.v.end(), y.v.begin(), y.v.end());
    }
    k0 = k1;
  }
  if (a.w.size() == 1) out.push_back(std::move(stacked));
  return out;
}

// Lists (groupType -1, or 0 with several x): y_i = x_i @ weight_i + bias_i, one y each or (splitItem 2 / 3) stacked
// by rows into one.
Outputs gmm_lists(const GmmArgs &a) {
  if (a.x.size() != a.w.size()) throw RefError("GroupedMatmul: x and weight lists differ in length");
  Outputs ys;
  Tensor all;
  for (size_t g = 0; g < a.x.size(); ++g) {
    size_t k = 0, n = 0;
    const double *w = group_weight(a, g, &k, &n);
    const Tensor &x = *a.x[g];
    if (width_of(x) != k || (!a.sizes.empty() && a.sizes.at(g) != static_cast<int64_t>(rows_of(x))))
      throw RefError("GroupedMatmul: x[" + std::to_string(g) + "] does not fit its weight or groupList");
    Shape s(x.shape.begin(), x.shape.end() - 1);
    s.push_back(static_cast<int64_t>(n));
    Tensor y = Tensor::zeros(s);
    product(x, 0, rows_of(x), 0, k, w, n, group_bias(a, g, n), y.v.data());
    all.shape = {static_cast<int64_t>(all.v.size() / n + rows_of(x)), static_cast<int64_t>(n)};
    all.v.insert(all.v.end(), y.v.begin(), y.v.end());
    ys.push_back(std::move(y));
  }
  if (a.split >= 2) return {std::move(all)};
  return ys;
}

// (x, weight, biasOptional, scale, offset, antiquantScale, antiquantOffset, perTokenScale, groupListOptional,
// activationInput, activationQuantScale, activationQuantOffset, splitItem, groupType, groupListType, actType
// [, tuningConfig]) -> y (a list), activationFeatureOut, dynQuantScaleOut (not written without quantization).
Outputs grouped_matmul(const Call &c) {
  const GmmArgs a = gmm_args(c);
  Outputs y;
  if (a.type == 2)
    y = gmm_k(a);
  else if (a.type == 0 && a.x.size() == 1)
    y = gmm_rows(a);
  else if (a.type == 0 || a.type == -1)
    y = gmm_lists(a);
  else
    throw RefError("GroupedMatmul: groupType " + std::to_string(a.type));
  y.push_back(std::nullopt);
  y.push_back(std::nullopt);
  return y;
}

const RefEntry kRefs[] = {
    {"MoeGatingTopKSoftmax", gating_top_k_softmax},
    {"MoeGatingTopKSoftmaxV2", gating_top_k_softmax_v2},
    {"MoeInitRoutingV2", init_routing_v2},
    {"MoeInitRoutingV2Grad", init_routing_v2_grad},
    {"MoeFinalizeRoutingV2", finalize_routing_v2},
    {"MoeFinalizeRoutingV2Grad", finalize_routing_v2_grad},
    {"GroupedMatmulV4", grouped_matmul},
    {"GroupedMatmulV5", grouped_matmul},
};

}  // namespace

std::span<const RefEntry> moe_refs() { return kRefs; }

}  // namespace msprobe::tools::replay
