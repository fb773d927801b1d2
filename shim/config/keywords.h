// The words the settings take (MSPROBE_TASK=tensor, config.json "task": "tensor"), one table per setting.
// Internal to shim/config (config.h is the layer's API).
#pragma once
#include <algorithm>
#include <cstddef>
#include <iterator>
#include <optional>
#include <string_view>

#include "format/format.h"
#include "shim/base/text.h"
#include "shim/config/config.h"

namespace msprobe::shim::config_internal {

template <class E>
struct Keyword {
  std::string_view name;
  E value;
};

// The dump's own keywords come from format/format.h, so a spelling changes in one place.
constexpr Keyword<Task> kTasks[] = {{format::task_name(Task::Statistics), Task::Statistics},
                                    {format::task_name(Task::Tensor), Task::Tensor},
                                    {format::task_name(Task::OverflowCheck), Task::OverflowCheck},
                                    {format::task_name(Task::Structure), Task::Structure},
                                    {format::task_name(Task::Flight), Task::Flight}};
constexpr Keyword<DataMode> kDataModes[] = {
    {"all", DataMode::All}, {"input", DataMode::Input}, {"output", DataMode::Output}};
constexpr Keyword<SummaryMode> kSummaryModes[] = {{"statistics", SummaryMode::Statistics}, {"md5", SummaryMode::Md5}};
constexpr Keyword<FileFormat> kFileFormats[] = {{format::file_suffix(FileFormat::Npy), FileFormat::Npy},
                                                {format::file_suffix(FileFormat::Bin), FileFormat::Bin}};
constexpr Keyword<StackMode> kStackModes[] = {
    {"off", StackMode::Off}, {"native", StackMode::Native}, {"python", StackMode::Python}, {"mixed", StackMode::Mixed}};
constexpr Keyword<Compress> kCompress[] = {{"off", Compress::Off}, {format::kLz4Suffix, Compress::Lz4}};
constexpr Keyword<Precision> kPrecisions[] = {{"low", Precision::Low}, {"high", Precision::High}};
// msprobe's own MSPROBE_LOG_LEVEL takes 0 (debug) .. 4 (nothing); a user with msprobe installed may have it set, so
// those numbers mean the same here (4 keeps errors: a shim that disables itself must say why).
constexpr Keyword<LogLevel> kLogLevels[] = {
    {"error", LogLevel::Error}, {"warn", LogLevel::Warn}, {"warning", LogLevel::Warn}, {"info", LogLevel::Info},
    {"debug", LogLevel::Debug}, {"0", LogLevel::Debug},   {"1", LogLevel::Info},       {"2", LogLevel::Warn},
    {"3", LogLevel::Error},     {"4", LogLevel::Error}};
constexpr Keyword<bool> kBools[] = {{"1", true},  {"0", false},   {"true", true}, {"false", false},
                                    {"on", true}, {"off", false}, {"yes", true},  {"no", false}};

// msprobe's tasks that are not kernel dumps: config.json's "task" may not name them, and their sections are ignored.
constexpr std::string_view kOtherMsprobeTasks[] = {"free_benchmark", "run_ut", "grad_probe", "exception_dump"};

template <class E, size_t N>
std::optional<E> find_keyword(const Keyword<E> (&table)[N], std::string_view text) {
  for (const Keyword<E> &k : table) {
    if (iequals(k.name, text)) return k.value;
  }
  return std::nullopt;
}

template <class E, size_t N>
const char *keyword_name(const Keyword<E> (&table)[N], E value) {
  for (const Keyword<E> &k : table) {
    if (k.value == value) return k.name.data();  // table names are literals: NUL-terminated
  }
  return "?";
}

template <class List>
bool contains(const List &list, std::string_view s) {
  return std::find(std::begin(list), std::end(list), s) != std::end(list);
}

}  // namespace msprobe::shim::config_internal
