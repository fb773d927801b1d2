// What every aclnn op of libopapi is built from. An op's phase 1 is a `build` function that checks
// its arguments with the helpers below (which throw ParamError) and returns the executor spec: the
// slots (one per tensor-typed parameter, declaration order) and a kernel that runs on the stream
// worker. Kernels work on doubles (gather/scatter round to the dtype once, at the end) and reach
// every operand through a view, so strides, offsets and broadcasting (stride-0 views) come free.
#pragma once
#include "promotion.h"
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "aclnn_ops.h"  // every generated prototype: each definition is checked against the spec
#include "fakecann/dtype.h"
#include "fakecann/nn.h"
#include "fakecann/tensor_io.h"

namespace fakecann::ops {

using nn::ExecutorSpec;
using nn::Io;
using nn::Slot;
using Slots = std::vector<Slot>;
using Values = std::vector<double>;
using Shape = std::vector<int64_t>;

// A phase-1 argument error; phase1() turns it into its status and aclGetRecentErrMsg text.
struct ParamError {
  aclnnStatus code;
  std::string message;
};
[[noreturn]] void fail(const std::string &why);  // ACLNN_ERR_PARAM_INVALID
// ACLNN_ERR_INNER_TILING_ERROR: what an op whose aclnn layer is generated reports for shapes its tiling refuses.
[[noreturn]] void fail_tiling(const std::string &why);

// Sets of dtypes, as bit masks indexed by aclDataType.
using DtypeSet = uint64_t;
constexpr DtypeSet dtypes(std::initializer_list<aclDataType> types) {
  DtypeSet s = 0;
  for (aclDataType t : types) s |= DtypeSet{1} << t;
  return s;
}
inline constexpr DtypeSet kFloats = dtypes({ACL_FLOAT, ACL_FLOAT16, ACL_BF16});
inline constexpr DtypeSet kFloatsD = kFloats | dtypes({ACL_DOUBLE});
inline constexpr DtypeSet kSignedInts = dtypes({ACL_INT8, ACL_INT16, ACL_INT32, ACL_INT64});
inline constexpr DtypeSet kArith = kFloatsD | kSignedInts | dtypes({ACL_UINT8, ACL_BOOL});
inline constexpr DtypeSet kIndices = dtypes({ACL_INT32, ACL_INT64});

// Argument checks. Null required argument -> ACLNN_ERR_PARAM_NULLPTR; destroyed handle, dtype outside
// `allowed`, wrong shape, bad dim -> ACLNN_ERR_PARAM_INVALID.
const TensorView &tensor(const aclTensor *t, const char *name, DtypeSet allowed);
const TensorView &tensor(const aclTensor *t, const char *name, DtypeSet allowed, const Shape &shape);
// NULL allowed (returns nullptr) unless `required`, e.g. for an output that outputMask asks for.
const TensorView *optional_tensor(const aclTensor *t, const char *name, DtypeSet allowed);
const TensorView *optional_tensor(const aclTensor *t, const char *name, DtypeSet allowed, const Shape &shape,
                                  bool required = false);
double scalar(const aclScalar *s, const char *name);
std::vector<double> scalar_list(const aclScalarList *l, const char *name);  // each member as scalar() reads it
const std::vector<int64_t> &int_array(const aclIntArray *a, const char *name);
std::vector<bool> bool_array(const aclBoolArray *a, const char *name);
std::vector<const TensorView *> tensor_list(const aclTensorList *l, const char *name, DtypeSet allowed);
void require_shape(const TensorView &v, const Shape &want, const char *name);

// CANN's type promotion of two tensors and its CanCast: promotion.h, the one statement of both.
inline aclDataType promote_types(aclDataType a, aclDataType b) { return promote(a, b); }
// `v` rounded as a value of dtype t (a computation carried out in t).
double round_to(aclDataType t, double v);
int64_t wrap_dim(int64_t dim, size_t rank);             // negative counts from the end
Shape broadcast_shape(const Shape &a, const Shape &b);  // numpy rules
int64_t numel(const Shape &s);
std::string show(const Shape &s);

// Views built inside kernels (from the slot views, which carry the addresses bound at launch).
inline const TensorView &view(const Slots &s, size_t i) { return s[i].views[0]; }
TensorView expand(TensorView v, const Shape &to);     // broadcast with stride-0 dims
TensorView move_dim_last(TensorView v, int64_t dim);  // rows along `dim` become contiguous
TensorView unsqueeze(TensorView v, size_t pos);       // size-1 dim inserted at pos
// Maps each element (row-major over `shape`) to its index in the reduction over `dims` (sorted, unique).
std::vector<size_t> reduce_index(const Shape &shape, const std::vector<int64_t> &dims, Shape *reduced);

// Scratch device memory a real kernel of this size asks for (non-zero: phase 2 must supply it).
uint64_t workspace_for(int64_t elements);

// Phase 1 of every op: builds the spec, or maps the ParamError thrown by `build` to its status.
aclnnStatus phase1(const char *op, uint64_t *workspaceSize, aclOpExecutor **executor,
                   const std::function<ExecutorSpec()> &build);

}  // namespace fakecann::ops
