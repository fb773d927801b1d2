// Losses and the optimizer step: MseLoss(+Backward), NLLLoss(+Backward), ApplyAdamWV2.
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

// ---- NLLLoss (ops-nn loss/nll_loss*/docs) --------------------------------------------------------------------------
// self [N, C] (or [C], one sample), its target class per sample, and the weight each sample takes: weight[target],
// 0 where the target is ignoreIndex.
struct Samples {
  size_t n = 1, classes = 0;
  std::vector<size_t> target;
  std::vector<double> w;
};

Samples samples(const Call &c, size_t self_at) {
  const Tensor &x = c.tensor(self_at), &target = c.tensor(self_at + 1), &weight = c.tensor(self_at + 2);
  const int64_t ignore = c.integer(self_at + 4);
  if (x.rank() != 1 && x.rank() != 2) throw RefError(std::string(c.op) + ": self is not [N, C] or [C]");
  Samples s;
  s.classes = static_cast<size_t>(x.shape.back());
  s.n = x.rank() == 2 ? static_cast<size_t>(x.shape[0]) : 1;
  if (target.size() != s.n || weight.size() != s.classes)
    throw RefError(std::string(c.op) + ": target is not one per sample or weight not one per class");
  for (double t : target.v) {
    const bool ignored = t == static_cast<double>(ignore);
    if (!ignored && !(t >= 0 && t < static_cast<double>(s.classes)))
      throw RefError(std::string(c.op) + ": target " + std::to_string(t) + " is not a class");
    s.target.push_back(ignored ? 0 : static_cast<size_t>(t));
    s.w.push_back(ignored ? 0.0 : weight.v[static_cast<size_t>(t)]);
  }
  return s;
}

// The shape output `slot` was dumped with when it holds n elements; [n] otherwise.
Shape dumped_shape(const Call &c, size_t slot, size_t n) {
  if (slot < c.outputs.size() && c.outputs[slot].present && static_cast<size_t>(numel(c.outputs[slot].shape)) == n)
    return c.outputs[slot].shape;
  return {static_cast<int64_t>(n)};
}

// (self, target, weight, reduction, ignoreIndex) -> out, totalWeight: l_n = -w_n * self[n, target_n]; none: l,
// mean: sum(l) / sum(w), sum: sum(l); totalWeight = sum(w), defined only when reduced (not judged for none).
Outputs nll_loss(const Call &c) {
  c.expect_at_least(5);
  const Tensor &x = c.tensor(0);
  const Samples s = samples(c, 0);
  const int64_t reduction = c.integer(3);
  if (reduction != kNone && reduction != kMean && reduction != kSum)
    throw RefError("NLLLoss: unknown reduction " + std::to_string(reduction));
  std::vector<double> loss(s.n);
  double sum = 0, total = 0;
  for (size_t i = 0; i < s.n; ++i) {
    loss[i] = -s.w[i] * x.v[i * s.classes + s.target[i]];
    sum += loss[i], total += s.w[i];
  }
  if (reduction == kNone) return {Tensor(dumped_shape(c, 0, s.n), std::move(loss)), std::nullopt};
  return {Tensor(dumped_shape(c, 0, 1), {reduction == kMean ? sum / total : sum}),
          Tensor(dumped_shape(c, 1, 1), {total})};
}

// (gradOutput, self, target, weight, reduction, ignoreIndex, totalWeight) -> dself: -g * w_n at [n, target_n]
// (mean: divided by the given totalWeight; none: g per sample), 0 elsewhere.
Outputs nll_loss_backward(const Call &c) {
  c.expect_at_least(7);
  const Tensor &g = c.tensor(0), &x = c.tensor(1), &total = c.tensor(6);
  const Samples s = samples(c, 1);
  const int64_t reduction = c.integer(4);
  if (reduction == kNone ? g.size() != s.n : g.size() != 1 || total.size() != 1)
    throw RefError("NLLLossBackward: gradOutput or totalWeight does not fit the reduction");
  Tensor out = Tensor::zeros(x.shape);
  for (size_t i = 0; i < s.n; ++i) {
    const double gi = reduction == kNone ? g.v[i] : g.v[0];
    out.v[i * s.classes + s.target[i]] = -gi * s.w[i] / (reduction == kMean ? total.v[0] : 1.0);
  }
  return {std::move(out)};
}

const RefEntry kRefs[] = {
    {"MseLoss", mse_loss},
    {"MseLossBackward", mse_loss_backward},
    {"NLLLoss", nll_loss},
    {"NLLLossBackward", nll_loss_backward},
    {"ApplyAdamWV2", apply_adamw_v2},
};

}  // namespace

std::span<const RefEntry> loss_optim_refs() { return kRefs; }

}  // namespace msprobe::tools::replay
