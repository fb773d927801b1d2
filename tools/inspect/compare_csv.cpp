// compare's two CSV files: compare_result (msprobe's columns) and compare_details (every metric, both sides'
// statistics, CRCs, launch indexes and file names).
#include <algorithm>

#include "tools/inspect/compare.h"

namespace msprobe::tools::compare {

const std::vector<std::string> kResultColumns = {"Step",       "Rank",        "NPU Name",         "Bench Name",
                                                 "NPU Dtype",  "Bench Dtype", "NPU Tensor Shape", "Bench Tensor Shape",
                                                 "Cosine",     "MaxAbsErr",   "MaxRelativeErr",   "Max diff",
                                                 "Min diff",   "Mean diff",   "L2norm diff",      "Result",
                                                 "Err_message"};
const std::vector<std::string> kDetailColumns = {"Step",
                                                 "Rank",
                                                 "NPU Name",
                                                 "Bench Name",
                                                 "NPU Launch Index",
                                                 "Bench Launch Index",
                                                 "NPU Dtype",
                                                 "Bench Dtype",
                                                 "NPU Tensor Shape",
                                                 "Bench Tensor Shape",
                                                 "Cosine",
                                                 "EucDist",
                                                 "MaxAbsErr",
                                                 "MaxRelativeErr",
                                                 "One Thousandth Err Ratio",
                                                 "Five Thousandths Err Ratio",
                                                 "NPU max",
                                                 "NPU min",
                                                 "NPU mean",
                                                 "NPU l2norm",
                                                 "Bench max",
                                                 "Bench min",
                                                 "Bench mean",
                                                 "Bench l2norm",
                                                 "Max diff",
                                                 "Min diff",
                                                 "Mean diff",
                                                 "L2norm diff",
                                                 "Max RelativeErr",
                                                 "Min RelativeErr",
                                                 "Mean RelativeErr",
                                                 "L2norm RelativeErr",
                                                 "NPU MD5",
                                                 "Bench MD5",
                                                 "Result",
                                                 "Err_message",
                                                 "NPU Data_name",
                                                 "Bench Data_name"};

namespace {

std::string stat_cell(const TensorInfo *t, int i) { return t ? stat_text(t->stats[i]) : "N/A"; }

std::string name(const KernelInfo *k, const TensorInfo *t) { return t ? k->name + "." + t->row_suffix() : "N/A"; }
std::string dtype(const TensorInfo *t) { return t ? t->dtype_text : std::string("N/A"); }
std::string shape(const TensorInfo *t) { return t ? shape_text(t->shape) : std::string("N/A"); }
std::string metric(const RowResult &r, std::optional<double> TensorMetrics::*f) {
  return metric_text(r.metrics ? *r.metrics.*f : std::nullopt);
}

}  // namespace

std::vector<std::string> detail_cells(const std::string &step, const std::string &rank, const RowSides &s,
                                      const RowResult &r) {
  auto launch = [](const KernelInfo *k, const TensorInfo *t) {
    return t && k->launch_index != UINT64_MAX ? std::to_string(k->launch_index) : std::string("N/A");
  };
  auto opt = [](const TensorInfo *t, std::optional<std::string> TensorInfo::*f) {
    return t && t->*f ? *(t->*f) : std::string("N/A");
  };
  auto sd = [&](int i) { return metric_text(r.stats[i].diff); };
  auto srel = [&](int i) { return metric_text(r.stats[i].rel); };
  return {step,
          rank,
          name(s.ka, s.ta),
          name(s.kb, s.tb),
          launch(s.ka, s.ta),
          launch(s.kb, s.tb),
          dtype(s.ta),
          dtype(s.tb),
          shape(s.ta),
          shape(s.tb),
          metric(r, &TensorMetrics::cosine),
          metric(r, &TensorMetrics::euc_dist),
          metric(r, &TensorMetrics::max_abs_err),
          metric(r, &TensorMetrics::max_rel_err),
          metric(r, &TensorMetrics::one_thousandth),
          metric(r, &TensorMetrics::five_thousandths),
          stat_cell(s.ta, 0),
          stat_cell(s.ta, 1),
          stat_cell(s.ta, 2),
          stat_cell(s.ta, 3),
          stat_cell(s.tb, 0),
          stat_cell(s.tb, 1),
          stat_cell(s.tb, 2),
          stat_cell(s.tb, 3),
          sd(0),
          sd(1),
          sd(2),
          sd(3),
          srel(0),
          srel(1),
          srel(2),
          srel(3),
          opt(s.ta, &TensorInfo::md5),
          opt(s.tb, &TensorInfo::md5),
          verdict_text(r.verdict),
          r.message,
          opt(s.ta, &TensorInfo::data_name),
          opt(s.tb, &TensorInfo::data_name)};
}

std::vector<std::string> result_cells(const std::vector<std::string> &detail_row) {
  static const std::vector<size_t> picked = [] {
    std::vector<size_t> at;
    for (const std::string &c : kResultColumns)
      at.push_back(
          static_cast<size_t>(std::find(kDetailColumns.begin(), kDetailColumns.end(), c) - kDetailColumns.begin()));
    return at;
  }();
  std::vector<std::string> out;
  out.reserve(picked.size());
  for (size_t i : picked) out.push_back(detail_row[i]);
  return out;
}

CompareCsv::CompareCsv(const fs::path &path, const std::vector<std::string> &columns)
    : file_(path, CsvAppender::Open::Replace), pending_(csv_row(columns)) {
  if (file_.failed()) throw InputError(path.string() + ": cannot create the file");
}

void CompareCsv::row(const std::vector<std::string> &cells) {
  pending_ += csv_row(cells);
  if (pending_.size() >= 65536) flush();
}

void CompareCsv::close() {
  flush();
  file_.close();
  if (file_.failed()) throw InputError(file_.path().string() + ": write failed");
}

void CompareCsv::flush() {
  if (pending_.empty()) return;
  file_.append(pending_);
  pending_.clear();
}

}  // namespace msprobe::tools::compare
