#include "tools/reader/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace msprobe::tools {

double relative_zero_eps(std::optional<format::DType> t) {
  using format::DType;
  if (t == DType::F16) return 0x1p-10;  // np.finfo(np.float16).eps
  if (t == DType::BF16) return 0x1p-7;  // torch.finfo(torch.bfloat16).eps
  if (t == DType::F64) return std::numeric_limits<double>::epsilon();
  // The narrow floats: the step after 1 (2^-mantissa bits; HiF8 has 3 around 1, E8M0 none).
  switch (t.value_or(DType::F32)) {
    case DType::HiF8:
    case DType::F8E4M3FN:
    case DType::F6E2M3: return 0x1p-3;
    case DType::F8E5M2:
    case DType::F6E3M2:
    case DType::F4E1M2: return 0x1p-2;
    case DType::F4E2M1: return 0x1p-1;
    case DType::F8E8M0: return 1.0;
    default: return std::numeric_limits<float>::epsilon();
  }
}

TensorMetrics tensor_metrics(std::span<const double> npu, std::span<const double> bench, double zero_eps) {
  TensorMetrics m;
  if (npu.size() != bench.size()) {
    m.message = "element counts differ";
    return m;
  }
  if (npu.empty()) {
    m.message = "empty tensor";
    return m;
  }
  // msprobe's FLOAT_EPSILON (np.finfo(float).eps) for "all the data is zero".
  constexpr double kZeroNorm = std::numeric_limits<double>::epsilon();
  double dot = 0, nn = 0, bb = 0, sq = 0, max_abs = 0, max_rel = 0;
  uint64_t finite = 0, within1 = 0, within5 = 0;
  for (size_t i = 0; i < npu.size(); ++i) {
    const double a = npu[i], b = bench[i];
    if (!std::isfinite(a) || !std::isfinite(b)) {
      const bool same = (std::isnan(a) && std::isnan(b)) || (std::isinf(a) && a == b);
      if (!same) ++m.nonfinite_mismatch;
      continue;
    }
    ++finite;
    dot += a * b;
    nn += a * a;
    bb += b * b;
    const double d = a - b;
    sq += d * d;
    max_abs = std::max(max_abs, std::fabs(d));
    const double denom = b == 0 ? zero_eps : std::fabs(b);  // (a + eps) - (0 + eps) over (0 + eps)
    const double rel = std::fabs(d) / denom;
    max_rel = std::max(max_rel, rel);
    within1 += rel < 0.001;
    within5 += rel < 0.005;
  }
  if (m.nonfinite_mismatch)
    m.message = "NaN/Inf at different positions in " + std::to_string(m.nonfinite_mismatch) + " element(s)";
  if (finite == 0) {
    if (m.message.empty()) m.message = "no finite elements";
    return m;
  }
  m.euc_dist = std::sqrt(sq);
  m.max_abs_err = max_abs;
  m.max_rel_err = max_rel;
  m.one_thousandth = static_cast<double>(within1) / static_cast<double>(finite);
  m.five_thousandths = static_cast<double>(within5) / static_cast<double>(finite);
  const double na = std::sqrt(nn), nb = std::sqrt(bb);
  auto note = [&](const char *s) { m.message += (m.message.empty() ? "" : "; ") + std::string(s); };
  if (npu.size() == 1) {
    note("This tensor is scalar.");
  } else if (na <= kZeroNorm && nb <= kZeroNorm) {
    m.cosine = 1.0;
  } else if (na <= kZeroNorm) {
    note("Cannot compare by Cosine Similarity, All the data is Zero in npu dump data.");
  } else if (nb <= kZeroNorm) {
    note("Cannot compare by Cosine Similarity, All the data is Zero in Bench dump data.");
  } else {
    m.cosine = std::clamp(dot / (na * nb), -1.0, 1.0);  // rounding can step just past 1
  }
  return m;
}

bool tensor_passes(const TensorMetrics &m, const Thresholds &t) {
  if (m.nonfinite_mismatch) return false;
  if (m.cosine && !(*m.cosine > t.cosine)) return false;
  if (m.max_abs_err && !(*m.max_abs_err < t.atol)) return false;
  return true;
}

StatDiff stat_diff(const format::StatValue &npu, const format::StatValue &bench) {
  StatDiff d;
  if (npu.is_null() || bench.is_null()) return d;
  const double a = npu.as_double(), b = bench.as_double();
  if (!std::isfinite(a) || !std::isfinite(b)) {
    const bool same = (std::isnan(a) && std::isnan(b)) || (std::isinf(a) && a == b);
    d.diff = same ? 0.0 : a - b;
    d.rel = same ? 0.0 : std::numeric_limits<double>::infinity();
    return d;
  }
  d.diff = a - b;
  d.rel = std::fabs(*d.diff) / (std::max(std::fabs(a), std::fabs(b)) + 1e-10);
  return d;
}

}  // namespace msprobe::tools
