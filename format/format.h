// The msprobe dump format, in one place: dtypes and their spellings, folder and file names, JSON keys, limits.
// The writer, the tools and the tests all take these facts from here (spec §5, reference/msprobe_formats.md),
// so that a spelling changes in one line.
#pragma once
#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace msprobe::format {

// npy files and the statistics read host memory in its native byte order; msprobe's readers assume little endian.
static_assert(std::endian::native == std::endian::little, "the collector writes little-endian data only");

// The element types the collector understands. The 8-, 6- and 4-bit floats of CANN 9.x (HiF8 ... F4E1M2,
// format/minifloat.h) are read as float32: statistics in float32, npy files widened to float32 as bf16's are. Raw is
// anything else (complex, int4...): its bytes can be saved as .bin, but it has no statistics and no npy form.
enum class DType : uint8_t {
  F32,
  F16,
  BF16,
  F64,
  I8,
  I16,
  I32,
  I64,
  U8,
  U16,
  U32,
  U64,
  Bool,
  HiF8,
  F8E5M2,
  F8E4M3FN,
  F8E8M0,
  F6E3M2,
  F6E2M3,
  F4E2M1,
  F4E1M2,
  Raw
};
inline constexpr int kDTypeCount = 22;

// Bits per element (Raw counts bytes: 8).
constexpr unsigned element_bits(DType t) {
  switch (t) {
    case DType::F64:
    case DType::I64:
    case DType::U64: return 64;
    case DType::F32:
    case DType::I32:
    case DType::U32: return 32;
    case DType::F16:
    case DType::BF16:
    case DType::I16:
    case DType::U16: return 16;
    case DType::F6E3M2:
    case DType::F6E2M3: return 6;
    case DType::F4E2M1:
    case DType::F4E1M2: return 4;
    default: return 8;  // 8-bit integers, bool, the 8-bit floats, Raw
  }
}
// Bytes per element, rounded up (1 for the sub-byte types, whose elements are packed: storage_bytes).
constexpr size_t element_size(DType t) { return (element_bits(t) + 7) / 8; }
// Bytes that `count` elements take, packed.
constexpr uint64_t storage_bytes(DType t, uint64_t count) { return (count * element_bits(t) + 7) / 8; }
// Elements in the smallest run that fills whole bytes (1, 2 for FP4, 4 for FP6): a packed view that starts at a
// multiple of it starts on a byte.
constexpr uint64_t whole_byte_elements(DType t) {
  const unsigned b = element_bits(t);
  return b % 8 == 0 ? 1 : b == 4 ? 2 : 4;
}

// The 8-, 6- and 4-bit floats (read as float32).
constexpr bool is_narrow_float(DType t) { return t >= DType::HiF8 && t <= DType::F4E1M2; }
constexpr bool is_floating(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::F64 || is_narrow_float(t);
}
constexpr bool is_integer(DType t) {
  return t == DType::I8 || t == DType::I16 || t == DType::I32 || t == DType::I64 || t == DType::U8 || t == DType::U16 ||
         t == DType::U32 || t == DType::U64;
}

// The spellings of each DType (indexed by it): the table is here so that every tensor's entry reads it inline.
struct DTypeSpelling {
  std::string_view id, torch, mindspore, descr;  // descr: the npy header's
};
// torch and MindSpore spellings are str(dtype) in each framework.
inline constexpr DTypeSpelling kDTypeSpellings[kDTypeCount] = {
    {"float32", "torch.float32", "Float32", "<f4"},
    {"float16", "torch.float16", "Float16", "<f2"},
    {"bfloat16", "torch.bfloat16", "BFloat16", "<f4"},  // npy holds bf16 widened to float32
    {"float64", "torch.float64", "Float64", "<f8"},
    {"int8", "torch.int8", "Int8", "|i1"},
    {"int16", "torch.int16", "Int16", "<i2"},
    {"int32", "torch.int32", "Int32", "<i4"},
    {"int64", "torch.int64", "Int64", "<i8"},
    {"uint8", "torch.uint8", "UInt8", "|u1"},
    {"uint16", "torch.uint16", "UInt16", "<u2"},
    {"uint32", "torch.uint32", "UInt32", "<u4"},
    {"uint64", "torch.uint64", "UInt64", "<u8"},
    {"bool", "torch.bool", "Bool", "|b1"},
    // The narrow floats, held widened to float32 in npy files. torch has float8_e5m2, float8_e4m3fn,
    // float8_e8m0fnu and float4_e2m1fn_x2; the others are torch_npu's (c10_npu custom dtypes, HiFloat8Tensor for
    // hifloat8 as msprobe writes it). MindSpore names its types Float8E4M3FN, Float8E5M2, HiFloat8; the rest by the
    // same pattern.
    {"hifloat8", "torch_npu.HiFloat8Tensor", "HiFloat8", "<f4"},
    {"float8_e5m2", "torch.float8_e5m2", "Float8E5M2", "<f4"},
    {"float8_e4m3fn", "torch.float8_e4m3fn", "Float8E4M3FN", "<f4"},
    {"float8_e8m0", "torch.float8_e8m0fnu", "Float8E8M0", "<f4"},
    {"float6_e3m2", "torch_npu.float6_e3m2", "Float6E3M2", "<f4"},
    {"float6_e2m3", "torch_npu.float6_e2m3", "Float6E2M3", "<f4"},
    {"float4_e2m1", "torch.float4_e2m1fn_x2", "Float4E2M1", "<f4"},
    {"float4_e1m2", "torch_npu.float4_e1m2fn_x2", "Float4E1M2", "<f4"},
    {"raw", "unknown", "unknown", ""},
};
constexpr const DTypeSpelling &dtype_spelling(DType t) { return kDTypeSpellings[static_cast<size_t>(t)]; }

// A neutral, numpy-like spelling ("float32", "bfloat16", "bool", "raw") for logs, tools and test drivers.
constexpr std::string_view dtype_id(DType t) { return dtype_spelling(t).id; }
std::optional<DType> parse_dtype_id(std::string_view s);

// ---- Framework conventions -------------------------------------------------------------------------------------
// dump.json's "framework" picks one of msprobe's two reader conventions; msprobe refuses any other value.
enum class Framework : uint8_t { PyTorch, MindSpore };
// What the shim really detected in the host process ("host_framework" field).
enum class HostFramework : uint8_t { PyTorch, MindSpore, Acl };

std::string_view framework_name(Framework f);  // "pytorch" | "mindspore"
std::optional<Framework> parse_framework(std::string_view s);
std::string_view host_framework_name(HostFramework f);  // "pytorch" | "mindspore" | "acl"
// "torch.Tensor" | "mindspore.Tensor"
constexpr std::string_view tensor_type_name(Framework f) {
  return f == Framework::PyTorch ? "torch.Tensor" : "mindspore.Tensor";
}

// str(dtype) in each framework: "torch.float32", "torch.bfloat16", "torch.bool" / "Float32", "BFloat16", "Bool".
// The narrow floats as msprobe names them: torch's own dtypes where torch has one ("torch.float8_e4m3fn"), torch_npu's
// otherwise ("torch_npu.HiFloat8Tensor", "torch_npu.float6_e3m2"); MindSpore's type names ("Float8E4M3FN",
// "HiFloat8"). Raw has no spelling of its own: "unknown" (callers that know the real type pass their own string).
constexpr std::string_view dtype_name(DType t, Framework f) {
  return f == Framework::PyTorch ? dtype_spelling(t).torch : dtype_spelling(t).mindspore;
}
std::optional<DType> parse_dtype_name(std::string_view s, Framework f);

// ---- Tasks --------------------------------------------------------------------------------------------------------
// Flight keeps the last kernels' tensors and writes them only when a kernel's output goes non-finite (or at exit when
// asked); what it writes is a tensor-task dump, so dump.json says "tensor" (dump_task_name).
enum class Task : uint8_t { Statistics, Tensor, OverflowCheck, Structure, Flight };
// constexpr: the shim's configuration builds its keyword tables from these at compile time.
constexpr std::string_view task_name(Task t) {
  switch (t) {
    case Task::Tensor: return "tensor";
    case Task::OverflowCheck: return "overflow_check";
    case Task::Structure: return "structure";
    case Task::Flight: return "flight";
    case Task::Statistics: break;
  }
  return "statistics";
}
// The task dump.json names: a flight record is read as the tensor dump it is.
constexpr Task dump_task(Task t) { return t == Task::Flight ? Task::Tensor : t; }
// What a task's dump holds beyond dump.json, the one statement of it (the shim's task policy and its configuration's
// messages, the tools): tensor files (dump_tensor_data/: every kernel's for tensor, the overflowing and the flight
// record's kernels for overflow_check and flight), and whether it stops after MSPROBE_OVERFLOW_NUMS overflows.
struct TaskWrites {
  bool tensor_files = false;
  bool overflow_limit = false;
};
constexpr TaskWrites task_writes(Task t) {
  switch (t) {
    case Task::Tensor: return {true, false};
    case Task::OverflowCheck:
    case Task::Flight: return {true, true};
    case Task::Statistics:
    case Task::Structure: break;
  }
  return {};
}
std::optional<Task> parse_task(std::string_view s);

// ---- Layout: {dump_path}/step{N}/rank{R}/{dump.json, stack.json, construct.json, dump_tensor_data/} ----------
inline constexpr std::string_view kDumpJson = "dump.json";
inline constexpr std::string_view kStackJson = "stack.json";
inline constexpr std::string_view kConstructJson = "construct.json";
inline constexpr std::string_view kTensorDir = "dump_tensor_data";
inline constexpr std::string_view kMappingCsv = "mapping.csv";
// MSPROBE_RACECHECK=1: the races between streams found, beside dump.json (docs/races.md).
inline constexpr std::string_view kRacesJson = "races.json";
inline constexpr std::string_view kLevel = "L2";
// msprobe's own permissions (compare refuses files writable by others).
inline constexpr unsigned kFileMode = 0640;
inline constexpr unsigned kDirMode = 0750;

std::string step_dir_name(uint64_t step);                 // "step3"
std::string rank_dir_name(std::optional<uint32_t> rank);  // "rank0", or "rank" when no rank is known
// The file in the dump root whose lock a process holds while it writes a rank's folders (shim/capture/lifecycle.cpp):
// not part of the dump; `msprobe-inspect repair` removes one a killed run left behind.
std::string rank_lock_name(std::string_view rank_dir);  // ".msprobe_shim.rank0.lock"
bool is_rank_lock_name(std::string_view name);
// One dump root holds one run (docs/lifecycle.md): each process that writes a rank folder leaves its run's marker in
// the root (who, when, what, and at its end what came of it), which stays after the run; an earlier run's folders
// found there by a new run are moved to {root}/earlier_runs/{its run id}/, itself a dump root.
std::string run_marker_name(std::string_view rank_dir);  // ".msprobe_shim.rank0.run.json"
bool is_run_marker_name(std::string_view name);
std::string rank_dir_of_run_marker(std::string_view name);  // "rank0"
inline constexpr std::string_view kEarlierRunsDir = "earlier_runs";

// ---- Tensor files: {kernel}.{input|output}.{slot}.{npy|bin} --------------------------------------------------
enum class IoKind : uint8_t { Input, Output };
constexpr std::string_view io_name(IoKind io) { return io == IoKind::Input ? "input" : "output"; }

enum class FileFormat : uint8_t { Npy, Bin };
constexpr std::string_view file_suffix(FileFormat f) { return f == FileFormat::Npy ? "npy" : "bin"; }

// MSPROBE_COMPRESS=lz4: each tensor file is one LZ4 frame of what would have been written, named with this extra
// suffix ({kernel}.{input|output}.{slot}.npy.lz4); `lz4 -d` or msprobe-inspect convert gives back the file.
enum class Compression : uint8_t { Off, Lz4 };
inline constexpr std::string_view kLz4Suffix = "lz4";  // also MSPROBE_COMPRESS's keyword

// Basenames longer than this are replaced by 32 random digits + "." + the original last suffix, and the pair is
// recorded in mapping.csv (msprobe's FILE_NAME_MAX; also what compare accepts).
inline constexpr size_t kMaxBasename = 255;
inline constexpr size_t kLongNameDigits = 32;

// msprobe's compare aborts on any name, string value or stack line that starts with one of these (or their
// full-width forms), or that contains ';' followed by one (Const.STRING_BLACKLIST).
inline constexpr std::string_view kForbiddenLeading = "+-=%@";

// ---- npy ----------------------------------------------------------------------------------------------------------
// What the npy file holds for a tensor of type t: bf16 and the narrow floats are widened to float32 (as msprobe); Raw
// has no npy form.
constexpr bool npy_can_store(DType t) { return t != DType::Raw; }
constexpr DType npy_storage_dtype(DType t) { return t == DType::BF16 || is_narrow_float(t) ? DType::F32 : t; }
// numpy's descr for the stored type ("<f4", "|b1", "|i1", "<i8"...); empty for Raw.
constexpr std::string_view npy_descr(DType t) { return dtype_spelling(t).descr; }
inline constexpr size_t kNpyAlign = 64;  // numpy's ARRAY_ALIGN: the data starts at a multiple of this

// ---- JSON keys --------------------------------------------------------------------------------------------------
namespace json_key {
// dump.json top level, in the order written.
inline constexpr std::string_view kTask = "task";
inline constexpr std::string_view kLevel = "level";
inline constexpr std::string_view kFramework = "framework";
inline constexpr std::string_view kHostFramework = "host_framework";
inline constexpr std::string_view kDumpDataDir = "dump_data_dir";
inline constexpr std::string_view kRun = "run";  // {"id", "pid"}: which run wrote the folder (msprobe ignores it)
inline constexpr std::string_view kData = "data";
// A run marker (run_marker_name): the run's id, its process, its start and end (µs since the epoch; end null while it
// runs or after a kill), its command line, task and, at its end, one line of what came of it.
inline constexpr std::string_view kRunId = "id";
inline constexpr std::string_view kRunPid = "pid";
inline constexpr std::string_view kRunStart = "start_us";
inline constexpr std::string_view kRunEnd = "end_us";
inline constexpr std::string_view kRunCommand = "command";
inline constexpr std::string_view kRunOutcome = "outcome";
// A kernel entry. Only IO keys and values that are strings, lists, bools or objects stand at an entry's top level:
// msprobe's statistics and md5 modes test `"md5" in value` on every field of an entry, and a truthy number there
// aborts the whole compare (msprobe_compare_facts.md §9). So every number describing the launch lives in one object:
// "launch": {"index": .., "task_id": .., "stream_id": .., "timestamp": .., ...}.
inline constexpr std::string_view kInputArgs = "input_args";
inline constexpr std::string_view kOutput = "output";
inline constexpr std::string_view kLaunch = "launch";
// Members of "launch": launch order in the rank, launch index on the stream, stream index in creation order, µs.
inline constexpr std::string_view kIndex = "index";
inline constexpr std::string_view kTaskId = "task_id";
inline constexpr std::string_view kStreamId = "stream_id";
inline constexpr std::string_view kTimestamp = "timestamp";
// Dumps written before "launch" existed hold these at the entry's top level (readers accept both forms).
inline constexpr std::string_view kLegacyLaunchIndex = "launch_index";
// overflow_check and flight: the NaN/Inf found in the kernel's outputs ("output.0: 0 NaN, 3 +Inf, 0 -Inf").
inline constexpr std::string_view kOverflow = "overflow";
// A flight record: on every kernel it wrote, what triggered it ("overflow", "exit", "signal SIGTERM"), the kernel
// whose output went non-finite (overflow only), and a note on a tensor kept as statistics only.
inline constexpr std::string_view kFlightTrigger = "flight_trigger";
inline constexpr std::string_view kFlightTriggerKernel = "flight_trigger_kernel";
inline constexpr std::string_view kFlightNote = "flight_note";
// A graph-sunk kernel's tensors that CANN's dump described but could not give as data, and why.
inline constexpr std::string_view kGraphNote = "graph_note";
// A tensor, in msprobe's key order: type, dtype, shape, Max, Min, Mean, Norm, then the rest.
inline constexpr std::string_view kType = "type";
inline constexpr std::string_view kDtype = "dtype";
inline constexpr std::string_view kShape = "shape";
inline constexpr std::string_view kMax = "Max";
inline constexpr std::string_view kMin = "Min";
inline constexpr std::string_view kMean = "Mean";
inline constexpr std::string_view kNorm = "Norm";
inline constexpr std::string_view kMd5 = "md5";
inline constexpr std::string_view kDataName = "data_name";
inline constexpr std::string_view kFormat = "format";
inline constexpr std::string_view kStride = "stride";
inline constexpr std::string_view kOffset = "offset";
// A non-tensor argument: {"type": ..., "value": ...}.
inline constexpr std::string_view kValue = "value";
}  // namespace json_key

}  // namespace msprobe::format
