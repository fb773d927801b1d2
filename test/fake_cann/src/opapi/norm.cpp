// Normalizations over trailing dims: LayerNorm (+ mean/rstd outputs) and LayerNormBackward (RmsNorm: rms_norm.cpp).
// The normalized dims are the last ones, so rows are contiguous in row-major gathered values.
#include <array>
#include <cmath>

#include "op_common.h"

using namespace fakecann;
using namespace fakecann::ops;

namespace {

// Geometry of a normalization of `x` over its last `norm.size()` dims, which must equal `norm`.
struct Rows {
  int64_t count = 0, len = 1;
  Shape stat;  // shape of per-row statistics: x's leading dims, then 1s (CANN's mean/rstd shape)
};

Rows rows_of(const Shape &x, const Shape &norm, const char *what) {
  if (norm.empty() || norm.size() > x.size() || !std::equal(norm.begin(), norm.end(), x.end() - (ptrdiff_t)norm.size()))
    fail(std::string(what) + " " + show(norm) + " is not a trailing part of the input shape " + show(x));
  Rows r;
  r.len = numel(norm);
  r.count = r.len == 0 ? 0 : numel(x) / r.len;
  r.stat = Shape(x.begin(), x.end() - (ptrdiff_t)norm.size());
  r.stat.resize(x.size(), 1);
  return r;
}

Values gather_or(const Slot &s, size_t n, double fill) { return s.present ? gather(s.views[0]) : Values(n, fill); }

void scatter_if(const Slot &s, const Values &v) {
  if (s.present) scatter(s.views[0], v);
}

// Per-row mean and 1/sqrt(var + eps) (biased variance) of x.
void row_stats(const Values &x, const Rows &r, double eps, Values &mean, Values &rstd) {
  mean.assign((size_t)r.count, 0);
  rstd.assign((size_t)r.count, 0);
  for (int64_t i = 0; i < r.count; ++i) {
    const double *row = &x[(size_t)(i * r.len)];
    double m = 0, var = 0;
    for (int64_t j = 0; j < r.len; ++j) m += row[j];
    m /= (double)r.len;
    for (int64_t j = 0; j < r.len; ++j) var += (row[j] - m) * (row[j] - m);
    mean[(size_t)i] = m;
    rstd[(size_t)i] = 1.0 / std::sqrt(var / (double)r.len + eps);
  }
}

}  // namespace

extern "C" {

aclnnStatus aclnnLayerNormGetWorkspaceSize(const aclTensor *input, const aclIntArray *normalizedShape,
                                           const aclTensor *weightOptional, const aclTensor *biasOptional, double eps,
                                           aclTensor *out, aclTensor *meanOutOptional, aclTensor *rstdOutOptional,
                                           uint64_t *workspaceSize, aclOpExecutor **executor) {
  return phase1("LayerNorm", workspaceSize, executor, [&] {
    const TensorView &x = tensor(input, "input", kFloats);
    Shape norm = int_array(normalizedShape, "normalizedShape");
    Rows r = rows_of(x.shape, norm, "normalizedShape");
    tensor(out, "out", kFloats, x.shape);
    optional_tensor(weightOptional, "weightOptional", kFloats, norm);
    optional_tensor(biasOptional, "biasOptional", kFloats, norm);
    optional_tensor(meanOutOptional, "meanOutOptional", kFloats, r.stat);
    optional_tensor(rstdOutOptional, "rstdOutOptional", kFloats, r.stat);
    return ExecutorSpec{
        "",
        {nn::slot(input, Io::Input), nn::slot(weightOptional, Io::Input), nn::slot(biasOptional, Io::Input),
         nn::slot(out, Io::Output), nn::slot(meanOutOptional, Io::Output), nn::slot(rstdOutOptional, Io::Output)},
        workspace_for(x.numel()),
        [r, eps](const Slots &s) {
          Values xv = gather(view(s, 0)), mean, rstd;
          Values w = gather_or(s[1], (size_t)r.len, 1.0), b = gather_or(s[2], (size_t)r.len, 0.0);
          row_stats(xv, r, eps, mean, rstd);
          for (int64_t i = 0; i < r.count; ++i)
            for (int64_t j = 0; j < r.len; ++j) {
              double &e = xv[(size_t)(i * r.len + j)];
              e = (e - mean[(size_t)i]) * rstd[(size_t)i] * w[(size_t)j] + b[(size_t)j];
            }
          scatter(view(s, 3), xv);
          scatter_if(s[4], mean);
          scatter_if(s[5], rstd);
        }};
  });
}

// outputMask = {gradInput, gradWeight, gradBias}; a masked-off output may be NULL and is not written.
aclnnStatus aclnnLayerNormBackwardGetWorkspaceSize(const aclTensor *gradOut, const aclTensor *input,
                                                   const aclIntArray *normalizedShape, const aclTensor *mean,
                                                   const aclTensor *rstd, const aclTensor *weightOptional,
                                                   const aclTensor *biasOptional, const aclBoolArray *outputMask,
                                                   aclTensor *gradInputOut, aclTensor *gradWeightOut,
                                                   aclTensor *gradBiasOut, uint64_t *workspaceSize,
                                                   aclOpExecutor **executor) {
  return phase1("LayerNormBackward", workspaceSize, executor, [&] {
    const TensorView &x = tensor(input, "input", kFloats);
    tensor(gradOut, "gradOut", kFloats, x.shape);
    Shape norm = int_array(normalizedShape, "normalizedShape");
    Rows r = rows_of(x.shape, norm, "normalizedShape");
    tensor(mean, "mean", kFloats, r.stat);
    tensor(rstd, "rstd", kFloats, r.stat);
    optional_tensor(weightOptional, "weightOptional", kFloats, norm);
    optional_tensor(biasOptional, "biasOptional", kFloats, norm);
    std::vector<bool> mask = bool_array(outputMask, "outputMask");
    if (mask.size() != 3) fail("outputMask must have 3 entries");
    const aclTensor *outs[3] = {gradInputOut, gradWeightOut, gradBiasOut};
    const char *names[3] = {"gradInputOut", "gradWeightOut", "gradBiasOut"};
    for (size_t i = 0; i < 3; ++i) optional_tensor(outs[i], names[i], kFloats, i == 0 ? x.shape : norm, mask[i]);
    Slots slots{nn::slot(gradOut, Io::Input), nn::slot(input, Io::Input),          nn::slot(mean, Io::Input),
                nn::slot(rstd, Io::Input),    nn::slot(weightOptional, Io::Input), nn::slot(biasOptional, Io::Input)};
    for (const aclTensor *o : outs) slots.push_back(nn::slot(o, Io::Output));
    std::array<bool, 3> want{mask[0], mask[1], mask[2]};
    return ExecutorSpec{"", std::move(slots), workspace_for(x.numel()), [r, want](const Slots &s) {
                          Values g = gather(view(s, 0)), xv = gather(view(s, 1)), mu = gather(view(s, 2)),
                                 rs = gather(view(s, 3)), w = gather_or(s[4], (size_t)r.len, 1.0);
                          Values gx(xv.size()), gw((size_t)r.len, 0.0), gb((size_t)r.len, 0.0);
                          for (int64_t i = 0; i < r.count; ++i) {
                            size_t base = (size_t)(i * r.len);
                            double mean_dy = 0, mean_dy_xhat = 0;
                            for (int64_t j = 0; j < r.len; ++j) {
                              double xhat = (xv[base + (size_t)j] - mu[(size_t)i]) * rs[(size_t)i];
                              double dy = g[base + (size_t)j] * w[(size_t)j];
                              mean_dy += dy;
                              mean_dy_xhat += dy * xhat;
                              gw[(size_t)j] += g[base + (size_t)j] * xhat;
                              gb[(size_t)j] += g[base + (size_t)j];
                            }
                            mean_dy /= (double)r.len;
                            mean_dy_xhat /= (double)r.len;
                            for (int64_t j = 0; j < r.len; ++j) {
                              double xhat = (xv[base + (size_t)j] - mu[(size_t)i]) * rs[(size_t)i];
                              double dy = g[base + (size_t)j] * w[(size_t)j];
                              gx[base + (size_t)j] = rs[(size_t)i] * (dy - mean_dy - xhat * mean_dy_xhat);
                            }
                          }
                          const Values *results[3] = {&gx, &gw, &gb};
                          for (size_t i = 0; i < 3; ++i)
                            if (want[i]) scatter_if(s[6 + i], *results[i]);
                        }};
  });
}

}  // extern "C"
