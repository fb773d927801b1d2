#include "tools/reader/json_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <limits>
#include <system_error>
#include <utility>
#include <vector>

#include "format/dump_json.h"

namespace msprobe::tools {
namespace {

// Deep enough for any dump (kernel entries nest a few levels), shallow enough never to exhaust the stack.
constexpr int kMaxDepth = 256;

void append_utf8(std::string &out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string JsonStream::where(std::string_view text, size_t offset) {
  offset = std::min(offset, text.size());
  size_t line = 1, col = 1;
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(col);
}

void JsonStream::fail(const std::string &what) const {
  std::string got = pos_ >= s_.size() ? std::string("end of text") : "'" + std::string(1, s_[pos_]) + "'";
  throw JsonError(what + " at " + where(s_, pos_) + " (byte " + std::to_string(pos_) + "), found " + got, pos_);
}

void JsonStream::skip_ws() {
  while (pos_ < s_.size()) {
    const char c = s_[pos_];
    if (c != ' ' && c != '\n' && c != '\r' && c != '\t') break;
    ++pos_;
  }
}

char JsonStream::peek() {
  skip_ws();
  return pos_ < s_.size() ? s_[pos_] : '\0';
}

void JsonStream::expect(char c) {
  skip_ws();
  if (pos_ >= s_.size() || s_[pos_] != c) fail(std::string("expected '") + c + "'");
  ++pos_;
}

std::string JsonStream::string() {
  expect('"');
  std::string out;
  for (;;) {
    // Copy the plain run in one go: the common case has no escapes.
    size_t run = pos_;
    while (run < s_.size() && s_[run] != '"' && s_[run] != '\\' && static_cast<unsigned char>(s_[run]) >= 0x20) ++run;
    out.append(s_.data() + pos_, run - pos_);
    pos_ = run;
    if (pos_ >= s_.size()) fail("unterminated string");
    const char c = s_[pos_];
    if (c == '"') {
      ++pos_;
      return out;
    }
    if (c != '\\') fail("control character in a string");
    if (++pos_ >= s_.size()) fail("unterminated escape");
    switch (s_[pos_++]) {
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case '/': out += '/'; break;
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'u': {
        auto hex4 = [this]() -> uint32_t {
          if (pos_ + 4 > s_.size()) fail("short \\u escape");
          uint32_t v = 0;
          for (int i = 0; i < 4; ++i) {
            const int d = hex_digit(s_[pos_ + i]);
            if (d < 0) fail("bad \\u escape");
            v = v << 4 | static_cast<uint32_t>(d);
          }
          pos_ += 4;
          return v;
        };
        uint32_t cp = hex4();
        // A surrogate pair encodes one code point; a lone surrogate (Python can write one) becomes U+FFFD.
        if (cp >= 0xd800 && cp < 0xdc00 && pos_ + 1 < s_.size() && s_[pos_] == '\\' && s_[pos_ + 1] == 'u') {
          const size_t save = pos_;
          pos_ += 2;
          const uint32_t lo = hex4();
          if (lo >= 0xdc00 && lo < 0xe000) {
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
          } else {
            pos_ = save;
            cp = 0xfffd;
          }
        } else if (cp >= 0xd800 && cp < 0xe000) {
          cp = 0xfffd;
        }
        append_utf8(out, cp);
        break;
      }
      default: --pos_; fail("bad escape");
    }
  }
}

void JsonStream::skip_string() {
  expect('"');
  while (pos_ < s_.size()) {
    const char c = s_[pos_++];
    if (c == '"') return;
    if (c == '\\') {
      if (pos_ >= s_.size()) break;
      const char e = s_[pos_++];
      if (e == 'u') {
        for (int i = 0; i < 4; ++i, ++pos_)
          if (pos_ >= s_.size() || hex_digit(s_[pos_]) < 0) fail("bad \\u escape");
      } else if (std::string_view("\"\\/bfnrt").find(e) == std::string_view::npos) {
        --pos_;
        fail("bad escape");
      }
    } else if (static_cast<unsigned char>(c) < 0x20) {
      --pos_;
      fail("control character in a string");
    }
  }
  fail("unterminated string");
}

Json JsonStream::number() {
  skip_ws();
  const size_t start = pos_;
  auto literal = [&](std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  };
  // Python's json.dump spellings of the non-finite floats.
  if (literal("NaN")) return Json(std::numeric_limits<double>::quiet_NaN());
  if (literal("Infinity")) return Json(std::numeric_limits<double>::infinity());
  if (literal("-Infinity")) return Json(-std::numeric_limits<double>::infinity());
  size_t p = pos_;
  if (p < s_.size() && s_[p] == '-') ++p;
  const size_t int_start = p;
  while (p < s_.size() && s_[p] >= '0' && s_[p] <= '9') ++p;
  if (p == int_start) fail("expected a value");
  if (s_[int_start] == '0' && p - int_start > 1) fail("leading zero in a number");
  bool is_float = false;
  if (p < s_.size() && s_[p] == '.') {
    is_float = true;
    const size_t f = ++p;
    while (p < s_.size() && s_[p] >= '0' && s_[p] <= '9') ++p;
    if (p == f) {
      pos_ = p;
      fail("digits expected after '.'");
    }
  }
  if (p < s_.size() && (s_[p] == 'e' || s_[p] == 'E')) {
    is_float = true;
    ++p;
    if (p < s_.size() && (s_[p] == '+' || s_[p] == '-')) ++p;
    const size_t e = p;
    while (p < s_.size() && s_[p] >= '0' && s_[p] <= '9') ++p;
    if (p == e) {
      pos_ = p;
      fail("digits expected in the exponent");
    }
  }
  const char *first = s_.data() + start;
  const char *last = s_.data() + p;
  pos_ = p;
  if (!is_float) {
    if (*first == '-') {
      int64_t v = 0;
      auto r = std::from_chars(first, last, v);
      if (r.ec == std::errc() && r.ptr == last) return Json(v);
    } else {
      uint64_t v = 0;
      auto r = std::from_chars(first, last, v);
      if (r.ec == std::errc() && r.ptr == last) {
        if (v <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return Json(static_cast<int64_t>(v));
        return Json(v);
      }
    }
    // Too big for 64 bits: Python keeps it exact, a double is the closest we hold.
  }
  double d = 0.0;
  auto r = std::from_chars(first, last, d);
  if (r.ec == std::errc::result_out_of_range) {
    // from_chars leaves d alone on overflow/underflow; strtod gives the IEEE answer (inf or 0).
    d = std::strtod(std::string(first, last).c_str(), nullptr);
  } else if (r.ec != std::errc() || r.ptr != last) {
    pos_ = start;
    fail("bad number");
  }
  return Json(d);
}

template <typename Each>
void JsonStream::sequence(char open, char close, Each &&each) {
  expect(open);
  if (peek() == close) {
    ++pos_;
    return;
  }
  for (size_t i = 0;; ++i) {
    each(i);
    const char n = peek();
    ++pos_;
    if (n == close) return;
    if (n != ',') {
      --pos_;
      fail(std::string("expected ',' or '") + close + "'");
    }
  }
}

std::string JsonStream::key() {
  if (peek() != '"') fail("expected a string key");
  std::string k = string();
  expect(':');
  return k;
}

void JsonStream::skip_key() {
  if (peek() != '"') fail("expected a string key");
  skip_string();
  expect(':');
}

Json JsonStream::value_at_depth(int depth) {
  if (depth > kMaxDepth) fail("nesting deeper than " + std::to_string(kMaxDepth));
  const char c = peek();
  switch (c) {
    case '{': {
      Json obj = Json::object();
      // Append without ordered_map's duplicate search, which is linear per insert.
      auto &members = static_cast<Json::object_t::Container &>(obj.get_ref<Json::object_t &>());
      sequence('{', '}', [&](size_t) {
        std::string k = key();
        members.emplace_back(std::move(k), value_at_depth(depth + 1));
      });
      return obj;
    }
    case '[': {
      Json arr = Json::array();
      sequence('[', ']', [&](size_t) { arr.push_back(value_at_depth(depth + 1)); });
      return arr;
    }
    case '"': return Json(string());
    case 't':
      if (s_.substr(pos_, 4) != "true") fail("expected a value");
      pos_ += 4;
      return Json(true);
    case 'f':
      if (s_.substr(pos_, 5) != "false") fail("expected a value");
      pos_ += 5;
      return Json(false);
    case 'n':
      if (s_.substr(pos_, 4) != "null") fail("expected a value");
      pos_ += 4;
      return Json(nullptr);
    case '\0':
      if (pos_ >= s_.size()) fail("unexpected end of text");
      fail("expected a value");
    default: return number();
  }
}

void JsonStream::skip_at_depth(int depth) {
  if (depth > kMaxDepth) fail("nesting deeper than " + std::to_string(kMaxDepth));
  const char c = peek();
  if (c == '{')
    return sequence('{', '}', [&](size_t) {
      skip_key();
      skip_at_depth(depth + 1);
    });
  if (c == '[') return sequence('[', ']', [&](size_t) { skip_at_depth(depth + 1); });
  if (c == '"') return skip_string();
  value_at_depth(depth);  // scalars are cheap to build
}

Json JsonStream::value() { return value_at_depth(0); }
void JsonStream::skip() { skip_at_depth(0); }

void JsonStream::members(const std::function<void(std::string &&key)> &on_member) {
  if (peek() != '{') fail("expected an object");
  sequence('{', '}', [&](size_t) { on_member(key()); });
}

void JsonStream::elements(const std::function<void(size_t)> &on_element) {
  if (peek() != '[') fail("expected an array");
  sequence('[', ']', on_element);
}

void JsonStream::finish() {
  skip_ws();
  if (pos_ != s_.size()) fail("unexpected text after the end of the JSON value");
}

Json parse_json(std::string_view text) {
  JsonStream s(text);
  Json v = s.value();
  s.finish();
  return v;
}

bool is_valid_json(std::string_view text, std::string *why) {
  try {
    JsonStream s(text);
    s.skip();
    s.finish();
    return true;
  } catch (const JsonError &e) {
    if (why) *why = e.what();
    return false;
  }
}

namespace {
void write_text(std::string &out, const Json &j, int indent, int level) {
  auto newline = [&](int lv) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(indent * lv), ' ');
  };
  switch (j.type()) {
    case Json::value_t::object: {
      if (j.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      bool first = true;
      for (const auto &[k, v] : j.items()) {
        if (!first) out += indent < 0 ? ", " : ",";
        first = false;
        newline(level + 1);
        format::append_json_string(out, k);
        out += ": ";
        write_text(out, v, indent, level + 1);
      }
      newline(level);
      out += '}';
      return;
    }
    case Json::value_t::array: {
      out += '[';
      bool first = true;
      for (const auto &v : j) {
        if (!first) out += ", ";
        first = false;
        write_text(out, v, -1, 0);  // arrays (shapes, frames) stay on one line
      }
      out += ']';
      return;
    }
    case Json::value_t::string: format::append_json_string(out, j.get_ref<const std::string &>()); return;
    case Json::value_t::boolean: out += j.get<bool>() ? "true" : "false"; return;
    case Json::value_t::number_integer: format::append_json_integer(out, j.get<int64_t>()); return;
    case Json::value_t::number_unsigned: format::append_json_integer(out, j.get<uint64_t>()); return;
    case Json::value_t::number_float: format::append_json_number(out, j.get<double>()); return;
    default: out += "null"; return;
  }
}
}  // namespace

std::string to_json_text(const Json &j, int indent) {
  std::string out;
  write_text(out, j, indent, 0);
  return out;
}

MappedFile::MappedFile(const std::filesystem::path &path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), path.string());
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    throw std::system_error(e, std::generic_category(), path.string());
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw std::system_error(EINVAL, std::generic_category(), path.string() + " is not a regular file");
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    data_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (data_ == MAP_FAILED) {
      const int e = errno;
      data_ = nullptr;
      ::close(fd);
      throw std::system_error(e, std::generic_category(), path.string());
    }
    ::madvise(data_, size_, MADV_SEQUENTIAL);
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(data_, size_);
}

}  // namespace msprobe::tools
