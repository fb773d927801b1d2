// msprobe's accuracy pre-check verdict for one output tensor: the dumped (device) values against the CPU
// reference (bench), with the metrics of msprobe's accuracy_checking_details CSV and its run_ut "benchmark" rule:
//   - NaN/Inf at different positions, a shape or size that differs: error;
//   - integer / bool outputs: any element that differs is an error (binary consistency);
//   - Cosine <= cos threshold (0.99): error (an undefined cosine, e.g. a scalar, does not decide);
//   - MaxAbsErr < atol (0.001): pass;
//   - float16 / bfloat16: share of elements with relative error < 0.01 must exceed 0.99 (else error), then
//     < 0.001 over 0.999 is a pass, else a warning;
//   - float32 / float64: share with relative error < 0.001 must exceed 0.999 (else error), and with < 0.0001 over
//     0.9999 (else warning).
// Relative error is |device - bench| / (|bench| + eps of the bench dtype). Cosine and MaxAbsErr are compare's
// (tools/reader/metrics.h).
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "format/format.h"

namespace msprobe::tools::replay {

enum class Status { Pass, Warning, Error, Skip };
const char *status_text(Status s);  // msprobe's spellings: pass, warning, error, SKIP
// The worse of two (pass < warning < error; skip is the weakest).
Status worse(Status a, Status b);

struct PrecheckThresholds {
  double cosine = 0.99;  // Cosine must be above
  double atol = 0.001;   // MaxAbsErr below this passes at once
};

struct PrecheckMetrics {
  std::optional<double> cosine, max_abs_err;
  std::optional<double> hundredth, thousandth, ten_thousandth;  // shares of elements within 1%, 0.1%, 0.01%
  std::optional<double> error_rate;                             // integer / bool outputs: share of elements differing
  std::optional<double> error_balance, rmse, small_value_err_ratio, max_rel_err, mean_rel_err;
  std::optional<double> euc_dist;  // compare's EucDist (an extra column)
  std::string message;
};

// `device` and `bench` are the same length. `device_dtype` is the dumped output's dtype; `bench_eps` the eps of
// the bench's precision (float64's, or the output dtype's when the reference was rounded to it).
Status precheck(std::span<const double> device, std::span<const double> bench, format::DType device_dtype,
                double bench_eps, const PrecheckThresholds &th, PrecheckMetrics &m);

}  // namespace msprobe::tools::replay
