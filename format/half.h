// fp16 / bf16 <-> float conversions, written so that loops over them vectorize (no branches on the element,
// only selects). Rounding is to nearest even, as the cast units of the NPU and torch do.
#pragma once
#include <bit>
#include <cstdint>

namespace msprobe::format {

inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t em = h & 0x7fffu;
  // Normal numbers: shift into place and rebias the exponent 15 -> 127. Inf/NaN need the exponent at 255, which
  // is the same rebias applied twice. Zero and subnormals are em * 2^-24, exactly representable in float.
  uint32_t bits = (em << 13) + 0x38000000u;
  bits += (0u - static_cast<uint32_t>(em >= 0x7c00u)) & 0x38000000u;
  const float sub = static_cast<float>(static_cast<int32_t>(em)) * 0x1p-24f;
  // Masks rather than ?: so that the compiler keeps both paths computed and the loop vectorizes.
  const uint32_t is_sub = 0u - static_cast<uint32_t>(em < 0x0400u);
  const uint32_t mag = (std::bit_cast<uint32_t>(sub) & is_sub) | (bits & ~is_sub);
  return std::bit_cast<float>(mag | sign);
}

inline float bf16_to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

inline uint16_t float_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN stays quiet NaN
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

inline uint16_t float_to_half(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (a < 0x38800000u) {                                               // half subnormal or zero
    // Adding 0.5 makes the FPU round the mantissa to the subnormal half grid (nearest even) for us.
    const float r = std::bit_cast<float>(a) + 0.5f;
    return static_cast<uint16_t>(sign | (std::bit_cast<uint32_t>(r) - 0x3f000000u));
  }
  const uint32_t odd = (a >> 13) & 1u;
  return static_cast<uint16_t>(sign | ((a + 0xc8000fffu + odd) >> 13));  // rebias 127 -> 15, round to even
}

}  // namespace msprobe::format
