// MoE combine: MoeFinalizeRouting, MoeFinalizeRoutingV2 (what torch_npu's npu_moe_finalize_routing launches when
// libopapi has no V4) and its backward MoeFinalizeRoutingV2Grad, as ops-transformer's docs define them:
//   out[i] = x1[i] + x2[i] + sum over k of scales[i, k] * (expandedX[row(i, k)] + bias[expertIdx[i, k]])
// row(i, k) = expandedRowIdx[i + k * N] when the index is laid out by column (MoeInitRouting's output, V1 and V2's
// dropPadMode 0/1) or expandedRowIdx[i * K + k] by row (MoeInitRoutingV2's, dropPadMode 2/3); a row of -1 (a token
// dropped by drop/pad) contributes nothing. Without scales K is 1 and the scale 1. Sums are taken in double and
// rounded once to out's dtype.
// The backward (row layout): gradExpandedX[row(i, k)] = gradY[i] * scales[i, k], gradScales[i, k] =
// sum over j of (expandedX[row(i, k)][j] + bias[expertIdx[i, k]][j]) * gradY[i][j]; rows no position names stay 0.
#include <algorithm>

#include "moe_common.h"

using namespace fakecann;
using namespace fakecann::ops;

namespace {

constexpr DtypeSet kInt32 = dtypes({ACL_INT32});

struct Combine {
  int64_t n = 0, k = 1, h = 0, rows = 0;  // rows: of expandedX as [rows, h]
  bool by_row = false;                    // expandedRowIdx[i * K + k], else [i + k * N]
};

// Slots (both versions, reordered by the caller): expandedX, expandedRowIdx, x1, x2, bias, scales, expertIdx, out.
void run_combine(const Combine &g, const Slots &s) {
  const Values ex = gather(view(s, 0)), idx = gather(view(s, 1));
  auto opt = [&s](size_t i) { return s[i].present ? gather(view(s, i)) : Values(); };
  const Values x1 = opt(2), x2 = opt(3), bias = opt(4), scales = opt(5), experts = opt(6);
  const int64_t n_experts = s[4].present ? view(s, 4).shape[0] : 0;
  Values out((size_t)(g.n * g.h), 0.0);
  for (int64_t i = 0; i < g.n; ++i) {
    double *o = &out[(size_t)(i * g.h)];
    for (int64_t j = 0; j < g.h; ++j)
      o[j] = (x1.empty() ? 0.0 : x1[(size_t)(i * g.h + j)]) + (x2.empty() ? 0.0 : x2[(size_t)(i * g.h + j)]);
    for (int64_t k = 0; k < g.k; ++k) {
      const size_t at = (size_t)(g.by_row ? i * g.k + k : i + k * g.n);
      const int64_t r = index_at(idx, at, -1, g.rows, "expandedRowIdx");
      if (r < 0) continue;
      const double scale = scales.empty() ? 1.0 : scales[(size_t)(i * g.k + k)];
      const int64_t e = bias.empty() ? 0 : index_at(experts, (size_t)(i * g.k + k), 0, n_experts, "expertIdx");
      for (int64_t j = 0; j < g.h; ++j)
        o[j] += scale * (ex[(size_t)(r * g.h + j)] + (bias.empty() ? 0.0 : bias[(size_t)(e * g.h + j)]));
    }
  }
  scatter(view(s, 7), out);
}

// The [N, K] and [E, H] operands both versions check the same way.
void check_combine_operands(const Combine &g, const TensorView *scales, const TensorView *experts,
                            const TensorView *bias) {
  if (scales != nullptr) tiling_shape(*scales, {g.n, g.k}, "scales");
  if (experts != nullptr) tiling_shape(*experts, {g.n, g.k}, "expertIdx");
  if (bias != nullptr)
    tiling_require(bias->shape.size() == 2 && bias->shape[1] == g.h, "bias " + show(bias->shape) + " must be [E, H]");
}

Slots combine_slots(const aclTensor *ex, const aclTensor *rows, const aclTensor *x1, const aclTensor *x2,
                    const aclTensor *bias, const aclTensor *scales, const aclTensor *experts, const aclTensor *out) {
  return {nn::slot(ex, Io::Input),      nn::slot(rows, Io::Input), nn::slot(x1, Io::Input),
          nn::slot(x2, Io::Input),      nn::slot(bias, Io::Input), nn::slot(scales, Io::Input),
          nn::slot(experts, Io::Input), nn::slot(out, Io::Output)};
}

// What MoeFinalizeRoutingV2Grad computes; slots: gradY, expandedRowIdx, expandedX, scales, expertIdx, bias,
// gradExpandedX, gradScales.
struct CombineGrad {
  int64_t n = 0, k = 1, h = 0, rows = 0;
};

void run_combine_grad(const CombineGrad &g, const Slots &s) {
  const Values gy = gather(view(s, 0)), idx = gather(view(s, 1));
  auto opt = [&s](size_t i) { return s[i].present ? gather(view(s, i)) : Values(); };
  const Values ex = opt(2), scales = opt(3), experts = opt(4), bias = opt(5);
  const int64_t n_experts = s[5].present ? view(s, 5).shape[0] : 0;
  Values gex((size_t)(g.rows * g.h), 0.0), gscales((size_t)(g.n * g.k), 0.0);
  for (int64_t i = 0; i < g.n * g.k; ++i) {
    const int64_t r = index_at(idx, (size_t)i, -1, INT32_MAX, "expandedRowIdx");
    if (r < 0 || r >= g.rows) continue;  // dropped, or beyond the active rows
    const double *dy = &gy[(size_t)(i / g.k * g.h)];
    const double scale = scales.empty() ? 1.0 : scales[(size_t)i];
    const int64_t e = bias.empty() ? 0 : index_at(experts, (size_t)i, 0, n_experts, "expertIdxOptional");
    double dot = 0;
    for (int64_t j = 0; j < g.h; ++j) {
      gex[(size_t)(r * g.h + j)] = dy[j] * scale;
      if (!ex.empty()) dot += (ex[(size_t)(r * g.h + j)] + (bias.empty() ? 0.0 : bias[(size_t)(e * g.h + j)])) * dy[j];
    }
    gscales[(size_t)i] = dot;
  }
  scatter(view(s, 6), gex);
  if (!scales.empty() && s[7].present) scatter(view(s, 7), gscales);
}

}  // namespace

extern "C" {

aclnnStatus aclnnMoeFinalizeRoutingGetWorkspaceSize(const aclTensor *expandedX, const aclTensor *x1,
                                                    const aclTensor *x2Optional, const aclTensor *bias,
                                                    const aclTensor *scales, const aclTensor *expandedRowIdx,
                                                    const aclTensor *expandedExpertIdx, const aclTensor *out,
                                                    uint64_t *workspaceSize, aclOpExecutor **executor) {
  return phase1("MoeFinalizeRouting", workspaceSize, executor, [&] {
    const TensorView &ex = tensor(expandedX, "expandedX", kFloats);
    const DtypeSet same = dtypes({ex.dtype});
    const TensorView &a = tensor(x1, "x1", same), &b = tensor(bias, "bias", same), &sc = tensor(scales, "scales", same);
    const TensorView *x2 = optional_tensor(x2Optional, "x2Optional", same);
    const TensorView &rows = tensor(expandedRowIdx, "expandedRowIdx", kInt32);
    const TensorView &experts = tensor(expandedExpertIdx, "expandedExpertIdx", kInt32);
    const TensorView &o = tensor(out, "out", same);
    tiling_require(ex.shape.size() == 2 && a.shape.size() == 2 && sc.shape.size() == 2,
                   "expandedX, x1 and scales must be 2-D");
    Combine g{a.shape[0], sc.shape[1], a.shape[1], ex.shape[0], false};
    tiling_shape(ex, {g.n * g.k, g.h}, "expandedX");
    tiling_shape(rows, {g.n * g.k}, "expandedRowIdx");
    tiling_shape(o, a.shape, "out");
    if (x2 != nullptr) tiling_shape(*x2, a.shape, "x2Optional");
    check_combine_operands(g, &sc, &experts, &b);
    return ExecutorSpec{"",
                        combine_slots(expandedX, expandedRowIdx, x1, x2Optional, bias, scales, expandedExpertIdx, out),
                        workspace_for(g.n * g.h), [g](const Slots &s) { run_combine(g, s); }};
  });
}

aclnnStatus aclnnMoeFinalizeRoutingV2GetWorkspaceSize(const aclTensor *expandedX, const aclTensor *expandedRowIdx,
                                                      const aclTensor *x1Optional, const aclTensor *x2Optional,
                                                      const aclTensor *biasOptional, const aclTensor *scalesOptional,
                                                      const aclTensor *expertIdxOptional, int64_t dropPadMode,
                                                      const aclTensor *out, uint64_t *workspaceSize,
                                                      aclOpExecutor **executor) {
  return phase1("MoeFinalizeRoutingV2", workspaceSize, executor, [&] {
    const TensorView &ex = tensor(expandedX, "expandedX", kFloats);
    const DtypeSet same = dtypes({ex.dtype});  // scales may be FLOAT beside BF16 (mixed precision)
    const TensorView *x1 = optional_tensor(x1Optional, "x1Optional", same);
    const TensorView *x2 = optional_tensor(x2Optional, "x2Optional", same);
    const TensorView *bias = optional_tensor(biasOptional, "biasOptional", same);
    const TensorView *sc =
        optional_tensor(scalesOptional, "scalesOptional", ex.dtype == ACL_BF16 ? dtypes({ACL_BF16, ACL_FLOAT}) : same);
    const TensorView *experts = optional_tensor(expertIdxOptional, "expertIdxOptional", kInt32);
    const TensorView &rows = tensor(expandedRowIdx, "expandedRowIdx", kInt32);
    const TensorView &o = tensor(out, "out", same);
    tiling_require(dropPadMode >= 0 && dropPadMode <= 3, "dropPadMode " + std::to_string(dropPadMode) + " is not 0..3");
    tiling_require(x2 == nullptr || x1 != nullptr, "x2Optional needs x1Optional");
    tiling_require(bias == nullptr || experts != nullptr, "biasOptional needs expertIdxOptional");
    const bool drop_pad = dropPadMode == 1 || dropPadMode == 3;
    tiling_require(ex.shape.size() == (drop_pad ? 3u : 2u) && o.shape.size() == 2,
                   "expandedX " + show(ex.shape) + " must be [E, C, H] with drop/pad, else [N * K, H]; out [N, H]");
    Combine g{o.shape[0], sc != nullptr ? (sc->shape.size() == 2 ? sc->shape[1] : 0) : 1, o.shape[1], 0,
              dropPadMode >= 2};
    g.rows = numel(ex.shape) / std::max<int64_t>(g.h, 1);
    tiling_require(ex.shape.back() == g.h && (drop_pad || g.rows == g.n * g.k),
                   "expandedX " + show(ex.shape) + " does not fit out " + show(o.shape));
    tiling_shape(rows, {g.n * g.k}, "expandedRowIdx");
    if (x1 != nullptr) tiling_shape(*x1, o.shape, "x1Optional");
    if (x2 != nullptr) tiling_shape(*x2, o.shape, "x2Optional");
    check_combine_operands(g, sc, experts, bias);
    return ExecutorSpec{"",
                        combine_slots(expandedX, expandedRowIdx, x1Optional, x2Optional, biasOptional, scalesOptional,
                                      expertIdxOptional, out),
                        workspace_for(g.n * g.h), [g](const Slots &s) { run_combine(g, s); }};
  });
}

aclnnStatus aclnnMoeFinalizeRoutingV2GradGetWorkspaceSize(
    const aclTensor *gradY, const aclTensor *expandedRowIdx, const aclTensor *expandedXOptional,
    const aclTensor *scalesOptional, const aclTensor *expertIdxOptional, const aclTensor *biasOptional,
    int64_t dropPadMode, int64_t activeNum, int64_t expertNum, int64_t expertCapacity,
    const aclTensor *gradExpandedXOut, const aclTensor *gradScalesOut, uint64_t *workspaceSize,
    aclOpExecutor **executor) {
  return phase1("MoeFinalizeRoutingV2Grad", workspaceSize, executor, [&] {
    const TensorView &gy = tensor(gradY, "gradY", kFloats);
    const DtypeSet same = dtypes({gy.dtype});
    const TensorView &rows = tensor(expandedRowIdx, "expandedRowIdx", kInt32);
    const TensorView *ex = optional_tensor(expandedXOptional, "expandedXOptional", same);
    const TensorView *sc = optional_tensor(scalesOptional, "scalesOptional", same);
    const TensorView *experts = optional_tensor(expertIdxOptional, "expertIdxOptional", kInt32);
    const TensorView *bias = optional_tensor(biasOptional, "biasOptional", same);
    const TensorView &gex = tensor(gradExpandedXOut, "gradExpandedXOut", same);
    const TensorView *gsc = sc != nullptr ? &tensor(gradScalesOut, "gradScalesOut", dtypes({sc->dtype})) : nullptr;
    tiling_require(dropPadMode == 0 || dropPadMode == 1,
                   "dropPadMode " + std::to_string(dropPadMode) + " is not 0 or 1");
    tiling_require(sc == nullptr || ex != nullptr, "scalesOptional needs expandedXOptional");
    tiling_require(bias == nullptr || experts != nullptr, "biasOptional needs expertIdxOptional");
    tiling_require(gy.shape.size() == 2, "gradY " + show(gy.shape) + " must be 2-D");
    CombineGrad g{gy.shape[0], sc != nullptr && sc->shape.size() == 2 ? sc->shape[1] : 1, gy.shape[1], 0};
    Shape want;
    if (dropPadMode == 1) {
      tiling_require(expertCapacity > 0 && expertNum > 0 && (bias == nullptr || bias->shape[0] == expertNum),
                     "drop/pad needs expertCapacity > 0 and expertNum > 0 (equal to bias's E)");
      want = {expertNum, expertCapacity, g.h};
    } else {
      want = {activeNum > 0 && activeNum < g.n * g.k ? activeNum : g.n * g.k, g.h};
    }
    g.rows = dropPadMode == 1 ? expertNum * expertCapacity : want[0];
    tiling_shape(gex, want, "gradExpandedXOut");
    if (ex != nullptr) tiling_shape(*ex, want, "expandedXOptional");
    tiling_shape(rows, {g.n * g.k}, "expandedRowIdx");
    if (gsc != nullptr) tiling_shape(*gsc, {g.n, g.k}, "gradScalesOut");
    check_combine_operands(Combine{g.n, g.k, g.h}, sc, experts, bias);
    return ExecutorSpec{
        "",
        {nn::slot(gradY, Io::Input), nn::slot(expandedRowIdx, Io::Input), nn::slot(expandedXOptional, Io::Input),
         nn::slot(scalesOptional, Io::Input), nn::slot(expertIdxOptional, Io::Input), nn::slot(biasOptional, Io::Input),
         nn::slot(gradExpandedXOut, Io::Output), nn::slot(gradScalesOut, Io::Output)},
        workspace_for(g.rows * g.h),
        [g](const Slots &s) { run_combine_grad(g, s); }};
  });
}

}  // extern "C"
