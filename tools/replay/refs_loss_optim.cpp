// Losses and the optimizer step: MseLoss(+Backward), ApplyAdamWV2.
#include <algorithm>
#include <cmath>

#include "tools/replay/refs.h"

namespace msprobe::tools::replay {
namespace {

enum Reduction : int64_t { kNone = 0, kMean = 1, kSum = 2 };

Outputs mse_loss(const Call &c) {  // (self, target, reduction)
  c.expect_at_least(3);
  Tensor sq = binary(c.tensor(0), c.tensor(1), [](double x, double t) { return (x - t) * (x - t); });
  const int64_t reduction = c.integer(2);
  if (reduction == kNone) return {std::move(sq)};
  if (reduction != kMean && reduction != kSum)
    throw RefError("MseLoss: unknown reduction " + std::to_string(reduction));
  double s = 0;
  for (double v : sq.v) s += v;
  if (reduction == kMean) s /= static_cast<double>(sq.size());
  return {Tensor({}, {s})};
}

Outputs mse_loss_backward(const Call &c) {  // (gradOutput, self, target, reduction): scale * (x - t) * g
  c.expect_at_least(4);
  Tensor diff = binary(c.tensor(1), c.tensor(2), [](double x, double t) { return x - t; });
  const double scale = c.integer(3) == kMean ? 2.0 / static_cast<double>(diff.size()) : 2.0;
  return {binary(diff, c.tensor(0), [scale](double d, double g) { return scale * d * g; })};
}

// (varRef, mRef, vRef, maxGradNormOptionalRef, grad, step, lr, beta1, beta2, weightDecay, eps, amsgrad, maximize):
// one torch.optim.AdamW step; `step` is the step count already incremented. Outputs: var, m, v and, with amsgrad,
// max(maxGradNorm, v) (without it the kernel leaves maxGradNorm as it was).
Outputs apply_adamw_v2(const Call &c) {
  c.expect_at_least(13);
  Tensor var = c.tensor(0), m = c.tensor(1), v = c.tensor(2);
  const Tensor *max_norm = c.optional_tensor(3);
  const Tensor &grad = c.tensor(4);
  const double t = c.number(5), lr = c.number(6), beta1 = c.number(7), beta2 = c.number(8), wd = c.number(9),
               eps = c.number(10);
  const bool amsgrad = c.boolean(11), maximize = c.boolean(12);
  for (const Tensor *p : {static_cast<const Tensor *>(&m), static_cast<const Tensor *>(&v), &grad})
    if (p->size() != var.size()) throw RefError("ApplyAdamWV2: var, m, v and grad differ in size");
  if (amsgrad && (!max_norm || max_norm->size() != var.size()))
    throw RefError("ApplyAdamWV2: amsgrad without a maxGradNorm of var's size");
  std::optional<Tensor> kept;
  if (max_norm) kept = *max_norm;
  const double bias1 = 1.0 - std::pow(beta1, t), bias2 = 1.0 - std::pow(beta2, t);
  for (size_t k = 0; k < var.size(); ++k) {
    const double g = maximize ? -grad.v[k] : grad.v[k];
    var.v[k] *= 1.0 - lr * wd;
    m.v[k] = beta1 * m.v[k] + (1.0 - beta1) * g;
    v.v[k] = beta2 * v.v[k] + (1.0 - beta2) * g * g;
    double second = v.v[k];
    if (amsgrad) kept->v[k] = second = std::max(max_norm->v[k], second);
    var.v[k] -= (lr / bias1) * m.v[k] / (std::sqrt(second) / std::sqrt(bias2) + eps);
  }
  return {std::move(var), std::move(m), std::move(v), std::move(kept)};
}

const RefEntry kRefs[] = {
    {"MseLoss", mse_loss},
    {"MseLossBackward", mse_loss_backward},
    {"ApplyAdamWV2", apply_adamw_v2},
};

}  // namespace

std::span<const RefEntry> loss_optim_refs() { return kRefs; }

}  // namespace msprobe::tools::replay
