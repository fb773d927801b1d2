// What the parsers of the settings share: the bounds of numbers and paths, whole numbers, step/rank items, and the
// text of messages (escaping, a config.json value as shown) with Messages, where every problem goes. Internal to
// shim/config (config.h is the layer's API); values.cpp and index_set.cpp hold the code.
#pragma once
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "shim/config/config.h"

namespace msprobe::shim::config_internal {

using json = nlohmann::json;

constexpr size_t kMaxPathBytes = 4095;       // PATH_MAX - 1
constexpr uint64_t kMaxBufferMb = 1u << 20;  // 1 TiB
constexpr int64_t kMaxOverflowNums = 2147483647;
constexpr int64_t kMaxFlightKernels = 1000000;

// ---- numbers -----------------------------------------------------------------------------------------------------

enum class NumberResult { Ok, NotNumber, OutOfRange };

// Strict decimal: optional '-', digits only. Out of range of int64 -> OutOfRange (never wraps).
NumberResult parse_int64(std::string_view s, int64_t *out);

bool overflow_nums_fit(int64_t n);
bool flight_kernels_fit(int64_t n);
bool buffer_mb_fit(int64_t n);
bool write_wait_fit(int64_t seconds);

// A whole number that fits; else *why says how it is not.
bool whole_number(std::string_view text, bool (*fits)(int64_t), int64_t *n, std::string *why);

// `path` if it can be a path (not empty, no NUL byte, at most kMaxPathBytes); else nullopt and *why.
std::optional<std::string> checked_path(std::string_view path, std::string *why);

// One item of a step/rank list: "5" or "4-6" (spaces around '-' allowed), appended to *out (index_set.cpp).
bool parse_index_item(std::string_view item, std::vector<std::pair<int64_t, int64_t>> *out, std::string *why);
IndexSet make_index_set(std::vector<std::pair<int64_t, int64_t>> ranges);

// ---- messages ----------------------------------------------------------------------------------------------------

// Escapes what could break the one-line promise or hide text: control bytes, invalid UTF-8, C1 controls, line and
// paragraph separators and bidi overrides. quotes: also escape '"' and '\'. Stops after max_bytes of input.
std::string escape_text(std::string_view s, size_t max_bytes, bool quotes, size_t *consumed);

// A config.json value as messages show it: compact JSON, escaped, cut to 100 bytes.
std::string show_json(const json &v);
// "a number", "a list", ...
const char *json_type(const json &v);
// "it is a number, not a list"
std::string it_is(const json &v, const char *not_what);

// MSPROBE_CONFIG, which every config.json message names, and what it accepts (its row in kSettings says both too).
constexpr char kConfigVariable[] = "MSPROBE_CONFIG";
constexpr std::string_view kAcceptConfig = "the path of a readable msprobe config.json (a JSON object, at most 16 MiB)";

// A config.json value on its way to its parser.
struct FileValue {
  std::string field;  // as the messages name it: "step", "tensor.list"
  const json &value;
  std::string_view accepted;  // what the field accepts, as the messages say it
};

// Where every problem goes, in the order found: one line each in ConfigLoad::errors or ::warnings.
class Messages {
 public:
  explicit Messages(ConfigLoad &out) : out_(out) {}

  void error(std::string e) { out_.errors.push_back(std::move(e)); }
  void warn(std::string w) { out_.warnings.push_back(std::move(w)); }

  // MSPROBE_X="value" is not valid: why; accepted: ...
  void env_error(const char *name, std::string_view raw_value, const std::string &why, std::string_view accepted) {
    std::string e = std::string(name) + "=" + quote_value(raw_value) + " is not valid";
    if (!why.empty()) e += ": " + why;
    error(e + "; accepted: " + std::string(accepted));
  }

  // config.json messages: MSPROBE_CONFIG="path": field "x" = value is not valid...
  std::string where(const std::string &field) const {
    return std::string(kConfigVariable) + "=" + quote_value(out_.config.config_path) + ": field " +
           quote_value(field, 64);
  }
  void file_error(const std::string &field, const json &v, const std::string &why, std::string_view accepted) {
    std::string e = where(field) + " = " + show_json(v) + " is not valid";
    if (!why.empty()) e += ": " + why;
    error(e + "; accepted: " + std::string(accepted));
  }
  void reject(const FileValue &f, const std::string &why) { file_error(f.field, f.value, why, f.accepted); }

 private:
  ConfigLoad &out_;
};

}  // namespace msprobe::shim::config_internal
