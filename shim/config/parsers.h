// The parsers the rows of the settings table name (settings.cpp): one per MSPROBE_* variable (variables.cpp) and
// one per config.json key (json_file.cpp), and the reading of MSPROBE_CONFIG's file. Internal to shim/config
// (config.h is the layer's API). A keyword setting needs no parser of its own: env_keyword / file_keyword and a
// table of keywords.h.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "shim/config/keywords.h"
#include "shim/config/values.h"

namespace msprobe::shim::config_internal {

// A variable's value on its way to its parser.
struct EnvValue {
  const char *name;       // MSPROBE_LIST
  std::string_view text;  // trimmed, unless its row says Text::AsWritten
};

// Stores a variable's value in `into`, or returns false with *why (empty when "is not valid" says it all).
using EnvParse = bool(const EnvValue &v, Config &into, std::string *why, Messages &m);
using EnvParser = EnvParse *;
// Stores a config.json value in `into`, or reports why not itself and returns false.
using FileParse = bool(const FileValue &f, Config &into, Messages &m);
using FileParser = FileParse *;

// The parsers below that are not templates are declared by their type: `EnvParse env_list;` declares
// `bool env_list(const EnvValue &, Config &, std::string *, Messages &)`.

// ---- environment variables (variables.cpp) ----

template <auto Member, const auto &Table>
bool env_keyword(const EnvValue &v, Config &into, std::string *, Messages &) {
  const auto k = find_keyword(Table, v.text);
  if (k) into.*Member = *k;
  return k.has_value();
}

template <auto Member>
bool env_index_set(const EnvValue &v, Config &into, std::string *why, Messages &) {
  std::optional<IndexSet> set = parse_index_set(v.text, why);
  if (set) into.*Member = std::move(*set);
  return set.has_value();
}

EnvParse env_dump_path, env_config_path, env_list, env_scope, env_overflow_nums, env_flight_kernels, env_buffer_mb,
    env_write_wait, env_step_marker;
// The step marker without MSPROBE_STEP_MARKER (a bad value leaves it off: capture is disabled then anyway).
void default_step_marker(Config &c);

// ---- config.json (json_file.cpp) ----

// Reads and parses the file MSPROBE_CONFIG names. Each failure is one error, `MSPROBE_CONFIG="path" <what>;
// accepted: ...`, and the result is then nullopt.
std::optional<json> read_config_file(const std::string &path, Messages &m);

template <auto Member, const auto &Table>
bool file_keyword(const FileValue &f, Config &into, Messages &m) {
  if (f.value.is_string()) {
    if (const auto k = find_keyword(Table, f.value.get_ref<const std::string &>())) {
      into.*Member = *k;
      return true;
    }
  }
  m.reject(f, f.value.is_string() ? "" : it_is(f.value, "a string"));
  return false;
}

// Item i of a step or rank list: a number or an "a-b" string.
bool file_index_item(const FileValue &f, size_t i, std::vector<std::pair<int64_t, int64_t>> *ranges, Messages &m);

template <auto Member>
bool file_index_set(const FileValue &f, Config &into, Messages &m) {
  if (!f.value.is_array()) {
    m.reject(f, it_is(f.value, "a list"));
    return false;
  }
  if (f.value.empty()) {  // msprobe: an empty list means all
    into.*Member = IndexSet{};
    return true;
  }
  if (f.value.size() > static_cast<size_t>(IndexSet::kMax)) {
    m.reject(f, "more than 1000000 items");
    return false;
  }
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (size_t i = 0; i < f.value.size(); ++i) {
    if (!file_index_item(f, i, &ranges, m)) return false;
  }
  into.*Member = make_index_set(std::move(ranges));
  return true;
}

FileParse file_level, file_task, file_dump_path, file_list, file_scope, file_data_mode, file_summary_mode,
    file_overflow_nums, file_flight_kernels, file_flight_on_exit, file_device_stats, file_async_dump, file_check_mode;

}  // namespace msprobe::shim::config_internal
