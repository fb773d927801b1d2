// A small JSON reader (objects, arrays, strings, numbers, literals) and the rank-table checks.
#include "rank_table.h"

#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <utility>

namespace fakecann::hccl {

namespace {

struct Json {
  enum class Type { Null, Bool, Number, String, Array, Object } type = Type::Null;
  bool boolean = false;
  double number = 0;
  std::string text;  // the string, or a number's source text
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> members;

  const Json *get(const std::string &key) const {
    for (const auto &m : members)
      if (m.first == key) return &m.second;
    return nullptr;
  }
};

class Parser {
 public:
  explicit Parser(const std::string &s) : s_(s) {}

  bool parse(Json *out, std::string *err) {
    if (!value(out, 0)) {
      *err = "invalid JSON at byte " + std::to_string(pos_) + ": " + why_;
      return false;
    }
    skip_ws();
    if (pos_ != s_.size()) {
      *err = "trailing characters after the JSON value at byte " + std::to_string(pos_);
      return false;
    }
    return true;
  }

 private:
  bool fail(const char *why) {
    why_ = why;
    return false;
  }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  bool literal(const char *word) {
    size_t n = std::char_traits<char>::length(word);
    if (s_.compare(pos_, n, word) != 0) return fail("unknown literal");
    pos_ += n;
    return true;
  }

  bool value(Json *out, int depth) {
    if (depth > 64) return fail("nested too deeply");
    skip_ws();
    if (pos_ >= s_.size()) return fail("unexpected end");
    char c = s_[pos_];
    if (c == '{') return object(out, depth);
    if (c == '[') return array(out, depth);
    if (c == '"') {
      out->type = Json::Type::String;
      return string(&out->text);
    }
    if (c == 't') {
      out->type = Json::Type::Bool;
      out->boolean = true;
      return literal("true");
    }
    if (c == 'f') {
      out->type = Json::Type::Bool;
      out->boolean = false;
      return literal("false");
    }
    if (c == 'n') {
      out->type = Json::Type::Null;
      return literal("null");
    }
    return number(out);
  }

  bool object(Json *out, int depth) {
    out->type = Json::Type::Object;
    ++pos_;
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      return true;
    }
    for (;;) {
      skip_ws();
      std::string key;
      if (pos_ >= s_.size() || s_[pos_] != '"' || !string(&key)) return fail("expected a member name");
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_] != ':') return fail("expected ':'");
      ++pos_;
      Json v;
      if (!value(&v, depth + 1)) return false;
      out->members.emplace_back(std::move(key), std::move(v));
      skip_ws();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == '}') {
        ++pos_;
        return true;
      }
      return fail("expected ',' or '}'");
    }
  }

  bool array(Json *out, int depth) {
    out->type = Json::Type::Array;
    ++pos_;
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      return true;
    }
    for (;;) {
      Json v;
      if (!value(&v, depth + 1)) return false;
      out->items.push_back(std::move(v));
      skip_ws();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == ']') {
        ++pos_;
        return true;
      }
      return fail("expected ',' or ']'");
    }
  }

  static void put_utf8(std::string *o, uint32_t cp) {
    if (cp < 0x80) {
      o->push_back((char)cp);
    } else if (cp < 0x800) {
      o->push_back((char)(0xc0 | (cp >> 6)));
      o->push_back((char)(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
      o->push_back((char)(0xe0 | (cp >> 12)));
      o->push_back((char)(0x80 | ((cp >> 6) & 0x3f)));
      o->push_back((char)(0x80 | (cp & 0x3f)));
    } else {
      o->push_back((char)(0xf0 | (cp >> 18)));
      o->push_back((char)(0x80 | ((cp >> 12) & 0x3f)));
      o->push_back((char)(0x80 | ((cp >> 6) & 0x3f)));
      o->push_back((char)(0x80 | (cp & 0x3f)));
    }
  }

  bool hex4(uint32_t *cp) {
    if (pos_ + 4 > s_.size()) return fail("short \\u escape");
    *cp = 0;
    for (int i = 0; i < 4; ++i) {
      char h = s_[pos_++];
      int d = (h >= '0' && h <= '9')   ? h - '0'
              : (h >= 'a' && h <= 'f') ? h - 'a' + 10
              : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                       : -1;
      if (d < 0) return fail("bad \\u escape");
      *cp = *cp * 16 + (uint32_t)d;
    }
    return true;
  }

  bool string(std::string *o) {
    ++pos_;  // opening quote
    while (pos_ < s_.size()) {
      char c = s_[pos_++];
      if (c == '"') return true;
      if ((unsigned char)c < 0x20) return fail("control character in string");
      if (c != '\\') {
        o->push_back(c);
        continue;
      }
      if (pos_ >= s_.size()) break;
      char e = s_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/': o->push_back(e); break;
        case 'b': o->push_back('\b'); break;
        case 'f': o->push_back('\f'); break;
        case 'n': o->push_back('\n'); break;
        case 'r': o->push_back('\r'); break;
        case 't': o->push_back('\t'); break;
        case 'u': {
          uint32_t cp;
          if (!hex4(&cp)) return false;
          if (cp >= 0xd800 && cp < 0xdc00 && s_.compare(pos_, 2, "\\u") == 0) {  // surrogate pair
            pos_ += 2;
            uint32_t lo;
            if (!hex4(&lo)) return false;
            if (lo < 0xdc00 || lo >= 0xe000) return fail("bad surrogate pair");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
          }
          put_utf8(o, cp);
          break;
        }
        default: return fail("bad escape");
      }
    }
    return fail("unterminated string");
  }

  bool number(Json *out) {
    size_t start = pos_;
    if (pos_ < s_.size() && s_[pos_] == '-') ++pos_;
    while (pos_ < s_.size() && std::string("0123456789.eE+-").find(s_[pos_]) != std::string::npos) ++pos_;
    if (pos_ == start) return fail("unexpected character");
    out->type = Json::Type::Number;
    out->text = s_.substr(start, pos_ - start);
    char *end = nullptr;
    out->number = std::strtod(out->text.c_str(), &end);
    if (end == nullptr || *end != '\0') return fail("malformed number");
    return true;
  }

  const std::string &s_;
  size_t pos_ = 0;
  const char *why_ = "";
};

// A non-negative integer given as a number or a string of digits (the rank table uses strings).
bool as_index(const Json *j, int64_t *out) {
  if (j == nullptr) return false;
  std::string t = j->text;
  if (j->type == Json::Type::String || j->type == Json::Type::Number) {
    if (t.empty() || t.size() > 9) return false;
    for (char c : t)
      if (c < '0' || c > '9') return false;
    *out = std::strtoll(t.c_str(), nullptr, 10);
    return true;
  }
  return false;
}

}  // namespace

HcclResult load_rank_table(const std::string &path, RankTable *out, std::string *err) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    *err = "cannot read the rank table '" + path + "'";
    return HCCL_E_OPEN_FILE_FAILURE;
  }
  std::ostringstream ss;
  ss << f.rdbuf();
  std::string text = ss.str();
  Json root;
  if (!Parser(text).parse(&root, err)) {
    *err = "rank table '" + path + "': " + *err;
    return HCCL_E_PARA;
  }
  auto bad = [&](const std::string &why) {
    *err = "rank table '" + path + "': " + why;
    return HCCL_E_PARA;
  };
  if (root.type != Json::Type::Object) return bad("the top level is not an object");
  if (const Json *st = root.get("status");
      st != nullptr && !(st->type == Json::Type::String && st->text == "completed"))
    return bad("\"status\" is not \"completed\"");
  const Json *servers = root.get("server_list");
  if (servers == nullptr || servers->type != Json::Type::Array || servers->items.empty())
    return bad("\"server_list\" is missing or empty");
  if (const Json *sc = root.get("server_count"); sc != nullptr) {
    int64_t n = -1;
    if (!as_index(sc, &n) || n != (int64_t)servers->items.size())
      return bad("\"server_count\" does not match the length of \"server_list\"");
  }
  std::vector<RankTableEntry> entries;
  for (const Json &server : servers->items) {
    const Json *devices = server.type == Json::Type::Object ? server.get("device") : nullptr;
    if (devices == nullptr || devices->type != Json::Type::Array) return bad("a server has no \"device\" array");
    const Json *sid = server.get("server_id");
    for (const Json &dev : devices->items) {
      if (dev.type != Json::Type::Object) return bad("a device entry is not an object");
      RankTableEntry e;
      int64_t rank_id = -1;
      if (!as_index(dev.get("rank_id"), &rank_id)) return bad("a device has no valid \"rank_id\"");
      e.rank_id = (uint32_t)rank_id;
      if (const Json *d = dev.get("device_id"); d != nullptr && !as_index(d, &e.device_id))
        return bad("invalid \"device_id\"");
      if (sid != nullptr && sid->type == Json::Type::String) e.server_id = sid->text;
      entries.push_back(std::move(e));
    }
  }
  if (entries.empty()) return bad("no devices");
  std::vector<RankTableEntry> by_rank(entries.size());
  std::vector<bool> seen(entries.size(), false);
  for (auto &e : entries) {
    if (e.rank_id >= entries.size() || seen[e.rank_id])
      return bad("rank ids must be exactly 0.." + std::to_string(entries.size() - 1) + " (rank_id " +
                 std::to_string(e.rank_id) + ")");
    seen[e.rank_id] = true;
    by_rank[e.rank_id] = std::move(e);
  }
  out->ranks = std::move(by_rank);
  return HCCL_SUCCESS;
}

}  // namespace fakecann::hccl
