// replay's parts (the command is cmd_replay.cpp): decoding a kernel's recorded arguments for the CPU references
// (replay_args.cpp), replaying one kernel and writing its CSV rows (replay_kernel.cpp), taking up the CSV files of an
// earlier run (replay_resume.cpp), and the report on a flight record (replay_flight.cpp). They join the references'
// namespace (tools/replay).
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "tools/reader/dump_reader.h"
#include "tools/reader/flight.h"
#include "tools/replay/precheck.h"
#include "tools/replay/refs.h"

namespace msprobe::tools::replay {

// msprobe's columns (accuracy_checking_result / _details), then ours.
extern const std::vector<std::string> kResultColumns, kDetailColumns;
inline constexpr size_t kResultStep = 4, kResultRank = 5, kResultLaunch = 6;
inline constexpr size_t kDetailStep = 23, kDetailRank = 24;

// Line breaks as spaces: a message on one line (cell or terminal).
std::string one_line(std::string s);

// One rank folder of the dump.
struct Folder {
  const RankDir *dir = nullptr;
  std::string step, rank;  // CSV cells
  DumpHeaderRead header;
  std::vector<EntryRead> kernels;  // launch order; read when the run reaches the folder
};

// ---- Arguments (replay_args.cpp) ------------------------------------------------------------------------------------
// A dumped tensor's values; RefError naming the tensor when they cannot be read.
Tensor load_tensor(const Folder &f, const TensorInfo &t);
// One input_args element as the references see it; tensors (from `inputs`, by slot) are loaded into `store`.
// RefError when it is not an argument the references use.
Arg make_arg(const Folder &f, const Json &v, const std::string &slot,
             const std::unordered_map<std::string, const TensorInfo *> &inputs,
             std::vector<std::unique_ptr<Tensor>> &store);

// ---- One kernel (replay_kernel.cpp) ---------------------------------------------------------------------------------
struct OutputRow {
  std::string slot;
  Status status = Status::Skip;
  std::string bench_dtype, device_dtype, shape;
  PrecheckMetrics m;
};

struct KernelResult {
  Status status = Status::Skip;
  std::string message;
  std::vector<OutputRow> rows;
  bool no_reference = false;
};

struct Context {
  PrecheckThresholds th;
  // Collectives: the kernel's members in the folders of the step (refs.h, Members); RefError when they cannot all be
  // found. Unset: no member is known (the collective's references cannot run).
  std::function<Members(const Folder &, const EntryRead &)> members;
};

// Re-runs kernel `k` with its op type's reference and judges each dumped output; a kernel whose reference is
// missing or cannot run is skipped, never passed.
KernelResult replay_kernel(const Folder &f, const EntryRead &k, const Context &ctx);
// first-nan's question about an origin (docs/inspect.md): where kernel `k`'s dumped outputs hold NaN or an infinity,
// does its CPU reference, rounded to each output's dtype, too? Kernel: the reference is finite at a position where
// the kernel wrote a non-finite value (it computed wrongly from its inputs). Data: the reference is non-finite
// wherever the kernel's output is (the values themselves left the dtype's range). Unknown: nothing could be compared
// (no reference, no tensor files); `reason` says why, or what was found.
struct NonFiniteCheck {
  enum class Result { Kernel, Data, Unknown } result = Result::Unknown;
  std::string reason;
};
NonFiniteCheck check_nonfinite(const Folder &f, const EntryRead &k, const Context &ctx);
// Its row of accuracy_checking_result, and its rows (one per output) of accuracy_checking_details.
std::string result_row(const Folder &f, const EntryRead &k, const KernelResult &r);
std::string detail_rows(const Folder &f, const EntryRead &k, const KernelResult &r);

// ---- Resuming (replay_resume.cpp) -----------------------------------------------------------------------------------
using Key = std::tuple<std::string, std::string, std::string>;  // step, rank, kernel

// --csv-path: the kernels already done, and the result rows they got.
struct Resume {
  std::set<Key> done;
  std::vector<std::vector<std::string>> rows;  // the result rows kept
};

// accuracy_checking_details_X.csv beside accuracy_checking_result_X.csv; InputError for another name.
fs::path details_path_for(const fs::path &result);
// Reads both files, keeping the whole rows of kernels done once; a file that loses rows is rewritten (a record cut
// by a kill, a duplicate, details of a kernel whose result row never made it). A missing details file is created.
Resume load_resume(const fs::path &result_path, const fs::path &details_path);

// ---- A flight record (replay_flight.cpp) ----------------------------------------------------------------------------
// What replay found for a kernel, in this run or in the resumed CSV.
struct Outcome {
  Status status = Status::Skip;
  bool no_reference = false;  // skipped: its op type has no CPU reference
};
using Outcomes = std::map<Key, Outcome>;

// Per record of the flight record `kernels` (nothing when empty): the first kernel in launch order whose status is
// error or warning; when none has one, the first whose output is non-finite although its inputs are finite; and
// the kernels not judged.
void print_flight_report(const std::vector<Folder> &folders, std::vector<FlightKernel> kernels,
                         const Outcomes &outcomes);

}  // namespace msprobe::tools::replay
