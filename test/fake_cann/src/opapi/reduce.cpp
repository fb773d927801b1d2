// Reductions (ReduceSum, Mean, Amax, Amin, AminmaxAll, Norm, LinalgVectorNorm, ForeachNorm), the elementwise NaN/Inf
// predicates (IsFinite, IsPosInf, IsNegInf) and the MSE loss with its backward (reduction none / mean / sum).
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "op_common.h"

using namespace fakecann;
using namespace fakecann::ops;

namespace {

// A reduction's scratch memory: one partial result per AI core (a real reduce kernel combines per-core
// partials in global memory), whatever the tensor's size.
constexpr uint64_t kReduceWorkspace = 16 << 10;

// How the elements of `x` fold into `o`: `dims` (empty = all) wrapped and sorted, duplicates an error as in
// CANN; `o` must have the reduced shape (size-1 dims kept with keepDim).
struct Fold {
  std::vector<size_t> map;  // element (row-major) -> output index; empty when every element folds into output 0
  int64_t outputs = 0;      // output elements
  int64_t count = 0;        // input elements per output
  size_t at(size_t i) const { return map.empty() ? 0 : map[i]; }
};

Fold plan_fold(const TensorView &x, const aclIntArray *dims, bool keepDim, const TensorView &o) {
  std::vector<int64_t> d;
  for (int64_t v : int_array(dims, "dim")) d.push_back(wrap_dim(v, x.shape.size()));
  if (d.empty())
    for (size_t i = 0; i < x.shape.size(); ++i) d.push_back((int64_t)i);
  std::sort(d.begin(), d.end());
  if (std::adjacent_find(d.begin(), d.end()) != d.end()) fail("dim lists a dimension twice");
  Shape kept;
  Fold f;
  if (d.size() == x.shape.size()) {
    // A full reduction: no per-element map to build (a real phase 1 plans tiles, it never visits the elements).
    kept.assign(x.shape.size(), 1);
  } else {
    f.map = reduce_index(x.shape, d, &kept);
  }
  Shape want;
  for (size_t i = 0; i < x.shape.size(); ++i)
    if (keepDim || !std::binary_search(d.begin(), d.end(), (int64_t)i)) want.push_back(kept[i]);
  require_shape(o, want, "out");
  f.outputs = numel(kept);
  f.count = f.outputs == 0 ? 0 : x.numel() / f.outputs;
  return f;
}

// ReduceSum / Mean (`dtype` is out's dtype; self may differ: Mean of fp16 into fp32).
aclnnStatus reduce(const char *op, const aclTensor *self, const aclIntArray *dims, bool keepDim, aclDataType dtype,
                   const aclTensor *out, DtypeSet types, bool mean, uint64_t *ws, aclOpExecutor **ex) {
  return phase1(op, ws, ex, [&] {
    const TensorView &x = tensor(self, "self", types);
    const TensorView &o = tensor(out, "out", types);
    if (dtype != o.dtype) fail("dtype " + std::to_string(dtype) + " differs from out's dtype");
    Fold f = plan_fold(x, dims, keepDim, o);
    return ExecutorSpec{"",
                        {nn::slot(self, Io::Input), nn::slot(out, Io::Output)},
                        kReduceWorkspace,
                        [f = std::move(f), mean](const Slots &s) {
                          Values x = gather(view(s, 0)), acc((size_t)f.outputs, 0.0);
                          for (size_t i = 0; i < x.size(); ++i) acc[f.at(i)] += x[i];
                          if (mean)
                            for (double &e : acc) e /= (double)f.count;
                          scatter(view(s, 1), acc);
                        }};
  });
}

// max/min folding with NaN propagation (torch.amax / amin / aminmax).
void fold_extreme(double x, double &acc, bool want_max) {
  if (std::isnan(x) || std::isnan(acc))
    acc = std::isnan(x) ? x : acc;
  else
    acc = want_max ? std::max(acc, x) : std::min(acc, x);
}

// Amax / Amin: out has self's dtype; a NaN anywhere in a slice makes its result NaN (torch.amax).
aclnnStatus extreme(const char *op, const aclTensor *self, const aclIntArray *dims, bool keepDim, const aclTensor *out,
                    bool want_max, uint64_t *ws, aclOpExecutor **ex) {
  return phase1(op, ws, ex, [&] {
    const TensorView &x = tensor(self, "self", kArith);
    const TensorView &o = tensor(out, "out", kArith);
    if (o.dtype != x.dtype) fail("out's dtype " + std::to_string(o.dtype) + " differs from self's");
    Fold f = plan_fold(x, dims, keepDim, o);
    if (f.count == 0 && f.outputs > 0) fail("cannot reduce an empty dimension (no identity for max/min)");
    return ExecutorSpec{"",
                        {nn::slot(self, Io::Input), nn::slot(out, Io::Output)},
                        kReduceWorkspace,
                        [f = std::move(f), want_max](const Slots &s) {
                          const double start = want_max ? -std::numeric_limits<double>::infinity()
                                                        : std::numeric_limits<double>::infinity();
                          Values x = gather(view(s, 0)), acc((size_t)f.outputs, start);
                          for (size_t i = 0; i < x.size(); ++i) fold_extreme(x[i], acc[f.at(i)], want_max);
                          scatter(view(s, 1), acc);
                        }};
  });
}

// AminmaxAll: both extremes of every element, each into a one-element tensor of self's dtype.
aclnnStatus aminmax_all(const aclTensor *self, const aclTensor *minOut, const aclTensor *maxOut, uint64_t *ws,
                        aclOpExecutor **ex) {
  return phase1("AminmaxAll", ws, ex, [&] {
    const TensorView &x = tensor(self, "self", kArith);
    const TensorView &lo = tensor(minOut, "minOut", kArith), &hi = tensor(maxOut, "maxOut", kArith);
    for (const TensorView *o : {&lo, &hi}) {
      if (o->dtype != x.dtype) fail("an output's dtype " + std::to_string(o->dtype) + " differs from self's");
      if (o->numel() != 1) fail("minOut and maxOut must hold one element, one has shape " + show(o->shape));
    }
    if (x.numel() == 0) fail("cannot reduce an empty tensor (no identity for max/min)");
    return ExecutorSpec{"",
                        {nn::slot(self, Io::Input), nn::slot(minOut, Io::Output), nn::slot(maxOut, Io::Output)},
                        kReduceWorkspace,
                        [](const Slots &s) {
                          double lo = std::numeric_limits<double>::infinity(), hi = -lo;
                          for (double v : gather(view(s, 0))) fold_extreme(v, lo, false), fold_extreme(v, hi, true);
                          scatter(view(s, 1), {lo});
                          scatter(view(s, 2), {hi});
                        }};
  });
}

// The p-norm's fold, shared by Norm, LinalgVectorNorm and ForeachNorm (the same values whichever op computes them):
// p = inf / -inf give max / min of |x|, p = 0 the count of non-zeros; NaN propagates.
double norm_start(double p) { return std::isinf(p) && p < 0 ? std::numeric_limits<double>::infinity() : 0.0; }

void norm_fold(double x, double &r, double p) {
  double a = std::fabs(x);
  if (std::isnan(a) || std::isnan(r))
    r = std::numeric_limits<double>::quiet_NaN();
  else if (std::isinf(p))
    r = p > 0 ? std::max(r, a) : std::min(r, a);
  else if (p == 0)
    r += a != 0.0;
  else if (p == 1)
    r += a;
  else if (p == 2)
    r += a * a;
  else
    r += std::pow(a, p);
}

double norm_finish(double r, double p) {
  if (std::isinf(p) || p == 0 || p == 1) return r;
  return p == 2 ? std::sqrt(r) : std::pow(r, 1.0 / p);
}

// Norm / LinalgVectorNorm: (sum |x|^p)^(1/p) over `dims`; p = inf / -inf give max / min of |x|, p = 0 the
// count of non-zeros. Accumulated in double, rounded once to out's dtype.
aclnnStatus vector_norm(const char *op, const aclTensor *self, const aclScalar *p_scalar, const aclIntArray *dims,
                        bool keepDim, std::optional<aclDataType> dtype, const aclTensor *out, uint64_t *ws,
                        aclOpExecutor **ex) {
  return phase1(op, ws, ex, [&] {
    const TensorView &x = tensor(self, "self", kFloats);
    const TensorView &o = tensor(out, "out", kFloats);
    double p = scalar(p_scalar, dtype ? "ord" : "pScalar");
    if (dtype && *dtype != o.dtype) fail("dtype " + std::to_string(*dtype) + " differs from out's dtype");
    if (std::isnan(p)) fail("the order of the norm is NaN");
    Fold f = plan_fold(x, dims, keepDim, o);
    return ExecutorSpec{"",
                        {nn::slot(self, Io::Input), nn::slot(out, Io::Output)},
                        kReduceWorkspace,
                        [f = std::move(f), p](const Slots &s) {
                          Values x = gather(view(s, 0)), acc((size_t)f.outputs, norm_start(p));
                          for (size_t i = 0; i < x.size(); ++i) norm_fold(x[i], acc[f.at(i)], p);
                          for (double &r : acc) r = norm_finish(r, p);
                          scatter(view(s, 1), acc);
                        }};
  });
}

// IsFinite / IsPosInf / IsNegInf: a BOOL tensor of self's shape (integers and bools are always finite).
aclnnStatus predicate(const char *op, const aclTensor *self, const aclTensor *out, bool (*test)(double), uint64_t *ws,
                      aclOpExecutor **ex) {
  return phase1(op, ws, ex, [&] {
    const TensorView &x = tensor(self, "self", kArith);
    tensor(out, "out", dtypes({ACL_BOOL}), x.shape);
    return ExecutorSpec{"", {nn::slot(self, Io::Input), nn::slot(out, Io::Output)}, 0, [test](const Slots &s) {
                          Values x = gather(view(s, 0));
                          for (double &e : x) e = test(e) ? 1.0 : 0.0;
                          scatter(view(s, 1), x);
                        }};
  });
}

// ForeachNorm (Atlas A2/A3, CANN 8.1: aclnnForeachNorm.md, ops-nn foreach/foreach_norm): the p-norm of each tensor
// of x, into the one-element tensor of out at the same position. x: FLOAT, FLOAT16 or BFLOAT16, one dtype for the
// whole list, at most 8 dims, ND, views allowed; out: as many tensors, of x's dtype and format, one element each;
// p: a FLOAT, DOUBLE or INT64 scalar. The A2/A3 kernel implements p = 1 and 2 only (foreach_norm.h lists 0 and
// +-inf as "not used now"; +inf is documented for Ascend 950 alone): other orders are refused here. One launch
// handles at most 256 tensors (foreach_reduce_tiling_def.h MAX_TENSOR_CONT).
constexpr size_t kForeachMaxTensors = 256;

aclnnStatus foreach_norm(const aclTensorList *x, const aclScalar *scalar, const aclTensorList *out, uint64_t *ws,
                         aclOpExecutor **ex) {
  return phase1("ForeachNorm", ws, ex, [&] {
    std::vector<const TensorView *> in = tensor_list(x, "x", kFloats), o = tensor_list(out, "out", kFloats);
    const double p = fakecann::ops::scalar(scalar, "scalar");  // NULL: ACLNN_ERR_PARAM_NULLPTR
    if (scalar->dtype != ACL_FLOAT && scalar->dtype != ACL_DOUBLE && scalar->dtype != ACL_INT64)
      fail("scalar's dtype " + std::to_string(scalar->dtype) + " is not FLOAT, DOUBLE or INT64");
    if (p != 1.0 && p != 2.0) fail("the order of the norm must be 1 or 2 on this chip");
    if (in.empty() || in.size() > kForeachMaxTensors)
      fail("x holds " + std::to_string(in.size()) + " tensors, not 1 to " + std::to_string(kForeachMaxTensors));
    if (o.size() != in.size()) fail("x has " + std::to_string(in.size()) + " tensors, out " + std::to_string(o.size()));
    for (size_t i = 0; i < in.size(); ++i) {
      const std::string at = "[" + std::to_string(i) + "]";
      if (in[i]->dtype != in[0]->dtype) fail("x" + at + " differs in dtype from x[0]");
      if (in[i]->shape.size() > 8) fail("x" + at + " has more than 8 dims");
      if (o[i]->dtype != in[i]->dtype || o[i]->format != in[i]->format)
        fail("out" + at + " differs in dtype or format from x" + at);
      if (o[i]->numel() != 1) fail("out" + at + " must hold one element, has shape " + show(o[i]->shape));
    }
    return ExecutorSpec{"", {nn::slot(x, Io::Input), nn::slot(out, Io::Output)}, kReduceWorkspace, [p](const Slots &s) {
                          for (size_t i = 0; i < s[0].views.size(); ++i) {
                            double r = norm_start(p);
                            for (double v : gather(s[0].views[i])) norm_fold(v, r, p);
                            scatter(s[1].views[i], {norm_finish(r, p)});
                          }
                        }};
  });
}

enum Reduction : int64_t { kNone = 0, kMean = 1, kSum = 2 };

void check_reduction(int64_t r) {
  if (r < kNone || r > kSum) fail("reduction " + std::to_string(r) + " is not 0 (none), 1 (mean) or 2 (sum)");
}

}  // namespace

extern "C" {

aclnnStatus aclnnReduceSumGetWorkspaceSize(const aclTensor *self, const aclIntArray *dims, bool keepDims,
                                           aclDataType dtype, aclTensor *out, uint64_t *workspaceSize,
                                           aclOpExecutor **executor) {
  return reduce("ReduceSum", self, dims, keepDims, dtype, out, kArith, false, workspaceSize, executor);
}

aclnnStatus aclnnMeanGetWorkspaceSize(const aclTensor *self, const aclIntArray *dim, bool keepDim, aclDataType dtype,
                                      aclTensor *out, uint64_t *workspaceSize, aclOpExecutor **executor) {
  return reduce("Mean", self, dim, keepDim, dtype, out, kFloatsD, true, workspaceSize, executor);
}

aclnnStatus aclnnAmaxGetWorkspaceSize(const aclTensor *self, const aclIntArray *dim, bool keepDim, aclTensor *out,
                                      uint64_t *workspaceSize, aclOpExecutor **executor) {
  return extreme("Amax", self, dim, keepDim, out, true, workspaceSize, executor);
}

aclnnStatus aclnnAminGetWorkspaceSize(const aclTensor *self, const aclIntArray *dim, bool keepDim, aclTensor *out,
                                      uint64_t *workspaceSize, aclOpExecutor **executor) {
  return extreme("Amin", self, dim, keepDim, out, false, workspaceSize, executor);
}

aclnnStatus aclnnAminmaxAllGetWorkspaceSize(const aclTensor *self, aclTensor *minOut, aclTensor *maxOut,
                                            uint64_t *workspaceSize, aclOpExecutor **executor) {
  return aminmax_all(self, minOut, maxOut, workspaceSize, executor);
}

aclnnStatus aclnnNormGetWorkspaceSize(const aclTensor *self, const aclScalar *pScalar, const aclIntArray *dim,
                                      bool keepdim, aclTensor *out, uint64_t *workspaceSize, aclOpExecutor **executor) {
  return vector_norm("Norm", self, pScalar, dim, keepdim, std::nullopt, out, workspaceSize, executor);
}

aclnnStatus aclnnLinalgVectorNormGetWorkspaceSize(const aclTensor *self, const aclScalar *ord, const aclIntArray *dims,
                                                  bool keepDims, const aclDataType dtype, aclTensor *out,
                                                  uint64_t *workspaceSize, aclOpExecutor **executor) {
  return vector_norm("LinalgVectorNorm", self, ord, dims, keepDims, dtype, out, workspaceSize, executor);
}

aclnnStatus aclnnForeachNormGetWorkspaceSize(const aclTensorList *x, const aclScalar *scalar, const aclTensorList *out,
                                             uint64_t *workspaceSize, aclOpExecutor **executor) {
  return foreach_norm(x, scalar, out, workspaceSize, executor);
}

aclnnStatus aclnnIsFiniteGetWorkspaceSize(const aclTensor *self, aclTensor *out, uint64_t *workspaceSize,
                                          aclOpExecutor **executor) {
  return predicate(
      "IsFinite", self, out, [](double v) { return std::isfinite(v); }, workspaceSize, executor);
}

aclnnStatus aclnnIsPosInfGetWorkspaceSize(const aclTensor *self, aclTensor *out, uint64_t *workspaceSize,
                                          aclOpExecutor **executor) {
  return predicate(
      "IsPosInf", self, out, [](double v) { return std::isinf(v) && v > 0; }, workspaceSize, executor);
}

aclnnStatus aclnnIsNegInfGetWorkspaceSize(const aclTensor *self, aclTensor *out, uint64_t *workspaceSize,
                                          aclOpExecutor **executor) {
  return predicate(
      "IsNegInf", self, out, [](double v) { return std::isinf(v) && v < 0; }, workspaceSize, executor);
}

aclnnStatus aclnnMseLossGetWorkspaceSize(const aclTensor *self, const aclTensor *target, int64_t reduction,
                                         aclTensor *out, uint64_t *workspaceSize, aclOpExecutor **executor) {
  return phase1("MseLoss", workspaceSize, executor, [&] {
    const TensorView &x = tensor(self, "self", kFloats), &y = tensor(target, "target", kFloats);
    const TensorView &o = tensor(out, "out", kFloats);
    Shape shape = broadcast_shape(x.shape, y.shape);
    check_reduction(reduction);
    if (reduction == kNone)
      require_shape(o, shape, "out");
    else if (o.numel() != 1)
      fail("out must hold one element for a reduced loss, has shape " + show(o.shape));
    return ExecutorSpec{"",
                        {nn::slot(self, Io::Input), nn::slot(target, Io::Input), nn::slot(out, Io::Output)},
                        workspace_for(numel(shape)),
                        [shape, reduction](const Slots &s) {
                          Values a = gather(expand(view(s, 0), shape)), b = gather(expand(view(s, 1), shape));
                          double total = 0;
                          for (size_t i = 0; i < a.size(); ++i) total += a[i] = (a[i] - b[i]) * (a[i] - b[i]);
                          if (reduction == kNone) return scatter(view(s, 2), a);
                          scatter(view(s, 2), {reduction == kMean ? total / (double)a.size() : total});
                        }};
  });
}

// out = 2 (self - target) gradOutput, divided by the element count for reduction=mean.
aclnnStatus aclnnMseLossBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *self,
                                                 const aclTensor *target, int64_t reduction, aclTensor *out,
                                                 uint64_t *workspaceSize, aclOpExecutor **executor) {
  return phase1("MseLossBackward", workspaceSize, executor, [&] {
    const TensorView &g = tensor(gradOutput, "gradOutput", kFloats);
    const TensorView &x = tensor(self, "self", kFloats), &y = tensor(target, "target", kFloats);
    Shape pair = broadcast_shape(x.shape, y.shape), shape = broadcast_shape(pair, g.shape);
    check_reduction(reduction);
    tensor(out, "out", kFloats, shape);
    double scale = reduction == kMean ? 2.0 / (double)std::max<int64_t>(numel(pair), 1) : 2.0;
    return ExecutorSpec{"",
                        {nn::slot(gradOutput, Io::Input), nn::slot(self, Io::Input), nn::slot(target, Io::Input),
                         nn::slot(out, Io::Output)},
                        0,
                        [shape, scale](const Slots &s) {
                          Values gv = gather(expand(view(s, 0), shape)), a = gather(expand(view(s, 1), shape)),
                                 b = gather(expand(view(s, 2), shape));
                          for (size_t i = 0; i < a.size(); ++i) a[i] = scale * (a[i] - b[i]) * gv[i];
                          scatter(view(s, 3), a);
                        }};
  });
}

}  // extern "C"
