// RmsNorm and RmsNormGrad (ops-nn norm/rms_norm*; both aclnn layers are generated). x is normalized over gamma's
// dims (the last ones): rows are the dims before them. Dtypes follow the ops' definition tables (161002): y / dx have
// x's dtype, gamma x's or FLOAT, rstd and dgamma FLOAT. Shapes are checked by the tiling (561002) as it does:
// rstd's dims need only be 1 or x's (RmsNorm) or begin with x's row dims (the grad); the stand-in also needs one
// rstd value per row, which the kernels read and write in rstd's row-major order.
#include <cmath>
#include <utility>

#include "op_common.h"

using namespace fakecann;
using namespace fakecann::ops;

namespace {

constexpr size_t kMaxDims = 8;

// The definitions' dtype combinations: (x, gamma) -> x's dtype for y/dx, FLOAT for rstd/dgamma.
void check_dtypes(aclDataType x, aclDataType gamma) {
  const bool ok =
      x == ACL_FLOAT ? gamma == ACL_FLOAT : (x == ACL_FLOAT16 || x == ACL_BF16) && (gamma == x || gamma == ACL_FLOAT);
  if (!ok)
    fail("x dtype " + std::to_string(x) + " with gamma dtype " + std::to_string(gamma) + " is not a supported pair");
}

struct Rows {
  int64_t count = 1, len = 1;
};

// x against gamma (the tiling's CheckInputShape): ranks 1-8, gamma the trailing dims of x, nothing empty in gamma.
Rows rows_of(const Shape &x, const Shape &gamma) {
  if (x.empty() || x.size() > kMaxDims) fail_tiling("x must have 1 to 8 dims, has shape " + show(x));
  if (gamma.empty() || gamma.size() > x.size()) fail_tiling("gamma " + show(gamma) + " does not fit x " + show(x));
  Rows r;
  for (size_t i = 0; i < gamma.size(); ++i) {
    if (gamma[i] == 0) fail_tiling("gamma cannot be empty");
    if (gamma[i] != x[x.size() - gamma.size() + i])
      fail_tiling("gamma " + show(gamma) + " is not the trailing part of x " + show(x));
    r.len *= gamma[i];
  }
  for (size_t i = 0; i < x.size() - gamma.size(); ++i) r.count *= x[i];
  return r;
}

void check_rstd_count(const TensorView &rstd, const Rows &r) {
  if (rstd.numel() != r.count)
    fail_tiling("rstd " + show(rstd.shape) + " must hold one value per row (" + std::to_string(r.count) + ")");
}

// RmsNorm's rule: each dim of rstd is 1 or x's.
void check_rstd_out(const Shape &x, const TensorView &rstd, const Rows &r) {
  if (rstd.shape.size() > x.size()) fail_tiling("rstd has more dims than x");
  for (size_t i = 0; i < rstd.shape.size(); ++i)
    if (rstd.shape[i] == 0 || (rstd.shape[i] != 1 && rstd.shape[i] != x[i]))
      fail_tiling("rstd's dim " + std::to_string(i) + " must be 1 or x's, rstd " + show(rstd.shape));
  check_rstd_count(rstd, r);
}

// RmsNormGrad's rule (CheckRstdShape): rstd begins with x's row dims; fewer dims leave x's remaining row dims 1.
void check_rstd_in(const Shape &x, size_t gamma_dims, const TensorView &rstd, const Rows &r) {
  const size_t row_dims = x.size() - gamma_dims, shared = std::min(rstd.shape.size(), row_dims);
  for (size_t i = 0; i < shared; ++i)
    if (rstd.shape[i] != x[i]) fail_tiling("rstd " + show(rstd.shape) + " must begin with x's dims " + show(x));
  for (size_t i = shared; i < row_dims; ++i)
    if (x[i] != 1) fail_tiling("x's dim " + std::to_string(i) + " must be 1 for rstd " + show(rstd.shape));
  check_rstd_count(rstd, r);
}

void rms_norm_kernel(const Slots &s, Rows r, double eps) {
  Values v = gather(view(s, 0)), g = gather(view(s, 1)), rstd((size_t)r.count);
  for (int64_t i = 0; i < r.count; ++i) {
    double *row = &v[(size_t)(i * r.len)], sq = 0;
    for (int64_t j = 0; j < r.len; ++j) sq += row[j] * row[j];
    rstd[(size_t)i] = 1.0 / std::sqrt(sq / (double)r.len + eps);
    for (int64_t j = 0; j < r.len; ++j) row[j] *= rstd[(size_t)i] * g[(size_t)j];
  }
  scatter(view(s, 2), v);
  scatter(view(s, 3), rstd);
}

// dx = rstd (dy g - rstd x mean(dy g x rstd)), dgamma = sum over rows of rstd x dy.
void rms_norm_grad_kernel(const Slots &s, Rows r) {
  const Values dy = gather(view(s, 0)), x = gather(view(s, 1)), rstd = gather(view(s, 2)), g = gather(view(s, 3));
  Values dx(x.size()), dg((size_t)r.len, 0.0);
  for (int64_t i = 0; i < r.count; ++i) {
    const auto base = (size_t)(i * r.len);
    const double rs = rstd[(size_t)i];
    double mean = 0;
    for (int64_t j = 0; j < r.len; ++j) mean += dy[base + (size_t)j] * g[(size_t)j] * x[base + (size_t)j] * rs;
    mean /= (double)r.len;
    for (int64_t j = 0; j < r.len; ++j) {
      const size_t at = base + (size_t)j;
      dx[at] = rs * (dy[at] * g[(size_t)j] - rs * x[at] * mean);
      dg[(size_t)j] += rs * x[at] * dy[at];
    }
  }
  scatter(view(s, 4), dx);
  scatter(view(s, 5), dg);
}

}  // namespace

extern "C" {

// y = x / sqrt(mean(x^2) + epsilon) * gamma over gamma's dims; rstd = that 1/sqrt(...) per row.
aclnnStatus aclnnRmsNormGetWorkspaceSize(const aclTensor *x, const aclTensor *gamma, double epsilon,
                                         const aclTensor *yOut, const aclTensor *rstdOut, uint64_t *workspaceSize,
                                         aclOpExecutor **executor) {
  return phase1("RmsNorm", workspaceSize, executor, [&] {
    const TensorView &xv = tensor(x, "x", kFloats), &g = tensor(gamma, "gamma", kFloats);
    const TensorView &y = tensor(yOut, "yOut", kFloats), &rstd = tensor(rstdOut, "rstdOut", dtypes({ACL_FLOAT}));
    check_dtypes(xv.dtype, g.dtype);
    if (y.dtype != xv.dtype) fail("yOut's dtype differs from x's");
    const Rows r = rows_of(xv.shape, g.shape);
    if (y.shape != xv.shape) fail_tiling("yOut shape " + show(y.shape) + " differs from x " + show(xv.shape));
    check_rstd_out(xv.shape, rstd, r);
    if (epsilon < 0) fail_tiling("epsilon must not be negative");
    return ExecutorSpec{
        "",
        {nn::slot(x, Io::Input), nn::slot(gamma, Io::Input), nn::slot(yOut, Io::Output), nn::slot(rstdOut, Io::Output)},
        workspace_for(xv.numel()),
        [r, epsilon](const Slots &s) { rms_norm_kernel(s, r, epsilon); }};
  });
}

aclnnStatus aclnnRmsNormGradGetWorkspaceSize(const aclTensor *dy, const aclTensor *x, const aclTensor *rstd,
                                             const aclTensor *gamma, const aclTensor *dxOut, const aclTensor *dgammaOut,
                                             uint64_t *workspaceSize, aclOpExecutor **executor) {
  return phase1("RmsNormGrad", workspaceSize, executor, [&] {
    const TensorView &g = tensor(dy, "dy", kFloats), &xv = tensor(x, "x", kFloats);
    const TensorView &rs = tensor(rstd, "rstd", dtypes({ACL_FLOAT})), &gm = tensor(gamma, "gamma", kFloats);
    const TensorView &dx = tensor(dxOut, "dxOut", kFloats), &dg = tensor(dgammaOut, "dgammaOut", dtypes({ACL_FLOAT}));
    check_dtypes(xv.dtype, gm.dtype);
    if (g.dtype != xv.dtype || dx.dtype != xv.dtype) fail("dy and dxOut must have x's dtype");
    const Rows r = rows_of(xv.shape, gm.shape);
    if (g.shape != xv.shape || dx.shape != xv.shape) fail_tiling("dy, x and dxOut must share one shape");
    if (dg.shape != gm.shape) fail_tiling("dgammaOut shape " + show(dg.shape) + " differs from gamma's");
    check_rstd_in(xv.shape, gm.shape.size(), rs, r);
    return ExecutorSpec{"",
                        {nn::slot(dy, Io::Input), nn::slot(x, Io::Input), nn::slot(rstd, Io::Input),
                         nn::slot(gamma, Io::Input), nn::slot(dxOut, Io::Output), nn::slot(dgammaOut, Io::Output)},
                        workspace_for(xv.numel()),
                        [r](const Slots &s) { rms_norm_grad_kernel(s, r); }};
  });
}

}  // extern "C"
