// Element types of the stand-in's kernels: sizes, names and the fp16/bf16 conversions (round to
// nearest even, as the hardware's cast units do); the 8- and 4-bit float types are fakecann/minifloat.h's.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "acl/acl_base.h"
#include "fakecann/minifloat.h"
#include "fakecann/soc.h"

namespace fakecann {

// Bytes of one element; 0 for the types packed two to a byte (FLOAT4_E2M1, FLOAT4_E1M2: see dtype_bits) and those
// the stand-in does not store (FLOAT6, STRING).
inline uint64_t dtype_size(aclDataType t) {
  switch (t) {
    case ACL_FLOAT: case ACL_INT32: case ACL_UINT32: case ACL_COMPLEX32: return 4;
    case ACL_FLOAT16: case ACL_BF16: case ACL_INT16: case ACL_UINT16: return 2;
    case ACL_INT8: case ACL_UINT8: case ACL_BOOL: case ACL_INT4: case ACL_UINT1: return 1;
    case ACL_HIFLOAT8: case ACL_FLOAT8_E5M2: case ACL_FLOAT8_E4M3FN: case ACL_FLOAT8_E8M0: return 1;
    case ACL_INT64: case ACL_UINT64: case ACL_DOUBLE: case ACL_COMPLEX64: return 8;
    case ACL_COMPLEX128: return 16;
    default: return 0;
  }
}

// The 4-bit float types: two elements a byte, element 2k in the low nibble of byte k (the cast kernels' PACK4).
inline bool dtype_packed(aclDataType t) { return t == ACL_FLOAT4_E2M1 || t == ACL_FLOAT4_E1M2; }
inline uint64_t dtype_bits(aclDataType t) { return dtype_packed(t) ? 4 : 8 * dtype_size(t); }
// Bytes holding elements [0, n).
inline uint64_t dtype_bytes(aclDataType t, uint64_t n) { return (n * dtype_bits(t) + 7) / 8; }

// Types the kernels can load and store (everything numeric, no complex, INT4 or FLOAT6).
inline bool dtype_is_numeric(aclDataType t) {
  switch (t) {
    case ACL_FLOAT: case ACL_FLOAT16: case ACL_BF16: case ACL_DOUBLE: case ACL_INT8: case ACL_INT16:
    case ACL_INT32: case ACL_INT64: case ACL_UINT8: case ACL_UINT16: case ACL_UINT32: case ACL_UINT64:
    case ACL_BOOL: return true;
    default: return is_minifloat(t);
  }
}

inline bool dtype_is_float(aclDataType t) {
  return t == ACL_FLOAT || t == ACL_FLOAT16 || t == ACL_BF16 || t == ACL_DOUBLE;
}

inline float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu, bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) { mant <<= 1; --exp; }
      mant &= 0x3ffu;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0));
  if (absx >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (absx < 0x38800000u) {                                    // subnormal half or zero
    if (absx < 0x33000000u) return (uint16_t)sign;             // < 2^-25 rounds to zero
    uint32_t e = absx >> 23, m = (absx & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e;  // 14..24
    uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return (uint16_t)(sign | r);
  }
  uint32_t r = absx - 0x38000000u;  // rebias 127 -> 15
  uint32_t m = r & 0x1fffu;
  r >>= 13;
  if (m > 0x1000u || (m == 0x1000u && (r & 1u))) ++r;
  return (uint16_t)(sign | r);
}

inline float bf16_to_float(uint16_t b) {
  uint32_t bits = (uint32_t)b << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t float_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);  // quiet NaN
  uint32_t lsb = (x >> 16) & 1u;
  x += 0x7fffu + lsb;
  return (uint16_t)(x >> 16);
}

// Reads element `i` of a contiguous host buffer of type t as double.
inline double load_element(const void *p, aclDataType t, uint64_t i) {
  const char *c = static_cast<const char *>(p);
  if (dtype_packed(t)) return minifloat_value(t, (uint8_t)(((uint8_t)c[i / 2] >> (4 * (i % 2))) & 0xF));
  if (is_minifloat(t)) return minifloat_value(t, (uint8_t)c[i]);
  switch (t) {
    case ACL_FLOAT: { float v; std::memcpy(&v, c + 4 * i, 4); return v; }
    case ACL_DOUBLE: { double v; std::memcpy(&v, c + 8 * i, 8); return v; }
    case ACL_FLOAT16: { uint16_t v; std::memcpy(&v, c + 2 * i, 2); return half_to_float(v); }
    case ACL_BF16: { uint16_t v; std::memcpy(&v, c + 2 * i, 2); return bf16_to_float(v); }
    case ACL_INT8: return (double)reinterpret_cast<const int8_t *>(c)[i];
    case ACL_UINT8: return (double)reinterpret_cast<const uint8_t *>(c)[i];
    case ACL_BOOL: return c[i] != 0 ? 1.0 : 0.0;
    case ACL_INT16: { int16_t v; std::memcpy(&v, c + 2 * i, 2); return v; }
    case ACL_UINT16: { uint16_t v; std::memcpy(&v, c + 2 * i, 2); return v; }
    case ACL_INT32: { int32_t v; std::memcpy(&v, c + 4 * i, 4); return v; }
    case ACL_UINT32: { uint32_t v; std::memcpy(&v, c + 4 * i, 4); return v; }
    case ACL_INT64: { int64_t v; std::memcpy(&v, c + 8 * i, 8); return (double)v; }
    case ACL_UINT64: { uint64_t v; std::memcpy(&v, c + 8 * i, 8); return (double)v; }
    default: return 0.0;
  }
}

template <typename I>
inline I saturating_int(double v) {
  if (std::isnan(v)) return 0;
  // Truncation toward zero, as a float->int cast does on the device.
  return (I)std::trunc(v);
}

// Writes `v` as element `i` of a contiguous host buffer of type t, rounding to nearest even (the 8- and 4-bit float
// types as fakecann/minifloat.h rounds them, fp8 overflow by the device's saturation mode).
inline void store_element(void *p, aclDataType t, uint64_t i, double v) {
  char *c = static_cast<char *>(p);
  if (is_minifloat(t)) {
    const uint8_t code = minifloat_code(t, v, saturation_mode() == 0);
    if (!dtype_packed(t)) {
      c[i] = (char)code;
    } else {
      const unsigned shift = 4 * (i % 2);
      c[i / 2] = (char)(((uint8_t)c[i / 2] & ~(0xFu << shift)) | (uint32_t)code << shift);
    }
    return;
  }
  switch (t) {
    case ACL_FLOAT: { float f = (float)v; std::memcpy(c + 4 * i, &f, 4); break; }
    case ACL_DOUBLE: std::memcpy(c + 8 * i, &v, 8); break;
    case ACL_FLOAT16: { uint16_t h = float_to_half((float)v); std::memcpy(c + 2 * i, &h, 2); break; }
    case ACL_BF16: { uint16_t h = float_to_bf16((float)v); std::memcpy(c + 2 * i, &h, 2); break; }
    case ACL_BOOL: c[i] = (v != 0.0) ? 1 : 0; break;
    case ACL_INT8: { int8_t x = saturating_int<int8_t>(v); std::memcpy(c + i, &x, 1); break; }
    case ACL_UINT8: { uint8_t x = saturating_int<uint8_t>(v); std::memcpy(c + i, &x, 1); break; }
    case ACL_INT16: { int16_t x = saturating_int<int16_t>(v); std::memcpy(c + 2 * i, &x, 2); break; }
    case ACL_UINT16: { uint16_t x = saturating_int<uint16_t>(v); std::memcpy(c + 2 * i, &x, 2); break; }
    case ACL_INT32: { int32_t x = saturating_int<int32_t>(v); std::memcpy(c + 4 * i, &x, 4); break; }
    case ACL_UINT32: { uint32_t x = saturating_int<uint32_t>(v); std::memcpy(c + 4 * i, &x, 4); break; }
    case ACL_INT64: { int64_t x = saturating_int<int64_t>(v); std::memcpy(c + 8 * i, &x, 8); break; }
    case ACL_UINT64: { uint64_t x = saturating_int<uint64_t>(v); std::memcpy(c + 8 * i, &x, 8); break; }
    default: break;
  }
}

}  // namespace fakecann
