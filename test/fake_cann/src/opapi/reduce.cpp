// Reductions (ReduceSum, Mean) and the MSE loss with its backward (reduction none / mean / sum).
#include <algorithm>

#include "op_common.h"

using namespace fakecann;
using namespace fakecann::ops;

namespace {

// ReduceSum / Mean: `dims` (empty = all) wrapped, sorted; duplicates are an error as in CANN.
aclnnStatus reduce(const char *op, const aclTensor *self, const aclIntArray *dims, bool keepDim, aclDataType dtype,
                   const aclTensor *out, DtypeSet types, bool mean, uint64_t *ws, aclOpExecutor **ex) {
  return phase1(op, ws, ex, [&] {
    const TensorView &x = tensor(self, "self", types);
    const TensorView &o = tensor(out, "out", types);
    std::vector<int64_t> d;
    for (int64_t v : int_array(dims, "dim")) d.push_back(wrap_dim(v, x.shape.size()));
    if (d.empty())
      for (size_t i = 0; i < x.shape.size(); ++i) d.push_back((int64_t)i);
    std::sort(d.begin(), d.end());
    if (std::adjacent_find(d.begin(), d.end()) != d.end()) fail("dim lists a dimension twice");
    if (dtype != o.dtype) fail("dtype " + std::to_string(dtype) + " differs from out's dtype");
    Shape kept;
    std::vector<size_t> map = reduce_index(x.shape, d, &kept);
    Shape want;
    for (size_t i = 0; i < x.shape.size(); ++i)
      if (keepDim || !std::binary_search(d.begin(), d.end(), (int64_t)i)) want.push_back(kept[i]);
    require_shape(o, want, "out");
    int64_t count = numel(kept) == 0 ? 0 : x.numel() / numel(kept);  // elements summed per output
    return ExecutorSpec{"",
                        {nn::slot(self, Io::Input), nn::slot(out, Io::Output)},
                        workspace_for(x.numel()),
                        [map = std::move(map), n = numel(kept), count, mean](const Slots &s) {
                          Values x = gather(view(s, 0)), acc((size_t)n, 0.0);
                          for (size_t i = 0; i < x.size(); ++i) acc[map[i]] += x[i];
                          if (mean)
                            for (double &e : acc) e /= (double)count;
                          scatter(view(s, 1), acc);
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
