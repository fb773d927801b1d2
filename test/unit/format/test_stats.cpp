// Statistics and CRC-32 against hand-derived values and a plain reference loop (the numpy comparison for every
// dtype is in test_collector_formats.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "format/half.h"
#include "format/stats.h"

namespace mc = msprobe::format;
using mc::DType;
using mc::StatValue;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

double real(const StatValue &v) {
  EXPECT_EQ(v.kind, StatValue::Kind::Real);
  return v.real;
}

TEST(Stats, MsprobeTestVector) {
  const float data[] = {1.0f, 2.0f};
  const auto s = mc::compute_stats(DType::F32, data, 2);
  EXPECT_EQ(real(s.max), 2.0);
  EXPECT_EQ(real(s.min), 1.0);
  EXPECT_EQ(real(s.mean), 1.5);
  // msprobe's value: sqrt(5) rounded to float32, printed by Python as 2.2360680103302.
  EXPECT_EQ(real(s.norm), static_cast<double>(std::sqrt(5.0f)));
  EXPECT_EQ(real(s.norm), 2.2360680103302);
  EXPECT_EQ(mc::crc32_hex(mc::crc32_update(0, data, sizeof data)), "2e3fa576");
}

TEST(Stats, EmptyGivesNullsAndRawHasNone) {
  for (DType t : {DType::F32, DType::Bool, DType::I64, DType::BF16}) {
    const auto s = mc::compute_stats(t, nullptr, 0);
    EXPECT_TRUE(s.max.is_null() && s.min.is_null() && s.mean.is_null() && s.norm.is_null());
    EXPECT_EQ(s.count, 0u);
  }
  const int64_t shape[] = {3, 0};
  EXPECT_TRUE(mc::compute_stats(DType::F32, nullptr, shape).max.is_null());
  const unsigned char raw[4] = {1, 2, 3, 4};
  const auto r = mc::compute_stats(DType::Raw, raw, 4);
  EXPECT_TRUE(r.max.is_null() && r.norm.is_null());
  EXPECT_EQ(r.count, 4u);
}

TEST(Stats, BoolIsAnyAndAll) {
  const uint8_t mixed[] = {0, 1, 0, 7};  // any non-zero byte is true
  auto s = mc::compute_stats(DType::Bool, mixed, 4);
  EXPECT_EQ(s.max, StatValue::of_bool(true));
  EXPECT_EQ(s.min, StatValue::of_bool(false));
  EXPECT_TRUE(s.mean.is_null() && s.norm.is_null());
  const uint8_t ones[] = {1, 1, 1};
  s = mc::compute_stats(DType::Bool, ones, 3);
  EXPECT_EQ(s.max, StatValue::of_bool(true));
  EXPECT_EQ(s.min, StatValue::of_bool(true));
  const uint8_t zeros[] = {0, 0};
  s = mc::compute_stats(DType::Bool, zeros, 2);
  EXPECT_EQ(s.max, StatValue::of_bool(false));
  EXPECT_EQ(s.min, StatValue::of_bool(false));
  const int64_t scalar_shape[] = {0};
  s = mc::compute_stats(DType::Bool, ones, std::span<const int64_t>(scalar_shape, 0));  // 0-d bool: any/all too
  EXPECT_EQ(s.max, StatValue::of_bool(true));
  EXPECT_TRUE(s.mean.is_null());
}

TEST(Stats, ZeroDimIsTheValueInItsOwnType) {
  const int64_t v = -(int64_t{1} << 40) - 3;  // not representable in float32
  auto s = mc::compute_stats(DType::I64, &v, 1, /*zero_dim=*/true);
  for (const StatValue *x : {&s.max, &s.min, &s.mean, &s.norm}) EXPECT_EQ(*x, StatValue::of_integer(v));
  const double d = 0.1;  // float64 0-d keeps all its bits (no float32 cast)
  s = mc::compute_stats(DType::F64, &d, std::span<const int64_t>{});
  EXPECT_EQ(real(s.norm), 0.1);
  const uint16_t h = mc::float_to_half(-1.5f);
  s = mc::compute_stats(DType::F16, &h, 1, true);
  EXPECT_EQ(real(s.norm), -1.5);  // msprobe clones the scalar into Norm, sign and all
  // The same element as a 1-d tensor goes through the float32 rules.
  s = mc::compute_stats(DType::I64, &v, 1, false);
  EXPECT_EQ(real(s.max), static_cast<double>(static_cast<float>(v)));
  EXPECT_EQ(real(s.norm), static_cast<double>(std::abs(static_cast<float>(v))));
}

TEST(Stats, IntegersAreCastToFloat32) {
  const int32_t data[] = {16777217, 1, -5};  // 2^24 + 1 is not a float32
  const auto s = mc::compute_stats(DType::I32, data, 3);
  EXPECT_EQ(real(s.max), 16777216.0);
  EXPECT_EQ(real(s.min), -5.0);
  const float mean = static_cast<float>((16777216.0 + 1 - 5) / 3);
  EXPECT_EQ(real(s.mean), static_cast<double>(mean));
  const uint64_t big[] = {std::numeric_limits<uint64_t>::max(), 0};
  const auto b = mc::compute_stats(DType::U64, big, 2);
  EXPECT_EQ(real(b.max), static_cast<double>(static_cast<float>(std::numeric_limits<uint64_t>::max())));
}

TEST(Stats, NanPropagatesAndInfIsArithmetic) {
  std::vector<float> v(37, 1.0f);
  v[20] = std::numeric_limits<float>::quiet_NaN();
  auto s = mc::compute_stats(DType::F32, v.data(), v.size());
  for (const StatValue *x : {&s.max, &s.min, &s.mean, &s.norm}) EXPECT_TRUE(std::isnan(real(*x)));
  EXPECT_EQ(s.nan_count, 1u);
  v[20] = std::numeric_limits<float>::infinity();
  v[3] = -std::numeric_limits<float>::infinity();
  s = mc::compute_stats(DType::F32, v.data(), v.size());
  EXPECT_EQ(real(s.max), kInf);
  EXPECT_EQ(real(s.min), -kInf);
  EXPECT_TRUE(std::isnan(real(s.mean)));  // inf + -inf
  EXPECT_EQ(real(s.norm), kInf);
  EXPECT_EQ(s.pos_inf_count, 1u);
  EXPECT_EQ(s.neg_inf_count, 1u);
  EXPECT_EQ(s.nan_count, 0u);
  EXPECT_TRUE(s.has_nan_or_inf());
  // All NaN: max/min are NaN, not the +-inf starting values.
  const float nans[] = {NAN, NAN};
  s = mc::compute_stats(DType::F32, nans, 2);
  EXPECT_TRUE(std::isnan(real(s.max)) && std::isnan(real(s.min)));
  // float64 beyond float32 range: the float32 cast makes it inf (msprobe), the counts see a finite value.
  const double huge[] = {1e300, 1.0};
  s = mc::compute_stats(DType::F64, huge, 2);
  EXPECT_EQ(real(s.max), kInf);
  EXPECT_EQ(s.pos_inf_count, 0u);
}

TEST(Stats, LowPrecisionRoundsMeanAndNormToTheTensorDtype) {
  // fp16: [1, 2, 4] -> mean 7/3 in fp16 is 2.333984375; norm sqrt(21) = 4.58257... -> fp16 4.58203125.
  const uint16_t h[] = {mc::float_to_half(1), mc::float_to_half(2), mc::float_to_half(4)};
  auto s = mc::compute_stats(DType::F16, h, 3);
  EXPECT_EQ(real(s.mean), 2.333984375);
  EXPECT_EQ(real(s.norm), 4.58203125);
  s = mc::compute_stats(DType::F16, h, 3, false, mc::StatPrecision::High);
  EXPECT_EQ(real(s.mean), static_cast<double>(7.0f / 3.0f));
  // A norm above fp16's range is inf in fp16 (as torch.norm on an fp16 tensor), finite with high precision.
  std::vector<uint16_t> big(4, mc::float_to_half(60000.0f));
  s = mc::compute_stats(DType::F16, big.data(), big.size());
  EXPECT_EQ(real(s.norm), kInf);
  EXPECT_EQ(real(s.max), 60000.0);
  s = mc::compute_stats(DType::F16, big.data(), big.size(), false, mc::StatPrecision::High);
  EXPECT_EQ(real(s.norm), 120000.0);
  // bf16 rounds to bf16: mean of [1, 0, 0] is 1/3, whose nearest bf16 is 171 * 2^-9.
  const uint16_t b[] = {mc::float_to_bf16(1.0f), 0, 0};
  s = mc::compute_stats(DType::BF16, b, 3);
  EXPECT_EQ(real(s.mean), 0.333984375);
  EXPECT_EQ(real(s.norm), 1.0);
}

// A plain reference: double accumulation in index order, float32 rounding at the end.
TEST(Stats, MatchesAPlainLoopForManyLengthsAndChunkings) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.5f, 3.0f);
  for (size_t n : {1u, 2u, 7u, 8u, 9u, 15u, 16u, 17u, 100u, 1001u, 65537u}) {
    std::vector<float> v(n);
    for (float &x : v) x = dist(rng);
    double sum = 0, sq = 0, mx = -kInf, mn = kInf;
    for (float x : v) sum += x, sq += double(x) * x, mx = std::max<double>(mx, x), mn = std::min<double>(mn, x);
    const auto s = mc::compute_stats(DType::F32, v.data(), n);
    EXPECT_EQ(real(s.max), mx);
    EXPECT_EQ(real(s.min), mn);
    EXPECT_NEAR(real(s.mean), double(float(sum / n)), std::abs(sum / n) * 1.2e-7);
    EXPECT_NEAR(real(s.norm), double(float(std::sqrt(sq))), std::sqrt(sq) * 1.2e-7);
    EXPECT_EQ(s.count, n);
    // Chunked updates (any element boundary, unaligned pointers) give the same max/min/count and a mean within
    // rounding of the summation order.
    std::vector<unsigned char> bytes(n * 4 + 1);
    std::memcpy(bytes.data() + 1, v.data(), n * 4);
    mc::StatsAccumulator acc(DType::F32);
    for (size_t done = 0, step = 1; done < n; done += step, step = step * 3 % 97 + 1)
      acc.update(bytes.data() + 1 + done * 4, std::min(step, n - done));
    const auto c = acc.finish();
    EXPECT_EQ(c.max, s.max);
    EXPECT_EQ(c.min, s.min);
    EXPECT_EQ(c.count, s.count);
    EXPECT_NEAR(real(c.mean), real(s.mean), std::abs(real(s.mean)) * 2.4e-7);
  }
}

// An independent reference for the float kernels (fp32, and fp16/bf16 widened to float32): one loop in index
// order, sums in long double, NaN ignored by max/min and counted.
struct Reference {
  long double sum = 0, sumsq = 0;
  double max = -kInf, min = kInf;
  uint64_t nan = 0, pinf = 0, ninf = 0;
  explicit Reference(const std::vector<float> &v) {
    for (float x : v) {
      if (std::isnan(x)) {
        ++nan;
        continue;
      }
      pinf += x == kInf;
      ninf += x == -kInf;
      sum += x;
      sumsq += static_cast<long double>(x) * x;
      max = std::max<double>(max, x);
      min = std::min<double>(min, x);
    }
  }
};

// `got` is `exact` rounded to nearest with `bits` significant bits (24: float32, 8: bf16, 11: fp16 normals), or one
// of its two neighbours on that grid when `exact` is within a hair of a tie (the summation orders differ).
void ExpectRoundedTo(double got, long double exact, int bits, const char *what) {
  if (std::isinf(got) || exact == 0) {
    EXPECT_EQ(got, static_cast<double>(exact)) << what;
    return;
  }
  const long double ulp = std::ldexp(1.0L, std::ilogb(static_cast<double>(exact)) - (bits - 1));
  EXPECT_LE(std::fabs(static_cast<long double>(got) - exact), ulp * 0.500001L) << what << " exact " << double(exact);
}

// Checks compute_stats on `bits` (dtype `t`) against the reference on their float32 values `v`.
template <class T>
void ExpectMatchesReference(DType t, const std::vector<T> &bits, const std::vector<float> &v, int mantissa_bits) {
  const Reference r(v);
  const size_t n = v.size();
  const auto s = mc::compute_stats(t, bits.data(), n);
  EXPECT_EQ(s.count, n);
  EXPECT_EQ(s.nan_count, r.nan);
  EXPECT_EQ(s.pos_inf_count, r.pinf);
  EXPECT_EQ(s.neg_inf_count, r.ninf);
  if (r.nan != 0) {
    for (const StatValue *x : {&s.max, &s.min, &s.mean, &s.norm}) EXPECT_TRUE(std::isnan(real(*x)));
    return;
  }
  EXPECT_EQ(real(s.max), r.max);
  EXPECT_EQ(real(s.min), r.min);
  if (r.pinf != 0 && r.ninf != 0) {
    EXPECT_TRUE(std::isnan(real(s.mean)));
  } else if (r.pinf + r.ninf != 0) {
    EXPECT_EQ(real(s.mean), r.pinf != 0 ? kInf : -kInf);
  } else {
    ExpectRoundedTo(real(s.mean), r.sum / n, mantissa_bits, "mean");
  }
  if (r.pinf + r.ninf != 0) {
    EXPECT_EQ(real(s.norm), kInf);
  } else {
    ExpectRoundedTo(real(s.norm), std::sqrt(r.sumsq), mantissa_bits, "norm");
  }
}

uint16_t to_bf16_truncated(float f) { return static_cast<uint16_t>(std::bit_cast<uint32_t>(f) >> 16); }

// Lengths around the vector width (8), the unrolled step (16) and the kernel's block (2048), with NaN/Inf placed
// in the vectorized body, in a later block and in the scalar tail.
const size_t kLengths[] = {1, 3, 15, 16, 17, 31, 33, 2047, 2048, 2049, 4096 + 17, 3 * 2048 + 5, 40001};

std::vector<float> random_floats(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.25f, scale);
  std::vector<float> v(n);
  for (float &x : v) x = dist(rng);
  return v;
}

// The specials go to positions that depend on the length: first element, body, last block, last element.
void plant(std::vector<float> &v, int pattern) {
  const size_t n = v.size();
  const float inf = std::numeric_limits<float>::infinity();
  switch (pattern) {
    case 1: v[n - 1] = inf; break;                                            // +Inf only, in the tail
    case 2: v[n / 2] = -inf, v[0] = -inf; break;                              // -Inf twice
    case 3: v[n / 3] = inf, v[n - 1] = -inf; break;                           // both: mean NaN
    case 4: v[(n * 7) / 8] = std::numeric_limits<float>::quiet_NaN(); break;  // NaN late
    case 5: v[0] = NAN, v[n - 1] = inf, v[n / 2] = -inf; break;               // NaN with Infs
    default: break;
  }
}

TEST(Stats, Bf16MatchesAnIndependentLoopWithNanInfAndOddLengths) {
  for (size_t n : kLengths)
    for (int pattern = 0; pattern <= 5; ++pattern) {
      SCOPED_TRACE(testing::Message() << "n " << n << " pattern " << pattern);
      std::vector<float> f = random_floats(n, static_cast<uint32_t>(n * 7 + pattern), 3.0f);
      plant(f, pattern);
      std::vector<uint16_t> b(n);
      std::vector<float> widened(n);
      for (size_t i = 0; i < n; ++i) {
        b[i] = to_bf16_truncated(f[i]);
        widened[i] = std::bit_cast<float>(static_cast<uint32_t>(b[i]) << 16);  // independent of half.h
      }
      ExpectMatchesReference(DType::BF16, b, widened, 8);
    }
}

TEST(Stats, Fp16AndFp32MatchAnIndependentLoopWithNanInfAndOddLengths) {
  for (size_t n : kLengths)
    for (int pattern = 0; pattern <= 5; ++pattern) {
      SCOPED_TRACE(testing::Message() << "n " << n << " pattern " << pattern);
      std::vector<float> f = random_floats(n, static_cast<uint32_t>(n * 11 + pattern), 2.0f);
      plant(f, pattern);
      ExpectMatchesReference(DType::F32, f, f, 24);
      // fp16: values on the fp16 grid (|x| < 2048 with 11 bits: multiples of 2^-10 scaled), kept as floats.
      std::vector<uint16_t> h(n);
      std::vector<float> hf(n);
      for (size_t i = 0; i < n; ++i) {
        h[i] = mc::float_to_half(f[i]);
        hf[i] = mc::half_to_float(h[i]);  // exhaustively checked against the bit patterns below
      }
      ExpectMatchesReference(DType::F16, h, hf, 11);
    }
}

// The kernels find NaN/Inf through a non-finite sum of squares; huge finite values must not look like that.
TEST(Stats, HugeFiniteValuesAreNotCountedAsInf) {
  const float big = std::numeric_limits<float>::max();
  std::vector<float> v(5000, big);
  v[1234] = -big;
  auto s = mc::compute_stats(DType::F32, v.data(), v.size());
  EXPECT_EQ(s.pos_inf_count + s.neg_inf_count + s.nan_count, 0u);
  EXPECT_EQ(real(s.max), static_cast<double>(big));
  EXPECT_EQ(real(s.min), -static_cast<double>(big));
  EXPECT_EQ(real(s.norm), kInf);  // sqrt(5000) * FLT_MAX overflows float32 (msprobe: torch.norm in fp32)
  EXPECT_EQ(real(s.mean), static_cast<double>(static_cast<float>(4998.0 * big / 5000)));
  s = mc::compute_stats(DType::F32, v.data(), v.size(), false, mc::StatPrecision::High);
  EXPECT_EQ(real(s.norm), kInf);
  std::vector<uint16_t> b(v.size(), to_bf16_truncated(big));  // 0x7f7f, bf16's largest finite value
  s = mc::compute_stats(DType::BF16, b.data(), b.size());
  EXPECT_EQ(s.pos_inf_count + s.neg_inf_count + s.nan_count, 0u);
  EXPECT_EQ(real(s.max), static_cast<double>(std::bit_cast<float>(0x7f7f0000u)));
  EXPECT_EQ(real(s.mean), real(s.max));
}

// bf16 is read two elements to a 32-bit word: odd offsets and odd chunk sizes must not pair the wrong halves.
TEST(Stats, Bf16ChunkedAndUnalignedGivesTheSameResults) {
  const size_t n = 5000;
  std::vector<float> f = random_floats(n, 3, 1.0f);
  f[4321] = -std::numeric_limits<float>::infinity();
  f[17] = 1e30f;  // the max, at an odd index
  f[2050] = -1e30f;
  std::vector<uint16_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = to_bf16_truncated(f[i]);
  const auto whole = mc::compute_stats(DType::BF16, b.data(), n);
  EXPECT_EQ(real(whole.max), static_cast<double>(std::bit_cast<float>(static_cast<uint32_t>(b[17]) << 16)));
  EXPECT_EQ(real(whole.min), -kInf);
  EXPECT_EQ(whole.neg_inf_count, 1u);
  for (size_t offset : {1u, 2u, 3u}) {
    std::vector<unsigned char> bytes(n * 2 + offset);
    std::memcpy(bytes.data() + offset, b.data(), n * 2);
    EXPECT_EQ(mc::compute_stats(DType::BF16, bytes.data() + offset, n).max, whole.max);
    mc::StatsAccumulator acc(DType::BF16);
    for (size_t done = 0, step = 1; done < n; done += step, step = step * 5 % 211 + 1)
      acc.update(bytes.data() + offset + done * 2, std::min(step, n - done));
    const auto c = acc.finish();
    EXPECT_EQ(c.max, whole.max);
    EXPECT_EQ(c.min, whole.min);
    EXPECT_EQ(c.neg_inf_count, 1u);
    EXPECT_EQ(c.pos_inf_count + c.nan_count, 0u);
    EXPECT_EQ(c.count, n);
  }
  // Without the Inf and the +-1e30 (which cancel: their sum with the rest depends on the order): the mean and norm
  // of every chunking agree with the whole (bf16 rounding of a double sum).
  b[4321] = b[17] = b[2050] = 0;
  const auto finite = mc::compute_stats(DType::BF16, b.data(), n);
  mc::StatsAccumulator acc(DType::BF16);
  for (size_t done = 0, step = 1; done < n; done += step, step = step * 3 % 97 + 1)
    acc.update(b.data() + done, std::min(step, n - done));
  const auto c = acc.finish();
  EXPECT_EQ(c.norm, finite.norm);
  EXPECT_EQ(c.mean, finite.mean);
}

// Integers go through the same float kernel (cast to float32 first): lengths across blocks, extreme values.
TEST(Stats, IntegersAcrossBlocks) {
  std::vector<int16_t> v(4099);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int16_t>((i * 7919) % 65536 - 32768);
  double sum = 0, sq = 0;
  for (int16_t x : v) sum += x, sq += double(x) * x;
  const auto s = mc::compute_stats(DType::I16, v.data(), v.size());
  EXPECT_EQ(real(s.max), *std::max_element(v.begin(), v.end()));
  EXPECT_EQ(real(s.min), *std::min_element(v.begin(), v.end()));
  EXPECT_EQ(real(s.mean), double(float(sum / v.size())));  // exact: integer sums fit a double
  EXPECT_EQ(real(s.norm), double(float(std::sqrt(sq))));
  EXPECT_EQ(s.nan_count + s.pos_inf_count + s.neg_inf_count, 0u);
}

TEST(Stats, HalfConversionsRoundToNearestEven) {
  EXPECT_EQ(mc::half_to_float(0x3c00), 1.0f);
  EXPECT_EQ(mc::half_to_float(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(mc::half_to_float(0x7bff), 65504.0f);
  EXPECT_TRUE(std::isinf(mc::half_to_float(0xfc00)) && mc::half_to_float(0xfc00) < 0);
  EXPECT_TRUE(std::isnan(mc::half_to_float(0x7e00)));
  EXPECT_EQ(std::signbit(mc::half_to_float(0x8000)), true);
  EXPECT_EQ(mc::float_to_half(65519.0f), 0x7bff);
  EXPECT_EQ(mc::float_to_half(65520.0f), 0x7c00);
  EXPECT_EQ(mc::float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie -> even
  EXPECT_EQ(mc::float_to_half(std::ldexp(1.0f, -25)), 0x0000);         // tie with 0 -> even (0)
  EXPECT_EQ(mc::float_to_half(std::ldexp(3.0f, -25)), 0x0002);         // 1.5 ulp -> 2
  EXPECT_EQ(mc::float_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);   // tie -> even
  EXPECT_EQ(mc::float_to_bf16(1.0f + std::ldexp(3.0f, -8)), 0x3f82);
  EXPECT_TRUE(std::isnan(mc::bf16_to_float(mc::float_to_bf16(NAN))));
  for (uint32_t h = 0; h < 0x10000; ++h) {  // every finite half survives the round trip
    const float f = mc::half_to_float(static_cast<uint16_t>(h));
    if (!std::isnan(f)) {
      EXPECT_EQ(mc::float_to_half(f), h) << h;
    }
  }
}

TEST(Crc32, KnownValuesAndStreaming) {
  EXPECT_EQ(mc::crc32_update(0, "123456789", 9), 0xcbf43926u);  // the standard check value
  EXPECT_EQ(mc::crc32_update(0, "", 0), 0u);
  EXPECT_EQ(mc::crc32_hex(0x0000abcdu), "0000abcd");
  std::vector<unsigned char> data(10007);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<unsigned char>(i * 31 + 7);
  // A bitwise reference (no tables).
  uint32_t ref = 0xffffffffu;
  for (unsigned char c : data) {
    ref ^= c;
    for (int k = 0; k < 8; ++k) ref = (ref >> 1) ^ (0xedb88320u & (0u - (ref & 1u)));
  }
  ref = ~ref;
  EXPECT_EQ(mc::crc32_update(0, data.data(), data.size()), ref);
  mc::Crc32 c;
  for (size_t i = 0; i < data.size(); i += 333) c.update(data.data() + i, std::min<size_t>(333, data.size() - i));
  EXPECT_EQ(c.value(), ref);
  EXPECT_EQ(mc::crc32_update(0, data.data() + 1, 100),
            mc::crc32_update(0, std::vector<unsigned char>(data.begin() + 1, data.begin() + 101).data(), 100));
}

TEST(Crc32, Bf16HashedAsFloat32) {
  std::vector<uint16_t> b(3000);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint16_t>(i * 977);
  std::vector<float> f(b.size());
  for (size_t i = 0; i < b.size(); ++i) f[i] = std::bit_cast<float>(static_cast<uint32_t>(b[i]) << 16);
  EXPECT_EQ(mc::crc32_update_bf16_as_f32(0, b.data(), b.size()), mc::crc32_update(0, f.data(), f.size() * 4));
}

}  // namespace
