// Elementwise references: arithmetic with broadcasting and alpha, activations and their backward, in-place fills.
#include <cmath>
#include <numbers>

#include "tools/replay/refs.h"

namespace msprobe::tools::replay {
namespace {

// A tensor argument, or a scalar argument as a 0-d tensor (ops take "other" both ways).
Tensor operand(const Call &c, size_t i) {
  if (i < c.args.size() && c.args[i].kind == Arg::Kind::Tensor) return *c.args[i].tensor;
  return Tensor({}, {c.number(i)});
}

Outputs add(const Call &c) {  // self + alpha * other
  c.expect_at_least(2);
  const double alpha = c.number_or(2, 1.0);
  return {binary(c.tensor(0), operand(c, 1), [alpha](double x, double y) { return x + alpha * y; })};
}
Outputs sub(const Call &c) {  // self - alpha * other
  c.expect_at_least(2);
  const double alpha = c.number_or(2, 1.0);
  return {binary(c.tensor(0), operand(c, 1), [alpha](double x, double y) { return x - alpha * y; })};
}
Outputs mul(const Call &c) {
  c.expect_at_least(2);
  return {binary(c.tensor(0), operand(c, 1), [](double x, double y) { return x * y; })};
}
Outputs div(const Call &c) {
  c.expect_at_least(2);
  return {binary(c.tensor(0), operand(c, 1), [](double x, double y) { return x / y; })};
}
Outputs inplace_add(const Call &c) {  // selfRef += alpha * other, other broadcast to selfRef
  c.expect_at_least(2);
  const Tensor &self = c.tensor(0);
  const double alpha = c.number_or(2, 1.0);
  const std::vector<double> y = broadcast_to(operand(c, 1), self.shape);
  Tensor out(self.shape, self.v);
  for (size_t k = 0; k < out.v.size(); ++k) out.v[k] += alpha * y[k];
  return {std::move(out)};
}

double phi_cdf(double x) { return 0.5 * (1.0 + std::erf(x / std::numbers::sqrt2)); }
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

template <double (*F)(double)>
Outputs unary_op(const Call &c) {
  return {unary(c.tensor(0), F)};
}
double relu(double x) { return x > 0 || std::isnan(x) ? x : 0.0; }
double gelu(double x) { return x * phi_cdf(x); }  // the exact (erf) form: torch's approximate='none'
double silu(double x) { return x * sigmoid(x); }
double exp_(double x) { return std::exp(x); }
double log_(double x) { return std::log(x); }
double sqrt_(double x) { return std::sqrt(x); }
double neg(double x) { return -x; }
double identity(double x) { return x; }

Outputs gelu_backward(const Call &c) {  // grad * d/dx [x Phi(x)] = grad * (Phi(x) + x phi(x))
  c.expect_at_least(2);
  return {binary(c.tensor(0), c.tensor(1), [](double g, double x) {
    return g * (phi_cdf(x) + x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * std::numbers::pi));
  })};
}
Outputs silu_backward(const Call &c) {
  c.expect_at_least(2);
  return {binary(c.tensor(0), c.tensor(1), [](double g, double x) {
    const double s = sigmoid(x);
    return g * s * (1.0 + x * (1.0 - s));
  })};
}
Outputs threshold_backward(const Call &c) {  // grad where self > threshold, else 0
  c.expect_at_least(3);
  const double th = c.number(2);
  return {binary(c.tensor(0), c.tensor(1), [th](double g, double x) { return x > th ? g : 0.0; })};
}
Outputs inplace_zero(const Call &c) { return {Tensor::zeros(c.tensor(0).shape)}; }
Outputs inplace_copy(const Call &c) {  // selfRef = src broadcast to selfRef's shape
  c.expect_at_least(2);
  const Tensor &self = c.tensor(0);
  return {Tensor(self.shape, broadcast_to(c.tensor(1), self.shape))};
}
Outputs cast(const Call &c) { return {unary(c.tensor(0), identity)}; }  // rounded to the output dtype (table)

Outputs foreach_mul_scalar_list(const Call &c) {  // out_i = x_i * scalars_i, one scalar per tensor of the list
  c.expect_at_least(2);
  const std::vector<const Tensor *> x = c.tensor_list(0);
  const std::vector<double> scalars = c.number_list(1);
  if (scalars.size() != x.size())
    throw RefError("ForeachMulScalarList: " + std::to_string(x.size()) + " tensors but " +
                   std::to_string(scalars.size()) + " scalars");
  Outputs out;
  for (size_t i = 0; i < x.size(); ++i) out.push_back(unary(*x[i], [k = scalars[i]](double v) { return v * k; }));
  return out;
}

const RefEntry kRefs[] = {
    {"Add", add},
    {"Adds", add},
    {"Sub", sub},
    {"Mul", mul},
    {"Muls", mul},
    {"ForeachMulScalarList", foreach_mul_scalar_list},
    {"Div", div},
    {"InplaceAdd", inplace_add},
    {"Relu", unary_op<relu>},
    {"Gelu", unary_op<gelu>},
    {"Silu", unary_op<silu>},
    {"Exp", unary_op<exp_>},
    {"Log", unary_op<log_>},
    {"Sqrt", unary_op<sqrt_>},
    {"Neg", unary_op<neg>},
    {"GeluBackward", gelu_backward},
    {"SiluBackward", silu_backward},
    {"ThresholdBackward", threshold_backward},
    {"InplaceZero", inplace_zero},
    {"InplaceCopy", inplace_copy},
    {"Cast", cast, true},
};

}  // namespace

std::span<const RefEntry> elementwise_refs() { return kRefs; }

}  // namespace msprobe::tools::replay
