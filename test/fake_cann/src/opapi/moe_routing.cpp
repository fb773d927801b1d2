// MoE routing: MoeInitRouting (torch_npu's npu_moe_init_routing), MoeInitRoutingV2 and its backward
// MoeInitRoutingV2Grad, as ops-transformer's docs define them.
//
// Both forwards sort the flattened expertIdx [N, K] by expert, stably (equal experts keep their flattened order, as
// the docs' golden numpy.argsort(kind="stable")), and copy the token row of each sorted position to expandedX:
//   V1: sortedRow = rowIdx values in that order; expandedRowIdx[sortedRow[i]] = i; expandedX[i] = x[sortedRow[i] % N]
//       for the first min(N, activeNum) * K positions; expandedExpertIdx = the sorted experts.
//   V2: positions p = n * K + k themselves; dropless: expandedRowIdx[p_i] = i, expandedX[i] = x[p_i / K] for the
//       first rows of expandedX (all N * K, or activeNum); drop/pad: expert e's first expertCapacity positions fill
//       expandedX[e, 0..C), the rest get expandedRowIdx -1 and rows left over stay 0; per-expert token counts (a
//       cumulative sum with flag 1) or counts before the drop when asked for.
// The backward sums, for every token, the gradient rows its K positions were copied to (-1 and rows beyond activeNum
// contribute nothing).
#include <algorithm>
#include <numeric>

#include "moe_common.h"

using namespace fakecann;
using namespace fakecann::ops;

namespace {

constexpr DtypeSet kInt32 = dtypes({ACL_INT32});
// V2's token counts: INT32 in the docs; torch_npu hands it INT64 tensors (op-plugin MoeInitRoutingV2KernelNpuOpApi).
constexpr DtypeSet kCounts = dtypes({ACL_INT32, ACL_INT64});

// ---- MoeInitRouting ----------------------------------------------------------------------------------------------

struct InitV1 {
  int64_t n = 0, k = 0, h = 0, active_rows = 0;
};

// Slots: x, rowIdx, expertIdx, expandedX, expandedRowIdx, expandedExpertIdx.
void run_init_v1(const InitV1 &g, const Slots &s) {
  const Values x = gather(view(s, 0)), rows = gather(view(s, 1)), experts = gather(view(s, 2));
  const int64_t nk = g.n * g.k;
  const std::vector<size_t> order = sorted_by_key(experts);
  Values expanded_x((size_t)(g.active_rows * g.h)), row_idx((size_t)nk), sorted_experts((size_t)nk);
  for (int64_t i = 0; i < nk; ++i) {
    const int64_t src = index_at(rows, order[(size_t)i], 0, nk, "rowIdx");
    row_idx[(size_t)src] = (double)i;
    sorted_experts[(size_t)i] = experts[order[(size_t)i]];
    if (i < g.active_rows) copy_row(x, src % g.n, expanded_x, i, g.h);
  }
  scatter(view(s, 3), expanded_x);
  scatter(view(s, 4), row_idx);
  scatter(view(s, 5), sorted_experts);
}

// ---- MoeInitRoutingV2 --------------------------------------------------------------------------------------------

struct InitV2 {
  int64_t n = 0, k = 0, h = 0;
  int64_t rows = 0;      // dropless: rows of expandedX
  int64_t experts = 0;   // expertNum
  int64_t capacity = 0;  // drop/pad: expertCapacity (0: dropless)
  int64_t count_flag = 0;
  bool before_capacity = false;
};

// Per-expert token counts of the sorted experts (every value must name one of the `experts`).
Values expert_counts(const Values &experts, int64_t n_experts) {
  Values counts((size_t)n_experts, 0.0);
  for (size_t i = 0; i < experts.size(); ++i) counts[(size_t)index_at(experts, i, 0, n_experts, "expertIdx")] += 1;
  return counts;
}

// Slots: x, expertIdx, expandedX, expandedRowIdx, expertTokensCountOrCumsum, expertTokensBeforeCapacity.
void run_init_v2(const InitV2 &g, const Slots &s) {
  const Values x = gather(view(s, 0)), experts = gather(view(s, 1));
  const int64_t nk = g.n * g.k;
  for (size_t i = 0; i < experts.size(); ++i) index_at(experts, i, 0, INT32_MAX, "expertIdx");
  const std::vector<size_t> order = sorted_by_key(experts);
  Values row_idx((size_t)nk, -1.0);
  Values expanded_x((size_t)(g.capacity > 0 ? g.experts * g.capacity * g.h : g.rows * g.h), 0.0);
  if (g.capacity == 0) {
    for (int64_t i = 0; i < nk; ++i) {
      row_idx[order[(size_t)i]] = (double)i;
      if (i < g.rows) copy_row(x, (int64_t)order[(size_t)i] / g.k, expanded_x, i, g.h);
    }
  } else {
    Values filled((size_t)g.experts, 0.0);
    for (size_t p : order) {
      const int64_t e = index_at(experts, p, 0, g.experts, "expertIdx"), j = (int64_t)filled[(size_t)e]++;
      if (j >= g.capacity) continue;  // dropped: its row index stays -1
      row_idx[p] = (double)(e * g.capacity + j);
      copy_row(x, (int64_t)p / g.k, expanded_x, e * g.capacity + j, g.h);
    }
  }
  scatter(view(s, 2), expanded_x);
  scatter(view(s, 3), row_idx);
  if (g.count_flag != 0) {
    Values counts = expert_counts(experts, g.experts);
    if (g.count_flag == 1) std::partial_sum(counts.begin(), counts.end(), counts.begin());
    scatter(view(s, 4), counts);
  }
  if (g.before_capacity) scatter(view(s, 5), expert_counts(experts, g.experts));
}

// The attribute checks of MoeInitRoutingV2 (all of them tiling errors in CANN).
void check_init_v2_attrs(int64_t active, int64_t capacity, int64_t experts, int64_t drop_pad, int64_t count_flag,
                         int64_t n) {
  tiling_require(active >= 0 && capacity >= 0 && experts >= 0,
                 "activeNum, expertCapacity and expertNum must not be negative");
  tiling_require(drop_pad == 0 || drop_pad == 1, "dropPadMode " + std::to_string(drop_pad) + " is not 0 or 1");
  tiling_require(count_flag >= 0 && count_flag <= 2,
                 "expertTokensCountOrCumsumFlag " + std::to_string(count_flag) + " is not 0, 1 or 2");
  if (drop_pad == 1)
    tiling_require(experts > 0 && capacity > 0 && capacity <= n,
                   "drop/pad needs expertNum > 0 and expertCapacity in (0, numRows]");
  if (count_flag > 0) tiling_require(experts > 0, "expertTokensCountOrCumsumOut needs expertNum > 0");
}

}  // namespace

extern "C" {

aclnnStatus aclnnMoeInitRoutingGetWorkspaceSize(const aclTensor *x, const aclTensor *rowIdx, const aclTensor *expertIdx,
                                                int64_t activeNum, const aclTensor *expandedXOut,
                                                const aclTensor *expandedRowIdxOut,
                                                const aclTensor *expandedExpertIdxOut, uint64_t *workspaceSize,
                                                aclOpExecutor **executor) {
  return phase1("MoeInitRouting", workspaceSize, executor, [&] {
    const TensorView &xv = tensor(x, "x", kFloats);
    const TensorView &rows = tensor(rowIdx, "rowIdx", kInt32), &experts = tensor(expertIdx, "expertIdx", kInt32);
    const TensorView &ex = tensor(expandedXOut, "expandedXOut", dtypes({xv.dtype}));
    const TensorView &er = tensor(expandedRowIdxOut, "expandedRowIdxOut", kInt32);
    const TensorView &ee = tensor(expandedExpertIdxOut, "expandedExpertIdxOut", kInt32);
    tiling_require(xv.shape.size() == 2, "x must be 2-D, not " + show(xv.shape));
    tiling_require(experts.shape.size() == 2 && experts.shape[0] == xv.shape[0],
                   "expertIdx " + show(experts.shape) + " must be [numRows, k] with x " + show(xv.shape));
    tiling_shape(rows, experts.shape, "rowIdx");
    tiling_require(activeNum >= 0, "activeNum " + std::to_string(activeNum) + " is negative");
    InitV1 g{xv.shape[0], experts.shape[1], xv.shape[1], 0};
    g.active_rows = std::min(g.n, activeNum) * g.k;
    tiling_shape(ex, {g.active_rows, g.h}, "expandedXOut");
    tiling_shape(er, {g.n * g.k}, "expandedRowIdxOut");
    tiling_shape(ee, {g.n * g.k}, "expandedExpertIdxOut");
    return ExecutorSpec{"",
                        {nn::slot(x, Io::Input), nn::slot(rowIdx, Io::Input), nn::slot(expertIdx, Io::Input),
                         nn::slot(expandedXOut, Io::Output), nn::slot(expandedRowIdxOut, Io::Output),
                         nn::slot(expandedExpertIdxOut, Io::Output)},
                        workspace_for(g.n * g.k * 2),
                        [g](const Slots &s) { run_init_v1(g, s); }};
  });
}

aclnnStatus aclnnMoeInitRoutingV2GetWorkspaceSize(
    const aclTensor *x, const aclTensor *expertIdx, int64_t activeNumOptional, int64_t expertCapacityOptional,
    int64_t expertNumOptional, int64_t dropPadModeOptional, int64_t expertTokensCountOrCumsumFlagOptional,
    bool expertTokensBeforeCapacityFlagOptional, const aclTensor *expandedXOut, const aclTensor *expandedRowIdxOut,
    const aclTensor *expertTokensCountOrCumsumOutOptional, const aclTensor *expertTokensBeforeCapacityOutOptional,
    uint64_t *workspaceSize, aclOpExecutor **executor) {
  return phase1("MoeInitRoutingV2", workspaceSize, executor, [&] {
    const TensorView &xv = tensor(x, "x", kFloats), &experts = tensor(expertIdx, "expertIdx", kInt32);
    const TensorView &ex = tensor(expandedXOut, "expandedXOut", dtypes({xv.dtype}));
    const TensorView &er = tensor(expandedRowIdxOut, "expandedRowIdxOut", kInt32);
    const int64_t flag = expertTokensCountOrCumsumFlagOptional, drop_pad = dropPadModeOptional;
    const bool before = expertTokensBeforeCapacityFlagOptional && drop_pad == 1;
    const TensorView *counts = flag > 0 && drop_pad == 0 ? &tensor(expertTokensCountOrCumsumOutOptional,
                                                                   "expertTokensCountOrCumsumOut", kCounts)
                                                         : nullptr;
    const TensorView *before_out =
        before ? &tensor(expertTokensBeforeCapacityOutOptional, "expertTokensBeforeCapacityOut", kCounts) : nullptr;
    tiling_require(xv.shape.size() == 2 && experts.shape.size() == 2 && experts.shape[0] == xv.shape[0],
                   "x " + show(xv.shape) + " and expertIdx " + show(experts.shape) + " must be [numRows, h] and " +
                       "[numRows, k]");
    check_init_v2_attrs(activeNumOptional, expertCapacityOptional, expertNumOptional, drop_pad, flag, xv.shape[0]);
    const int64_t n = xv.shape[0], k = experts.shape[1];
    const InitV2 g{.n = n,
                   .k = k,
                   .h = xv.shape[1],
                   .rows = activeNumOptional > 0 ? std::min(activeNumOptional, n * k) : n * k,
                   .experts = expertNumOptional,
                   .capacity = drop_pad == 1 ? expertCapacityOptional : 0,
                   .count_flag = counts != nullptr ? flag : 0,
                   .before_capacity = before};
    tiling_shape(ex, g.capacity > 0 ? Shape{g.experts, g.capacity, g.h} : Shape{g.rows, g.h}, "expandedXOut");
    tiling_shape(er, {g.n * g.k}, "expandedRowIdxOut");
    if (counts != nullptr) tiling_shape(*counts, {g.experts}, "expertTokensCountOrCumsumOut");
    if (before_out != nullptr) tiling_shape(*before_out, {g.experts}, "expertTokensBeforeCapacityOut");
    return ExecutorSpec{
        "",
        {nn::slot(x, Io::Input), nn::slot(expertIdx, Io::Input), nn::slot(expandedXOut, Io::Output),
         nn::slot(expandedRowIdxOut, Io::Output), nn::slot(expertTokensCountOrCumsumOutOptional, Io::Output),
         nn::slot(expertTokensBeforeCapacityOutOptional, Io::Output)},
        workspace_for(g.n * g.k * 2),
        [g](const Slots &s) { run_init_v2(g, s); }};
  });
}

// gradX[i] = sum over t of gradExpandedX[expandedRowIdx[i * topK + t]].
aclnnStatus aclnnMoeInitRoutingV2GradGetWorkspaceSize(const aclTensor *gradExpandedX, const aclTensor *expandedRowIdx,
                                                      int64_t topK, int64_t dropPadMode, int64_t activeNum,
                                                      const aclTensor *out, uint64_t *workspaceSize,
                                                      aclOpExecutor **executor) {
  return phase1("MoeInitRoutingV2Grad", workspaceSize, executor, [&] {
    const TensorView &g = tensor(gradExpandedX, "gradExpandedX", kFloats);
    const TensorView &rows = tensor(expandedRowIdx, "expandedRowIdx", kInt32);
    const TensorView &o = tensor(out, "out", dtypes({g.dtype}));
    tiling_require(dropPadMode == 0 || dropPadMode == 1,
                   "dropPadMode " + std::to_string(dropPadMode) + " is not 0 or 1");
    tiling_require(topK > 0 && activeNum >= 0, "topK must be positive and activeNum not negative");
    tiling_require(g.shape.size() == (dropPadMode == 1 ? 3u : 2u),
                   "gradExpandedX " + show(g.shape) + " must be 3-D [E, C, H] in drop/pad mode, else 2-D");
    tiling_require(rows.shape.size() == 1 && rows.shape[0] % topK == 0,
                   "expandedRowIdx " + show(rows.shape) + " must be 1-D, a multiple of topK");
    const int64_t nk = rows.shape[0], h = g.shape.back(), avail = numel(g.shape) / std::max<int64_t>(h, 1);
    if (dropPadMode == 0)
      tiling_require(g.shape[0] == (activeNum > 0 ? activeNum : nk),
                     "gradExpandedX " + show(g.shape) + " has the wrong number of rows for activeNum " +
                         std::to_string(activeNum));
    tiling_shape(o, {nk / topK, h}, "out");
    return ExecutorSpec{
        "",
        {nn::slot(gradExpandedX, Io::Input), nn::slot(expandedRowIdx, Io::Input), nn::slot(out, Io::Output)},
        workspace_for(nk),
        [nk, k = topK, h, avail](const Slots &s) {
          const Values gx = gather(view(s, 0)), idx = gather(view(s, 1));
          Values gin((size_t)(nk / k * h), 0.0);
          for (int64_t i = 0; i < nk; ++i) {
            const int64_t r = index_at(idx, (size_t)i, -1, INT32_MAX, "expandedRowIdx");
            if (r < 0 || r >= avail) continue;  // dropped, or beyond the active rows
            for (int64_t j = 0; j < h; ++j) gin[(size_t)(i / k * h + j)] += gx[(size_t)(r * h + j)];
          }
          scatter(view(s, 2), gin);
        }};
  });
}

}  // extern "C"
