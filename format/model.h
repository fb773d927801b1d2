// The vocabulary of a dump entry: what one kernel entry holds (tensors, values, lists, its header and notes), the
// dump's header and a stack group. Plain structs, no I/O: the capture record (record/kernel_record.h), the JSON encoder
// (format/dump_json.h) and the collector's writer all speak it; spellings and keys are in format/format.h.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "format/comm_info.h"
#include "format/format.h"
#include "format/stats.h"

namespace msprobe::format {

// ---- What one kernel entry holds ----------------------------------------------------------------------------------
// How dump.json describes a tensor, whoever holds its bytes (the capture record, the writer, the tools).
struct TensorDescription {
  DType dtype = DType::F32;
  std::optional<std::string> dtype_name;  // overrides dtype_name(dtype, framework), e.g. "Complex64" for Raw
  std::vector<int64_t> shape;             // empty for a 0-d tensor
  std::optional<std::string> format;      // L2 extras, as the device described the tensor
  std::optional<std::vector<int64_t>> stride;
  std::optional<int64_t> offset;
};

// One tensor: written as {"type", "dtype", "shape", "Max", "Min", "Mean", "Norm", ["md5"], ["data_name"],
// ["format"], ["stride"], ["offset"]}.
struct TensorSummary : TensorDescription {
  TensorStats stats;                     // default-constructed: four nulls
  std::optional<std::string> md5;        // crc32_hex(), in md5 summary mode
  std::optional<std::string> data_name;  // the tensor file's name when it was saved
};

// One member of a sequence whose members each say their own type (an aclScalarList may hold int, float and bool
// scalars, mixed): written as a leaf of that type, as a lone scalar of it is. `type` is value_type::kInt, kFloat,
// kBool, or kAclScalar with the dtype's name as the value (fp16, complex...), or with null (a scalar never seen
// made).
struct TypedScalar {
  std::string type;
  std::variant<std::monostate, bool, int64_t, double, std::string> value;
};

// The value of a non-tensor argument.
using ArgValue = std::variant<std::monostate, bool, int64_t, double, std::string, std::vector<int64_t>,
                              std::vector<double>, std::vector<bool>, std::vector<TypedScalar>>;
// A non-tensor argument (scalar, int array, attribute...): {"type": type, "value": value} with a scalar value.
// A vector value (aclIntArray, aclFloatArray, aclBoolArray, aclScalarList, list attributes...) is written as msprobe
// writes a sequence, a JSON list of scalar leaves: [{"type": "int", "value": 64}, ...] (types below; a TypedScalar
// member with its own), each leaf with the argument's "name" when it has one; [] when empty. msprobe's compare aborts
// on a leaf whose value is a list. Members of an entry's "launch" object are not arguments: their vectors stay plain
// JSON lists.
// The "type" of a value argument and of a sequence's leaves (msprobe uses the Python type name; "aclDataType" is
// an aclDataType argument, whose value is the dtype's name).
namespace value_type {
inline constexpr char kInt[] = "int";
inline constexpr char kFloat[] = "float";
inline constexpr char kBool[] = "bool";
inline constexpr char kStr[] = "str";
inline constexpr char kAclDataType[] = "aclDataType";
inline constexpr char kAclScalar[] = "aclScalar";  // a scalar of a dtype with no JSON number (fp16, complex): type only
inline constexpr char kAclScalarList[] = "aclScalarList";
inline constexpr char kAclIntArray[] =
    "aclIntArray";  // these three with a null value: a handle the shim never saw made
inline constexpr char kAclFloatArray[] = "aclFloatArray";
inline constexpr char kAclBoolArray[] = "aclBoolArray";
inline constexpr char kPointer[] = "pointer";
inline constexpr char kListInt[] = "list[int]";  // aclop list attributes
inline constexpr char kListFloat[] = "list[float]";
inline constexpr char kListBool[] = "list[bool]";
}  // namespace value_type
inline constexpr std::string_view kIntLeafType = value_type::kInt;
inline constexpr std::string_view kFloatLeafType = value_type::kFloat;
inline constexpr std::string_view kBoolLeafType = value_type::kBool;
struct ValueArg {
  std::string type;  // e.g. "int", "float", "bool", "str", "tuple" (msprobe uses the Python type name)
  ArgValue value;
  // Named arguments (aclop attributes): written as "name" after "value".
  std::optional<std::string> name = std::nullopt;
};

struct Arg;
using ArgList = std::vector<Arg>;
// One slot of input_args / output: null (absent optional tensor), a tensor, a value, or a list (a TensorList).
struct Arg {
  std::variant<std::monostate, TensorSummary, ValueArg, ArgList> v;
};

// What identifies one kernel and places it in the run: decided at launch, carried by the capture record, written
// by the collector. step and rank choose the folder; the rest are the entry's own fields.
struct KernelHeader {
  std::string name;  // {OpType}.{OpName}.{n}.forward, from naming.h
  uint64_t step = 0;
  std::optional<uint32_t> rank;
  uint64_t launch_index = 0;
  uint64_t task_id = 0;
  uint64_t stream_id = 0;
  uint64_t timestamp_us = 0;
  std::optional<CommInfo> comm;  // HCCL kernels: the communicator and this kernel's place in it ("comm")
};

// Text members of an entry beside its arguments (flight_note, overflow, graph_note...): strings only, so they never
// trip msprobe's `"md5" in value` test (json_key, format.h).
using EntryNotes = std::vector<std::pair<std::string, std::string>>;
// Further members of the entry's "launch" object, after "timestamp", in this order (numbers are welcome there).
using LaunchFields = std::vector<std::pair<std::string, ArgValue>>;

struct KernelEntry : KernelHeader {
  std::optional<ArgList> input_args;  // nullopt: key left out (data_mode "output")
  std::optional<ArgList> output;      // nullopt: key left out (data_mode "input")
  EntryNotes notes;                   // written after "launch", in this order
  LaunchFields launch_extra;
};

// The top-level members of dump.json before "data".
struct DumpHeader {
  Task task = Task::Statistics;
  Framework framework = Framework::MindSpore;
  HostFramework host_framework = HostFramework::Acl;
  std::optional<std::string> dump_data_dir;  // absolute path of dump_tensor_data/, null without tensor files
  std::string run_id;                        // the writing run's id ("run": {"id", "pid"}; none when empty)
  int64_t run_pid = 0;
  // Spaces after dump_data_dir's value (JSON allows them): room for the rank a folder without one may be given later,
  // so that the header can be rewritten in place, at its length.
  size_t dump_data_dir_pad = 0;
};

// stack.json groups: {"0": [[kernel names...], [frames...]], "1": ...}; each distinct stack once, frames innermost
// first.
struct StackGroup {
  std::vector<std::string> kernels;
  std::vector<std::string> frames;
};

}  // namespace msprobe::format
