#include "format/dump_json.h"

#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <system_error>

#include "format/naming.h"

namespace msprobe::format {
namespace {

constexpr char kHex[] = "0123456789abcdef";

void append_u_escape(std::string &out, uint32_t unit) {
  out += "\\u";
  for (int shift = 12; shift >= 0; shift -= 4) out += kHex[(unit >> shift) & 0xfu];
}

// Decodes one UTF-8 sequence at s[i]; returns the code point and sets `len`, or returns 0xFFFD with len = 1 for
// anything that is not well-formed UTF-8 (overlong forms, surrogates, > U+10FFFF, truncated sequences).
uint32_t decode_utf8(std::string_view s, size_t i, size_t &len) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  len = 1;
  size_t n;
  uint32_t cp, min;
  if (c >= 0xc2 && c <= 0xdf)
    n = 2, cp = c & 0x1fu, min = 0x80;
  else if (c >= 0xe0 && c <= 0xef)
    n = 3, cp = c & 0x0fu, min = 0x800;
  else if (c >= 0xf0 && c <= 0xf4)
    n = 4, cp = c & 0x07u, min = 0x10000;
  else
    return 0xfffd;
  if (i + n > s.size()) return 0xfffd;
  for (size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xc0u) != 0x80u) return 0xfffd;
    cp = (cp << 6) | (b(k) & 0x3fu);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0xfffd;
  len = n;
  return cp;
}

[[gnu::always_inline]] inline void append_csv_safe_string(std::string &out, std::string_view s) {
  if (is_csv_safe(s))
    append_json_string(out, s);
  else
    append_json_string(out, csv_safe_text(s));
}

[[gnu::always_inline]] inline void append_key(std::string &out, std::string_view key) {
  append_json_string(out, key);
  out += ": ";
}

void append_int_list(std::string &out, std::span<const int64_t> v) {
  out += '[';
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ", ";
    append_json_integer(out, v[i]);
  }
  out += ']';
}

void append_arg_value(std::string &out, const ArgValue &v) {
  struct Visitor {
    std::string &out;
    void operator()(std::monostate) const { out += "null"; }
    void operator()(bool b) const { out += b ? "true" : "false"; }
    void operator()(int64_t i) const { append_json_integer(out, i); }
    void operator()(double d) const { append_json_number(out, d); }
    void operator()(const std::string &s) const { append_csv_safe_string(out, s); }
    void operator()(const std::vector<int64_t> &a) const { append_int_list(out, a); }
    void operator()(const std::vector<double> &a) const {
      out += '[';
      for (size_t i = 0; i < a.size(); ++i) {
        if (i) out += ", ";
        append_json_number(out, a[i]);
      }
      out += ']';
    }
    void operator()(const std::vector<bool> &a) const {
      out += '[';
      for (size_t i = 0; i < a.size(); ++i) out += i ? (a[i] ? ", true" : ", false") : (a[i] ? "true" : "false");
      out += ']';
    }
    void operator()(const std::vector<TypedScalar> &a) const {
      out += '[';
      for (size_t i = 0; i < a.size(); ++i) {
        if (i) out += ", ";
        std::visit([this](const auto &x) { (*this)(x); }, a[i].value);
      }
      out += ']';
    }
  };
  std::visit(Visitor{out}, v);
}

// One scalar leaf: {"type": type, "value": value[, "name": name]}.
void append_value_leaf(std::string &out, std::string_view type, const auto &append_value,
                       const std::optional<std::string> &name) {
  out += '{';
  append_key(out, json_key::kType);
  append_csv_safe_string(out, type);
  out += ", ";
  append_key(out, json_key::kValue);
  append_value();
  if (name) {
    out += ", ";
    append_key(out, "name");
    append_csv_safe_string(out, *name);
  }
  out += '}';
}

// msprobe reads a leaf without statistics as Max = Min = Mean = Norm = value, so a list value makes its compare
// table ragged and the compare aborts. A sequence is therefore written as msprobe writes one: a JSON list of scalar
// leaves ({key}.input.{i}.{j} in its rows), typed int / float / bool; a named one (an aclop attribute) names every
// leaf. The ACL type (aclIntArray...) is left to the op's prototype; only a scalar value (or null: a handle the shim
// does not know) keeps it.
void append_value_arg(std::string &out, const ValueArg &v) {
  auto list = [&](std::string_view elem_type, const auto &values, auto append_one) {
    out += '[';
    for (size_t i = 0; i < values.size(); ++i) {
      if (i) out += ", ";
      append_value_leaf(
          out, elem_type, [&] { append_one(values[i]); }, v.name);
    }
    out += ']';
  };
  if (const auto *a = std::get_if<std::vector<int64_t>>(&v.value))
    list(kIntLeafType, *a, [&](int64_t x) { append_json_integer(out, x); });
  else if (const auto *d = std::get_if<std::vector<double>>(&v.value))
    list(kFloatLeafType, *d, [&](double x) { append_json_number(out, x); });
  else if (const auto *b = std::get_if<std::vector<bool>>(&v.value))
    list(kBoolLeafType, *b, [&](bool x) { out += x ? "true" : "false"; });
  else if (const auto *t = std::get_if<std::vector<TypedScalar>>(&v.value)) {
    out += '[';
    for (size_t i = 0; i < t->size(); ++i) {
      if (i) out += ", ";
      const TypedScalar &x = (*t)[i];
      append_value_leaf(
          out, x.type, [&] { std::visit([&](const auto &s) { append_arg_value(out, ArgValue{s}); }, x.value); },
          v.name);
    }
    out += ']';
  } else
    append_value_leaf(
        out, v.type, [&] { append_arg_value(out, v.value); }, v.name);
}

// Printable ASCII other than '"' and '\\', copied as it is: a table, one load a character.
constexpr std::array<bool, 256> kPlainJsonChar = [] {
  std::array<bool, 256> t{};
  for (int c = 0x20; c < 0x7f; ++c) t[static_cast<size_t>(c)] = c != '"' && c != '\\';
  return t;
}();

}  // namespace

void append_json_string(std::string &out, std::string_view s) {
  out.reserve(out.size() + s.size() + 2);
  out += '"';
  for (size_t i = 0; i < s.size();) {
    // Runs of plain characters in one append: stack.json's frames are long and almost all plain, and a character at
    // a time was the collector's largest cost in the tensor task.
    size_t end = i;
    while (end < s.size() && kPlainJsonChar[static_cast<unsigned char>(s[end])]) ++end;
    out.append(s.data() + i, end - i);
    if ((i = end) == s.size()) break;
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    if (c < 0x80) {  // control characters and DEL, as Python escapes them
      switch (c) {
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default: append_u_escape(out, c);
      }
      ++i;
      continue;
    }
    size_t len;
    const uint32_t cp = decode_utf8(s, i, len);
    i += len;
    if (cp >= 0x10000) {  // surrogate pair, as json.dump(ensure_ascii=True)
      const uint32_t v = cp - 0x10000;
      append_u_escape(out, 0xd800 + (v >> 10));
      append_u_escape(out, 0xdc00 + (v & 0x3ffu));
    } else {
      append_u_escape(out, cp);
    }
  }
  out += '"';
}

void append_json_number(std::string &out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
    return;
  }
  if (std::isinf(v)) {
    out += v > 0 ? "Infinity" : "-Infinity";
    return;
  }
  // Shortest round-trip digits from to_chars, laid out the way Python's float repr does: positional for
  // 1e-4 <= |v| < 1e16 (with ".0" on integral values), else d.ddde[+-]XX.
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  const std::string_view sci(buf, static_cast<size_t>(r.ptr - buf));
  const size_t e_pos = sci.find('e');
  std::string_view mant = sci.substr(0, e_pos);
  const int exp = std::atoi(std::string(sci.substr(e_pos + 1)).c_str());
  if (!mant.empty() && mant[0] == '-') {
    out += '-';
    mant.remove_prefix(1);
  }
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out += "0.";
      out.append(static_cast<size_t>(-exp - 1), '0');
      out += digits;
    } else {
      const size_t int_len = static_cast<size_t>(exp) + 1;
      if (digits.size() <= int_len) {
        out += digits;
        out.append(int_len - digits.size(), '0');
        out += ".0";
      } else {
        out.append(digits, 0, int_len);
        out += '.';
        out.append(digits, int_len, std::string::npos);
      }
    }
    return;
  }
  out += digits[0];
  if (digits.size() > 1) {
    out += '.';
    out.append(digits, 1, std::string::npos);
  }
  out += exp < 0 ? "e-" : "e+";
  const int a = exp < 0 ? -exp : exp;
  if (a < 10) out += '0';
  out += std::to_string(a);
}

std::string json_number(double v) {
  std::string s;
  append_json_number(s, v);
  return s;
}

void append_json_integer(std::string &out, int64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

void append_json_integer(std::string &out, uint64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

void append_stat_value(std::string &out, const StatValue &v) {
  switch (v.kind) {
    case StatValue::Kind::Null: out += "null"; return;
    case StatValue::Kind::Real: append_json_number(out, v.real); return;
    case StatValue::Kind::Integer: append_json_integer(out, v.integer); return;
    case StatValue::Kind::Unsigned: append_json_integer(out, v.uinteger); return;
    case StatValue::Kind::Bool: out += v.boolean ? "true" : "false"; return;
  }
}

void append_tensor_summary(std::string &out, const TensorSummary &t, Framework framework) {
  out += '{';
  append_key(out, json_key::kType);
  append_json_string(out, tensor_type_name(framework));
  out += ", ";
  append_key(out, json_key::kDtype);
  if (t.dtype_name)
    append_csv_safe_string(out, *t.dtype_name);
  else
    append_json_string(out, dtype_name(t.dtype, framework));
  out += ", ";
  append_key(out, json_key::kShape);
  append_int_list(out, t.shape);
  const std::pair<std::string_view, const StatValue *> stats[] = {{json_key::kMax, &t.stats.max},
                                                                  {json_key::kMin, &t.stats.min},
                                                                  {json_key::kMean, &t.stats.mean},
                                                                  {json_key::kNorm, &t.stats.norm}};
  for (const auto &[key, value] : stats) {
    out += ", ";
    append_key(out, key);
    append_stat_value(out, *value);
  }
  auto optional_string = [&](std::string_view key, const std::optional<std::string> &v) {
    if (!v) return;
    out += ", ";
    append_key(out, key);
    append_csv_safe_string(out, *v);
  };
  optional_string(json_key::kMd5, t.md5);
  optional_string(json_key::kDataName, t.data_name);
  optional_string(json_key::kFormat, t.format);
  if (t.stride) {
    out += ", ";
    append_key(out, json_key::kStride);
    append_int_list(out, *t.stride);
  }
  if (t.offset) {
    out += ", ";
    append_key(out, json_key::kOffset);
    append_json_integer(out, *t.offset);
  }
  out += '}';
}

void append_arg(std::string &out, const Arg &a, Framework framework) {
  if (std::holds_alternative<std::monostate>(a.v)) {
    out += "null";
  } else if (const auto *t = std::get_if<TensorSummary>(&a.v)) {
    append_tensor_summary(out, *t, framework);
  } else if (const auto *v = std::get_if<ValueArg>(&a.v)) {
    append_value_arg(out, *v);
  } else {
    const auto &list = std::get<ArgList>(a.v);
    out += '[';
    for (size_t i = 0; i < list.size(); ++i) {
      if (i) out += ", ";
      append_arg(out, list[i], framework);
    }
    out += ']';
  }
}

// Declared in comm_info.h (a header of data only), written with this file's scalars.
void append_comm_info(std::string &out, const CommInfo &c) {
  auto key = [&](std::string_view k) {
    if (out.back() != '{') out += ", ";
    append_key(out, k);
  };
  auto number = [&](std::string_view k, std::optional<uint64_t> v) {
    if (!v) return;
    key(k);
    append_json_integer(out, *v);
  };
  out += '{';
  key(comm_key::kName);
  append_csv_safe_string(out, c.name);
  number(comm_key::kRank, c.rank);
  number(comm_key::kSize, c.size);
  if (c.ranks) {
    key(comm_key::kRanks);
    out += '[';
    for (size_t i = 0; i < c.ranks->size(); ++i) {
      if (i) out += ", ";
      append_json_integer(out, uint64_t{(*c.ranks)[i]});
    }
    out += ']';
  }
  number(comm_key::kSeq, c.seq);
  number(comm_key::kPeer, c.peer);
  number(comm_key::kPairSeq, c.pair_seq);
  number(comm_key::kRoot, c.root);
  out += '}';
}

void append_kernel_entry(std::string &out, const KernelEntry &e, Framework framework) {
  append_csv_safe_string(out, e.name);
  out += ": {";
  bool first = true;
  auto next_key = [&](std::string_view key) {
    if (!first) out += ", ";
    first = false;
    append_key(out, key);
  };
  auto args = [&](std::string_view key, const std::optional<ArgList> &list) {
    if (!list) return;
    next_key(key);
    out += '[';
    for (size_t i = 0; i < list->size(); ++i) {
      if (i) out += ", ";
      append_arg(out, (*list)[i], framework);
    }
    out += ']';
  };
  args(json_key::kInputArgs, e.input_args);
  args(json_key::kOutput, e.output);
  next_key(json_key::kLaunch);
  out += '{';
  append_key(out, json_key::kIndex);
  append_json_integer(out, e.launch_index);
  out += ", ";
  append_key(out, json_key::kTaskId);
  append_json_integer(out, e.task_id);
  out += ", ";
  append_key(out, json_key::kStreamId);
  append_json_integer(out, e.stream_id);
  out += ", ";
  append_key(out, json_key::kTimestamp);
  append_json_integer(out, e.timestamp_us);
  for (const auto &[key, value] : e.launch_extra) {
    out += ", ";
    append_key(out, key);
    append_arg_value(out, value);
  }
  out += '}';
  if (e.comm) {
    next_key(comm_key::kComm);
    append_comm_info(out, *e.comm);
  }
  for (const auto &[key, text] : e.notes) {
    next_key(key);
    append_csv_safe_string(out, text);
  }
  out += '}';
}

std::string kernel_entry_json(const KernelEntry &e, Framework framework) {
  std::string s;
  append_kernel_entry(s, e, framework);
  return s;
}

std::string dump_json_prefix(const DumpHeader &h) {
  std::string s = "{";
  append_key(s, json_key::kTask);
  append_json_string(s, task_name(h.task));
  s += ", ";
  append_key(s, json_key::kLevel);
  append_json_string(s, kLevel);
  s += ", ";
  append_key(s, json_key::kFramework);
  append_json_string(s, framework_name(h.framework));
  s += ", ";
  append_key(s, json_key::kHostFramework);
  append_json_string(s, host_framework_name(h.host_framework));
  s += ", ";
  append_key(s, json_key::kDumpDataDir);
  if (h.dump_data_dir)
    append_json_string(s, *h.dump_data_dir);
  else
    s += "null";
  s.append(h.dump_data_dir_pad, ' ');
  s += ", ";
  if (!h.run_id.empty()) {
    append_key(s, json_key::kRun);
    s += '{';
    append_key(s, json_key::kRunId);
    append_json_string(s, h.run_id);
    s += ", ";
    append_key(s, json_key::kRunPid);
    append_json_integer(s, h.run_pid);
    s += "}, ";
  }
  append_key(s, json_key::kData);
  s += '{';
  return s;
}

std::string construct_json_member(std::string_view kernel_name) {
  std::string s;
  append_csv_safe_string(s, kernel_name);
  s += ": null";
  return s;
}

void append_csv_safe_json_string(std::string &out, std::string_view s) { append_csv_safe_string(out, s); }

namespace {

// Is `line` one complete member `"key": value` whose value is an object, an array or null? (Members are always
// written on one line; JSON strings never hold a raw newline.)
bool is_complete_member(std::string_view line) {
  size_t i = 0;
  auto skip_string = [&]() {  // at '"'; returns false when the string is cut
    for (++i; i < line.size(); ++i) {
      if (line[i] == '\\')
        ++i;
      else if (line[i] == '"')
        return ++i, true;
    }
    return false;
  };
  if (line.empty() || line[0] != '"' || !skip_string()) return false;
  while (i < line.size() && line[i] == ' ') ++i;
  if (i >= line.size() || line[i++] != ':') return false;
  while (i < line.size() && line[i] == ' ') ++i;
  if (line.substr(i) == "null") return true;
  if (i >= line.size() || (line[i] != '{' && line[i] != '[')) return false;
  int depth = 0;
  while (i < line.size()) {
    const char c = line[i];
    if (c == '"') {
      if (!skip_string()) return false;
      continue;
    }
    if (c == '{' || c == '[') ++depth;
    if (c == '}' || c == ']') --depth;
    ++i;
    if (depth == 0) return i == line.size();
  }
  return false;
}

}  // namespace

std::optional<std::string> repair_journal_text(std::string_view content, std::string_view suffix) {
  if (content.size() >= suffix.size() && content.substr(content.size() - suffix.size()) == suffix)
    return std::string(content);
  const size_t header_end = content.find('\n');
  if (header_end == std::string_view::npos) return std::nullopt;
  std::string out(content.substr(0, header_end + 1));
  bool first = true;
  for (size_t pos = header_end + 1; pos < content.size();) {
    size_t end = content.find('\n', pos);
    if (end == std::string_view::npos) end = content.size();
    std::string_view line = content.substr(pos, end - pos);
    pos = end + 1;
    if (!line.empty() && line.back() == ',') line.remove_suffix(1);
    if (!is_complete_member(line)) break;  // only the last member can be cut, and nothing follows it
    if (!first) out += ",\n";
    out += line;
    first = false;
  }
  out += suffix;
  return out;
}

// ---- Whole files -------------------------------------------------------------------------------------------------
std::string stack_json(std::span<const StackGroup> groups) {
  std::string s = "{";
  for (size_t g = 0; g < groups.size(); ++g) {
    s += g ? ",\n" : "\n";
    append_json_string(s, std::to_string(g));
    s += ": [[";
    for (size_t i = 0; i < groups[g].kernels.size(); ++i) {
      if (i) s += ", ";
      append_csv_safe_string(s, groups[g].kernels[i]);
    }
    s += "], [";
    for (size_t i = 0; i < groups[g].frames.size(); ++i) {
      if (i) s += ", ";
      append_csv_safe_string(s, groups[g].frames[i]);
    }
    s += "]]";
  }
  s += "\n}\n";
  return s;
}

std::string construct_json(std::span<const std::string> kernel_names) {
  std::string s = "{";
  for (size_t i = 0; i < kernel_names.size(); ++i) {
    s += i ? ",\n" : "\n";
    append_csv_safe_string(s, kernel_names[i]);
    s += ": null";
  }
  s += "\n}\n";
  return s;
}

}  // namespace msprobe::format
