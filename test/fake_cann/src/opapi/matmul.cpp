// Matrix products: Matmul (torch.matmul rules: 1-D operands, broadcast batch dims), Mm (2-D),
// BatchMatMul (3-D, equal batch) and Addmm (beta * self + alpha * mat1 @ mat2, ops-nn matmul/mat_mul_v3). Operands are
// read through their views, so the transposed (strided) views that a matmul backward passes need no copy.
#include <cstring>
#include <utility>

#include "op_common.h"
#include "promotion.h"

using namespace fakecann;
using namespace fakecann::ops;

namespace {

enum class Family { Matmul, Mm, Bmm };

// cubeMathType (int8_t): KEEP_DTYPE=0, ALLOW_FP32_DOWN_PRECISION=1, USE_FP16=2, USE_HF32=3, USE_FP32_ADD=4.
constexpr int8_t kCubeMax = 4;

// What the cube unit does to an fp32 operand: 1 and 3 run it as HF32 (10-bit mantissa, as on Atlas A2),
// 2 as fp16. fp16/bf16 operands are used as they are.
double cube_operand(double v, aclDataType dt, int8_t cube) {
  if (dt != ACL_FLOAT) return v;
  if (cube == 2) return half_to_float(float_to_half((float)v));
  if (cube == 1 || cube == 3) {
    float f = (float)v;
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    if ((bits & 0x7f800000u) != 0x7f800000u) bits = (bits + 0xfffu + ((bits >> 13) & 1u)) & ~0x1fffu;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  return v;
}

aclnnStatus matmul(const char *op, Family family, const aclTensor *self, const aclTensor *mat2, const aclTensor *out,
                   int8_t cube, uint64_t *ws, aclOpExecutor **ex) {
  return phase1(op, ws, ex, [&] {
    const TensorView &a = tensor(self, "self", kFloats), &b = tensor(mat2, "mat2", kFloats);
    const TensorView &o = tensor(out, "out", kFloats);
    if (cube < 0 || cube > kCubeMax) fail("cubeMathType " + std::to_string(cube) + " is not a valid value");
    size_t want_rank = family == Family::Mm ? 2 : 3;
    if (family != Family::Matmul && (a.shape.size() != want_rank || b.shape.size() != want_rank))
      fail("self " + show(a.shape) + " and mat2 " + show(b.shape) + " must both be " + std::to_string(want_rank) +
           "-D");
    if (a.shape.empty() || b.shape.empty()) fail("matmul of a 0-d tensor");
    if (family == Family::Bmm && a.shape[0] != b.shape[0]) fail("batch sizes of self and mat2 differ");
    // 1-D operands are a row (self) or a column (mat2) whose unit dim is dropped from the result.
    bool a_vec = a.shape.size() == 1, b_vec = b.shape.size() == 1;
    Shape a2 = a_vec ? Shape{1, a.shape[0]} : a.shape, b2 = b_vec ? Shape{b.shape[0], 1} : b.shape;
    int64_t m = a2[a2.size() - 2], k = a2.back(), n = b2.back();
    if (b2[b2.size() - 2] != k) fail("inner dims differ: self " + show(a.shape) + ", mat2 " + show(b.shape));
    Shape batch = broadcast_shape(Shape(a2.begin(), a2.end() - 2), Shape(b2.begin(), b2.end() - 2));
    Shape result = batch;
    if (!a_vec) result.push_back(m);
    if (!b_vec) result.push_back(n);
    require_shape(o, result, "out");
    Shape a_full = batch, b_full = batch;
    a_full.insert(a_full.end(), {m, k});
    b_full.insert(b_full.end(), {k, n});
    int64_t batches = numel(batch);
    return ExecutorSpec{"",
                        {nn::slot(self, Io::Input), nn::slot(mat2, Io::Input), nn::slot(out, Io::Output)},
                        workspace_for(batches * m * n),
                        [=](const Slots &s) {
                          TensorView av = a_vec ? unsqueeze(view(s, 0), 0) : view(s, 0);
                          TensorView bv = b_vec ? unsqueeze(view(s, 1), 1) : view(s, 1);
                          Values x = gather(expand(av, a_full)), y = gather(expand(bv, b_full));
                          for (double &e : x) e = cube_operand(e, av.dtype, cube);
                          for (double &e : y) e = cube_operand(e, bv.dtype, cube);
                          Values r((size_t)(batches * m * n), 0.0);
                          for (int64_t p = 0; p < batches; ++p) {
                            const double *xa = &x[(size_t)(p * m * k)], *yb = &y[(size_t)(p * k * n)];
                            double *rc = &r[(size_t)(p * m * n)];
                            for (int64_t i = 0; i < m; ++i)
                              for (int64_t q = 0; q < k; ++q) {
                                double xv = xa[i * k + q];
                                for (int64_t j = 0; j < n; ++j) rc[i * n + j] += xv * yb[q * n + j];
                              }
                          }
                          scatter(view(s, 2), r);
                        }};
  });
}

// Addmm: self (1-D or 2-D) broadcast to mat1 @ mat2's (m, n); out has the promoted dtype of the three. beta == 0
// drops self entirely (a NaN in it does not propagate), as torch.addmm. out == nullptr: InplaceAddmm, into self.
ExecutorSpec addmm_spec(const aclTensor *self, const aclTensor *mat1, const aclTensor *mat2, double beta, double alpha,
                        const aclTensor *out, int8_t cube) {
  const TensorView &c = tensor(self, "self", kFloats), &a = tensor(mat1, "mat1", kFloats);
  const TensorView &b = tensor(mat2, "mat2", kFloats), &o = out == nullptr ? c : tensor(out, "out", kFloats);
  if (cube < 0 || cube > kCubeMax) fail("cubeMathType " + std::to_string(cube) + " is not a valid value");
  if (a.shape.size() != 2 || b.shape.size() != 2 || a.shape[1] != b.shape[0])
    fail("mat1 " + show(a.shape) + " and mat2 " + show(b.shape) + " are not (m, k) and (k, n)");
  if (c.shape.empty() || c.shape.size() > 2) fail("self must be 1-D or 2-D, has shape " + show(c.shape));
  const int64_t m = a.shape[0], k = a.shape[1], n = b.shape[1];
  const Shape mn{m, n};
  if (broadcast_shape(c.shape, mn) != mn) fail("self " + show(c.shape) + " does not broadcast to " + show(mn));
  require_shape(o, mn, out == nullptr ? "selfRef" : "out");
  if (o.dtype != promote(c.dtype, promote(a.dtype, b.dtype))) fail("out's dtype is not the operands' promoted dtype");
  Slots slots{nn::slot(self, out == nullptr ? Io::InOut : Io::Input), nn::slot(mat1, Io::Input),
              nn::slot(mat2, Io::Input)};
  if (out != nullptr) slots.push_back(nn::slot(out, Io::Output));
  const size_t result = out == nullptr ? 0 : 3;
  return {"", std::move(slots), workspace_for(m * n), [=](const Slots &s) {
            Values x = gather(view(s, 1)), y = gather(view(s, 2));
            for (double &e : x) e = cube_operand(e, view(s, 1).dtype, cube);
            for (double &e : y) e = cube_operand(e, view(s, 2).dtype, cube);
            Values r = beta == 0 ? Values((size_t)(m * n), 0.0) : gather(expand(view(s, 0), mn));
            for (double &e : r) e *= beta;
            for (int64_t i = 0; i < m; ++i)
              for (int64_t q = 0; q < k; ++q)
                for (int64_t j = 0; j < n; ++j)
                  r[(size_t)(i * n + j)] += alpha * x[(size_t)(i * k + q)] * y[(size_t)(q * n + j)];
            scatter(view(s, result), r);
          }};
}

}  // namespace

extern "C" {

aclnnStatus aclnnMatmulGetWorkspaceSize(const aclTensor *self, const aclTensor *mat2, aclTensor *out,
                                        int8_t cubeMathType, uint64_t *workspaceSize, aclOpExecutor **executor) {
  return matmul("Matmul", Family::Matmul, self, mat2, out, cubeMathType, workspaceSize, executor);
}

aclnnStatus aclnnMmGetWorkspaceSize(const aclTensor *self, const aclTensor *mat2, aclTensor *out, int8_t cubeMathType,
                                    uint64_t *workspaceSize, aclOpExecutor **executor) {
  return matmul("Mm", Family::Mm, self, mat2, out, cubeMathType, workspaceSize, executor);
}

aclnnStatus aclnnBatchMatMulGetWorkspaceSize(const aclTensor *self, const aclTensor *mat2, aclTensor *out,
                                             int8_t cubeMathType, uint64_t *workspaceSize, aclOpExecutor **executor) {
  return matmul("BatchMatMul", Family::Bmm, self, mat2, out, cubeMathType, workspaceSize, executor);
}

aclnnStatus aclnnAddmmGetWorkspaceSize(const aclTensor *self, const aclTensor *mat1, const aclTensor *mat2,
                                       const aclScalar *beta, const aclScalar *alpha, aclTensor *out,
                                       int8_t cubeMathType, uint64_t *workspaceSize, aclOpExecutor **executor) {
  return phase1("Addmm", workspaceSize, executor, [&] {
    const double b = scalar(beta, "beta"), a = scalar(alpha, "alpha");
    return addmm_spec(self, mat1, mat2, b, a, out, cubeMathType);
  });
}

aclnnStatus aclnnInplaceAddmmGetWorkspaceSize(const aclTensor *selfRef, const aclTensor *mat1, const aclTensor *mat2,
                                              const aclScalar *beta, const aclScalar *alpha, int8_t cubeMathType,
                                              uint64_t *workspaceSize, aclOpExecutor **executor) {
  return phase1("InplaceAddmm", workspaceSize, executor, [&] {
    const double b = scalar(beta, "beta"), a = scalar(alpha, "alpha");
    return addmm_spec(selfRef, mat1, mat2, b, a, nullptr, cubeMathType);
  });
}

}  // extern "C"
