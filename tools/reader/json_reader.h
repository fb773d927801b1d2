// A JSON reader for the dumps: Python's json module writes bare NaN, Infinity and -Infinity (msprobe relies on
// it), which nlohmann's parser refuses, and dump.json can hold 100k+ kernels, which must not be built into one
// tree. So this is a small recursive-descent parser that accepts those three tokens, builds nlohmann values for
// the small parts, and streams the members of big objects one at a time.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>

namespace msprobe::tools {

// Members keep their order (show prints an entry as it was written).
using Json = nlohmann::ordered_json;

class JsonError : public std::runtime_error {
 public:
  JsonError(const std::string &what, size_t offset) : std::runtime_error(what), offset_(offset) {}
  size_t offset() const { return offset_; }  // byte where parsing stopped

 private:
  size_t offset_;
};

// A cursor over one JSON text. Every call consumes exactly one value (or, for members(), one object).
class JsonStream {
 public:
  explicit JsonStream(std::string_view text) : s_(text) {}

  // The next value, built. Objects keep their member order; duplicate keys are kept as written (lookups find the
  // first).
  Json value();
  // Consumes the next value without building it.
  void skip();
  // Consumes an object member by member: for each, `on_member(key)` is called and must consume the value (with
  // value(), skip() or a nested members()). Throws if the next value is not an object.
  void members(const std::function<void(std::string &&key)> &on_member);
  // Consumes an array element by element: `on_element(index)` must consume each value.
  void elements(const std::function<void(size_t index)> &on_element);
  // After the last value: only whitespace may follow.
  void finish();

  // The first non-blank character of the next value ('{', '[', '"', 't', 'n', digits...), 0 at the end.
  char peek();
  size_t offset() const { return pos_; }
  std::string_view text() const { return s_; }

  // "line L, column C" of a byte offset (for messages).
  static std::string where(std::string_view text, size_t offset);

 private:
  [[noreturn]] void fail(const std::string &what) const;
  void skip_ws();
  void expect(char c);
  std::string string();
  void skip_string();
  Json number();
  Json value_at_depth(int depth);
  void skip_at_depth(int depth);
  // The items of an object ('{', '}') or array ('[', ']') at the cursor: each(index) consumes one item (an
  // object's key, ':' and value); the separators and the closing bracket are checked here.
  template <typename Each>
  void sequence(char open, char close, Each &&each);
  // An object's "key": (the key) before its value.
  std::string key();
  void skip_key();

  std::string_view s_;
  size_t pos_ = 0;
};

// The whole text as one value (for small files: entries, stack groups). Throws JsonError.
Json parse_json(std::string_view text);
// True when `text` is one valid JSON value (NaN tokens allowed); on failure *why says what and where.
bool is_valid_json(std::string_view text, std::string *why = nullptr);

// Writes a value back as msprobe's writer would: numbers as Python repr (NaN, Infinity), ASCII strings.
// indent < 0: one line.
std::string to_json_text(const Json &j, int indent = -1);

// A read-only view of a whole file (mmap; empty files work). Throws std::system_error naming the path.
class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path &path);
  ~MappedFile();
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;
  std::string_view text() const { return {static_cast<const char *>(data_), size_}; }
  size_t size() const { return size_; }

 private:
  void *data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace msprobe::tools
