// The shim's settings, for the wheel's launcher (packaging/src/msprobe_shim/launcher.py, through ctypes): its options
// and what each accepts come from the table load_config() reads (shim/config/settings.cpp), so a setting added there
// is an option of the launcher with no second edit, and a value the launcher accepts is one the shim accepts. Neither
// call reads the environment or starts capture; the only file touched is a dump path's probe folder (made and removed
// in it, as at start-up).
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "format/dump_json.h"
#include "shim/config/config.h"
#include "shim/hooks/activation.h"
#include "shim/hooks/hook.h"

using namespace msprobe::shim;

// [{"variable": "MSPROBE_TASK", "accepted": "statistics, tensor, ..."}, ...] in the table's order, as UTF-8 JSON.
// The text is the library's own, valid until it is unloaded.
MSPROBE_EXPORT const char *msprobe_shim_settings(void) {
  static const std::string text = [] {
    std::string out = "[";
    for (const SettingVariable &v : setting_variables()) {
      if (out.size() > 1) out += ", ";
      out += "{\"variable\": ";
      msprobe::format::append_json_string(out, v.name);
      out += ", \"accepted\": ";
      msprobe::format::append_json_string(out, v.accepted);
      out += '}';
    }
    return out + "]";
  }();
  return text.c_str();
}

// 1 when `value` is valid for `variable`, read alone by the shim's own parser; else 0 (-1 for an unknown variable),
// with the reason in `why` (NUL-terminated, cut to `size`; empty when "not valid; accepted: ..." says it all).
MSPROBE_EXPORT int msprobe_shim_check_setting(const char *variable, const char *value, char *why, size_t size) {
  if (variable == nullptr || value == nullptr) return -1;
  std::string reason;
  int ok = 0;
  try {
    ok = check_setting(variable, value, &reason) ? 1 : 0;
    // A dump path must also be usable here and now: the launcher asks before it starts a long job.
    if (ok && std::strcmp(variable, "MSPROBE_DUMP_PATH") == 0) ok = check_dump_root(value, &reason) ? 1 : 0;
  } catch (...) {
    reason = "internal error";
  }
  const std::vector<SettingVariable> variables = setting_variables();
  const bool known = std::any_of(variables.begin(), variables.end(),
                                 [&](const SettingVariable &v) { return std::strcmp(v.name, variable) == 0; });
  if (why != nullptr && size > 0) {
    const size_t n = std::min(reason.size(), size - 1);
    std::memcpy(why, reason.data(), n);
    why[n] = '\0';
  }
  return known ? ok : -1;
}
