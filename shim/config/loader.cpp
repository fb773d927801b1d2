// The loader: load_config() reads every setting by the table (settings.cpp), the variables first, then
// MSPROBE_CONFIG's file, and keeps for each field the variable's value, else the file's, else the default; then
// report_config() and describe(), which say the outcome. The API is config.h.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <initializer_list>
#include <optional>

#include "shim/base/text.h"
#include "shim/config/settings.h"

namespace msprobe::shim::config_internal {

namespace {

constexpr size_t slot(Field f) { return static_cast<size_t>(f); }

class Loader {
 public:
  Loader(const std::function<const char *(const char *)> &getenv, ConfigLoad &out)
      : getenv_(getenv), out_(out), m_(out) {}

  void run();

 private:
  // The raw value of a variable, nullopt if unset.
  std::optional<std::string_view> raw(const char *name) const {
    const char *v = getenv_ ? getenv_(name) : nullptr;
    if (v == nullptr) return std::nullopt;
    return std::string_view(v);
  }
  void read_variables(Stage stage);
  void read_variable(const Setting &s);
  void read_file_value(const Setting &s, std::string field, const json &v);
  void read_file_top(const json &root);
  void require_top_keys(const json &root);
  void read_file_task_section(const json &root, Task task);
  void pick(const Setting &s);
  void warn_if_inert(Field f, bool applies, const std::string &why);

  const std::function<const char *(const char *)> &getenv_;
  ConfigLoad &out_;
  Messages m_;
  // What each source gave, for the fields whose flag is set; pick() applies the precedence.
  Config from_env_, from_file_;
  std::array<bool, slot(Field::kCount)> in_env_{}, in_file_{};
};

void Loader::read_variables(Stage stage) {
  for (const Setting &s : settings()) {
    if (s.env != nullptr && s.stage == stage) read_variable(s);
  }
}

void Loader::read_variable(const Setting &s) {
  const std::optional<std::string_view> raw_value = raw(s.env);
  std::optional<std::string_view> text = raw_value;
  if (text && s.text != Text::AsWritten) text = trim(*text);
  if (text && text->empty() && s.text == Text::Trimmed) {
    m_.error(std::string(s.env) + "=" + quote_value(*raw_value) + " is empty; accepted: " + std::string(s.accepted));
    text.reset();
  }
  if (!text) {
    if (s.no_value) s.no_value(out_.config);
    return;
  }
  std::string why;
  if (!s.parse_env(EnvValue{s.env, *text}, from_env_, &why, m_)) {
    m_.env_error(s.env, *raw_value, why, s.accepted);
  } else if (s.field != Field::kCount) {
    in_env_[slot(s.field)] = true;
  }
}

void Loader::read_file_value(const Setting &s, std::string field, const json &v) {
  const FileValue f{std::move(field), v, s.file_accepted.empty() ? s.accepted : s.file_accepted};
  if (s.parse_file(f, from_file_, m_) && s.field != Field::kCount) in_file_[slot(s.field)] = true;
}

// Top-level fields other than the task section.
void Loader::read_file_top(const json &root) {
  for (const auto &[key, v] : root.items()) {
    if (v.is_null()) continue;  // null = absent
    if (const Setting *s = file_setting(key, Section::Top, Task::Statistics)) {
      read_file_value(*s, key, v);
    } else if (!ignored_top_key(key)) {
      m_.warn(m_.where(key) + " is not an msprobe config.json field; ignored");
    }
  }
  require_top_keys(root);
}

void Loader::require_top_keys(const json &root) {
  const auto missing = [&](const char *key) {
    const auto it = root.find(key);
    return it == root.end() || it->is_null();
  };
  // msprobe's default level is L1 (framework APIs): a file without "level" was not written for kernel dumps, and
  // using its list/scope (API names) on kernels would silently select nothing.
  const Setting &level = *file_setting("level", Section::Top, Task::Statistics);
  if (missing(level.key)) {
    m_.error(m_.where(level.key) +
             " is missing (msprobe's default is L1, API level); accepted: " + std::string(level.file_accepted));
  }
  const Setting &dump_path = *setting(Field::DumpPath);
  if (missing(dump_path.key) && !raw(dump_path.env)) {
    m_.error(m_.where(dump_path.key) + " is missing (msprobe requires it) and " + dump_path.env +
             " is not set; accepted: " + std::string(dump_path.accepted));
  }
}

void Loader::read_file_task_section(const json &root, Task task) {
  const std::string section = to_string(task);
  const auto it = root.find(section);
  if (it == root.end() || it->is_null()) return;
  if (!it->is_object()) {
    m_.file_error(section, *it, it_is(*it, "an object"), "an object such as {\"list\": []}");
    return;
  }
  // msprobe's keys of task sections that mean nothing at kernel level.
  static constexpr std::string_view kIgnored[] = {
      "tensor_list", "backward_input", "online_run_ut", "nfs_path",  "host",
      "port",        "tls_path",       "device",        "precision", "online_run_ut_recompute"};
  for (const auto &[key, v] : it->items()) {
    if (v.is_null()) continue;
    const std::string field = section + "." + key;
    if (const Setting *s = file_setting(key, Section::Task, task)) {
      read_file_value(*s, field, v);
    } else if (!contains(kIgnored, key)) {
      m_.warn(m_.where(field) + " is not an msprobe field of the " + section + " task; ignored");
    }
  }
}

// The variable wins over the file, the file over the default (already in the result).
void Loader::pick(const Setting &s) {
  if (s.field == Field::kCount) return;
  Config &c = out_.config;
  const size_t f = slot(s.field);
  if (in_env_[f]) {
    s.take(c, from_env_);
    c.sources[f] = Source::Env;
  } else if (in_file_[f]) {
    s.take(c, from_file_);
    c.sources[f] = Source::File;
  }
}

void Loader::warn_if_inert(Field f, bool applies, const std::string &why) {
  if (in_env_[slot(f)] && !applies)
    m_.warn(std::string(setting(f)->env) + " has no effect: " + why + " (task is " + to_string(out_.config.task) + ")");
}

// "tensor, overflow_check and flight": the tasks whose dump has `what` (format::task_writes).
std::string tasks_where(bool format::TaskWrites::*what) {
  std::vector<std::string_view> names;
  for (const Keyword<Task> &k : kTasks)
    if (format::task_writes(k.value).*what) names.push_back(k.name);
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += std::string(i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + std::string(names[i]);
  return out;
}

void Loader::run() {
  Config &c = out_.config;
  // MSPROBE_ENABLE=0 wins over everything, silently: the shim was asked to stay out of the way.
  read_variables(Stage::First);
  if (!from_env_.enabled) {
    c.enabled = false;
    return;
  }
  read_variables(Stage::InOrder);
  read_variables(Stage::Last);
  std::optional<json> root;
  if (!from_env_.config_path.empty()) {
    c.config_path = from_env_.config_path;
    root = read_config_file(c.config_path, m_);
  }
  if (root) read_file_top(*root);
  pick(*setting(Field::Task));
  if (root) read_file_task_section(*root, c.task);  // msprobe reads the section of the task in effect
  for (const Setting &s : settings()) {
    if (s.field != Field::Task) pick(s);
  }
  const format::TaskWrites writes = format::task_writes(c.task);
  warn_if_inert(Field::FileFormat, writes.tensor_files,
                "only the " + tasks_where(&format::TaskWrites::tensor_files) + " tasks write tensor files");
  warn_if_inert(Field::OverflowNums, writes.overflow_limit,
                "it applies to the " + tasks_where(&format::TaskWrites::overflow_limit) + " tasks");
  warn_if_inert(Field::FlightKernels, c.task == Task::Flight, "it applies to the flight task");
  warn_if_inert(Field::FlightOnExit, c.task == Task::Flight, "it applies to the flight task");
}

}  // namespace

}  // namespace msprobe::shim::config_internal

namespace msprobe::shim {

using namespace config_internal;

ConfigLoad load_config(const std::function<const char *(const char *)> &getenv) {
  ConfigLoad load;
  try {
    Loader(getenv, load).run();
  } catch (const std::bad_alloc &) {
    load.errors.push_back("out of memory while reading the configuration");
  } catch (const std::exception &e) {
    size_t consumed = 0;
    load.errors.push_back("internal error while reading the configuration: " +
                          escape_text(e.what(), 200, false, &consumed));
  } catch (...) {
    load.errors.push_back("internal error while reading the configuration");
  }
  if (!load.errors.empty()) load.config.enabled = false;
  return load;
}

ConfigLoad load_config_from_environment() {
  ConfigLoad load = load_config([](const char *name) -> const char * { return ::getenv(name); });
  // A misspelt name would otherwise do nothing at all (MSPROBE_TASKS=tensor gives a statistics dump): one line each.
  if (load.config.enabled)
    for (std::string &w : unknown_variables(environ)) load.warnings.push_back(std::move(w));
  return load;
}

void report_config(const ConfigLoad &load) {
  set_log_level(load.config.log_level);
  for (const std::string &w : load.warnings) log_warn("%s", w.c_str());
  for (const std::string &e : load.errors) log_error("%s", e.c_str());
  if (!load.errors.empty()) {
    log_error("the configuration is invalid: capture is disabled and the program runs as without msprobe-shim");
  } else if (load.config.enabled && log_enabled(LogLevel::Info)) {
    log_info("%s", describe(load.config).c_str());
  }
}

std::string describe(const Config &c) {
  std::string out;
  const auto add = [&](const char *name, const std::string &value, Field f) {
    if (!out.empty()) out += ' ';
    out += name;
    out += '=';
    out += value;
    if (c.source(f) != Source::Default) out += " (" + c.source_of(f) + ")";
  };
  const auto filter = [](const KernelFilter &k) { return quote_value(k.to_string(), 200); };
  add("task", to_string(c.task), Field::Task);
  add("dump_path", quote_value(c.dump_path, 200), Field::DumpPath);
  add("step", c.steps.to_string(), Field::Steps);
  add("rank", c.ranks.to_string(), Field::Ranks);
  add("list", c.list.empty() ? std::string("all") : filter(c.list), Field::List);
  add("scope", c.scope ? filter(c.scope->first) + "," + filter(c.scope->second) : std::string("none"), Field::Scope);
  add("data_mode", to_string(c.data_mode), Field::DataMode);
  add("summary_mode", to_string(c.summary_mode), Field::SummaryMode);
  add("file_format", to_string(c.file_format), Field::FileFormat);
  add("stack", to_string(c.stack), Field::Stack);
  add("compress", to_string(c.compress), Field::Compress);
  add("buffer_mb", std::to_string(c.buffer_bytes >> 20), Field::BufferMb);
  add("overflow_nums", std::to_string(c.overflow_nums), Field::OverflowNums);
  add("write_wait_s", std::to_string(c.write_wait_s), Field::WriteWait);
  if (c.task == Task::Flight) {
    add("flight_kernels", c.flight_kernels ? std::to_string(c.flight_kernels) : std::string("auto"),
        Field::FlightKernels);
    add("flight_on_exit", c.flight_on_exit ? "1" : "0", Field::FlightOnExit);
  }
  add("step_marker",
      c.step_marker.empty()                            ? std::string("off")
      : c.source(Field::StepMarker) == Source::Default ? std::string("optimizer kernels")
                                                       : quote_value(c.step_marker.pattern(), 200),
      Field::StepMarker);
  add("log_level", to_string(c.log_level), Field::LogLevel);
  add("precision", to_string(c.precision), Field::Precision);
  add("device_stats", c.device_stats ? "on" : "off", Field::DeviceStats);
  if (c.race_check) add("race_check", "1", Field::RaceCheck);
  if (!c.config_path.empty()) out += " config=" + quote_value(c.config_path, 200);
  return out;
}

}  // namespace msprobe::shim
