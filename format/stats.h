// Tensor statistics as msprobe reports them (reference/msprobe_formats.md §1.6), and the CRC-32 that msprobe
// calls "md5". Everything works on contiguous host buffers, in one pass, and can be fed chunk by chunk.
//
// Rules (msprobe's get_stat_info, PyTorch and MindSpore alike):
// - Norm is the L2 norm over all elements.
// - empty tensor: Max/Min/Mean/Norm null.            - bool: Max = any, Min = all (JSON true/false), Mean/Norm null.
// - 0-d tensor: all four are the value itself, in its own type (an int stays an int, a negative value gives a
//   negative "Norm": msprobe clones the scalar into all four fields).
// - integers and float64 are cast to float32 first (so is everything with StatPrecision::High), the 8-, 6- and 4-bit
//   floats read as float32 (msprobe casts them to float: their Mean and Norm are float32 numbers).
// - NaN propagates: any NaN makes Max, Min, Mean and Norm NaN. Inf is ordinary arithmetic (Mean of +inf and -inf
//   is NaN). The counts of NaN/+Inf/-Inf are extra (for overflow checks) and count the original values.
//
// Precision. msprobe's default ("low") runs torch.max/mean/norm in the tensor's own dtype, so an fp16 tensor's Mean
// and Norm are fp16 numbers (a Norm above 65504 is inf) and an fp32 tensor's are fp32 numbers: msprobe's own unit
// test vector, fp32 [1, 2] -> Norm 2.2360680103302, is sqrt(5) rounded to float32. We reproduce that: sums are
// accumulated in double (more exact than the device's float accumulation) and Mean and Norm are then rounded to the
// result dtype — the tensor's dtype for f32/f16/bf16, float32 for ints and float64, and float32 for everything with
// StatPrecision::High. Max and Min are exact elements of that dtype already. A device result may differ from ours
// in the last bit of Mean/Norm (its accumulation order is not ours), never more.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "format/format.h"

namespace msprobe::format {

enum class StatPrecision : uint8_t { Low, High };

// One statistic: null, a real number, an integer (0-d integer tensors; Unsigned for uint64) or a bool (bool
// tensors).
struct StatValue {
  enum class Kind : uint8_t { Null, Real, Integer, Unsigned, Bool };
  Kind kind = Kind::Null;
  double real = 0.0;      // Kind::Real
  int64_t integer = 0;    // Kind::Integer
  uint64_t uinteger = 0;  // Kind::Unsigned
  bool boolean = false;   // Kind::Bool

  static StatValue null() { return {}; }
  static StatValue of_real(double v) { return {Kind::Real, v, 0, 0, false}; }
  static StatValue of_integer(int64_t v) { return {Kind::Integer, 0.0, v, 0, false}; }
  static StatValue of_unsigned(uint64_t v) { return {Kind::Unsigned, 0.0, 0, v, false}; }
  static StatValue of_bool(bool v) { return {Kind::Bool, 0.0, 0, 0, v}; }
  bool is_null() const { return kind == Kind::Null; }
  // The value as a double (integer and bool converted; null gives NaN). For tools and comparisons.
  double as_double() const;
  bool operator==(const StatValue &) const = default;  // NaN != NaN, as for doubles
};

struct TensorStats {
  StatValue max, min, mean, norm;
  uint64_t count = 0;  // elements seen (bytes for Raw)
  uint64_t nan_count = 0, pos_inf_count = 0, neg_inf_count = 0;
  bool counts_exact = true;  // false: the counts only say which kinds are there (1: at least one)
  bool has_nan_or_inf() const { return nan_count + pos_inf_count + neg_inf_count != 0; }
};

// Streaming form: update() with consecutive chunks of whole elements, then finish(). Not thread-safe.
class StatsAccumulator {
 public:
  explicit StatsAccumulator(DType dtype, StatPrecision precision = StatPrecision::Low);
  // `count` elements of the accumulator's dtype (bytes for Raw) at `data`, which needs no particular alignment. The
  // narrow floats are read as float32; a chunk of packed sub-byte elements starts on a byte (its element 0 at bit 0).
  void update(const void *data, uint64_t count);
  // zero_dim: the tensor has shape () (then it holds one element and its stats are that element).
  TensorStats finish(bool zero_dim = false) const;

 private:
  DType dtype_;
  StatPrecision precision_;
  uint64_t count_ = 0, nan_ = 0, pinf_ = 0, ninf_ = 0, nonzero_ = 0;
  double sum_ = 0.0, sumsq_ = 0.0, max_, min_;
  unsigned char first_[8] = {};  // the first element, kept in its own type for 0-d tensors
};

TensorStats compute_stats(DType dtype, const void *data, uint64_t count, bool zero_dim = false,
                          StatPrecision precision = StatPrecision::Low);
// Element count from the shape; an empty shape is a 0-d tensor. Throws std::invalid_argument on negative dims.
TensorStats compute_stats(DType dtype, const void *data, std::span<const int64_t> shape,
                          StatPrecision precision = StatPrecision::Low);

// Rounds v to the nearest value of a floating dtype (F32, F16, BF16; F64 returns v).
double round_to_dtype(double v, DType dtype);

// ---- CRC-32 (zlib polynomial; crc32_update(0, p, n) == Python zlib.crc32(bytes)) -------------------------------
uint32_t crc32_update(uint32_t crc, const void *data, size_t bytes);
// The CRC of bf16 data widened to float32 (MindSpore hashes bf16 as fp32), without a full copy.
uint32_t crc32_update_bf16_as_f32(uint32_t crc, const uint16_t *data, size_t count);
// The CRC of `count` elements of t as float32 when msprobe hashes them so (bf16 under MindSpore; the narrow floats,
// which msprobe casts to float), else of their bytes.
uint32_t crc32_update_as_f32(uint32_t crc, DType t, const void *data, uint64_t count);
// msprobe's "md5" field: f"{crc:08x}".
std::string crc32_hex(uint32_t crc);

class Crc32 {
 public:
  void update(const void *data, size_t bytes) { crc_ = crc32_update(crc_, data, bytes); }
  uint32_t value() const { return crc_; }
  std::string hex() const { return crc32_hex(crc_); }

 private:
  uint32_t crc_ = 0;
};

}  // namespace msprobe::format
