#include "shim/config/config.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "format/io.h"
#include "shim/base/text.h"

namespace msprobe::shim {

using json = nlohmann::json;

// Optimizer kernels (aclnn, aclop and MindSpore op types). A plain alternation of words: NameRegex matches it with
// one hash lookup. ApplyTopKTopP and similar Apply* ops are sampling, not optimizers, hence no "Apply.*".
constinit const std::string_view kDefaultStepMarker =
    "ApplyAdam|ApplyAdamD|ApplyAdamV2|ApplyAdamW|ApplyAdamWV2|ApplyAdamWQuant|ApplyAdamWithAmsgrad|"
    "ApplyAdamWithAmsgradV2|ApplyFusedEmaAdam|ApplyAdaMax|ApplyAdadelta|ApplyAdagrad|ApplyAdagradV2|ApplyAdagradDA|"
    "ApplyMomentum|ApplyKerasMomentum|ApplyRMSProp|ApplyCenteredRMSProp|ApplyFtrl|ApplyFtrlV2|ApplyGradientDescent|"
    "ApplyProximalAdagrad|ApplyProximalGradientDescent|ApplyAddSign|ApplyPowerSign|Adam|AdamW|AdamWeightDecay|"
    "FusedAdam|FusedAdamW|FusedAdamWeightDecay|SGD|Sgd|Lamb|LambApplyOptimizerAssign|LambApplyWeightAssign";

namespace {

constexpr size_t kMaxConfigBytes = 16u << 20;  // a config.json with 100k kernel names is a few MiB
constexpr int kMaxJsonDepth = 64;              // msprobe's schema nests 3 levels
constexpr size_t kMaxPathBytes = 4095;         // PATH_MAX - 1
constexpr uint64_t kMaxBufferMb = 1u << 20;    // 1 TiB
constexpr int64_t kMaxOverflowNums = 2147483647;
constexpr int64_t kMaxFlightKernels = 1000000;

// ---- text helpers ------------------------------------------------------------------------------------------------

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

// Escapes what could break the one-line promise or hide text: control bytes, invalid UTF-8, C1 controls, line and
// paragraph separators and bidi overrides. quotes: also escape '"' and '\'. Stops after max_bytes of input.
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

// ---- keyword tables ----------------------------------------------------------------------------------------------

template <class E>
struct Keyword {
  std::string_view name;
  E value;
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
// those numbers mean the same here (4 keeps errors: a shim that disables itself must say why).
constexpr Keyword<LogLevel> kLogLevels[] = {
    {"error", LogLevel::Error}, {"warn", LogLevel::Warn}, {"warning", LogLevel::Warn}, {"info", LogLevel::Info},
    {"debug", LogLevel::Debug}, {"0", LogLevel::Debug},   {"1", LogLevel::Info},       {"2", LogLevel::Warn},
    {"3", LogLevel::Error},     {"4", LogLevel::Error}};
constexpr Keyword<bool> kBools[] = {{"1", true},  {"0", false},   {"true", true}, {"false", false},
                                    {"on", true}, {"off", false}, {"yes", true},  {"no", false}};

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

// msprobe's tasks that are not kernel dumps: config.json's "task" may not name them, and their sections are ignored.
constexpr std::string_view kOtherMsprobeTasks[] = {"free_benchmark", "run_ut", "grad_probe", "exception_dump"};

template <class List>
bool contains(const List &list, std::string_view s) {
  return std::find(std::begin(list), std::end(list), s) != std::end(list);
}

// ---- numbers -----------------------------------------------------------------------------------------------------

enum class NumberResult { Ok, NotNumber, OutOfRange };

// Strict decimal: optional '-', digits only. Out of range of int64 -> OutOfRange (never wraps).
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

std::string shown_item(std::string_view item) { return quote_value(item, 40); }

// One item of a step/rank list: "5" or "4-6" (spaces around '-' allowed).
bool parse_index_item(std::string_view item, std::vector<std::pair<int64_t, int64_t>> *out, std::string *why) {
  const auto number = [&](std::string_view text, int64_t *v) {
    const NumberResult r = parse_int64(trim(text), v);
    if (r == NumberResult::Ok && *v >= 0 && *v <= IndexSet::kMax) return true;
    if (r == NumberResult::NotNumber) {
      *why = "item " + shown_item(item) + " is not a number or a range a-b of numbers";
    } else {
      *why = "item " + shown_item(item) + " is out of range [0, 1000000]";
    }
    return false;
  };
  // The range hyphen is the first '-' after a digit (a leading '-' is a minus sign, which is out of range).
  size_t dash = std::string_view::npos;
  for (size_t i = 1; i < item.size(); ++i) {
    if (item[i] == '-' && !trim(item.substr(0, i)).empty()) {
      dash = i;
      break;
    }
  }
  int64_t lo, hi;
  if (dash == std::string_view::npos) {
    if (!number(item, &lo)) return false;
    out->emplace_back(lo, lo);
    return true;
  }
  if (!number(item.substr(0, dash), &lo) || !number(item.substr(dash + 1), &hi)) return false;
  if (lo > hi) {
    *why = "item " + shown_item(item) + ": the left boundary " + std::to_string(lo) +
           " is greater than the right boundary " + std::to_string(hi);
    return false;
  }
  out->emplace_back(lo, hi);
  return true;
}

IndexSet make_index_set(std::vector<std::pair<int64_t, int64_t>> ranges) {
  IndexSet set = IndexSet::none();
  std::sort(ranges.begin(), ranges.end());
  for (const auto &[lo, hi] : ranges) set.add(lo, hi);  // sorted: each add appends or extends the last range
  return set;
}

// ---- config.json reading -----------------------------------------------------------------------------------------

// First pass over the text: syntax and nesting depth, without building anything (nlohmann's SAX parser keeps its
// own stack on the heap, so even 100000 levels cost no native stack; the DOM is built only for sane files).
class DepthCheck final : public nlohmann::json_sax<json> {
 public:
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t &) override { return true; }
  bool string(string_t &) override { return true; }
  bool binary(binary_t &) override { return true; }
  bool start_object(std::size_t) override { return enter(); }
  bool key(string_t &) override { return true; }
  bool end_object() override { return --depth_, true; }
  bool start_array(std::size_t) override { return enter(); }
  bool end_array() override { return --depth_, true; }
  bool parse_error(std::size_t, const std::string &, const nlohmann::json::exception &e) override {
    error_ = e.what();
    const size_t cut = error_.find("] ");  // drop "[json.exception.parse_error.101] "
    if (error_.rfind("[json.exception", 0) == 0 && cut != std::string::npos) error_.erase(0, cut + 2);
    return false;
  }
  bool too_deep() const { return too_deep_; }
  const std::string &error() const { return error_; }

 private:
  bool enter() {
    if (++depth_ > kMaxJsonDepth) too_deep_ = true;
    return !too_deep_;
  }
  int depth_ = 0;
  bool too_deep_ = false;
  std::string error_;
};

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

// ---- messages ----------------------------------------------------------------------------------------------------

// MSPROBE_CONFIG, which every config.json message names, and what it accepts (its row in kSettings says both too).
constexpr char kConfigVariable[] = "MSPROBE_CONFIG";
constexpr std::string_view kAcceptConfig = "the path of a readable msprobe config.json (a JSON object, at most 16 MiB)";

// A config.json value on its way to its parser.
struct FileValue {
  std::string field;  // as the messages name it: "step", "tensor.list"
  const json &value;
  std::string_view accepted;  // what the field accepts, as the messages say it
};

// "it is a number, not a list"
std::string it_is(const json &v, const char *not_what) {
  return std::string("it is ") + json_type(v) + ", not " + not_what;
}

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

// ---- MSPROBE_CONFIG's file --------------------------------------------------------------------------------------

// Reads and parses the file MSPROBE_CONFIG names. Each failure is one error, `MSPROBE_CONFIG="path" <what>;
// accepted: ...`, and read() then returns nullopt.
class ConfigFile {
 public:
  ConfigFile(const std::string &path, Messages &m) : path_(path), m_(m) {}

  std::optional<json> read();

 private:
  void fail(const std::string &what) {
    m_.error(std::string(kConfigVariable) + "=" + quote_value(path_) + " " + what +
             "; accepted: " + std::string(kAcceptConfig));
  }
  std::optional<size_t> regular_file_size(int fd);
  std::optional<std::string> read_text(int fd, size_t size);
  std::optional<json> parse(const std::string &text);

  const std::string &path_;
  Messages &m_;
};

std::optional<json> ConfigFile::read() {
  // O_NONBLOCK: a FIFO or a terminal named by mistake must not hang the host in open() or read().
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    fail(std::string("cannot be opened: ") + std::strerror(errno));
    return std::nullopt;
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  const std::optional<size_t> size = regular_file_size(fd);
  if (!size) return std::nullopt;
  const std::optional<std::string> text = read_text(fd, *size);
  if (!text) return std::nullopt;
  return parse(*text);
}

// The size fstat gives, if the file is a regular one of at most kMaxConfigBytes.
std::optional<size_t> ConfigFile::regular_file_size(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    fail(std::string("cannot be read: ") + std::strerror(errno));
    return std::nullopt;
  }
  if (S_ISDIR(st.st_mode)) {
    fail("is a directory");
    return std::nullopt;
  }
  if (!S_ISREG(st.st_mode)) {
    fail("is not a regular file");
    return std::nullopt;
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxConfigBytes) {
    fail("is " + std::to_string(static_cast<uint64_t>(st.st_size)) +
         " bytes, more than the 16 MiB a config.json may have");
    return std::nullopt;
  }
  return static_cast<size_t>(st.st_size);
}

// Reads to EOF (st_size may lie for /proc-like files), never more than the cap.
std::optional<std::string> ConfigFile::read_text(int fd, size_t size) {
  std::string text;
  text.reserve(std::min(size + 1, kMaxConfigBytes + 1));
  if (!format::read_to_end(fd, &text, kMaxConfigBytes + 1)) {
    fail(std::string("cannot be read: ") + std::strerror(errno));
    return std::nullopt;
  }
  if (text.size() > kMaxConfigBytes) {
    fail("is more than the 16 MiB a config.json may have");
    return std::nullopt;
  }
  return text;
}

std::optional<json> ConfigFile::parse(const std::string &text) {
  if (trim(text).empty()) {
    fail("is an empty file");
    return std::nullopt;
  }
  DepthCheck check;
  const bool ok = json::sax_parse(text, &check);
  if (check.too_deep()) {
    fail("nests objects or lists deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    return std::nullopt;
  }
  if (!ok) {
    size_t consumed = 0;
    std::string why = escape_text(check.error(), 200, false, &consumed);
    if (consumed < check.error().size()) why += "...";
    fail("is not valid JSON: " + why);
    return std::nullopt;
  }
  json root = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) {
    fail("is not valid JSON");
    return std::nullopt;
  }
  if (!root.is_object()) {
    fail(std::string("holds ") + json_type(root) + " at the top level, not an object");
    return std::nullopt;
  }
  return root;
}

// ---- parsers -----------------------------------------------------------------------------------------------------

// A variable's value on its way to its parser.
struct EnvValue {
  const char *name;       // MSPROBE_LIST
  std::string_view text;  // trimmed, unless its row says Text::AsWritten
};

// Stores a variable's value in `into`, or returns false with *why (empty when "is not valid" says it all).
using EnvParser = bool (*)(const EnvValue &v, Config &into, std::string *why, Messages &m);
// Stores a config.json value in `into`, or reports why not itself and returns false.
using FileParser = bool (*)(const FileValue &f, Config &into, Messages &m);

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

bool overflow_nums_fit(int64_t n) { return n == -1 || (n >= 1 && n <= kMaxOverflowNums); }
bool flight_kernels_fit(int64_t n) { return n >= 1 && n <= kMaxFlightKernels; }
bool buffer_mb_fit(int64_t n) { return n >= 1 && static_cast<uint64_t>(n) <= kMaxBufferMb; }

// A whole number that fits; else *why says how it is not.
bool whole_number(std::string_view text, bool (*fits)(int64_t), int64_t *n, std::string *why) {
  const NumberResult r = parse_int64(text, n);
  if (r == NumberResult::Ok && fits(*n)) return true;
  *why = r == NumberResult::NotNumber ? "not a whole number" : "out of range";
  return false;
}

// ---- parsers: environment variables ----

template <auto Member, const auto &Table>
bool env_keyword(const EnvValue &v, Config &into, std::string *, Messages &) {
  const auto k = find_keyword(Table, v.text);
  if (k) into.*Member = *k;
  return k.has_value();
}

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

template <auto Member>
bool env_index_set(const EnvValue &v, Config &into, std::string *why, Messages &) {
  std::optional<IndexSet> set = parse_index_set(v.text, why);
  if (set) into.*Member = std::move(*set);
  return set.has_value();
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

// ---- parsers: config.json keys ----

std::string item_field(const std::string &field, size_t index) { return field + "[" + std::to_string(index) + "]"; }

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

bool file_level(const FileValue &f, Config &, Messages &m) {
  if (f.value.is_string() && f.value.get_ref<const std::string &>() == "L2") return true;
  m.reject(f, "msprobe-shim dumps kernels, which is msprobe's level L2");
  return false;
}

bool file_task(const FileValue &f, Config &into, Messages &m) {
  if (f.value.is_string() && contains(kOtherMsprobeTasks, f.value.get_ref<const std::string &>())) {
    m.reject(f, "msprobe's " + f.value.get<std::string>() + " task is not a kernel dump");
    return false;
  }
  return file_keyword<&Config::task, kTasks>(f, into, m);
}

bool file_dump_path(const FileValue &f, Config &into, Messages &m) {
  if (!f.value.is_string()) {
    m.reject(f, it_is(f.value, "a string"));
    return false;
  }
  std::string why;
  std::optional<std::string> path = checked_path(f.value.get_ref<const std::string &>(), &why);
  if (!path) {
    m.reject(f, why);
    return false;
  }
  into.dump_path = std::move(*path);
  return true;
}

// Item i of a step or rank list: a number or an "a-b" string.
bool file_index_item(const FileValue &f, size_t i, std::vector<std::pair<int64_t, int64_t>> *ranges, Messages &m) {
  const json &item = f.value[i];
  if (item.is_number_integer()) {  // never true for booleans in nlohmann
    const bool is_unsigned = item.is_number_unsigned();
    const int64_t n = is_unsigned ? (item.get<uint64_t>() > static_cast<uint64_t>(IndexSet::kMax)
                                         ? IndexSet::kMax + 1
                                         : static_cast<int64_t>(item.get<uint64_t>()))
                                  : item.get<int64_t>();
    if (n < 0 || n > IndexSet::kMax) {
      m.file_error(item_field(f.field, i), item, "out of range [0, 1000000]", f.accepted);
      return false;
    }
    ranges->emplace_back(n, n);
    return true;
  }
  std::string why;
  if (item.is_string()) {
    if (parse_index_item(item.get_ref<const std::string &>(), ranges, &why)) return true;
  } else {
    why = std::string("it is ") + json_type(item) + (item.is_number() ? " that is not a whole number" : "");
  }
  m.file_error(item_field(f.field, i), item, why, f.accepted);
  return false;
}

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

// Item `index` of a list or scope: one more item of `filter`.
bool file_filter_item(const std::string &field, size_t index, const json &item, KernelFilter &filter, Messages &m) {
  constexpr std::string_view accepted = "strings: op types, kernel names or \"name-regex(...)\" items";
  const std::string field_i = item_field(field, index);
  if (!item.is_string()) {
    m.file_error(field_i, item, it_is(item, "a string"), accepted);
    return false;
  }
  std::string why, note;
  if (!filter.add_item(item.get_ref<const std::string &>(), &why, &note)) {
    m.file_error(field_i, item, why, accepted);
    return false;
  }
  if (!note.empty()) m.warn(m.where(field_i) + ": " + note);
  return true;
}

bool file_list(const FileValue &f, Config &into, Messages &m) {
  if (!f.value.is_array()) {
    m.reject(f, it_is(f.value, "a list"));
    return false;
  }
  KernelFilter filter;
  for (size_t i = 0; i < f.value.size(); ++i) {
    if (!file_filter_item(f.field, i, f.value[i], filter, m)) return false;
  }
  into.list = std::move(filter);
  return true;
}

bool file_scope(const FileValue &f, Config &into, Messages &m) {
  const json &v = f.value;
  if (!v.is_array() || (v.size() != 0 && v.size() != 2)) {
    m.reject(f, v.is_array() ? "it has " + std::to_string(v.size()) + " items" : "");
    return false;
  }
  if (v.empty()) {
    into.scope.reset();
    return true;
  }
  std::pair<KernelFilter, KernelFilter> ends;
  if (!file_filter_item(f.field, 0, v[0], ends.first, m) || !file_filter_item(f.field, 1, v[1], ends.second, m)) {
    return false;
  }
  into.scope = std::move(ends);
  return true;
}

// msprobe: a list of one string at L2; a bare string is accepted too.
bool file_data_mode(const FileValue &f, Config &into, Messages &m) {
  const json &v = f.value;
  const json *one = v.is_string() ? &v : (v.is_array() && v.size() == 1 && v[0].is_string()) ? &v[0] : nullptr;
  if (one == nullptr) {
    m.reject(f, v.is_array() ? "it must hold exactly one of all, input, output" : "");
    return false;
  }
  const std::string &mode = one->get_ref<const std::string &>();
  if (mode == "forward" || mode == "backward") {
    m.reject(f, "\"" + mode + "\" is an API-level (L0/L1) mode");
    return false;
  }
  const std::optional<DataMode> d = find_keyword(kDataModes, mode);
  if (!d) {
    m.reject(f, "");
    return false;
  }
  into.data_mode = *d;
  return true;
}

// The static-graph L2 style: a list of statistics, md5 among them or not.
bool file_summary_list(const FileValue &f, Config &into, Messages &m) {
  static constexpr std::string_view kItems[] = {"max", "min", "mean", "l2norm", "md5"};
  const auto is_item = [](const json &item) {
    return std::any_of(std::begin(kItems), std::end(kItems),
                       [&](std::string_view k) { return iequals(k, item.get_ref<const std::string &>()); });
  };
  bool md5 = false, ok = !f.value.empty();
  for (const json &item : f.value) {
    ok = ok && item.is_string() && is_item(item);
    md5 = md5 || (item.is_string() && iequals(item.get_ref<const std::string &>(), "md5"));
  }
  if (!ok) {
    m.file_error(f.field, f.value, "", "\"statistics\", \"md5\", or a non-empty list of max, min, mean, l2norm, md5");
    return false;
  }
  into.summary_mode = md5 ? SummaryMode::Md5 : SummaryMode::Statistics;
  if (f.value.size() - (md5 ? 1 : 0) < 4) m.warn(m.where(f.field) + ": Max, Min, Mean and Norm are always all written");
  return true;
}

bool file_summary_mode(const FileValue &f, Config &into, Messages &m) {
  if (f.value.is_array()) return file_summary_list(f, into, m);
  return file_keyword<&Config::summary_mode, kSummaryModes>(f, into, m);
}

bool file_overflow_nums(const FileValue &f, Config &into, Messages &m) {
  const json &v = f.value;
  const bool whole = v.is_number_integer();
  int64_t n = 0;
  if (whole)
    n = v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(kMaxOverflowNums) ? kMaxOverflowNums + 1
                                                                                              : v.get<int64_t>();
  if (!whole || !overflow_nums_fit(n)) {
    m.reject(f, whole ? "" : it_is(v, "a whole number"));
    return false;
  }
  into.overflow_nums = n;
  return true;
}

bool file_flight_kernels(const FileValue &f, Config &into, Messages &m) {
  const json &v = f.value;
  if (v.is_string() && v.get_ref<const std::string &>() == "auto") {
    into.flight_kernels = 0;
    return true;
  }
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > (uint64_t)kMaxFlightKernels) ||
      !flight_kernels_fit(v.get<int64_t>())) {
    m.reject(f, v.is_number_integer() ? "" : it_is(v, "a whole number or \"auto\""));
    return false;
  }
  into.flight_kernels = v.get<uint64_t>();
  return true;
}

bool file_flight_on_exit(const FileValue &f, Config &into, Messages &m) {
  if (!f.value.is_boolean()) {
    m.reject(f, it_is(f.value, "a boolean"));
    return false;
  }
  into.flight_on_exit = f.value.get<bool>();
  return true;
}

// msprobe's KBK statistics: where the statistics are computed.
bool file_device_stats(const FileValue &f, Config &into, Messages &m) {
  static constexpr std::string_view kPlaces[] = {"device", "host"};
  if (!f.value.is_string() || !contains(kPlaces, f.value.get_ref<const std::string &>())) {
    m.reject(f, "");
    return false;
  }
  into.device_stats = f.value.get_ref<const std::string &>() == "device";
  return true;
}

bool file_async_dump(const FileValue &f, Config &, Messages &m) {
  if (!f.value.is_boolean()) {
    m.reject(f, it_is(f.value, "a boolean"));
    return false;
  }
  if (f.value.get<bool>()) {
    m.warn(m.where(f.field) + " = true is ignored: the shim copies each kernel's tensors in stream order itself");
  }
  return true;
}

bool file_check_mode(const FileValue &f, Config &, Messages &m) {
  static constexpr std::string_view kModes[] = {"all", "aicore", "atomic"};
  if (!f.value.is_string() || !contains(kModes, f.value.get_ref<const std::string &>())) {
    m.reject(f, "");
    return false;
  }
  if (f.value.get_ref<const std::string &>() != "all") {
    m.warn(m.where(f.field) + " = " + show_json(f.value) + " is ignored: the shim checks the outputs of every kernel");
  }
  return true;
}

// ---- the settings ------------------------------------------------------------------------------------------------

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

// Within a stage the variables are read in table order, which is the order of their messages; the order also breaks
// ties between equally close names in unknown_variables' "did you mean".
constexpr Setting kSettings[] = {
    {.env = "MSPROBE_LOG_LEVEL",
     .field = Field::LogLevel,
     .parse_env = env_keyword<&Config::log_level, kLogLevels>,
     .accepted = "error, warn, info, debug (or msprobe's numbers 0-4: 0 debug ... 3 error, 4 error only)",
     .take = take<&Config::log_level>},
    {.env = "MSPROBE_DUMP_PATH",
     .field = Field::DumpPath,
     .text = Text::AsWritten,
     .parse_env = env_dump_path,
     .accepted = "a directory path (not empty, at most 4095 bytes, no NUL byte)",
     .section = Section::Top,
     .key = "dump_path",
     .parse_file = file_dump_path,
     .take = take<&Config::dump_path>},
    {.env = kConfigVariable,
     .stage = Stage::Last,
     .text = Text::TrimmedOrBlank,
     .parse_env = env_config_path,
     .accepted = kAcceptConfig},
    {.env = "MSPROBE_TASK",
     .field = Field::Task,
     .parse_env = env_keyword<&Config::task, kTasks>,
     .accepted = "statistics, tensor, overflow_check, structure, flight",
     .section = Section::Top,
     .key = "task",
     .parse_file = file_task,
     .take = take<&Config::task>},
    {.env = "MSPROBE_STEP",
     .field = Field::Steps,
     .parse_env = env_index_set<&Config::steps>,
     .accepted = "all, or numbers and ranges in [0, 1000000] such as 0,2,4-6",
     .section = Section::Top,
     .key = "step",
     .parse_file = file_index_set<&Config::steps>,
     .file_accepted = "a list of numbers in [0, 1000000] and \"a-b\" range strings, e.g. [0, 2, \"4-6\"]",
     .take = take<&Config::steps>},
    {.env = "MSPROBE_RANK",
     .field = Field::Ranks,
     .parse_env = env_index_set<&Config::ranks>,
     .accepted = "all, or numbers and ranges in [0, 1000000] such as 0,2,4-6",
     .section = Section::Top,
     .key = "rank",
     .parse_file = file_index_set<&Config::ranks>,
     .file_accepted = "a list of numbers in [0, 1000000] and \"a-b\" range strings, e.g. [0, 2, \"4-6\"]",
     .take = take<&Config::ranks>},
    {.env = "MSPROBE_LIST",
     .field = Field::List,
     .parse_env = env_list,
     .accepted = "all, or comma-separated op types (Matmul), kernel names (Matmul.Default.0, or Matmul.Default for "
                 "every n) and name-regex(...) items",
     .section = Section::Task,
     .key = "list",
     .parse_file = file_list,
     .file_accepted = "a list of strings: op types, kernel names or \"name-regex(...)\" items (an empty list selects "
                      "every kernel)",
     .take = take<&Config::list>},
    {.env = "MSPROBE_SCOPE",
     .field = Field::Scope,
     .parse_env = env_scope,
     .accepted = "two comma-separated items first,last (each an op type, a kernel name or name-regex(...)), or none",
     .section = Section::Task,
     .key = "scope",
     .parse_file = file_scope,
     .file_accepted = "[] or a list of two strings [first, last]",
     .take = take<&Config::scope>},
    {.env = "MSPROBE_DATA_MODE",
     .field = Field::DataMode,
     .parse_env = env_keyword<&Config::data_mode, kDataModes>,
     .accepted = "all, input, output",
     .section = Section::Task,
     .key = "data_mode",
     .parse_file = file_data_mode,
     .file_accepted = "[\"all\"], [\"input\"] or [\"output\"]",
     .take = take<&Config::data_mode>},
    {.env = "MSPROBE_SUMMARY_MODE",
     .field = Field::SummaryMode,
     .parse_env = env_keyword<&Config::summary_mode, kSummaryModes>,
     .accepted = "statistics, md5",
     .section = Section::Task,
     .key = "summary_mode",
     .parse_file = file_summary_mode,
     .take = take<&Config::summary_mode>},
    {.env = "MSPROBE_FILE_FORMAT",
     .field = Field::FileFormat,
     .parse_env = env_keyword<&Config::file_format, kFileFormats>,
     .accepted = "npy, bin",
     .section = Section::Task,
     .key = "file_format",
     .parse_file = file_keyword<&Config::file_format, kFileFormats>,
     .take = take<&Config::file_format>},
    {.env = "MSPROBE_PRECISION",
     .field = Field::Precision,
     .parse_env = env_keyword<&Config::precision, kPrecisions>,
     .accepted = "low, high",
     .section = Section::Top,
     .key = "precision",
     .parse_file = file_keyword<&Config::precision, kPrecisions>,
     .take = take<&Config::precision>},
    {.env = "MSPROBE_DEVICE_STATS",
     .field = Field::DeviceStats,
     .parse_env = env_keyword<&Config::device_stats, kBools>,
     .accepted = "on, off (also 1/0, true/false, yes/no)",
     .section = Section::Statistics,
     .key = "device",
     .parse_file = file_device_stats,
     .file_accepted = "\"device\", \"host\"",
     .take = take<&Config::device_stats>},
    {.env = "MSPROBE_OVERFLOW_NUMS",
     .field = Field::OverflowNums,
     .parse_env = env_overflow_nums,
     .accepted = "-1 (never stop) or a whole number in [1, 2147483647]",
     .section = Section::Task,
     .key = "overflow_nums",
     .parse_file = file_overflow_nums,
     .take = take<&Config::overflow_nums>},
    {.env = "MSPROBE_FLIGHT_KERNELS",
     .field = Field::FlightKernels,
     .parse_env = env_flight_kernels,
     .accepted = "auto (as many as MSPROBE_BUFFER_MB holds) or a whole number in [1, 1000000]",
     .section = Section::Task,
     .key = "kernels",
     .parse_file = file_flight_kernels,
     .file_accepted = "\"auto\" or a whole number in [1, 1000000]",
     .take = take<&Config::flight_kernels>},
    {.env = "MSPROBE_FLIGHT_ON_EXIT",
     .field = Field::FlightOnExit,
     .parse_env = env_keyword<&Config::flight_on_exit, kBools>,
     .accepted = "1 or 0 (also true/false, on/off, yes/no)",
     .section = Section::Task,
     .key = "on_exit",
     .parse_file = file_flight_on_exit,
     .file_accepted = "true, false",
     .take = take<&Config::flight_on_exit>},
    {.env = "MSPROBE_STACK",
     .field = Field::Stack,
     .parse_env = env_keyword<&Config::stack, kStackModes>,
     .accepted = "off, native, python, mixed",
     .take = take<&Config::stack>},
    {.env = "MSPROBE_COMPRESS",
     .field = Field::Compress,
     .parse_env = env_keyword<&Config::compress, kCompress>,
     .accepted = "off, lz4",
     .take = take<&Config::compress>},
    {.env = "MSPROBE_BUFFER_MB",
     .field = Field::BufferMb,
     .parse_env = env_buffer_mb,
     .accepted = "a whole number of MiB in [1, 1048576]",
     .take = take<&Config::buffer_bytes>},
    {.env = "MSPROBE_STEP_MARKER",
     .field = Field::StepMarker,
     .parse_env = env_step_marker,
     .accepted = "a regular expression over kernel op types (RE2 syntax), or off",
     .no_value = default_step_marker,
     .take = take<&Config::step_marker>},
    {.env = "MSPROBE_ENABLE",
     .stage = Stage::First,
     .parse_env = env_keyword<&Config::enabled, kBools>,
     .accepted = "1 or 0 (also true/false, on/off, yes/no)"},
    // config.json keys only
    {.section = Section::Top, .key = "level", .parse_file = file_level, .file_accepted = "\"L2\""},
    {.section = Section::Top, .key = "async_dump", .parse_file = file_async_dump, .file_accepted = "true, false"},
    {.section = Section::Task,
     .key = "check_mode",
     .parse_file = file_check_mode,
     .file_accepted = "\"all\", \"aicore\", \"atomic\""},
};

const Setting *setting(Field f) {
  for (const Setting &s : kSettings) {
    if (s.field == f) return &s;
  }
  return nullptr;
}

// The row of config.json key `key` at the top level (Section::Top) or in the section of `task` (Section::Task).
const Setting *file_setting(std::string_view key, Section where, Task task) {
  for (const Setting &s : kSettings) {
    if (s.key == nullptr || key != s.key) continue;
    if (s.section == where) return &s;
    if (where == Section::Task && s.section == Section::Statistics && task == Task::Statistics) return &s;
  }
  return nullptr;
}

// "step", "tensor.list", "statistics.device": the name config.json messages give row `s`'s key, for `task` in effect.
std::string file_field(const Setting &s, Task task) {
  switch (s.section) {
    case Section::Task: return std::string(to_string(task)) + "." + s.key;
    case Section::Statistics: return std::string(to_string(Task::Statistics)) + "." + s.key;
    default: return s.key;
  }
}

// Top-level config.json keys the shim ignores: msprobe's that mean nothing at kernel level, the sections of
// msprobe's other tasks, and the task sections themselves (read_file_task_section reads the one in effect).
bool ignored_top_key(std::string_view key) {
  static constexpr std::string_view kIgnored[] = {"enable_dataloader", "seed", "is_deterministic", "acl_config",
                                                  "framework"};
  return contains(kIgnored, key) || contains(kOtherMsprobeTasks, key) ||
         std::any_of(std::begin(kTasks), std::end(kTasks), [&](const Keyword<Task> &t) { return t.name == key; });
}

// ---- the loader --------------------------------------------------------------------------------------------------

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
  void warn_if_inert(Field f, std::initializer_list<Task> needed, const char *why);

  const std::function<const char *(const char *)> &getenv_;
  ConfigLoad &out_;
  Messages m_;
  // What each source gave, for the fields whose flag is set; pick() applies the precedence.
  Config from_env_, from_file_;
  std::array<bool, slot(Field::kCount)> in_env_{}, in_file_{};
};

void Loader::read_variables(Stage stage) {
  for (const Setting &s : kSettings) {
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

void Loader::warn_if_inert(Field f, std::initializer_list<Task> needed, const char *why) {
  const Task task = out_.config.task;
  if (in_env_[slot(f)] && std::find(needed.begin(), needed.end(), task) == needed.end()) {
    m_.warn(std::string(setting(f)->env) + " has no effect: " + why + " (task is " + to_string(task) + ")");
  }
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
    root = ConfigFile(c.config_path, m_).read();
  }
  if (root) read_file_top(*root);
  pick(*setting(Field::Task));
  if (root) read_file_task_section(*root, c.task);  // msprobe reads the section of the task in effect
  for (const Setting &s : kSettings) {
    if (s.field != Field::Task) pick(s);
  }
  warn_if_inert(Field::FileFormat, {Task::Tensor, Task::Flight}, "only the tensor and flight tasks write tensor files");
  warn_if_inert(Field::OverflowNums, {Task::OverflowCheck, Task::Flight},
                "it applies to the overflow_check and flight tasks");
  warn_if_inert(Field::FlightKernels, {Task::Flight}, "it applies to the flight task");
  warn_if_inert(Field::FlightOnExit, {Task::Flight}, "it applies to the flight task");
}

// Levenshtein distance, for "did you mean".
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

// ---- IndexSet ----------------------------------------------------------------------------------------------------

bool IndexSet::contains(int64_t i) const noexcept {
  if (all_) return true;
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), i,
                             [](int64_t v, const std::pair<int64_t, int64_t> &r) { return v < r.first; });
  if (it == ranges_.begin()) return false;
  --it;
  return i <= it->second;
}

void IndexSet::add(int64_t lo, int64_t hi) {
  if (lo > hi) std::swap(lo, hi);
  if (all_) {
    all_ = false;
    ranges_.clear();
  }
  // Insert, then merge the neighbours that now overlap or touch.
  // a touches b when a.second + 1 >= b.first, written so that it cannot overflow at the int64 limits.
  const auto touches = [](int64_t a_second, int64_t b_first) { return a_second >= b_first || a_second == b_first - 1; };
  auto it = std::lower_bound(ranges_.begin(), ranges_.end(), std::make_pair(lo, hi));
  it = ranges_.insert(it, {lo, hi});
  if (it != ranges_.begin() && touches(std::prev(it)->second, lo)) {
    --it;
    it->second = std::max(it->second, hi);
    ranges_.erase(std::next(it));
  }
  while (std::next(it) != ranges_.end() && touches(it->second, std::next(it)->first)) {
    it->second = std::max(it->second, std::next(it)->second);
    ranges_.erase(std::next(it));
  }
}

std::string IndexSet::to_string() const {
  if (all_) return "all";
  std::string out;
  for (const auto &[lo, hi] : ranges_) {
    if (!out.empty()) out += ',';
    out += std::to_string(lo);
    if (hi != lo) out += '-' + std::to_string(hi);
  }
  return out.empty() ? "none" : out;
}

std::optional<IndexSet> parse_index_set(std::string_view text, std::string *why) {
  std::string scratch;
  std::string &err = why ? *why : scratch;
  const std::string_view t = trim(text);
  if (iequals(t, "all")) return IndexSet{};
  if (t.empty()) {
    err = "it is empty";
    return std::nullopt;
  }
  std::vector<std::pair<int64_t, int64_t>> ranges;
  size_t start = 0, index = 0;
  while (true) {
    const size_t comma = t.find(',', start);
    const std::string_view item = trim(t.substr(start, comma == std::string_view::npos ? t.npos : comma - start));
    ++index;
    if (item.empty()) {
      err = "item " + std::to_string(index) + " is empty";
      return std::nullopt;
    }
    if (!parse_index_item(item, &ranges, &err)) return std::nullopt;
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return make_index_set(std::move(ranges));
}

// ---- Config ------------------------------------------------------------------------------------------------------

std::string Config::source_of(Field f) const {
  const Setting *s = setting(f);
  switch (source(f)) {
    case Source::Env: return s && s->env ? s->env : "?";
    case Source::File: return "config.json field " + (s && s->key ? file_field(*s, task) : std::string("?"));
    default: return "default";
  }
}

std::string quote_value(std::string_view value, size_t max_bytes) {
  size_t consumed = 0;
  std::string out = "\"" + escape_text(value, max_bytes, /*quotes=*/true, &consumed);
  if (consumed < value.size())
    out += "...\" (" + std::to_string(value.size()) + " bytes)";
  else
    out += "\"";
  return out;
}

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
  return load_config([](const char *name) -> const char * { return ::getenv(name); });
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
  if (!c.config_path.empty()) out += " config=" + quote_value(c.config_path, 200);
  return out;
}

std::vector<std::string> unknown_variables(const char *const *envp) {
  std::vector<std::string> out;
  if (envp == nullptr) return out;
  for (; *envp != nullptr; ++envp) {
    const std::string_view entry(*envp);
    if (entry.rfind("MSPROBE_", 0) != 0) continue;
    const std::string_view name = entry.substr(0, entry.find('='));
    if (std::any_of(std::begin(kSettings), std::end(kSettings),
                    [&](const Setting &s) { return s.env != nullptr && name == s.env; })) {
      continue;
    }
    const char *best = nullptr;
    size_t best_distance = 4;  // suggest only close names
    for (const Setting &s : kSettings) {
      if (s.env == nullptr) continue;
      const size_t d = edit_distance(name.substr(0, 64), s.env);
      if (d < best_distance) best = s.env, best_distance = d;
    }
    std::string w = quote_value(name, 64) + " is not a variable of msprobe-shim; ignored";
    if (best) w += std::string("; did you mean ") + best + "?";
    out.push_back(std::move(w));
  }
  return out;
}

std::vector<SettingVariable> setting_variables() {
  std::vector<SettingVariable> out;
  for (const Setting &s : kSettings) {
    if (s.env != nullptr) out.push_back({s.env, s.accepted});
  }
  return out;
}

bool check_setting(std::string_view name, std::string_view value, std::string *why) {
  for (const Setting &s : kSettings) {
    if (s.env == nullptr || name != s.env) continue;
    const std::string_view text = s.text == Text::AsWritten ? value : trim(value);
    if (text.empty() && s.text == Text::Trimmed) {
      *why = "it is empty";
      return false;
    }
    ConfigLoad scratch;
    Messages m(scratch);
    why->clear();
    return s.parse_env(EnvValue{s.env, text}, scratch.config, why, m);
  }
  *why = "not a variable of msprobe-shim";
  return false;
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
