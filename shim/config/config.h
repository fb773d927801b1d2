// The shim's configuration (spec §4): MSPROBE_* environment variables, optionally an msprobe config.json named by
// MSPROBE_CONFIG (level "L2"); a variable overrides the same field of the file. docs/configuration.md is the user
// reference for every value, default and message.
//
// load_config() is pure: it reads the environment only through the getenv it is given (tests pass a map) and the
// file system only for MSPROBE_CONFIG, prints nothing and never throws. Every problem becomes one line in
// ConfigLoad::errors (naming the variable or config.json field, the value - escaped, cut to ~100 bytes - and what
// is accepted); any error leaves config.enabled == false, and the caller then passes every call through.
// report_config() prints those lines with the `msprobe-shim: ` prefix.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "format/format.h"
#include "format/stats.h"
#include "shim/base/log.h"
#include "shim/config/kernel_filter.h"

namespace msprobe::shim {

// The dump's own vocabulary (format/format.h): the same types the collector and the tools use.
using Task = format::Task;
using FileFormat = format::FileFormat;
using Compress = format::Compression;
using Precision = format::StatPrecision;
// Settings only the shim has.
enum class DataMode { All, Input, Output };
enum class SummaryMode { Statistics, Md5 };
enum class StackMode { Off, Native, Python, Mixed };

// Step or rank numbers: "all", or a union of numbers and inclusive ranges ("0,2,4-6"), each in [0, kMax].
class IndexSet {
 public:
  static constexpr int64_t kMax = 1000000;  // msprobe's bound for step and rank items
  IndexSet() = default;                     // all
  static IndexSet none() {
    IndexSet s;
    s.all_ = false;
    return s;
  }

  bool all() const noexcept { return all_; }
  // Inline: asked for every launch, and "all" (the default) needs no search.
  bool contains(int64_t i) const noexcept { return all_ || in_ranges(i); }
  void add(int64_t lo, int64_t hi);  // inclusive; turns an "all" set into exactly [lo, hi]; ranges are merged
  const std::vector<std::pair<int64_t, int64_t>> &ranges() const noexcept { return ranges_; }
  std::string to_string() const;  // "all" or "0,2,4-6"

 private:
  bool in_ranges(int64_t i) const noexcept;
  bool all_ = true;
  std::vector<std::pair<int64_t, int64_t>> ranges_;  // sorted, disjoint, not adjacent
};

// Parses "0, 2, 4-6" or "all" (the value of MSPROBE_STEP / MSPROBE_RANK). nullopt and *why (a short reason naming
// the bad item) if not valid.
std::optional<IndexSet> parse_index_set(std::string_view text, std::string *why);

// The fields that can come from the environment or the file (for Config::source_of).
enum class Field {
  DumpPath,
  Task,
  Steps,
  Ranks,
  List,
  Scope,
  DataMode,
  SummaryMode,
  FileFormat,
  Stack,
  Compress,
  BufferMb,
  OverflowNums,
  StepMarker,
  LogLevel,
  Precision,
  DeviceStats,
  FlightKernels,
  FlightOnExit,
  WriteWait,
  RaceCheck,
  kCount
};
enum class Source { Default, Env, File };

// Op types of the optimizer kernels that end a training step by default (MSPROBE_STEP_MARKER), '|'-separated.
extern const std::string_view kDefaultStepMarker;

struct Config {
  bool enabled = true;
  std::string dump_path = "./msprobe_dump";
  Task task = Task::Statistics;
  IndexSet steps, ranks;                                       // default: all
  KernelFilter list;                                           // empty: every kernel
  std::optional<std::pair<KernelFilter, KernelFilter>> scope;  // from the first kernel matching .first to the next
                                                               // matching .second (inclusive)
  DataMode data_mode = DataMode::All;
  SummaryMode summary_mode = SummaryMode::Statistics;
  FileFormat file_format = FileFormat::Npy;
  StackMode stack = StackMode::Mixed;
  Compress compress = Compress::Off;
  uint64_t buffer_bytes = uint64_t{1024} << 20;
  int64_t overflow_nums = 1;  // -1: never stop
  NameRegex step_marker;      // full match over op types; load_config() sets kDefaultStepMarker unless
                              // MSPROBE_STEP_MARKER says otherwise; empty() = off
  LogLevel log_level = LogLevel::Warn;
  Precision precision = Precision::Low;
  // Statistics computed on the device (MSPROBE_DEVICE_STATS, config.json statistics.device): only scalars
  // cross the host link. false: every tensor is copied and reduced on the host.
  bool device_stats = true;
  // The flight task: the most kernels its ring keeps (MSPROBE_FLIGHT_KERNELS; 0: as many as MSPROBE_BUFFER_MB holds),
  // and whether the ring is written at any exit or fatal signal too (MSPROBE_FLIGHT_ON_EXIT).
  uint64_t flight_kernels = 0;
  bool flight_on_exit = false;
  // Races between streams checked beside the task (MSPROBE_RACECHECK, docs/races.md): races.json per rank folder.
  bool race_check = false;
  // How long aclFinalize, a device reset and the end of the process wait for the dump to be written
  // (MSPROBE_WRITE_WAIT_S): past it the shim says what is not written and lets the host go on; the dump is then left
  // as after a crash, for msprobe-inspect repair.
  uint32_t write_wait_s = 30;
  std::string config_path;       // MSPROBE_CONFIG as given, empty if none
  long test_journal_gap_us = 0;  // test seam, set by the composition root (shim/hooks/activation.cpp)
  // How long the shim waits for CANN's data dump to drain (graph capture) before it gives up; a test seam may
  // shorten it (SHIM_TEST_DRAIN_TIMEOUT_MS, read by the composition root).
  long graph_drain_timeout_ms = 60000;
  // torch_npu's TASK_QUEUE_ENABLE as the host was started with (-1: not set), read by the composition root: at 2
  // aclnn phase 1 runs on the task queue's thread, where stacks have no Python frames (said once, with the way out).
  int host_task_queue = -1;

  std::array<Source, static_cast<size_t>(Field::kCount)> sources{};  // all Default
  Source source(Field f) const { return sources[static_cast<size_t>(f)]; }
  // "default", "MSPROBE_TASK", or "config.json field task" (for messages and the startup summary).
  std::string source_of(Field f) const;
};

struct ConfigLoad {
  Config config;
  std::vector<std::string> errors;    // one line each, without the "msprobe-shim: " prefix
  std::vector<std::string> warnings;  // likewise; never disable the shim
};

// Reads MSPROBE_* (and MSPROBE_CONFIG's file). getenv returns nullptr for an unset variable.
ConfigLoad load_config(const std::function<const char *(const char *)> &getenv);

// load_config with the process environment (::getenv).
ConfigLoad load_config_from_environment();

// Sets the global log level to config.log_level (a valid MSPROBE_LOG_LEVEL counts even when other settings have
// errors, so MSPROBE_LOG_LEVEL=error silences the warnings), prints every warning and error, and on error one final
// line saying capture is disabled; at info level, a summary of the effective configuration.
void report_config(const ConfigLoad &load);

// The effective configuration on one line: `task=tensor (MSPROBE_TASK) dump_path="./d" step=0-2 ...`.
std::string describe(const Config &config);

// Warnings for MSPROBE_* names in `envp` (an environ-style array) that the shim does not know, with the closest
// known name when one is near ("MSPROBE_DUMPPATH is not a variable of msprobe-shim; did you mean
// MSPROBE_DUMP_PATH?"). Kept apart from load_config because it needs the whole environment.
std::vector<std::string> unknown_variables(const char *const *envp);

// The settings' variables in the order of their table, each with what it accepts as its messages say it: the wheel's
// launcher offers one option per variable (shim/hooks/settings.cpp asks this).
struct SettingVariable {
  const char *name;
  std::string_view accepted;
};
std::vector<SettingVariable> setting_variables();

// `value` of variable `name` read alone by its own parser, as load_config() reads it: true when valid, else false
// with *why (empty when "not valid; accepted: ..." says it all). False with *why "not a variable of msprobe-shim" for
// a name that is not in the table. Reads no environment and no file.
bool check_setting(std::string_view name, std::string_view value, std::string *why);

// For messages: `"value"` with '"', '\', control bytes, invalid UTF-8 and C1/line-separator code points escaped
// (\n, \t, \xNN, \u2028), cut to `max_bytes` of input with `..." (N bytes)` when longer. Always one line.
std::string quote_value(std::string_view value, size_t max_bytes = 100);

const char *to_string(Task t);
const char *to_string(DataMode m);
const char *to_string(SummaryMode m);
const char *to_string(FileFormat f);
const char *to_string(StackMode s);
const char *to_string(Compress c);
const char *to_string(LogLevel l);
const char *to_string(Precision p);

}  // namespace msprobe::shim
