// compare A B: kernels matched by step, rank and name (names are run-invariant: spec §5), tensors by slot.
#include <algorithm>
#include <array>
#include <cstdio>
#include <ctime>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "collector/format.h"
#include "tools/inspect/cli.h"
#include "tools/inspect/commands.h"
#include "tools/reader/csv.h"
#include "tools/reader/dump_reader.h"
#include "tools/reader/metrics.h"
#include "tools/reader/tensor_data.h"

namespace msprobe::tools {

const std::string_view kCompareHelp =
    R"(usage: msprobe-inspect compare A B [--atol X] [--cos X] [--stat-rtol X] [--out DIR]

Matches the kernels of dump A (the "NPU" side, e.g. the run under test) with those of dump B (the "Bench" side,
e.g. the reference run) by step, rank and kernel name ({OpType}.{OpName}.{n}: the same in every run of the same
program), and their tensors by slot (input.0, output.1, ...). A and B may be dump roots, step folders or rank
folders; two single rank folders are compared with each other whatever their names (e.g. two ranks).

Per tensor:
  - both sides saved the tensor (task tensor): Cosine, EucDist, MaxAbsErr, MaxRelativeErr and the shares of
    elements within 0.1% / 0.5% relative error, as msprobe computes them. "pass" when Cosine > --cos and
    MaxAbsErr < --atol (msprobe's rule), else "error". Same NaN/Inf on both sides counts as equal.
  - otherwise (statistics): Max/Min/Mean/Norm differences and relative differences |d| / max(|a|, |b|).
    "Warning" (msprobe's word) when one exceeds 0.5, "diff" when one exceeds --stat-rtol, else "pass";
    with md5 (CRC-32) on both sides, "pass" or "Different" by the CRC.
  - a shape that differs is an "error"; a tensor or kernel on one side only is "unmatched".

  --atol X       MaxAbsErr threshold (default 0.0001)
  --cos X        cosine threshold (default 0.99)
  --stat-rtol X  statistics: relative difference that counts as a divergence (default 0.0001)
  --out DIR      where the CSV files go (default: the current directory; created if missing)

Writes compare_result_{timestamp}.csv (one row per tensor: names, dtypes, shapes, the main metrics, Result,
Err_message) and compare_details_{timestamp}.csv (one row per tensor with every metric, both sides'
statistics, CRCs, launch indexes and file names). Prints counts, the kernels found on one side only, and the first
diverging kernel in launch order (the first whose tensors are not all "pass") with both stacks when recorded.

Exit status 0 when the comparison ran (whatever it found), 2 on bad input.
)";

namespace {

enum class Verdict { Pass, Diff, Warning, Different, Error, Unmatched };

const char *verdict_text(Verdict v) {
  switch (v) {
    case Verdict::Pass: return "pass";
    case Verdict::Diff: return "diff";
    case Verdict::Warning: return "Warning";
    case Verdict::Different: return "Different";
    case Verdict::Error: return "error";
    case Verdict::Unmatched: return "unmatched";
  }
  return "?";
}

bool diverges(Verdict v) { return v != Verdict::Pass && v != Verdict::Unmatched; }

struct KernelInfo {
  std::string name;
  uint64_t launch_index = UINT64_MAX;
  std::vector<TensorInfo> tensors;
};

struct Side {
  const RankDir *dir = nullptr;
  DumpHeader header;
  std::vector<KernelInfo> kernels;
  std::unordered_map<std::string, size_t> index;
};

uint64_t dump_json_size(const RankDir &d) {
  std::error_code ec;
  const uint64_t n = fs::file_size(d.path / collector::kDumpJson, ec);
  return ec ? 0 : n;
}

// Progress counts dump.json bytes read on both sides.
Side load_side(const RankDir &d, Progress &progress, uint64_t &done) {
  Side s;
  s.dir = &d;
  DumpCallbacks cb;
  cb.on_header = [&](const DumpHeader &h) { s.header = h; };
  cb.on_progress = [&](size_t at) { progress.update(done + at); };
  cb.on_record = [&](KernelRecord &&k) {
    KernelInfo info;
    info.tensors = std::move(k.tensors);
    info.launch_index = k.launch_index.value_or(UINT64_MAX);
    info.name = std::move(k.name);
    s.index.emplace(info.name, s.kernels.size());
    s.kernels.push_back(std::move(info));
    return true;
  };
  read_dump_json(d, cb);
  done += dump_json_size(d);
  std::stable_sort(s.kernels.begin(), s.kernels.end(),
                   [](const KernelInfo &a, const KernelInfo &b) { return a.launch_index < b.launch_index; });
  s.index.clear();
  for (size_t i = 0; i < s.kernels.size(); ++i) s.index.emplace(s.kernels[i].name, i);
  return s;
}

struct RowResult {
  Verdict verdict = Verdict::Pass;
  std::string message;
  std::optional<TensorMetrics> metrics;
  std::array<StatDiff, 4> stats{};
};

void add_message(std::string &m, const std::string &s) {
  if (s.empty()) return;
  m += (m.empty() ? "" : "; ") + s;
}

std::vector<double> load_values(const Side &side, const TensorInfo &t) {
  const TensorFile f = open_tensor_file(side.dir->path / collector::kTensorDir / *t.data_name, t);
  if (f.file_dtype == collector::DType::Raw) throw TensorFileError("raw bytes of an unknown dtype");
  if (f.shape != t.shape)
    throw TensorFileError("the file's shape " + shape_text(f.shape) + " is not the entry's " + shape_text(t.shape));
  return read_tensor_values(f);
}

RowResult compare_tensor(const Side &A, const TensorInfo &a, const Side &B, const TensorInfo &b, const Thresholds &th) {
  RowResult r;
  for (int i = 0; i < 4; ++i) r.stats[i] = stat_diff(a.stats[i], b.stats[i]);
  if (a.dtype_text != b.dtype_text) add_message(r.message, "dtype differs");
  if (!a.shape_ok || !b.shape_ok || a.shape != b.shape) {
    r.verdict = Verdict::Error;
    add_message(r.message, "shape differs: " + shape_text(a.shape) + " vs " + shape_text(b.shape));
    return r;
  }
  if (a.data_name && b.data_name) {
    try {
      const std::vector<double> va = load_values(A, a), vb = load_values(B, b);
      r.metrics = tensor_metrics(va, vb, relative_zero_eps(b.dtype));
      add_message(r.message, r.metrics->message);
      r.verdict = tensor_passes(*r.metrics, th) ? Verdict::Pass : Verdict::Error;
      return r;
    } catch (const TensorFileError &e) {
      add_message(r.message, std::string("tensor data not compared (") + e.what() + "): statistics compared");
    }
  }
  if (a.md5 && b.md5) {
    r.verdict = *a.md5 == *b.md5 ? Verdict::Pass : Verdict::Different;
    return r;
  }
  double worst = 0;
  for (int i = 0; i < 4; ++i) {
    const bool a_null = a.stats[i].is_null(), b_null = b.stats[i].is_null();
    if (a_null != b_null) {
      worst = std::numeric_limits<double>::infinity();
      add_message(r.message, "a statistic is null on one side only");
    } else if (r.stats[i].rel) {
      worst = std::max(worst, *r.stats[i].rel);
    }
  }
  if (worst > th.warning) {
    r.verdict = Verdict::Warning;
    add_message(r.message, "Need double check api accuracy.");
  } else if (worst > th.stat_rtol) {
    r.verdict = Verdict::Diff;
  }
  return r;
}

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

// A failing tensor of the first diverging kernel, for the terminal.
struct Divergence {
  std::string folder, kernel;
  uint64_t step = 0, launch_index = UINT64_MAX;
  size_t pair = 0;
  std::vector<std::string> lines;
};

// One result file, created with its header row (mode from the umask). Rows are gathered and appended 64 KiB at a
// time, and what is gathered when an error ends the run is still written; a write that failed is reported when the
// file is closed.
class CompareCsv {
 public:
  CompareCsv(const fs::path &path, const std::vector<std::string> &columns)
      : file_(path, CsvAppender::Open::Replace), pending_(csv_row(columns)) {
    if (file_.failed()) throw InputError(path.string() + ": cannot create the file");
  }
  ~CompareCsv() { flush(); }
  CompareCsv(const CompareCsv &) = delete;
  CompareCsv &operator=(const CompareCsv &) = delete;
  void row(const std::vector<std::string> &cells) {
    pending_ += csv_row(cells);
    if (pending_.size() >= 65536) flush();
  }
  void close() {
    flush();
    file_.close();
    if (file_.failed()) throw InputError(file_.path().string() + ": write failed");
  }

 private:
  void flush() {
    if (pending_.empty()) return;
    file_.append(pending_);
    pending_.clear();
  }

  CsvAppender file_;
  std::string pending_;
};

std::string stat_cell(const TensorInfo *t, int i) { return t ? stat_text(t->stats[i]) : "N/A"; }

}  // namespace

int run_compare(std::span<char *const> argv) {
  static const OptionSpec kOptions[] = {{"--atol", true}, {"--cos", true}, {"--stat-rtol", true}, {"--out", true}};
  const Args args = parse_args(argv, kOptions);
  expect_positional(args, 2, "A B (two dumps)");
  Thresholds th;
  th.atol = args.number("--atol", th.atol, 0, 1e308);
  th.cosine = args.number("--cos", th.cosine, -1, 1);
  th.stat_rtol = args.number("--stat-rtol", th.stat_rtol, 0, 1e308);
  const fs::path out_dir = args.value("--out").value_or(".");

  const std::vector<RankDir> dirs_a = find_rank_dirs(args.positional[0]);
  const std::vector<RankDir> dirs_b = find_rank_dirs(args.positional[1]);

  // Folder pairs: by (step, rank), or the two folders when each side is one folder.
  std::vector<std::pair<const RankDir *, const RankDir *>> pairs;
  std::vector<std::string> folders_only_a, folders_only_b;
  auto key = [](const RankDir &d) { return std::pair(d.step ? static_cast<int64_t>(*d.step) : -1, d.rank_label()); };
  if (dirs_a.size() == 1 && dirs_b.size() == 1) {
    pairs.emplace_back(&dirs_a[0], &dirs_b[0]);
  } else {
    std::map<std::pair<int64_t, std::string>, const RankDir *> by_key;
    for (const RankDir &d : dirs_b) by_key[key(d)] = &d;
    for (const RankDir &d : dirs_a) {
      auto it = by_key.find(key(d));
      if (it == by_key.end()) {
        folders_only_a.push_back(d.label());
        continue;
      }
      pairs.emplace_back(&d, it->second);
      by_key.erase(it);
    }
    for (const auto &[k, d] : by_key) folders_only_b.push_back(d->label());
  }

  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (!fs::is_directory(out_dir, ec)) throw InputError(out_dir.string() + ": cannot create the output folder");
  std::string ts = timestamp_now();
  fs::path result_path = out_dir / ("compare_result_" + ts + ".csv");
  fs::path details_path = out_dir / ("compare_details_" + ts + ".csv");
  for (int i = 1; fs::exists(result_path, ec) || fs::exists(details_path, ec); ++i) {  // two runs in one second
    result_path = out_dir / ("compare_result_" + ts + "_" + std::to_string(i) + ".csv");
    details_path = out_dir / ("compare_details_" + ts + "_" + std::to_string(i) + ".csv");
  }
  CompareCsv result_csv(result_path, kResultColumns), details_csv(details_path, kDetailColumns);

  std::map<Verdict, uint64_t> tally;
  uint64_t matched = 0;
  std::vector<std::string> kernels_only_a, kernels_only_b;
  std::optional<Divergence> first;
  std::vector<Divergence> per_folder;
  std::string mode;

  uint64_t total_kernels = 0, total_bytes = 0, done_bytes = 0;
  for (const auto &[a, b] : pairs) total_bytes += dump_json_size(*a) + dump_json_size(*b);
  Progress progress("compare", total_bytes);
  for (size_t pi = 0; pi < pairs.size(); ++pi) {
    const Side A = load_side(*pairs[pi].first, progress, done_bytes);
    const Side B = load_side(*pairs[pi].second, progress, done_bytes);
    const bool tensor_mode = A.header.task == collector::task_name(collector::Task::Tensor) &&
                             B.header.task == collector::task_name(collector::Task::Tensor);
    const std::string this_mode = tensor_mode ? "tensor" : "statistics";
    if (mode.empty())
      mode = this_mode;
    else if (mode != this_mode)
      mode = "mixed";
    const std::string step = A.dir->step ? std::to_string(*A.dir->step) : "";
    const std::string rank = A.dir->rank_label();
    const std::string folder =
        A.dir->label() == B.dir->label() ? A.dir->label() : A.dir->label() + " vs " + B.dir->label();
    std::optional<Divergence> folder_first;

    auto write_rows = [&](const KernelInfo *ka, const TensorInfo *ta, const KernelInfo *kb, const TensorInfo *tb,
                          const RowResult &r) {
      const std::string na = ta ? ka->name + "." + ta->row_suffix() : "N/A";
      const std::string nb = tb ? kb->name + "." + tb->row_suffix() : "N/A";
      auto dtype = [](const TensorInfo *t) { return t ? t->dtype_text : std::string("N/A"); };
      auto shape = [](const TensorInfo *t) { return t ? shape_text(t->shape) : std::string("N/A"); };
      const TensorMetrics *m = r.metrics ? &*r.metrics : nullptr;
      auto metric = [&](std::optional<double> TensorMetrics::*f) { return metric_text(m ? m->*f : std::nullopt); };
      auto sd = [&](int i) { return metric_text(r.stats[i].diff); };
      auto srel = [&](int i) { return metric_text(r.stats[i].rel); };
      result_csv.row({step, rank, na, nb, dtype(ta), dtype(tb), shape(ta), shape(tb), metric(&TensorMetrics::cosine),
                      metric(&TensorMetrics::max_abs_err), metric(&TensorMetrics::max_rel_err), sd(0), sd(1), sd(2),
                      sd(3), verdict_text(r.verdict), r.message});
      auto li = [](const KernelInfo *k) {
        return k && k->launch_index != UINT64_MAX ? std::to_string(k->launch_index) : std::string("N/A");
      };
      auto opt = [](const TensorInfo *t, std::optional<std::string> TensorInfo::*f) {
        return t && t->*f ? *(t->*f) : std::string("N/A");
      };
      details_csv.row({step,
                       rank,
                       na,
                       nb,
                       li(ta ? ka : nullptr),
                       li(tb ? kb : nullptr),
                       dtype(ta),
                       dtype(tb),
                       shape(ta),
                       shape(tb),
                       metric(&TensorMetrics::cosine),
                       metric(&TensorMetrics::euc_dist),
                       metric(&TensorMetrics::max_abs_err),
                       metric(&TensorMetrics::max_rel_err),
                       metric(&TensorMetrics::one_thousandth),
                       metric(&TensorMetrics::five_thousandths),
                       stat_cell(ta, 0),
                       stat_cell(ta, 1),
                       stat_cell(ta, 2),
                       stat_cell(ta, 3),
                       stat_cell(tb, 0),
                       stat_cell(tb, 1),
                       stat_cell(tb, 2),
                       stat_cell(tb, 3),
                       sd(0),
                       sd(1),
                       sd(2),
                       sd(3),
                       srel(0),
                       srel(1),
                       srel(2),
                       srel(3),
                       opt(ta, &TensorInfo::md5),
                       opt(tb, &TensorInfo::md5),
                       verdict_text(r.verdict),
                       r.message,
                       opt(ta, &TensorInfo::data_name),
                       opt(tb, &TensorInfo::data_name)});
      ++tally[r.verdict];
    };

    for (const KernelInfo &ka : A.kernels) {
      ++total_kernels;
      auto it = B.index.find(ka.name);
      if (it == B.index.end()) {
        kernels_only_a.push_back(folder + " " + ka.name);
        RowResult r;
        r.verdict = Verdict::Unmatched;
        r.message = "No bench data matched.";
        for (const TensorInfo &t : ka.tensors) write_rows(&ka, &t, nullptr, nullptr, r);
        continue;
      }
      ++matched;
      const KernelInfo &kb = B.kernels[it->second];
      std::unordered_map<std::string, const TensorInfo *> b_tensors;
      for (const TensorInfo &t : kb.tensors) b_tensors.emplace(t.row_suffix(), &t);
      std::vector<std::string> failing;
      for (const TensorInfo &ta : ka.tensors) {
        auto bt = b_tensors.find(ta.row_suffix());
        if (bt == b_tensors.end()) {
          RowResult r;
          r.verdict = Verdict::Unmatched;
          r.message = "No bench data matched.";
          write_rows(&ka, &ta, &kb, nullptr, r);
          continue;
        }
        const TensorInfo &tb = *bt->second;
        b_tensors.erase(bt);
        const RowResult r = compare_tensor(A, ta, B, tb, th);
        write_rows(&ka, &ta, &kb, &tb, r);
        if (!diverges(r.verdict)) continue;
        std::string line = ta.row_suffix() + ": " + verdict_text(r.verdict);
        if (r.metrics)
          line += " (Cosine " + metric_text(r.metrics->cosine) + ", MaxAbsErr " + metric_text(r.metrics->max_abs_err) +
                  ", MaxRelativeErr " + metric_text(r.metrics->max_rel_err) + ")";
        else
          line += " (Max diff " + metric_text(r.stats[0].diff) + ", Mean diff " + metric_text(r.stats[2].diff) +
                  ", L2norm diff " + metric_text(r.stats[3].diff) + ")";
        if (!r.message.empty()) line += " " + r.message;
        failing.push_back(std::move(line));
      }
      for (const TensorInfo &tb : kb.tensors) {
        if (!b_tensors.count(tb.row_suffix())) continue;
        RowResult r;
        r.verdict = Verdict::Unmatched;
        r.message = "No NPU data matched.";
        write_rows(&ka, nullptr, &kb, &tb, r);
      }
      if (failing.empty() || folder_first) continue;
      folder_first = Divergence{folder, ka.name, A.dir->step.value_or(0), ka.launch_index, pi, std::move(failing)};
    }
    for (const KernelInfo &kb : B.kernels) {
      if (A.index.count(kb.name)) continue;
      kernels_only_b.push_back(folder + " " + kb.name);
      RowResult r;
      r.verdict = Verdict::Unmatched;
      r.message = "No NPU data matched.";
      for (const TensorInfo &t : kb.tensors) write_rows(nullptr, nullptr, &kb, &t, r);
    }
    if (folder_first) {
      if (!first ||
          std::pair(folder_first->step, folder_first->launch_index) < std::pair(first->step, first->launch_index))
        first = folder_first;
      per_folder.push_back(*folder_first);
    }
  }
  progress.finish();
  result_csv.close();
  details_csv.close();

  std::printf("compare: %s mode, %zu folder pair(s), %llu kernels in A, %llu matched, %zu only in A, %zu only in B\n",
              mode.empty() ? "no" : mode.c_str(), pairs.size(), static_cast<unsigned long long>(total_kernels),
              static_cast<unsigned long long>(matched), kernels_only_a.size(), kernels_only_b.size());
  std::string t;
  for (const auto &[v, n] : tally) t += (t.empty() ? "" : ", ") + std::to_string(n) + " " + verdict_text(v);
  std::printf("tensors: %s\n", t.empty() ? "none" : t.c_str());
  for (const std::string &f : folders_only_a) std::printf("folder only in A: %s\n", f.c_str());
  for (const std::string &f : folders_only_b) std::printf("folder only in B: %s\n", f.c_str());
  auto list_only = [](const char *side, const std::vector<std::string> &v) {
    for (size_t i = 0; i < v.size() && i < 20; ++i) std::printf("kernel only in %s: %s\n", side, v[i].c_str());
    if (v.size() > 20) std::printf("... and %zu more kernels only in %s (see the CSV files)\n", v.size() - 20, side);
  };
  list_only("A", kernels_only_a);
  list_only("B", kernels_only_b);

  if (!first) {
    std::printf("no divergence: every matched tensor passes\n");
  } else {
    std::printf("first diverging kernel (launch order): %s %s (launch_index %s)\n", first->folder.c_str(),
                first->kernel.c_str(),
                first->launch_index == UINT64_MAX ? "?" : std::to_string(first->launch_index).c_str());
    for (const std::string &l : first->lines) std::printf("  %s\n", l.c_str());
    auto print_stack = [&](const char *side, const RankDir &dir) {
      const auto frames = find_stack(dir, first->kernel);
      if (!frames) {
        std::printf("  %s stack: not recorded\n", side);
        return;
      }
      std::printf("  %s stack:\n", side);
      for (const std::string &f : *frames) std::printf("    %s\n", f.c_str());
    };
    print_stack("A", *pairs[first->pair].first);
    print_stack("B", *pairs[first->pair].second);
    if (per_folder.size() > 1) {
      std::printf("first diverging kernel per folder:\n");
      for (const Divergence &d : per_folder)
        std::printf("  %s %s (launch_index %s)\n", d.folder.c_str(), d.kernel.c_str(),
                    d.launch_index == UINT64_MAX ? "?" : std::to_string(d.launch_index).c_str());
    }
  }
  std::printf("results: %s\n         %s\n", result_path.string().c_str(), details_path.string().c_str());
  return kExitOk;
}

}  // namespace msprobe::tools
