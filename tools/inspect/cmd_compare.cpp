// compare A B: kernels matched by step, rank and name (names are run-invariant: spec §5), tensors by slot.
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "format/format.h"
#include "format/naming.h"
#include "format/stack_text.h"
#include "tools/inspect/cli.h"
#include "tools/inspect/commands.h"
#include "tools/inspect/compare.h"
#include "tools/reader/dump_reader.h"

namespace msprobe::tools {

const std::string_view kCompareHelp =
    R"(usage: msprobe-inspect compare A B [--atol X] [--cos X] [--stat-rtol X] [--out DIR] [--fail-on-diff]

Matches the kernels of dump A (the "NPU" side, e.g. the run under test) with those of dump B (the "Bench" side,
e.g. the reference run) by step, rank and kernel name ({OpType}.{OpName}.{n}.forward: the same in every run of the
same program; a dump written before names ended in .forward pairs with one written after), and their tensors by slot (input.0, output.1, ...). A and B may be dump roots, step folders or rank
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
  --fail-on-diff exit 1 when the dumps differ: a tensor that does not pass, or a kernel or folder on one side only

Writes compare_result_{timestamp}.csv (one row per tensor: names, dtypes, shapes, the main metrics, Result,
Err_message) and compare_details_{timestamp}.csv (one row per tensor with every metric, both sides'
statistics, CRCs, launch indexes and file names). Prints counts, the kernels found on one side only, and the first
diverging kernel in launch order (the first whose tensors are not all "pass") with its stack (both runs' when they differ).

Exit status 0 when the comparison ran (whatever it found; with --fail-on-diff, 1 when the dumps differ; 1 when a
folder was read only in part because its dump.json was not closed or is damaged), 2 on bad input.
)";

namespace compare {
namespace {

// The first diverging kernel of a folder pair, for the terminal: a kernel both runs have whose tensors are not all
// "pass" (`lines`: the failing ones), or a kernel only one run has (`only_in` "A" or "B") launched where the runs part,
// before such a kernel whose inputs already differ (`then`).
struct Divergence {
  std::string folder, kernel;
  uint64_t step = 0, launch_index = UINT64_MAX;
  size_t pair = 0;
  std::vector<std::string> lines;
  bool inputs_differ = false;
  uint64_t b_launch_index = UINT64_MAX;  // its pair's in B
  std::string only_in;
  std::vector<Divergence> then;  // at most one
};

// ---- Options and plan -----------------------------------------------------------------------------------------------
struct CompareOptions {
  std::string a, b;
  Thresholds th;
  fs::path out_dir;
  bool fail_on_diff = false;
};

CompareOptions parse_options(std::span<char *const> argv) {
  static const OptionSpec kOptions[] = {
      {"--atol", true}, {"--cos", true}, {"--stat-rtol", true}, {"--out", true}, {"--fail-on-diff", false}};
  const Args args = parse_args(argv, kOptions);
  expect_positional(args, 2, "A B (two dumps)");
  CompareOptions o;
  o.a = args.positional[0];
  o.b = args.positional[1];
  o.th.atol = args.number("--atol", o.th.atol, 0, 1e308);
  o.th.cosine = args.number("--cos", o.th.cosine, -1, 1);
  o.th.stat_rtol = args.number("--stat-rtol", o.th.stat_rtol, 0, 1e308);
  o.out_dir = args.value("--out").value_or(".");
  o.fail_on_diff = args.flag("--fail-on-diff");
  return o;
}

struct ComparePlan {
  std::vector<RankDir> dirs_a, dirs_b;
  std::vector<std::pair<const RankDir *, const RankDir *>> pairs;  // into dirs_a, dirs_b
  std::vector<std::string> folders_only_a, folders_only_b;
  fs::path result_path, details_path;
};

ComparePlan make_plan(const CompareOptions &o) {
  ComparePlan p;
  p.dirs_a = find_rank_dirs(o.a);
  p.dirs_b = find_rank_dirs(o.b);
  FolderPairs fp = pair_folders(p.dirs_a, p.dirs_b);
  p.pairs = std::move(fp.pairs);
  p.folders_only_a = std::move(fp.only_a);
  p.folders_only_b = std::move(fp.only_b);
  const ResultFiles files = new_result_files(o.out_dir, "compare_result_", "compare_details_");
  p.result_path = files.result;
  p.details_path = files.details;
  return p;
}

// ---- Run ------------------------------------------------------------------------------------------------------------
// What the run found, for the report.
struct CompareTally {
  std::map<Verdict, uint64_t> verdicts;
  uint64_t kernels_a = 0, matched = 0;
  std::vector<std::string> kernels_only_a, kernels_only_b;
  std::string mode;  // "tensor", "statistics" or "mixed"; empty when no folder was compared
  std::optional<Divergence> first;
  std::vector<Divergence> per_folder;
  std::vector<std::string> partial;  // "A step1/rank: being written by ...": folders read only in part
  bool damaged = false;              // one of them was not closed or is damaged
};

RowResult unmatched(std::string message) {
  RowResult r;
  r.verdict = Verdict::Unmatched;
  r.message = std::move(message);
  return r;
}

// The kernels of one folder pair, compared: their rows written, the findings tallied.
class PairComparison {
 public:
  PairComparison(const Side &A, const Side &B, size_t pair, const Thresholds &th, CompareCsv &result,
                 CompareCsv &details, CompareTally &tally)
      : A_(A), B_(B), pair_(pair), th_(th), result_(result), details_(details), tally_(tally) {
    step_ = A.dir->step ? std::to_string(*A.dir->step) : "";
    rank_ = A.dir->rank_label();
    folder_ = A.dir->label() == B.dir->label() ? A.dir->label() : A.dir->label() + " vs " + B.dir->label();
  }

  void run() {
    for (const KernelInfo &ka : A_.kernels) kernel(ka);
    for (const KernelInfo &kb : B_.kernels) {
      if (A_.index.count(std::string(format::kernel_stem(kb.name)))) continue;
      tally_.kernels_only_b.push_back(folder_ + " " + kb.name);
      if (!first_only_b_) first_only_b_ = &kb;
      for (const TensorInfo &t : kb.tensors) write({nullptr, nullptr, &kb, &t}, unmatched("No NPU data matched."));
    }
    blame_parting();
    if (!first_) return;
    if (!tally_.first ||
        std::pair(first_->step, first_->launch_index) < std::pair(tally_.first->step, tally_.first->launch_index))
      tally_.first = first_;
    tally_.per_folder.push_back(*first_);
  }

 private:
  void kernel(const KernelInfo &ka) {
    ++tally_.kernels_a;
    auto it = B_.index.find(std::string(format::kernel_stem(ka.name)));
    if (it == B_.index.end()) {
      tally_.kernels_only_a.push_back(folder_ + " " + ka.name);
      if (!first_only_a_) first_only_a_ = &ka;
      for (const TensorInfo &t : ka.tensors) write({&ka, &t, nullptr, nullptr}, unmatched("No bench data matched."));
      return;
    }
    ++tally_.matched;
    bool inputs_differ = false;
    std::vector<std::string> failing = tensors(ka, B_.kernels[it->second], inputs_differ);
    if (failing.empty() || first_) return;
    first_ = divergence(ka);
    first_->lines = std::move(failing);
    first_->inputs_differ = inputs_differ;
    first_->b_launch_index = B_.kernels[it->second].launch_index;
  }

  Divergence divergence(const KernelInfo &k) const {
    Divergence d;
    d.folder = folder_;
    d.kernel = k.name;
    d.step = A_.dir->step.value_or(0);
    d.launch_index = k.launch_index;
    d.pair = pair_;
    return d;
  }

  // When the first diverging kernel was given inputs that already differ and a kernel only one run has was launched
  // before it (in that run's launch order, which agrees with the other's up to where the runs part), the first such
  // kernel is the likeliest origin: it is named first, the kernel both runs have after it.
  void blame_parting() {
    if (!first_ || !first_->inputs_differ) return;
    const KernelInfo *a = first_only_a_ && first_only_a_->launch_index < first_->launch_index ? first_only_a_ : nullptr;
    const KernelInfo *b =
        first_only_b_ && first_only_b_->launch_index < first_->b_launch_index ? first_only_b_ : nullptr;
    if (!a && !b) return;
    const bool in_a = a && (!b || a->launch_index <= b->launch_index);
    const KernelInfo &k = in_a ? *a : *b;
    Divergence d = divergence(k);
    d.only_in = in_a ? "A" : "B";
    d.lines.push_back("run " + std::string(in_a ? "B" : "A") +
                      " has no kernel of this name, and it was launched where the runs part: the first kernel both " +
                      "runs have that diverges after it, " + first_->kernel + " (launch_index " +
                      std::to_string(first_->launch_index) +
                      "), was given inputs that already differ. The likeliest cause.");
    d.then.push_back(std::move(*first_));
    first_ = std::move(d);
  }

  // The rows of two matched kernels; returns the lines of the tensors that diverge (`inputs_differ`: an input does).
  std::vector<std::string> tensors(const KernelInfo &ka, const KernelInfo &kb, bool &inputs_differ) {
    std::unordered_map<std::string, const TensorInfo *> b_tensors;
    for (const TensorInfo &t : kb.tensors) b_tensors.emplace(t.row_suffix(), &t);
    std::vector<std::string> failing;
    for (const TensorInfo &ta : ka.tensors) {
      auto bt = b_tensors.find(ta.row_suffix());
      if (bt == b_tensors.end()) {
        write({&ka, &ta, &kb, nullptr}, unmatched("No bench data matched."));
        continue;
      }
      const TensorInfo &tb = *bt->second;
      b_tensors.erase(bt);
      const RowResult r = compare_tensor(A_, ta, B_, tb, th_);
      write({&ka, &ta, &kb, &tb}, r);
      if (!diverges(r.verdict)) continue;
      failing.push_back(failing_line(ta, r));
      inputs_differ = inputs_differ || ta.io == format::IoKind::Input;
    }
    for (const TensorInfo &tb : kb.tensors)
      if (b_tensors.count(tb.row_suffix())) write({&ka, nullptr, &kb, &tb}, unmatched("No NPU data matched."));
    return failing;
  }

  static std::string failing_line(const TensorInfo &ta, const RowResult &r) {
    std::string line = ta.row_suffix() + ": " + verdict_text(r.verdict);
    if (r.metrics)
      line += " (Cosine " + metric_text(r.metrics->cosine) + ", MaxAbsErr " + metric_text(r.metrics->max_abs_err) +
              ", MaxRelativeErr " + metric_text(r.metrics->max_rel_err) + ")";
    else
      line += " (Max diff " + metric_text(r.stats[0].diff) + ", Mean diff " + metric_text(r.stats[2].diff) +
              ", L2norm diff " + metric_text(r.stats[3].diff) + ")";
    if (!r.message.empty()) line += " " + r.message;
    return line;
  }

  void write(const RowSides &s, const RowResult &r) {
    const std::vector<std::string> detail_row = detail_cells(step_, rank_, s, r);
    result_.row(result_cells(detail_row));
    details_.row(detail_row);
    ++tally_.verdicts[r.verdict];
  }

  const Side &A_, &B_;
  size_t pair_;
  const Thresholds &th_;
  CompareCsv &result_, &details_;
  CompareTally &tally_;
  std::string step_, rank_, folder_;  // the rows' Step and Rank cells; the folder as listed
  std::optional<Divergence> first_;
  const KernelInfo *first_only_a_ = nullptr, *first_only_b_ = nullptr;  // in launch order
};

void note_mode(const Side &A, const Side &B, std::string &mode) {
  const std::string_view tensor = format::task_name(format::Task::Tensor);
  const std::string this_mode = A.header.task == tensor && B.header.task == tensor ? "tensor" : "statistics";
  if (mode.empty())
    mode = this_mode;
  else if (mode != this_mode)
    mode = "mixed";
}

CompareTally run_plan(const ComparePlan &p, const Thresholds &th) {
  CompareCsv result_csv(p.result_path, kResultColumns), details_csv(p.details_path, kDetailColumns);
  CompareTally tally;
  uint64_t total_bytes = 0, done_bytes = 0;
  for (const auto &[a, b] : p.pairs) total_bytes += dump_json_size(*a) + dump_json_size(*b);
  Progress progress("compare", total_bytes);
  for (size_t i = 0; i < p.pairs.size(); ++i) {
    const Side A = load_side(*p.pairs[i].first, progress, done_bytes);
    const Side B = load_side(*p.pairs[i].second, progress, done_bytes);
    note_mode(A, B, tally.mode);
    for (const Side *s : {&A, &B})
      if (s->partial) {
        tally.partial.push_back((s == &A ? "A " : "B ") + s->partial->text());
        tally.damaged = tally.damaged || s->partial->damage();
      }
    PairComparison(A, B, i, th, result_csv, details_csv, tally).run();
  }
  progress.finish();
  result_csv.close();
  details_csv.close();
  return tally;
}

// ---- Report ---------------------------------------------------------------------------------------------------------
// " at {the innermost frame of the user's own code}" of a kernel of A, or nothing when no stack is recorded.
std::string where_text(const RankDir &dir, const std::string &kernel) {
  const std::optional<std::vector<std::string>> frames = find_stack(dir, kernel);
  const std::optional<size_t> user = frames ? format::user_frame(*frames) : std::nullopt;
  return user ? " at " + format::frame_line((*frames)[*user]) : std::string();
}

// Both runs' stacks of the kernel; one when they are the same (the usual case: the same program).
void print_stacks(const std::optional<std::vector<std::string>> &a, const std::optional<std::vector<std::string>> &b) {
  if (a && b && *a == *b) {
    std::printf("  stack (the same in A and B):\n%s", format::stack_text(*a, "    ").c_str());
    return;
  }
  for (const auto &[side, frames] : {std::pair{"A", &a}, std::pair{"B", &b}}) {
    if (*frames)
      std::printf("  %s stack:\n%s", side, format::stack_text(**frames, "    ").c_str());
    else
      std::printf("  %s stack: not recorded\n", side);
  }
}

// The folder of the run that has the kernel: A's, or B's for a kernel only B has.
const RankDir &home_of(const ComparePlan &p, const Divergence &d) {
  return d.only_in == "B" ? *p.pairs[d.pair].second : *p.pairs[d.pair].first;
}

void print_divergence(const ComparePlan &p, const Divergence &d, const char *heading) {
  std::printf("%s: %s %s (launch_index %s)%s\n", heading, d.folder.c_str(), d.kernel.c_str(),
              d.launch_index == UINT64_MAX ? "?" : std::to_string(d.launch_index).c_str(),
              d.only_in.empty() ? "" : (": only in " + d.only_in).c_str());
  for (const std::string &l : d.lines) std::printf("  %s\n", l.c_str());
  if (d.only_in.empty()) {
    print_stacks(find_stack(*p.pairs[d.pair].first, d.kernel), find_stack(*p.pairs[d.pair].second, d.kernel));
  } else if (const auto frames = find_stack(home_of(p, d), d.kernel)) {
    std::printf("  stack (%s):\n%s", d.only_in.c_str(), format::stack_text(*frames, "    ").c_str());
  }
  for (const Divergence &then : d.then) print_divergence(p, then, "then the first kernel both runs have that diverges");
}

void print_first_divergence(const ComparePlan &p, const CompareTally &t) {
  print_divergence(p, *t.first, "first diverging kernel (launch order)");
  if (t.per_folder.size() > 1) {
    std::printf("first diverging kernel per folder:\n");
    for (const Divergence &d : t.per_folder)
      std::printf("  %s %s (launch_index %s)%s%s\n", d.folder.c_str(), d.kernel.c_str(),
                  d.launch_index == UINT64_MAX ? "?" : std::to_string(d.launch_index).c_str(),
                  d.only_in.empty() ? "" : (" only in " + d.only_in).c_str(),
                  where_text(home_of(p, d), d.kernel).c_str());
  }
}

void report(const ComparePlan &p, const CompareTally &t) {
  std::printf("compare: %s mode, %zu folder pair(s), %llu kernels in A, %llu matched, %zu only in A, %zu only in B\n",
              t.mode.empty() ? "no" : t.mode.c_str(), p.pairs.size(), static_cast<unsigned long long>(t.kernels_a),
              static_cast<unsigned long long>(t.matched), t.kernels_only_a.size(), t.kernels_only_b.size());
  std::string verdicts;
  for (const auto &[v, n] : t.verdicts)
    verdicts += (verdicts.empty() ? "" : ", ") + std::to_string(n) + " " + verdict_text(v);
  std::printf("tensors: %s\n", verdicts.empty() ? "none" : verdicts.c_str());
  for (const std::string &f : p.folders_only_a) std::printf("folder only in A: %s\n", f.c_str());
  for (const std::string &f : p.folders_only_b) std::printf("folder only in B: %s\n", f.c_str());
  auto list_only = [](const char *side, const std::vector<std::string> &v) {
    for (size_t i = 0; i < v.size() && i < 20; ++i) std::printf("kernel only in %s: %s\n", side, v[i].c_str());
    if (v.size() > 20) std::printf("... and %zu more kernels only in %s (see the CSV files)\n", v.size() - 20, side);
  };
  for (const std::string &s : t.partial)
    std::printf("read in part: %s (its kernels not read are counted on the other side only)\n", s.c_str());
  list_only("A", t.kernels_only_a);
  list_only("B", t.kernels_only_b);
  if (!t.first)
    std::printf("no divergence: every matched tensor passes\n");
  else
    print_first_divergence(p, t);
  std::printf("results: %s\n         %s\n", p.result_path.string().c_str(), p.details_path.string().c_str());
}

}  // namespace
}  // namespace compare

int run_compare(std::span<char *const> argv) {
  const compare::CompareOptions options = compare::parse_options(argv);
  const compare::ComparePlan plan = compare::make_plan(options);
  const compare::CompareTally tally = compare::run_plan(plan, options.th);
  compare::report(plan, tally);
  // --fail-on-diff: the dumps differ when a tensor does not pass or a kernel or folder is on one side only.
  const bool differ = tally.first || !tally.kernels_only_a.empty() || !tally.kernels_only_b.empty() ||
                      !plan.folders_only_a.empty() || !plan.folders_only_b.empty();
  return tally.damaged || (options.fail_on_diff && differ) ? kExitFindings : kExitOk;
}

}  // namespace msprobe::tools
