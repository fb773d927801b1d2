// aclnn phase-1 prototypes from the CANN headers: a small, bounded C declaration reader plus a lazy
// op -> header index. Rules and their reasons: docs/prototypes.md.
#include "shim/aclnn/prototypes.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "format/io.h"
#include "shim/base/text.h"

namespace msprobe::shim {
namespace {

// Bounds that keep the work per candidate declaration fixed whatever the input (the parser is fuzzed).
constexpr size_t kMaxDeclChars = 64 * 1024;    // from '(' to ')': real ones are under 4 KB
constexpr size_t kMaxPrefixChars = 64 * 1024;  // backwards search for the start of the declaration
constexpr size_t kMaxCandidates = 64;          // occurrences of the name tried per parse
constexpr size_t kMaxParams = 256;
constexpr size_t kMaxHeaderBytes = 16u << 20;  // larger files are not headers we want
constexpr size_t kMaxHeaderFiles = 200000;
constexpr std::string_view kPhase1Suffix = "GetWorkspaceSize";

bool is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_ident_char(char c) { return is_ident_start(c) || (c >= '0' && c <= '9'); }

bool valid_op_name(std::string_view op) {
  if (op.empty() || op.size() > 256 || !is_ident_start(op[0])) return false;
  return std::all_of(op.begin(), op.end(), is_ident_char);
}

// ---------------------------------------------------------------------------------------------------------------
// Cleaning: comments, string/char literal contents and preprocessor directives become spaces (newlines are kept),
// so that offsets in the clean text are offsets in the original. Comment spans are kept for doxygen.

struct Span {
  size_t begin, end;
};

struct CleanText {
  std::string text;
  std::vector<Span> comments;  // in increasing order
};

// clean()'s work: the input, and its copy being blanked.
class Cleaner {
 public:
  explicit Cleaner(std::string_view in) : in_(in) { out_.text.assign(in.data(), in.size()); }

  CleanText run() &&;

 private:
  bool comment_at(size_t i) const {
    return in_[i] == '/' && i + 1 < in_.size() && (in_[i + 1] == '/' || in_[i + 1] == '*');
  }
  void blank(size_t b, size_t e) {
    for (size_t k = b; k < e; ++k)
      if (out_.text[k] != '\n') out_.text[k] = ' ';
  }
  size_t comment(size_t i);
  size_t literal(size_t i);
  size_t directive(size_t i);

  std::string_view in_;
  CleanText out_;
};

CleanText Cleaner::run() && {
  bool line_start = true;  // only whitespace (or comments) so far on this line
  size_t i = 0;
  while (i < in_.size()) {
    const char c = in_[i];
    if (comment_at(i)) {
      i = comment(i);
    } else if (c == '"' || c == '\'') {
      i = literal(i);
      line_start = false;
    } else if (c == '#' && line_start) {
      i = directive(i);
    } else {
      if (c == '\n') {
        line_start = true;
      } else if (!is_space(c)) {
        line_start = false;
      }
      ++i;
    }
  }
  return std::move(out_);
}

// Blanks and records the comment ("//" or "/*") starting at i; returns its end.
size_t Cleaner::comment(size_t i) {
  size_t e;
  if (in_[i + 1] == '/') {
    e = in_.find('\n', i);
    if (e == std::string_view::npos) e = in_.size();
  } else {
    e = in_.find("*/", i + 2);
    e = (e == std::string_view::npos) ? in_.size() : e + 2;
  }
  out_.comments.push_back({i, e});
  blank(i, e);
  return e;
}

// Blanks the contents of the string or char literal starting at i, keeping the quotes (a literal can contain '('
// or ','); returns the index after it. An unterminated literal ends at the line's end.
size_t Cleaner::literal(size_t i) {
  const size_t n = in_.size();
  const char quote = in_[i];
  size_t k = i + 1;
  while (k < n && in_[k] != quote && in_[k] != '\n') k += (in_[k] == '\\' && k + 1 < n) ? 2 : 1;
  const size_t e = std::min(k, n);
  blank(i + 1, e);
  return (e < n && in_[e] == quote) ? e + 1 : e;
}

// Blanks the preprocessor directive starting at i: it runs to the end of the line, continued by backslash-newline;
// comments inside count as comments (a block comment may carry it over several lines). Returns its end.
size_t Cleaner::directive(size_t i) {
  const size_t n = in_.size();
  std::string &t = out_.text;
  size_t k = i;
  while (k < n && in_[k] != '\n') {
    if (comment_at(k)) {
      k = comment(k);
    } else if (in_[k] == '\\' && k + 1 < n && in_[k + 1] == '\n') {
      t[k] = ' ';
      k += 2;
    } else if (in_[k] == '\\' && k + 2 < n && in_[k + 1] == '\r' && in_[k + 2] == '\n') {
      t[k] = t[k + 1] = ' ';
      k += 3;
    } else {
      t[k] = ' ';
      ++k;
    }
  }
  return k;
}

CleanText clean(std::string_view in) { return Cleaner(in).run(); }

// ---------------------------------------------------------------------------------------------------------------
// One parameter: a tiny tokenizer over its (clean) text, then classification by type and name.

struct RawParam {
  Param param;
  std::string base;  // base type words joined by one space ("const" etc. removed): "aclTensor", "unsigned long"
  int depth = 0;     // pointer depth, arrays included
  bool pointee_const = false;
  bool is_enum = false;  // declared with the `enum` keyword
};

bool is_builtin_word(std::string_view w) {
  static constexpr std::string_view kWords[] = {"signed", "unsigned", "short", "long", "int",  "char",
                                                "float",  "double",   "void",  "bool", "_Bool"};
  return std::find(std::begin(kWords), std::end(kWords), w) != std::end(kWords);
}

bool is_skipped_word(std::string_view w) {
  static constexpr std::string_view kWords[] = {"restrict", "__restrict", "__restrict__", "register", "__extension__"};
  return std::find(std::begin(kWords), std::end(kWords), w) != std::end(kWords);
}

bool is_attribute_word(std::string_view w) {
  return w == "__attribute__" || w == "__attribute" || w == "__declspec" || w == "alignas" || w == "_Alignas";
}

// Index just past the group opened at s[i] (one of "([{"), or npos when it is not closed.
size_t skip_group(std::string_view s, size_t i) {
  int depth = 0;
  for (size_t k = i; k < s.size(); ++k) {
    const char c = s[k];
    if (c == '(' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == ']' || c == '}') {
      if (--depth == 0) return k + 1;
      if (depth < 0) return std::string_view::npos;
    }
  }
  return std::string_view::npos;
}

// Text of a type as written, name removed: identifiers separated by one space, '*' attached to what follows
// ("const aclTensor *", "aclTensor *const", "aclOpExecutor **").
void append_type_token(std::string &out, std::string_view tok) {
  if (out.empty()) {
    out = tok;
    return;
  }
  const char last = out.back();
  if (tok == "*") {
    if (last != '*') out += ' ';
  } else if (last != '*') {
    out += ' ';
  }
  out += tok;
}

// Builtin words (any order, as C allows) -> kind; false for combinations we do not forward (long double, void).
bool builtin_kind(const std::vector<std::string_view> &words, ParamKind *kind) {
  int n_long = 0, n_short = 0, n_int = 0, n_char = 0, n_signed = 0, n_unsigned = 0, n_other = 0;
  std::string_view other;
  for (auto w : words) {
    if (w == "long")
      ++n_long;
    else if (w == "short")
      ++n_short;
    else if (w == "int")
      ++n_int;
    else if (w == "char")
      ++n_char;
    else if (w == "signed")
      ++n_signed;
    else if (w == "unsigned")
      ++n_unsigned;
    else {
      ++n_other;
      other = w;
    }
  }
  const bool is_unsigned = n_unsigned > 0;
  if (n_signed + n_unsigned > 1 || n_int > 1 || n_char > 1 || n_short > 1 || n_long > 2) return false;
  if (n_other > 0) {
    // float, double, bool, void: alone.
    if (n_other > 1 || n_long + n_short + n_int + n_char + n_signed + n_unsigned > 0) return false;
    if (other == "float")
      *kind = ParamKind::Float;
    else if (other == "double")
      *kind = ParamKind::Double;
    else if (other == "bool" || other == "_Bool")
      *kind = ParamKind::Bool;
    else
      return false;
    return true;
  }
  if (n_char) {
    if (n_long || n_short || n_int) return false;
    *kind = is_unsigned ? ParamKind::UInt8 : ParamKind::Int8;  // plain char recorded as signed (x86-64)
  } else if (n_short) {
    if (n_long) return false;
    *kind = is_unsigned ? ParamKind::UInt16 : ParamKind::Int16;
  } else if (n_long) {
    *kind = is_unsigned ? ParamKind::UInt64 : ParamKind::Int64;  // LP64: long is 64-bit
  } else {
    *kind = is_unsigned ? ParamKind::UInt32 : ParamKind::Int32;  // int, signed, unsigned
  }
  return true;
}

struct TypedefKind {
  std::string_view name;
  ParamKind kind;
};

// By-value typedef names the shim can forward and record. Anything else by value fails the parse: an unknown
// type could be a struct passed in several registers, and guessing wrong would corrupt the host's call.
constexpr TypedefKind kValueTypedefs[] = {
    {"int8_t", ParamKind::Int8},
    {"int16_t", ParamKind::Int16},
    {"int32_t", ParamKind::Int32},
    {"int64_t", ParamKind::Int64},
    {"uint8_t", ParamKind::UInt8},
    {"uint16_t", ParamKind::UInt16},
    {"uint32_t", ParamKind::UInt32},
    {"uint64_t", ParamKind::UInt64},
    {"size_t", ParamKind::UInt64},
    {"ssize_t", ParamKind::Int64},
    {"ptrdiff_t", ParamKind::Int64},
    {"intptr_t", ParamKind::Int64},
    {"uintptr_t", ParamKind::UInt64},
    {"aclFloat16", ParamKind::UInt16},
    {"aclnnStatus", ParamKind::Int32},
    {"aclError", ParamKind::Int32},
    {"aclDataType", ParamKind::DataType},
    // int-sized enums of the CANN headers
    {"aclFormat", ParamKind::OtherEnum},
    {"aclrtMemcpyKind", ParamKind::OtherEnum},
    {"aclrtMemMallocPolicy", ParamKind::OtherEnum},
    {"aclMemType", ParamKind::OtherEnum},
    {"aclrtRunMode", ParamKind::OtherEnum},
    {"HcclDataType", ParamKind::OtherEnum},
    {"HcclReduceOp", ParamKind::OtherEnum},
    {"aclCompileType", ParamKind::OtherEnum},
    {"aclopEngineType", ParamKind::OtherEnum},
    // pointer typedefs
    {"aclrtStream", ParamKind::OtherPointer},
    {"aclrtEvent", ParamKind::OtherPointer},
    {"aclrtContext", ParamKind::OtherPointer},
    {"aclrtNotify", ParamKind::OtherPointer},
    {"HcclComm", ParamKind::OtherPointer},
    {"rtStream_t", ParamKind::OtherPointer},
    {"rtEvent_t", ParamKind::OtherPointer},
    {"rtContext_t", ParamKind::OtherPointer},
};

constexpr TypedefKind kPointeeKinds[] = {
    {"aclTensor", ParamKind::Tensor},       {"aclTensorList", ParamKind::TensorList},
    {"aclScalar", ParamKind::Scalar},       {"aclScalarList", ParamKind::ScalarList},
    {"aclIntArray", ParamKind::IntArray},   {"aclFloatArray", ParamKind::FloatArray},
    {"aclBoolArray", ParamKind::BoolArray},
};

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Index just past the identifier starting at s[i].
size_t ident_end(std::string_view s, size_t i) {
  while (i < s.size() && is_ident_char(s[i])) ++i;
  return i;
}

// Index of the first non-space at or after s[i] (s.size() if none).
size_t skip_spaces(std::string_view s, size_t i) {
  while (i < s.size() && is_space(s[i])) ++i;
  return i;
}

// What a parameter's text is made of.
struct ParamTokens {
  struct Word {
    std::string_view text;
    int stars_before;
    size_t token;  // index in `tokens`
  };
  std::vector<Word> words;
  std::vector<std::string_view> tokens;  // what the type text is rebuilt from: qualifiers, words, '*'
  int stars = 0, arrays = 0;
  bool const_before_star = false;
  bool is_enum = false;  // declared with the `enum` keyword
  bool function_pointer = false;
  std::string_view fp_name;
};

// Splits one parameter's (clean) text into ParamTokens. Each step returns false when the text is not a plain C
// parameter we can forward.
class ParamLexer {
 public:
  ParamLexer(std::string_view text, ParamTokens &out) : s_(text), t_(out) {}

  bool run();

 private:
  bool word();
  bool star();
  bool bracket();
  bool function_pointer();

  std::string_view s_;
  size_t i_ = 0;
  ParamTokens &t_;
};

bool ParamLexer::run() {
  while (i_ < s_.size()) {
    const char c = s_[i_];
    bool ok;
    if (is_space(c)) {
      ++i_;
      ok = true;
    } else if (is_ident_start(c)) {
      ok = word();
    } else if (c == '*') {
      ok = star();
    } else if (c == '[') {
      ok = bracket();
    } else if (c == '(') {
      ok = function_pointer();
    } else if (c == '=') {
      return true;  // a C++ default argument does not change the ABI
    } else {
      return false;  // '&', '::', '<', digits, '...': not a C parameter we understand
    }
    if (!ok) return false;
  }
  return true;
}

bool ParamLexer::word() {
  const size_t e = ident_end(s_, i_);
  const std::string_view w = s_.substr(i_, e - i_);
  i_ = e;
  if (is_attribute_word(w)) {
    i_ = skip_spaces(s_, i_);
    if (i_ >= s_.size() || s_[i_] != '(') return false;
    i_ = skip_group(s_, i_);
    return i_ != std::string_view::npos;
  }
  if (t_.function_pointer || t_.arrays > 0) return false;  // nothing may follow `(*f)(...)` or `x[]`
  if (w == "const" || w == "volatile") {
    if (t_.stars == 0 && w == "const") t_.const_before_star = true;
    t_.tokens.push_back(w);
    return true;
  }
  if (w == "enum") t_.is_enum = true;
  if (w == "enum" || w == "struct" || w == "union") {
    t_.tokens.push_back(w);
    return true;
  }
  if (is_skipped_word(w)) return true;
  t_.words.push_back({w, t_.stars, t_.tokens.size()});
  t_.tokens.push_back(w);
  return true;
}

bool ParamLexer::star() {
  if (t_.arrays > 0 || t_.function_pointer) return false;
  ++t_.stars;
  t_.tokens.push_back("*");
  ++i_;
  return true;
}

// `[[attribute]]`, skipped, or an array, which decays to a pointer.
bool ParamLexer::bracket() {
  if (i_ + 1 < s_.size() && s_[i_ + 1] == '[') {
    const size_t e = s_.find("]]", i_ + 2);
    if (e == std::string_view::npos) return false;
    i_ = e + 2;
    return true;
  }
  const size_t e = skip_group(s_, i_);
  if (e == std::string_view::npos || t_.function_pointer) return false;
  ++t_.arrays;
  i_ = e;
  return true;
}

// Only `ret (*name)(args)`: a function pointer, forwarded as a pointer.
bool ParamLexer::function_pointer() {
  if (t_.function_pointer || t_.arrays > 0) return false;
  const size_t e = skip_group(s_, i_);
  if (e == std::string_view::npos) return false;
  std::string_view inner = trim(s_.substr(i_ + 1, e - i_ - 2));
  if (inner.empty() || inner[0] != '*') return false;
  while (!inner.empty() && (inner[0] == '*' || is_space(inner[0]))) inner.remove_prefix(1);
  if (!std::all_of(inner.begin(), inner.end(), is_ident_char)) return false;
  t_.fp_name = inner;
  const size_t k = skip_spaces(s_, e);
  if (k >= s_.size() || s_[k] != '(') return false;
  const size_t args_end = skip_group(s_, k);
  if (args_end == std::string_view::npos) return false;
  t_.function_pointer = true;
  i_ = args_end;
  return true;
}

// The last word names the parameter unless it is a builtin word or the only word (`int64_t`, `aclTensor *`); the
// rest is the base type, all before any '*'. Sets r's name; *name_token: the name's index in t.tokens (or SIZE_MAX).
bool split_name(ParamTokens &t, RawParam &r, size_t *name_token, std::vector<std::string_view> *base_words) {
  *name_token = SIZE_MAX;
  if (t.words.size() >= 2 && !is_builtin_word(t.words.back().text)) {
    if (t.words.back().stars_before != t.stars) return false;  // `a *name *`: not C
    r.param.name = std::string(t.words.back().text);
    *name_token = t.words.back().token;
    t.words.pop_back();
  }
  for (const auto &w : t.words) {
    if (w.stars_before != 0) return false;
    base_words->push_back(w.text);
  }
  return true;
}

template <size_t N>
const TypedefKind *find_typedef(const TypedefKind (&table)[N], std::string_view name) {
  const auto it =
      std::find_if(std::begin(table), std::end(table), [&](const TypedefKind &t) { return t.name == name; });
  return it == std::end(table) ? nullptr : it;
}

// The kind of a parameter from its base type and pointer depth; false for a by-value type we cannot forward.
bool param_kind(const RawParam &r, const std::vector<std::string_view> &base_words, bool all_builtin, ParamKind *kind) {
  *kind = ParamKind::OtherPointer;
  if (r.depth == 0) {
    if (all_builtin) return builtin_kind(base_words, kind);
    if (r.is_enum) {
      *kind = ParamKind::OtherEnum;
      return true;
    }
    const TypedefKind *t = find_typedef(kValueTypedefs, r.base);
    if (t != nullptr) *kind = t->kind;
    return t != nullptr;
  }
  if (r.depth == 1) {
    if (const TypedefKind *t = find_typedef(kPointeeKinds, r.base)) {
      *kind = t->kind;
    } else if (all_builtin && std::find(base_words.begin(), base_words.end(), "char") != base_words.end()) {
      *kind = ParamKind::CString;
    }
  }
  return true;
}

// Tokenizes one parameter and classifies it. False when it is not a plain C parameter we can forward.
bool parse_param(std::string_view text, RawParam *out) {
  ParamTokens t;
  RawParam &r = *out;
  const bool lexed = ParamLexer(text, t).run();
  r.is_enum = t.is_enum;
  if (!lexed || t.words.empty()) return false;
  if (t.function_pointer) {
    r.param.kind = ParamKind::OtherPointer;
    r.param.name = std::string(t.fp_name);
    r.param.type_text = "function pointer";
    r.depth = 1;
    return true;
  }
  size_t name_token;
  std::vector<std::string_view> base_words;  // one typedef name or builtin words
  if (!split_name(t, r, &name_token, &base_words)) return false;
  const bool all_builtin = std::all_of(base_words.begin(), base_words.end(), is_builtin_word);
  if (!all_builtin && base_words.size() != 1) return false;  // `MACRO aclTensor *x` and the like

  for (size_t k = 0; k < t.tokens.size(); ++k)
    if (k != name_token) append_type_token(r.param.type_text, t.tokens[k]);
  for (int a = 0; a < t.arrays; ++a) append_type_token(r.param.type_text, "*");
  r.depth = t.stars + t.arrays;
  r.pointee_const = t.const_before_star;
  for (auto w : base_words) {
    if (!r.base.empty()) r.base += ' ';
    r.base += w;
  }
  ParamKind kind;
  if (!param_kind(r, base_words, all_builtin, &kind)) return false;
  r.param.kind = kind;
  return true;
}

// ---------------------------------------------------------------------------------------------------------------
// Directions (docs/prototypes.md, "Directions"): first what CANN states about each tensor (its comment block, the
// Ref suffix), then names and const-ness, then what the op's name and the order of its parameters imply.

enum class DocDir { None, In, Out, InOut };

// What the comment block before a declaration says about one parameter.
struct DocNote {
  std::string name;
  DocDir tag = DocDir::None;    // `@param [in] name`, `[out]`, `[in,out]`
  DocDir words = DocDir::None;  // what the words of its description say
};

// CANN's words for a parameter's role at the start of its description: output / input argument, computed output /
// input, optional output / input argument, output / input tensor. Most headers tag every parameter `[in]` (outputs
// too: the tag is template text), but these words are written per parameter.
constexpr std::string_view kOutputLead[] = {"出参", "计算输出", "可选输出", "输出张量", "输出Tensor", "输出tensor"};
constexpr std::string_view kInputLead[] = {"入参", "计算输入", "可选入参", "输入张量", "输入Tensor", "输入tensor"};
// Anywhere in the description: "<op>计算的出参", the output argument of the <op> computation (and its input twin).
constexpr std::string_view kOutputAnywhere = "计算的出参";
constexpr std::string_view kInputAnywhere = "计算的入参";
constexpr size_t kMaxDescriptionChars = 1024;  // the words are looked for in this much of a description
constexpr size_t kMaxDocNotes = 512;           // parameter entries read per declaration: real blocks have < 64

DocDir words_direction(std::string_view desc) {
  desc = desc.substr(0, kMaxDescriptionChars);
  size_t k = 0;
  while (k < desc.size()) {  // separators between the name and its description: spaces, ':', '：', '*', ','
    if (is_space(desc[k]) || desc[k] == ':' || desc[k] == '*' || desc[k] == ',') {
      ++k;
    } else if (desc.substr(k, 3) == "：") {
      k += 3;
    } else {
      break;
    }
  }
  const std::string_view lead = desc.substr(k);
  auto leads = [lead](std::string_view w) { return lead.substr(0, w.size()) == w; };
  if (std::any_of(std::begin(kOutputLead), std::end(kOutputLead), leads)) return DocDir::Out;
  if (std::any_of(std::begin(kInputLead), std::end(kInputLead), leads)) return DocDir::In;
  if (desc.find(kOutputAnywhere) != std::string_view::npos) return DocDir::Out;
  if (desc.find(kInputAnywhere) != std::string_view::npos) return DocDir::In;
  return DocDir::None;
}

DocDir tag_direction(std::string_view tag) {
  std::string t;
  for (char c : tag)
    if (!is_space(c)) t += ascii_lower(c);
  if (t == "in") return DocDir::In;
  if (t == "out") return DocDir::Out;
  if (t == "in,out" || t == "in/out" || t == "inout" || t == "in_out") return DocDir::InOut;
  return DocDir::None;
}

// Whether the "param" at c[p] starts a parameter's entry: after '@' or '\' (doxygen), or first on its line but for
// the comment's '*' decoration (CANN's `* param [in] query : required`); followed by a blank or '['.
bool param_marker(std::string_view c, size_t p) {
  const size_t after = p + 5;
  if (after >= c.size() || !(c[after] == '[' || c[after] == ' ' || c[after] == '\t')) return false;
  if (p > 0 && (c[p - 1] == '@' || c[p - 1] == '\\')) return true;
  size_t k = p;
  while (k > 0 && (c[k - 1] == ' ' || c[k - 1] == '\t' || c[k - 1] == '*' || c[k - 1] == '/')) --k;
  return k == 0 || c[k - 1] == '\n';
}

// One comment's parameter entries: `param [tag] name description`, the description running to the next entry.
void comment_notes(std::string_view c, std::vector<DocNote> *notes) {
  const size_t first = notes->size();
  size_t described = 0;  // where the description of the last entry found begins
  size_t p = 0;
  while ((p = c.find("param", p)) != std::string_view::npos && notes->size() < kMaxDocNotes) {
    const size_t start = p;
    p += 5;
    if (!param_marker(c, start)) continue;
    DocNote note;
    size_t k = skip_spaces(c, p);
    if (k < c.size() && c[k] == '[') {
      const size_t close = c.find(']', k);
      if (close == std::string_view::npos || close - k > 16) continue;
      note.tag = tag_direction(c.substr(k + 1, close - k - 1));
      k = skip_spaces(c, close + 1);
    }
    const size_t e = ident_end(c, k);
    if (e == k) continue;
    note.name = std::string(c.substr(k, e - k));
    if (notes->size() > first) notes->back().words = words_direction(c.substr(described, start - described));
    notes->push_back(std::move(note));
    described = p = e;
  }
  if (notes->size() > first) notes->back().words = words_direction(c.substr(described));
}

// The parameter entries of the comments between `from` and `to` (the declaration's statement, up to its name).
std::vector<DocNote> doc_notes(std::string_view original, const std::vector<Span> &comments, size_t from, size_t to) {
  std::vector<DocNote> notes;
  auto first =
      std::lower_bound(comments.begin(), comments.end(), from, [](const Span &s, size_t pos) { return s.begin < pos; });
  for (auto it = first; it != comments.end() && it->begin < to; ++it)
    comment_notes(original.substr(it->begin, it->end - it->begin), &notes);
  return notes;
}

bool is_tensor_param(const RawParam &r) {
  return r.param.kind == ParamKind::Tensor || r.param.kind == ParamKind::TensorList;
}

// Names CANN gives outputs: out, *Out, *OutOptional, gradInput (and the snake-case grad_input, dst_out).
bool output_name(std::string_view n) {
  return n == "out" || n == "outOptional" || ends_with(n, "Out") || ends_with(n, "OutOptional") || n == "gradInput" ||
         n == "grad_input" || (ends_with(n, "_out") && n != "grad_out");
}

// The incoming gradient of backward ops (LayerNormBackward, SmoothL1LossBackward): ends in Out, but is read.
bool incoming_grad(std::string_view n) { return n == "gradOut" || n == "gradOutOptional" || n == "grad_out"; }

struct DirectionNotes {
  const std::vector<DocNote> &notes;
  bool tags_state;  // some tensor is tagged [out] or [in,out], so this block's [in] tags mean it too

  const DocNote *find(std::string_view name) const {
    for (const auto &n : notes)
      if (!name.empty() && n.name == name) return &n;
    return nullptr;
  }
};

Direction from_doc(DocDir d) {
  return d == DocDir::Out ? Direction::Output : d == DocDir::InOut ? Direction::InOut : Direction::Input;
}

// What is known of one tensor on its own: CANN's statements first, then names, then const-ness.
void stated_direction(RawParam &r, const DirectionNotes &docs) {
  Param &p = r.param;
  const std::string_view name = p.name;
  auto set = [&p](Direction d, DirectionRule rule) {
    p.dir = d;
    p.dir_rule = rule;
  };
  const DocNote *note = docs.find(name);
  if (ends_with(name, "Ref") || ends_with(name, "RefOptional")) {
    set(Direction::InOut, DirectionRule::Ref);
  } else if (note && note->tag != DocDir::None && (docs.tags_state || note->tag != DocDir::In)) {
    set(from_doc(note->tag), DirectionRule::Doc);
  } else if (note && note->words != DocDir::None) {
    set(from_doc(note->words), DirectionRule::Doc);
  } else if (incoming_grad(name)) {
    set(r.pointee_const ? Direction::Input : Direction::Output,
        r.pointee_const ? DirectionRule::Name : DirectionRule::Writable);
  } else if (output_name(name)) {
    set(Direction::Output, DirectionRule::Name);  // CANN declares some outputs const (Relu out, RmsNorm yOut)
  } else if (!r.pointee_const) {
    set(Direction::Output, DirectionRule::Writable);
  } else if (ends_with(name, "Optional")) {
    set(Direction::Input, DirectionRule::Name);  // CANN's optional inputs (optional outputs are *OutOptional)
  } else {
    set(Direction::Input, DirectionRule::Const);
  }
}

bool writes(const Param &p) { return p.dir == Direction::Output || p.dir == Direction::InOut; }

// What the op's name and the order of its tensors imply: an Inplace op writes its first tensor; outputs come after
// inputs; every op writes something.
void positional_directions(const std::vector<Param *> &t, std::string_view op) {
  if (t.empty()) return;
  auto set = [](Param *p, Direction d, DirectionRule rule) {
    p->dir = d;
    p->dir_rule = rule;
  };
  const bool inplace = op.substr(0, 7) == "Inplace" || ends_with(op, "Inplace");  // ForeachAddListInplace
  if (inplace && t[0]->dir != Direction::InOut) set(t[0], Direction::InOut, DirectionRule::Inplace);
  // Outputs come after the last tensor CANN states (or names) an input.
  size_t start = 0;
  for (size_t i = 0; i < t.size(); ++i)
    if (t[i]->dir == Direction::Input && t[i]->dir_rule != DirectionRule::Const) start = i + 1;
  auto none_writes = [&t] { return std::none_of(t.begin(), t.end(), [](const Param *p) { return writes(*p); }); };
  // When nothing else marks an output, the last of CANN's letter names is the output: x -> y, (x, y) -> z.
  if (none_writes()) {
    Param *letter = nullptr;
    for (size_t i = start; i < t.size(); ++i)
      if (t[i]->name == "z" || (t[i]->name == "y" && !letter)) letter = t[i];
    if (letter && letter->dir_rule == DirectionRule::Const) set(letter, Direction::Output, DirectionRule::Position);
  }
  // After an output CANN states or names, an unstated tensor is an output too (FusedInferAttentionScore's
  // softmaxLse after attentionOut, QuantMax's amax after y).
  bool after_output = false;
  for (size_t i = start; i < t.size(); ++i) {
    const DirectionRule r = t[i]->dir_rule;
    if (writes(*t[i]) && (r == DirectionRule::Doc || r == DirectionRule::Name || r == DirectionRule::Position))
      after_output = true;
    else if (after_output && r == DirectionRule::Const)
      set(t[i], Direction::Output, DirectionRule::Position);
  }
  if (none_writes()) set(t.back(), Direction::Output, DirectionRule::LastTensor);
}

void assign_directions(std::vector<RawParam> &raw, const std::vector<DocNote> &notes, std::string_view op) {
  bool tags_state = false;
  for (const auto &r : raw)
    for (const auto &n : notes)
      if (is_tensor_param(r) && n.name == r.param.name && (n.tag == DocDir::Out || n.tag == DocDir::InOut))
        tags_state = true;
  const DirectionNotes docs{notes, tags_state};
  std::vector<Param *> tensors;
  for (auto &r : raw) {
    Param &p = r.param;
    p.optional = p.name.find("Optional") != std::string::npos;
    if (is_tensor_param(r)) {
      stated_direction(r, docs);
      tensors.push_back(&p);
    } else if (p.kind == ParamKind::OtherPointer || p.kind == ParamKind::WorkspaceSizeOut ||
               p.kind == ParamKind::ExecutorOut) {
      p.dir = Direction::None;  // no tensor data to capture
    } else {
      p.dir = Direction::Input;  // scalars, arrays, values, strings are read by the op
    }
  }
  positional_directions(tensors, op);
}

// ---------------------------------------------------------------------------------------------------------------
// Declarations.

// Start of the statement that holds the name at `name_pos` in the clean text: just after the previous ';', '{' or
// '}', at most kMaxPrefixChars back.
size_t statement_start(std::string_view t, size_t name_pos) {
  const size_t limit = name_pos > kMaxPrefixChars ? name_pos - kMaxPrefixChars : 0;
  size_t stmt = name_pos;
  while (stmt > limit && t[stmt - 1] != ';' && t[stmt - 1] != '{' && t[stmt - 1] != '}') --stmt;
  return stmt;
}

// What precedes the name in its statement: must mention aclnnStatus (the return type) and be a declaration, not a
// call (`= aclnnX(`, `return aclnnX(`, `f(aclnnX(`).
bool declaration_prefix(std::string_view prefix) {
  const std::string_view before = trim(prefix);
  if (before.empty() || !(is_ident_char(before.back()) || before.back() == ')')) return false;
  if (prefix.find('=') != std::string_view::npos) return false;
  bool has_status = false;
  for (size_t k = 0; k < prefix.size();) {
    if (!is_ident_start(prefix[k])) {
      ++k;
      continue;
    }
    const size_t e = ident_end(prefix, k);
    const std::string_view w = prefix.substr(k, e - k);
    if (w == "aclnnStatus") has_status = true;
    if (w == "return") return false;
    k = e;
  }
  return has_status;
}

// The ')' matching the '(' at `open`, without crossing a statement end; npos if there is none within
// kMaxDeclChars.
size_t matching_paren(std::string_view t, size_t open) {
  int depth = 0;
  const size_t scan_end = std::min(t.size(), open + kMaxDeclChars);
  for (size_t k = open; k < scan_end; ++k) {
    const char c = t[k];
    if (c == ';' || c == '{' || c == '}') return std::string_view::npos;
    if (c == '(' || c == '[') ++depth;
    if (c == ')' || c == ']') {
      if (--depth == 0) return c == ')' ? k : std::string_view::npos;
      if (depth < 0) return std::string_view::npos;
    }
  }
  return std::string_view::npos;
}

// The parameter list split at its top-level commas; false when it has more than kMaxParams pieces.
bool split_params(std::string_view list, std::vector<std::string_view> *pieces) {
  int depth = 0;
  size_t start = 0;
  for (size_t k = 0; k <= list.size(); ++k) {
    if (k == list.size() || (list[k] == ',' && depth == 0)) {
      pieces->push_back(list.substr(start, k - start));
      if (pieces->size() > kMaxParams) return false;
      start = k + 1;
      continue;
    }
    if (list[k] == '(' || list[k] == '[') ++depth;
    if (list[k] == ')' || list[k] == ']') --depth;
  }
  return true;
}

// The phase-1 trailer: (uint64_t *workspaceSize, aclOpExecutor **executor). Marks the pair; false if it is not
// there.
bool mark_phase1_trailer(std::vector<RawParam> &raw) {
  RawParam &ws = raw[raw.size() - 2];
  RawParam &ex = raw.back();
  const bool ws_ok =
      ws.depth == 1 && !ws.pointee_const && !ws.is_enum &&
      (ws.base == "uint64_t" || ws.base == "unsigned long" || ws.base == "unsigned long int" || ws.base == "size_t");
  const bool ex_ok = ex.depth == 2 && ex.base == "aclOpExecutor";
  if (!ws_ok || !ex_ok) return false;
  ws.param.kind = ParamKind::WorkspaceSizeOut;
  ex.param.kind = ParamKind::ExecutorOut;
  return true;
}

// Parses the declaration whose name starts at `name_pos` in the clean text. nullopt if it is not one.
std::optional<OpPrototype> parse_at(std::string_view original, const CleanText &ct, size_t name_pos, size_t name_len,
                                    std::string_view op) {
  const std::string_view t = ct.text;
  const size_t stmt = statement_start(t, name_pos);
  if (!declaration_prefix(t.substr(stmt, name_pos - stmt))) return std::nullopt;
  const size_t open = skip_spaces(t, name_pos + name_len);
  if (open >= t.size() || t[open] != '(') return std::nullopt;
  const size_t close = matching_paren(t, open);
  if (close == std::string_view::npos) return std::nullopt;

  std::vector<std::string_view> pieces;
  if (!split_params(t.substr(open + 1, close - open - 1), &pieces)) return std::nullopt;
  if (pieces.size() == 1 && (trim(pieces[0]).empty() || trim(pieces[0]) == "void")) pieces.clear();
  if (pieces.size() < 2) return std::nullopt;  // at least workspaceSize and executor
  std::vector<RawParam> raw(pieces.size());
  for (size_t k = 0; k < pieces.size(); ++k)
    if (!parse_param(pieces[k], &raw[k])) return std::nullopt;
  if (!mark_phase1_trailer(raw)) return std::nullopt;

  assign_directions(raw, doc_notes(original, ct.comments, stmt, name_pos), op);
  OpPrototype proto;
  proto.op = std::string(op);
  proto.params.reserve(raw.size());
  for (auto &r : raw) proto.params.push_back(std::move(r.param));
  return proto;
}

std::optional<OpPrototype> parse_clean(std::string_view original, const CleanText &ct, std::string_view op) {
  if (!valid_op_name(op)) return std::nullopt;
  std::string name = "aclnn";
  name += op;
  name += kPhase1Suffix;
  const std::string_view t = ct.text;
  size_t pos = 0;
  for (size_t tries = 0; tries < kMaxCandidates; ++tries) {
    pos = t.find(name, pos);
    if (pos == std::string_view::npos) return std::nullopt;
    const size_t end = pos + name.size();
    const bool bounded = (pos == 0 || !is_ident_char(t[pos - 1])) && (end == t.size() || !is_ident_char(t[end]));
    if (bounded) {
      if (auto proto = parse_at(original, ct, pos, name.size(), op)) return proto;
    }
    pos = end;
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------------------------
// Files.

bool read_file(const std::string &path, std::string *out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && static_cast<size_t>(st.st_size) <= kMaxHeaderBytes;
  if (ok) {
    out->resize(static_cast<size_t>(st.st_size));
    const ssize_t got = format::read_full(fd, out->data(), out->size());
    out->resize(got > 0 ? static_cast<size_t>(got) : 0);
  }
  ::close(fd);
  return ok;
}

bool is_dir(const std::string &path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string real_path(const std::string &path) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) == nullptr) return {};
  return buf;
}

// Sorted entry names of a directory (no "." and ".."), with whether each is a directory.
std::vector<std::pair<std::string, bool>> list_dir(const std::string &dir) {
  std::vector<std::pair<std::string, bool>> entries;
  DIR *d = ::opendir(dir.c_str());
  if (d == nullptr) return entries;
  while (const dirent *e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    bool directory = e->d_type == DT_DIR;
    if (e->d_type == DT_LNK || e->d_type == DT_UNKNOWN) directory = is_dir(dir + "/" + name);
    entries.emplace_back(name, directory);
    if (entries.size() > kMaxHeaderFiles) break;
  }
  ::closedir(d);
  std::sort(entries.begin(), entries.end());
  return entries;
}

// Key of a header file name for finding it from an op name: "aclnn_batch_matmul.h" -> "batchmatmul".
std::string stem_key(std::string_view file) {
  if (ends_with(file, ".h")) file.remove_suffix(2);
  if (file.substr(0, 6) == "aclnn_")
    file.remove_prefix(6);
  else if (file.substr(0, 5) == "aclnn")
    file.remove_prefix(5);
  std::string key;
  for (char c : file)
    if (c != '_') key += ascii_lower(c);
  return key;
}

// Keys of the files likely to declare `op`: CANN names a header after its main op and groups variants in it
// (aclnn_add.h: Add, Adds, InplaceAdd; aclnn_gelu_backward_v2.h: GeluBackwardV2).
std::vector<std::string> candidate_keys(std::string_view op) {
  std::string base;
  for (char c : op) base += ascii_lower(c);
  std::vector<std::string> keys;
  auto add = [&](std::string k) {
    if (!k.empty() && std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(std::move(k));
  };
  std::vector<std::string> stems = {base};
  if (base.rfind("inplace", 0) == 0) stems.push_back(base.substr(7));
  for (const auto &s : std::vector<std::string>(stems)) {
    add(s);
    std::string v = s;  // drop a version suffix: v2, v3
    size_t k = v.size();
    while (k > 0 && v[k - 1] >= '0' && v[k - 1] <= '9') --k;
    if (k < v.size() && k > 1 && v[k - 1] == 'v') add(v.substr(0, k - 1));
    if (s.size() > 1 && s.back() == 's') add(s.substr(0, s.size() - 1));  // Adds, Muls
  }
  return keys;
}

}  // namespace

// -----------------------------------------------------------------------------------------------------------------

std::optional<OpPrototype> parse_prototype(std::string_view declaration_text, std::string_view op) noexcept {
  try {
    if (!valid_op_name(op)) return std::nullopt;
    // Cheap reject before cleaning: the name must appear somewhere.
    std::string name = "aclnn";
    name += op;
    name += kPhase1Suffix;
    if (declaration_text.find(name) == std::string_view::npos) return std::nullopt;
    const CleanText ct = clean(declaration_text);
    return parse_clean(declaration_text, ct, op);
  } catch (...) {
    return std::nullopt;
  }
}

std::vector<std::string> declared_ops(std::string_view text) {
  std::vector<std::string> ops;
  std::unordered_set<std::string_view> seen;
  size_t p = 0;
  while ((p = text.find(kPhase1Suffix, p)) != std::string_view::npos) {
    const size_t end = p + kPhase1Suffix.size();
    // Walk back over the identifier, but no further than the longest name accepted (bounded work).
    size_t s = p;
    const size_t floor = p > 262 ? p - 262 : 0;
    while (s > floor && is_ident_char(text[s - 1])) --s;
    const bool bounded = s == 0 || !is_ident_char(text[s - 1]);
    size_t k = end;
    while (k < text.size() && k < end + 256 && is_space(text[k])) ++k;
    const bool call_shape = k < text.size() && text[k] == '(';
    if (bounded && call_shape && p - s > 5 && text.substr(s, 5) == "aclnn") {
      const std::string_view op = text.substr(s + 5, p - s - 5);
      if (valid_op_name(op) && seen.insert(op).second) ops.emplace_back(op);
    }
    p = end;
  }
  return ops;
}

const char *to_string(ParamKind kind) {
  switch (kind) {
    case ParamKind::Tensor: return "Tensor";
    case ParamKind::TensorList: return "TensorList";
    case ParamKind::Scalar: return "Scalar";
    case ParamKind::ScalarList: return "ScalarList";
    case ParamKind::IntArray: return "IntArray";
    case ParamKind::FloatArray: return "FloatArray";
    case ParamKind::BoolArray: return "BoolArray";
    case ParamKind::Double: return "Double";
    case ParamKind::Float: return "Float";
    case ParamKind::Int64: return "Int64";
    case ParamKind::Int32: return "Int32";
    case ParamKind::Int16: return "Int16";
    case ParamKind::Int8: return "Int8";
    case ParamKind::UInt64: return "UInt64";
    case ParamKind::UInt32: return "UInt32";
    case ParamKind::UInt16: return "UInt16";
    case ParamKind::UInt8: return "UInt8";
    case ParamKind::Bool: return "Bool";
    case ParamKind::DataType: return "DataType";
    case ParamKind::OtherEnum: return "OtherEnum";
    case ParamKind::CString: return "CString";
    case ParamKind::OtherPointer: return "OtherPointer";
    case ParamKind::WorkspaceSizeOut: return "WorkspaceSizeOut";
    case ParamKind::ExecutorOut: return "ExecutorOut";
  }
  return "?";
}

const char *to_string(DirectionRule rule) {
  switch (rule) {
    case DirectionRule::None: return "None";
    case DirectionRule::Ref: return "Ref";
    case DirectionRule::Doc: return "Doc";
    case DirectionRule::Name: return "Name";
    case DirectionRule::Writable: return "Writable";
    case DirectionRule::Inplace: return "Inplace";
    case DirectionRule::Position: return "Position";
    case DirectionRule::LastTensor: return "LastTensor";
    case DirectionRule::Const: return "Const";
  }
  return "?";
}

const char *to_string(Direction dir) {
  switch (dir) {
    case Direction::None: return "None";
    case Direction::Input: return "Input";
    case Direction::Output: return "Output";
    case Direction::InOut: return "InOut";
  }
  return "?";
}

// -----------------------------------------------------------------------------------------------------------------
// The index.

struct PrototypeIndex::Impl {
  struct Header {
    std::string path;
    size_t root;
    bool read = false;
  };

  std::vector<std::string> roots;
  mutable std::mutex mu;
  bool listed = false;
  bool all_read = false;
  std::vector<Header> headers;                                          // root order, then sorted path
  std::unordered_multimap<std::string, size_t> by_key;                  // stem_key -> header
  std::unordered_map<std::string, std::vector<size_t>> declaring;       // op -> headers mentioning its phase 1
  std::unordered_map<std::string, std::unique_ptr<OpPrototype>> cache;  // nullptr: known absent
  size_t headers_read = 0;

  void list_once() {
    if (listed) return;
    listed = true;
    std::unordered_set<std::string> seen_roots;
    for (size_t r = 0; r < roots.size(); ++r) {
      const std::string canon = real_path(roots[r]);
      if (canon.empty() || !is_dir(canon) || !seen_roots.insert(canon).second) continue;
      // Flat like 8.x (aclnnop/aclnn_add.h), plus one level of subfolders (older aclnnop/level2/).
      for (const auto &[name, directory] : list_dir(roots[r])) {
        if (headers.size() >= kMaxHeaderFiles) return;
        const std::string path = roots[r] + "/" + name;
        if (directory) {
          for (const auto &[sub, sub_dir] : list_dir(path))
            if (!sub_dir && ends_with(sub, ".h")) add_header(path + "/" + sub, sub, r);
        } else if (ends_with(name, ".h")) {
          add_header(path, name, r);
        }
      }
    }
  }

  void add_header(std::string path, const std::string &file, size_t root) {
    by_key.emplace(stem_key(file), headers.size());
    headers.push_back({std::move(path), root});
  }

  // Reads a header once and records every phase 1 it mentions.
  void index_header(size_t h) {
    Header &hd = headers[h];
    if (hd.read) return;
    hd.read = true;
    std::string text;
    if (!read_file(hd.path, &text)) return;
    ++headers_read;
    for (auto &op : declared_ops(text)) {
      auto &v = declaring[op];
      v.insert(std::lower_bound(v.begin(), v.end(), h), h);
    }
  }

  const OpPrototype *lookup(const std::string &op) {
    if (auto it = cache.find(op); it != cache.end()) return it->second.get();
    list_once();
    if (!declaring.count(op)) {
      for (const auto &key : candidate_keys(op)) {
        auto [b, e] = by_key.equal_range(key);
        for (auto it = b; it != e; ++it) index_header(it->second);
      }
    }
    if (!declaring.count(op) && !all_read) read_all();
    std::unique_ptr<OpPrototype> found = parse_from_known(op);
    if (!found && !all_read) {
      // Only a mention was found (e.g. in another header's comment): look everywhere once.
      read_all();
      found = parse_from_known(op);
    }
    return cache.emplace(op, std::move(found)).first->second.get();
  }

  void read_all() {
    for (size_t h = 0; h < headers.size(); ++h) index_header(h);
    all_read = true;
  }

  // The first header, in root order, whose declaration of `op` parses.
  std::unique_ptr<OpPrototype> parse_from_known(const std::string &op) {
    auto it = declaring.find(op);
    if (it == declaring.end()) return nullptr;
    for (size_t h : it->second) {
      std::string text;
      if (!read_file(headers[h].path, &text)) continue;
      if (auto proto = parse_prototype(text, op)) {
        proto->header_path = headers[h].path;
        return std::make_unique<OpPrototype>(std::move(*proto));
      }
    }
    return nullptr;
  }
};

PrototypeIndex::PrototypeIndex(std::vector<std::string> roots) : impl_(std::make_unique<Impl>()) {
  impl_->roots = std::move(roots);
}
PrototypeIndex::~PrototypeIndex() = default;
PrototypeIndex::PrototypeIndex(PrototypeIndex &&) noexcept = default;
PrototypeIndex &PrototypeIndex::operator=(PrototypeIndex &&) noexcept = default;

const OpPrototype *PrototypeIndex::find(std::string_view op) noexcept {
  try {
    if (!impl_ || !valid_op_name(op)) return nullptr;
    std::lock_guard<std::mutex> lock(impl_->mu);
    return impl_->lookup(std::string(op));
  } catch (...) {
    return nullptr;
  }
}

const std::vector<std::string> &PrototypeIndex::roots() const { return impl_->roots; }

size_t PrototypeIndex::headers_read() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->headers_read;
}

PrototypeIndex PrototypeIndex::from_environment(const std::function<const char *(const char *)> &getenv,
                                                std::vector<std::string> extra_roots) {
  auto env = [&](const char *name) -> std::string {
    const char *v = getenv ? getenv(name) : nullptr;
    std::string s = v ? v : "";
    while (s.size() > 1 && s.back() == '/') s.pop_back();
    return s;
  };
  std::vector<std::string> roots;
  if (auto home = env("ASCEND_HOME_PATH"); !home.empty()) roots.push_back(home + "/include/aclnnop");
  if (auto tk = env("ASCEND_TOOLKIT_HOME"); !tk.empty()) {
    roots.push_back(tk + "/include/aclnnop");
    roots.push_back(tk + "/latest/include/aclnnop");
  }
  std::string opp = env("ASCEND_OPP_PATH");
  // set_env.sh sets both; when only the home is known, its opp/ is where CANN keeps the OPP tree.
  if (opp.empty() && !env("ASCEND_HOME_PATH").empty()) opp = env("ASCEND_HOME_PATH") + "/opp";
  if (!opp.empty()) roots.push_back(opp + "/built-in/op_impl/ai_core/tbe/op_api/include/aclnnop");
  // Custom op packages installed outside the OPP tree.
  if (auto custom = env("ASCEND_CUSTOM_OPP_PATH"); !custom.empty()) {
    size_t s = 0;
    while (s <= custom.size()) {
      size_t e = custom.find(':', s);
      if (e == std::string::npos) e = custom.size();
      if (e > s) roots.push_back(custom.substr(s, e - s) + "/op_api/include");
      s = e + 1;
    }
  }
  if (!opp.empty()) {
    // Vendors in the order CANN loads them (vendors/config.ini: load_priority=a,b), then the rest by name.
    const std::string vendors = opp + "/vendors";
    std::vector<std::string> order;
    std::string ini;
    if (read_file(vendors + "/config.ini", &ini)) {
      size_t line = 0;
      while (line < ini.size()) {
        size_t e = ini.find('\n', line);
        if (e == std::string::npos) e = ini.size();
        std::string_view l = trim(std::string_view(ini).substr(line, e - line));
        if (l.substr(0, 13) == "load_priority") {
          const size_t eq = l.find('=');
          if (eq != std::string_view::npos) {
            std::string_view list = l.substr(eq + 1);
            size_t s = 0;
            while (s <= list.size()) {
              size_t c = list.find(',', s);
              if (c == std::string_view::npos) c = list.size();
              const std::string_view v = trim(list.substr(s, c - s));
              if (!v.empty()) order.emplace_back(v);
              s = c + 1;
            }
          }
        }
        line = e + 1;
      }
    }
    for (const auto &[name, directory] : list_dir(vendors))
      if (directory && std::find(order.begin(), order.end(), name) == order.end()) order.push_back(name);
    for (const auto &v : order) roots.push_back(vendors + "/" + v + "/op_api/include");
  }
  for (auto &r : extra_roots) roots.push_back(std::move(r));
  return PrototypeIndex(std::move(roots));
}

}  // namespace msprobe::shim
