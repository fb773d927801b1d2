// The parsers of the MSPROBE_* variables that are more than a keyword (those are env_keyword over a table of
// keywords.h), and the default step marker. The settings table (settings.cpp) names each; declared in parsers.h.
#include <utility>

#include "shim/base/text.h"
#include "shim/config/parsers.h"

namespace msprobe::shim {

// Optimizer kernels (aclnn, aclop and MindSpore op types). A plain alternation of words: NameRegex matches it with
// one hash lookup. ApplyTopKTopP and similar Apply* ops are sampling, not optimizers, hence no "Apply.*".
constinit const std::string_view kDefaultStepMarker =
    "ApplyAdam|ApplyAdamD|ApplyAdamV2|ApplyAdamW|ApplyAdamWV2|ApplyAdamWQuant|ApplyAdamWithAmsgrad|"
    "ApplyAdamWithAmsgradV2|ApplyFusedEmaAdam|ApplyAdaMax|ApplyAdadelta|ApplyAdagrad|ApplyAdagradV2|ApplyAdagradDA|"
    "ApplyMomentum|ApplyKerasMomentum|ApplyRMSProp|ApplyCenteredRMSProp|ApplyFtrl|ApplyFtrlV2|ApplyGradientDescent|"
    "ApplyProximalAdagrad|ApplyProximalGradientDescent|ApplyAddSign|ApplyPowerSign|Adam|AdamW|AdamWeightDecay|"
    "FusedAdam|FusedAdamW|FusedAdamWeightDecay|SGD|Sgd|Lamb|LambApplyOptimizerAssign|LambApplyWeightAssign";

}  // namespace msprobe::shim

namespace msprobe::shim::config_internal {

bool env_dump_path(const EnvValue &v, Config &into, std::string *why, Messages &m) {
  std::optional<std::string> path = checked_path(v.text, why);
  if (!path) return false;
  if (trim(v.text).size() != v.text.size()) {
    m.warn(std::string(v.name) + "=" + quote_value(v.text) + " begins or ends with white space; it is used as written");
  }
  into.dump_path = std::move(*path);
  return true;
}

bool env_config_path(const EnvValue &v, Config &into, std::string *why, Messages &) {
  std::optional<std::string> path = checked_path(v.text, why);
  if (path) into.config_path = std::move(*path);
  return path.has_value();
}

bool env_list(const EnvValue &v, Config &into, std::string *why, Messages &m) {
  std::vector<std::string> items;
  KernelFilter filter;
  if (!iequals(v.text, "all") && !split_filter_items(v.text, &items, why)) return false;
  for (size_t i = 0; i < items.size(); ++i) {
    std::string note;
    if (!filter.add_item(items[i], why, &note)) {
      *why = "item " + std::to_string(i + 1) + " " + quote_value(items[i], 60) + ": " + *why;
      return false;
    }
    if (!note.empty()) m.warn(std::string(v.name) + ": " + note);
  }
  into.list = std::move(filter);
  return true;
}

bool env_scope(const EnvValue &v, Config &into, std::string *why, Messages &m) {
  if (iequals(v.text, "none") || iequals(v.text, "off")) {
    into.scope.reset();
    return true;
  }
  std::vector<std::string> items;
  if (!split_filter_items(v.text, &items, why)) return false;
  if (items.size() != 2) {
    *why = "it has " + std::to_string(items.size()) + " item" + (items.size() == 1 ? "" : "s") + ", not 2";
    return false;
  }
  std::pair<KernelFilter, KernelFilter> ends;
  for (size_t k = 0; k < 2; ++k) {
    std::string note;
    KernelFilter &end = k == 0 ? ends.first : ends.second;
    const char *which = k == 0 ? "first" : "last";
    if (!end.add_item(items[k], why, &note)) {
      *why = std::string(which) + " item: " + *why;
      return false;
    }
    if (!note.empty()) m.warn(std::string(v.name) + " " + which + " item: " + note);
  }
  into.scope = std::move(ends);
  return true;
}

bool env_overflow_nums(const EnvValue &v, Config &into, std::string *why, Messages &) {
  int64_t n = 0;
  if (!whole_number(v.text, overflow_nums_fit, &n, why)) return false;
  into.overflow_nums = n;
  return true;
}

// "auto" (as many as the budget holds) or a count.
bool env_flight_kernels(const EnvValue &v, Config &into, std::string *why, Messages &) {
  if (v.text == "auto") {
    into.flight_kernels = 0;
    return true;
  }
  int64_t n = 0;
  if (!whole_number(v.text, flight_kernels_fit, &n, why)) return false;
  into.flight_kernels = static_cast<uint64_t>(n);
  return true;
}

bool env_buffer_mb(const EnvValue &v, Config &into, std::string *why, Messages &) {
  int64_t n = 0;
  if (!whole_number(v.text, buffer_mb_fit, &n, why)) return false;
  into.buffer_bytes = static_cast<uint64_t>(n) << 20;
  return true;
}

bool env_write_wait(const EnvValue &v, Config &into, std::string *why, Messages &) {
  int64_t n = 0;
  if (!whole_number(v.text, write_wait_fit, &n, why)) return false;
  into.write_wait_s = static_cast<uint32_t>(n);
  return true;
}

bool env_step_marker(const EnvValue &v, Config &into, std::string *why, Messages &) {
  if (iequals(v.text, "off") || iequals(v.text, "none")) {
    into.step_marker = NameRegex{};
    return true;
  }
  std::optional<NameRegex> marker = NameRegex::compile(v.text, why);
  if (marker) into.step_marker = std::move(*marker);
  return marker.has_value();
}

// The step marker without MSPROBE_STEP_MARKER (a bad value leaves it off: capture is disabled then anyway).
void default_step_marker(Config &c) {
  std::string why;
  if (std::optional<NameRegex> marker = NameRegex::compile(kDefaultStepMarker, &why))
    c.step_marker = std::move(*marker);
}

}  // namespace msprobe::shim::config_internal
