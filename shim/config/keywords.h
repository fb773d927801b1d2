// The words the settings take (MSPROBE_TASK=tensor, config.json "task": "tensor"), one table per setting, and the
// "accepted: ..." texts made from those tables. Internal to shim/config (config.h is the layer's API).
//
// A word added to a table is accepted by the variable and the config.json key that read the table, named in their
// messages and offered by the wheel's launcher (which asks the shim for each setting's text), with no second edit.
// The texts are made at compile time, as constant data: a row of the settings table (settings.cpp) points at its
// text, and the table must be whole before any constructor runs (hooks are called that early).
#pragma once
#include <algorithm>
#include <array>
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
  bool listed = true;  // false: accepted, but left out of the "accepted: ..." text (an alias, a note's business)
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
// those numbers mean the same here (4 keeps errors: a shim that disables itself must say why). They and "warning" (warn
// again) are not listed; kLogLevelWords' note names the numbers.
constexpr Keyword<LogLevel> kLogLevels[] = {{"error", LogLevel::Error},         {"warn", LogLevel::Warn},
                                            {"info", LogLevel::Info},           {"debug", LogLevel::Debug},
                                            {"warning", LogLevel::Warn, false}, {"0", LogLevel::Debug, false},
                                            {"1", LogLevel::Info, false},       {"2", LogLevel::Warn, false},
                                            {"3", LogLevel::Error, false},      {"4", LogLevel::Error, false}};
// In pairs, the true word first (bool_words below reads them so).
constexpr Keyword<bool> kBools[] = {{"1", true},  {"0", false},   {"true", true}, {"false", false},
                                    {"on", true}, {"off", false}, {"yes", true},  {"no", false}};

// config.json's own words, matched as written (case matters there).
constexpr std::string_view kSummaryItems[] = {"max", "min", "mean", "l2norm", "md5"};  // "summary_mode": [...]
constexpr std::string_view kStatisticsPlaces[] = {"device", "host"};                   // "statistics": {"device": }
constexpr std::string_view kCheckModes[] = {"all", "aicore", "atomic"};                // "check_mode"

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

// ---- the "accepted: ..." texts -----------------------------------------------------------------------------------

// A text made at compile time, kept whole in the object (libstdc++ 12's std::string is not constexpr for clang 14,
// which builds the fuzzers). A text longer than kCapacity does not compile.
class AcceptedText {
 public:
  static constexpr size_t kCapacity = 128;

  constexpr AcceptedText() = default;
  constexpr AcceptedText &operator+=(std::string_view s) {
    for (const char c : s) chars_.at(size_++) = c;
    return *this;
  }
  constexpr AcceptedText operator+(std::string_view s) const { return AcceptedText(*this) += s; }
  constexpr operator std::string_view() const { return {chars_.data(), size_}; }

 private:
  std::array<char, kCapacity> chars_{};
  size_t size_ = 0;
};

// How listed_words() spells a table's words: each between `before` and `after`, `last` before the last one.
struct Listing {
  std::string_view before = {}, after = {}, last = ", ";
};
inline constexpr Listing kQuoted = {.before = "\"", .after = "\""};

// The word an entry of a table adds to its text; empty for none.
constexpr std::string_view word_of(std::string_view word) { return word; }
template <class E>
constexpr std::string_view word_of(const Keyword<E> &k) {
  return k.listed ? k.name : std::string_view();
}

// "all, input, output": the listed words of `table`, in its order.
template <class Table>
constexpr AcceptedText listed_words(const Table &table, Listing how = {}) {
  size_t total = 0, n = 0;
  for (const auto &k : table) total += word_of(k).empty() ? 0 : 1;
  AcceptedText text;
  for (const auto &k : table) {
    if (word_of(k).empty()) continue;
    if (n > 0) text += n + 1 == total ? how.last : ", ";
    text += how.before;
    text += word_of(k);
    text += how.after;
    ++n;
  }
  return text;
}

static_assert(
    [] {
      for (size_t i = 0; i < std::size(kBools); i += 2) {
        if (i + 1 == std::size(kBools) || !kBools[i].value || kBools[i + 1].value) return false;
      }
      return true;
    }(),
    "kBools: in pairs, the true word first");

// "1 or 0 (also true/false, on/off, yes/no)": the pair of kBools that starts with `first`, then the other pairs.
constexpr AcceptedText bool_words(std::string_view first, std::string_view between) {
  AcceptedText text, also;
  for (size_t i = 0; i + 1 < std::size(kBools); i += 2) {
    const std::string_view yes = kBools[i].name, no = kBools[i + 1].name;
    if (yes == first) {
      text += yes;
      text += between;
      text += no;
    } else {
      also += std::string_view(also).empty() ? " (also " : ", ";
      also += yes;
      also += "/";
      also += no;
    }
  }
  return std::string_view(also).empty() ? text : text + also + ")";
}

// The listed words of a table, as the messages and the launcher say what a setting accepts: kWordsOf<kTasks> is
// "statistics, tensor, overflow_check, structure, flight".
template <const auto &Table>
inline constexpr AcceptedText kWordsOf = listed_words(Table);
template <const auto &Table>
inline constexpr AcceptedText kQuotedWordsOf = listed_words(Table, kQuoted);  // "\"all\", \"aicore\", \"atomic\""

inline constexpr AcceptedText kLogLevelWords =
    listed_words(kLogLevels) + " (or msprobe's numbers 0-4: 0 debug ... 3 error, 4 error only)";
inline constexpr AcceptedText kOneOrZero = bool_words("1", " or ");  // "1 or 0 (also true/false, on/off, yes/no)"
inline constexpr AcceptedText kOnOrOff = bool_words("on", ", ");     // "on, off (also 1/0, true/false, yes/no)"
// config.json's data_mode: ["all"], ["input"] or ["output"]
inline constexpr AcceptedText kDataModeLists =
    listed_words(kDataModes, {.before = "[\"", .after = "\"]", .last = " or "});
// config.json's summary_mode: "statistics", "md5", or a non-empty list of max, min, mean, l2norm, md5
inline constexpr AcceptedText kSummaryModeValues =
    listed_words(kSummaryModes, kQuoted) + ", or a non-empty list of " + listed_words(kSummaryItems);

}  // namespace msprobe::shim::config_internal
