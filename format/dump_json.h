// dump.json, stack.json and construct.json, written by hand so that msprobe's rules hold exactly:
// - tensor keys in msprobe's order: type, dtype, shape, Max, Min, Mean, Norm, then md5, data_name, format, stride,
//   offset;
// - numbers as Python's json.dump prints them: repr() of the float (shortest round trip), bare NaN / Infinity /
//   -Infinity, null for a missing statistic;
// - strings escaped as json.dump(ensure_ascii=True) does (non-ASCII as \uXXXX, so the file is plain ASCII and any
//   reader decodes it), invalid UTF-8 as \ufffd;
// - every string the structured writers below emit (kernel names, string values, stack frames, type/dtype
//   overrides, data_name...) goes through csv_safe_text() (naming.h) so that msprobe's compare accepts the dump;
//   for names made by naming.h that changes nothing.
//
// dump.json and construct.json are written as append-only journals: after begin() and after every append() the
// file on disk plus a known closing suffix is valid JSON, so a crash loses at most the entry being written and
// repair_journal_text() restores a valid file.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "format/comm_info.h"
#include "format/format.h"
#include "format/stats.h"

namespace msprobe::format {

// ---- Scalars ------------------------------------------------------------------------------------------------------
// Quoted and escaped (see above); the text is used as given (not made csv-safe).
void append_json_string(std::string &out, std::string_view s);
// Python repr(float): 1.0, 0.1, 1e-05, 1e+16, 2.2360680103302; NaN, Infinity, -Infinity.
void append_json_number(std::string &out, double v);
std::string json_number(double v);
void append_json_integer(std::string &out, int64_t v);
void append_json_integer(std::string &out, uint64_t v);
// null, a number (integers without a fraction), true/false.
void append_stat_value(std::string &out, const StatValue &v);

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

// The value of a non-tensor argument.
using ArgValue = std::variant<std::monostate, bool, int64_t, double, std::string, std::vector<int64_t>,
                              std::vector<double>, std::vector<bool>>;
// A non-tensor argument (scalar, int array, attribute...): {"type": type, "value": value} with a scalar value.
// A vector value (aclIntArray, aclFloatArray, aclBoolArray, list attributes...) is written as msprobe writes a
// sequence, a JSON list of scalar leaves: [{"type": "int", "value": 64}, ...] (types below), each leaf with the
// argument's "name" when it has one; [] when empty. msprobe's compare aborts on a leaf whose value is a list.
// `extra` members of an entry are not arguments: their vectors stay plain JSON lists.
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

void append_tensor_summary(std::string &out, const TensorSummary &t, Framework framework);
void append_arg(std::string &out, const Arg &a, Framework framework);
// The member `"name": {"input_args": [...], "output": [...], "launch": {"index": .., "task_id": .., "stream_id": ..,
// "timestamp": .., launch_extra...}, notes...}` on one line.
void append_kernel_entry(std::string &out, const KernelEntry &e, Framework framework);
std::string kernel_entry_json(const KernelEntry &e, Framework framework);

// ---- Journals -------------------------------------------------------------------------------------------------------
// A JSON object written as a stream of members. On disk:
//     <prefix, one line ending in '{'>\n<member 1>,\n<member 2>, ... ,\n<member N>
// and finish() adds the suffix ("\n" + the closing braces + "\n"). Each append is one write() (the file is not
// buffered in user space), so after each append the file + suffix() is valid JSON even if the process dies.
// Not thread-safe. The destructor finishes an open journal.
class JsonJournal {
 public:
  JsonJournal() = default;
  JsonJournal(const JsonJournal &) = delete;
  JsonJournal &operator=(const JsonJournal &) = delete;
  JsonJournal(JsonJournal &&other) noexcept;
  JsonJournal &operator=(JsonJournal &&other) noexcept;
  ~JsonJournal();

  // Creates or truncates `path` (mode kFileMode) and writes `prefix` + "\n". `prefix` is one line that opens the
  // object the members go into; `suffix` closes it. Throws std::system_error.
  void begin(const std::filesystem::path &path, std::string_view prefix, std::string_view suffix);
  // One member (`"key": value`, on one line). Throws std::system_error.
  void append(std::string_view member);
  // Several members in one write().
  void append_batch(std::span<const std::string> members);
  // Writes the suffix and closes the file; does nothing when not open.
  void finish();

  bool is_open() const { return fd_ >= 0; }
  uint64_t entries() const { return entries_; }
  uint64_t bytes_written() const { return bytes_; }
  const std::string &suffix() const { return suffix_; }

 private:
  void write_all(std::string_view s);
  int fd_ = -1;
  uint64_t entries_ = 0, bytes_ = 0;
  std::string suffix_, pending_;
};

struct DumpHeader {
  Task task = Task::Statistics;
  Framework framework = Framework::MindSpore;
  HostFramework host_framework = HostFramework::Acl;
  std::optional<std::string> dump_data_dir;  // absolute path of dump_tensor_data/, null without tensor files
};

// `{"task": .., "level": "L2", "framework": .., "host_framework": .., "dump_data_dir": .., "data": {`
std::string dump_json_prefix(const DumpHeader &h);
inline constexpr std::string_view kDumpJsonSuffix = "\n}}\n";
inline constexpr std::string_view kConstructJsonPrefix = "{";
inline constexpr std::string_view kConstructJsonSuffix = "\n}\n";

// dump.json: begin() writes the skeleton, append() one kernel entry, finish() closes it.
class DumpJsonWriter {
 public:
  void begin(const std::filesystem::path &path, const DumpHeader &header);
  void append(const KernelEntry &e);
  void finish() { journal_.finish(); }
  JsonJournal &journal() { return journal_; }

 private:
  JsonJournal journal_;
  Framework framework_ = Framework::MindSpore;
  std::string scratch_;
};

// construct.json as a journal: {kernel name: null, ...} (flat: kernels have no parent).
class ConstructJsonWriter {
 public:
  void begin(const std::filesystem::path &path) { journal_.begin(path, kConstructJsonPrefix, kConstructJsonSuffix); }
  void append(std::string_view kernel_name);
  void finish() { journal_.finish(); }
  JsonJournal &journal() { return journal_; }

 private:
  JsonJournal journal_;
  std::string scratch_;
};

// Given what a journal left on disk and its suffix, the text of a valid file: the header, every complete member,
// the suffix. A member cut short by a crash is dropped. A file that already ends with the suffix is returned as
// is. nullopt when not even the prefix line is complete.
std::optional<std::string> repair_journal_text(std::string_view content, std::string_view suffix);

// ---- Whole files
// ----------------------------------------------------------------------------------------------------- stack.json,
// grouped: {"0": [[kernel names...], [frames...]], "1": ...}; each distinct stack once, frames innermost first. Frames
// and names are made csv-safe.
struct StackGroup {
  std::vector<std::string> kernels;
  std::vector<std::string> frames;
};
std::string stack_json(std::span<const StackGroup> groups);
// construct.json in one piece.
std::string construct_json(std::span<const std::string> kernel_names);
// Writes `content` to a temporary file beside `path` and renames it over `path` (readers never see half a file).
void write_file_atomic(const std::filesystem::path &path, std::string_view content);

}  // namespace msprobe::format
