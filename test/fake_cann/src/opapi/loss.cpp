// NLLLoss and NLLLossBackward (ops-nn loss/nll_loss*): with LogSoftmax and LogSoftmaxBackward they are the cross
// entropy torch_npu launches for F.cross_entropy (log_softmax, then nll_loss; the backward in reverse). self is
// (N, C) or (C); target (N) or () holds class indices, ignoreIndex contributes nothing; weight (C) is required
// (torch_npu passes ones when the model gives none). reduction 0 none, 1 mean (divided by the summed weights of the
// targets, totalWeight), 2 sum.
#include "fakecann/stream.h"
#include "op_common.h"

using namespace fakecann;
using namespace fakecann::ops;

namespace {

constexpr DtypeSet kTargets = dtypes({ACL_INT64, ACL_UINT8, ACL_INT32});
enum Reduction : int64_t { kNone = 0, kMean = 1, kSum = 2 };

// CanCast of opbase's data_type_utils.h for the floating results here: a float never becomes an integer or a bool.
void require_float_result(const TensorView &t, const char *name) {
  if (!dtype_is_float(t.dtype))
    fail(std::string(name) + ": a floating result cannot be cast to dtype " + std::to_string(t.dtype));
}

struct Batch {
  int64_t n = 1, classes = 0;
  bool batched = false;  // self (N, C) and target (N), else (C) and ()
};

Batch read_batch(const TensorView &self, const TensorView &target, const TensorView &weight, int64_t reduction) {
  if (reduction < kNone || reduction > kSum)
    fail("reduction " + std::to_string(reduction) + " is not 0 (none), 1 (mean) or 2 (sum)");
  if (self.shape.empty() || self.shape.size() > 2) fail("self must be 1-D or 2-D, has shape " + show(self.shape));
  if (target.shape.size() > 1) fail("target must be 0-D or 1-D (multi-target is not supported)");
  Batch b;
  b.batched = self.shape.size() == 2;
  if (b.batched != (target.shape.size() == 1) || (b.batched && self.shape[0] != target.shape[0]))
    fail("target " + show(target.shape) + " does not match self " + show(self.shape));
  b.n = b.batched ? self.shape[0] : 1;
  b.classes = self.shape.back();
  if (weight.shape != Shape{b.classes})
    fail("weight must have one value per class (" + std::to_string(b.classes) + "), has shape " + show(weight.shape));
  if (b.classes == 0 && b.n > 0) fail("target is out of bounds of zero classes");
  return b;
}

// The per-sample loss shape: (N) with reduction none over a batch, else one element (() or (1)).
void require_loss_shape(const TensorView &t, const Batch &b, int64_t reduction, const char *name) {
  if (reduction == kNone && b.batched) {
    require_shape(t, {b.n}, name);
  } else if (t.shape.size() > 1 || t.numel() != 1) {
    fail(std::string(name) + " must hold a single element, has shape " + show(t.shape));
  }
}

// A target index from the device: one outside [0, C) that is not ignoreIndex is a kernel fault.
int64_t class_of(double v, const Batch &b, int64_t ignore) {
  const auto t = (int64_t)v;
  if (t != ignore && (t < 0 || t >= b.classes))
    throw KernelError("nll_loss target " + std::to_string(t) + " is outside [0, " + std::to_string(b.classes) + ")");
  return t;
}

void nll_kernel(const Slots &s, const Batch &b, int64_t reduction, int64_t ignore) {
  const Values x = gather(view(s, 0)), target = gather(view(s, 1)), w = gather(view(s, 2));
  Values loss((size_t)b.n, 0.0);
  double total = 0, weights = 0;
  for (int64_t i = 0; i < b.n; ++i) {
    const int64_t t = class_of(target[(size_t)i], b, ignore);
    if (t == ignore) continue;
    const double wt = w[(size_t)t];
    loss[(size_t)i] = -wt * x[(size_t)(i * b.classes + t)];
    total += loss[(size_t)i];
    weights += wt;
  }
  if (reduction == kNone) return scatter(view(s, 3), loss);
  scatter(view(s, 3), {reduction == kMean ? total / weights : total});  // mean of no weight: NaN, as torch
  scatter(view(s, 4), {weights});
}

void nll_grad_kernel(const Slots &s, const Batch &b, int64_t reduction, int64_t ignore) {
  const Values g = gather(view(s, 0)), target = gather(view(s, 2)), w = gather(view(s, 3));
  const double total = gather(view(s, 4))[0];
  Values dx((size_t)(b.n * b.classes), 0.0);
  for (int64_t i = 0; i < b.n; ++i) {
    const int64_t t = class_of(target[(size_t)i], b, ignore);
    if (t == ignore) continue;
    const double up = reduction == kNone ? g[(size_t)i] : g[0];
    dx[(size_t)(i * b.classes + t)] = -up * w[(size_t)t] / (reduction == kMean ? total : 1.0);
  }
  scatter(view(s, 5), dx);
}

}  // namespace

extern "C" {

aclnnStatus aclnnNLLLossGetWorkspaceSize(const aclTensor *self, const aclTensor *target, const aclTensor *weight,
                                         int64_t reduction, int64_t ignoreIndex, aclTensor *out,
                                         aclTensor *totalWeightOut, uint64_t *workspaceSize, aclOpExecutor **executor) {
  return phase1("NLLLoss", workspaceSize, executor, [&] {
    const TensorView &x = tensor(self, "self", kFloats), &t = tensor(target, "target", kTargets);
    const TensorView &w = tensor(weight, "weight", kFloats);
    const TensorView &o = tensor(out, "out", kArith), &tw = tensor(totalWeightOut, "totalWeightOut", kArith);
    if (w.dtype != x.dtype) fail("weight's dtype differs from self's");
    require_float_result(o, "out");
    require_float_result(tw, "totalWeightOut");
    const Batch b = read_batch(x, t, w, reduction);
    require_loss_shape(o, b, reduction, "out");
    if (tw.numel() != 1) fail("totalWeightOut must hold one element, has shape " + show(tw.shape));
    return ExecutorSpec{"",
                        {nn::slot(self, Io::Input), nn::slot(target, Io::Input), nn::slot(weight, Io::Input),
                         nn::slot(out, Io::Output), nn::slot(totalWeightOut, Io::Output)},
                        workspace_for(b.n),
                        [b, reduction, ignoreIndex](const Slots &s) { nll_kernel(s, b, reduction, ignoreIndex); }};
  });
}

// out = d(loss)/d(self): -gradOutput * weight[target] at each sample's target (divided by totalWeight for mean).
aclnnStatus aclnnNLLLossBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *self,
                                                 const aclTensor *target, const aclTensor *weight, int64_t reduction,
                                                 int64_t ignoreIndex, const aclTensor *totalWeight, aclTensor *out,
                                                 uint64_t *workspaceSize, aclOpExecutor **executor) {
  return phase1("NLLLossBackward", workspaceSize, executor, [&] {
    const TensorView &g = tensor(gradOutput, "gradOutput", kFloats), &x = tensor(self, "self", kFloats);
    const TensorView &t = tensor(target, "target", kTargets), &w = tensor(weight, "weight", kFloats);
    const TensorView &tw = tensor(totalWeight, "totalWeight", kFloats), &o = tensor(out, "out", kArith);
    if (w.dtype != x.dtype || g.dtype != x.dtype || tw.dtype != x.dtype)
      fail("gradOutput, weight and totalWeight must have self's dtype");
    require_float_result(o, "out");
    const Batch b = read_batch(x, t, w, reduction);
    if (tw.numel() != 1) fail("totalWeight must hold one element, has shape " + show(tw.shape));
    require_loss_shape(g, b, reduction, "gradOutput");
    require_shape(o, x.shape, "out");
    return ExecutorSpec{"",
                        {nn::slot(gradOutput, Io::Input), nn::slot(self, Io::Input), nn::slot(target, Io::Input),
                         nn::slot(weight, Io::Input), nn::slot(totalWeight, Io::Input), nn::slot(out, Io::Output)},
                        0,
                        [b, reduction, ignoreIndex](const Slots &s) { nll_grad_kernel(s, b, reduction, ignoreIndex); }};
  });
}

}  // extern "C"
