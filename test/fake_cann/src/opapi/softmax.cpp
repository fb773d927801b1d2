// Softmax, LogSoftmax and their backwards along any dim: the views are rotated so that `dim` is last,
// which makes every row contiguous in the gathered values whatever the strides.
#include <algorithm>
#include <cmath>

#include "op_common.h"

using namespace fakecann;
using namespace fakecann::ops;

namespace {

// fn(inputs' rows, output row, row length) for every row along dim.
using RowFn = std::function<void(const std::vector<const double *> &in, double *out, int64_t len)>;

// All tensors share one shape; the last one is the output. `same_inputs`: the inputs must share a dtype too.
aclnnStatus along_dim(const char *op, std::vector<std::pair<const aclTensor *, const char *>> tensors, int64_t dim,
                      RowFn fn, uint64_t *ws, aclOpExecutor **ex, DtypeSet types = kFloatsD, bool same_inputs = false) {
  return phase1(op, ws, ex, [&] {
    Slots slots;
    const TensorView &first = tensor(tensors[0].first, tensors[0].second, types);
    for (size_t i = 0; i < tensors.size(); ++i) {
      const bool input = i + 1 < tensors.size();
      const TensorView &t = tensor(tensors[i].first, tensors[i].second, input ? types : kFloatsD, first.shape);
      if (input && same_inputs && t.dtype != first.dtype)
        fail(std::string(tensors[i].second) + "'s dtype differs from " + tensors[0].second + "'s");
      slots.push_back(nn::slot(tensors[i].first, input ? Io::Input : Io::Output));
    }
    int64_t d = wrap_dim(dim, first.shape.size());
    int64_t len = first.shape.empty() ? 1 : first.shape[(size_t)d];
    return ExecutorSpec{"", std::move(slots), workspace_for(first.numel()), [d, len, fn](const Slots &s) {
                          std::vector<Values> in;
                          for (size_t i = 0; i + 1 < s.size(); ++i) in.push_back(gather(move_dim_last(view(s, i), d)));
                          Values out(in[0].size());
                          std::vector<const double *> rows(in.size());
                          for (size_t off = 0; len > 0 && off < out.size(); off += (size_t)len) {
                            for (size_t i = 0; i < in.size(); ++i) rows[i] = &in[i][off];
                            fn(rows, &out[off], len);
                          }
                          scatter(move_dim_last(view(s, s.size() - 1), d), out);
                        }};
  });
}

// out = x - max - log(sum(exp(x - max))); softmax is exp of it.
void log_softmax_row(const double *x, double *out, int64_t len) {
  double mx = *std::max_element(x, x + len), sum = 0;
  for (int64_t i = 0; i < len; ++i) sum += std::exp(x[i] - mx);
  double lse = mx + std::log(sum);
  for (int64_t i = 0; i < len; ++i) out[i] = x[i] - lse;
}

}  // namespace

extern "C" {

aclnnStatus aclnnSoftmaxGetWorkspaceSize(const aclTensor *self, int64_t dim, aclTensor *out, uint64_t *workspaceSize,
                                         aclOpExecutor **executor) {
  return along_dim(
      "Softmax", {{self, "self"}, {out, "out"}}, dim,
      [](const std::vector<const double *> &in, double *o, int64_t len) {
        log_softmax_row(in[0], o, len);
        for (int64_t i = 0; i < len; ++i) o[i] = std::exp(o[i]);
      },
      workspaceSize, executor);
}

aclnnStatus aclnnLogSoftmaxGetWorkspaceSize(const aclTensor *self, int64_t dim, aclTensor *out, uint64_t *workspaceSize,
                                            aclOpExecutor **executor) {
  return along_dim(
      "LogSoftmax", {{self, "self"}, {out, "out"}}, dim,
      [](const std::vector<const double *> &in, double *o, int64_t len) { log_softmax_row(in[0], o, len); },
      workspaceSize, executor);
}

// gradInput = y * (g - sum(g * y)) with y the forward output.
aclnnStatus aclnnSoftmaxBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *output, int64_t dim,
                                                 aclTensor *out, uint64_t *workspaceSize, aclOpExecutor **executor) {
  return along_dim(
      "SoftmaxBackward", {{gradOutput, "gradOutput"}, {output, "output"}, {out, "out"}}, dim,
      [](const std::vector<const double *> &in, double *o, int64_t len) {
        const double *g = in[0], *y = in[1];
        double dot = 0;
        for (int64_t i = 0; i < len; ++i) dot += g[i] * y[i];
        for (int64_t i = 0; i < len; ++i) o[i] = y[i] * (g[i] - dot);
      },
      workspaceSize, executor);
}

// gradInput = g - exp(y) * sum(g) with y the forward's log-softmax output (ops-nn activation/log_softmax_grad:
// gradOutput and output FLOAT, FLOAT16 or BFLOAT16, one dtype; out any floating type, cast to).
aclnnStatus aclnnLogSoftmaxBackwardGetWorkspaceSize(const aclTensor *gradOutput, const aclTensor *output, int64_t dim,
                                                    aclTensor *out, uint64_t *workspaceSize, aclOpExecutor **executor) {
  return along_dim(
      "LogSoftmaxBackward", {{gradOutput, "gradOutput"}, {output, "output"}, {out, "out"}}, dim,
      [](const std::vector<const double *> &in, double *o, int64_t len) {
        const double *g = in[0], *y = in[1];
        double sum = 0;
        for (int64_t i = 0; i < len; ++i) sum += g[i];
        for (int64_t i = 0; i < len; ++i) o[i] = g[i] - std::exp(y[i]) * sum;
      },
      workspaceSize, executor, kFloats, true);
}

}  // extern "C"
