// Which kernels a filter selects: MSPROBE_LIST / config.json "list", the two ends of MSPROBE_SCOPE, and the
// MSPROBE_STEP_MARKER regex.
//
// Kernel names are `{OpType}.{OpName}.{n}.forward` (spec §5; every part is [A-Za-z0-9_-]). A filter item is one of
//   - an op type (no '.'):               `Matmul`          matches every kernel of that type, case-insensitively;
//   - a base name (one '.'):             `Matmul.Default`  matches `Matmul.Default.{n}.forward` for every n;
//   - a kernel name, with or without its direction token (`Matmul.Default.3` or `Matmul.Default.3.forward`):
//                                        that kernel only;
//   - `name-regex(R)`:                   R must match the WHOLE kernel name (RE2 FullMatch, as msprobe's L2 list).
//
// NameRegex is our own engine for an RE2 subset rather than std::regex: libstdc++'s std::regex recurses once per
// pattern character while compiling and once per input character while matching, and overflows a 64 KiB thread
// stack with a 1000-character pattern. Ours parses iteratively (nesting limited to 32 groups), compiles to a Thompson
// NFA and matches in O(text x program) time with no recursion and, for small programs, no allocation - it runs on
// every kernel launch, on whatever thread launches it. A pattern that is a plain alternation of words (the default
// step marker) is matched by one hash lookup.
//
// Supported syntax (bytes, not code points; kernel names are ASCII): literals; `.` (any byte but \n); `[...]` and
// `[^...]` with ranges, escapes and [:alpha:]-style classes; \d \D \w \W \s \S \t \n \r \f \v \a \xHH \A \z; any
// escaped punctuation; `^` `$`; `( )` and `(?: )` groups; `|`; `* + ?` `{n}` `{n,}` `{n,m}` (n, m <= 1000) with
// an optional lazy `?` (meaningless for a yes/no full match); a leading `(?i)` for case-insensitive matching. Not
// supported (an error, never an exception): back-references, look-around, \b, \p{...}, other flag groups.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace msprobe::shim {

class NameRegex {
 public:
  static constexpr size_t kMaxPatternBytes = 16 * 1024;
  static constexpr size_t kMaxNesting = 32;
  static constexpr size_t kMaxProgram = 20000;  // instructions after expanding counted repeats
  static constexpr int kMaxRepeat = 1000;       // as RE2

  NameRegex() = default;  // empty: matches nothing
  // nullopt and *error = a short one-line reason ("missing closing ) at offset 4") if the pattern is not valid.
  static std::optional<NameRegex> compile(std::string_view pattern, std::string *error);

  bool empty() const noexcept { return prog_ == nullptr; }
  bool matches(std::string_view text) const noexcept;  // full match
  const std::string &pattern() const noexcept;

  struct Program;

 private:
  std::shared_ptr<const Program> prog_;
};

class KernelFilter {
 public:
  // Adds one item (already split; surrounding whitespace is trimmed here). False and *error (one line, no prefix)
  // for an empty item, a name-regex(...) without its closing ')' or with a bad regex. *warning (may be null) gets a
  // note for an item that is valid but can never match a kernel name (a character outside [A-Za-z0-9_.-], more
  // than two '.') or that repeats an earlier item.
  bool add_item(std::string_view item, std::string *error, std::string *warning = nullptr);

  bool empty() const noexcept { return items_.empty(); }
  size_t size() const noexcept { return items_.size(); }
  const std::vector<std::string> &items() const noexcept { return items_; }
  // op_type: the OpType part of kernel_name (passed separately so that no parsing is needed). An empty filter
  // matches nothing: callers treat an empty list as "every kernel".
  bool matches(std::string_view op_type, std::string_view kernel_name) const noexcept;
  // False when no kernel of this op type can match, whatever its name (decided before launch, e.g. to skip
  // recording phase-1 arguments). A name-regex item may match any op type, so it makes this always true.
  bool may_match_type(std::string_view op_type) const noexcept;
  std::string to_string() const;  // the items joined by ','

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const noexcept;
  };
  struct CaseInsensitiveHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const noexcept;
  };
  struct CaseInsensitiveEq {
    using is_transparent = void;
    bool operator()(std::string_view a, std::string_view b) const noexcept;
  };
  std::vector<std::string> items_;
  std::unordered_set<std::string, Hash, std::equal_to<>> seen_;
  std::unordered_set<std::string, CaseInsensitiveHash, CaseInsensitiveEq> op_types_;
  std::unordered_set<std::string, Hash, std::equal_to<>> base_names_;
  std::unordered_set<std::string, Hash, std::equal_to<>> kernel_names_;
  std::unordered_set<std::string, Hash, std::equal_to<>> name_op_types_;  // OpType part of base and full names
  std::vector<NameRegex> regexes_;
};

// Splits an environment value such as `Add, Matmul.Default.0, name-regex(Mat.{1,3}.*)` at commas into trimmed
// items; a comma inside name-regex(...) belongs to the regex (parentheses, escapes and [...] are followed to find
// the closing ')'). False and *error on an empty item or an unterminated name-regex(.
bool split_filter_items(std::string_view text, std::vector<std::string> *items, std::string *error);

}  // namespace msprobe::shim
