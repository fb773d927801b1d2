// Reading a dump (spec §5) for the post-run tools and their tests: finding step{N}/rank{R} folders, streaming
// dump.json kernel by kernel, the tensors of an entry, stack.json, mapping.csv, and picking a kernel by name,
// prefix or `OpType#k`. Every spelling (file names, JSON keys, dtypes) comes from format/format.h.
#pragma once
#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "format/comm_info.h"
#include "format/format.h"
#include "format/naming.h"
#include "format/stats.h"
#include "tools/reader/json_reader.h"

namespace msprobe::tools {

namespace fs = std::filesystem;

// Bad input the user can fix (a path that is not a dump, an unknown kernel...): the message names it.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// ---- Layout ---------------------------------------------------------------------------------------------------------
// One step{N}/rank{R} folder (or a bare folder holding dump.json).
struct RankDir {
  fs::path path;
  std::optional<uint64_t> step;    // nullopt when the folder is not under a step{N} folder
  std::optional<uint32_t> rank;    // nullopt for "rank" (no rank known) or a bare folder
  bool rank_named = false;         // the folder is called rank / rank{R}
  std::string label() const;       // "step0/rank1", "step0/rank", or the folder name
  std::string rank_label() const;  // "rank1", "rank"
};

// step{N} -> N (nullopt for anything else, including leading zeros); rank{R} / rank likewise.
std::optional<uint64_t> parse_step_dir(std::string_view name);
// rank{R} -> true with *rank = R; "rank" (no rank known) -> true with *rank = nullopt; anything else -> false.
bool parse_rank_dir(std::string_view name, std::optional<uint32_t> *rank);

// A step or rank as a user names it on the command line: its number ("3") or its folder's name ("step3", "rank3", and
// "rank" for the folder of a process whose rank is not known). nullopt when the text is neither.
std::optional<uint64_t> parse_step_text(std::string_view text);
std::optional<std::optional<uint32_t>> parse_rank_text(std::string_view text);

// The rank folders under `dir`, which may be the dump root (step*/rank*), one step folder, or one rank folder (or a
// file of one: its dump.json); sorted by step, then rank. Throws InputError naming `dir` when it does not exist or
// holds no dump.
std::vector<RankDir> find_rank_dirs(const fs::path &dir);

// ---- dump.json ------------------------------------------------------------------------------------------------------
struct DumpHeaderRead {
  std::string task, level, framework, host_framework;
  std::optional<std::string> dump_data_dir;
  format::Framework framework_kind = format::Framework::MindSpore;  // for dtype spellings
};

// One statistic as read: null, number, bool.
format::StatValue stat_from_json(const Json *j);

// One tensor of an entry, as read.
struct TensorInfo {
  format::IoKind io = format::IoKind::Input;
  std::string slot;                    // "0", or "1.2" inside a list
  std::string type;                    // "mindspore.Tensor"...
  std::string dtype_text;              // as written ("Float32", "torch.bfloat16")
  std::optional<format::DType> dtype;  // nullopt when the spelling is unknown
  std::vector<int64_t> shape;
  bool shape_ok = true;                    // false when "shape" is missing or not a list of integers
  std::array<format::StatValue, 4> stats;  // Max, Min, Mean, Norm
  std::optional<std::string> md5, data_name;

  uint64_t element_count() const;  // 1 for a 0-d tensor
  // "input.0", "output.1.2": msprobe's row suffix
  std::string row_suffix() const;
};

// The tensors of one entry, in order: input_args (or msprobe's "input"), then output, lists flattened.
// A tensor is a dict with "dtype" and "shape" (msprobe's leaf rule: a dict whose "type" is a string).
std::vector<TensorInfo> entry_tensors(const Json &entry, const DumpHeaderRead &header);
// The dtype of a tensor, from its spelling in either framework's convention or a neutral id.
std::optional<format::DType> parse_any_dtype(std::string_view text, format::Framework preferred);

// A non-tensor argument as read, in either form a dump may hold it:
// - a scalar leaf {"type": .., "value": scalar} (a null value: an array handle the shim did not know);
// - a sequence as msprobe (and this project since issue 17) writes it, a list of scalar leaves
//   [{"type": "int", "value": 64}, ...];
// - a sequence as older dumps wrote it, one leaf with a list value {"type": "aclIntArray", "value": [64]}.
struct ValueArgRead {
  std::string type;          // the leaf's type; for a list of leaves, the first leaf's ("int")
  bool is_list = false;      // a sequence (either form)
  std::vector<Json> values;  // the scalar values: one for a scalar leaf, the elements of a sequence
  // Each value's own type: its leaf's "type" (an aclScalarList's members may differ: "int", "float", "bool"); in
  // the old form and for a scalar leaf, `type` for every value.
  std::vector<std::string> types;
};
// nullopt for null, a tensor, a non-object, or a list that holds anything but scalar leaves. An empty list reads as
// an empty sequence with an empty type: on its own it cannot tell an empty int array from an empty tensor list.
std::optional<ValueArgRead> read_value_arg(const Json &v);

// The fields a flight record (MSPROBE_TASK=flight) writes on each of its kernels, and overflow_check's finding; all
// empty on a kernel of any other dump.
struct FlightFields {
  std::string trigger;         // "overflow", "exit", "signal SIGTERM"
  std::string trigger_kernel;  // for "overflow": the kernel whose output was non-finite
  std::string note;            // e.g. a tensor too large for the ring, kept as statistics only
  std::string overflow;        // "output.0: 0 NaN, 512 +Inf, 0 -Inf" on the kernel that overflowed
  bool recorded() const { return !trigger.empty(); }
};
// The fields of an entry (members that are not strings are ignored).
FlightFields flight_fields(const Json &entry);

// A kernel entry with its position in the file.
struct EntryRead {
  std::string name;
  Json entry;
  std::optional<uint64_t> launch_index;
  size_t offset = 0;  // byte offset of the member in dump.json (for messages)
};

// An HCCL kernel's "comm" object (format/comm_info.h) as read; nullopt when the member is absent or not an object
// with a string "name" and integer "rank" and "size" (the other members are taken when they are integers).
std::optional<format::CommInfo> comm_from_json(const Json &v);

// A kernel as the scanning commands need it: its tensors, read straight from the text without building the entry
// (several times faster on big dumps). Same tensors, in the same order, as entry_tensors() of the entry.
struct KernelRecord {
  std::string name;
  std::optional<uint64_t> launch_index;
  std::optional<uint64_t> timestamp;  // µs ("launch": {"timestamp"}, or the top-level one of older dumps)
  std::optional<format::CommInfo> comm;
  std::vector<TensorInfo> tensors;
  FlightFields flight;
  size_t offset = 0;
};

// Streams dump.json: `on_header` once the top-level members before "data" are read (or at the end when there is no
// "data"), then for each member of "data" `on_record` when it is set, else `on_kernel`. Either returns false to stop
// early. `on_progress(bytes_done)` is called now and then. Throws JsonError (with the byte) on invalid JSON.
struct DumpCallbacks {
  std::function<void(const DumpHeaderRead &)> on_header;
  std::function<bool(EntryRead &&)> on_kernel;
  std::function<bool(KernelRecord &&)> on_record;
  std::function<void(size_t)> on_progress;
};
DumpHeaderRead stream_dump_json(std::string_view text, const DumpCallbacks &callbacks);
// Opens rank/dump.json and streams it; errors name the file.
DumpHeaderRead read_dump_json(const RankDir &rank, const DumpCallbacks &callbacks);

// The kernel's op type (the naming rule's reverse lives with the rule, in format/naming.h).
using format::op_type_of;

// ---- stack.json -----------------------------------------------------------------------------------------------------
// The frames recorded for `kernel` in rank/stack.json (grouped {"0": [[names], [frames]]} or flat {name: [frames]}),
// nullopt when the file or the kernel is absent. Streams the file; stops at the first hit.
std::optional<std::vector<std::string>> find_stack(const RankDir &rank, std::string_view kernel);

// ---- construct.json -------------------------------------------------------------------------------------------------
// The kernel names in construct.json, in file order. Throws JsonError / std::system_error.
std::vector<std::string> read_construct_names(const fs::path &path);

// ---- mapping.csv ----------------------------------------------------------------------------------------------------
struct MappingRow {
  std::string new_name, original_name;
  size_t line = 0;  // 1-based
};
// Rows of dump_tensor_data/mapping.csv (empty when absent). Malformed lines come back with an empty original_name.
std::vector<MappingRow> read_mapping_csv(const fs::path &tensor_dir);

// ---- Picking a kernel -----------------------------------------------------------------------------------------------
struct KernelRef {
  std::string name;
  uint64_t launch_index = 0;
};
struct KernelSelection {
  std::optional<std::string> name;      // the kernel picked
  std::string error;                    // why none was, when name is empty
  std::vector<std::string> candidates;  // for an ambiguous prefix (at most a few)
};
// `selector` is a full kernel name, a unique prefix of one, or `OpType#k`: the k-th (from 0) kernel of that op
// type by launch order. Names are never ambiguous with `#` (sanitized names cannot hold it).
KernelSelection select_kernel(std::span<const KernelRef> kernels, std::string_view selector);

// ---- Small helpers --------------------------------------------------------------------------------------------------
std::string shape_text(std::span<const int64_t> shape);  // "[2, 3]"
std::string stat_text(const format::StatValue &v);       // "1.5", "NaN", "true", "null"
std::string human_bytes(uint64_t bytes);                 // "12.3 MiB"

}  // namespace msprobe::tools
