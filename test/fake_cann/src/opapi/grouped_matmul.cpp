// GroupedMatmulV4 and V5 (torch_npu's npu_grouped_matmul launches V5 when libopapi has it, else V4), the
// non-quantized cases of Atlas A2/A3 (ops-transformer gmm/grouped_matmul/docs/aclnnGroupedMatmulV4.md):
//   y_i = x_i @ weight_i + bias_i   in FLOAT / FLOAT16 / BFLOAT16 (bias FLOAT / FLOAT16 / FLOAT)
// with the groups given, per groupType, by the lists themselves or by groupList (INT64; groupListType 0: cumulative
// sums, 1: sizes):
//   -1  no grouping: x, weight and y lists of equal length (splitItem 0/1), no groupList.
//    0  groups of rows (M): one x [M, K] and one weight [E, K, N] or E weights [K, N], groupList required; or E x's
//       and E weights, groupList optional. One y [M, N] (splitItem 2/3); rows after the groups are not written.
//    2  groups of K: one x [M, K] given transposed; one weight [K, N] with groupList and one y [E, M, N] (splitItem
//       2/3), or weights [K_i, N_i] and y's [M, N_i] (splitItem 0/1) without it. No bias. An empty group gives 0s.
// This is how a MoE layer's forward (groupType 0) and backward run: the input gradient is groupType 0 over
// transposed weights, the weight gradient groupType 2 over the transposed activations. Quantized, pseudo-quantized
// and activation-fused calls (the scale, offset, antiquant, per-token and activation lists, actType != 0, INT8/INT4
// operands, FRACTAL_NZ weights) are not emulated and are refused. Products are summed in double, rounded once.
#include <algorithm>
#include <optional>

#include "fakecann/stream.h"
#include "op_common.h"

using namespace fakecann;
using namespace fakecann::ops;

namespace {

constexpr size_t kMaxGroups = 1024;

// The view of v narrowed to [start, start + len) along dim.
TensorView narrow(TensorView v, size_t dim, int64_t start, int64_t len) {
  v.offset += start * v.strides[dim];
  v.shape[dim] = len;
  return v;
}

// The view of v at index i of its first dim.
TensorView select0(TensorView v, int64_t i) {
  v.offset += i * v.strides[0];
  v.shape.erase(v.shape.begin());
  v.strides.erase(v.strides.begin());
  return v;
}

// CANN's test of a transposed operand: its last two dims are laid out column-major.
bool transposed(const TensorView &v) {
  const size_t r = v.shape.size();
  return r >= 2 && v.shape[r - 2] > 1 && v.shape[r - 1] > 1 && v.strides[r - 2] == 1 &&
         v.strides[r - 1] == v.shape[r - 2];
}

// a [m, k] @ b [k, n] (+ bias [n]) into y [m, n].
void matmul_into(const TensorView &a, const TensorView &b, const TensorView *bias, const TensorView &y) {
  const int64_t m = a.shape[0], k = a.shape[1], n = b.shape[1];
  const Values x = gather(a), w = gather(b), bv = bias != nullptr ? gather(*bias) : Values((size_t)n, 0.0);
  Values r((size_t)(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) r[(size_t)(i * n + j)] = bv[(size_t)j];
    for (int64_t q = 0; q < k; ++q)
      for (int64_t j = 0; j < n; ++j) r[(size_t)(i * n + j)] += x[(size_t)(i * k + q)] * w[(size_t)(q * n + j)];
  }
  scatter(y, r);
}

enum class Layout { Lists, RowsSingleWeight, RowsWeightList, RowsXList, KSingleWeight, KWeightList };

struct Plan {
  Layout layout = Layout::Lists;
  int64_t list_type = 0;
  bool has_bias = false;
};

// Group sizes from groupList's values (device data, read by the kernel).
std::vector<int64_t> group_sizes(const Values &list, int64_t list_type, int64_t limit) {
  std::vector<int64_t> sizes;
  int64_t prev = 0, total = 0;
  for (double v : list) {
    const int64_t x = (int64_t)v, size = list_type == 0 ? x - prev : x;
    if (size < 0) throw KernelError("groupList is not a non-negative (or, cumulative, non-decreasing) sequence");
    sizes.push_back(size);
    prev = x;
    total += size;
  }
  if (total > limit)
    throw KernelError("groupList covers " + std::to_string(total) + " rows of a grouped axis of " +
                      std::to_string(limit));
  return sizes;
}

// Slots: x(0), weight(1), bias(2), groupList(8), out(12); the quantization lists are never present here.
void run_grouped(const Plan &p, const Slots &s) {
  const std::vector<TensorView> &xs = s[0].views, &ws = s[1].views, &ys = s[12].views, &bs = s[2].views;
  // Group g's bias: entry g of the list, or row g of a single [E, N] bias beside a single [E, K, N] weight.
  auto bias = [&](size_t g) {
    return !p.has_bias                            ? std::optional<TensorView>{}
           : p.layout == Layout::RowsSingleWeight ? select0(bs[0], (int64_t)g)
                                                  : bs[g];
  };
  auto run = [&](const TensorView &a, const TensorView &w, size_t g, const TensorView &y) {
    const std::optional<TensorView> b = bias(g);
    matmul_into(a, w, b ? &*b : nullptr, y);
  };
  if (p.layout == Layout::Lists || p.layout == Layout::KWeightList) {
    int64_t k0 = 0;
    for (size_t g = 0; g < ws.size(); ++g) {
      const int64_t k = ws[g].shape[0];
      run(p.layout == Layout::Lists ? xs[g] : narrow(xs[0], 1, k0, k), ws[g], g, ys[g]);
      k0 += k;
    }
    return;
  }
  const bool k_groups = p.layout == Layout::KSingleWeight;
  std::vector<int64_t> sizes;
  for (const TensorView &x : xs) sizes.push_back(x.shape[0]);
  if (s[8].present) {
    std::vector<int64_t> listed =
        group_sizes(gather(view(s, 8)), p.list_type, k_groups ? xs[0].shape[1] : ys[0].shape[0]);
    if (p.layout == Layout::RowsXList && listed != sizes) throw KernelError("groupList does not match the rows of x");
    sizes = std::move(listed);
  }
  int64_t at = 0;
  for (size_t g = 0; g < sizes.size(); ++g) {
    const int64_t len = sizes[g];
    if (k_groups) {
      run(narrow(xs[0], 1, at, len), narrow(ws[0], 0, at, len), g, select0(ys[0], (int64_t)g));  // len 0: zeros
    } else if (len > 0) {
      const TensorView a = p.layout == Layout::RowsXList ? xs[g] : narrow(xs[0], 0, at, len);
      run(a, p.layout == Layout::RowsSingleWeight ? select0(ws[0], (int64_t)g) : ws[g], g, narrow(ys[0], 0, at, len));
    }
    at += len;
  }
}

std::vector<const TensorView *> optional_list(const aclTensorList *l, const char *name, DtypeSet allowed) {
  return l == nullptr ? std::vector<const TensorView *>{} : tensor_list(l, name, allowed);
}

// Every parameter of V4 (V5 adds a tuning hint, ignored).
struct GmmArgs {
  const aclTensorList *x, *weight, *bias, *scale, *offset, *antiquant_scale, *antiquant_offset, *per_token_scale;
  const aclTensor *group_list;
  const aclTensorList *act_input, *act_quant_scale, *act_quant_offset;
  int64_t split_item, group_type, group_list_type, act_type;
  const aclTensorList *out, *act_feature_out, *dyn_quant_scale_out;
};

// The lists that only the quantized and activation-fused cases use must be absent (NULL or empty).
void refuse_quantization(const GmmArgs &a) {
  const std::pair<const aclTensorList *, const char *> lists[] = {{a.scale, "scaleOptional"},
                                                                  {a.offset, "offsetOptional"},
                                                                  {a.antiquant_scale, "antiquantScaleOptional"},
                                                                  {a.antiquant_offset, "antiquantOffsetOptional"},
                                                                  {a.per_token_scale, "perTokenScaleOptional"},
                                                                  {a.act_input, "activationInputOptional"},
                                                                  {a.act_quant_scale, "activationQuantScaleOptional"},
                                                                  {a.act_quant_offset, "activationQuantOffsetOptional"},
                                                                  {a.act_feature_out, "activationFeatureOutOptional"},
                                                                  {a.dyn_quant_scale_out, "dynQuantScaleOutOptional"}};
  for (auto [l, name] : lists)
    if (!optional_list(l, name, ~DtypeSet{0}).empty())
      fail(std::string(name) + " is given: quantized GroupedMatmul is not emulated by the stand-in");
  if (a.act_type != 0)
    fail("actType " + std::to_string(a.act_type) + ": activation-fused GroupedMatmul is not emulated (0 only)");
}

// One slot per tensor-typed parameter, in declaration order.
Slots gmm_slots(const GmmArgs &a) {
  Slots s;
  for (const aclTensorList *l :
       {a.x, a.weight, a.bias, a.scale, a.offset, a.antiquant_scale, a.antiquant_offset, a.per_token_scale})
    s.push_back(nn::slot(l, Io::Input));
  s.push_back(nn::slot(a.group_list, Io::Input));
  for (const aclTensorList *l : {a.act_input, a.act_quant_scale, a.act_quant_offset})
    s.push_back(nn::slot(l, Io::Input));
  for (const aclTensorList *l : {a.out, a.act_feature_out, a.dyn_quant_scale_out}) s.push_back(nn::slot(l, Io::Output));
  return s;
}

struct Operands {
  std::vector<const TensorView *> x, w, bias, y;
  const TensorView *group_list = nullptr;
};

// groupType -1 and groupType 2 with weight lists: one matmul per list entry.
Plan plan_lists(const Operands &o, int64_t group_type, int64_t split_item) {
  if (split_item > 1) fail("splitItem " + std::to_string(split_item) + ": this grouping has one y per weight (0/1)");
  if (o.group_list != nullptr) fail("groupListOptional must be NULL when the weights are a list of groups");
  const bool k_split = group_type == 2;
  if (o.y.size() != o.w.size() || (!k_split && o.x.size() != o.w.size()) || (k_split && o.x.size() != 1))
    fail("x, weight and out lists do not match in length");
  int64_t k_total = 0;
  for (size_t i = 0; i < o.w.size(); ++i) {
    const TensorView &x = *o.x[k_split ? 0 : i], &w = *o.w[i];
    if (x.shape.size() != 2 || w.shape.size() != 2) fail("x and weight tensors must be 2-D here");
    const int64_t k = k_split ? w.shape[0] : x.shape[1];
    if (w.shape[0] != k) fail("weight " + show(w.shape) + " does not match x " + show(x.shape) + " in K");
    require_shape(*o.y[i], {x.shape[0], w.shape[1]}, "out");
    if (!o.bias.empty()) require_shape(*o.bias[i], {w.shape[1]}, "biasOptional");
    k_total += k;
  }
  if (k_split && k_total > o.x[0]->shape[1]) fail("the weights' K sum to more than x's K");
  return Plan{k_split ? Layout::KWeightList : Layout::Lists, 0, !o.bias.empty()};
}

// groupType 0: groups of rows, one y.
Plan plan_rows(const Operands &o, int64_t list_type) {
  if (o.y.size() != 1 || o.y[0]->shape.size() != 2) fail("groups of rows give one 2-D out");
  const TensorView &w0 = *o.w[0];
  const bool single_x = o.x.size() == 1, single_w = o.w.size() == 1 && w0.shape.size() == 3;
  const int64_t groups = single_w ? w0.shape[0] : (int64_t)o.w.size(), k = o.x[0]->shape.back();
  const int64_t n = single_w ? w0.shape[2] : w0.shape[1];
  if (!single_x && (int64_t)o.x.size() != groups) fail("x and weight lists do not match in length");
  if (single_x && o.group_list == nullptr) fail("groupListOptional is required with one x");
  if (o.group_list != nullptr) require_shape(*o.group_list, {groups}, "groupListOptional");
  int64_t m = 0;
  for (const TensorView *x : o.x) {
    if (x->shape.size() != 2 || x->shape[1] != k) fail("x tensors must be 2-D [M, K] with one K");
    m += x->shape[0];
  }
  for (const TensorView *w : o.w)
    if (!single_w && (w->shape.size() != 2 || w->shape[0] != k || w->shape[1] != n))
      fail("weight " + show(w->shape) + " must be [K, N] = " + show({k, n}));
  if (single_w && w0.shape[1] != k) fail("weight " + show(w0.shape) + " must be [E, K, N] with K " + std::to_string(k));
  require_shape(*o.y[0], {m, n}, "out");
  if (!o.bias.empty()) {
    const bool one = o.bias.size() == 1 && single_w;
    if (!one && (int64_t)o.bias.size() != groups) fail("biasOptional does not match the weights");
    for (const TensorView *b : o.bias) require_shape(*b, one ? Shape{groups, n} : Shape{n}, "biasOptional");
  }
  Layout l = single_x ? (single_w ? Layout::RowsSingleWeight : Layout::RowsWeightList) : Layout::RowsXList;
  if (!single_x && single_w) fail("several x with one weight [E, K, N] is not a supported grouping");
  return Plan{l, list_type, !o.bias.empty()};
}

// groupType 2 with one weight: groups of K given by groupList, y [E, M, N].
Plan plan_k(const Operands &o, int64_t list_type) {
  if (!o.bias.empty()) fail("biasOptional must be empty when K is grouped");
  if (o.x.size() != 1 || o.y.size() != 1 || o.group_list == nullptr)
    fail("groups of K need one x, one out and groupList");
  const TensorView &x = *o.x[0], &w = *o.w[0];
  if (x.shape.size() != 2 || w.shape.size() != 2 || w.shape[0] != x.shape[1])
    fail("x " + show(x.shape) + " and weight " + show(w.shape) + " must be [M, K] and [K, N]");
  if (o.group_list->shape.size() != 1 || o.group_list->shape[0] < 1) fail("groupListOptional must be 1-D");
  const int64_t groups = o.group_list->shape[0];
  if (groups > (int64_t)kMaxGroups) fail("groupListOptional has more than 1024 groups");
  require_shape(*o.y[0], {groups, x.shape[0], w.shape[1]}, "out");
  return Plan{Layout::KSingleWeight, list_type, false};
}

Plan plan(const Operands &o, int64_t split_item, int64_t group_type, int64_t list_type) {
  if (group_type != -1 && group_type != 0 && group_type != 2)
    fail("groupType " + std::to_string(group_type) + " is not -1, 0 or 2");
  if (list_type != 0 && list_type != 1) fail("groupListType " + std::to_string(list_type) + " is not 0 or 1 here");
  if (split_item < 0 || split_item > 3) fail("splitItem " + std::to_string(split_item) + " is not 0..3");
  if (o.w.empty() || o.w.size() > kMaxGroups || o.x.empty() || o.y.empty()) fail("x, weight and out must not be empty");
  if (!o.bias.empty() && o.bias.size() != o.w.size()) fail("biasOptional's length differs from weight's");
  const bool x_t = transposed(*o.x[0]), w_t = transposed(*o.w[0]);
  for (const TensorView *w : o.w)
    if (transposed(*w) != w_t) fail("the weights are not all transposed or all not");
  if (group_type == 2 ? !x_t || w_t : x_t)
    fail(group_type == 2 ? "groups of K need x transposed and weight not" : "x may not be transposed");
  if (group_type == -1 || (group_type == 2 && o.w.size() > 1)) return plan_lists(o, group_type, split_item);
  if (split_item < 2) fail("splitItem " + std::to_string(split_item) + ": this grouping has one out (2/3)");
  return group_type == 0 ? plan_rows(o, list_type) : plan_k(o, list_type);
}

aclnnStatus grouped_matmul(const char *op, const GmmArgs &a, uint64_t *ws, aclOpExecutor **ex) {
  return phase1(op, ws, ex, [&] {
    Operands o;
    o.x = tensor_list(a.x, "x", kFloats);
    const aclDataType dt = o.x.empty() ? ACL_FLOAT : o.x[0]->dtype;
    o.w = tensor_list(a.weight, "weight", dtypes({dt}));
    o.bias = optional_list(a.bias, "biasOptional", dtypes({dt == ACL_FLOAT16 ? ACL_FLOAT16 : ACL_FLOAT}));
    o.y = tensor_list(a.out, "out", dtypes({dt}));
    o.group_list = optional_tensor(a.group_list, "groupListOptional", dtypes({ACL_INT64}));
    for (const TensorView *t : o.x)
      if (t->dtype != dt) fail("x tensors differ in dtype");
    for (const TensorView *w : o.w)
      if (w->format == ACL_FORMAT_FRACTAL_NZ) fail("FRACTAL_NZ weights are not emulated by the stand-in");
    refuse_quantization(a);
    const Plan p = plan(o, a.split_item, a.group_type, a.group_list_type);
    int64_t outputs = 0;
    for (const TensorView *y : o.y) outputs += y->numel();
    return ExecutorSpec{"", gmm_slots(a), workspace_for(outputs), [p](const Slots &s) { run_grouped(p, s); }};
  });
}

}  // namespace

extern "C" {

aclnnStatus aclnnGroupedMatmulV4GetWorkspaceSize(
    const aclTensorList *x, const aclTensorList *weight, const aclTensorList *biasOptional,
    const aclTensorList *scaleOptional, const aclTensorList *offsetOptional,
    const aclTensorList *antiquantScaleOptional, const aclTensorList *antiquantOffsetOptional,
    const aclTensorList *perTokenScaleOptional, const aclTensor *groupListOptional,
    const aclTensorList *activationInputOptional, const aclTensorList *activationQuantScaleOptional,
    const aclTensorList *activationQuantOffsetOptional, int64_t splitItem, int64_t groupType, int64_t groupListType,
    int64_t actType, aclTensorList *out, aclTensorList *activationFeatureOutOptional,
    aclTensorList *dynQuantScaleOutOptional, uint64_t *workspaceSize, aclOpExecutor **executor) {
  return grouped_matmul(
      "GroupedMatmulV4",
      GmmArgs{x, weight, biasOptional, scaleOptional, offsetOptional, antiquantScaleOptional, antiquantOffsetOptional,
              perTokenScaleOptional, groupListOptional, activationInputOptional, activationQuantScaleOptional,
              activationQuantOffsetOptional, splitItem, groupType, groupListType, actType, out,
              activationFeatureOutOptional, dynQuantScaleOutOptional},
      workspaceSize, executor);
}

// V5 adds tuningConfigOptional, a performance hint for the real kernels' tiling: ignored.
aclnnStatus aclnnGroupedMatmulV5GetWorkspaceSize(
    const aclTensorList *x, const aclTensorList *weight, const aclTensorList *biasOptional,
    const aclTensorList *scaleOptional, const aclTensorList *offsetOptional,
    const aclTensorList *antiquantScaleOptional, const aclTensorList *antiquantOffsetOptional,
    const aclTensorList *perTokenScaleOptional, const aclTensor *groupListOptional,
    const aclTensorList *activationInputOptional, const aclTensorList *activationQuantScaleOptional,
    const aclTensorList *activationQuantOffsetOptional, int64_t splitItem, int64_t groupType, int64_t groupListType,
    int64_t actType, aclIntArray *tuningConfigOptional, aclTensorList *out, aclTensorList *activationFeatureOutOptional,
    aclTensorList *dynQuantScaleOutOptional, uint64_t *workspaceSize, aclOpExecutor **executor) {
  (void)tuningConfigOptional;
  return grouped_matmul(
      "GroupedMatmulV5",
      GmmArgs{x, weight, biasOptional, scaleOptional, offsetOptional, antiquantScaleOptional, antiquantOffsetOptional,
              perTokenScaleOptional, groupListOptional, activationInputOptional, activationQuantScaleOptional,
              activationQuantOffsetOptional, splitItem, groupType, groupListType, actType, out,
              activationFeatureOutOptional, dynQuantScaleOutOptional},
      workspaceSize, executor);
}

}  // extern "C"
