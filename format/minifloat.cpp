#include "format/minifloat.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

#include "format/half.h"

namespace msprobe::format {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// A sign, `e_bits` of exponent (bias `bias`, 0: subnormal) and `m_bits` of mantissa; no special values.
float ieee_like(uint32_t code, int e_bits, int m_bits, int bias) {
  const bool negative = ((code >> (e_bits + m_bits)) & 1u) != 0;
  const int e = static_cast<int>((code >> m_bits) & ((1u << e_bits) - 1u));
  const int m = static_cast<int>(code & ((1u << m_bits) - 1u));
  const float magnitude = e == 0 ? std::ldexp(static_cast<float>(m), 1 - bias - m_bits)
                                 : std::ldexp(static_cast<float>((1 << m_bits) + m), e - bias - m_bits);
  return negative ? -magnitude : magnitude;
}

// HiF8's exponent bits and mantissa bits after its 4-bit field (code bits 6..3), by the field's leading pattern.
struct HiF8Layout {
  int exponent_bits, mantissa_bits;
};
HiF8Layout hif8_layout(uint32_t field) {
  if (field == 1) return {0, 3};         // 0001
  if ((field >> 1) == 1) return {1, 3};  // 001x
  if ((field >> 2) == 1) return {2, 3};  // 01xx
  if ((field >> 2) == 2) return {3, 2};  // 10xx
  return {4, 1};                         // 11xx
}

float hif8_value(uint32_t code) {
  if (code == 0x80) return kNaN;
  const bool negative = (code & 0x80u) != 0;
  const uint32_t v = code & 0x7fu;
  if (v == 0x6f) return negative ? -kInf : kInf;
  float magnitude = 0.0f;
  if ((v >> 3) == 0) {  // 0000 + m: 2^(m - 23), m = 0 zero
    const int m = static_cast<int>(v & 7u);
    magnitude = m == 0 ? 0.0f : std::ldexp(1.0f, m - 23);
  } else {
    const HiF8Layout l = hif8_layout(v >> 3);
    int exponent = 0;
    if (l.exponent_bits > 0) {
      // The exponent's bits: its sign first, then the magnitude without its leading one.
      const uint32_t bits = (v >> l.mantissa_bits) & ((1u << l.exponent_bits) - 1u);
      const uint32_t top = 1u << (l.exponent_bits - 1);
      const int magnitude_bits = static_cast<int>((bits & (top - 1u)) | top);
      exponent = (bits & top) != 0 ? -magnitude_bits : magnitude_bits;
    }
    const int m = static_cast<int>(v & ((1u << l.mantissa_bits) - 1u));
    magnitude = std::ldexp(static_cast<float>((1 << l.mantissa_bits) + m), exponent - l.mantissa_bits);
  }
  return negative ? -magnitude : magnitude;
}

float code_value(DType t, uint32_t code) {
  switch (t) {
    case DType::HiF8: return hif8_value(code);
    case DType::F8E5M2: return half_to_float(static_cast<uint16_t>(code << 8));
    case DType::F8E4M3FN: return (code & 0x7fu) == 0x7f ? kNaN : ieee_like(code, 4, 3, 7);
    case DType::F8E8M0: return code == 0xff ? kNaN : std::ldexp(1.0f, static_cast<int>(code) - 127);
    case DType::F6E3M2: return ieee_like(code, 3, 2, 3);
    case DType::F6E2M3: return ieee_like(code, 2, 3, 1);
    case DType::F4E2M1: return ieee_like(code, 2, 1, 1);
    case DType::F4E1M2: return ieee_like(code, 1, 2, 1);
    default: return kNaN;
  }
}

// Every code's value, made once per type (thread-safe static initialization).
template <DType t>
const std::array<float, 256> &values() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> a{};
    for (uint32_t c = 0; c < (1u << element_bits(t)); ++c) a[c] = code_value(t, c);
    return a;
  }();
  return table;
}

const std::array<float, 256> &values_of(DType t) {
  switch (t) {
    case DType::HiF8: return values<DType::HiF8>();
    case DType::F8E5M2: return values<DType::F8E5M2>();
    case DType::F8E4M3FN: return values<DType::F8E4M3FN>();
    case DType::F8E8M0: return values<DType::F8E8M0>();
    case DType::F6E3M2: return values<DType::F6E3M2>();
    case DType::F6E2M3: return values<DType::F6E2M3>();
    case DType::F4E2M1: return values<DType::F4E2M1>();
    default: return values<DType::F4E1M2>();
  }
}

}  // namespace

float narrow_to_float(DType t, uint32_t code) {
  if (!is_narrow_float(t)) return kNaN;
  return values_of(t)[code & ((1u << element_bits(t)) - 1u)];
}

uint32_t narrow_code_at(DType t, const void *data, uint64_t index) {
  const auto *p = static_cast<const unsigned char *>(data);
  const unsigned bits = element_bits(t);
  if (bits == 8) return p[index];
  const uint64_t at = index * bits;
  uint32_t word = p[at / 8];
  if (at % 8 + bits > 8) word |= static_cast<uint32_t>(p[at / 8 + 1]) << 8;  // an FP6 element across two bytes
  return (word >> (at % 8)) & ((1u << bits) - 1u);
}

void store_narrow_code(DType t, void *data, uint64_t index, uint32_t code) {
  auto *p = static_cast<unsigned char *>(data);
  const unsigned bits = element_bits(t);
  const uint64_t at = index * bits;
  const uint32_t mask = ((1u << bits) - 1u) << (at % 8);
  const uint32_t value = (code << (at % 8)) & mask;
  p[at / 8] = static_cast<unsigned char>((p[at / 8] & ~mask) | value);
  if (at % 8 + bits > 8) p[at / 8 + 1] = static_cast<unsigned char>((p[at / 8 + 1] & ~(mask >> 8)) | (value >> 8));
}

void widen_to_float(DType t, const void *data, uint64_t first, uint64_t count, float *out) {
  const std::array<float, 256> &table = values_of(t);
  if (element_bits(t) == 8) {
    const auto *p = static_cast<const unsigned char *>(data) + first;
    for (uint64_t i = 0; i < count; ++i) out[i] = table[p[i]];
    return;
  }
  for (uint64_t i = 0; i < count; ++i) out[i] = table[narrow_code_at(t, data, first + i)];
}

uint32_t float_to_narrow(DType t, double v) {
  const unsigned bits = element_bits(t);
  const uint32_t codes = 1u << bits, sign_bit = t == DType::F8E8M0 ? 0u : codes >> 1;
  if (t == DType::F4E2M1 || t == DType::F4E1M2)  // through bf16 first, as the cast does
    v = bf16_to_float(float_to_bf16(static_cast<float>(v)));
  if (std::isnan(v)) {
    switch (t) {
      case DType::HiF8: return 0x80;
      case DType::F8E5M2:
      case DType::F8E4M3FN: return 0x7f;
      case DType::F8E8M0: return 0xff;
      default: return 0;
    }
  }
  const std::array<float, 256> &table = values_of(t);
  const bool hif8 = t == DType::HiF8;
  if (hif8 && std::isinf(v)) return v > 0 ? 0x6f : 0xef;
  // Beyond the largest magnitude (HiF8: its Inf's stand-in) the nearest is that one: v is brought there first, so that
  // a huge v does not make every distance the same double.
  double top = hif8 ? 0x1.8p15 : 0.0;
  for (uint32_t c = 0; c < codes && !hif8; ++c)
    if (std::isfinite(table[c])) top = std::max(top, static_cast<double>(std::fabs(table[c])));
  if (std::fabs(v) > top) v = std::copysign(top, v);
  // Nearest among the finite codes of v's sign (HiF8's Inf stands for 1.5 * 2^15 there: from 1.25 * 2^15 up, Inf).
  uint32_t best = 0;
  double best_value = 0.0, best_distance = std::numeric_limits<double>::infinity();
  for (uint32_t c = 0; c < codes; ++c) {
    if (sign_bit != 0 && ((c & sign_bit) != 0) != std::signbit(v) && table[c] != 0.0f) continue;
    double value = table[c];
    if (hif8 && (c & 0x7fu) == 0x6f) value = std::copysign(0x1.8p15, value);
    if (!std::isfinite(value)) continue;
    const double distance = std::fabs(value - v);
    // Ties: to the even code (IEEE-like types), away from zero (HiF8).
    const bool better = distance < best_distance ||
                        (distance == best_distance &&
                         (hif8 ? std::fabs(value) > std::fabs(best_value) : (c & 1u) == 0 && (best & 1u) != 0));
    if (better) {
      best = c;
      best_value = value;
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace msprobe::format
