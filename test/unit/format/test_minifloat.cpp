// The 8-, 6- and 4-bit floats (format/minifloat.h): values of codes checked against their definitions written out by
// hand (not through the decoder's own formulas), packing, and the rounding the replay tool uses for Cast.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "format/minifloat.h"
#include "format/npy.h"
#include "format/stats.h"

namespace mc = msprobe::format;
using mc::DType;

namespace {

float value(DType t, uint32_t code) { return mc::narrow_to_float(t, code); }

TEST(Minifloat, Float8E4M3FN) {
  EXPECT_EQ(value(DType::F8E4M3FN, 0x00), 0.0f);
  EXPECT_EQ(value(DType::F8E4M3FN, 0x38), 1.0f);     // 0 0111 000
  EXPECT_EQ(value(DType::F8E4M3FN, 0x39), 1.125f);   // 0 0111 001
  EXPECT_EQ(value(DType::F8E4M3FN, 0x01), 0x1p-9f);  // smallest subnormal: 1/8 * 2^-6
  EXPECT_EQ(value(DType::F8E4M3FN, 0x08), 0x1p-6f);  // smallest normal
  EXPECT_EQ(value(DType::F8E4M3FN, 0x7e), 448.0f);   // largest
  EXPECT_EQ(value(DType::F8E4M3FN, 0xfe), -448.0f);
  EXPECT_TRUE(std::isnan(value(DType::F8E4M3FN, 0x7f)));  // S.1111.111, no Inf
  EXPECT_TRUE(std::isnan(value(DType::F8E4M3FN, 0xff)));
  EXPECT_EQ(value(DType::F8E4M3FN, 0x78), 256.0f);  // 0 1111 000: a number, not Inf
}

TEST(Minifloat, Float8E5M2IsTheTopByteOfAHalf) {
  EXPECT_EQ(value(DType::F8E5M2, 0x3c), 1.0f);
  EXPECT_EQ(value(DType::F8E5M2, 0x7b), 57344.0f);
  EXPECT_EQ(value(DType::F8E5M2, 0x01), 0x1p-16f);
  EXPECT_EQ(value(DType::F8E5M2, 0x7c), INFINITY);
  EXPECT_EQ(value(DType::F8E5M2, 0xfc), -INFINITY);
  EXPECT_TRUE(std::isnan(value(DType::F8E5M2, 0x7d)));
}

TEST(Minifloat, Float8E8M0) {
  EXPECT_EQ(value(DType::F8E8M0, 127), 1.0f);
  EXPECT_EQ(value(DType::F8E8M0, 130), 8.0f);
  EXPECT_EQ(value(DType::F8E8M0, 0), 0x1p-127f);
  EXPECT_EQ(value(DType::F8E8M0, 254), 0x1p127f);
  EXPECT_TRUE(std::isnan(value(DType::F8E8M0, 255)));
}

// HiF8: sign, 4-bit field, then exponent and mantissa bits by the field (the header's table).
TEST(Minifloat, HiFloat8) {
  EXPECT_EQ(value(DType::HiF8, 0x00), 0.0f);
  EXPECT_TRUE(std::isnan(value(DType::HiF8, 0x80)));
  EXPECT_EQ(value(DType::HiF8, 0x6f), INFINITY);
  EXPECT_EQ(value(DType::HiF8, 0xef), -INFINITY);
  EXPECT_EQ(value(DType::HiF8, 0x01), 0x1p-22f);  // 0000 001: 2^(1 - 23)
  EXPECT_EQ(value(DType::HiF8, 0x07), 0x1p-16f);  // 0000 111
  EXPECT_EQ(value(DType::HiF8, 0x08), 1.0f);      // 0001 000: exponent 0, mantissa 000
  EXPECT_EQ(value(DType::HiF8, 0x0f), 1.875f);    // 0001 111
  EXPECT_EQ(value(DType::HiF8, 0x88), -1.0f);
  EXPECT_EQ(value(DType::HiF8, 0x10), 2.0f);             // 001 0 000: exponent +1
  EXPECT_EQ(value(DType::HiF8, 0x18), 0.5f);             // 001 1 000: exponent -1
  EXPECT_EQ(value(DType::HiF8, 0x21), 4.5f);             // 01 00 001: exponent +2, mantissa 1/8
  EXPECT_EQ(value(DType::HiF8, 0x29), 8.0f * 1.125f);    // 01 01 001: exponent +3
  EXPECT_EQ(value(DType::HiF8, 0x31), 0.25f * 1.125f);   // 01 10 001: exponent -2
  EXPECT_EQ(value(DType::HiF8, 0x41), 16.0f * 1.25f);    // 10 000 01: exponent +4, mantissa 1/4
  EXPECT_EQ(value(DType::HiF8, 0x4d), 128.0f * 1.25f);   // 10 011 01: exponent +7
  EXPECT_EQ(value(DType::HiF8, 0x51), 0.0625f * 1.25f);  // 10 100 01: exponent -4
  EXPECT_EQ(value(DType::HiF8, 0x61), 256.0f * 1.5f);    // 11 0000 1: exponent +8, mantissa 1/2
  EXPECT_EQ(value(DType::HiF8, 0x6e), 32768.0f);         // 11 0111 0: exponent +15, the largest finite
  EXPECT_EQ(value(DType::HiF8, 0x7e), 0x1p-15f);         // 11 1111 0: exponent -15
  EXPECT_EQ(value(DType::HiF8, 0x70), 0x1p-8f);          // 11 1000 0: exponent -8
}

TEST(Minifloat, SixAndFourBitFloats) {
  const float e2m1[] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  const float e1m2[] = {0, 0.25f, 0.5f, 0.75f, 1, 1.25f, 1.5f, 1.75f};
  for (uint32_t c = 0; c < 8; ++c) {
    EXPECT_EQ(value(DType::F4E2M1, c), e2m1[c]) << c;
    EXPECT_EQ(value(DType::F4E2M1, c | 8), -e2m1[c]) << c;
    EXPECT_EQ(value(DType::F4E1M2, c), e1m2[c]) << c;
  }
  EXPECT_EQ(value(DType::F6E3M2, 0x1f), 28.0f);    // 0 111 11
  EXPECT_EQ(value(DType::F6E3M2, 0x04), 0.25f);    // 0 001 00, smallest normal
  EXPECT_EQ(value(DType::F6E3M2, 0x01), 0.0625f);  // subnormal 1/4 * 2^-2
  EXPECT_EQ(value(DType::F6E2M3, 0x1f), 7.5f);     // 0 11 111
  EXPECT_EQ(value(DType::F6E2M3, 0x3f), -7.5f);
  EXPECT_EQ(value(DType::F6E2M3, 0x01), 0.125f);
}

// FP4: two a byte, element 2k in the low nibble; FP6: four in three bytes, least significant bit first.
TEST(Minifloat, PackedElements) {
  const unsigned char fp4[] = {0x21, 0x8f};  // elements 1, 2, 15, 8
  EXPECT_EQ(mc::narrow_code_at(DType::F4E2M1, fp4, 0), 1u);
  EXPECT_EQ(mc::narrow_code_at(DType::F4E2M1, fp4, 1), 2u);
  EXPECT_EQ(mc::narrow_code_at(DType::F4E2M1, fp4, 2), 15u);
  EXPECT_EQ(mc::narrow_code_at(DType::F4E2M1, fp4, 3), 8u);
  float out[3];
  mc::widen_to_float(DType::F4E2M1, fp4, 1, 3, out);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -6.0f);
  EXPECT_EQ(out[2], -0.0f);
  // Four FP6 codes a, b, c, d fill 24 bits as a | b << 6 | c << 12 | d << 18.
  const uint32_t codes[] = {0x01, 0x3f, 0x2a, 0x15};
  const uint32_t bits = codes[0] | codes[1] << 6 | codes[2] << 12 | codes[3] << 18;
  const unsigned char fp6[] = {(unsigned char)bits, (unsigned char)(bits >> 8), (unsigned char)(bits >> 16)};
  unsigned char stored[3] = {0xff, 0xff, 0xff};
  for (uint32_t i = 0; i < 4; ++i) {
    EXPECT_EQ(mc::narrow_code_at(DType::F6E3M2, fp6, i), codes[i]) << i;
    mc::store_narrow_code(DType::F6E3M2, stored, i, codes[i]);
  }
  EXPECT_EQ(std::memcmp(stored, fp6, 3), 0);
}

TEST(Minifloat, EveryFiniteCodeRoundsToItself) {
  for (DType t :
       {DType::HiF8, DType::F8E5M2, DType::F8E4M3FN, DType::F6E3M2, DType::F6E2M3, DType::F4E2M1, DType::F4E1M2}) {
    for (uint32_t c = 0; c < (1u << mc::element_bits(t)); ++c) {
      const float v = mc::narrow_to_float(t, c);
      if (!std::isfinite(v) || v == 0.0f) continue;  // two zeros share a value
      EXPECT_EQ(mc::float_to_narrow(t, v), c) << mc::dtype_id(t) << " code " << c;
    }
  }
}

TEST(Minifloat, RoundingAsAscendsCast) {
  // Ties to even for the IEEE-like types.
  EXPECT_EQ(mc::float_to_narrow(DType::F8E4M3FN, 1.0625), 0x38u);  // between 1 (even) and 1.125
  EXPECT_EQ(mc::float_to_narrow(DType::F8E4M3FN, 1.1875), 0x3au);  // between 1.125 and 1.25 (even)
  EXPECT_EQ(mc::float_to_narrow(DType::F8E4M3FN, 1.07), 0x39u);
  // SATURATION: the largest finite value, also from Inf.
  EXPECT_EQ(mc::float_to_narrow(DType::F8E4M3FN, 1000.0), 0x7eu);
  EXPECT_EQ(mc::float_to_narrow(DType::F8E4M3FN, -INFINITY), 0xfeu);
  EXPECT_EQ(mc::float_to_narrow(DType::F8E5M2, 1e6), 0x7bu);
  EXPECT_EQ(mc::float_to_narrow(DType::F8E4M3FN, NAN), 0x7fu);
  // HiF8: ties away from zero; Inf from 1.25 * 2^15.
  EXPECT_EQ(mc::float_to_narrow(DType::HiF8, 1.0625), 0x09u);
  EXPECT_EQ(mc::float_to_narrow(DType::HiF8, -1.0625), 0x89u);
  EXPECT_EQ(mc::float_to_narrow(DType::HiF8, 40960.0), 0x6fu);
  EXPECT_EQ(mc::float_to_narrow(DType::HiF8, 40959.0), 0x6eu);
  EXPECT_EQ(mc::float_to_narrow(DType::HiF8, 0x1p-23), 0x01u);
  EXPECT_EQ(mc::float_to_narrow(DType::HiF8, 0x1.fp-24), 0x00u);
  EXPECT_EQ(mc::float_to_narrow(DType::HiF8, NAN), 0x80u);
  // FP4: saturating, no NaN (0).
  EXPECT_EQ(mc::float_to_narrow(DType::F4E2M1, 100.0), 0x7u);
  EXPECT_EQ(mc::float_to_narrow(DType::F4E2M1, 2.5), 0x4u);  // between 2 (even) and 3
  EXPECT_EQ(mc::float_to_narrow(DType::F4E2M1, NAN), 0x0u);
  EXPECT_EQ(mc::float_to_narrow(DType::F4E1M2, -1.8), 0xfu);
}

// Statistics, npy and CRC read the narrow floats as float32.
TEST(Minifloat, StatisticsNpyAndCrcSeeFloat32) {
  const unsigned char e4m3[] = {0x38, 0x40, 0xb8, 0x7e};  // 1, 2, -1, 448
  const float widened[] = {1, 2, -1, 448};
  const mc::TensorStats s = mc::compute_stats(DType::F8E4M3FN, e4m3, 4);
  const mc::TensorStats f = mc::compute_stats(DType::F32, widened, 4);
  EXPECT_EQ(s.max, f.max);
  EXPECT_EQ(s.min, f.min);
  EXPECT_EQ(s.mean, f.mean);
  EXPECT_EQ(s.norm, f.norm);
  EXPECT_EQ(mc::crc32_update_as_f32(0, DType::F8E4M3FN, e4m3, 4), mc::crc32_update(0, widened, sizeof widened));
  // A 0-d tensor's value.
  EXPECT_EQ(mc::compute_stats(DType::F4E2M1, "\x0f", 1, true).max, mc::StatValue::of_real(-6.0));
  // Packed: FP4 [0.5, -6, 3] in two bytes.
  const unsigned char fp4[] = {0xf1, 0x05};
  const mc::TensorStats p = mc::compute_stats(DType::F4E2M1, fp4, 3);
  EXPECT_EQ(p.max, mc::StatValue::of_real(3.0));
  EXPECT_EQ(p.min, mc::StatValue::of_real(-6.0));
  EXPECT_EQ(p.count, 3u);
  struct Sink : mc::ByteSink {
    std::vector<unsigned char> bytes;
    void write(const void *d, size_t n) override {
      bytes.insert(bytes.end(), static_cast<const unsigned char *>(d), static_cast<const unsigned char *>(d) + n);
    }
  } sink;
  EXPECT_EQ(mc::write_npy_data(sink, DType::F4E2M1, fp4, 3), 12u);
  const float want[] = {0.5f, -6.0f, 3.0f};
  ASSERT_EQ(sink.bytes.size(), sizeof want);
  EXPECT_EQ(std::memcmp(sink.bytes.data(), want, sizeof want), 0);
}

}  // namespace
