// The 8- and 4-bit float codecs of fakecann/minifloat.h. Decoding is each format's definition; encoding picks, from the
// format's finite values sorted by magnitude, the nearest to |v| (a tie to the even code for the IEEE-like formats,
// to the larger magnitude for HiFloat8), so that one rounding rule serves every format.
#include "fakecann/minifloat.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <vector>

namespace fakecann {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// An IEEE-like code without its sign: `ebits` exponent and `mbits` mantissa bits, bias 2^(ebits-1) - 1 (1 for
// FLOAT4_E1M2's one exponent bit: opbase float4_e1m2.cpp's EXP_BIAS, largest value 1.75), subnormals.
double ieee_like(uint32_t code, int ebits, int mbits) {
  const int bias = ebits == 1 ? 1 : (1 << (ebits - 1)) - 1;
  const uint32_t e = code >> mbits, m = code & ((1u << mbits) - 1);
  if (e == 0) return std::ldexp((double)m, 1 - bias - mbits);
  return std::ldexp((double)((1u << mbits) | m), (int)e - bias - mbits);
}

// HiFloat8 without its sign (7 bits): a prefix tells how many exponent bits follow; an exponent field's top bit is the
// exponent's sign (its magnitude's own top bit, always 1, implied); the rest is mantissa.
double hif8_magnitude(uint32_t code) {
  const uint32_t top4 = (code >> 3) & 0xF;
  if (top4 == 0) return (code & 7) == 0 ? 0.0 : std::ldexp(1.0, (int)(code & 7) - 23);  // denormal: 2^(c - 23)
  int prefix_bits, exp_bits;
  if (top4 == 1)
    prefix_bits = 4, exp_bits = 0;
  else if (top4 >> 1 == 1)
    prefix_bits = 3, exp_bits = 1;
  else if (top4 >> 2 == 1)
    prefix_bits = 2, exp_bits = 2;
  else if (top4 >> 2 == 2)
    prefix_bits = 2, exp_bits = 3;
  else
    prefix_bits = 2, exp_bits = 4;
  const int man_bits = 7 - prefix_bits - exp_bits;
  const uint32_t man = code & ((1u << man_bits) - 1);
  int exp = 0;
  if (exp_bits > 0) {
    const uint32_t field = (code >> man_bits) & ((1u << exp_bits) - 1);
    const bool negative = (field >> (exp_bits - 1)) & 1;
    const int magnitude = (int)(field | (1u << (exp_bits - 1)));
    exp = negative ? -magnitude : magnitude;
  }
  return std::ldexp(1.0 + std::ldexp((double)man, -man_bits), exp);
}

// The magnitude of a code without its sign; NaN for the codes that are no number.
double magnitude(aclDataType t, uint32_t code) {
  switch (t) {
    case ACL_HIFLOAT8: return code == 0x6F ? kInf : hif8_magnitude(code);
    case ACL_FLOAT8_E5M2: return (code >> 2) == 31 ? ((code & 3) == 0 ? kInf : kNaN) : ieee_like(code, 5, 2);
    case ACL_FLOAT8_E4M3FN: return code == 0x7F ? kNaN : ieee_like(code, 4, 3);
    case ACL_FLOAT4_E2M1: return ieee_like(code, 2, 1);
    case ACL_FLOAT4_E1M2: return ieee_like(code, 1, 2);
    default: return kNaN;
  }
}

int code_bits(aclDataType t) { return t == ACL_FLOAT4_E2M1 || t == ACL_FLOAT4_E1M2 ? 4 : 8; }

struct Entry {
  double value;
  uint8_t code;
};

// The finite magnitudes of a format, ascending; HiFloat8's Inf code is kept as the grid point 1.5 * 2^15 it takes
// (values rounding to it are Inf).
const std::vector<Entry> &grid(aclDataType t) {
  static std::array<std::vector<Entry>, 64> grids;
  std::vector<Entry> &g = grids[(size_t)t & 63];
  static std::once_flag once[64];
  std::call_once(once[(size_t)t & 63], [&] {
    const uint32_t codes = 1u << (code_bits(t) - 1);
    for (uint32_t c = 0; c < codes; ++c) {
      const double v = t == ACL_HIFLOAT8 && c == 0x6F ? std::ldexp(1.5, 15) : magnitude(t, c);
      if (std::isfinite(v)) g.push_back({v, (uint8_t)c});
    }
    std::sort(g.begin(), g.end(), [](const Entry &a, const Entry &b) { return a.value < b.value; });
  });
  return g;
}

uint8_t nearest(aclDataType t, double mag) {
  const std::vector<Entry> &g = grid(t);
  auto hi = std::lower_bound(g.begin(), g.end(), mag, [](const Entry &e, double v) { return e.value < v; });
  if (hi == g.end()) return g.back().code;
  if (hi == g.begin() || hi->value == mag) return hi->code;
  const Entry &lo = *(hi - 1);
  const double below = mag - lo.value, above = hi->value - mag;
  if (below != above) return below < above ? lo.code : hi->code;
  if (t == ACL_HIFLOAT8) return hi->code;          // ties away from zero
  return (lo.code & 1) == 0 ? lo.code : hi->code;  // ties to even
}

// An fp8 value beyond the largest finite one: its largest finite code when saturating, else Inf or NaN.
uint8_t fp8_overflow(aclDataType t, bool saturate) {
  if (t == ACL_FLOAT8_E5M2) return saturate ? 0x7B : 0x7C;
  return saturate ? 0x7E : 0x7F;
}

}  // namespace

bool is_minifloat(aclDataType t) {
  return t == ACL_HIFLOAT8 || t == ACL_FLOAT8_E5M2 || t == ACL_FLOAT8_E4M3FN || t == ACL_FLOAT8_E8M0 ||
         t == ACL_FLOAT4_E2M1 || t == ACL_FLOAT4_E1M2;
}

double minifloat_value(aclDataType t, uint8_t code) {
  if (t == ACL_FLOAT8_E8M0) return code == 0xFF ? kNaN : std::ldexp(1.0, (int)code - 127);
  if (t == ACL_HIFLOAT8 && code == 0x80) return kNaN;
  const int bits = code_bits(t);
  const uint32_t sign = (code >> (bits - 1)) & 1, rest = code & ((1u << (bits - 1)) - 1);
  const double m = magnitude(t, rest);
  return sign ? -m : m;
}

uint8_t minifloat_code(aclDataType t, double v, bool saturate) {
  if (t == ACL_FLOAT8_E8M0) return 0xFF;  // no operator writes it: NaN
  const int bits = code_bits(t);
  const uint8_t sign = std::signbit(v) ? (uint8_t)(1u << (bits - 1)) : 0;
  if (t == ACL_FLOAT4_E2M1 || t == ACL_FLOAT4_E1M2) {
    if (std::isnan(v)) return 0;
    const float f = (float)v;  // through bf16 first, round to nearest even
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if (std::isfinite(f)) u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
    float b;
    std::memcpy(&b, &u, 4);
    return sign | nearest(t, std::fabs((double)b));  // beyond the largest value: the largest (saturated)
  }
  if (std::isnan(v)) return t == ACL_HIFLOAT8 ? 0x80 : 0x7F;
  const double mag = std::fabs(v);
  if (t == ACL_HIFLOAT8) {
    if (mag == 0.0) return 0;  // -0 too: 0x80 is NaN
    return mag >= std::ldexp(1.0, 16) ? sign | 0x6F : sign | nearest(t, mag);
  }
  const std::vector<Entry> &g = grid(t);
  const double largest = g.back().value, half_ulp = (largest - g[g.size() - 2].value) / 2;
  const bool tie_up = mag == largest + half_ulp && (g.back().code & 1);  // a tie goes to the even code: overflow
  if (mag > largest + half_ulp || tie_up) return sign | fp8_overflow(t, saturate);
  return sign | nearest(t, mag);
}

}  // namespace fakecann
