#include "shim/config.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

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

// ---- text helpers ------------------------------------------------------------------------------------------------

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// ASCII only: std::tolower follows the host's locale (in a Turkish locale 'I' does not lower to 'i').
char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (ascii_lower(a[i]) != ascii_lower(b[i])) return false;
  }
  return true;
}

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

constexpr Keyword<Task> kTasks[] = {{"statistics", Task::Statistics},
                                    {"tensor", Task::Tensor},
                                    {"overflow_check", Task::OverflowCheck},
                                    {"structure", Task::Structure}};
constexpr Keyword<DataMode> kDataModes[] = {
    {"all", DataMode::All}, {"input", DataMode::Input}, {"output", DataMode::Output}};
constexpr Keyword<SummaryMode> kSummaryModes[] = {{"statistics", SummaryMode::Statistics}, {"md5", SummaryMode::Md5}};
constexpr Keyword<FileFormat> kFileFormats[] = {{"npy", FileFormat::Npy}, {"bin", FileFormat::Bin}};
constexpr Keyword<StackMode> kStackModes[] = {
    {"off", StackMode::Off}, {"native", StackMode::Native}, {"python", StackMode::Python}, {"mixed", StackMode::Mixed}};
constexpr Keyword<Compress> kCompress[] = {{"off", Compress::Off}, {"lz4", Compress::Lz4}};
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

// What each setting accepts, as the messages say it. Literals, so that loading the library runs no constructor.
constexpr std::string_view kAcceptTask = "statistics, tensor, overflow_check, structure";
constexpr std::string_view kAcceptDataMode = "all, input, output";
constexpr std::string_view kAcceptSummary = "statistics, md5";
constexpr std::string_view kAcceptFormat = "npy, bin";
constexpr std::string_view kAcceptStack = "off, native, python, mixed";
constexpr std::string_view kAcceptCompress = "off, lz4";
constexpr std::string_view kAcceptPrecision = "low, high";
constexpr std::string_view kAcceptDeviceStats = "on, off (also 1/0, true/false, yes/no)";
constexpr std::string_view kAcceptStatsDevice = "\"device\", \"host\"";
constexpr std::string_view kAcceptLogLevel =
    "error, warn, info, debug (or msprobe's numbers 0-4: 0 debug ... 3 error, 4 error only)";
constexpr std::string_view kAcceptEnable = "1 or 0 (also true/false, on/off, yes/no)";
constexpr std::string_view kAcceptIndex = "all, or numbers and ranges in [0, 1000000] such as 0,2,4-6";
constexpr std::string_view kAcceptList =
    "all, or comma-separated op types (Matmul), kernel names (Matmul.Default.0, or Matmul.Default for every n) and "
    "name-regex(...) items";
constexpr std::string_view kAcceptScope =
    "two comma-separated items first,last (each an op type, a kernel name or name-regex(...)), or none";
constexpr std::string_view kAcceptMarker = "a regular expression over kernel op types (RE2 syntax), or off";
constexpr std::string_view kAcceptBuffer = "a whole number of MiB in [1, 1048576]";
constexpr std::string_view kAcceptOverflow = "-1 (never stop) or a whole number in [1, 2147483647]";
constexpr std::string_view kAcceptPath = "a directory path (not empty, at most 4095 bytes, no NUL byte)";
constexpr std::string_view kAcceptConfig = "the path of a readable msprobe config.json (a JSON object, at most 16 MiB)";

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

// ---- MSPROBE_CONFIG's file --------------------------------------------------------------------------------------

// Reads and parses the file MSPROBE_CONFIG names. Each failure is one error, `MSPROBE_CONFIG="path" <what>;
// accepted: ...`, and read() then returns nullopt.
class ConfigFile {
 public:
  ConfigFile(const std::string &path, std::vector<std::string> &errors) : path_(path), errors_(errors) {}

  std::optional<json> read();

 private:
  void fail(const std::string &what) {
    errors_.push_back("MSPROBE_CONFIG=" + quote_value(path_) + " " + what +
                      "; accepted: " + std::string(kAcceptConfig));
  }
  std::optional<size_t> regular_file_size(int fd);
  std::optional<std::string> read_text(int fd, size_t size);
  std::optional<json> parse(const std::string &text);

  const std::string &path_;
  std::vector<std::string> &errors_;
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
  text.resize(size + 1);
  size_t got = 0;
  while (true) {
    if (got == text.size()) {
      if (text.size() > kMaxConfigBytes) {
        fail("is more than the 16 MiB a config.json may have");
        return std::nullopt;
      }
      text.resize(std::min(text.size() * 2 + 4096, kMaxConfigBytes + 1));
    }
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      fail(std::string("cannot be read: ") + std::strerror(errno));
      return std::nullopt;
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  text.resize(got);
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

// ---- the loader --------------------------------------------------------------------------------------------------

template <class T>
struct Setting {
  std::optional<T> env, file;
};

class Loader {
 public:
  Loader(const std::function<const char *(const char *)> &getenv, ConfigLoad &out) : getenv_(getenv), out_(out) {}

  void run();

 private:
  // The raw value of a variable, nullopt if unset.
  std::optional<std::string_view> raw(const char *name) {
    const char *v = getenv_ ? getenv_(name) : nullptr;
    if (v == nullptr) return std::nullopt;
    return std::string_view(v);
  }
  // The trimmed value of a set variable, or nullopt (with an error) if it is set but blank.
  std::optional<std::string_view> value(const char *name, std::string_view accepted) {
    const std::optional<std::string_view> v = raw(name);
    if (!v) return std::nullopt;
    const std::string_view t = trim(*v);
    if (t.empty()) {
      error(std::string(name) + "=" + quote_value(*v) + " is empty; accepted: " + std::string(accepted));
      return std::nullopt;
    }
    return t;
  }
  void env_error(const char *name, std::string_view raw_value, const std::string &why, std::string_view accepted) {
    std::string e = std::string(name) + "=" + quote_value(raw_value) + " is not valid";
    if (!why.empty()) e += ": " + why;
    error(e + "; accepted: " + std::string(accepted));
  }
  template <class E, size_t N>
  std::optional<E> env_keyword(const char *name, const Keyword<E> (&table)[N], std::string_view accepted) {
    const std::optional<std::string_view> v = value(name, accepted);
    if (!v) return std::nullopt;
    const std::optional<E> k = find_keyword(table, *v);
    if (!k) env_error(name, *raw(name), "", accepted);
    return k;
  }

  // config.json messages: MSPROBE_CONFIG="path": field "x" = value is not valid...
  std::string where(const std::string &field) const {
    return "MSPROBE_CONFIG=" + quote_value(out_.config.config_path) + ": field " + quote_value(field, 64);
  }
  void file_error(const std::string &field, const json &v, const std::string &why, std::string_view accepted) {
    std::string e = where(field) + " = " + show_json(v) + " is not valid";
    if (!why.empty()) e += ": " + why;
    error(e + "; accepted: " + std::string(accepted));
  }
  template <class E, size_t N>
  std::optional<E> file_keyword(const std::string &field, const json &v, const Keyword<E> (&table)[N],
                                std::string_view accepted) {
    if (v.is_string()) {
      if (const std::optional<E> k = find_keyword(table, v.get_ref<const std::string &>())) return k;
    }
    file_error(field, v, v.is_string() ? "" : std::string("it is ") + json_type(v) + ", not a string", accepted);
    return std::nullopt;
  }

  void error(std::string e) { out_.errors.push_back(std::move(e)); }
  void warn(std::string w) { out_.warnings.push_back(std::move(w)); }

  std::optional<json> read_file(const std::string &path);
  void read_file_top(const json &root);
  void read_file_task_section(const json &root, Task task);
  std::optional<IndexSet> file_index_set(const std::string &field, const json &v);
  std::optional<KernelFilter> file_filter(const std::string &field, const json &v);
  bool file_filter_item(const std::string &field, size_t index, const json &item, KernelFilter &filter);
  std::optional<std::string> checked_path(std::string_view path, std::string *why);

  const std::function<const char *(const char *)> &getenv_;
  ConfigLoad &out_;

  Setting<std::string> dump_path_;
  Setting<Task> task_;
  Setting<IndexSet> steps_, ranks_;
  Setting<KernelFilter> list_;
  Setting<std::optional<std::pair<KernelFilter, KernelFilter>>> scope_;
  Setting<DataMode> data_mode_;
  Setting<SummaryMode> summary_mode_;
  Setting<FileFormat> file_format_;
  Setting<int64_t> overflow_nums_;
  Setting<Precision> precision_;
  Setting<bool> device_stats_;
};

std::optional<std::string> Loader::checked_path(std::string_view path, std::string *why) {
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

std::optional<json> Loader::read_file(const std::string &path) { return ConfigFile(path, out_.errors).read(); }

std::optional<IndexSet> Loader::file_index_set(const std::string &field, const json &v) {
  constexpr std::string_view accepted =
      "a list of numbers in [0, 1000000] and \"a-b\" range strings, e.g. [0, 2, \"4-6\"]";
  if (!v.is_array()) {
    file_error(field, v, std::string("it is ") + json_type(v) + ", not a list", accepted);
    return std::nullopt;
  }
  if (v.empty()) return IndexSet{};  // msprobe: an empty list means all
  if (v.size() > static_cast<size_t>(IndexSet::kMax)) {
    file_error(field, v, "more than 1000000 items", accepted);
    return std::nullopt;
  }
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (size_t i = 0; i < v.size(); ++i) {
    const json &item = v[i];
    const std::string item_field = field + "[" + std::to_string(i) + "]";
    if (item.is_number_integer()) {  // never true for booleans in nlohmann
      const bool is_unsigned = item.is_number_unsigned();
      const int64_t n = is_unsigned ? (item.get<uint64_t>() > static_cast<uint64_t>(IndexSet::kMax)
                                           ? IndexSet::kMax + 1
                                           : static_cast<int64_t>(item.get<uint64_t>()))
                                    : item.get<int64_t>();
      if (n < 0 || n > IndexSet::kMax) {
        file_error(item_field, item, "out of range [0, 1000000]", accepted);
        return std::nullopt;
      }
      ranges.emplace_back(n, n);
    } else if (item.is_string()) {
      std::string why;
      if (!parse_index_item(item.get_ref<const std::string &>(), &ranges, &why)) {
        file_error(item_field, item, why, accepted);
        return std::nullopt;
      }
    } else {
      file_error(item_field, item,
                 std::string("it is ") + json_type(item) + (item.is_number() ? " that is not a whole number" : ""),
                 accepted);
      return std::nullopt;
    }
  }
  return make_index_set(std::move(ranges));
}

std::optional<KernelFilter> Loader::file_filter(const std::string &field, const json &v) {
  constexpr std::string_view accepted =
      "a list of strings: op types, kernel names or \"name-regex(...)\" items (an empty list selects every kernel)";
  if (!v.is_array()) {
    file_error(field, v, std::string("it is ") + json_type(v) + ", not a list", accepted);
    return std::nullopt;
  }
  KernelFilter filter;
  for (size_t i = 0; i < v.size(); ++i) {
    if (!file_filter_item(field, i, v[i], filter)) return std::nullopt;
  }
  return filter;
}

bool Loader::file_filter_item(const std::string &field, size_t index, const json &item, KernelFilter &filter) {
  constexpr std::string_view accepted = "strings: op types, kernel names or \"name-regex(...)\" items";
  const std::string item_field = field + "[" + std::to_string(index) + "]";
  if (!item.is_string()) {
    file_error(item_field, item, std::string("it is ") + json_type(item) + ", not a string", accepted);
    return false;
  }
  std::string why, note;
  if (!filter.add_item(item.get_ref<const std::string &>(), &why, &note)) {
    file_error(item_field, item, why, accepted);
    return false;
  }
  if (!note.empty()) warn(where(item_field) + ": " + note);
  return true;
}

// Top-level fields other than the task section.
void Loader::read_file_top(const json &root) {
  // msprobe's config.json fields that mean nothing at kernel level, and the other tasks' sections.
  static const char *const kIgnored[] = {"enable_dataloader", "seed",       "is_deterministic", "acl_config",
                                         "framework",         "run_ut",     "grad_probe",       "free_benchmark",
                                         "exception_dump",    "statistics", "tensor",           "overflow_check",
                                         "structure"};
  for (const auto &[key, v] : root.items()) {
    if (v.is_null()) continue;  // null = absent
    if (key == "level") {
      if (!(v.is_string() && v.get_ref<const std::string &>() == "L2")) {
        file_error("level", v, "msprobe-shim dumps kernels, which is msprobe's level L2", "\"L2\"");
      }
    } else if (key == "task") {
      if (v.is_string()) {
        const std::string &t = v.get_ref<const std::string &>();
        if (t == "free_benchmark" || t == "run_ut" || t == "grad_probe" || t == "exception_dump") {
          file_error("task", v, "msprobe's " + t + " task is not a kernel dump", kAcceptTask);
          continue;
        }
      }
      task_.file = file_keyword("task", v, kTasks, kAcceptTask);
    } else if (key == "dump_path") {
      std::string why;
      if (!v.is_string()) {
        file_error("dump_path", v, std::string("it is ") + json_type(v) + ", not a string", kAcceptPath);
        continue;
      }
      dump_path_.file = checked_path(v.get_ref<const std::string &>(), &why);
      if (!dump_path_.file) file_error("dump_path", v, why, kAcceptPath);
    } else if (key == "step") {
      steps_.file = file_index_set("step", v);
    } else if (key == "rank") {
      ranks_.file = file_index_set("rank", v);
    } else if (key == "precision") {
      precision_.file = file_keyword("precision", v, kPrecisions, kAcceptPrecision);
    } else if (key == "async_dump") {
      if (!v.is_boolean())
        file_error("async_dump", v, std::string("it is ") + json_type(v) + ", not a boolean", "true, false");
      else if (v.get<bool>())
        warn(where("async_dump") + " = true is ignored: the shim copies each kernel's tensors in stream order itself");
    } else if (std::find(std::begin(kIgnored), std::end(kIgnored), key) == std::end(kIgnored)) {
      warn(where(key) + " is not an msprobe config.json field; ignored");
    }
  }
  if (const auto it = root.find("level"); it == root.end() || it->is_null()) {
    // msprobe's default level is L1 (framework APIs): a file without "level" was not written for kernel dumps, and
    // using its list/scope (API names) on kernels would silently select nothing.
    error(where("level") + " is missing (msprobe's default is L1, API level); accepted: \"L2\"");
  }
  const auto dump_path = root.find("dump_path");
  if ((dump_path == root.end() || dump_path->is_null()) && !raw("MSPROBE_DUMP_PATH")) {
    error(where("dump_path") +
          " is missing (msprobe requires it) and MSPROBE_DUMP_PATH is not set; accepted: " + std::string(kAcceptPath));
  }
}

void Loader::read_file_task_section(const json &root, Task task) {
  const std::string section = to_string(task);
  const auto it = root.find(section);
  if (it == root.end() || it->is_null()) return;
  const json &s = *it;
  if (!s.is_object()) {
    file_error(section, s, std::string("it is ") + json_type(s) + ", not an object",
               "an object such as {\"list\": []}");
    return;
  }
  static const char *const kIgnored[] = {
      "tensor_list", "backward_input", "online_run_ut", "nfs_path",  "host",
      "port",        "tls_path",       "device",        "precision", "online_run_ut_recompute"};
  for (const auto &[key, v] : s.items()) {
    const std::string field = section + "." + key;
    if (v.is_null()) continue;
    if (key == "list") {
      list_.file = file_filter(field, v);
    } else if (key == "scope") {
      constexpr std::string_view accepted = "[] or a list of two strings [first, last]";
      if (!v.is_array() || (v.size() != 0 && v.size() != 2)) {
        file_error(field, v, v.is_array() ? "it has " + std::to_string(v.size()) + " items" : "", accepted);
        continue;
      }
      if (v.empty()) {
        scope_.file = std::optional<std::pair<KernelFilter, KernelFilter>>{};
        continue;
      }
      std::pair<KernelFilter, KernelFilter> ends;
      if (file_filter_item(field, 0, v[0], ends.first) && file_filter_item(field, 1, v[1], ends.second)) {
        scope_.file = std::move(ends);
      }
    } else if (key == "data_mode") {
      // msprobe: a list of one string at L2; a bare string is accepted too.
      constexpr std::string_view accepted = "[\"all\"], [\"input\"] or [\"output\"]";
      const json *one = v.is_string() ? &v : (v.is_array() && v.size() == 1 && v[0].is_string()) ? &v[0] : nullptr;
      if (one == nullptr) {
        file_error(field, v, v.is_array() ? "it must hold exactly one of all, input, output" : "", accepted);
        continue;
      }
      const std::string &m = one->get_ref<const std::string &>();
      if (m == "forward" || m == "backward") {
        file_error(field, v, "\"" + m + "\" is an API-level (L0/L1) mode", accepted);
        continue;
      }
      if (const std::optional<DataMode> d = find_keyword(kDataModes, m))
        data_mode_.file = d;
      else
        file_error(field, v, "", accepted);
    } else if (key == "summary_mode") {
      if (v.is_array()) {  // static-graph L2 style: a list of statistics, md5 among them or not
        static const char *const kItems[] = {"max", "min", "mean", "l2norm", "md5"};
        bool md5 = false, ok = !v.empty();
        for (const json &item : v) {
          ok = ok && item.is_string() && std::find_if(std::begin(kItems), std::end(kItems), [&](const char *k) {
                                           return iequals(k, item.get_ref<const std::string &>());
                                         }) != std::end(kItems);
          md5 = md5 || (item.is_string() && iequals(item.get_ref<const std::string &>(), "md5"));
        }
        if (!ok) {
          file_error(field, v, "", "\"statistics\", \"md5\", or a non-empty list of max, min, mean, l2norm, md5");
          continue;
        }
        summary_mode_.file = md5 ? SummaryMode::Md5 : SummaryMode::Statistics;
        if (v.size() - (md5 ? 1 : 0) < 4) {
          warn(where(field) + ": Max, Min, Mean and Norm are always all written");
        }
      } else {
        summary_mode_.file = file_keyword(field, v, kSummaryModes, kAcceptSummary);
      }
    } else if (key == "file_format") {
      file_format_.file = file_keyword(field, v, kFileFormats, kAcceptFormat);
    } else if (key == "overflow_nums") {
      int64_t n = 0;
      const bool whole = v.is_number_integer();
      if (whole)
        n = v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(kMaxOverflowNums) ? kMaxOverflowNums + 1
                                                                                                  : v.get<int64_t>();
      if (!whole || n == 0 || n < -1 || n > kMaxOverflowNums) {
        file_error(field, v, whole ? "" : std::string("it is ") + json_type(v) + ", not a whole number",
                   kAcceptOverflow);
        continue;
      }
      overflow_nums_.file = n;
    } else if (key == "device" && task == Task::Statistics) {
      // msprobe's KBK statistics: where the statistics are computed.
      if (v.is_string() && (v.get_ref<const std::string &>() == "device" || v.get_ref<const std::string &>() == "host"))
        device_stats_.file = v.get_ref<const std::string &>() == "device";
      else
        file_error(field, v, "", kAcceptStatsDevice);
    } else if (key == "check_mode") {
      if (!v.is_string() ||
          !(v.get_ref<const std::string &>() == "all" || v.get_ref<const std::string &>() == "aicore" ||
            v.get_ref<const std::string &>() == "atomic")) {
        file_error(field, v, "", "\"all\", \"aicore\", \"atomic\"");
      } else if (v.get_ref<const std::string &>() != "all") {
        warn(where(field) + " = " + show_json(v) + " is ignored: the shim checks the outputs of every kernel");
      }
    } else if (std::find(std::begin(kIgnored), std::end(kIgnored), key) == std::end(kIgnored)) {
      warn(where(field) + " is not an msprobe field of the " + section + " task; ignored");
    }
  }
}

template <class T>
T pick(const Setting<T> &s, const T &fallback, Config &c, Field f) {
  Source &src = c.sources[static_cast<size_t>(f)];
  if (s.env) {
    src = Source::Env;
    return *s.env;
  }
  if (s.file) {
    src = Source::File;
    return *s.file;
  }
  src = Source::Default;
  return fallback;
}

void Loader::run() {
  Config &c = out_.config;

  // MSPROBE_ENABLE=0 wins over everything, silently: the shim was asked to stay out of the way.
  if (raw("MSPROBE_ENABLE")) {
    if (const std::optional<std::string_view> v = value("MSPROBE_ENABLE", kAcceptEnable)) {
      const std::optional<bool> on = find_keyword(kBools, *v);
      if (on && !*on) {
        c.enabled = false;
        return;
      }
      if (!on) env_error("MSPROBE_ENABLE", *raw("MSPROBE_ENABLE"), "", kAcceptEnable);
    }
  }

  if (const std::optional<LogLevel> l = env_keyword("MSPROBE_LOG_LEVEL", kLogLevels, kAcceptLogLevel)) {
    c.log_level = *l;
    c.sources[static_cast<size_t>(Field::LogLevel)] = Source::Env;
  }

  // ---- environment values of the fields a config.json can also set ----
  if (const std::optional<std::string_view> v = raw("MSPROBE_DUMP_PATH")) {
    std::string why;
    dump_path_.env = checked_path(*v, &why);
    if (!dump_path_.env)
      env_error("MSPROBE_DUMP_PATH", *v, why, kAcceptPath);
    else if (trim(*v).size() != v->size())
      warn("MSPROBE_DUMP_PATH=" + quote_value(*v) + " begins or ends with white space; it is used as written");
  }
  task_.env = env_keyword("MSPROBE_TASK", kTasks, kAcceptTask);
  for (auto [name, setting] : {std::pair{"MSPROBE_STEP", &steps_}, std::pair{"MSPROBE_RANK", &ranks_}}) {
    if (const std::optional<std::string_view> v = value(name, kAcceptIndex)) {
      std::string why;
      if (iequals(*v, "all")) {
        setting->env = IndexSet{};
      } else if (!(setting->env = parse_index_set(*v, &why))) {
        env_error(name, *raw(name), why, kAcceptIndex);
      }
    }
  }
  if (const std::optional<std::string_view> v = value("MSPROBE_LIST", kAcceptList)) {
    std::vector<std::string> items;
    std::string why;
    KernelFilter filter;
    bool ok = iequals(*v, "all") || split_filter_items(*v, &items, &why);
    for (size_t i = 0; ok && i < items.size(); ++i) {
      std::string note;
      if (!filter.add_item(items[i], &why, &note)) {
        why = "item " + std::to_string(i + 1) + " " + quote_value(items[i], 60) + ": " + why;
        ok = false;
      } else if (!note.empty()) {
        warn("MSPROBE_LIST: " + note);
      }
    }
    if (ok)
      list_.env = std::move(filter);
    else
      env_error("MSPROBE_LIST", *raw("MSPROBE_LIST"), why, kAcceptList);
  }
  if (const std::optional<std::string_view> v = value("MSPROBE_SCOPE", kAcceptScope)) {
    std::vector<std::string> items;
    std::string why;
    if (iequals(*v, "none") || iequals(*v, "off")) {
      scope_.env = std::optional<std::pair<KernelFilter, KernelFilter>>{};
    } else if (!split_filter_items(*v, &items, &why)) {
      env_error("MSPROBE_SCOPE", *raw("MSPROBE_SCOPE"), why, kAcceptScope);
    } else if (items.size() != 2) {
      env_error("MSPROBE_SCOPE", *raw("MSPROBE_SCOPE"),
                "it has " + std::to_string(items.size()) + " item" + (items.size() == 1 ? "" : "s") + ", not 2",
                kAcceptScope);
    } else {
      std::pair<KernelFilter, KernelFilter> ends;
      bool ok = true;
      for (int k = 0; ok && k < 2; ++k) {
        std::string note;
        KernelFilter &end = k == 0 ? ends.first : ends.second;
        const char *which = k == 0 ? "first" : "last";
        if (!end.add_item(items[static_cast<size_t>(k)], &why, &note)) {
          env_error("MSPROBE_SCOPE", *raw("MSPROBE_SCOPE"), std::string(which) + " item: " + why, kAcceptScope);
          ok = false;
        } else if (!note.empty()) {
          warn(std::string("MSPROBE_SCOPE ") + which + " item: " + note);
        }
      }
      if (ok) scope_.env = std::move(ends);
    }
  }
  data_mode_.env = env_keyword("MSPROBE_DATA_MODE", kDataModes, kAcceptDataMode);
  summary_mode_.env = env_keyword("MSPROBE_SUMMARY_MODE", kSummaryModes, kAcceptSummary);
  file_format_.env = env_keyword("MSPROBE_FILE_FORMAT", kFileFormats, kAcceptFormat);
  precision_.env = env_keyword("MSPROBE_PRECISION", kPrecisions, kAcceptPrecision);
  device_stats_.env = env_keyword("MSPROBE_DEVICE_STATS", kBools, kAcceptDeviceStats);
  if (const std::optional<std::string_view> v = value("MSPROBE_OVERFLOW_NUMS", kAcceptOverflow)) {
    int64_t n = 0;
    const NumberResult r = parse_int64(*v, &n);
    if (r == NumberResult::Ok && (n == -1 || (n >= 1 && n <= kMaxOverflowNums)))
      overflow_nums_.env = n;
    else
      env_error("MSPROBE_OVERFLOW_NUMS", *raw("MSPROBE_OVERFLOW_NUMS"),
                r == NumberResult::NotNumber ? "not a whole number" : "out of range", kAcceptOverflow);
  }

  // ---- environment-only fields ----
  if (const std::optional<StackMode> s = env_keyword("MSPROBE_STACK", kStackModes, kAcceptStack)) {
    c.stack = *s;
    c.sources[static_cast<size_t>(Field::Stack)] = Source::Env;
  }
  if (const std::optional<Compress> z = env_keyword("MSPROBE_COMPRESS", kCompress, kAcceptCompress)) {
    c.compress = *z;
    c.sources[static_cast<size_t>(Field::Compress)] = Source::Env;
  }
  if (const std::optional<std::string_view> v = value("MSPROBE_BUFFER_MB", kAcceptBuffer)) {
    int64_t n = 0;
    const NumberResult r = parse_int64(*v, &n);
    if (r == NumberResult::Ok && n >= 1 && static_cast<uint64_t>(n) <= kMaxBufferMb) {
      c.buffer_bytes = static_cast<uint64_t>(n) << 20;
      c.sources[static_cast<size_t>(Field::BufferMb)] = Source::Env;
    } else {
      env_error("MSPROBE_BUFFER_MB", *raw("MSPROBE_BUFFER_MB"),
                r == NumberResult::NotNumber ? "not a whole number" : "out of range", kAcceptBuffer);
    }
  }
  {
    std::string why;
    std::optional<NameRegex> marker;
    const std::optional<std::string_view> v = value("MSPROBE_STEP_MARKER", kAcceptMarker);
    if (v && (iequals(*v, "off") || iequals(*v, "none"))) {
      c.step_marker = NameRegex{};
      c.sources[static_cast<size_t>(Field::StepMarker)] = Source::Env;
    } else if (v) {
      if ((marker = NameRegex::compile(*v, &why))) {
        c.step_marker = std::move(*marker);
        c.sources[static_cast<size_t>(Field::StepMarker)] = Source::Env;
      } else {
        env_error("MSPROBE_STEP_MARKER", *raw("MSPROBE_STEP_MARKER"), why, kAcceptMarker);
      }
    } else if ((marker = NameRegex::compile(kDefaultStepMarker, &why))) {
      c.step_marker = std::move(*marker);
    }
  }

  // ---- the file ----
  std::optional<json> root;
  if (const std::optional<std::string_view> v = raw("MSPROBE_CONFIG")) {
    std::string why;
    if (const std::optional<std::string> path = checked_path(trim(*v), &why)) {
      c.config_path = *path;
      root = read_file(*path);
    } else {
      env_error("MSPROBE_CONFIG", *v, why, kAcceptConfig);
    }
  }
  if (root) read_file_top(*root);
  c.task = pick(task_, Task::Statistics, c, Field::Task);
  if (root) read_file_task_section(*root, c.task);  // msprobe reads the section of the task in effect

  c.dump_path = pick(dump_path_, c.dump_path, c, Field::DumpPath);
  c.steps = pick(steps_, IndexSet{}, c, Field::Steps);
  c.ranks = pick(ranks_, IndexSet{}, c, Field::Ranks);
  c.list = pick(list_, KernelFilter{}, c, Field::List);
  c.scope = pick(scope_, std::optional<std::pair<KernelFilter, KernelFilter>>{}, c, Field::Scope);
  c.data_mode = pick(data_mode_, DataMode::All, c, Field::DataMode);
  c.summary_mode = pick(summary_mode_, SummaryMode::Statistics, c, Field::SummaryMode);
  c.file_format = pick(file_format_, FileFormat::Npy, c, Field::FileFormat);
  c.overflow_nums = pick(overflow_nums_, int64_t{1}, c, Field::OverflowNums);
  c.precision = pick(precision_, Precision::Low, c, Field::Precision);
  c.device_stats = pick(device_stats_, true, c, Field::DeviceStats);

  if (file_format_.env && c.task != Task::Tensor) {
    warn("MSPROBE_FILE_FORMAT has no effect: only the tensor task writes tensor files (task is " +
         std::string(to_string(c.task)) + ")");
  }
  if (overflow_nums_.env && c.task != Task::OverflowCheck) {
    warn("MSPROBE_OVERFLOW_NUMS has no effect: it applies to the overflow_check task (task is " +
         std::string(to_string(c.task)) + ")");
  }
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

constexpr const char *kVariables[] = {
    "MSPROBE_DUMP_PATH", "MSPROBE_CONFIG",   "MSPROBE_TASK",      "MSPROBE_STEP",          "MSPROBE_RANK",
    "MSPROBE_LIST",      "MSPROBE_SCOPE",    "MSPROBE_DATA_MODE", "MSPROBE_SUMMARY_MODE",  "MSPROBE_FILE_FORMAT",
    "MSPROBE_STACK",     "MSPROBE_COMPRESS", "MSPROBE_BUFFER_MB", "MSPROBE_OVERFLOW_NUMS", "MSPROBE_STEP_MARKER",
    "MSPROBE_LOG_LEVEL", "MSPROBE_ENABLE",   "MSPROBE_PRECISION", "MSPROBE_DEVICE_STATS"};

const char *env_name(Field f) {
  switch (f) {
    case Field::DumpPath: return "MSPROBE_DUMP_PATH";
    case Field::Task: return "MSPROBE_TASK";
    case Field::Steps: return "MSPROBE_STEP";
    case Field::Ranks: return "MSPROBE_RANK";
    case Field::List: return "MSPROBE_LIST";
    case Field::Scope: return "MSPROBE_SCOPE";
    case Field::DataMode: return "MSPROBE_DATA_MODE";
    case Field::SummaryMode: return "MSPROBE_SUMMARY_MODE";
    case Field::FileFormat: return "MSPROBE_FILE_FORMAT";
    case Field::Stack: return "MSPROBE_STACK";
    case Field::Compress: return "MSPROBE_COMPRESS";
    case Field::BufferMb: return "MSPROBE_BUFFER_MB";
    case Field::OverflowNums: return "MSPROBE_OVERFLOW_NUMS";
    case Field::StepMarker: return "MSPROBE_STEP_MARKER";
    case Field::LogLevel: return "MSPROBE_LOG_LEVEL";
    case Field::Precision: return "MSPROBE_PRECISION";
    case Field::DeviceStats: return "MSPROBE_DEVICE_STATS";
    default: return "?";
  }
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
  switch (source(f)) {
    case Source::Env: return env_name(f);
    case Source::File: {
      std::string key;
      switch (f) {
        case Field::DumpPath: key = "dump_path"; break;
        case Field::Task: key = "task"; break;
        case Field::Steps: key = "step"; break;
        case Field::Ranks: key = "rank"; break;
        case Field::Precision: key = "precision"; break;
        case Field::List: key = std::string(to_string(task)) + ".list"; break;
        case Field::Scope: key = std::string(to_string(task)) + ".scope"; break;
        case Field::DataMode: key = std::string(to_string(task)) + ".data_mode"; break;
        case Field::SummaryMode: key = std::string(to_string(task)) + ".summary_mode"; break;
        case Field::FileFormat: key = std::string(to_string(task)) + ".file_format"; break;
        case Field::OverflowNums: key = std::string(to_string(task)) + ".overflow_nums"; break;
        case Field::DeviceStats: key = "statistics.device"; break;
        default: key = "?";
      }
      return "config.json field " + key;
    }
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
    if (std::find_if(std::begin(kVariables), std::end(kVariables), [&](const char *k) { return name == k; }) !=
        std::end(kVariables)) {
      continue;
    }
    const char *best = nullptr;
    size_t best_distance = 4;  // suggest only close names
    for (const char *k : kVariables) {
      const size_t d = edit_distance(name.substr(0, 64), k);
      if (d < best_distance) best = k, best_distance = d;
    }
    std::string w = quote_value(name, 64) + " is not a variable of msprobe-shim; ignored";
    if (best) w += std::string("; did you mean ") + best + "?";
    out.push_back(std::move(w));
  }
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
