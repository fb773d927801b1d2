// compare's parts: the kernels of one dump folder, one tensor pair's verdict (compare_tensor.cpp) and the two CSV
// files it writes (compare_csv.cpp). cmd_compare.cpp pairs the folders and kernels and reports.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tools/inspect/cli.h"
#include "tools/reader/csv.h"
#include "tools/reader/dump_reader.h"
#include "tools/reader/metrics.h"
#include "tools/reader/partial_read.h"

namespace msprobe::tools::compare {

// A tensor row's Result, in msprobe's spellings.
enum class Verdict { Pass, Diff, Warning, Different, Error, Unmatched };
const char *verdict_text(Verdict v);
inline bool diverges(Verdict v) { return v != Verdict::Pass && v != Verdict::Unmatched; }

struct KernelInfo {
  std::string name;
  uint64_t launch_index = UINT64_MAX;
  std::vector<TensorInfo> tensors;
};

// One dump folder's kernels in launch order, indexed by name without its direction token (format::kernel_stem), so
// that a dump written before the token existed pairs with one written after.
struct Side {
  const RankDir *dir = nullptr;
  DumpHeaderRead header;
  std::vector<KernelInfo> kernels;
  std::unordered_map<std::string, size_t> index;
  std::optional<Shortfall> partial;  // dump.json read only in part (being written, not closed, damaged)
};

// The folder pairs of two dumps: by (step, rank), or the two folders when each side is one folder (to compare two
// ranks). Folders without a partner are listed by label.
struct FolderPairs {
  std::vector<std::pair<const RankDir *, const RankDir *>> pairs;  // into a, b
  std::vector<std::string> only_a, only_b;
};
FolderPairs pair_folders(const std::vector<RankDir> &a, const std::vector<RankDir> &b);

uint64_t dump_json_size(const RankDir &d);  // 0 when unknown
// Reads the folder's dump.json; `progress` counts dump.json bytes, `done` those read before it (then its size added).
Side load_side(const RankDir &d, Progress &progress, uint64_t &done);

struct RowResult {
  Verdict verdict = Verdict::Pass;
  std::string message;
  std::optional<TensorMetrics> metrics;  // when the tensor data was compared
  std::array<StatDiff, 4> stats{};
};
// Tensor `a` of side A against tensor `b` of side B, matched by slot: by their data when both sides saved it, else
// by CRC, else by statistics.
RowResult compare_tensor(const Side &A, const TensorInfo &a, const Side &B, const TensorInfo &b, const Thresholds &th);

// ---- The CSV files --------------------------------------------------------------------------------------------------
extern const std::vector<std::string> kResultColumns, kDetailColumns;

// One row's two sides; a side without its tensor (or kernel) is "N/A".
struct RowSides {
  const KernelInfo *ka = nullptr;
  const TensorInfo *ta = nullptr;
  const KernelInfo *kb = nullptr;
  const TensorInfo *tb = nullptr;
};
std::vector<std::string> detail_cells(const std::string &step, const std::string &rank, const RowSides &s,
                                      const RowResult &r);
// compare_result's columns are some of compare_details': its row is picked from the details row.
std::vector<std::string> result_cells(const std::vector<std::string> &detail_row);

// One result file, created with its header row (mode from the umask). Rows are gathered and appended 64 KiB at a
// time, and what is gathered when an error ends the run is still written; a write that failed is reported when the
// file is closed.
class CompareCsv {
 public:
  CompareCsv(const fs::path &path, const std::vector<std::string> &columns);
  ~CompareCsv() { flush(); }
  CompareCsv(const CompareCsv &) = delete;
  CompareCsv &operator=(const CompareCsv &) = delete;
  void row(const std::vector<std::string> &cells);
  void close();

 private:
  void flush();

  CsvAppender file_;
  std::string pending_;
};

}  // namespace msprobe::tools::compare
