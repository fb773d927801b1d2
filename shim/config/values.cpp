// The values the settings share: whole numbers and paths checked, and the text of messages (escaping, a config.json
// value as shown); the names of the keywords (to_string) and quote_value, of the layer's API. Declared in values.h.
#include "shim/config/values.h"

#include <cstdio>

#include "shim/config/keywords.h"

namespace msprobe::shim::config_internal {

namespace {

void append_hex(std::string &out, unsigned char c) {
  static const char hex[] = "0123456789abcdef";
  out += "\\x";
  out += hex[c >> 4];
  out += hex[c & 15];
}

// Length of the valid UTF-8 sequence at s[i] and its code point, or 0 if the bytes there are not valid UTF-8
// (overlong forms, surrogates and code points above U+10FFFF are not valid).
size_t utf8_sequence(std::string_view s, size_t i, uint32_t *cp) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  size_t len;
  uint32_t v, min;
  if (c >= 0xc2 && c <= 0xdf)
    len = 2, v = c & 0x1f, min = 0x80;
  else if (c >= 0xe0 && c <= 0xef)
    len = 3, v = c & 0x0f, min = 0x800;
  else if (c >= 0xf0 && c <= 0xf4)
    len = 4, v = c & 0x07, min = 0x10000;
  else
    return 0;
  if (i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    const unsigned char t = static_cast<unsigned char>(s[i + k]);
    if ((t & 0xc0) != 0x80) return 0;
    v = (v << 6) | (t & 0x3f);
  }
  if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0;
  *cp = v;
  return len;
}

}  // namespace

// ---- text --------------------------------------------------------------------------------------------------------

std::string escape_text(std::string_view s, size_t max_bytes, bool quotes, size_t *consumed) {
  std::string out;
  size_t i = 0;
  while (i < s.size() && i < max_bytes) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if (quotes && (c == '"' || c == '\\'))
        out += '\\', out += static_cast<char>(c);
      else if (c == '\n')
        out += "\\n";
      else if (c == '\t')
        out += "\\t";
      else if (c == '\r')
        out += "\\r";
      else if (c < 0x20 || c == 0x7f)
        append_hex(out, c);
      else
        out += static_cast<char>(c);
      ++i;
      continue;
    }
    uint32_t cp = 0;
    const size_t len = utf8_sequence(s, i, &cp);
    if (len == 0) {
      append_hex(out, c);
      ++i;
      continue;
    }
    const bool hidden = (cp >= 0x80 && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029 || (cp >= 0x202a && cp <= 0x202e) ||
                        (cp >= 0x2066 && cp <= 0x2069) || cp == 0xfeff;
    if (hidden) {
      char buf[16];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
      out += buf;
    } else {
      out.append(s.substr(i, len));
    }
    i += len;
  }
  *consumed = i;
  return out;
}

std::string show_json(const json &v) {
  std::string text;
  try {
    text = v.dump(-1, ' ', false, json::error_handler_t::replace);
  } catch (...) {
    text = "<unprintable>";
  }
  size_t consumed = 0;
  std::string out = escape_text(text, 100, /*quotes=*/false, &consumed);
  if (consumed < text.size()) out += "...";
  return out;
}

const char *json_type(const json &v) {
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "a list";
  if (v.is_object()) return "an object";
  return "null";
}

std::string it_is(const json &v, const char *not_what) {
  return std::string("it is ") + json_type(v) + ", not " + not_what;
}

// ---- numbers -----------------------------------------------------------------------------------------------------

NumberResult parse_int64(std::string_view s, int64_t *out) {
  bool negative = false;
  if (!s.empty() && s[0] == '-') negative = true, s.remove_prefix(1);
  if (s.empty()) return NumberResult::NotNumber;
  uint64_t v = 0;
  bool overflow = false;
  for (const char c : s) {
    if (c < '0' || c > '9') return NumberResult::NotNumber;
    if (v > (UINT64_MAX - 9) / 10)
      overflow = true;
    else
      v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (overflow || v > static_cast<uint64_t>(INT64_MAX)) return NumberResult::OutOfRange;
  *out = negative ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
  return NumberResult::Ok;
}

bool overflow_nums_fit(int64_t n) { return n == -1 || (n >= 1 && n <= kMaxOverflowNums); }
bool flight_kernels_fit(int64_t n) { return n >= 1 && n <= kMaxFlightKernels; }
bool buffer_mb_fit(int64_t n) { return n >= 1 && static_cast<uint64_t>(n) <= kMaxBufferMb; }
bool write_wait_fit(int64_t seconds) { return seconds >= 1 && seconds <= 86400; }

bool whole_number(std::string_view text, bool (*fits)(int64_t), int64_t *n, std::string *why) {
  const NumberResult r = parse_int64(text, n);
  if (r == NumberResult::Ok && fits(*n)) return true;
  *why = r == NumberResult::NotNumber ? "not a whole number" : "out of range";
  return false;
}

std::optional<std::string> checked_path(std::string_view path, std::string *why) {
  if (path.empty()) {
    *why = "it is empty";
    return std::nullopt;
  }
  if (path.find('\0') != std::string_view::npos) {
    *why = "it contains a NUL byte";
    return std::nullopt;
  }
  if (path.size() > kMaxPathBytes) {
    *why = "it is " + std::to_string(path.size()) + " bytes long";
    return std::nullopt;
  }
  return std::string(path);
}

}  // namespace msprobe::shim::config_internal

namespace msprobe::shim {

using namespace config_internal;

std::string quote_value(std::string_view value, size_t max_bytes) {
  size_t consumed = 0;
  std::string out = "\"" + escape_text(value, max_bytes, /*quotes=*/true, &consumed);
  if (consumed < value.size())
    out += "...\" (" + std::to_string(value.size()) + " bytes)";
  else
    out += "\"";
  return out;
}

const char *to_string(Task t) { return keyword_name(kTasks, t); }
const char *to_string(DataMode m) { return keyword_name(kDataModes, m); }
const char *to_string(SummaryMode m) { return keyword_name(kSummaryModes, m); }
const char *to_string(FileFormat f) { return keyword_name(kFileFormats, f); }
const char *to_string(StackMode s) { return keyword_name(kStackModes, s); }
const char *to_string(Compress c) { return keyword_name(kCompress, c); }
const char *to_string(LogLevel l) { return keyword_name(kLogLevels, l); }
const char *to_string(Precision p) { return keyword_name(kPrecisions, p); }

}  // namespace msprobe::shim
