// aclmdlSetDump's config file: read (json_parser), then adump's checks in its order: field types, enum values,
// constraints (cann_dump.md §1.5, §2). Any check failure is ACL_ERROR_INVALID_DUMP_CONFIG.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <fstream>
#include <iterator>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>

#include "fakecann/dump.h"

namespace fakecann::dump {
namespace {

using nlohmann::json;

struct Invalid {
  std::string why;
};
[[noreturn]] void invalid(const std::string &why) { throw Invalid{why}; }

// The deepest nesting of '{' and of '[' outside strings.
bool nesting_too_deep(const std::string &s) {
  int braces = 0, brackets = 0;
  bool in_string = false, escaped = false;
  for (char c : s) {
    if (in_string) {
      in_string = !(c == '"' && !escaped);
      escaped = !escaped && c == '\\';
      continue;
    }
    if (c == '"') in_string = true;
    braces += c == '{' ? 1 : c == '}' ? -1 : 0;
    brackets += c == '[' ? 1 : c == ']' ? -1 : 0;
    if (braces > 10 || brackets > 10) return true;
  }
  return false;
}

const std::set<std::string> kScalarFields = {"dump_path",  "dump_mode",  "dump_op_switch",
                                             "dump_data",  "dump_level", "dump_step",
                                             "dump_debug", "dump_scene", "dump_kernel_data"};

std::string str(const json &d, const char *key, const std::string &dflt) {
  return d.contains(key) ? d.at(key).get<std::string>() : dflt;
}

void check_enum(const json &d, const char *key, std::initializer_list<const char *> allowed) {
  if (!d.contains(key)) return;
  std::string v = d.at(key).get<std::string>();
  for (const char *a : allowed)
    if (v == a) return;
  invalid(std::string(key) + " has the invalid value \"" + v + "\"");
}

void check_types(const json &d) {
  for (const auto &[key, value] : d.items()) {
    if (kScalarFields.count(key) && !value.is_string()) invalid(key + " must be a string");
    if ((key == "dump_list" || key == "dump_stats") && !value.is_array()) invalid(key + " must be an array");
  }
  check_enum(d, "dump_mode", {"input", "output", "all"});
  check_enum(d, "dump_op_switch", {"on", "off"});
  check_enum(d, "dump_data", {"tensor", "stats"});
  check_enum(d, "dump_level", {"op", "kernel", "all"});
  check_enum(d, "dump_debug", {"on", "off"});
  check_enum(d, "dump_scene",
             {"lite_exception", "aic_err_brief_dump", "aic_err_norm_dump", "aic_err_detail_dump", "watcher"});
}

// "0|5|10-20": at most 100 items, each N or A-B with A <= B, digits only.
std::vector<std::pair<uint64_t, uint64_t>> parse_steps(const std::string &s) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  size_t start = 0;
  auto number = [&](const std::string &t) {
    if (t.empty() || t.size() > 19 || !std::all_of(t.begin(), t.end(), ::isdigit))
      invalid("dump_step item \"" + t + "\" is not a number");
    return std::stoull(t);
  };
  while (start <= s.size()) {
    size_t bar = s.find('|', start);
    std::string item = s.substr(start, bar == std::string::npos ? std::string::npos : bar - start);
    size_t dash = item.find('-');
    uint64_t a = number(item.substr(0, dash)), b = dash == std::string::npos ? a : number(item.substr(dash + 1));
    if (a > b) invalid("dump_step range " + item + " is reversed");
    out.emplace_back(a, b);
    if (out.size() > 100) invalid("dump_step has more than 100 items");
    if (bar == std::string::npos) break;
    start = bar + 1;
  }
  return out;
}

uint64_t parse_stats(const json &d) {
  if (!d.contains("dump_stats")) return kCompatibleStats;
  if (str(d, "dump_data", "tensor") != "stats") invalid("dump_stats is only allowed with dump_data \"stats\"");
  const json &a = d.at("dump_stats");
  if (a.empty()) invalid("dump_stats is empty");
  static const std::pair<const char *, uint64_t> names[] = {{"Max", kMax},
                                                            {"Min", kMin},
                                                            {"Avg", kAvg},
                                                            {"Nan", kNan},
                                                            {"Negative Inf", kNegInf},
                                                            {"Positive Inf", kPosInf},
                                                            {"L2norm", kL2norm}};
  uint64_t bits = 0;
  for (const json &item : a) {
    if (!item.is_string()) invalid("dump_stats items must be strings");
    std::string v = item.get<std::string>();
    v.erase(0, v.find_first_not_of(' '));
    v.erase(v.find_last_not_of(' ') + 1);
    auto it = std::find_if(std::begin(names), std::end(names), [&](const auto &n) { return v == n.first; });
    if (it == std::end(names)) invalid("dump_stats item \"" + v + "\" is invalid");
    bits |= it->second;
  }
  return bits;
}

std::vector<ListItem> parse_list(const json &d, bool op_switch) {
  std::vector<ListItem> out;
  if (!d.contains("dump_list")) return out;
  for (const json &j : d.at("dump_list")) {
    if (!j.is_object()) invalid("dump_list items must be objects");
    ListItem item;
    if (j.contains("model_name")) {
      if (!j.at("model_name").is_string() || j.at("model_name").get<std::string>().empty())
        invalid("dump_list model_name must be a non-empty string");
      item.has_model = true;
      item.model_name = j.at("model_name").get<std::string>();
    }
    if (j.contains("layer")) {
      const json &l = j.at("layer");
      if (!l.is_array() || !std::all_of(l.begin(), l.end(), [](const json &x) { return x.is_string(); }))
        invalid("dump_list layer must be an array of strings");
      if (l.empty() && !op_switch) invalid("dump_list layer is empty");
      item.has_layers = true;
      item.layers = l.get<std::vector<std::string>>();
    }
    out.push_back(std::move(item));
  }
  return out;
}

void check_path(const std::string &p) {
  if (p.empty()) invalid("dump_path is required when dump is enabled");
  if (p.size() > 512) invalid("dump_path is longer than 512 characters");
  struct stat st;
  if (stat(p.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) invalid("dump_path " + p + " is not an existing directory");
  if (access(p.c_str(), R_OK | W_OK) != 0) invalid("dump_path " + p + " is not readable and writable");
}

std::string local_time_dir() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d%H%M%S", &tm);
  return buf;
}

// nullptr when the section enables nothing.
std::shared_ptr<Config> convert(const json &d) {
  check_types(d);
  auto c = std::make_shared<Config>();
  c->op_switch = str(d, "dump_op_switch", "off") == "on";
  bool debug = str(d, "dump_debug", "off") == "on";
  if (debug && c->op_switch) invalid("dump_debug \"on\" cannot be combined with dump_op_switch \"on\"");
  if (d.contains("dump_scene") && (debug || c->op_switch))
    invalid("dump_scene cannot be combined with dump_debug or dump_op_switch \"on\"");
  c->list = parse_list(d, c->op_switch);
  if (!debug) {
    c->stats = str(d, "dump_data", "tensor") == "stats";
    c->stat_items = parse_stats(d);
    if (d.contains("dump_step")) c->steps = parse_steps(d.at("dump_step").get<std::string>());
  }
  bool need = !c->list.empty() || c->op_switch || debug || d.contains("dump_scene");
  if (!need) return nullptr;
  c->path = str(d, "dump_path", "");
  check_path(c->path);
  std::string mode = str(d, "dump_mode", "output");
  c->inputs = mode != "output";
  c->outputs = mode != "input";
  std::string level = str(d, "dump_level", "all");
  c->level_op = level != "kernel";
  c->level_kernel = level != "op";
  c->time_dir = local_time_dir();
  // Overflow (dump_debug) and exception scenes are validated but produce nothing in the stand-in; they stay in
  // force all the same, since any dump turns nnopbase's executor cache off (§9).
  return c;
}

std::mutex g_mu;
std::shared_ptr<const Config> g_active;

}  // namespace

bool Config::selects(const std::string &model, const std::string &alt_model, const std::string &op) const {
  if (list.empty()) return op_switch;
  for (const ListItem &i : list) {
    if (i.has_model && i.model_name != model && i.model_name != alt_model) continue;
    if (!i.has_layers || std::find(i.layers.begin(), i.layers.end(), op) != i.layers.end()) return true;
  }
  return false;
}

bool Config::step_selected(uint64_t step) const {
  if (steps.empty()) return true;
  return std::any_of(steps.begin(), steps.end(), [step](const auto &r) { return step >= r.first && step <= r.second; });
}

aclError load_config(const char *path, std::shared_ptr<const Config> *out, std::string *why) {
  out->reset();
  std::ifstream f(path, std::ios::binary);
  if (path[0] == '\0' || !f) {
    *why = std::string("cannot read dump config file ") + path;
    return ACL_ERROR_INVALID_FILE;
  }
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (text.empty()) return ACL_SUCCESS;  // a 0-byte file configures nothing
  if (nesting_too_deep(text)) {
    *why = "dump config nests '{' or '[' deeper than 10";
    return ACL_ERROR_PARSE_FILE;
  }
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) {
    *why = "dump config is not valid JSON";
    return ACL_ERROR_PARSE_FILE;
  }
  if (!j.is_object() || !j.contains("dump")) return ACL_SUCCESS;
  try {
    const json &d = j.at("dump");
    if (!d.is_object()) invalid("\"dump\" must be an object");
    if (d.empty()) return ACL_SUCCESS;
    *out = convert(d);
    return ACL_SUCCESS;
  } catch (const Invalid &e) {
    *why = e.why;
  } catch (const std::exception &e) {
    *why = e.what();
  }
  return ACL_ERROR_INVALID_DUMP_CONFIG;
}

std::shared_ptr<const Config> active_config() {
  std::lock_guard<std::mutex> lk(g_mu);
  return g_active;
}

void set_active_config(std::shared_ptr<const Config> c) {
  std::lock_guard<std::mutex> lk(g_mu);
  g_active = std::move(c);
}

}  // namespace fakecann::dump
