#include "tools/replay/precheck.h"

#include <cmath>
#include <vector>

#include "tools/reader/metrics.h"
#include "tools/replay/refs.h"

namespace msprobe::tools::replay {

const char *status_text(Status s) {
  switch (s) {
    case Status::Pass: return "pass";
    case Status::Warning: return "warning";
    case Status::Error: return "error";
    case Status::Skip: return "SKIP";
  }
  return "?";
}

Status worse(Status a, Status b) {
  auto rank = [](Status s) { return s == Status::Skip ? 0 : s == Status::Pass ? 1 : s == Status::Warning ? 2 : 3; };
  return rank(a) >= rank(b) ? a : b;
}

namespace {

void note(std::string &m, const std::string &s) { m += (m.empty() ? "" : " ") + s; }

// Integer and bool outputs: msprobe's "Only judged by Error Rate".
Status binary_consistency(std::span<const double> device, std::span<const double> bench, format::DType dtype,
                          PrecheckMetrics &m) {
  const size_t n = device.size();
  size_t differ = 0;
  for (size_t k = 0; k < n; ++k) differ += !(device[k] == bench[k]);
  m.error_rate = n ? static_cast<double>(differ) / static_cast<double>(n) : 0.0;
  note(m.message, "Compare algorithm is not supported for " +
                      std::string(format::dtype_name(dtype, format::Framework::MindSpore)) +
                      " data. Only judged by Error Rate.");
  return differ ? Status::Error : Status::Pass;
}

bool is_low_precision(format::DType dtype) {
  return dtype == format::DType::F16 || dtype == format::DType::BF16 || format::is_narrow_float(dtype);
}

// The pre-check's columns: relative-error shares, small values, error balance, RMSE, max / mean relative error.
// Returns how many elements are finite on both sides.
size_t relative_error_metrics(std::span<const double> device, std::span<const double> bench, format::DType dtype,
                              double bench_eps, PrecheckMetrics &m) {
  const size_t n = device.size();
  const bool low = is_low_precision(dtype);
  const double small_value = low ? 1e-3 : 1e-6, small_atol = low ? 1e-5 : 1e-9;
  size_t finite = 0, within2 = 0, within3 = 0, within4 = 0, small = 0, small_bad = 0, normal = 0, larger = 0,
         smaller = 0;
  double sq = 0, rel_max = 0, rel_sum = 0;
  for (size_t k = 0; k < n; ++k) {
    const double a = device[k], b = bench[k];
    if (!std::isfinite(a) || !std::isfinite(b)) {
      const bool same = (std::isnan(a) && std::isnan(b)) || (std::isinf(a) && a == b);
      if (same) ++within2, ++within3, ++within4;  // the same NaN/Inf is no error
      continue;
    }
    ++finite;
    const double err = std::fabs(a - b), rel = err / (std::fabs(b) + bench_eps);
    within2 += rel < 0.01;
    within3 += rel < 0.001;
    within4 += rel < 0.0001;
    const double b_dev = replay::round_to_dtype(b, dtype);  // msprobe casts the bench to the device dtype here
    larger += a > b_dev;
    smaller += a < b_dev;
    if (std::fabs(b) < small_value) {
      ++small;
      small_bad += err > small_atol;
    } else {
      ++normal;
      sq += err * err;
      rel_max = std::max(rel_max, rel);
      rel_sum += rel;
    }
  }
  if (n > 0) {
    const auto N = static_cast<double>(n);
    m.hundredth = static_cast<double>(within2) / N;
    m.thousandth = static_cast<double>(within3) / N;
    m.ten_thousandth = static_cast<double>(within4) / N;
    m.error_balance = static_cast<double>(larger > smaller ? larger - smaller : smaller - larger) / N;
  }
  m.small_value_err_ratio = small ? static_cast<double>(small_bad) / static_cast<double>(small) : 0.0;
  if (normal) {
    m.rmse = std::sqrt(sq / static_cast<double>(normal));
    m.max_rel_err = rel_max;
    m.mean_rel_err = rel_sum / static_cast<double>(normal);
  } else if (finite) {
    m.rmse = m.max_rel_err = m.mean_rel_err = 0.0;
  }
  return finite;
}

// msprobe's run_ut benchmark rule on the metrics of a float output with finite elements.
Status float_verdict(format::DType dtype, const PrecheckThresholds &th, PrecheckMetrics &m) {
  if (m.cosine && !(*m.cosine > th.cosine)) {
    note(m.message, "Cosine similarity is not above " + std::to_string(th.cosine) + ": error.");
    return Status::Error;
  }
  if (m.max_abs_err && *m.max_abs_err < th.atol) {
    note(m.message, "Max abs error is below the threshold: pass.");
    return Status::Pass;
  }
  if (is_low_precision(dtype)) {
    if (!(*m.hundredth > 1 - 0.01)) {
      note(m.message, "Relative error is greater than 0.01: error.");
      return Status::Error;
    }
    if (*m.thousandth > 1 - 0.001) {
      note(m.message, "Relative error is less than 0.001: pass.");
      return Status::Pass;
    }
    note(m.message, "Relative error is greater than 0.001: warning.");
    return Status::Warning;
  }
  if (!(*m.thousandth > 1 - 0.001)) {
    note(m.message, "Relative error is greater than 0.001: error.");
    return Status::Error;
  }
  if (!(*m.ten_thousandth > 1 - 0.0001)) {
    note(m.message, "Relative error is greater than 0.0001: warning.");
    return Status::Warning;
  }
  note(m.message, "Relative error is less than 0.0001: pass.");
  return Status::Pass;
}

}  // namespace

Status precheck(std::span<const double> device, std::span<const double> bench, format::DType dtype, double bench_eps,
                const PrecheckThresholds &th, PrecheckMetrics &m) {
  const size_t n = device.size();
  if (bench.size() != n) {
    note(m.message,
         "The reference has " + std::to_string(bench.size()) + " elements, the output " + std::to_string(n) + ".");
    return Status::Error;
  }
  if (!format::is_floating(dtype)) return binary_consistency(device, bench, dtype, m);

  // compare's metrics: Cosine, MaxAbsErr (same NaN/Inf on both sides left out), EucDist.
  const TensorMetrics tm = tensor_metrics(device, bench, bench_eps);
  m.cosine = tm.cosine;
  m.max_abs_err = tm.max_abs_err;
  m.euc_dist = tm.euc_dist;
  if (!tm.message.empty()) note(m.message, tm.message);
  const size_t finite = relative_error_metrics(device, bench, dtype, bench_eps, m);

  if (tm.nonfinite_mismatch) return Status::Error;  // tensor_metrics' message says where
  if (n == 0) return Status::Pass;
  if (finite == 0) return Status::Pass;  // every element the same NaN/Inf on both sides
  return float_verdict(dtype, th, m);
}

}  // namespace msprobe::tools::replay
