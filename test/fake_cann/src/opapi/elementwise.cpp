// Elementwise ops: binary arithmetic with numpy broadcasting, tensor-scalar forms, the unary math and
// activation functions, and the activation backward ops (binary functions of gradOutput and self).
#include <cmath>
#include <numbers>

#include "op_common.h"

using namespace fakecann;
using namespace fakecann::ops;

namespace {

using Binary = std::function<double(double, double)>;
using Unary = std::function<double(double)>;

struct BinaryArgs {
  const char *names[3];  // parameter names, for error texts
  const aclTensor *a, *b, *out;
  DtypeSet in_types, out_types;
  // Where the op's dtype list applies: to each input and their promoted type (Add, Mul ...), or only to the
  // promoted type (GeluBackward: level2_base.h CheckPromoteTypeGeluBackward).
  bool promoted_only = false;
  // The type the op computes in, from the promoted one (Div: integers are divided as FLOAT).
  aclDataType (*compute_type)(aclDataType promoted) = nullptr;
};

// out = fn(a, b) over the broadcast shape of a and b; `out` must have exactly that shape. As CANN's binary ops do
// (aclnnAdd docs: deduction_relationship.md, conversion_relationship.md), the inputs are promoted to a common type,
// the op computes in it, and the result is cast to out's type, which must be castable from it.
ExecutorSpec binary_spec(const BinaryArgs &args, Binary fn) {
  constexpr DtypeSet kAny = kArith | dtypes({ACL_UINT16, ACL_UINT32, ACL_UINT64});
  const DtypeSet each = args.promoted_only ? kAny : args.in_types;
  const TensorView &a = tensor(args.a, args.names[0], each);
  const TensorView &b = tensor(args.b, args.names[1], each);
  const TensorView &out = tensor(args.out, args.names[2], args.out_types);
  const aclDataType promoted = promote_types(a.dtype, b.dtype);
  if (promoted == ACL_DT_UNDEFINED)
    fail(std::string(args.names[0]) + " and " + args.names[1] + ": their dtypes cannot be promoted");
  if (!(args.in_types >> promoted & 1))
    fail(std::string("the promoted dtype ") + std::to_string(promoted) + " is not supported");
  const aclDataType compute = args.compute_type ? args.compute_type(promoted) : promoted;
  if (!can_cast(compute, out.dtype))
    fail(std::string("the promoted dtype cannot be cast to ") + args.names[2] + "'s");
  Shape shape = broadcast_shape(a.shape, b.shape);
  require_shape(out, shape, args.names[2]);
  return {"",
          {nn::slot(args.a, Io::Input), nn::slot(args.b, Io::Input), nn::slot(args.out, Io::Output)},
          0,
          [shape, fn, compute](const Slots &s) {
            Values x = gather(expand(view(s, 0), shape)), y = gather(expand(view(s, 1), shape));
            for (size_t i = 0; i < x.size(); ++i)
              x[i] = round_to(compute, fn(round_to(compute, x[i]), round_to(compute, y[i])));
            scatter(view(s, 2), x);
          }};
}

aclnnStatus binary(const char *op, const BinaryArgs &args, Binary fn, uint64_t *ws, aclOpExecutor **ex) {
  return phase1(op, ws, ex, [&] { return binary_spec(args, fn); });
}

// out = fn(self), same shape.
ExecutorSpec unary_spec(const aclTensor *self, const aclTensor *out, DtypeSet types, Unary fn) {
  tensor(out, "out", types, tensor(self, "self", types).shape);
  return {"", {nn::slot(self, Io::Input), nn::slot(out, Io::Output)}, 0, [fn](const Slots &s) {
            Values x = gather(view(s, 0));
            for (double &e : x) e = fn(e);
            scatter(view(s, 1), x);
          }};
}

aclnnStatus unary(const char *op, const aclTensor *self, const aclTensor *out, DtypeSet types, Unary fn, uint64_t *ws,
                  aclOpExecutor **ex) {
  return phase1(op, ws, ex, [&] { return unary_spec(self, out, types, fn); });
}

constexpr DtypeSet kNoBool = kArith & ~dtypes({ACL_BOOL});

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double gelu(double x) { return 0.5 * x * (1.0 + std::erf(x / std::numbers::sqrt2)); }  // exact (erf) form
double gelu_grad(double x) {
  return 0.5 * (1.0 + std::erf(x / std::numbers::sqrt2)) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * std::numbers::pi);
}

}  // namespace

extern "C" {

aclnnStatus aclnnAddGetWorkspaceSize(const aclTensor *self, const aclTensor *other, const aclScalar *alpha,
                                     aclTensor *out, uint64_t *workspaceSize, aclOpExecutor **executor) {
  return phase1("Add", workspaceSize, executor, [&] {
    double a = scalar(alpha, "alpha");
    return binary_spec({{"self", "other", "out"}, self, other, out, kArith, kArith},
                       [a](double x, double y) { return x + a * y; });
  });
}

aclnnStatus aclnnSubGetWorkspaceSize(const aclTensor *self, const aclTensor *other, const aclScalar *alpha,
                                     aclTensor *out, uint64_t *workspaceSize, aclOpExecutor **executor) {
  return phase1("Sub", workspaceSize, executor, [&] {
    double a = scalar(alpha, "alpha");
    return binary_spec({{"self", "other", "out"}, self, other, out, kNoBool, kNoBool},
                       [a](double x, double y) { return x - a * y; });
  });
}

aclnnStatus aclnnMulGetWorkspaceSize(const aclTensor *self, const aclTensor *other, aclTensor *out,
                                     uint64_t *workspaceSize, aclOpExecutor **executor) {
  return binary(
      "Mul", {{"self", "other", "out"}, self, other, out, kArith, kArith}, [](double x, double y) { return x * y; },
      workspaceSize, executor);
}

// True division: integers (and bool) are divided as FLOAT (ops-math aclnn_div.cpp), so `out` must be floating.
aclnnStatus aclnnDivGetWorkspaceSize(const aclTensor *self, const aclTensor *other, aclTensor *out,
                                     uint64_t *workspaceSize, aclOpExecutor **executor) {
  BinaryArgs args{{"self", "other", "out"}, self, other, out, kArith, kFloatsD};
  args.compute_type = [](aclDataType t) { return dtype_is_float(t) ? t : ACL_FLOAT; };
  return binary("Div", args, [](double x, double y) { return x / y; }, workspaceSize, executor);
}

aclnnStatus aclnnAddsGetWorkspaceSize(const aclTensor *self, const aclScalar *other, const aclScalar *alpha,
                                      aclTensor *out, uint64_t *workspaceSize, aclOpExecutor **executor) {
  return phase1("Adds", workspaceSize, executor, [&] {
    double add = scalar(other, "other") * scalar(alpha, "alpha");
    return unary_spec(self, out, kArith, [add](double x) { return x + add; });
  });
}

aclnnStatus aclnnMulsGetWorkspaceSize(const aclTensor *self, const aclScalar *other, aclTensor *out,
                                      uint64_t *workspaceSize, aclOpExecutor **executor) {
  return phase1("Muls", workspaceSize, executor, [&] {
    double m = scalar(other, "other");
    return unary_spec(self, out, kArith, [m](double x) { return x * m; });
  });
}

// out[i] = x[i] * scalars[i]: one scalar per tensor, each out[i] of its x[i]'s shape. CANN documents FLOAT scalars for
// floating lists and INT64 ones for INT32 lists; like every scalar of the stand-in, a member of any numeric dtype
// (bool included) is taken as its value.
aclnnStatus aclnnForeachMulScalarListGetWorkspaceSize(const aclTensorList *x, const aclScalarList *scalars,
                                                      const aclTensorList *out, uint64_t *workspaceSize,
                                                      aclOpExecutor **executor) {
  return phase1("ForeachMulScalarList", workspaceSize, executor, [&] {
    constexpr DtypeSet kTypes = kFloats | dtypes({ACL_INT32});
    std::vector<const TensorView *> in = tensor_list(x, "x", kTypes), o = tensor_list(out, "out", kTypes);
    std::vector<double> k = scalar_list(scalars, "scalars");
    if (in.empty()) fail("x is empty");
    if (k.size() != in.size() || o.size() != in.size())
      fail("x has " + std::to_string(in.size()) + " tensors, scalars " + std::to_string(k.size()) + ", out " +
           std::to_string(o.size()));
    for (size_t i = 0; i < in.size(); ++i) {
      if (o[i]->dtype != in[i]->dtype)
        fail("out[" + std::to_string(i) + "] differs in dtype from x[" + std::to_string(i) + "]");
      require_shape(*o[i], in[i]->shape, "out");
    }
    return ExecutorSpec{"", {nn::slot(x, Io::Input), nn::slot(out, Io::Output)}, 0, [k](const Slots &s) {
                          for (size_t i = 0; i < k.size(); ++i) {
                            Values v = gather(s[0].views[i]);
                            for (double &e : v) e *= k[i];
                            scatter(s[1].views[i], v);
                          }
                        }};
  });
}

// selfRef += alpha * other, other broadcast to selfRef's shape.
aclnnStatus aclnnInplaceAddGetWorkspaceSize(const aclTensor *selfRef, const aclTensor *other, const aclScalar *alpha,
                                            uint64_t *workspaceSize, aclOpExecutor **executor) {
  return phase1("InplaceAdd", workspaceSize, executor, [&] {
    const TensorView &self = tensor(selfRef, "selfRef", kArith);
    const TensorView &o = tensor(other, "other", kArith);
    double a = scalar(alpha, "alpha");
    if (broadcast_shape(self.shape, o.shape) != self.shape)
      fail("other " + show(o.shape) + " does not broadcast to selfRef " + show(self.shape));
    Shape shape = self.shape;
    return ExecutorSpec{"", {nn::slot(selfRef, Io::InOut), nn::slot(other, Io::Input)}, 0, [shape, a](const Slots &s) {
                          Values x = gather(view(s, 0)), y = gather(expand(view(s, 1), shape));
                          for (size_t i = 0; i < x.size(); ++i) x[i] += a * y[i];
                          scatter(view(s, 0), x);
                        }};
  });
}

aclnnStatus aclnnReluGetWorkspaceSize(const aclTensor *self, const aclTensor *out, uint64_t *workspaceSize,
                                      aclOpExecutor **executor) {
  return unary(
      "Relu", self, out, kFloats | dtypes({ACL_INT8, ACL_INT32, ACL_INT64, ACL_UINT8}),
      [](double x) { return x > 0 || std::isnan(x) ? x : 0.0; }, workspaceSize, executor);
}

aclnnStatus aclnnGeluGetWorkspaceSize(const aclTensor *self, aclTensor *out, uint64_t *workspaceSize,
                                      aclOpExecutor **executor) {
  return unary("Gelu", self, out, kFloats, gelu, workspaceSize, executor);
}

aclnnStatus aclnnSiluGetWorkspaceSize(const aclTensor *self, aclTensor *out, uint64_t *workspaceSize,
                                      aclOpExecutor **executor) {
  return unary(
      "Silu", self, out, kFloats, [](double x) { return x * sigmoid(x); }, workspaceSize, executor);
}

aclnnStatus aclnnExpGetWorkspaceSize(const aclTensor *self, aclTensor *out, uint64_t *workspaceSize,
                                     aclOpExecutor **executor) {
  return unary(
      "Exp", self, out, kFloatsD, [](double x) { return std::exp(x); }, workspaceSize, executor);
}

aclnnStatus aclnnLogGetWorkspaceSize(const aclTensor *self, aclTensor *out, uint64_t *workspaceSize,
                                     aclOpExecutor **executor) {
  return unary(
      "Log", self, out, kFloatsD, [](double x) { return std::log(x); }, workspaceSize, executor);
}

aclnnStatus aclnnSqrtGetWorkspaceSize(const aclTensor *self, aclTensor *out, uint64_t *workspaceSize,
                                      aclOpExecutor **executor) {
  return unary(
      "Sqrt", self, out, kFloatsD, [](double x) { return std::sqrt(x); }, workspaceSize, executor);
}

aclnnStatus aclnnNegGetWorkspaceSize(const aclTensor *self, aclTensor *out, uint64_t *workspaceSize,
                                     aclOpExecutor **executor) {
  return unary(
      "Neg", self, out, kFloatsD | kSignedInts, [](double x) { return -x; }, workspaceSize, executor);
}

// gradOutput and self are promoted (an INT32 gradOutput with a FLOAT self computes in FLOAT); only the promoted type
// must be FLOAT, FLOAT16 or BF16 (ops-nn activation/gelu_grad/op_api/aclnn_gelu_backward.cpp).
aclnnStatus aclnnGeluBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *self,
                                              const aclTensor *gradInput, uint64_t *workspaceSize,
                                              aclOpExecutor **executor) {
  BinaryArgs args{{"gradOutput", "self", "gradInput"}, gradOutput, self, gradInput, kFloats, kFloats};
  args.promoted_only = true;
  return binary("GeluBackward", args, [](double g, double x) { return g * gelu_grad(x); }, workspaceSize, executor);
}

aclnnStatus aclnnSiluBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *self, aclTensor *gradInput,
                                              uint64_t *workspaceSize, aclOpExecutor **executor) {
  return binary(
      "SiluBackward", {{"gradOutput", "self", "gradInput"}, gradOutput, self, gradInput, kFloats, kFloats},
      [](double g, double x) {
        double sg = sigmoid(x);
        return g * sg * (1.0 + x * (1.0 - sg));
      },
      workspaceSize, executor);
}

// ReLU's backward in torch_npu: ThresholdBackward(grad, relu_output, 0).
aclnnStatus aclnnThresholdBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *self,
                                                   const aclScalar *threshold, aclTensor *out, uint64_t *workspaceSize,
                                                   aclOpExecutor **executor) {
  constexpr DtypeSet types = kFloats | dtypes({ACL_INT8, ACL_INT32, ACL_UINT8});
  return phase1("ThresholdBackward", workspaceSize, executor, [&] {
    double t = scalar(threshold, "threshold");
    return binary_spec({{"gradOutput", "self", "out"}, gradOutput, self, out, types, types},
                       [t](double g, double x) { return x > t ? g : 0.0; });
  });
}

}  // extern "C"
