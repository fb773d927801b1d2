// The settings table: the one place to add a setting. A row is one setting: its MSPROBE_* variable, its config.json
// key, the parser of each, and what each accepts as the messages say it. The loader (loader.cpp) reads the settings
// by this table, and the wheel's launcher asks the shim for it at run time (shim/hooks/settings.cpp): a row here is
// an option there, with its text.
//
// Adding a setting: its field in Config and Field (config.h), then its row here. A setting that takes words has its
// table in keywords.h, env_keyword / file_keyword as parsers and kWordsOf<its table> as accepted text (made from the
// table, so a word added there is in the messages and the launcher too); any other has its parsers in variables.cpp
// and json_file.cpp (declared in parsers.h). Then its line in docs/configuration.md.
//
// Below the table, the questions asked of it: a row by field or key, unknown variables, one value checked alone.
// The table is constant data (constexpr): hooks may run before any constructor, and read it then.
#include "shim/config/settings.h"

#include <algorithm>
#include <iterator>
#include <vector>

#include "shim/base/text.h"

namespace msprobe::shim::config_internal {

// Within a stage the variables are read in table order, which is the order of their messages; the order also breaks
// ties between equally close names in unknown_variables' "did you mean".
constexpr Setting kSettings[] = {
    {.env = "MSPROBE_LOG_LEVEL",
     .field = Field::LogLevel,
     .parse_env = env_keyword<&Config::log_level, kLogLevels>,
     .accepted = kLogLevelWords,
     .take = take<&Config::log_level>},
    {.env = "MSPROBE_DUMP_PATH",
     .field = Field::DumpPath,
     .text = Text::AsWritten,
     .parse_env = env_dump_path,
     .accepted = "a directory path (not empty, at most 4095 bytes, no NUL byte)",
     .section = Section::Top,
     .key = "dump_path",
     .parse_file = file_dump_path,
     .take = take<&Config::dump_path>},
    {.env = kConfigVariable,
     .stage = Stage::Last,
     .text = Text::TrimmedOrBlank,
     .parse_env = env_config_path,
     .accepted = kAcceptConfig},
    {.env = "MSPROBE_TASK",
     .field = Field::Task,
     .parse_env = env_keyword<&Config::task, kTasks>,
     .accepted = kWordsOf<kTasks>,
     .section = Section::Top,
     .key = "task",
     .parse_file = file_task,
     .take = take<&Config::task>},
    {.env = "MSPROBE_STEP",
     .field = Field::Steps,
     .parse_env = env_index_set<&Config::steps>,
     .accepted = "all, or numbers and ranges in [0, 1000000] such as 0,2,4-6",
     .section = Section::Top,
     .key = "step",
     .parse_file = file_index_set<&Config::steps>,
     .file_accepted = "a list of numbers in [0, 1000000] and \"a-b\" range strings, e.g. [0, 2, \"4-6\"]",
     .take = take<&Config::steps>},
    {.env = "MSPROBE_RANK",
     .field = Field::Ranks,
     .parse_env = env_index_set<&Config::ranks>,
     .accepted = "all, or numbers and ranges in [0, 1000000] such as 0,2,4-6",
     .section = Section::Top,
     .key = "rank",
     .parse_file = file_index_set<&Config::ranks>,
     .file_accepted = "a list of numbers in [0, 1000000] and \"a-b\" range strings, e.g. [0, 2, \"4-6\"]",
     .take = take<&Config::ranks>},
    {.env = "MSPROBE_LIST",
     .field = Field::List,
     .parse_env = env_list,
     .accepted = "all, or comma-separated op types (Matmul), kernel names (Matmul.Default.0, or Matmul.Default for "
                 "every n) and name-regex(...) items",
     .section = Section::Task,
     .key = "list",
     .parse_file = file_list,
     .file_accepted = "a list of strings: op types, kernel names or \"name-regex(...)\" items (an empty list selects "
                      "every kernel)",
     .take = take<&Config::list>},
    {.env = "MSPROBE_SCOPE",
     .field = Field::Scope,
     .parse_env = env_scope,
     .accepted = "two comma-separated items first,last (each an op type, a kernel name or name-regex(...)), or none",
     .section = Section::Task,
     .key = "scope",
     .parse_file = file_scope,
     .file_accepted = "[] or a list of two strings [first, last]",
     .take = take<&Config::scope>},
    {.env = "MSPROBE_DATA_MODE",
     .field = Field::DataMode,
     .parse_env = env_keyword<&Config::data_mode, kDataModes>,
     .accepted = kWordsOf<kDataModes>,
     .section = Section::Task,
     .key = "data_mode",
     .parse_file = file_data_mode,
     .file_accepted = kDataModeLists,
     .take = take<&Config::data_mode>},
    {.env = "MSPROBE_SUMMARY_MODE",
     .field = Field::SummaryMode,
     .parse_env = env_keyword<&Config::summary_mode, kSummaryModes>,
     .accepted = kWordsOf<kSummaryModes>,
     .section = Section::Task,
     .key = "summary_mode",
     .parse_file = file_summary_mode,
     .take = take<&Config::summary_mode>},
    {.env = "MSPROBE_FILE_FORMAT",
     .field = Field::FileFormat,
     .parse_env = env_keyword<&Config::file_format, kFileFormats>,
     .accepted = kWordsOf<kFileFormats>,
     .section = Section::Task,
     .key = "file_format",
     .parse_file = file_keyword<&Config::file_format, kFileFormats>,
     .take = take<&Config::file_format>},
    {.env = "MSPROBE_PRECISION",
     .field = Field::Precision,
     .parse_env = env_keyword<&Config::precision, kPrecisions>,
     .accepted = kWordsOf<kPrecisions>,
     .section = Section::Top,
     .key = "precision",
     .parse_file = file_keyword<&Config::precision, kPrecisions>,
     .take = take<&Config::precision>},
    {.env = "MSPROBE_DEVICE_STATS",
     .field = Field::DeviceStats,
     .parse_env = env_keyword<&Config::device_stats, kBools>,
     .accepted = kOnOrOff,
     .section = Section::Statistics,
     .key = "device",
     .parse_file = file_device_stats,
     .file_accepted = kQuotedWordsOf<kStatisticsPlaces>,
     .take = take<&Config::device_stats>},
    {.env = "MSPROBE_OVERFLOW_NUMS",
     .field = Field::OverflowNums,
     .parse_env = env_overflow_nums,
     .accepted = "-1 (never stop) or a whole number in [1, 2147483647]",
     .section = Section::Task,
     .key = "overflow_nums",
     .parse_file = file_overflow_nums,
     .take = take<&Config::overflow_nums>},
    {.env = "MSPROBE_FLIGHT_KERNELS",
     .field = Field::FlightKernels,
     .parse_env = env_flight_kernels,
     .accepted = "auto (as many as MSPROBE_BUFFER_MB holds) or a whole number in [1, 1000000]",
     .section = Section::Task,
     .key = "kernels",
     .parse_file = file_flight_kernels,
     .file_accepted = "\"auto\" or a whole number in [1, 1000000]",
     .take = take<&Config::flight_kernels>},
    {.env = "MSPROBE_FLIGHT_ON_EXIT",
     .field = Field::FlightOnExit,
     .parse_env = env_keyword<&Config::flight_on_exit, kBools>,
     .accepted = kOneOrZero,
     .section = Section::Task,
     .key = "on_exit",
     .parse_file = file_flight_on_exit,
     .file_accepted = "true, false",
     .take = take<&Config::flight_on_exit>},
    {.env = "MSPROBE_RACECHECK",
     .field = Field::RaceCheck,
     .parse_env = env_keyword<&Config::race_check, kBools>,
     .accepted = kOneOrZero,
     .take = take<&Config::race_check>},
    {.env = "MSPROBE_STACK",
     .field = Field::Stack,
     .parse_env = env_keyword<&Config::stack, kStackModes>,
     .accepted = kWordsOf<kStackModes>,
     .take = take<&Config::stack>},
    {.env = "MSPROBE_COMPRESS",
     .field = Field::Compress,
     .parse_env = env_keyword<&Config::compress, kCompress>,
     .accepted = kWordsOf<kCompress>,
     .take = take<&Config::compress>},
    {.env = "MSPROBE_BUFFER_MB",
     .field = Field::BufferMb,
     .parse_env = env_buffer_mb,
     .accepted = "a whole number of MiB in [1, 1048576]",
     .take = take<&Config::buffer_bytes>},
    {.env = "MSPROBE_WRITE_WAIT_S",
     .field = Field::WriteWait,
     .parse_env = env_write_wait,
     .accepted = "a whole number of seconds in [1, 86400]",
     .take = take<&Config::write_wait_s>},
    {.env = "MSPROBE_STEP_MARKER",
     .field = Field::StepMarker,
     .parse_env = env_step_marker,
     .accepted = "a regular expression over kernel op types (RE2 syntax), or off",
     .no_value = default_step_marker,
     .take = take<&Config::step_marker>},
    {.env = "MSPROBE_ENABLE",
     .stage = Stage::First,
     .parse_env = env_keyword<&Config::enabled, kBools>,
     .accepted = kOneOrZero},
    // config.json keys only
    {.section = Section::Top, .key = "level", .parse_file = file_level, .file_accepted = "\"L2\""},
    {.section = Section::Top, .key = "async_dump", .parse_file = file_async_dump, .file_accepted = "true, false"},
    {.section = Section::Task,
     .key = "check_mode",
     .parse_file = file_check_mode,
     .file_accepted = kQuotedWordsOf<kCheckModes>},
};

std::span<const Setting> settings() { return kSettings; }

const Setting *setting(Field f) {
  for (const Setting &s : kSettings) {
    if (s.field == f) return &s;
  }
  return nullptr;
}

const Setting *file_setting(std::string_view key, Section where, Task task) {
  for (const Setting &s : kSettings) {
    if (s.key == nullptr || key != s.key) continue;
    if (s.section == where) return &s;
    if (where == Section::Task && s.section == Section::Statistics && task == Task::Statistics) return &s;
  }
  return nullptr;
}

std::string file_field(const Setting &s, Task task) {
  switch (s.section) {
    case Section::Task: return std::string(to_string(task)) + "." + s.key;
    case Section::Statistics: return std::string(to_string(Task::Statistics)) + "." + s.key;
    default: return s.key;
  }
}

bool ignored_top_key(std::string_view key) {
  static constexpr std::string_view kIgnored[] = {"enable_dataloader", "seed", "is_deterministic", "acl_config",
                                                  "framework"};
  return contains(kIgnored, key) || contains(kOtherMsprobeTasks, key) ||
         std::any_of(std::begin(kTasks), std::end(kTasks), [&](const Keyword<Task> &t) { return t.name == key; });
}

namespace {

// Levenshtein distance, for "did you mean".
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

}  // namespace msprobe::shim::config_internal

namespace msprobe::shim {

using namespace config_internal;

std::string Config::source_of(Field f) const {
  const Setting *s = setting(f);
  switch (source(f)) {
    case Source::Env: return s && s->env ? s->env : "?";
    case Source::File: return "config.json field " + (s && s->key ? file_field(*s, task) : std::string("?"));
    default: return "default";
  }
}

namespace {

// MSPROBE_* names of this project's own build, test, benchmark and packaging scripts (scripts/, test/, bench/,
// packaging/): never read by the shim, and not settings, but not a user's misspelt setting either. Kept whole by
// test_shim_config_errors.py, which finds every such name the scripts use.
constexpr std::string_view kScriptVariables[] = {
    "MSPROBE_BUILD_DIR", "MSPROBE_SOURCE_DIR", "MSPROBE_BENCH_BASELINE", "MSPROBE_DEMO_SKIP_BUILD", "MSPROBE_GLIBC_MAX",
    "MSPROBE_INSPECT_ALONE", "MSPROBE_JOBS", "MSPROBE_KILLS", "MSPROBE_KILL_SEED", "MSPROBE_SANITIZE_CTEST_ARGS",
    "MSPROBE_WHEEL_TAG",
    // the README's quick start exports the checkout's path under this name
    "MSPROBE_SHIM",
    // CMake options the scripts pass (-DMSPROBE_...=): not read from the environment, named all the same
    "MSPROBE_SANITIZE", "MSPROBE_WERROR", "MSPROBE_BUILD_TESTS", "MSPROBE_FUZZ"};
constexpr std::string_view kScriptVariablePrefixes[] = {"MSPROBE_AARCH64_", "MSPROBE_COMPAT_", "MSPROBE_FUZZ_",
                                                        "MSPROBE_GLIBC_",   "MSPROBE_TEST_",   "MSPROBE_TIDY_"};

bool script_variable(std::string_view name) {
  return std::find(std::begin(kScriptVariables), std::end(kScriptVariables), name) != std::end(kScriptVariables) ||
         std::any_of(std::begin(kScriptVariablePrefixes), std::end(kScriptVariablePrefixes),
                     [&](std::string_view p) { return name.rfind(p, 0) == 0; });
}

}  // namespace

std::vector<std::string> unknown_variables(const char *const *envp) {
  std::vector<std::string> out;
  if (envp == nullptr) return out;
  for (; *envp != nullptr; ++envp) {
    const std::string_view entry(*envp);
    if (entry.rfind("MSPROBE_", 0) != 0) continue;
    const std::string_view name = entry.substr(0, entry.find('='));
    if (script_variable(name) || std::any_of(std::begin(kSettings), std::end(kSettings),
                                             [&](const Setting &s) { return s.env != nullptr && name == s.env; }))
      continue;
    const char *best = nullptr;
    size_t best_distance = 4;  // suggest only close names
    for (const Setting &s : kSettings) {
      if (s.env == nullptr) continue;
      const size_t d = edit_distance(name.substr(0, 64), s.env);
      if (d < best_distance) best = s.env, best_distance = d;
    }
    std::string w = quote_value(name, 64) + " is not a variable of msprobe-shim; ignored";
    if (best) w += std::string("; did you mean ") + best + "?";
    out.push_back(std::move(w));
  }
  return out;
}

std::vector<SettingVariable> setting_variables() {
  std::vector<SettingVariable> out;
  for (const Setting &s : kSettings) {
    if (s.env != nullptr) out.push_back({s.env, s.accepted});
  }
  return out;
}

bool check_setting(std::string_view name, std::string_view value, std::string *why) {
  for (const Setting &s : kSettings) {
    if (s.env == nullptr || name != s.env) continue;
    const std::string_view text = s.text == Text::AsWritten ? value : trim(value);
    if (text.empty() && s.text == Text::Trimmed) {
      *why = "it is empty";
      return false;
    }
    ConfigLoad scratch;
    Messages m(scratch);
    why->clear();
    return s.parse_env(EnvValue{s.env, text}, scratch.config, why, m);
  }
  *why = "not a variable of msprobe-shim";
  return false;
}

}  // namespace msprobe::shim
