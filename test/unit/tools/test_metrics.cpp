// Compare metrics against the definitions written out longhand on small vectors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "tools/reader/metrics.h"

namespace mt = msprobe::tools;
namespace mc = msprobe::format;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(Metrics, MatchTheDefinitions) {
  const std::vector<double> a = {1.0, 2.0, -3.0, 4.0}, b = {1.0, 2.002, -3.0, 3.0};
  const auto m = mt::tensor_metrics(a, b, 1e-7);
  // cos = a.b / (|a| |b|)
  const double dot = 1 * 1 + 2 * 2.002 + 9 + 12, na = std::sqrt(1 + 4 + 9 + 16.0),
               nb = std::sqrt(1 + 2.002 * 2.002 + 9 + 9.0);
  EXPECT_DOUBLE_EQ(*m.cosine, dot / (na * nb));
  EXPECT_DOUBLE_EQ(*m.max_abs_err, 1.0);
  EXPECT_DOUBLE_EQ(*m.euc_dist, std::sqrt(0.002 * 0.002 + 1.0));
  EXPECT_DOUBLE_EQ(*m.max_rel_err, 1.0 / 3.0);
  // relative errors: 0, 0.002/2.002 (< 0.001? no: 0.000999 < 0.001 yes), 0, 1/3
  EXPECT_DOUBLE_EQ(*m.one_thousandth, 3.0 / 4.0);
  EXPECT_DOUBLE_EQ(*m.five_thousandths, 3.0 / 4.0);
  EXPECT_TRUE(m.message.empty());
  EXPECT_FALSE(mt::tensor_passes(m, {}));
  EXPECT_TRUE(mt::tensor_passes(m, {.atol = 2.0, .cosine = 0.9}));
}

TEST(Metrics, MsprobesSpecialCases) {
  // Bench zeros: msprobe adds eps to both sides, so the relative error is |a - b| / eps.
  auto m = mt::tensor_metrics(std::vector<double>{1e-8, 1.0}, std::vector<double>{0.0, 1.0}, 1e-7);
  EXPECT_DOUBLE_EQ(*m.max_rel_err, 1e-8 / 1e-7);
  // All zero on both sides: cosine 1.
  m = mt::tensor_metrics(std::vector<double>{0, 0}, std::vector<double>{0, 0}, 1e-7);
  EXPECT_EQ(m.cosine, 1.0);
  // One side all zero: no cosine, msprobe's message, and abs error decides.
  m = mt::tensor_metrics(std::vector<double>{0, 0}, std::vector<double>{1e-6, 0}, 1e-7);
  EXPECT_FALSE(m.cosine);
  EXPECT_NE(m.message.find("All the data is Zero in npu dump data"), std::string::npos);
  EXPECT_TRUE(mt::tensor_passes(m, {}));
  // Scalars: no cosine.
  m = mt::tensor_metrics(std::vector<double>{2.0}, std::vector<double>{2.0}, 1e-7);
  EXPECT_FALSE(m.cosine);
  EXPECT_NE(m.message.find("scalar"), std::string::npos);
  EXPECT_TRUE(mt::tensor_passes(m, {}));
  // Empty.
  m = mt::tensor_metrics(std::vector<double>{}, std::vector<double>{}, 1e-7);
  EXPECT_FALSE(m.max_abs_err);
  EXPECT_TRUE(mt::tensor_passes(m, {}));
}

TEST(Metrics, NanAndInf) {
  // Same NaN / Inf positions: equal, left out.
  auto m = mt::tensor_metrics(std::vector<double>{kNaN, kInf, 1, 2}, std::vector<double>{kNaN, kInf, 1, 2}, 1e-7);
  EXPECT_EQ(m.nonfinite_mismatch, 0u);
  EXPECT_EQ(*m.max_abs_err, 0.0);
  EXPECT_TRUE(mt::tensor_passes(m, {}));
  // Different: counted, and an error whatever the rest says.
  m = mt::tensor_metrics(std::vector<double>{kNaN, -kInf, 1, 2}, std::vector<double>{1, kInf, 1, 2}, 1e-7);
  EXPECT_EQ(m.nonfinite_mismatch, 2u);
  EXPECT_NE(m.message.find("NaN/Inf at different positions in 2"), std::string::npos);
  EXPECT_FALSE(mt::tensor_passes(m, {}));
}

TEST(Metrics, StatisticsRule) {
  using mc::StatValue;
  auto d = mt::stat_diff(StatValue::of_real(3.0), StatValue::of_real(1.0));
  EXPECT_EQ(*d.diff, 2.0);
  EXPECT_DOUBLE_EQ(*d.rel, 2.0 / (3.0 + 1e-10));  // > 0.5: msprobe's Warning
  d = mt::stat_diff(StatValue::of_real(1.001), StatValue::of_real(1.0));
  EXPECT_NEAR(*d.rel, 0.001 / 1.001, 1e-12);
  d = mt::stat_diff(StatValue::of_integer(4), StatValue::of_real(4.0));
  EXPECT_EQ(*d.rel, 0.0);
  d = mt::stat_diff(StatValue::of_real(kNaN), StatValue::of_real(kNaN));
  EXPECT_EQ(*d.rel, 0.0);
  d = mt::stat_diff(StatValue::of_real(kNaN), StatValue::of_real(1));
  EXPECT_EQ(*d.rel, kInf);
  d = mt::stat_diff(StatValue::of_real(kInf), StatValue::of_real(kInf));
  EXPECT_EQ(*d.rel, 0.0);
  d = mt::stat_diff(StatValue::null(), StatValue::of_real(1));
  EXPECT_FALSE(d.diff);
  EXPECT_FALSE(d.rel);
  d = mt::stat_diff(StatValue::of_bool(true), StatValue::of_bool(false));
  EXPECT_EQ(*d.diff, 1.0);
}

TEST(Metrics, ZeroEpsByDtype) {
  EXPECT_EQ(mt::relative_zero_eps(mc::DType::F32), static_cast<double>(std::numeric_limits<float>::epsilon()));
  EXPECT_EQ(mt::relative_zero_eps(mc::DType::F16), 0.0009765625);
  EXPECT_EQ(mt::relative_zero_eps(mc::DType::BF16), 0.0078125);
  EXPECT_EQ(mt::relative_zero_eps(mc::DType::F64), std::numeric_limits<double>::epsilon());
  EXPECT_EQ(mt::relative_zero_eps(std::nullopt), static_cast<double>(std::numeric_limits<float>::epsilon()));
}

}  // namespace
