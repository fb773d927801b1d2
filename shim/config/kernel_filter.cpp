#include "shim/config/kernel_filter.h"

#include <algorithm>
#include <array>
#include <bitset>
#include <cstring>
#include <new>

#include "format/naming.h"
#include "shim/base/hash.h"
#include "shim/base/text.h"

namespace msprobe::shim {

// ===================================================================================================================
// NameRegex
// ===================================================================================================================

struct NameRegex::Program {
  enum Op : uint8_t { kClass, kSplit, kJmp, kBol, kEol, kMatch };
  struct Inst {
    Op op;
    uint32_t x = 0;  // kClass: class index; kSplit/kJmp: target
    uint32_t y = 0;  // kSplit: second target
  };
  std::string pattern;
  std::vector<Inst> code;  // code.back() is the only kMatch
  std::vector<std::bitset<256>> classes;
  // Fast path: the pattern is a plain alternation of words (case-folded to lower case when icase).
  bool literal_only = false;
  bool icase = false;
  size_t longest_literal = 0;
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_set<std::string, Hash, std::equal_to<>> literals;
};

namespace {

using Program = NameRegex::Program;
using ByteSet = std::bitset<256>;

constexpr bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
constexpr bool is_alpha(unsigned char c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }
constexpr bool is_alnum(unsigned char c) { return is_digit(c) || is_alpha(c); }

// The AST lives in one flat vector (children by index), so that nothing is destroyed recursively.
struct Node {
  enum Kind : uint8_t { kEmpty, kClass, kBol, kEol, kConcat, kAlt, kRepeat } kind;
  explicit Node(Kind k) : kind(k) {}
  uint32_t cls = 0;
  int min = 0, max = 0;  // kRepeat; max -1 = unbounded
  std::vector<uint32_t> kids;
};

// A human-readable, one-line rendering of a byte for error messages.
std::string show_byte(unsigned char c) {
  if (c >= 0x21 && c < 0x7f) return std::string(1, static_cast<char>(c));
  static const char hex[] = "0123456789abcdef";
  return std::string("\\x") + hex[c >> 4] + hex[c & 15];
}

class Parser {
 public:
  Parser(std::string_view p, Program &prog) : p_(p), prog_(prog) {}

  // Returns the root node or nullopt with error_ set.
  std::optional<uint32_t> parse() {
    if (p_.substr(0, 4) == "(?i)") {
      prog_.icase = true;
      pos_ = 4;
    }
    struct Frame {
      std::vector<uint32_t> branches, items;
      size_t open = 0;
    };
    std::vector<Frame> frames(1);
    while (pos_ < p_.size()) {
      const unsigned char c = static_cast<unsigned char>(p_[pos_]);
      if (c == '(') {
        if (frames.size() > NameRegex::kMaxNesting) return fail("groups nested deeper than 32");
        const size_t open = pos_++;
        if (p_.substr(pos_, 2) == "?:") {
          pos_ += 2;
        } else if (pos_ < p_.size() && p_[pos_] == '?') {
          return fail_at(open, "unsupported group syntax (only ( ), (?: ) and a leading (?i) are supported)");
        }
        frames.push_back(Frame{{}, {}, open});
        continue;
      }
      if (c == ')') {
        if (frames.size() == 1) return fail_at(pos_, "unexpected )");
        ++pos_;
        Frame f = std::move(frames.back());
        frames.pop_back();
        const uint32_t group = finish(f.branches, f.items);
        if (!push_atom(frames.back().items, group)) return std::nullopt;
        continue;
      }
      if (c == '|') {
        ++pos_;
        Frame &f = frames.back();
        f.branches.push_back(concat(f.items));
        f.items.clear();
        continue;
      }
      const std::optional<uint32_t> atom = parse_atom();
      if (!atom) return std::nullopt;
      if (!push_atom(frames.back().items, *atom)) return std::nullopt;
    }
    if (frames.size() > 1) return fail_at(frames.back().open, "missing closing )");
    return finish(frames[0].branches, frames[0].items);
  }

  const std::string &error() const { return error_; }
  const std::vector<Node> &nodes() const { return nodes_; }

 private:
  std::nullopt_t fail(std::string what) {
    error_ = std::move(what);
    return std::nullopt;
  }
  std::nullopt_t fail_at(size_t at, const std::string &what) { return fail(what + " at offset " + std::to_string(at)); }

  uint32_t add(Node n) {
    nodes_.push_back(std::move(n));
    return static_cast<uint32_t>(nodes_.size() - 1);
  }
  uint32_t add_class(const ByteSet &set) {
    ByteSet s = set;
    if (prog_.icase) {
      for (int c = 'a'; c <= 'z'; ++c) {
        if (s.test(c) || s.test(c - 32)) {
          s.set(c);
          s.set(c - 32);
        }
      }
    }
    prog_.classes.push_back(s);
    Node n{Node::kClass};
    n.cls = static_cast<uint32_t>(prog_.classes.size() - 1);
    return add(std::move(n));
  }
  uint32_t concat(std::vector<uint32_t> &items) {
    if (items.empty()) return add(Node{Node::kEmpty});
    if (items.size() == 1) return items[0];
    Node n{Node::kConcat};
    n.kids = std::move(items);
    items.clear();
    return add(std::move(n));
  }
  uint32_t finish(std::vector<uint32_t> &branches, std::vector<uint32_t> &items) {
    const uint32_t last = concat(items);
    if (branches.empty()) return last;
    branches.push_back(last);
    Node n{Node::kAlt};
    n.kids = std::move(branches);
    return add(std::move(n));
  }

  // Appends `atom` to `items`, wrapped in a repeat if a quantifier follows.
  bool push_atom(std::vector<uint32_t> &items, uint32_t atom) {
    int min = 0, max = 0;
    const size_t at = pos_;
    if (pos_ < p_.size()) {
      const char q = p_[pos_];
      if (q == '*') {
        min = 0, max = -1, ++pos_;
      } else if (q == '+') {
        min = 1, max = -1, ++pos_;
      } else if (q == '?') {
        min = 0, max = 1, ++pos_;
      } else if (q == '{') {
        const std::optional<bool> counted = parse_count(&min, &max);
        if (!counted) return false;
        if (!*counted) {  // not a repetition: '{' is a literal, handled as the next atom
          items.push_back(atom);
          return true;
        }
      } else {
        items.push_back(atom);
        return true;
      }
      if (pos_ < p_.size() && p_[pos_] == '?') ++pos_;  // lazy: same yes/no answer for a full match
      if (pos_ < p_.size() &&
          (p_[pos_] == '*' || p_[pos_] == '+' || p_[pos_] == '?' || (p_[pos_] == '{' && looks_like_count(pos_)))) {
        fail_at(pos_, "bad repetition operator " + std::string(p_.substr(at, pos_ + 1 - at)));
        return false;
      }
      const Node::Kind k = nodes_[atom].kind;
      if (k == Node::kBol || k == Node::kEol || k == Node::kEmpty) {
        // RE2 rejects a repeated empty-width item such as ^* or ()+; so do we (it would match nothing new).
        fail_at(at, "repetition of an empty-width item");
        return false;
      }
      Node n{Node::kRepeat};
      n.min = min;
      n.max = max;
      n.kids = {atom};
      items.push_back(add(std::move(n)));
      return true;
    }
    items.push_back(atom);
    return true;
  }

  bool looks_like_count(size_t at) const {
    int a = 0, b = 0;
    Parser probe(p_, prog_);
    probe.pos_ = at;
    const std::optional<bool> r = probe.parse_count(&a, &b);
    return !r || *r;  // nullopt: count syntax with a bad count, still a repetition operator
  }

  // At '{': a counted repetition {n} {n,} {n,m} -> true (pos_ past '}'); anything else -> false (pos_ unchanged,
  // the '{' is a literal as in RE2); a count over 1000 or n > m -> nullopt.
  std::optional<bool> parse_count(int *min, int *max) {
    size_t i = pos_ + 1;
    const auto number = [&](int *out) {
      const size_t start = i;
      long v = 0;
      while (i < p_.size() && is_digit(static_cast<unsigned char>(p_[i]))) {
        if (v <= 100000) v = v * 10 + (p_[i] - '0');
        ++i;
      }
      *out = v > 100000 ? 100001 : static_cast<int>(v);
      return i > start;
    };
    if (!number(min)) return false;
    if (i < p_.size() && p_[i] == '}') {
      *max = *min;
    } else if (i < p_.size() && p_[i] == ',') {
      ++i;
      if (i < p_.size() && p_[i] == '}') {
        *max = -1;
      } else if (!number(max) || i >= p_.size() || p_[i] != '}') {
        return false;
      }
    } else {
      return false;
    }
    const std::string text(p_.substr(pos_, i + 1 - pos_));
    if (*min > NameRegex::kMaxRepeat || *max > NameRegex::kMaxRepeat) {
      fail_at(pos_, "bad repetition count " + text + " (at most 1000)");
      return std::nullopt;
    }
    if (*max != -1 && *max < *min) {
      fail_at(pos_, "bad repetition count " + text + " (min > max)");
      return std::nullopt;
    }
    pos_ = i + 1;
    return true;
  }

  std::optional<uint32_t> parse_atom() {
    const size_t at = pos_;
    const unsigned char c = static_cast<unsigned char>(p_[pos_++]);
    switch (c) {
      case '.': {
        ByteSet s;
        s.set();
        s.reset('\n');
        return add_class(s);
      }
      case '^': return add(Node{Node::kBol});
      case '$': return add(Node{Node::kEol});
      case '[': return parse_class(at);
      case '*':
      case '+':
      case '?': return fail_at(at, std::string("missing argument to repetition operator ") + static_cast<char>(c));
      case '\\': {
        ByteSet s;
        std::optional<int> anchor;
        if (!parse_escape(&s, /*in_class=*/false, &anchor)) return std::nullopt;
        if (anchor) return add(Node{*anchor == 0 ? Node::kBol : Node::kEol});
        return add_class(s);
      }
      default: {
        ByteSet s;
        s.set(c);
        return add_class(s);
      }
    }
  }

  // After '\'. Fills *set (a class) or *anchor (0 = \A, 1 = \z, outside classes only).
  bool parse_escape(ByteSet *set, bool in_class, std::optional<int> *anchor) {
    if (pos_ >= p_.size()) {
      fail("trailing \\ at the end of the pattern");
      return false;
    }
    const size_t at = pos_ - 1;
    const unsigned char e = static_cast<unsigned char>(p_[pos_++]);
    const auto range = [&](int lo, int hi) {
      for (int b = lo; b <= hi; ++b) set->set(b);
    };
    switch (e) {
      case 'd': range('0', '9'); return true;
      case 'D':
        range('0', '9');
        set->flip();
        return true;
      case 'w': range('0', '9'), range('A', 'Z'), range('a', 'z'), set->set('_'); return true;
      case 'W': range('0', '9'), range('A', 'Z'), range('a', 'z'), set->set('_'), set->flip(); return true;
      case 's':
        set->set(' '), set->set('\t'), set->set('\n'), set->set('\r'), set->set('\f'), set->set('\v');
        return true;
      case 'S':
        set->set(' '), set->set('\t'), set->set('\n'), set->set('\r'), set->set('\f'), set->set('\v'), set->flip();
        return true;
      case 't': set->set('\t'); return true;
      case 'n': set->set('\n'); return true;
      case 'r': set->set('\r'); return true;
      case 'f': set->set('\f'); return true;
      case 'v': set->set('\v'); return true;
      case 'a': set->set('\a'); return true;
      case 'x': {
        const auto hex = [](unsigned char h) -> int {
          if (is_digit(h)) return h - '0';
          if ((h | 0x20) >= 'a' && (h | 0x20) <= 'f') return (h | 0x20) - 'a' + 10;
          return -1;
        };
        if (pos_ + 2 > p_.size() || hex(p_[pos_]) < 0 || hex(p_[pos_ + 1]) < 0) {
          fail_at(at, "bad escape \\x (expected two hex digits)");
          return false;
        }
        set->set(static_cast<size_t>(hex(p_[pos_]) * 16 + hex(p_[pos_ + 1])));
        pos_ += 2;
        return true;
      }
      case 'A':
      case 'z':
        if (!in_class) {
          *anchor = e == 'A' ? 0 : 1;
          return true;
        }
        break;
      default:
        if (e < 0x80 && !is_alnum(e)) {  // escaped punctuation or space: the character itself
          set->set(e);
          return true;
        }
    }
    fail_at(at, "unsupported escape \\" + show_byte(e));
    return false;
  }

  std::optional<uint32_t> parse_class(size_t open) {
    ByteSet set;
    bool negate = false;
    if (pos_ < p_.size() && p_[pos_] == '^') negate = true, ++pos_;
    bool first = true;
    while (true) {
      if (pos_ >= p_.size()) return fail_at(open, "missing closing ]");
      unsigned char c = static_cast<unsigned char>(p_[pos_]);
      if (c == ']' && !first) {
        ++pos_;
        break;
      }
      first = false;
      if (c == '[' && p_.substr(pos_, 2) == "[:") {
        const size_t end = p_.find(":]", pos_ + 2);
        if (end != std::string_view::npos) {
          if (!posix_class(p_.substr(pos_ + 2, end - pos_ - 2), &set)) return std::nullopt;
          pos_ = end + 2;
          continue;
        }
      }
      // One element: a byte or an escape, possibly the start of a range.
      int lo;
      const size_t elem = pos_;
      if (c == '\\') {
        ++pos_;
        ByteSet esc;
        std::optional<int> anchor;
        if (!parse_escape(&esc, true, &anchor)) return std::nullopt;
        if (esc.count() != 1) {  // \d, \w...: a set, never a range end
          set |= esc;
          continue;
        }
        lo = static_cast<int>(first_bit(esc));
      } else {
        lo = c;
        ++pos_;
      }
      if (pos_ + 1 < p_.size() && p_[pos_] == '-' && p_[pos_ + 1] != ']') {
        ++pos_;
        int hi;
        c = static_cast<unsigned char>(p_[pos_]);
        if (c == '\\') {
          ++pos_;
          ByteSet esc;
          std::optional<int> anchor;
          if (!parse_escape(&esc, true, &anchor)) return std::nullopt;
          if (esc.count() != 1) return fail_at(elem, "bad character class range");
          hi = static_cast<int>(first_bit(esc));
        } else {
          hi = c;
          ++pos_;
        }
        if (hi < lo) {
          return fail_at(elem, "bad character class range " + show_byte(static_cast<unsigned char>(lo)) + "-" +
                                   show_byte(static_cast<unsigned char>(hi)));
        }
        for (int b = lo; b <= hi; ++b) set.set(static_cast<size_t>(b));
      } else {
        set.set(static_cast<size_t>(lo));
      }
    }
    if (prog_.icase) {  // fold before negating, so that (?i)[^a] excludes both a and A
      for (int c = 'a'; c <= 'z'; ++c) {
        if (set.test(c) || set.test(c - 32)) set.set(c), set.set(c - 32);
      }
    }
    if (negate) set.flip();
    prog_.classes.push_back(set);
    Node n{Node::kClass};
    n.cls = static_cast<uint32_t>(prog_.classes.size() - 1);
    return add(std::move(n));
  }

  static size_t first_bit(const ByteSet &s) {
    for (size_t i = 0; i < 256; ++i) {
      if (s.test(i)) return i;
    }
    return 0;
  }

  bool posix_class(std::string_view name, ByteSet *set) {
    bool neg = false;
    if (!name.empty() && name[0] == '^') neg = true, name.remove_prefix(1);
    ByteSet s;
    for (int c = 0; c < 128; ++c) {
      const unsigned char b = static_cast<unsigned char>(c);
      bool in;
      if (name == "alnum")
        in = is_alnum(b);
      else if (name == "alpha")
        in = is_alpha(b);
      else if (name == "ascii")
        in = true;
      else if (name == "blank")
        in = b == ' ' || b == '\t';
      else if (name == "cntrl")
        in = b < 0x20 || b == 0x7f;
      else if (name == "digit")
        in = is_digit(b);
      else if (name == "graph")
        in = b > 0x20 && b < 0x7f;
      else if (name == "lower")
        in = b >= 'a' && b <= 'z';
      else if (name == "print")
        in = b >= 0x20 && b < 0x7f;
      else if (name == "punct")
        in = b > 0x20 && b < 0x7f && !is_alnum(b);
      else if (name == "space")
        in = b == ' ' || (b >= '\t' && b <= '\r');
      else if (name == "upper")
        in = b >= 'A' && b <= 'Z';
      else if (name == "word")
        in = is_alnum(b) || b == '_';
      else if (name == "xdigit")
        in = is_digit(b) || ((b | 0x20) >= 'a' && (b | 0x20) <= 'f');
      else {
        fail("unknown character class [:" + std::string(name.substr(0, 32)) + ":]");
        return false;
      }
      if (in) s.set(b);
    }
    if (neg) s.flip();
    *set |= s;
    return true;
  }

  std::string_view p_;
  Program &prog_;
  size_t pos_ = 0;
  std::vector<Node> nodes_;
  std::string error_;
};

// AST -> Thompson program. Recursion follows the AST's nesting, which the parser bounded.
class Compiler {
 public:
  Compiler(const std::vector<Node> &nodes, Program &prog) : nodes_(nodes), prog_(prog) {}

  bool compile(uint32_t root) {
    if (!emit(root)) return false;
    return push({Program::kMatch});
  }

 private:
  bool push(Program::Inst i) {
    if (prog_.code.size() >= NameRegex::kMaxProgram) return false;
    prog_.code.push_back(i);
    return true;
  }
  uint32_t here() const { return static_cast<uint32_t>(prog_.code.size()); }

  bool emit(uint32_t id) {
    const Node &n = nodes_[id];
    switch (n.kind) {
      case Node::kEmpty: return true;
      case Node::kClass: return push({Program::kClass, n.cls});
      case Node::kBol: return push({Program::kBol});
      case Node::kEol: return push({Program::kEol});
      case Node::kConcat:
        for (const uint32_t k : n.kids) {
          if (!emit(k)) return false;
        }
        return true;
      case Node::kAlt: {
        std::vector<uint32_t> jumps;
        for (size_t i = 0; i < n.kids.size(); ++i) {
          if (i + 1 < n.kids.size()) {
            const uint32_t split = here();
            if (!push({Program::kSplit, split + 1, 0})) return false;
            if (!emit(n.kids[i])) return false;
            jumps.push_back(here());
            if (!push({Program::kJmp})) return false;
            prog_.code[split].y = here();
          } else if (!emit(n.kids[i])) {
            return false;
          }
        }
        for (const uint32_t j : jumps) prog_.code[j].x = here();
        return true;
      }
      case Node::kRepeat: {
        const uint32_t kid = n.kids[0];
        for (int i = 0; i < n.min; ++i) {
          if (!emit(kid)) return false;
        }
        if (n.max == -1) {  // kid*: L: split L+1, E; kid; jmp L; E:
          const uint32_t loop = here();
          if (!push({Program::kSplit, loop + 1, 0})) return false;
          if (!emit(kid)) return false;
          if (!push({Program::kJmp, loop})) return false;
          prog_.code[loop].y = here();
          return true;
        }
        for (int i = n.min; i < n.max; ++i) {  // kid?: split L+1, E; kid; E:
          const uint32_t split = here();
          if (!push({Program::kSplit, split + 1, 0})) return false;
          if (!emit(kid)) return false;
          prog_.code[split].y = here();
        }
        return true;
      }
    }
    return false;
  }

  const std::vector<Node> &nodes_;
  Program &prog_;
};

// The words of a pattern that is only an alternation of literal strings (what most step markers are).
bool collect_literals(const std::vector<Node> &nodes, const Program &prog, uint32_t root,
                      std::vector<std::string> *out) {
  const auto single_byte = [&](const Node &n, char *c) {
    if (n.kind != Node::kClass) return false;
    const ByteSet &s = prog.classes[n.cls];
    const size_t count = s.count();
    for (int b = 0; b < 256; ++b) {
      if (!s.test(b)) continue;
      const unsigned char u = static_cast<unsigned char>(b);
      const unsigned char lower = static_cast<unsigned char>(ascii_lower(static_cast<char>(u)));
      const bool pair = prog.icase && is_alpha(u) && count == 2 && s.test(lower) && s.test(lower - 32);
      if (count != 1 && !pair) return false;
      *c = static_cast<char>(prog.icase ? lower : u);
      return true;
    }
    return false;
  };
  const auto word = [&](uint32_t id, std::string *w) {
    const Node &n = nodes[id];
    char c;
    if (n.kind == Node::kEmpty) return true;
    if (single_byte(n, &c)) return w->push_back(c), true;
    if (n.kind != Node::kConcat) return false;
    for (const uint32_t k : n.kids) {
      if (!single_byte(nodes[k], &c)) return false;
      w->push_back(c);
    }
    return true;
  };
  const Node &r = nodes[root];
  if (r.kind == Node::kAlt) {
    for (const uint32_t k : r.kids) {
      std::string w;
      if (!word(k, &w)) return false;
      out->push_back(std::move(w));
    }
    return true;
  }
  std::string w;
  if (!word(root, &w)) return false;
  out->push_back(std::move(w));
  return true;
}

// Sparse set over program counters (Briggs-Torczon): O(1) insert/test/clear, iteration in insertion order.
struct SparseSet {
  uint16_t *dense, *sparse;
  uint32_t size = 0;
  bool contains(uint32_t pc) const { return sparse[pc] < size && dense[sparse[pc]] == pc; }
  void insert(uint32_t pc) {
    sparse[pc] = static_cast<uint16_t>(size);
    dense[size++] = static_cast<uint16_t>(pc);
  }
};

// Adds pc and everything reachable from it without consuming a byte. Explicit stack, no recursion.
void add_thread(const Program &prog, SparseSet &set, uint16_t *stack, uint32_t pc, size_t pos, size_t len) {
  uint32_t top = 0;
  stack[top++] = static_cast<uint16_t>(pc);
  while (top > 0) {
    const uint32_t at = stack[--top];
    if (set.contains(at)) continue;
    set.insert(at);
    const Program::Inst &i = prog.code[at];
    switch (i.op) {
      case Program::kJmp: stack[top++] = static_cast<uint16_t>(i.x); break;
      case Program::kSplit:
        stack[top++] = static_cast<uint16_t>(i.y);
        stack[top++] = static_cast<uint16_t>(i.x);
        break;
      case Program::kBol:
        if (pos == 0) stack[top++] = static_cast<uint16_t>(at + 1);
        break;
      case Program::kEol:
        if (pos == len) stack[top++] = static_cast<uint16_t>(at + 1);
        break;
      default: break;
    }
  }
}

bool run(const Program &prog, std::string_view text) {
  const size_t n = prog.code.size();
  // Each pc is expanded once per position and pushes at most 2, so 2n+1 bounds the stack.
  const size_t words = 4 * n + 2 * n + 1;
  constexpr size_t kStackWords = 1536;  // 3 KiB: programs up to 256 instructions need no allocation
  std::array<uint16_t, kStackWords> local;
  std::unique_ptr<uint16_t[]> heap;
  uint16_t *mem = local.data();
  if (words > kStackWords) {
    heap.reset(new (std::nothrow) uint16_t[words]);
    if (!heap) return false;
    mem = heap.get();
  }
  std::memset(mem, 0, words * sizeof(uint16_t));
  SparseSet a{mem, mem + n}, b{mem + 2 * n, mem + 3 * n};
  uint16_t *stack = mem + 4 * n;
  SparseSet *cur = &a, *next = &b;
  add_thread(prog, *cur, stack, 0, 0, text.size());
  for (size_t pos = 0; pos < text.size(); ++pos) {
    if (cur->size == 0) return false;
    next->size = 0;
    const unsigned char c = static_cast<unsigned char>(text[pos]);
    for (uint32_t k = 0; k < cur->size; ++k) {
      const uint32_t pc = cur->dense[k];
      const Program::Inst &i = prog.code[pc];
      if (i.op == Program::kClass && prog.classes[i.x].test(c))
        add_thread(prog, *next, stack, pc + 1, pos + 1, text.size());
    }
    std::swap(cur, next);
  }
  return cur->contains(static_cast<uint32_t>(n - 1));
}

}  // namespace

std::optional<NameRegex> NameRegex::compile(std::string_view pattern, std::string *error) {
  std::string scratch;
  std::string &err = error ? *error : scratch;
  try {
    if (pattern.size() > kMaxPatternBytes) {
      err = "pattern longer than " + std::to_string(kMaxPatternBytes) + " bytes";
      return std::nullopt;
    }
    auto prog = std::make_shared<Program>();
    prog->pattern = std::string(pattern);
    Parser parser(pattern, *prog);
    const std::optional<uint32_t> root = parser.parse();
    if (!root) {
      err = parser.error();
      return std::nullopt;
    }
    std::vector<std::string> words;
    const bool literal = collect_literals(parser.nodes(), *prog, *root, &words);
    size_t longest = 0;
    for (const std::string &w : words) longest = std::max(longest, w.size());
    if (literal && (!prog->icase || longest <= 256)) {
      prog->literal_only = true;
      prog->longest_literal = longest;
      prog->literals.insert(words.begin(), words.end());
    } else {
      Compiler compiler(parser.nodes(), *prog);
      if (!compiler.compile(*root)) {
        err = "pattern too large (more than " + std::to_string(kMaxProgram) + " instructions after expanding repeats)";
        return std::nullopt;
      }
    }
    NameRegex re;
    re.prog_ = std::move(prog);
    return re;
  } catch (const std::bad_alloc &) {
    err = "out of memory while compiling the pattern";
  } catch (...) {
    err = "internal error while compiling the pattern";
  }
  return std::nullopt;
}

bool NameRegex::matches(std::string_view text) const noexcept {
  if (!prog_) return false;
  if (prog_->literal_only) {
    if (!prog_->icase) return prog_->literals.find(text) != prog_->literals.end();
    char buf[256];  // compile() takes the fast path only for words that fit
    if (text.size() > prog_->longest_literal) return false;
    for (size_t i = 0; i < text.size(); ++i) buf[i] = ascii_lower(text[i]);
    return prog_->literals.find(std::string_view(buf, text.size())) != prog_->literals.end();
  }
  return run(*prog_, text);
}

const std::string &NameRegex::pattern() const noexcept {
  static const std::string empty;
  return prog_ ? prog_->pattern : empty;
}

// ===================================================================================================================
// KernelFilter
// ===================================================================================================================

namespace {

constexpr std::string_view kRegexPrefix = "name-regex(";

// Index of the ')' closing a name-regex( whose regex starts at `from`, following escapes, [...] and nested
// groups; npos if there is none.
size_t find_regex_end(std::string_view s, size_t from) {
  int depth = 0;
  for (size_t i = from; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '\\') {
      ++i;
    } else if (c == '[') {
      size_t j = i + 1;
      if (j < s.size() && s[j] == '^') ++j;
      if (j < s.size() && s[j] == ']') ++j;  // a leading ']' is a literal
      for (; j < s.size() && s[j] != ']'; ++j) {
        if (s[j] == '\\') {
          ++j;
        } else if (s[j] == '[' && j + 1 < s.size() && s[j + 1] == ':') {
          const size_t end = s.find(":]", j + 2);
          if (end != std::string_view::npos) j = end + 1;
        }
      }
      i = j;  // at the closing ']' (or the end: the regex parser reports the missing ']')
    } else if (c == '(') {
      ++depth;
    } else if (c == ')') {
      if (depth == 0) return i;
      --depth;
    }
  }
  return std::string_view::npos;
}

bool name_char(unsigned char c) { return is_alnum(c) || c == '_' || c == '-' || c == '.'; }

// An item as quoted in a warning: at most 64 bytes, anything but printable ASCII as \xNN.
std::string shown(std::string_view s) {
  std::string out;
  for (const char c : s.substr(0, 64)) {
    const unsigned char u = static_cast<unsigned char>(c);
    out += (u >= 0x20 && u < 0x7f && c != '"' && c != '\\') ? std::string(1, c) : show_byte(u);
  }
  if (s.size() > 64) out += "...";
  return out;
}

}  // namespace

size_t KernelFilter::Hash::operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }

size_t KernelFilter::CaseInsensitiveHash::operator()(std::string_view s) const noexcept {
  uint64_t h = kFnv1aOffset;  // over the lower-cased bytes
  for (const char c : s) h = fnv1a_step(h, static_cast<unsigned char>(ascii_lower(c)));
  return h;
}

bool KernelFilter::CaseInsensitiveEq::operator()(std::string_view a, std::string_view b) const noexcept {
  return iequals(a, b);
}

bool KernelFilter::add_item(std::string_view raw, std::string *error, std::string *warning) {
  std::string scratch;
  std::string &err = error ? *error : scratch;
  const std::string_view item = trim(raw);
  if (item.empty()) {
    err = "empty item";
    return false;
  }
  const auto warn = [&](std::string w) {
    if (warning) *warning = std::move(w);
  };
  if (seen_.find(item) != seen_.end()) {
    warn("item \"" + shown(item) + "\" is listed twice");
    return true;
  }
  seen_.emplace(item);
  if (item.substr(0, kRegexPrefix.size()) == kRegexPrefix) {
    const size_t end = find_regex_end(item, kRegexPrefix.size());
    if (end == std::string_view::npos || end + 1 != item.size()) {
      err = end == std::string_view::npos ? "name-regex( has no closing )"
                                          : "unexpected text after the closing ) of name-regex(...)";
      return false;
    }
    std::string why;
    std::optional<NameRegex> re = NameRegex::compile(item.substr(kRegexPrefix.size(), end - kRegexPrefix.size()), &why);
    if (!re) {
      err = "bad regular expression in name-regex(...): " + why;
      return false;
    }
    regexes_.push_back(std::move(*re));
    items_.emplace_back(item);
    return true;
  }
  // A kernel name may be given with its direction token or without: the sets hold names without it.
  const std::string_view stem = format::kernel_stem(item);
  size_t dots = 0;
  bool clean = true;
  for (const char c : stem) {
    dots += c == '.';
    clean = clean && name_char(static_cast<unsigned char>(c));
  }
  if (!clean || dots > 2 || (stem.size() != item.size() && dots != 2)) {
    warn("item \"" + shown(item) +
         "\" can never match: kernel names are OpType.OpName.n.forward, each part made of [A-Za-z0-9_-]");
  }
  if (dots == 0) {
    op_types_.emplace(item);
  } else {
    (dots == 1 ? base_names_ : kernel_names_).emplace(stem);
    name_op_types_.emplace(item.substr(0, item.find('.')));
  }
  items_.emplace_back(item);
  return true;
}

bool KernelFilter::matches(std::string_view op_type, std::string_view kernel_name) const noexcept {
  if (!op_types_.empty() && op_types_.find(op_type) != op_types_.end()) return true;
  if (!kernel_names_.empty() && kernel_names_.find(format::kernel_stem(kernel_name)) != kernel_names_.end())
    return true;
  if (!base_names_.empty()) {
    const std::string_view base = format::kernel_base_of(kernel_name);
    if (!base.empty() && base_names_.find(base) != base_names_.end()) return true;
  }
  for (const NameRegex &re : regexes_) {
    if (re.matches(kernel_name)) return true;
  }
  return false;
}

bool KernelFilter::may_match_type(std::string_view op_type) const noexcept {
  if (!regexes_.empty()) return true;
  return op_types_.find(op_type) != op_types_.end() || name_op_types_.find(op_type) != name_op_types_.end();
}

std::string KernelFilter::to_string() const {
  std::string out;
  for (const std::string &i : items_) {
    if (!out.empty()) out += ',';
    out += i;
  }
  return out;
}

bool split_filter_items(std::string_view text, std::vector<std::string> *items, std::string *error) {
  std::string scratch;
  std::string &err = error ? *error : scratch;
  size_t i = 0;
  size_t index = 0;
  while (true) {
    while (i < text.size() && is_space(text[i])) ++i;
    const size_t start = i;
    size_t end;
    if (text.substr(i, kRegexPrefix.size()) == kRegexPrefix) {
      const size_t close = find_regex_end(text, i + kRegexPrefix.size());
      if (close == std::string_view::npos) {
        err = "item " + std::to_string(index + 1) + ": name-regex( has no closing )";
        return false;
      }
      end = close + 1;
      while (end < text.size() && is_space(text[end])) ++end;
      if (end < text.size() && text[end] != ',') {
        err = "item " + std::to_string(index + 1) + ": unexpected text after the closing ) of name-regex(...)";
        return false;
      }
    } else {
      end = text.find(',', i);
      if (end == std::string_view::npos) end = text.size();
    }
    const std::string_view item = trim(text.substr(start, end - start));
    if (item.empty()) {
      err = "item " + std::to_string(index + 1) + " is empty";
      return false;
    }
    items->emplace_back(item);
    ++index;
    if (end >= text.size()) return true;
    i = end + 1;  // past ','
  }
}

}  // namespace msprobe::shim
