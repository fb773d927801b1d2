// CANN's dtype rules for mixed operands (ops-math docs/zh/context/deduction_relationship.md and
// conversion_relationship.md; opbase data_type_utils.h PromoteType / CanCast), over the real dtypes the kernels
// load and store. A binary op computes in the promoted dtype and casts the result to its output.
#pragma once
#include "acl/acl_base.h"

namespace fakecann::ops {

// TensorTensor promotion (table 1); ACL_DT_UNDEFINED where the table has no entry (an unsigned type above 8 bits
// with another type, or a dtype outside the table).
aclDataType promote(aclDataType a, aclDataType b);
// TensorScalar promotion (table 2): a scalar of `scalar`'s dtype with a tensor of `tensor`'s.
aclDataType promote_scalar(aclDataType tensor, aclDataType scalar);
// CanCast: a float never becomes an integer, nothing but a bool becomes a bool.
bool can_cast(aclDataType from, aclDataType to);
// `v` as dtype `t` holds it (rounded to fp16/bf16/fp32, truncated to an integer): "cast first" semantics.
double cast_value(double v, aclDataType t);

}  // namespace fakecann::ops
