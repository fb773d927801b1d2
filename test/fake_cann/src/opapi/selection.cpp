// Ops along one dim that CANN's examples use: ArgMax, MaxDim, Topk, IndexSelect (ops-math / ops-nn) and Cumsum.
// Each moves `dim` last in its views, so a kernel works on contiguous rows of the gathered values. NaN is the
// largest value, as in torch: max / argmax return the first NaN, topk ranks NaN above every number.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "fakecann/stream.h"
#include "op_common.h"
#include "promotion.h"

using namespace fakecann;
using namespace fakecann::ops;

namespace {

constexpr DtypeSet kArgMaxTypes = kFloatsD | kSignedInts | dtypes({ACL_UINT8});
constexpr DtypeSet kMaxDimTypes = kFloats | dtypes({ACL_INT64, ACL_BOOL});  // A2/A3: no INT32
constexpr DtypeSet kTopkTypes = kFloatsD | kSignedInts | dtypes({ACL_UINT8});
constexpr DtypeSet kCumsumTypes = kArith & ~dtypes({ACL_BOOL});
constexpr DtypeSet kAny = kFloatsD | kSignedInts | dtypes({ACL_UINT8, ACL_UINT16, ACL_UINT32, ACL_UINT64, ACL_BOOL});

// a ranks above b (NaN above everything, equal NaNs tie).
bool above(double a, double b) { return std::isnan(a) ? !std::isnan(b) : a > b; }

// Geometry of a reduction / selection along dim of `x` (at least 1-D).
struct Along {
  int64_t dim = 0, len = 0;
};

Along along(const TensorView &x, int64_t dim) {
  if (x.shape.empty()) fail("self must have at least one dim");
  Along a;
  a.dim = wrap_dim(dim, x.shape.size());
  a.len = x.shape[(size_t)a.dim];
  return a;
}

// x's shape with dim's length `len`, or without dim (keepdim false, len 1).
Shape along_shape(const Shape &x, const Along &a, int64_t len, bool keep) {
  Shape s = x;
  if (keep)
    s[(size_t)a.dim] = len;
  else
    s.erase(s.begin() + a.dim);
  return s;
}

// An output view with dim last, its dropped dim (keepdim false) restored as size 1 first.
TensorView rows_of(TensorView v, const Along &a, bool kept) {
  if (!kept) v = unsqueeze(v, (size_t)a.dim);
  return move_dim_last(v, a.dim);
}

// Index of each row's maximum (its first NaN, else its first maximum) and the value there.
void row_max(const Values &x, int64_t len, Values &value, Values &index) {
  const size_t rows = len == 0 ? 0 : x.size() / (size_t)len;
  value.assign(rows, 0);
  index.assign(rows, 0);
  for (size_t r = 0; r < rows; ++r) {
    const double *row = &x[r * (size_t)len];
    int64_t best = 0;
    for (int64_t i = 1; i < len && !std::isnan(row[best]); ++i)
      if (above(row[i], row[best])) best = i;
    value[r] = row[best];
    index[r] = (double)best;
  }
}

ExecutorSpec max_spec(const aclTensor *self, int64_t dim, bool keepdim, const aclTensor *out, const aclTensor *indices,
                      DtypeSet types) {
  const TensorView &x = tensor(self, "self", types);
  const Along a = along(x, dim);
  if (a.len == 0) fail("cannot take the maximum of an empty dim");
  const Shape want = along_shape(x.shape, a, 1, keepdim);
  Slots slots{nn::slot(self, Io::Input)};
  if (out != nullptr) {  // MaxDim: the values too, in self's dtype
    if (tensor(out, "out", types, want).dtype != x.dtype) fail("out's dtype differs from self's");
    slots.push_back(nn::slot(out, Io::Output));
  }
  tensor(indices, out != nullptr ? "indices" : "out", kIndices, want);
  slots.push_back(nn::slot(indices, Io::Output));
  return {"", std::move(slots), workspace_for(x.numel()), [a, keepdim](const Slots &s) {
            Values value, index;
            row_max(gather(move_dim_last(view(s, 0), a.dim)), a.len, value, index);
            if (s.size() == 3) scatter(rows_of(view(s, 1), a, keepdim), value);
            scatter(rows_of(view(s, s.size() - 1), a, keepdim), index);
          }};
}

// The k best of each row, in rank order (ties by index): largest first, or smallest first.
void row_topk(const Values &x, int64_t len, int64_t k, bool largest, Values &values, Values &indices) {
  const size_t rows = len == 0 ? 0 : x.size() / (size_t)len;
  std::vector<int64_t> order((size_t)len);
  for (size_t r = 0; r < rows; ++r) {
    const double *row = &x[r * (size_t)len];
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [row, largest](int64_t i, int64_t j) {
      return largest ? above(row[i], row[j]) : above(row[j], row[i]);
    });
    for (int64_t i = 0; i < k; ++i) {
      values.push_back(row[order[(size_t)i]]);
      indices.push_back((double)order[(size_t)i]);
    }
  }
}

int64_t checked_index(double v, int64_t len) {
  if (!(v >= 0 && v < (double)len))
    throw KernelError("index " + std::to_string((int64_t)v) + " out of range [0, " + std::to_string(len) + ")");
  return (int64_t)v;
}

}  // namespace

extern "C" {

aclnnStatus aclnnArgMaxGetWorkspaceSize(const aclTensor *self, int64_t dim, bool keepdim, aclTensor *out,
                                        uint64_t *workspaceSize, aclOpExecutor **executor) {
  return phase1("ArgMax", workspaceSize, executor,
                [&] { return max_spec(self, dim, keepdim, nullptr, out, kArgMaxTypes); });
}

aclnnStatus aclnnMaxDimGetWorkspaceSize(const aclTensor *self, int64_t dim, bool keepdim, aclTensor *out,
                                        aclTensor *indices, uint64_t *workspaceSize, aclOpExecutor **executor) {
  return phase1("MaxDim", workspaceSize, executor, [&] {
    if (out == nullptr) throw ParamError{ACLNN_ERR_PARAM_NULLPTR, "out is NULL"};
    return max_spec(self, dim, keepdim, out, indices, kMaxDimTypes);
  });
}

// sorted must be true in CANN ("当前该参数仅支持取True"); false is accepted and gives the same, sorted, result.
aclnnStatus aclnnTopkGetWorkspaceSize(const aclTensor *self, int64_t k, int64_t dim, bool largest, bool /*sorted*/,
                                      aclTensor *valuesOut, aclTensor *indicesOut, uint64_t *workspaceSize,
                                      aclOpExecutor **executor) {
  return phase1("Topk", workspaceSize, executor, [&] {
    const TensorView &x = tensor(self, "self", kTopkTypes);
    const Along a = along(x, dim);
    if (k < 0 || k > a.len) fail("k " + std::to_string(k) + " is outside [0, " + std::to_string(a.len) + "]");
    const Shape want = along_shape(x.shape, a, k, true);
    if (tensor(valuesOut, "valuesOut", kTopkTypes, want).dtype != x.dtype)
      fail("valuesOut's dtype differs from self's");
    tensor(indicesOut, "indicesOut", dtypes({ACL_INT64}), want);
    return ExecutorSpec{"",
                        {nn::slot(self, Io::Input), nn::slot(valuesOut, Io::Output), nn::slot(indicesOut, Io::Output)},
                        workspace_for(x.numel()),
                        [a, k, largest](const Slots &s) {
                          Values values, indices;
                          row_topk(gather(move_dim_last(view(s, 0), a.dim)), a.len, k, largest, values, indices);
                          scatter(move_dim_last(view(s, 1), a.dim), values);
                          scatter(move_dim_last(view(s, 2), a.dim), indices);
                        }};
  });
}

// out = self's slices along dim at `index` (0-D or 1-D, INT32/INT64); an index out of range is a kernel fault.
aclnnStatus aclnnIndexSelectGetWorkspaceSize(const aclTensor *self, int64_t dim, const aclTensor *index, aclTensor *out,
                                             uint64_t *workspaceSize, aclOpExecutor **executor) {
  return phase1("IndexSelect", workspaceSize, executor, [&] {
    const TensorView &x = tensor(self, "self", kAny), &idx = tensor(index, "index", kIndices);
    if (idx.shape.size() > 1) fail("index must be 0-D or 1-D, has shape " + show(idx.shape));
    const Along a = along(x, dim);
    const Shape want = along_shape(x.shape, a, idx.numel(), true);
    if (tensor(out, "out", kAny, want).dtype != x.dtype) fail("out's dtype differs from self's");
    return ExecutorSpec{
        "", {nn::slot(self, Io::Input), nn::slot(index, Io::Input), nn::slot(out, Io::Output)}, 0, [a](const Slots &s) {
          const Values x = gather(move_dim_last(view(s, 0), a.dim)), ids = gather(view(s, 1));
          const size_t rows = a.len == 0 ? 0 : x.size() / (size_t)a.len;
          Values o;
          for (size_t r = 0; r < rows; ++r)
            for (double id : ids) o.push_back(x[r * (size_t)a.len + (size_t)checked_index(id, a.len)]);
          scatter(move_dim_last(view(s, 2), a.dim), o);
        }};
  });
}

// Running sums along dim in `dtype` (out's): self is cast to it first, as CANN's Cumsum does.
aclnnStatus aclnnCumsumGetWorkspaceSize(const aclTensor *self, int64_t dim, aclDataType dtype, aclTensor *out,
                                        uint64_t *workspaceSize, aclOpExecutor **executor) {
  return phase1("Cumsum", workspaceSize, executor, [&] {
    const TensorView &x = tensor(self, "self", kCumsumTypes), &o = tensor(out, "out", kCumsumTypes);
    if (o.dtype != dtype) fail("dtype " + std::to_string(dtype) + " differs from out's " + std::to_string(o.dtype));
    if (!can_cast(x.dtype, o.dtype)) fail("self's dtype cannot be cast to out's");
    require_shape(o, x.shape, "out");
    const int64_t d = wrap_dim(dim, x.shape.size());
    const int64_t len = x.shape.empty() ? 1 : x.shape[(size_t)d];
    return ExecutorSpec{"", {nn::slot(self, Io::Input), nn::slot(out, Io::Output)}, 0, [d, len, dtype](const Slots &s) {
                          Values x = gather(move_dim_last(view(s, 0), d));
                          for (size_t row = 0; len > 0 && row < x.size(); row += (size_t)len) {
                            double sum = 0;
                            for (size_t i = 0; i < (size_t)len; ++i) x[row + i] = sum += cast_value(x[row + i], dtype);
                          }
                          scatter(move_dim_last(view(s, 1), d), x);
                        }};
  });
}

}  // extern "C"
