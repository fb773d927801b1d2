// MoE gating: MoeGatingTopKSoftmax (torch_npu's npu_moe_gating_top_k_softmax) and MoeGatingTopKSoftmaxV2
// (npu_moe_gating_top_k_softmax_v2), as ops-transformer's docs define them:
//   V1 and V2 with renorm 0: y, expertIdx = topK(softmax(x, -1), k)
//   V2 with renorm 1:        y = softmax(topKValues(x, k)), expertIdx = topKIndices(x, k)
// over the last axis of a 2-D or 3-D x, computed in double (CANN's kernels work in fp32 whatever x's dtype) and
// rounded once to the outputs' dtypes; among equal values the lower expert comes first. A row whose `finished` is true
// gets expert number E (x's last axis) in every place. V1's rowIdx[i][j] = j * rows + i (rows: x's leading dims).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "moe_common.h"

using namespace fakecann;
using namespace fakecann::ops;

namespace {

constexpr int64_t kMaxK = 1024;

// The checks of x, finished and k both versions make; returns the shape of y and expertIdx.
Shape gating_shape(const TensorView &x, const TensorView *finished, int64_t k, int64_t min_k) {
  tiling_require(x.shape.size() == 2 || x.shape.size() == 3, "x must be 2-D or 3-D, not " + show(x.shape));
  const Shape lead(x.shape.begin(), x.shape.end() - 1);
  if (finished != nullptr) tiling_shape(*finished, lead, "finishedOptional");
  tiling_require(k >= min_k && k <= x.shape.back() && k <= kMaxK, "k " + std::to_string(k) + " is outside [" +
                                                                      std::to_string(min_k) + ", min(" +
                                                                      std::to_string(x.shape.back()) + ", 1024)]");
  Shape out = lead;
  out.push_back(k);
  return out;
}

void softmax_row(const double *x, double *out, int64_t len) {
  const double mx = *std::max_element(x, x + len);
  double sum = 0;
  for (int64_t i = 0; i < len; ++i) sum += out[i] = std::exp(x[i] - mx);
  for (int64_t i = 0; i < len; ++i) out[i] /= sum;
}

// The k largest of row[0..len), largest first, lower index first among equals.
std::vector<int64_t> top_k(const double *row, int64_t len, int64_t k) {
  std::vector<int64_t> idx((size_t)len);
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [row](int64_t a, int64_t b) { return row[a] > row[b]; });
  idx.resize((size_t)k);
  return idx;
}

struct Gating {
  int64_t rows = 0, experts = 0, k = 0;
  bool row_idx = true;        // V1: the fifth tensor is rowIdx
  bool renorm = false;        // V2's renorm 1: top-k of x, then softmax over those k
  bool want_softmax = false;  // V2: the fifth tensor gets the full softmax (float)
};

// Slots: x, finished, y, expertIdx, then V1's rowIdx or V2's softmax output.
void run_gating(const Gating &g, const Slots &s) {
  const Values x = gather(view(s, 0));
  const Values finished = s[1].present ? gather(view(s, 1)) : Values((size_t)g.rows, 0.0);
  Values y((size_t)(g.rows * g.k)), idx(y.size()), fifth(g.want_softmax ? x.size() : y.size());
  Values soft((size_t)g.experts);
  for (int64_t r = 0; r < g.rows; ++r) {
    const double *row = &x[(size_t)(r * g.experts)];
    softmax_row(row, soft.data(), g.experts);
    const std::vector<int64_t> top = top_k(g.renorm ? row : soft.data(), g.experts, g.k);
    Values picked((size_t)g.k);
    for (int64_t j = 0; j < g.k; ++j) picked[(size_t)j] = g.renorm ? row[top[(size_t)j]] : soft[(size_t)top[(size_t)j]];
    if (g.renorm && g.k > 0) softmax_row(Values(picked).data(), picked.data(), g.k);
    for (int64_t j = 0; j < g.k; ++j) {
      const size_t o = (size_t)(r * g.k + j);
      y[o] = picked[(size_t)j];
      idx[o] = finished[(size_t)r] != 0 ? (double)g.experts : (double)top[(size_t)j];
      if (g.row_idx) fifth[o] = (double)(j * g.rows + r);
    }
    if (g.want_softmax) std::copy(soft.begin(), soft.end(), fifth.begin() + r * g.experts);
  }
  scatter(view(s, 2), y);
  scatter(view(s, 3), idx);
  if (g.row_idx || g.want_softmax) scatter(view(s, 4), fifth);
}

}  // namespace

extern "C" {

aclnnStatus aclnnMoeGatingTopKSoftmaxGetWorkspaceSize(const aclTensor *x, const aclTensor *finishedOptional, int64_t k,
                                                      const aclTensor *yOut, const aclTensor *expertIdxOut,
                                                      const aclTensor *rowIdxOut, uint64_t *workspaceSize,
                                                      aclOpExecutor **executor) {
  return phase1("MoeGatingTopKSoftmax", workspaceSize, executor, [&] {
    const TensorView &xv = tensor(x, "x", kFloats);
    const TensorView *fin = optional_tensor(finishedOptional, "finishedOptional", dtypes({ACL_BOOL}));
    const TensorView &y = tensor(yOut, "yOut", dtypes({xv.dtype}));
    const TensorView &e = tensor(expertIdxOut, "expertIdxOut", dtypes({ACL_INT32}));
    const TensorView &r = tensor(rowIdxOut, "rowIdxOut", dtypes({ACL_INT32}));
    const Shape out = gating_shape(xv, fin, k, 1);
    for (auto [v, name] : {std::pair{&y, "yOut"}, {&e, "expertIdxOut"}, {&r, "rowIdxOut"}}) tiling_shape(*v, out, name);
    Gating g{numel(out) / k, xv.shape.back(), k};
    return ExecutorSpec{"",
                        {nn::slot(x, Io::Input), nn::slot(finishedOptional, Io::Input), nn::slot(yOut, Io::Output),
                         nn::slot(expertIdxOut, Io::Output), nn::slot(rowIdxOut, Io::Output)},
                        workspace_for(xv.numel()),
                        [g](const Slots &s) { run_gating(g, s); }};
  });
}

aclnnStatus aclnnMoeGatingTopKSoftmaxV2GetWorkspaceSize(const aclTensor *x, const aclTensor *finishedOptional,
                                                        int64_t k, int64_t renorm, bool outputSoftmaxResultFlag,
                                                        const aclTensor *yOut, const aclTensor *expertIdxOut,
                                                        const aclTensor *softmaxResultOutOptional,
                                                        uint64_t *workspaceSize, aclOpExecutor **executor) {
  return phase1("MoeGatingTopKSoftmaxV2", workspaceSize, executor, [&] {
    const TensorView &xv = tensor(x, "x", kFloats);
    const TensorView *fin = optional_tensor(finishedOptional, "finishedOptional", dtypes({ACL_BOOL}));
    const TensorView &y = tensor(yOut, "yOut", dtypes({xv.dtype}));
    const TensorView &e = tensor(expertIdxOut, "expertIdxOut", dtypes({ACL_INT32}));
    const Shape out = gating_shape(xv, fin, k, 0);
    tiling_shape(y, out, "yOut");
    tiling_shape(e, out, "expertIdxOut");
    tiling_require(renorm == 0 || renorm == 1, "renorm " + std::to_string(renorm) + " is not 0 or 1");
    // Only renorm 0 with the flag writes the softmax; torch_npu passes an empty tensor otherwise.
    const bool want = renorm == 0 && outputSoftmaxResultFlag && softmaxResultOutOptional != nullptr;
    if (want) {
      const TensorView &sm = tensor(softmaxResultOutOptional, "softmaxResultOutOptional", kFloats);
      tiling_require(sm.dtype == ACL_FLOAT, "softmaxResultOutOptional must be FLOAT");
      tiling_shape(sm, xv.shape, "softmaxResultOutOptional");
    }
    Gating g{numel(Shape(out.begin(), out.end() - 1)), xv.shape.back(), k, false, renorm == 1, want};
    return ExecutorSpec{"",
                        {nn::slot(x, Io::Input), nn::slot(finishedOptional, Io::Input), nn::slot(yOut, Io::Output),
                         nn::slot(expertIdxOut, Io::Output), nn::slot(softmaxResultOutOptional, Io::Output)},
                        workspace_for(xv.numel()),
                        [g](const Slots &s) { run_gating(g, s); }};
  });
}

}  // extern "C"
