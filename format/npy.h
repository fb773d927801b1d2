// NumPy .npy files: the writer for tensor dumps and a strict reader for tools and tests.
//
// Written files are format 1.0, or 2.0 when the header would exceed 65535 bytes (as msprobe), C order, padded so
// the data starts at a multiple of 64. bf16 is widened to float32 on the way out (msprobe does the same; the
// original dtype stays in dump.json). The data is written as given: callers pass the tensor's logical view,
// contiguous in row-major order.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "format/format.h"

namespace msprobe::format {

// Where encoded bytes go: a file descriptor, a string, later a compressor.
class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual void write(const void *data, size_t bytes) = 0;
};

// Writes everything or throws std::system_error (retries short writes and EINTR). Does not own the fd.
class FdSink final : public ByteSink {
 public:
  explicit FdSink(int fd) : fd_(fd) {}
  void write(const void *data, size_t bytes) override;
  uint64_t bytes_written() const { return written_; }

 private:
  int fd_;
  uint64_t written_ = 0;
};

// An FdSink that coalesces: writes smaller than kSmall are gathered, and a large write goes out together with what
// was gathered in one writev(). An npy file (header, then data) thus costs one system call, tiny files included.
// flush() writes what is left; call it before closing the fd. Does not own the fd.
class GatheringFdSink final : public ByteSink {
 public:
  static constexpr size_t kSmall = size_t{64} << 10;
  explicit GatheringFdSink(int fd) : fd_(fd) {}
  void write(const void *data, size_t bytes) override;
  void flush();
  uint64_t bytes_written() const { return written_; }
  uint64_t syscalls() const { return syscalls_; }

 private:
  int fd_;
  std::string pending_;
  uint64_t written_ = 0, syscalls_ = 0;
};

class StringSink final : public ByteSink {
 public:
  void write(const void *data, size_t bytes) override { data_.append(static_cast<const char *>(data), bytes); }
  const std::string &str() const { return data_; }

 private:
  std::string data_;
};

struct NpyOptions {
  uint8_t min_major = 1;  // 2 forces format 2.0 even for a short header
};

// The whole preamble (magic, version, header length, header dict, padding, '\n'); its size is a multiple of 64.
// Throws std::invalid_argument for Raw or a negative dimension.
std::string npy_header(DType dtype, std::span<const int64_t> shape, NpyOptions options = {});
// Bytes of the data part for this dtype and shape (bf16 and the narrow floats counted as float32). Throws on negative
// dims or overflow.
uint64_t npy_data_bytes(DType dtype, std::span<const int64_t> shape);

// Header then data; `data` holds prod(shape) elements of `dtype` (packed, for the sub-byte types). Returns the bytes
// written.
uint64_t write_npy(ByteSink &sink, DType dtype, std::span<const int64_t> shape, const void *data,
                   NpyOptions options = {});
// Only the data part, for writers that stream a tensor in chunks after npy_header(): `count` elements,
// bf16 and the narrow floats widened to float32 through a bounded buffer. Returns the bytes written.
uint64_t write_npy_data(ByteSink &sink, DType dtype, const void *data, uint64_t count);
// Convenience for tools and tests: creates or truncates `path` (mode kFileMode) and writes the file.
void write_npy_file(const std::filesystem::path &path, DType dtype, std::span<const int64_t> shape, const void *data,
                    NpyOptions options = {});

// ---- Reading ------------------------------------------------------------------------------------------------------
class NpyError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct NpyInfo {
  uint8_t major = 1, minor = 0;
  std::string descr;         // as in the file, e.g. "<f4"
  DType dtype = DType::Raw;  // Raw when the descr is valid but not a collector dtype (complex, big endian...)
  uint64_t item_size = 0;
  bool fortran_order = false;
  std::vector<int64_t> shape;  // empty for a 0-d array
  uint64_t data_offset = 0;    // where the data starts
  uint64_t element_count = 0;
  uint64_t data_bytes = 0;  // element_count * item_size
};

// Parses the preamble at the start of `file_start` (which must hold at least the whole preamble).
// Throws NpyError naming what is wrong: magic, version, header length, dict syntax, keys, descr, shape.
NpyInfo parse_npy_header(std::string_view file_start);
// Reads and parses the header of a file and checks that the file holds exactly data_bytes after it.
NpyInfo read_npy_info(const std::filesystem::path &path);
// Header and data of a whole file (for tools and tests; loads everything).
struct NpyFile {
  NpyInfo info;
  std::string data;
};
NpyFile read_npy_file(const std::filesystem::path &path);

}  // namespace msprobe::format
