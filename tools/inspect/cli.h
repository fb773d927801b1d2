// What every msprobe-inspect command shares: argument parsing, exit codes, the progress line, number text.
#pragma once
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "tools/reader/partial_read.h"

namespace msprobe::tools {

// Exit codes: 0 done (for verify: the dump is intact), 1 the command ran and found problems (verify, repair,
// convert), 2 bad usage or input that could not be read.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFindings = 1;
inline constexpr int kExitUsage = 2;

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct OptionSpec {
  std::string_view name;  // "--atol"
  bool takes_value = false;
};

struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::string, std::less<>> values;
  std::set<std::string, std::less<>> flags;

  bool flag(std::string_view name) const { return flags.count(name) != 0; }
  std::optional<std::string> value(std::string_view name) const;
  // Parsed values; UsageError naming the option and the value when it is not a number (or out of range).
  double number(std::string_view name, double fallback, double lo, double hi) const;
  std::optional<uint64_t> count(std::string_view name) const;
};

// argv after the command name. "--opt value" and "--opt=value"; "--" ends the options. UsageError on an unknown
// option or a missing value.
Args parse_args(std::span<char *const> argv, std::span<const OptionSpec> options);

// The positional arguments must number exactly `n`; UsageError naming what is missing or extra.
void expect_positional(const Args &args, size_t n, std::string_view what);

// The options of the commands that take a DIR and one flag (summary --json, convert --keep-bin, repair --dry-run).
struct DirAndFlag {
  std::filesystem::path dir;
  bool flag = false;
};
DirAndFlag parse_dir_and_flag(std::span<char *const> argv, std::string_view flag);

// A one-line progress indicator on stderr, shown only when stderr is a terminal and the work takes more than a
// moment; erased when done.
class Progress {
 public:
  Progress(std::string label, uint64_t total);
  ~Progress();
  Progress(const Progress &) = delete;
  Progress &operator=(const Progress &) = delete;
  void update(uint64_t done);
  void finish();

 private:
  std::string label_;
  uint64_t total_;
  bool enabled_, shown_ = false;
  std::chrono::steady_clock::time_point start_, last_;
};

// The folders a command read only in part (tools/reader/partial_read.h: being written, not closed, damaged), one line
// each on stderr: "msprobe-inspect COMMAND: step1/rank0: being written by a running process (pid 42): ...". Returns
// whether one of them is damage (a folder not closed or damaged), which the commands that report problems count.
bool say_shortfalls(std::string_view command, std::span<const Shortfall> shortfalls);

// A number for CSV and terminal output: shortest round trip, "N/A" for a missing value (msprobe's spelling).
std::string metric_text(std::optional<double> v);

// Compact list of numbers: "0-2, 5".
std::string ranges_text(std::span<const uint64_t> sorted_unique);

// Local time as YYYYmmddHHMMSS, for msprobe-style result file names (compare_result_{timestamp}.csv).
std::string timestamp_now();

// A command's two new CSV files in `out_dir` (created if missing; InputError when it cannot be):
// {result_prefix}{timestamp}.csv and {details_prefix}{timestamp}.csv, "_1", "_2"... added while a run in the same
// second holds either name.
struct ResultFiles {
  std::filesystem::path result, details;
};
ResultFiles new_result_files(const std::filesystem::path &out_dir, std::string_view result_prefix,
                             std::string_view details_prefix);

}  // namespace msprobe::tools
