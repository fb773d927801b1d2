// Prototypes of aclnn phase-1 functions, read from the CANN headers at run time.
//
// The shim wraps every `aclnn<Op>GetWorkspaceSize`, including ops it was never built against, so it
// learns each op's parameter list (types for bit-exact forwarding, directions for capture) from the
// header that declares it. The rules, and why they are what they are, are in docs/prototypes.md.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace msprobe::shim {

enum class ParamKind {
  Tensor,
  TensorList,
  Scalar,
  ScalarList,
  IntArray,
  FloatArray,
  BoolArray,
  Double,
  Float,
  Int64,
  Int32,
  Int16,
  Int8,
  UInt64,
  UInt32,
  UInt16,
  UInt8,
  Bool,
  DataType,          // aclDataType by value
  OtherEnum,         // another int-sized enum by value (aclFormat, `enum X`, ...)
  CString,           // char * / const char *
  OtherPointer,      // any other pointer (void *, aclrtStream, int64_t *, function pointers, ...)
  WorkspaceSizeOut,  // the trailing uint64_t *workspaceSize
  ExecutorOut,       // the trailing aclOpExecutor **executor
};

enum class Direction { None, Input, Output, InOut };

// Why a tensor parameter has its direction, strongest first (docs/prototypes.md, "Directions"); None for the others.
enum class DirectionRule {
  None,
  Ref,         // named *Ref: CANN's name for a tensor the op updates in place
  Doc,         // CANN's comment before the declaration: an [in]/[out] tag, or the words of the description
  Name,        // out, *Out, gradInput: an output; gradOut, *Optional: an input
  Writable,    // declared `aclTensor *`, not const
  Inplace,     // the first tensor of an Inplace op
  Position,    // outputs come after inputs: the last of x/y/z, or a tensor after a stated output
  LastTensor,  // nothing marked an output: the last tensor is
  Const,       // nothing stated: declared const, so read
};

struct Param {
  // As written minus the name, whitespace normalized: "const aclTensor *", "aclTensor *const", "double";
  // arrays as pointers ("const int64_t *"); "function pointer" for `ret (*f)(args)`.
  std::string type_text;
  std::string name;  // empty for an unnamed parameter
  ParamKind kind = ParamKind::OtherPointer;
  Direction dir = Direction::None;
  DirectionRule dir_rule = DirectionRule::None;
  bool optional = false;  // the name contains "Optional": the host may pass NULL
  bool is_floating() const { return kind == ParamKind::Double || kind == ParamKind::Float; }
};

struct OpPrototype {
  std::string op;             // "Add" for aclnnAddGetWorkspaceSize
  std::vector<Param> params;  // all of them, including the trailing workspaceSize and executor
  std::string header_path;    // empty when parsed from text
};

// Parses the phase-1 declaration of `op` out of a header's text (comments, preprocessor lines and
// other declarations may surround it). nullopt when it is not declared there or not understood, e.g.
// a by-value parameter of an unknown type or a list that does not end in (uint64_t *, aclOpExecutor **).
// Pure and bounded: linear in the text plus at most a fixed amount of work per candidate declaration.
std::optional<OpPrototype> parse_prototype(std::string_view declaration_text, std::string_view op) noexcept;

// Phase-1 op names (`Add` for aclnnAddGetWorkspaceSize) declared in a header's text, in order of
// appearance, duplicates removed. Cheap textual scan, no parsing: what the index uses to map ops to files.
std::vector<std::string> declared_ops(std::string_view header_text);

// Maps op names to the headers that declare them, across the CANN include directories.
class PrototypeIndex {
 public:
  // Roots, in order (earlier wins when two declare the same op):
  //   $ASCEND_HOME_PATH/include/aclnnop, $ASCEND_TOOLKIT_HOME/include/aclnnop,
  //   $ASCEND_TOOLKIT_HOME/latest/include/aclnnop,
  //   $ASCEND_OPP_PATH/built-in/op_impl/ai_core/tbe/op_api/include/aclnnop,
  //   each <dir>/op_api/include of $ASCEND_CUSTOM_OPP_PATH (':'-separated),
  //   $ASCEND_OPP_PATH/vendors/<vendor>/op_api/include (vendors/config.ini load_priority first, then by name),
  //   then `extra_roots`. ASCEND_OPP_PATH defaults to $ASCEND_HOME_PATH/opp. Missing directories are skipped;
  //   the same directory reached twice (symlinks) counts once. Lists the vendors folder; reads no header.
  static PrototypeIndex from_environment(const std::function<const char *(const char *)> &getenv,
                                         std::vector<std::string> extra_roots = {});
  explicit PrototypeIndex(std::vector<std::string> roots);
  ~PrototypeIndex();
  PrototypeIndex(PrototypeIndex &&) noexcept;
  PrototypeIndex &operator=(PrototypeIndex &&) noexcept;

  // The prototype of aclnn<op>GetWorkspaceSize, parsed once and cached (negative answers too);
  // nullptr when no header declares it understandably. Thread-safe. The pointer lives as long as the
  // index. The first call lists the directories; headers are read only as needed (a file named after
  // the op first, every header at most once), so later calls are a hash lookup.
  const OpPrototype *find(std::string_view op) noexcept;

  const std::vector<std::string> &roots() const;
  // How many header files have been read so far (for tests of the lazy indexing).
  size_t headers_read() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

const char *to_string(ParamKind kind);
const char *to_string(Direction dir);
const char *to_string(DirectionRule rule);

}  // namespace msprobe::shim
