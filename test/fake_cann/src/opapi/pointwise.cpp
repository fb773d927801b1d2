// The pointwise ops CANN's examples use (ops-math math/*, ops-nn activation/sigmoid): Abs, Rsqrt, Sigmoid, Tanh,
// Clamp, PowTensorScalar, PowTensorTensor, SWhere and the in-place InplaceSub, InplaceDiv, InplaceExp,
// InplaceSqrt. Mixed operands follow CANN's promotion tables (promotion.h): inputs are cast to the promoted dtype,
// the result is computed in double and cast once to the output, which must be a dtype the result can be cast to.
#include <cmath>
#include <functional>
#include <utility>

#include "op_common.h"
#include "promotion.h"

using namespace fakecann;
using namespace fakecann::ops;

namespace {

using Unary = std::function<double(double)>;
using Binary = std::function<double(double, double)>;

constexpr DtypeSet kHalfFloats = kFloats;  // FLOAT, FLOAT16, BFLOAT16
constexpr DtypeSet kReal = kFloatsD | kSignedInts | dtypes({ACL_UINT8, ACL_BOOL});
constexpr DtypeSet kRealNoBool = kReal & ~dtypes({ACL_BOOL});

void require_cast(aclDataType from, const TensorView &to, const char *name) {
  if (from == ACL_DT_UNDEFINED) fail("the operands' dtypes do not promote to a common dtype");
  if (!can_cast(from, to.dtype))
    fail(std::string(name) + ": the result (dtype " + std::to_string(from) + ") cannot be cast to dtype " +
         std::to_string(to.dtype));
}

// Inputs as the kernel reads them after their cast to the computation dtype.
Values gather_as(const TensorView &v, aclDataType compute) {
  Values x = gather(v);
  if (v.dtype != compute)
    for (double &e : x) e = cast_value(e, compute);
  return x;
}

// out = fn(self), one shape; `compute` the dtype the kernel works in.
ExecutorSpec map_spec(const aclTensor *self, const aclTensor *out, aclDataType compute, Unary fn) {
  require_shape(out->view, self->view.shape, "out");
  return {"", {nn::slot(self, Io::Input), nn::slot(out, Io::Output)}, 0, [compute, fn](const Slots &s) {
            Values x = gather_as(view(s, 0), compute);
            for (double &e : x) e = fn(e);
            scatter(view(s, 1), x);
          }};
}

// A unary op whose out may be any dtype of `outs` the (float) result casts to.
aclnnStatus unary(const char *op, const aclTensor *self, DtypeSet ins, const aclTensor *out, DtypeSet outs, Unary fn,
                  uint64_t *ws, aclOpExecutor **ex) {
  return phase1(op, ws, ex, [&] {
    const TensorView &x = tensor(self, "self", ins);
    tensor(out, "out", outs);
    return map_spec(self, out, dtype_is_float(x.dtype) ? x.dtype : ACL_FLOAT, fn);
  });
}

// selfRef = fn(selfRef) for a floating selfRef.
aclnnStatus inplace_unary(const char *op, aclTensor *selfRef, DtypeSet types, Unary fn, uint64_t *ws,
                          aclOpExecutor **ex) {
  return phase1(op, ws, ex, [&] {
    const aclDataType dt = tensor(selfRef, "selfRef", types).dtype;
    return ExecutorSpec{"", {nn::slot(selfRef, Io::InOut)}, 0, [dt, fn](const Slots &s) {
                          Values x = gather_as(view(s, 0), dt);
                          for (double &e : x) e = fn(e);
                          scatter(view(s, 0), x);
                        }};
  });
}

// The binary ops: a (op) b over their broadcast shape in promote(a, b). In place, a is also the output and must
// have the broadcast shape; else `out` must.
struct BinaryArgs {
  const aclTensor *a, *b, *out;  // out == nullptr: in place into a
  const char *names[3];
  DtypeSet types;
};

ExecutorSpec binary_spec(const BinaryArgs &args, Binary fn, const std::function<void(aclDataType)> &extra = {}) {
  const TensorView &a = tensor(args.a, args.names[0], args.types), &b = tensor(args.b, args.names[1], args.types);
  const bool inplace = args.out == nullptr;
  const TensorView &o = inplace ? a : tensor(args.out, args.names[2], kReal);
  const Shape shape = broadcast_shape(a.shape, b.shape);
  if (inplace && shape != a.shape) fail("other " + show(b.shape) + " does not broadcast to selfRef " + show(a.shape));
  if (!inplace) require_shape(o, shape, args.names[2]);
  const aclDataType compute = promote(a.dtype, b.dtype);
  require_cast(compute, o, inplace ? args.names[0] : args.names[2]);
  if (extra) extra(compute);
  Slots slots{nn::slot(args.a, inplace ? Io::InOut : Io::Input), nn::slot(args.b, Io::Input)};
  if (!inplace) slots.push_back(nn::slot(args.out, Io::Output));
  const size_t result = inplace ? 0 : 2;  // the slot written: selfRef, or out
  return {"", std::move(slots), 0, [shape, compute, fn, result](const Slots &s) {
            Values x = gather_as(expand(view(s, 0), shape), compute), y = gather_as(expand(view(s, 1), shape), compute);
            for (size_t i = 0; i < x.size(); ++i) x[i] = fn(x[i], y[i]);
            scatter(view(s, result), x);
          }};
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

bool is_integral(aclDataType t) { return !dtype_is_float(t); }

// clamp's bounds in the computation dtype; both absent is CANN's NULLPTR.
struct Bounds {
  bool has_min = false, has_max = false;
  double lo = 0, hi = 0;
};

Bounds read_bounds(const aclScalar *min, const aclScalar *max, aclDataType self, aclDataType *compute) {
  if (min == nullptr && max == nullptr)
    throw ParamError{ACLNN_ERR_PARAM_NULLPTR, "clipValueMin and clipValueMax are both NULL"};
  Bounds b;
  aclDataType lo_t = self, hi_t = self;
  if (min != nullptr) b.lo = scalar(min, "clipValueMin"), b.has_min = true, lo_t = promote_scalar(self, min->dtype);
  if (max != nullptr) b.hi = scalar(max, "clipValueMax"), b.has_max = true, hi_t = promote_scalar(self, max->dtype);
  *compute = promote(lo_t, hi_t);
  if (*compute == ACL_DT_UNDEFINED) fail("self and the bounds do not promote to a common dtype");
  b.lo = cast_value(b.lo, *compute);
  b.hi = cast_value(b.hi, *compute);
  return b;
}

// self ** exponent in promote_scalar(self, exponent); out == nullptr: in place into self.
ExecutorSpec pow_scalar_spec(const aclTensor *self, const aclScalar *exponent, const aclTensor *out) {
  const TensorView &x = tensor(self, "self", kReal);
  const TensorView &o = out == nullptr ? x : tensor(out, "out", kReal);
  const double e = scalar(exponent, "exponent");
  if (x.dtype == ACL_BOOL && exponent->dtype == ACL_BOOL) fail("self and exponent cannot both be BOOL");
  const aclDataType compute = promote_scalar(x.dtype, exponent->dtype);
  require_cast(compute, o, out == nullptr ? "self" : "out");
  if (is_integral(compute) && e < 0) fail("an integral power needs exponent >= 0, got " + std::to_string(e));
  const double p = cast_value(e, compute);
  if (out != nullptr) return map_spec(self, out, compute, [p](double v) { return std::pow(v, p); });
  return {"", {nn::slot(self, Io::InOut)}, 0, [compute, p](const Slots &s) {
            Values x = gather_as(view(s, 0), compute);
            for (double &v : x) v = std::pow(v, p);
            scatter(view(s, 0), x);
          }};
}

}  // namespace

extern "C" {

// |self|, out of self's dtype.
aclnnStatus aclnnAbsGetWorkspaceSize(const aclTensor *self, aclTensor *out, uint64_t *workspaceSize,
                                     aclOpExecutor **executor) {
  return phase1("Abs", workspaceSize, executor, [&] {
    const TensorView &x = tensor(self, "self", kReal);
    if (tensor(out, "out", kReal).dtype != x.dtype) fail("out's dtype differs from self's");
    return map_spec(self, out, x.dtype, [](double v) { return std::fabs(v); });
  });
}

aclnnStatus aclnnRsqrtGetWorkspaceSize(const aclTensor *self, aclTensor *out, uint64_t *workspaceSize,
                                       aclOpExecutor **executor) {
  return unary(
      "Rsqrt", self, kReal, out, kFloatsD, [](double v) { return 1.0 / std::sqrt(v); }, workspaceSize, executor);
}

aclnnStatus aclnnSigmoidGetWorkspaceSize(const aclTensor *self, aclTensor *out, uint64_t *workspaceSize,
                                         aclOpExecutor **executor) {
  return unary("Sigmoid", self, kHalfFloats, out, kHalfFloats, sigmoid, workspaceSize, executor);
}

aclnnStatus aclnnTanhGetWorkspaceSize(const aclTensor *self, aclTensor *out, uint64_t *workspaceSize,
                                      aclOpExecutor **executor) {
  return unary(
      "Tanh", self, kHalfFloats | kSignedInts | dtypes({ACL_UINT8, ACL_BOOL}), out, kHalfFloats,
      [](double v) { return std::tanh(v); }, workspaceSize, executor);
}

aclnnStatus aclnnInplaceTanhGetWorkspaceSize(aclTensor *selfRef, uint64_t *workspaceSize, aclOpExecutor **executor) {
  return inplace_unary(
      "InplaceTanh", selfRef, kHalfFloats, [](double v) { return std::tanh(v); }, workspaceSize, executor);
}

aclnnStatus aclnnInplaceExpGetWorkspaceSize(aclTensor *selfRef, uint64_t *workspaceSize, aclOpExecutor **executor) {
  return inplace_unary(
      "InplaceExp", selfRef, kFloatsD, [](double v) { return std::exp(v); }, workspaceSize, executor);
}

aclnnStatus aclnnInplaceSqrtGetWorkspaceSize(aclTensor *self, uint64_t *workspaceSize, aclOpExecutor **executor) {
  return inplace_unary(
      "InplaceSqrt", self, kFloatsD, [](double v) { return std::sqrt(v); }, workspaceSize, executor);
}

// max(min(x, max), min) as the docs write it (min wins when min > max); a missing bound does not apply.
aclnnStatus aclnnClampGetWorkspaceSize(const aclTensor *self, const aclScalar *clipValueMin,
                                       const aclScalar *clipValueMax, aclTensor *out, uint64_t *workspaceSize,
                                       aclOpExecutor **executor) {
  return phase1("Clamp", workspaceSize, executor, [&] {
    const TensorView &x = tensor(self, "self", kRealNoBool), &o = tensor(out, "out", kRealNoBool);
    aclDataType compute = ACL_DT_UNDEFINED;
    const Bounds b = read_bounds(clipValueMin, clipValueMax, x.dtype, &compute);
    require_cast(compute, o, "out");
    return map_spec(self, out, compute, [b](double v) {
      if (std::isnan(v)) return v;
      if (b.has_max) v = std::min(v, b.hi);
      return b.has_min ? std::max(v, b.lo) : v;
    });
  });
}

aclnnStatus aclnnPowTensorScalarGetWorkspaceSize(const aclTensor *self, const aclScalar *exponent, const aclTensor *out,
                                                 uint64_t *workspaceSize, aclOpExecutor **executor) {
  return phase1("PowTensorScalar", workspaceSize, executor, [&] { return pow_scalar_spec(self, exponent, out); });
}

// self = self ** exponent, the result cast back to self's dtype.
aclnnStatus aclnnInplacePowTensorScalarGetWorkspaceSize(const aclTensor *self, const aclScalar *exponent,
                                                        uint64_t *workspaceSize, aclOpExecutor **executor) {
  return phase1("InplacePowTensorScalar", workspaceSize, executor,
                [&] { return pow_scalar_spec(self, exponent, nullptr); });
}

aclnnStatus aclnnPowTensorTensorGetWorkspaceSize(const aclTensor *self, const aclTensor *exponent, aclTensor *out,
                                                 uint64_t *workspaceSize, aclOpExecutor **executor) {
  return phase1("PowTensorTensor", workspaceSize, executor, [&] {
    if (tensor(self, "self", kReal).dtype == ACL_BOOL && tensor(exponent, "exponent", kReal).dtype == ACL_BOOL)
      fail("self and exponent cannot both be BOOL");
    return binary_spec({self, exponent, out, {"self", "exponent", "out"}, kReal},
                       [](double x, double y) { return std::pow(x, y); });
  });
}

// selfRef -= alpha * other; alpha must cast to the promoted dtype (no floating alpha for integers).
aclnnStatus aclnnInplaceSubGetWorkspaceSize(aclTensor *selfRef, const aclTensor *other, const aclScalar *alpha,
                                            uint64_t *workspaceSize, aclOpExecutor **executor) {
  return phase1("InplaceSub", workspaceSize, executor, [&] {
    const double a = scalar(alpha, "alpha");
    auto check_alpha = [alpha](aclDataType compute) {
      if (!can_cast(alpha->dtype, compute)) fail("alpha's dtype cannot be cast to the operands' promoted dtype");
    };
    return binary_spec(
        {selfRef, other, nullptr, {"selfRef", "other", ""}, kReal}, [a](double x, double y) { return x - a * y; },
        check_alpha);
  });
}

// selfRef /= other: true division, cast back to selfRef's dtype (an integer selfRef truncates).
aclnnStatus aclnnInplaceDivGetWorkspaceSize(aclTensor *selfRef, const aclTensor *other, uint64_t *workspaceSize,
                                            aclOpExecutor **executor) {
  return phase1("InplaceDiv", workspaceSize, executor, [&] {
    return binary_spec({selfRef, other, nullptr, {"selfRef", "other", ""}, kReal},
                       [](double x, double y) { return x / y; });
  });
}

// out = condition ? self : other over the broadcast of all three, in promote(self, other).
aclnnStatus aclnnSWhereGetWorkspaceSize(const aclTensor *condition, const aclTensor *self, const aclTensor *other,
                                        aclTensor *out, uint64_t *workspaceSize, aclOpExecutor **executor) {
  return phase1("SWhere", workspaceSize, executor, [&] {
    const TensorView &c = tensor(condition, "condition", dtypes({ACL_UINT8, ACL_BOOL}));
    const TensorView &a = tensor(self, "self", kReal), &b = tensor(other, "other", kReal);
    const TensorView &o = tensor(out, "out", kReal);
    const Shape shape = broadcast_shape(c.shape, broadcast_shape(a.shape, b.shape));
    require_shape(o, shape, "out");
    const aclDataType compute = promote(a.dtype, b.dtype);
    require_cast(compute, o, "out");
    return ExecutorSpec{"",
                        {nn::slot(condition, Io::Input), nn::slot(self, Io::Input), nn::slot(other, Io::Input),
                         nn::slot(out, Io::Output)},
                        0,
                        [shape, compute](const Slots &s) {
                          const Values c = gather(expand(view(s, 0), shape));
                          Values x = gather_as(expand(view(s, 1), shape), compute);
                          const Values y = gather_as(expand(view(s, 2), shape), compute);
                          for (size_t i = 0; i < x.size(); ++i)
                            if (c[i] == 0) x[i] = y[i];
                          scatter(view(s, 3), x);
                        }};
  });
}

}  // extern "C"
