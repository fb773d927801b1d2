#include "format/stats.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "format/half.h"
#include "format/minifloat.h"

namespace msprobe::format {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct Partial {
  double sum = 0.0, sumsq = 0.0, max = -kInf, min = kInf;
  uint64_t nan = 0, pinf = 0, ninf = 0;
};

// The one pass. `value` maps an element to the number the statistics are taken over (already rounded to the
// analysis dtype), `orig` to the number whose NaN/Inf are counted. kLanes independent accumulators keep the
// floating-point order fixed per lane, which is what lets the compiler vectorize at -O2 without -ffast-math.
// NaN is ignored by the comparisons here and counted instead; finish() turns a NaN count into NaN results.
constexpr int kLanes = 8;

template <bool kCheckFinite, class T, class Value, class Orig>
void accumulate(const unsigned char *bytes, uint64_t n, Partial &out, Value value, Orig orig) {
  double s[kLanes] = {}, q[kLanes] = {}, mx[kLanes], mn[kLanes];
  int64_t nn[kLanes] = {}, pi[kLanes] = {}, ni[kLanes] = {};
  for (int j = 0; j < kLanes; ++j) mx[j] = -kInf, mn[j] = kInf;
  auto element = [bytes](uint64_t i) {
    T x;
    std::memcpy(&x, bytes + i * sizeof(T), sizeof(T));  // unaligned-safe; compiles to a plain load
    return x;
  };
  // One element into lane j (the same arithmetic for the vectorized body and the tail).
  auto add = [&](int j, const T x) {
    const double v = value(x);
    s[j] += v;
    q[j] += v * v;
    mx[j] = v > mx[j] ? v : mx[j];
    mn[j] = v < mn[j] ? v : mn[j];
    if constexpr (kCheckFinite) {
      const double o = orig(x);
      nn[j] += o != o;
      pi[j] += o == kInf;
      ni[j] += o == -kInf;
    }
  };
  uint64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) add(j, element(i + j));
  for (int j = 0; i < n; ++i, j = (j + 1) % kLanes) add(j, element(i));
  for (int j = 0; j < kLanes; ++j) {
    out.sum += s[j];
    out.sumsq += q[j];
    out.max = mx[j] > out.max ? mx[j] : out.max;
    out.min = mn[j] < out.min ? mn[j] : out.min;
    out.nan += static_cast<uint64_t>(nn[j]);
    out.pinf += static_cast<uint64_t>(pi[j]);
    out.ninf += static_cast<uint64_t>(ni[j]);
  }
}

double f32(double v) { return static_cast<double>(static_cast<float>(v)); }

// Float elements, the hot case (float32 and bf16 read in place, fp16/integers converted into float blocks). The
// data goes through in blocks of kBlock elements; in a block, max and min stay in float lanes (exact, and twice as
// many per vector as doubles) and the sums are taken in double in 2 x kFloatLanes independent lanes, which the
// compiler keeps in vector registers: kFloatLanes floats are one vector, and two sets of lanes hide the latency of the
// adds. (With one array of 16 lanes, GCC vectorizes the lane loop as a loop of two and keeps the lanes in memory: a
// store-to-load round trip on every add.) Each block's lanes are added into the running totals: a two-level sum,
// more exact than one long chain per lane.
//
// NaN/Inf cost nothing per element: a float squared and summed in double cannot overflow (FLT_MAX^2 * kBlock is far
// below DBL_MAX), so a block's sum of squares is finite exactly when all its elements are, and only a block that
// saw a NaN or an Inf (rare: that is an overflow) is scanned again to count them exactly.
//
// Compiled twice, for AVX2 and for the baseline, and chosen at load time (the same arithmetic in both: the AVX2
// clone does not enable FMA, so nothing is contracted and the statistics do not depend on the CPU). fp16 and
// integers are converted into a float block inside the same clone, so the conversion is vectorized with AVX2 too.
//
// One vector of floats: AVX2 on x86-64 (the baseline clone then runs it as two SSE2 vectors), else 128-bit SIMD
// (aarch64 NEON).
#if defined(__x86_64__)
constexpr int kFloatLanes = 8;
#else
constexpr int kFloatLanes = 4;
#endif
constexpr uint64_t kBlock = 2048;

// `element(i)` gives the i-th float of the block (0 <= i < n <= kBlock). The main loop takes the elements
// i .. i + 2 * kFloatLanes - 1 as two vectors, `first(i, j)` and `second(i, j)` for j < kFloatLanes, which may be
// any split of them into two (the sums do not depend on which lane an element goes to, beyond rounding).
template <class First, class Second, class Element>
inline __attribute__((always_inline)) void accumulate_float_block(First first, Second second, Element element,
                                                                  uint64_t n, Partial &out) {
  double s0[kFloatLanes] = {}, q0[kFloatLanes] = {}, s1[kFloatLanes] = {}, q1[kFloatLanes] = {};
  float mx[kFloatLanes], mn[kFloatLanes];
  for (int j = 0; j < kFloatLanes; ++j) mx[j] = -std::numeric_limits<float>::infinity(), mn[j] = -mx[j];
  uint64_t i = 0;
  // Two separate lane loops of one vector each (not one loop over 2 * kFloatLanes): see above.
  for (; i + 2 * kFloatLanes <= n; i += 2 * kFloatLanes) {
    for (int j = 0; j < kFloatLanes; ++j) {
      const float v = first(i, j);
      const double d = v;
      s0[j] += d;
      q0[j] += d * d;
      mx[j] = v > mx[j] ? v : mx[j];
      mn[j] = v < mn[j] ? v : mn[j];
    }
    for (int j = 0; j < kFloatLanes; ++j) {
      const float v = second(i, j);
      const double d = v;
      s1[j] += d;
      q1[j] += d * d;
      mx[j] = v > mx[j] ? v : mx[j];
      mn[j] = v < mn[j] ? v : mn[j];
    }
  }
  for (int j = 0; i < n; ++i, j = (j + 1) % kFloatLanes) {
    const float v = element(i);
    const double d = v;
    s0[j] += d;
    q0[j] += d * d;
    mx[j] = v > mx[j] ? v : mx[j];
    mn[j] = v < mn[j] ? v : mn[j];
  }
  // Pairwise across the lanes: short dependency chains, so the next block's loop overlaps with this.
  for (int j = 0; j < kFloatLanes; ++j) s0[j] += s1[j], q0[j] += q1[j];
  for (int w = kFloatLanes / 2; w > 0; w /= 2)
    for (int j = 0; j < w; ++j) {
      s0[j] += s0[j + w];
      q0[j] += q0[j + w];
      mx[j] = mx[j + w] > mx[j] ? mx[j + w] : mx[j];
      mn[j] = mn[j + w] < mn[j] ? mn[j + w] : mn[j];
    }
  out.sum += s0[0];
  out.sumsq += q0[0];
  out.max = mx[0] > out.max ? mx[0] : out.max;
  out.min = mn[0] < out.min ? mn[0] : out.min;
  if (!(q0[0] <= std::numeric_limits<double>::max()))  // NaN or +Inf: some element is NaN or +-Inf
    for (uint64_t k = 0; k < n; ++k) {
      const float v = element(k);
      out.nan += v != v;
      out.pinf += v == std::numeric_limits<float>::infinity();
      out.ninf += v == -std::numeric_limits<float>::infinity();
    }
}

struct Bf16ToFloat {
  float operator()(uint16_t x) const { return bf16_to_float(x); }
};

// Elements of type T at `p`, converted to float by `convert` a block at a time (a loop the compiler vectorizes on
// its own) and put through the float kernel. float32 itself is read in place.
template <class T, class Convert>
inline __attribute__((always_inline)) void accumulate_as_floats(const unsigned char *p, uint64_t n, Partial &out,
                                                                Convert convert) {
  auto load = [](const unsigned char *src, uint64_t i) {
    T x;
    std::memcpy(&x, src + i * sizeof(T), sizeof(T));  // unaligned-safe; compiles to a plain load
    return x;
  };
  // Consecutive elements: the first vector of a group of 2 * kFloatLanes is its first half.
  auto halves = [](auto element) {
    auto first = [element](uint64_t i, int j) { return element(i + j); };
    auto second = [element](uint64_t i, int j) { return element(i + kFloatLanes + j); };
    return std::pair{first, second};
  };
  if constexpr (std::is_same_v<T, float>) {
    for (uint64_t done = 0; done < n; done += kBlock) {
      const unsigned char *src = p + done * sizeof(float);
      auto element = [src, load](uint64_t i) { return load(src, i); };
      const auto [first, second] = halves(element);
      accumulate_float_block(first, second, element, std::min(kBlock, n - done), out);
    }
  } else if constexpr (std::is_same_v<Convert, Bf16ToFloat> && std::endian::native == std::endian::little) {
    // bf16 is the upper half of a float: read the data as 32-bit words, each two bf16 (little-endian: the element
    // with the lower index in the low half) and widen both in place, in registers: the even elements are the
    // first vector, the odd ones the second.
    auto word = [](const unsigned char *src, uint64_t k) {
      uint32_t w;
      std::memcpy(&w, src + k * sizeof(uint32_t), sizeof(uint32_t));
      return w;
    };
    for (uint64_t done = 0; done < n; done += kBlock) {
      const unsigned char *src = p + done * sizeof(uint16_t);
      auto element = [src, load](uint64_t i) { return bf16_to_float(load(src, i)); };
      auto even = [src, word](uint64_t i, int j) { return std::bit_cast<float>(word(src, i / 2 + j) << 16); };
      auto odd = [src, word](uint64_t i, int j) { return std::bit_cast<float>(word(src, i / 2 + j) & 0xffff0000u); };
      accumulate_float_block(even, odd, element, std::min(kBlock, n - done), out);
    }
  } else {
    float block[kBlock];
    auto convert_block = [&](const unsigned char *src, uint64_t m) {
      for (uint64_t i = 0; i < m; ++i) block[i] = convert(load(src, i));
    };
    auto element = [&block](uint64_t i) { return block[i]; };
    uint64_t done = 0;
    // Full blocks have a constant trip count: -O2's cheap vectorizer cost model needs that (no epilogue loop).
    for (; done + kBlock <= n; done += kBlock) {
      convert_block(p + done * sizeof(T), kBlock);
      const auto [first, second] = halves(element);
      accumulate_float_block(first, second, element, kBlock, out);
    }
    if (done < n) {
      convert_block(p + done * sizeof(T), n - done);
      const auto [first, second] = halves(element);
      accumulate_float_block(first, second, element, n - done, out);
    }
  }
}

// x86-64: an AVX2 clone beside the baseline SSE2 one, chosen at load time. Elsewhere (aarch64: NEON is baseline)
// the single plain version is already vectorized. Not in sanitizer builds: the clones' ifunc resolver runs during
// relocation, before the sanitizer runtime is up, and its instrumented code crashes the process at load.
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define MSPROBE_FLOAT_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define MSPROBE_FLOAT_CLONES
#endif

// Every dtype but float64 (and bool/raw) converts to float32 exactly, or is cast to it by msprobe's rules
// (integers). One cloned function for all of them (target_clones and templates do not mix).
MSPROBE_FLOAT_CLONES void accumulate_floats(DType t, const unsigned char *p, uint64_t n, Partial &out) {
  auto cast = [](auto x) { return static_cast<float>(x); };
  switch (t) {
    case DType::F32: accumulate_as_floats<float>(p, n, out, cast); break;
    case DType::F16: accumulate_as_floats<uint16_t>(p, n, out, [](uint16_t x) { return half_to_float(x); }); break;
    case DType::BF16: accumulate_as_floats<uint16_t>(p, n, out, Bf16ToFloat{}); break;
    case DType::I8: accumulate_as_floats<int8_t>(p, n, out, cast); break;
    case DType::I16: accumulate_as_floats<int16_t>(p, n, out, cast); break;
    case DType::I32: accumulate_as_floats<int32_t>(p, n, out, cast); break;
    case DType::I64: accumulate_as_floats<int64_t>(p, n, out, cast); break;
    case DType::U8: accumulate_as_floats<uint8_t>(p, n, out, cast); break;
    case DType::U16: accumulate_as_floats<uint16_t>(p, n, out, cast); break;
    case DType::U32: accumulate_as_floats<uint32_t>(p, n, out, cast); break;
    case DType::U64: accumulate_as_floats<uint64_t>(p, n, out, cast); break;
    case DType::HiF8:
    case DType::F8E5M2:
    case DType::F8E4M3FN:
    case DType::F8E8M0:
    case DType::F6E3M2:
    case DType::F6E2M3:
    case DType::F4E2M1:
    case DType::F4E1M2:  // widened to F32 first (StatsAccumulator::update)
    case DType::F64:
    case DType::Bool:
    case DType::Raw: break;
  }
}

// fp16/bf16/fp32 -> double is exact, so StatPrecision changes only how Mean and Norm are rounded (finish()).
Partial accumulate_any(DType t, const unsigned char *p, uint64_t n) {
  Partial a;
  switch (t) {
    case DType::F64: {
      // Low and high precision alike cast float64 to float32 (msprobe), but the counts see the real values.
      auto v = [](double x) { return f32(x); };
      auto o = [](double x) { return x; };
      accumulate<true, double>(p, n, a, v, o);
      break;
    }
    case DType::Bool:
    case DType::Raw: break;
    default: accumulate_floats(t, p, n, a); break;
  }
  return a;
}

// Non-zero bytes, counted in fixed-size blocks with a narrow counter (the shape -O2 vectorizes) and summed into
// 64 bits.
uint64_t count_nonzero(const unsigned char *p, uint64_t n) {
  constexpr uint64_t kBlock = 4096;
  uint64_t total = 0, done = 0;
  for (; done + kBlock <= n; done += kBlock) {
    uint32_t c = 0;
    for (uint64_t i = 0; i < kBlock; ++i) c += p[done + i] != 0;
    total += c;
  }
  for (; done < n; ++done) total += p[done] != 0;
  return total;
}

// The dtype Mean and Norm are reported in (see the header).
DType result_dtype(DType t, StatPrecision prec) {
  if (prec == StatPrecision::High) return DType::F32;
  if (t == DType::F16 || t == DType::BF16 || t == DType::F32) return t;
  return DType::F32;
}

// A 0-d tensor's element in its own type.
StatValue scalar_value(DType t, const unsigned char *p) {
  auto load = [p](auto x) {
    std::memcpy(&x, p, sizeof(x));
    return x;
  };
  switch (t) {
    case DType::F32: return StatValue::of_real(load(float{}));
    case DType::F64: return StatValue::of_real(load(double{}));
    case DType::F16: return StatValue::of_real(half_to_float(load(uint16_t{})));
    case DType::BF16: return StatValue::of_real(bf16_to_float(load(uint16_t{})));
    case DType::I8: return StatValue::of_integer(load(int8_t{}));
    case DType::I16: return StatValue::of_integer(load(int16_t{}));
    case DType::I32: return StatValue::of_integer(load(int32_t{}));
    case DType::I64: return StatValue::of_integer(load(int64_t{}));
    case DType::U8: return StatValue::of_integer(load(uint8_t{}));
    case DType::U16: return StatValue::of_integer(load(uint16_t{}));
    case DType::U32: return StatValue::of_integer(load(uint32_t{}));
    case DType::U64: return StatValue::of_unsigned(load(uint64_t{}));
    case DType::HiF8:
    case DType::F8E5M2:
    case DType::F8E4M3FN:
    case DType::F8E8M0:
    case DType::F6E3M2:
    case DType::F6E2M3:
    case DType::F4E2M1:
    case DType::F4E1M2: return StatValue::of_real(narrow_to_float(t, narrow_code_at(t, p, 0)));
    case DType::Bool:
    case DType::Raw: break;
  }
  return StatValue::null();
}

}  // namespace

double StatValue::as_double() const {
  switch (kind) {
    case Kind::Real: return real;
    case Kind::Integer: return static_cast<double>(integer);
    case Kind::Unsigned: return static_cast<double>(uinteger);
    case Kind::Bool: return boolean ? 1.0 : 0.0;
    case Kind::Null: break;
  }
  return kNaN;
}

double round_to_dtype(double v, DType dtype) {
  switch (dtype) {
    case DType::F32: return f32(v);
    case DType::F16: return half_to_float(float_to_half(static_cast<float>(v)));
    case DType::BF16: return bf16_to_float(float_to_bf16(static_cast<float>(v)));
    default: return v;
  }
}

StatsAccumulator::StatsAccumulator(DType dtype, StatPrecision precision)
    : dtype_(dtype), precision_(precision), max_(-kInf), min_(kInf) {}

void StatsAccumulator::update(const void *data, uint64_t count) {
  if (count == 0) return;
  const auto *p = static_cast<const unsigned char *>(data);
  if (count_ == 0) std::memcpy(first_, p, element_size(dtype_));
  auto add = [this](const Partial &a) {
    sum_ += a.sum;
    sumsq_ += a.sumsq;
    max_ = a.max > max_ ? a.max : max_;
    min_ = a.min < min_ ? a.min : min_;
    nan_ += a.nan;
    pinf_ += a.pinf;
    ninf_ += a.ninf;
  };
  if (dtype_ == DType::Bool) {
    nonzero_ += count_nonzero(p, count);
  } else if (is_narrow_float(dtype_)) {
    // Read as float32 (every value of theirs is one), a block at a time.
    float block[1024];
    for (uint64_t done = 0; done < count;) {
      const uint64_t n = std::min<uint64_t>(count - done, 1024);
      widen_to_float(dtype_, p, done, n, block);
      add(accumulate_any(DType::F32, reinterpret_cast<const unsigned char *>(block), n));
      done += n;
    }
  } else if (dtype_ != DType::Raw) {
    add(accumulate_any(dtype_, p, count));
  }
  count_ += count;
}

TensorStats StatsAccumulator::finish(bool zero_dim) const {
  TensorStats s;
  s.count = count_;
  s.nan_count = nan_;
  s.pos_inf_count = pinf_;
  s.neg_inf_count = ninf_;
  if (count_ == 0 || dtype_ == DType::Raw) return s;
  if (dtype_ == DType::Bool) {
    s.max = StatValue::of_bool(nonzero_ != 0);
    s.min = StatValue::of_bool(nonzero_ == count_);
    return s;
  }
  if (zero_dim && count_ == 1) {
    s.max = s.min = s.mean = s.norm = scalar_value(dtype_, first_);
    return s;
  }
  const DType rt = result_dtype(dtype_, precision_);
  const bool nan = nan_ != 0;
  s.max = StatValue::of_real(nan ? kNaN : max_);
  s.min = StatValue::of_real(nan ? kNaN : min_);
  s.mean = StatValue::of_real(round_to_dtype(sum_ / static_cast<double>(count_), rt));
  s.norm = StatValue::of_real(round_to_dtype(std::sqrt(sumsq_), rt));
  return s;
}

TensorStats compute_stats(DType dtype, const void *data, uint64_t count, bool zero_dim, StatPrecision precision) {
  StatsAccumulator acc(dtype, precision);
  acc.update(data, count);
  return acc.finish(zero_dim);
}

TensorStats compute_stats(DType dtype, const void *data, std::span<const int64_t> shape, StatPrecision precision) {
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw std::invalid_argument("compute_stats: negative dimension " + std::to_string(d));
    n *= static_cast<uint64_t>(d);
  }
  return compute_stats(dtype, data, n, shape.empty(), precision);
}

// ---- CRC-32, slicing by 8 -----------------------------------------------------------------------------------------
namespace {

constexpr std::array<std::array<uint32_t, 256>, 8> make_crc_tables() {
  std::array<std::array<uint32_t, 256>, 8> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? 0xedb88320u ^ (c >> 1) : c >> 1;
    t[0][i] = c;
  }
  for (int k = 1; k < 8; ++k)
    for (uint32_t i = 0; i < 256; ++i) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xffu];
  return t;
}

constexpr auto kCrc = make_crc_tables();

}  // namespace

uint32_t crc32_update(uint32_t crc, const void *data, size_t bytes) {
  const auto *p = static_cast<const unsigned char *>(data);
  uint32_t c = ~crc;
  for (; bytes >= 8; p += 8, bytes -= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    w ^= c;
    c = kCrc[7][w & 0xff] ^ kCrc[6][(w >> 8) & 0xff] ^ kCrc[5][(w >> 16) & 0xff] ^ kCrc[4][(w >> 24) & 0xff] ^
        kCrc[3][(w >> 32) & 0xff] ^ kCrc[2][(w >> 40) & 0xff] ^ kCrc[1][(w >> 48) & 0xff] ^ kCrc[0][w >> 56];
  }
  for (; bytes > 0; ++p, --bytes) c = kCrc[0][(c ^ *p) & 0xffu] ^ (c >> 8);
  return ~c;
}

uint32_t crc32_update_bf16_as_f32(uint32_t crc, const uint16_t *data, size_t count) {
  float buf[1024];
  while (count > 0) {
    const size_t n = count < 1024 ? count : 1024;
    for (size_t i = 0; i < n; ++i) buf[i] = bf16_to_float(data[i]);
    crc = crc32_update(crc, buf, n * sizeof(float));
    data += n;
    count -= n;
  }
  return crc;
}

uint32_t crc32_update_as_f32(uint32_t crc, DType t, const void *data, uint64_t count) {
  if (t == DType::BF16) return crc32_update_bf16_as_f32(crc, static_cast<const uint16_t *>(data), count);
  if (!is_narrow_float(t)) return crc32_update(crc, data, storage_bytes(t, count));
  float buf[1024];
  for (uint64_t done = 0; done < count;) {
    const uint64_t n = std::min<uint64_t>(count - done, 1024);
    widen_to_float(t, data, done, n, buf);
    crc = crc32_update(crc, buf, n * sizeof(float));
    done += n;
  }
  return crc;
}

std::string crc32_hex(uint32_t crc) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s(8, '0');
  for (int i = 7; i >= 0; --i, crc >>= 4) s[i] = kHex[crc & 0xfu];
  return s;
}

}  // namespace msprobe::format
