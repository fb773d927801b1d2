// What a row of the settings table is, and how the loader finds rows; the table itself is settings.cpp. Internal to
// shim/config (config.h is the layer's API).
#pragma once
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "shim/config/parsers.h"

namespace msprobe::shim::config_internal {

// How a variable's value reaches its parser.
enum class Text {
  Trimmed,         // white space around it dropped; set but blank is an error ("is empty")
  AsWritten,       // exactly as set (MSPROBE_DUMP_PATH: a path is used as written)
  TrimmedOrBlank,  // trimmed, blank included (MSPROBE_CONFIG: its path check says "it is empty")
};

// When Loader::run reads a variable.
enum class Stage {
  First,    // MSPROBE_ENABLE: 0 stops everything, silently
  InOrder,  // the fields, in table order
  Last,     // MSPROBE_CONFIG: its file is read after every variable
};

// Where a config.json key is: at the top level, in the section of the task in effect ("tensor": {...}), or in the
// statistics section only.
enum class Section { None, Top, Task, Statistics };

// For Setting::take: moves one field.
template <auto Member>
void take(Config &to, Config &from) {
  to.*Member = std::move(from.*Member);
}

// One row per setting: its variable, its config.json key, their parsers, and what each accepts as the messages say
// it. A row without a variable is a config.json key that sets nothing but is checked.
struct Setting {
  const char *env = nullptr;    // the variable
  Field field = Field::kCount;  // the Config field set (and whose source is recorded); kCount: none
  Stage stage = Stage::InOrder;
  Text text = Text::Trimmed;
  EnvParser parse_env = nullptr;
  std::string_view accepted = {};         // by the variable (and by the key unless file_accepted says otherwise)
  void (*no_value)(Config &c) = nullptr;  // when the variable is unset or blank
  Section section = Section::None;
  const char *key = nullptr;  // the config.json key in `section`
  FileParser parse_file = nullptr;
  std::string_view file_accepted = {};
  void (*take)(Config &to, Config &from) = nullptr;  // moves `field` from a source's Config to the result
};

// The table, in its order (settings.cpp). Within a stage the variables are read in table order, which is the order
// of their messages.
std::span<const Setting> settings();

// The row that sets `f`, or nullptr.
const Setting *setting(Field f);
// The row of config.json key `key` at the top level (Section::Top) or in the section of `task` (Section::Task).
const Setting *file_setting(std::string_view key, Section where, Task task);
// "step", "tensor.list", "statistics.device": the name config.json messages give row `s`'s key, for `task` in effect.
std::string file_field(const Setting &s, Task task);
// Top-level config.json keys the shim ignores: msprobe's that mean nothing at kernel level, the sections of
// msprobe's other tasks, and the task sections themselves (the loader reads the one in effect).
bool ignored_top_key(std::string_view key);

}  // namespace msprobe::shim::config_internal
