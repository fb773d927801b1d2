// Tensor files of a dump (dump_tensor_data/*.npy|*.bin, and the same compressed as *.npy.lz4|*.bin.lz4 by
// MSPROBE_COMPRESS=lz4): opened and checked against their dump.json entry, read in chunks (statistics and CRC
// recomputed exactly as the collector computed them), or as doubles (compare). A compressed file is read through
// its decompressed content everywhere, so callers see the npy or bin file the collector compressed.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "format/format.h"
#include "format/stats.h"
#include "tools/reader/dump_reader.h"

namespace msprobe::tools {

class TensorFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class TensorFileKind { Npy, Bin, Lz4, Unknown };
// From the name's last suffix, spelled by format::file_suffix() and format::kLz4Suffix.
TensorFileKind tensor_file_kind(std::string_view name);

struct TensorFile {
  std::filesystem::path path;
  TensorFileKind kind = TensorFileKind::Npy;      // of the content: Npy or Bin, also for a compressed file
  bool compressed = false;                        // an LZ4 frame of that content (offsets below are in the content)
  format::DType file_dtype = format::DType::F32;  // what the bytes are: the npy descr, or the entry's dtype
  std::vector<int64_t> shape;                     // npy: its header; bin: the entry's
  uint64_t data_offset = 0, element_count = 0, data_bytes = 0;
  bool fortran_order = false;  // npy only; the collector writes C order
};

// Opens `path` for tensor `t` and checks what can be checked without reading the data: npy header valid and the
// file exactly as long as it says (format::read_npy_info), bin size = elements x element size; an .lz4 file is
// decompressed once to check its frame and checksum and to read the npy header inside (the name before ".lz4" says
// npy or bin; a renamed long name has only ".lz4", and then the content says). Throws TensorFileError with a
// precise reason (no such file, truncated, bad header, corrupt lz4 frame...).
// It does NOT compare shape or dtype with `t` (the caller reports those as mismatches of their own).
TensorFile open_tensor_file(const std::filesystem::path &path, const TensorInfo &t);

// Feeds the data part in chunks of whole elements of file_dtype (packed sub-byte elements: each chunk starts on a
// byte). Throws TensorFileError on a read error.
void read_tensor_chunks(const TensorFile &f, const std::function<void(const void *data, uint64_t count)> &fn);

// Every element as a double (bf16, fp16, the narrow floats and integers converted exactly; bool as 0/1).
std::vector<double> read_tensor_values(const TensorFile &f);

// What the collector recorded for a tensor, recomputed from its file. Statistics are computed in the entry's dtype
// (an npy of a bf16 tensor holds float32 widened from bf16: it is narrowed back, exactly; the narrow floats' are
// float32 statistics either way). The CRC covers what the collector hashed: the tensor's own bytes, except bf16 under
// the mindspore convention and the narrow floats always, hashed as float32.
struct Recomputed {
  format::TensorStats low, high;  // StatPrecision Low and High (dump.json does not record which one was used)
  std::string crc;                // crc32_hex
};
Recomputed recompute(const TensorFile &f, format::DType entry_dtype, bool zero_dim, format::Framework framework);

}  // namespace msprobe::tools
