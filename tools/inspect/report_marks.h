// THE SEAM between `msprobe-inspect report` and the analyses that find where the numbers went wrong. The report draws
// two marks, and each comes from exactly one function here:
//
//   first_nan(ROOT)          the first non-finite kernel (msprobe-inspect first-nan ROOT)
//   first_diff(ROOT_A, B)    the first kernel where two runs part (msprobe-inspect first-diff ROOT_A ROOT_B)
//
// Both answer with a Mark, the fields of `first-nan --json` / `first-diff --json` ({"rank", "step", "kernel", "stack",
// "verdict", "spread": [...]}), which the report writes into the page as they are (report_page.cpp, mark_json) and
// locates in its own data by (rank, step, kernel). report_marks.cpp answers with the cross-rank analyses of first-nan
// and first-diff (ranks.h: causal order across ranks, joined at collectives), run in this process.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "tools/reader/metrics.h"

namespace msprobe::tools::report {

// One kernel a mark names.
struct MarkedKernel {
  std::string rank;  // rank label, as the folders: "rank0", "rank"
  std::optional<uint64_t> step;
  std::string kernel;
  std::optional<uint64_t> launch_index;
  std::string note;  // on a spread entry: how it got there ("its inputs were non-finite")
};

struct Mark {
  MarkedKernel at;
  std::vector<std::string> stack;    // at's frames from stack.json (empty: not recorded)
  std::string verdict;               // one line: what makes `at` the mark
  std::vector<MarkedKernel> spread;  // the route it went on by, in order
};

// The first kernel whose outputs hold NaN/Inf while its inputs are finite (the origin), nullopt when no kernel's
// statistics hold a NaN or an infinity.
std::optional<Mark> first_nan(const std::filesystem::path &root);

// The first kernel of A (step, then launch order) whose tensors differ from B's beyond `th` (compare's verdicts),
// nullopt when every matched kernel passes.
std::optional<Mark> first_diff(const std::filesystem::path &a, const std::filesystem::path &b, const Thresholds &th);

}  // namespace msprobe::tools::report
