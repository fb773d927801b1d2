// Embedding lookup and its dense backward (gradient rows summed per index).
#include "fakecann/stream.h"
#include "op_common.h"

using namespace fakecann;
using namespace fakecann::ops;

namespace {

// Indices are only known on the device: a bad one is a kernel fault, reported at synchronization.
int64_t checked_index(double v, int64_t rows) {
  if (!(v >= 0 && v < (double)rows))
    throw KernelError("embedding index " + std::to_string((int64_t)v) + " out of range [0, " + std::to_string(rows) +
                      ")");
  return (int64_t)v;
}

Shape with_row(Shape s, int64_t len) {
  s.push_back(len);
  return s;
}

}  // namespace

extern "C" {

aclnnStatus aclnnEmbeddingGetWorkspaceSize(const aclTensor *weight, const aclTensor *indices, const aclTensor *out,
                                           uint64_t *workspaceSize, aclOpExecutor **executor) {
  return phase1("Embedding", workspaceSize, executor, [&] {
    const TensorView &w = tensor(weight, "weight", kArith);
    const TensorView &idx = tensor(indices, "indices", kIndices);
    if (w.shape.size() != 2) fail("weight must be 2-D, has shape " + show(w.shape));
    tensor(out, "out", kArith, with_row(idx.shape, w.shape[1]));
    int64_t rows = w.shape[0], len = w.shape[1];
    return ExecutorSpec{"",
                        {nn::slot(weight, Io::Input), nn::slot(indices, Io::Input), nn::slot(out, Io::Output)},
                        0,
                        [rows, len](const Slots &s) {
                          Values table = gather(view(s, 0)), ids = gather(view(s, 1)), o;
                          o.reserve(ids.size() * (size_t)len);
                          for (double id : ids) {
                            auto row = table.begin() + checked_index(id, rows) * len;
                            o.insert(o.end(), row, row + len);
                          }
                          scatter(view(s, 2), o);
                        }};
  });
}

// out[numWeights, D] = sum of grad rows per index; rows of paddingIdx get nothing (torch passes -1,
// i.e. no padding, as a huge uint64); scaleGradByFreq divides each row by its index's count.
aclnnStatus aclnnEmbeddingDenseBackwardGetWorkspaceSize(const aclTensor *grad, const aclTensor *indices,
                                                        uint64_t numWeights, uint64_t paddingIdx, bool scaleGradByFreq,
                                                        const aclTensor *out, uint64_t *workspaceSize,
                                                        aclOpExecutor **executor) {
  return phase1("EmbeddingDenseBackward", workspaceSize, executor, [&] {
    const TensorView &g = tensor(grad, "grad", kFloats);
    const TensorView &idx = tensor(indices, "indices", kIndices);
    if (g.shape.empty()) fail("grad must have the embedding dim last");
    int64_t len = g.shape.back();
    tensor(grad, "grad", kFloats, with_row(idx.shape, len));
    if (numWeights > (uint64_t)INT64_MAX) fail("numWeights too large");
    tensor(out, "out", kFloats, {(int64_t)numWeights, len});
    int64_t rows = (int64_t)numWeights;
    return ExecutorSpec{"",
                        {nn::slot(grad, Io::Input), nn::slot(indices, Io::Input), nn::slot(out, Io::Output)},
                        workspace_for(rows * len),
                        [rows, len, paddingIdx, scaleGradByFreq](const Slots &s) {
                          Values gv = gather(view(s, 0)), ids = gather(view(s, 1));
                          Values acc((size_t)(rows * len), 0.0), count((size_t)rows, 0.0);
                          for (double id : ids) count[(size_t)checked_index(id, rows)] += 1;
                          for (size_t i = 0; i < ids.size(); ++i) {
                            int64_t r = (int64_t)ids[i];
                            if ((uint64_t)r == paddingIdx) continue;
                            double scale = scaleGradByFreq ? 1.0 / count[(size_t)r] : 1.0;
                            for (int64_t j = 0; j < len; ++j)
                              acc[(size_t)(r * len + j)] += scale * gv[i * (size_t)len + (size_t)j];
                          }
                          scatter(view(s, 2), acc);
                        }};
  });
}

}  // extern "C"
