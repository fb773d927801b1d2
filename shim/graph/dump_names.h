// The names in CANN's dump files (cann_dump.md §3.3-3.5): the dump proto's dtype and format numbers (which differ
// from aclDataType's), the file name {op_type}.{op_name}.{task_id}.{stream_id}.{timestamp} and the directories
// {dump_path}/{YYYYMMDDhhmmss}/{device}/{model_name}/{model_id}/{dump_number}/ above it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "format/format.h"

namespace msprobe::shim::graph {

// OutputDataType -> the collector's DType: FLOAT F32, FLOAT16 F16, BF16, DOUBLE F64, the integers and BOOL. Every
// other value (complex, int4, fp8, string, unknown numbers) is Raw: its bytes can be kept, not interpreted.
format::DType proto_dtype(int32_t value);
// "DT_FLOAT", "DT_BF16", ...; a number outside the table gives "DT_<n>".
std::string proto_dtype_name(int32_t value);
// The inverse, for the stats CSV's Data Type cells; nullopt for a name not in the table.
std::optional<int32_t> proto_dtype_value(std::string_view name);

// OutputFormat -> its name without "FORMAT_" ("ND", "NCHW", "FRACTAL_NZ"), as msprobe's file names and the stats CSV
// spell it; a number outside the table gives "FORMAT_<n>".
std::string proto_format_name(int32_t value);
// Formats whose bytes are the shape's elements in row-major order, no padding (ND, NCHW, NHWC, NCDHW, ...).
bool proto_format_is_plain(int32_t value);

// FFTS+ tasks append four fields: {task_type}.{context_id}.{thread_id}.{device_id} (task_type is a number on the
// device path, "FFTSPLUS" on the host path, so it is kept as text).
struct FftsSuffix {
  std::string task_type;
  uint32_t context_id = 0, thread_id = 0, device_id = 0;
};

// The base name (last path component, without a ".csv" suffix). Accepted field counts:
//   5  {op_type}.{op_name}.{task_id}.{stream_id}.{timestamp}                 model and classic single-op dumps
//   6  {op_type}.{op_name}.{dump_number}.{task_id}.{stream_id}.{timestamp}  newer host-side stream dumps
//   9, 10  the above + the FFTS+ suffix
// op_type and op_name are as in the name (CANN already replaced ' ', '.', '/', '\' by '_'); the number fields must
// be decimal digits.
struct DumpName {
  std::string op_type, op_name;
  uint32_t task_id = 0, stream_id = 0;
  uint64_t timestamp = 0;                    // µs since the epoch
  std::optional<uint64_t> name_dump_number;  // the six-field form only
  std::optional<FftsSuffix> ffts;
};
std::optional<DumpName> parse_dump_name(std::string_view base, std::string *error);

// The directories above the file, when the path has them. Recognised, anchored on the 14-digit time folder:
//   {time}/{device}/{model_name}/{model_id}/{dump_number}/file   model dump with a step (dump_number: execution index)
//   {time}/{device}/{model_name}/{model_id}/file                  model dump without a step-id address
//   {time}/{device}/file                                          single-op dump
// Anything else leaves every field empty (a relative or bare name is not an error).
struct DumpPlace {
  std::string time;  // YYYYMMDDhhmmss
  std::optional<uint32_t> device_id;
  std::string model_name;
  std::optional<uint32_t> model_id;
  std::optional<uint64_t> dump_number;
};
DumpPlace parse_dump_place(std::string_view path);

// The last component of a '/'-separated path.
std::string_view base_name(std::string_view path);
// Control characters (a newline in a file name) replaced by '?': every error of this layer is one line.
std::string one_line(std::string text);
// s cut at every `sep` (n separators give n + 1 fields, empty ones included).
std::vector<std::string_view> split_fields(std::string_view s, char sep);

}  // namespace msprobe::shim::graph
