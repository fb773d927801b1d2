// Decodes one reassembled CANN dump file (cann_dump.md §3.1-3.5): u64 little-endian header length H, the protobuf
// DumpData of H bytes (read with proto_wire.h, not libprotobuf: see there why), then the tensor bytes, inputs then
// outputs, each its `size` bytes (op buffers and workspaces may follow; they are counted, not decoded).
//
// Fields read: DumpData version 1, dump_time 2, output 3, input 4, op_name 6; OpInput data_type 1, format 2,
// shape 3, size 5, original_shape 6, sub_format 7; OpOutput the same with size 6, original_shape 7, sub_format 8;
// Shape dim 1 (packed or not). Unknown fields are skipped; a known field with another wire type is skipped too
// (what libprotobuf does); a message field seen twice merges (Shape dims append).
//
// A file-level problem (name, truncation, malformed protobuf, sizes past the end) fails the file with one line in
// *error. A tensor-level problem (dtype the collector cannot read, a format not row-major, size != numel x element
// size, a dim past INT64_MAX) only marks that tensor undecodable with a note: its bytes stay available as raw.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "format/format.h"
#include "shim/graph/dump_names.h"

namespace msprobe::shim::graph {

struct DumpTensor {
  format::IoKind io = format::IoKind::Input;
  uint32_t index = 0;       // position among the file's inputs (or outputs)
  int32_t proto_dtype = 0;  // OutputDataType
  std::string dtype_name;   // "DT_FLOAT": the dump's dtype text, also for Raw
  format::DType dtype = format::DType::Raw;
  int32_t proto_format = 0;  // OutputFormat (primary format)
  std::string format_name;   // "ND", "FRACTAL_NZ", "FORMAT_77"
  int32_t sub_format = 0;
  std::vector<int64_t> shape;         // original_shape when present, else the device shape
  std::vector<int64_t> device_shape;  // the layout of `bytes`
  std::vector<int64_t> original_shape;
  uint64_t size = 0;                     // bytes, from the proto
  std::span<const unsigned char> bytes;  // `size` bytes inside DumpFile::storage
  // True when `bytes` are `shape`'s elements of `dtype` in row-major order; otherwise keep them raw (see note).
  bool decodable = false;
  std::string note;  // why not decodable
};

struct DumpFile {
  std::string path;
  DumpName name;
  DumpPlace place;
  uint64_t header_length = 0;  // H
  std::string version;         // "2.0"
  uint64_t dump_time = 0;      // µs
  std::string op_name;         // unsanitised, from the proto
  std::vector<DumpTensor> inputs, outputs;
  uint64_t trailing_bytes = 0;                                // after the outputs: op buffers, workspaces
  std::shared_ptr<const std::vector<unsigned char>> storage;  // the file; the tensors' spans point into it
};

// The bytes are taken over (no copy): pass the AssembledFile's vector.
std::optional<DumpFile> decode_dump_file(std::string_view path, std::shared_ptr<const std::vector<unsigned char>> bytes,
                                         std::string *error);
// The same over borrowed bytes, which are copied once.
std::optional<DumpFile> decode_dump_file(std::string_view path, std::span<const unsigned char> bytes,
                                         std::string *error);

}  // namespace msprobe::shim::graph
