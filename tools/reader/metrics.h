// The accuracy metrics of msprobe's compare, for two tensors (NPU side vs bench side) or their statistics.
// Definitions follow msprobe's compare (cosine_similarity, get_max_abs_err, get_relative_err, rel_err_ratio, and the
// statistics rule |diff| / (max(|npu|, |bench|) + 1e-10) > 0.5 -> "Warning"); see docs/inspect.md.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "format/format.h"
#include "format/stats.h"

namespace msprobe::tools {

struct TensorMetrics {
  std::optional<double> cosine;            // nullopt: not defined (scalar, one side all zero, empty)
  std::optional<double> euc_dist;          // ||npu - bench||
  std::optional<double> max_abs_err;       // max |npu - bench|
  std::optional<double> max_rel_err;       // max |npu - bench| / |bench| (bench zeros: msprobe's eps shift)
  std::optional<double> one_thousandth;    // share of elements with relative error < 0.001
  std::optional<double> five_thousandths;  // share with relative error < 0.005
  uint64_t nonfinite_mismatch = 0;         // positions where NaN/Inf differ (same NaN/Inf on both sides is equal)
  std::string message;                     // msprobe-style note on what could not be computed
};

// `zero_eps`: what msprobe adds to bench zeros before dividing (the eps of the bench dtype). Elements that are the
// same NaN or the same infinity on both sides are left out of every metric; different ones are counted.
TensorMetrics tensor_metrics(std::span<const double> npu, std::span<const double> bench, double zero_eps);
// The eps msprobe uses for a bench tensor of this dtype (float32's for integers and unknown types).
double relative_zero_eps(std::optional<format::DType> bench_dtype);

struct Thresholds {
  double atol = 1e-4;       // MaxAbsErr must be below
  double cosine = 0.99;     // Cosine must be above
  double stat_rtol = 1e-4;  // statistics mode: a relative difference above this is a divergence ("diff")
  double warning = 0.5;     // statistics mode: msprobe's "Warning" threshold
};

// msprobe's rule: cosine > thresholds.cosine and MaxAbsErr < thresholds.atol (an undefined cosine does not fail).
bool tensor_passes(const TensorMetrics &m, const Thresholds &t);

struct StatDiff {
  std::optional<double> diff;  // npu - bench; nullopt when either is null or not a number
  std::optional<double> rel;   // |diff| / (max(|npu|, |bench|) + 1e-10); inf when only one side is NaN/Inf
};
StatDiff stat_diff(const format::StatValue &npu, const format::StatValue &bench);

}  // namespace msprobe::tools
