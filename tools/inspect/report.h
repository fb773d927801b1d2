// msprobe-inspect report: a dump (and, with --against, a second one) drawn as one self-contained HTML file.
//   report_model.cpp        reads the folders into what the page plots: one point per kernel, its stack, its tensors
//   report_marks.h          the seam: the first NaN and the first divergence come from one function each
//   report_page.cpp         the page's data (JSON) and the HTML around it, Chart.js and the page's script inlined
//   report_page/            the page itself (report.html, report.js, report.css), embedded at build time
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tools/inspect/report_marks.h"
#include "tools/reader/dump_reader.h"
#include "tools/reader/flight.h"
#include "tools/reader/metrics.h"
#include "tools/reader/races.h"

namespace msprobe::tools::report {

// A folder with at most this many kernels has every kernel's tensors in the page; a larger one only those of the
// kernels the page names (first NaN and its route, first divergence, the largest differences, flight records).
inline constexpr size_t kDetailsForAll = 10'000;
// The kernels that differ most, listed with --against.
inline constexpr size_t kTopDiffs = 20;

// Strings stored once in the page: name parts, stack frames, stacks (lists of frame ids).
class Interner {
 public:
  uint32_t id(std::string_view s);
  const std::vector<std::string> &items() const { return items_; }

 private:
  std::unordered_map<std::string, uint32_t> index_;
  std::vector<std::string> items_;
};

struct Strings {
  Interner stems;   // "Gelu.Default" of "Gelu.Default.0.forward"
  Interner tails;   // ".0.forward"
  Interner frames;  // stack frames, each on one line (format/stack_text.h)
  std::vector<std::vector<uint32_t>> stacks;
  std::vector<int32_t> stack_user;  // per stack: the innermost frame of the user's own code (user_frame), -1: none
  std::map<std::vector<uint32_t>, int32_t> stack_index;
  int32_t stack_id(const std::vector<std::string> &frames);
};

// What the page knows about each kernel's outputs: bits of KernelPoint::flags.
enum KernelFlag : uint8_t {
  kOutputNan = 1,           // a statistic of an output is NaN
  kOutputInf = 2,           // a statistic of an output is +Inf or -Inf
  kInputNonFinite = 4,      // a statistic of an input is NaN or infinite
  kNoOutputStatistics = 8,  // no output has a numeric statistic (nothing to plot)
};

// One kernel, its outputs' statistics folded into one point: the largest Norm, the largest Max and the smallest Min
// over its output tensors (NaN when one of them is NaN; an infinity counts as the value it is). Booleans and null
// statistics are left out.
struct KernelPoint {
  uint64_t x = 0;  // launch_index (the position in the folder for an entry without one)
  uint32_t stem = 0, tail = 0;
  std::optional<double> norm, max, min;
  uint8_t flags = 0;
  int32_t stack = -1;   // into Strings::stacks
  std::string tensors;  // the page's JSON rows of its tensors: [row, dtype, shape, Max, Min, Mean, Norm]
};

// With --against: how the kernel's outputs differ from the same kernel of the other dump (statistics relative
// difference |a - b| / (max(|a|, |b|) + 1e-10), compare's stat_diff), the largest over its output tensors and the
// four statistics.
struct KernelDiff {
  bool matched = false;  // the kernel is in B
  std::optional<double> rel;
  std::string where;  // "output.0 Norm"
  format::StatValue a, b;
};

struct FolderData {
  RankDir dir;
  std::string task;
  std::vector<KernelPoint> kernels;  // launch order
  std::unordered_map<std::string, size_t> by_name;
  uint64_t nan = 0, inf = 0;           // kernels with kOutputNan, kOutputInf
  std::optional<size_t> first_bad;     // the first of them in launch order
  std::optional<std::string> against;  // the label of B's folder paired with this one
  std::vector<KernelDiff> diffs;       // parallel to kernels when paired
  std::string name_of(size_t pos, const Strings &s) const;
};

struct Report {
  std::filesystem::path root;
  std::optional<std::filesystem::path> against;
  Thresholds th;
  Strings strings;
  std::vector<FolderData> folders;   // step, then rank order
  std::vector<FlightRecord> flight;  // FlightKernel::folder indexes folders
  // MSPROBE_RACECHECK: each folder's races.json (folder index, race), shown beside the kernels they name.
  std::vector<std::pair<size_t, RaceEntry>> races;
  std::optional<Mark> first_nan, first_diff;
  std::vector<std::string> only_a, only_b;  // folders without a partner in the other dump
  std::vector<std::string> partial;         // folders read only in part (tools/reader/partial_read.h), one line each
  bool damaged = false;                     // one of them was not closed or is damaged (not only being written)
  uint64_t kernels_only_a = 0, kernels_only_b = 0;
};

// Reads the dump (and B) into a Report; the marks are left to the caller (report_marks.h).
Report read_report(const std::filesystem::path &root, const std::optional<std::filesystem::path> &against,
                   const Thresholds &th);

// Numbers in the page's JSON: finite ones as Python's repr writes them; NaN, Infinity and -Infinity, which JSON cannot
// hold, as the strings "NaN", "Inf", "-Inf". A statistic: null, a number, true / false.
void append_page_number(std::string &out, double v);
void append_page_stat(std::string &out, const format::StatValue &v);

// The whole HTML page.
std::string page_html(const Report &r);

}  // namespace msprobe::tools::report
