// MoeInitRoutingV3, what torch_npu's npu_moe_init_routing_v2 launches on CANN 8.5 and later, without quantization
// (quantMode -1), as ops-transformer's docs and op-plugin's golden define it. Against MoeInitRoutingV2 it adds:
//   - activeExpertRange [start, end): experts outside it are sorted last and take no row; `available` counts the
//     positions inside it;
//   - rowIdxType 0: expandedRowIdx[p_i] = i for the first `available` sorted positions, -1 elsewhere; rowIdxType 1:
//     expandedRowIdx[i] = p_i for i < available, the rest left as it was (CANN: "not initialized");
//   - expertTokensNumType 0: cumulative counts, 1: counts (INT64, end - start of them), 2: (expert, count) pairs of
//     the experts that got tokens, then zero rows ([expertNum, 2]); written only with expertTokensNumFlag;
//   - scaleOptional [N] (FLOAT): expandedScaleOut[i] = scale[p_i / K] for the rows written.
// Dropless: expandedX's first min(activeNum or available, available) rows get x[p_i / K], the rest is not written.
// Drop/pad is V2's (each expert's first expertCapacity positions, expandedRowIdx -1 for the rest; rowIdxType 0 and
// the full expert range only here). Quantized modes are not emulated.
#include "moe_common.h"

using namespace fakecann;
using namespace fakecann::ops;

namespace {

struct InitV3 {
  int64_t n = 0, k = 0, h = 0;
  int64_t active = 0;          // activeNum (0: every available position)
  int64_t experts = 0;         // expertNum
  int64_t start = 0, end = 0;  // activeExpertRange
  int64_t capacity = 0;        // drop/pad: expertCapacity (0: dropless)
  int64_t tokens_type = -1;    // expertTokensNumType when the counts are asked for, else -1
  int64_t row_idx_type = 0;
  bool scale = false;
};

// The counts output: per expert of the range (type 0 cumulative, 1 plain) or (expert, count) pairs (type 2).
Values token_counts(const InitV3 &g, const Values &experts) {
  Values counts((size_t)(g.end - g.start), 0.0);
  for (double e : experts)
    if (e >= (double)g.start && e < (double)g.end) counts[(size_t)((int64_t)e - g.start)] += 1;
  if (g.tokens_type == 0) std::partial_sum(counts.begin(), counts.end(), counts.begin());
  if (g.tokens_type != 2) return counts;
  Values pairs((size_t)(g.experts * 2), 0.0);
  size_t at = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] == 0) continue;
    pairs[at++] = (double)(g.start + (int64_t)i);
    pairs[at++] = counts[i];
  }
  return pairs;
}

// Slots: x, expertIdx, scale, offset, expandedX, expandedRowIdx, expertTokensCountOrCumsum, expandedScale.
void run_init_v3(const InitV3 &g, const Slots &s) {
  const Values x = gather(view(s, 0)), experts = gather(view(s, 1));
  const int64_t nk = g.n * g.k;
  Values keys(experts);  // experts outside the range go last
  for (size_t i = 0; i < keys.size(); ++i) {
    const int64_t e = index_at(experts, i, 0, INT32_MAX, "expertIdx");
    if (e < g.start || e >= g.end) keys[i] = INT32_MAX;
  }
  const std::vector<size_t> order = sorted_by_key(keys);
  const int64_t available = std::count_if(keys.begin(), keys.end(), [](double e) { return e != INT32_MAX; });
  const TensorView &out_x = view(s, 4), &out_rows = view(s, 5);
  Values rows = g.row_idx_type == 1 ? gather(out_rows) : Values((size_t)nk, -1.0);
  if (g.capacity > 0) {
    Values expanded((size_t)(g.experts * g.capacity * g.h), 0.0), filled((size_t)g.experts, 0.0);
    for (size_t p : order) {
      if (keys[p] == INT32_MAX) break;
      const int64_t e = (int64_t)keys[p], j = (int64_t)filled[(size_t)e]++;
      if (j >= g.capacity) continue;
      rows[p] = (double)(e * g.capacity + j);
      copy_row(x, (int64_t)p / g.k, expanded, e * g.capacity + j, g.h);
    }
    scatter(out_x, expanded);
  } else {
    const int64_t written = g.active > 0 ? std::min(g.active, available) : available;
    Values expanded = gather(out_x), scales = g.scale ? gather(view(s, 7)) : Values();
    const Values scale_in = g.scale ? gather(view(s, 2)) : Values();
    for (int64_t i = 0; i < available; ++i) {
      const size_t p = order[(size_t)i];
      if (g.row_idx_type == 1)
        rows[(size_t)i] = (double)p;
      else
        rows[p] = (double)i;
      if (i >= written) continue;
      copy_row(x, (int64_t)p / g.k, expanded, i, g.h);
      if (g.scale) scales[(size_t)i] = scale_in[p / (size_t)g.k];
    }
    scatter(out_x, expanded);
    if (g.scale) scatter(view(s, 7), scales);
  }
  scatter(out_rows, rows);
  if (g.tokens_type >= 0) scatter(view(s, 6), token_counts(g, experts));
}

// The attribute checks (tiling errors in CANN) and the stand-in's limits (161002: not emulated).
void check_v3_attrs(InitV3 &g, int64_t drop_pad, int64_t tokens_type, int64_t quant_mode, const aclIntArray *range) {
  if (quant_mode != -1)
    fail("quantMode " + std::to_string(quant_mode) + ": quantized MoeInitRoutingV3 is not emulated (-1 only)");
  tiling_require(g.active >= 0 && g.capacity >= 0 && g.experts >= 0,
                 "activeNum, expertCapacity and expertNum must not be negative");
  tiling_require(drop_pad == 0 || drop_pad == 1, "dropPadMode " + std::to_string(drop_pad) + " is not 0 or 1");
  tiling_require(tokens_type >= 0 && tokens_type <= 2,
                 "expertTokensNumType " + std::to_string(tokens_type) + " is not 0, 1 or 2");
  tiling_require(g.row_idx_type == 0 || g.row_idx_type == 1,
                 "rowIdxType " + std::to_string(g.row_idx_type) + " is not 0 or 1");
  const std::vector<int64_t> r = range == nullptr ? std::vector<int64_t>{} : int_array(range, "activeExpertRange");
  tiling_require(r.empty() || r.size() == 2, "activeExpertRangeOptional must hold 2 values");
  g.start = r.empty() ? 0 : r[0];
  g.end = r.empty() ? g.experts : r[1];
  tiling_require(g.start >= 0 && g.start < g.end && g.end <= g.experts,
                 "activeExpertRange [" + std::to_string(g.start) + ", " + std::to_string(g.end) +
                     ") is not inside [0, " + std::to_string(g.experts) + "]");
  if (drop_pad == 1) {
    tiling_require(g.capacity > 0 && g.capacity <= g.n, "drop/pad needs expertCapacity in (0, numRows]");
    if (g.row_idx_type != 0 || g.start != 0 || g.end != g.experts)
      fail("drop/pad with rowIdxType 1 or a partial expert range is not emulated");
  } else {
    g.capacity = 0;
  }
}

}  // namespace

extern "C" {

aclnnStatus aclnnMoeInitRoutingV3GetWorkspaceSize(
    const aclTensor *x, const aclTensor *expertIdx, const aclTensor *scaleOptional, const aclTensor *offsetOptional,
    int64_t activeNum, int64_t expertCapacity, int64_t expertNum, int64_t dropPadMode, int64_t expertTokensNumType,
    bool expertTokensNumFlag, int64_t quantMode, const aclIntArray *activeExpertRangeOptional, int64_t rowIdxType,
    const aclTensor *expandedXOut, const aclTensor *expandedRowIdxOut, const aclTensor *expertTokensCountOrCumsumOut,
    const aclTensor *expandedScaleOut, uint64_t *workspaceSize, aclOpExecutor **executor) {
  return phase1("MoeInitRoutingV3", workspaceSize, executor, [&] {
    const TensorView &xv = tensor(x, "x", kFloats), &experts = tensor(expertIdx, "expertIdx", dtypes({ACL_INT32}));
    const TensorView *scale = optional_tensor(scaleOptional, "scaleOptional", dtypes({ACL_FLOAT}));
    if (offsetOptional != nullptr) fail("offsetOptional is for the quantized modes, not emulated");
    const TensorView &ex = tensor(expandedXOut, "expandedXOut", dtypes({xv.dtype}));
    const TensorView &er = tensor(expandedRowIdxOut, "expandedRowIdxOut", dtypes({ACL_INT32}));
    tiling_require(xv.shape.size() == 2 && experts.shape.size() == 2 && experts.shape[0] == xv.shape[0],
                   "x " + show(xv.shape) + " and expertIdx " + show(experts.shape) + " must be [N, H] and [N, K]");
    InitV3 g{.n = xv.shape[0],
             .k = experts.shape[1],
             .h = xv.shape[1],
             .active = activeNum,
             .experts = expertNum,
             .capacity = expertCapacity,
             .row_idx_type = rowIdxType,
             .scale = scale != nullptr};
    check_v3_attrs(g, dropPadMode, expertTokensNumType, quantMode, activeExpertRangeOptional);
    const int64_t nk = g.n * g.k, rows = g.active > 0 ? std::min(g.active, nk) : nk;
    tiling_shape(ex, g.capacity > 0 ? Shape{g.experts, g.capacity, g.h} : Shape{rows, g.h}, "expandedXOut");
    tiling_shape(er, {nk}, "expandedRowIdxOut");
    if (expertTokensNumFlag) {
      g.tokens_type = expertTokensNumType;
      const TensorView &c = tensor(expertTokensCountOrCumsumOut, "expertTokensCountOrCumsumOut", dtypes({ACL_INT64}));
      tiling_shape(c, g.tokens_type == 2 ? Shape{g.experts, 2} : Shape{g.end - g.start},
                   "expertTokensCountOrCumsumOut");
    }
    if (scale != nullptr) {
      tiling_shape(*scale, {g.n}, "scaleOptional");
      const TensorView &es = tensor(expandedScaleOut, "expandedScaleOut", dtypes({ACL_FLOAT}));
      tiling_require(es.shape.size() == 1 && es.shape[0] >= rows, "expandedScaleOut must be 1-D, one per row");
    }
    return ExecutorSpec{"",
                        {nn::slot(x, Io::Input), nn::slot(expertIdx, Io::Input), nn::slot(scaleOptional, Io::Input),
                         nn::slot(offsetOptional, Io::Input), nn::slot(expandedXOut, Io::Output),
                         nn::slot(expandedRowIdxOut, Io::Output), nn::slot(expertTokensCountOrCumsumOut, Io::Output),
                         nn::slot(expandedScaleOut, Io::Output)},
                        workspace_for(nk * 2),
                        [g](const Slots &s) { run_init_v3(g, s); }};
  });
}

}  // extern "C"
