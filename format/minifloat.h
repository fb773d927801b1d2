// The 8-, 6- and 4-bit float types of CANN 9.x (aclDataType 34-41), read as float32 and, for the replay tool, rounded
// into. Every value of these types is exactly a float32, so widening loses nothing; msprobe casts them to float before
// statistics and saving, and so does the dump (spec §5).
//
// Codes (definitions read from opbase's op::HiFloat8, Float8E*, Float6E*, Float4E* and ops-math's Cast):
// - HiF8 (HIFLOAT8): sign, then a prefix-coded exponent field: 0000 + 3 bits m is 2^(m - 23) (m = 0: zero); 0001 +
//   3 mantissa bits is exponent 0; prefixes 001, 01, 10, 11 carry 1, 2, 3, 4 exponent bits (the first of them the
//   exponent's sign, the magnitude's leading one implied) and 3, 3, 2, 1 mantissa bits. 0x80 is NaN, 0x6F / 0xEF Inf.
// - F8E5M2: IEEE-like, bias 15, Inf and NaN (the top byte of an fp16). F8E4M3FN: bias 7, no Inf, S.1111.111 NaN.
// - F8E8M0: an exponent only, 2^(e - 127); 0xFF NaN.
// - F6E3M2 (bias 3), F6E2M3 (bias 1), F4E2M1 (bias 1), F4E1M2 (bias 1): subnormals at exponent 0, no Inf or NaN.
// Storage: elements of fewer than 8 bits are packed, element i at bits [i * w, i * w + w) of the bytes, least
// significant bit first: FP4's two a byte with element 2k in the low nibble (CANN's and torch's float4 layout); FP6
// four in three bytes by the same rule (CANN documents no FP6 tensor layout; no operator of its writes one yet).
#pragma once
#include <cstdint>

#include "format/format.h"

namespace msprobe::format {

// The value of one element's code (right-aligned in `code`). t must be a narrow float type.
float narrow_to_float(DType t, uint32_t code);
// Element `index` of a packed array of t at `data`, as its code.
uint32_t narrow_code_at(DType t, const void *data, uint64_t index);
// `count` elements of t from element `first` of the packed array at `data`, as floats.
void widen_to_float(DType t, const void *data, uint64_t first, uint64_t count, float *out);
// Writes element `index` of a packed array (the other bits of its bytes kept).
void store_narrow_code(DType t, void *data, uint64_t index, uint32_t code);

// The code Ascend's Cast gives `v` (round to nearest; ties to even, HiF8's away from zero; beyond the largest finite
// value the device's SATURATION mode: that value for FP8E5M2/E4M3FN, Inf for HiF8 past 1.25 * 2^15; FP4 through bf16
// first, saturating; NaN: the type's NaN, 0 for FP4 and FP6, which have none).
uint32_t float_to_narrow(DType t, double v);

}  // namespace msprobe::format
