// CANN's promotion and cast rules (promotion.h).
#include "promotion.h"

#include "fakecann/dtype.h"

namespace fakecann::ops {

namespace {

bool is_float(aclDataType t) { return dtype_is_float(t); }
bool is_wide_unsigned(aclDataType t) { return t == ACL_UINT16 || t == ACL_UINT32 || t == ACL_UINT64; }
bool in_table(aclDataType t) { return dtype_is_numeric(t); }

// Signed integers by width; uint8 ranks with int8 but mixes with it into int16.
int int_rank(aclDataType t) {
  switch (t) {
    case ACL_BOOL: return 0;
    case ACL_INT8:
    case ACL_UINT8: return 1;
    case ACL_INT16: return 2;
    case ACL_INT32: return 3;
    default: return 4;  // ACL_INT64
  }
}

aclDataType promote_floats(aclDataType a, aclDataType b) {
  if (a == ACL_DOUBLE || b == ACL_DOUBLE) return ACL_DOUBLE;
  return ACL_FLOAT;  // fp32 with anything, and fp16 with bf16
}

aclDataType promote_ints(aclDataType a, aclDataType b) {
  if (a == ACL_BOOL) return b;
  if (b == ACL_BOOL) return a;
  if (int_rank(a) == 1 && int_rank(b) == 1) return ACL_INT16;  // int8 with uint8
  return int_rank(a) >= int_rank(b) ? a : b;
}

}  // namespace

aclDataType promote(aclDataType a, aclDataType b) {
  if (!in_table(a) || !in_table(b)) return ACL_DT_UNDEFINED;
  if (a == b) return a;
  if (is_wide_unsigned(a) || is_wide_unsigned(b)) return ACL_DT_UNDEFINED;
  if (is_float(a) && is_float(b)) return promote_floats(a, b);
  if (is_float(a) || is_float(b)) return is_float(a) ? a : b;
  return promote_ints(a, b);
}

aclDataType promote_scalar(aclDataType tensor, aclDataType scalar) {
  if (!in_table(tensor) || !in_table(scalar)) return ACL_DT_UNDEFINED;
  if (is_float(tensor)) return tensor;  // a float tensor keeps its dtype whatever the scalar
  if (is_float(scalar)) return is_wide_unsigned(tensor) ? ACL_DT_UNDEFINED : ACL_FLOAT;
  if (tensor != ACL_BOOL) return tensor;  // integer tensor, integer or bool scalar
  return is_wide_unsigned(scalar) ? ACL_DT_UNDEFINED : scalar;
}

bool can_cast(aclDataType from, aclDataType to) {
  if (is_float(from) && !is_float(to)) return false;
  return from == ACL_BOOL || to != ACL_BOOL;
}

double cast_value(double v, aclDataType t) {
  unsigned char buf[8] = {};
  store_element(buf, t, 0, v);
  return load_element(buf, t, 0);
}

}  // namespace fakecann::ops
