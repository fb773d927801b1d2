// MSPROBE_CONFIG's file, msprobe's config.json: reading it (bounded in size and depth, every failure one message)
// and the parsers of its keys. The settings table (settings.cpp) names each parser; declared in parsers.h.
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "format/io.h"
#include "shim/config/parsers.h"

namespace msprobe::shim::config_internal {

namespace {

constexpr size_t kMaxConfigBytes = 16u << 20;  // a config.json with 100k kernel names is a few MiB
constexpr int kMaxJsonDepth = 64;              // msprobe's schema nests 3 levels

// ---- reading -----------------------------------------------------------------------------------------------------

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

std::string item_field(const std::string &field, size_t index) { return field + "[" + std::to_string(index) + "]"; }

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

// The static-graph L2 style: a list of statistics, md5 among them or not.
bool file_summary_list(const FileValue &f, Config &into, Messages &m) {
  const auto is_item = [](const json &item) {
    return std::any_of(std::begin(kSummaryItems), std::end(kSummaryItems),
                       [&](std::string_view k) { return iequals(k, item.get_ref<const std::string &>()); });
  };
  bool md5 = false, ok = !f.value.empty();
  for (const json &item : f.value) {
    ok = ok && item.is_string() && is_item(item);
    md5 = md5 || (item.is_string() && iequals(item.get_ref<const std::string &>(), "md5"));
  }
  if (!ok) {
    m.file_error(f.field, f.value, "", kSummaryModeValues);
    return false;
  }
  into.summary_mode = md5 ? SummaryMode::Md5 : SummaryMode::Statistics;
  if (f.value.size() - (md5 ? 1 : 0) < 4) m.warn(m.where(f.field) + ": Max, Min, Mean and Norm are always all written");
  return true;
}

}  // namespace

std::optional<json> read_config_file(const std::string &path, Messages &m) { return ConfigFile(path, m).read(); }

// ---- the keys ----------------------------------------------------------------------------------------------------

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
    m.reject(f, v.is_array() ? "it must hold exactly one of " + std::string(kWordsOf<kDataModes>) : "");
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
  if (!f.value.is_string() || !contains(kStatisticsPlaces, f.value.get_ref<const std::string &>())) {
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
  if (!f.value.is_string() || !contains(kCheckModes, f.value.get_ref<const std::string &>())) {
    m.reject(f, "");
    return false;
  }
  if (f.value.get_ref<const std::string &>() != "all") {
    m.warn(m.where(f.field) + " = " + show_json(f.value) + " is ignored: the shim checks the outputs of every kernel");
  }
  return true;
}

}  // namespace msprobe::shim::config_internal
