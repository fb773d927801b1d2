// The 8- and 4-bit float types of CANN 9.x (aclDataType 34-37, 40, 41) as element codes: their values, and a double
// rounded into each as Ascend 950's Cast rounds it (math/cast/op_kernel/arch35/cast_struct.h):
// - HIFLOAT8 (opbase src/nnopbase/common/utils/hifloat8.cpp): sign, a prefix-coded exponent of -22..15 and 0-3
//   mantissa bits (fewer the larger the exponent); 0x80 is NaN, 0x6F / 0xEF are +-Inf. Rounding: to nearest, ties away
//   from zero ("TA"); beyond 1.25 * 2^15 it is Inf, below 2^-23 zero.
// - FLOAT8_E5M2 (bias 15, IEEE Inf and NaN) and FLOAT8_E4M3FN (bias 7, no Inf, NaN S.1111.111, largest 448): round to
//   nearest even. Beyond the largest finite value (and from Inf) in the device's SATURATION mode the largest finite
//   value of the sign, in INFNAN mode Inf (E5M2) or NaN (E4M3FN).
// - FLOAT4_E2M1 (0, 0.5 ... 6) and FLOAT4_E1M2 (0, 0.25 ... 1.75): a float goes through bf16 first (round to nearest
//   even twice, as the cast policies do), then saturates; no Inf or NaN (NaN reads 0).
// - FLOAT8_E8M0 (MX scales): 2^(e - 127), 0xFF NaN; read only (no operator writes it).
#pragma once
#include <cstdint>

#include "acl/acl_base.h"
#include "fakecann/export.h"

namespace fakecann {

FAKECANN_API bool is_minifloat(aclDataType t);
FAKECANN_API double minifloat_value(aclDataType t, uint8_t code);
// The code of `v` (`saturate`: the device's SATURATION mode, for the fp8 types).
FAKECANN_API uint8_t minifloat_code(aclDataType t, double v, bool saturate);

}  // namespace fakecann
