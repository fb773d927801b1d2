#include "tools/reader/tensor_data.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>

#include "format/half.h"
#include "format/io.h"
#include "format/lz4.h"
#include "format/minifloat.h"
#include "format/npy.h"

namespace msprobe::tools {
using format::DType;

namespace {

constexpr uint64_t kChunkBytes = uint64_t{1} << 20;

std::string_view last_suffix(std::string_view name) {
  const size_t dot = name.rfind('.');
  return dot == std::string_view::npos ? std::string_view{} : name.substr(dot + 1);
}

class Fd {
 public:
  explicit Fd(const std::filesystem::path &p) : fd_(::open(p.c_str(), O_RDONLY | O_CLOEXEC)) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd &) = delete;
  Fd &operator=(const Fd &) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

template <typename T>
T load(const unsigned char *p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

double element_as_double(DType t, const unsigned char *p) {
  switch (t) {
    case DType::F32: return load<float>(p);
    case DType::F64: return load<double>(p);
    case DType::F16: return format::half_to_float(load<uint16_t>(p));
    case DType::BF16: return format::bf16_to_float(load<uint16_t>(p));
    case DType::I8: return load<int8_t>(p);
    case DType::I16: return load<int16_t>(p);
    case DType::I32: return load<int32_t>(p);
    case DType::I64: return static_cast<double>(load<int64_t>(p));
    case DType::U8: return load<uint8_t>(p);
    case DType::U16: return load<uint16_t>(p);
    case DType::U32: return load<uint32_t>(p);
    case DType::U64: return static_cast<double>(load<uint64_t>(p));
    case DType::Bool: return *p != 0 ? 1.0 : 0.0;
    case DType::Raw: return *p;
    default: return format::narrow_to_float(t, *p);  // the 8-bit floats (the sub-byte ones are read packed)
  }
}

// The bytes of a chunk of whole elements: a multiple of the run of elements that fills whole bytes (3 bytes of FP6).
uint64_t chunk_bytes(DType t) {
  const uint64_t run = format::storage_bytes(t, format::whole_byte_elements(t));
  return std::max<uint64_t>(run, kChunkBytes / run * run);
}

// Elements in a chunk of `bytes` bytes, `before` bytes into the data (the last chunk may end inside a byte).
uint64_t chunk_elements(const TensorFile &f, uint64_t before, uint64_t bytes) {
  const unsigned bits = format::element_bits(f.file_dtype);
  const uint64_t first = before * 8 / bits;
  return std::min<uint64_t>(bytes * 8 / bits, f.element_count > first ? f.element_count - first : 0);
}

}  // namespace

TensorFileKind tensor_file_kind(std::string_view name) {
  const std::string_view s = last_suffix(name);
  if (s == format::file_suffix(format::FileFormat::Npy)) return TensorFileKind::Npy;
  if (s == format::file_suffix(format::FileFormat::Bin)) return TensorFileKind::Bin;
  if (s == format::kLz4Suffix) return TensorFileKind::Lz4;
  return TensorFileKind::Unknown;
}

namespace {

void fill_from_npy(TensorFile &f, const format::NpyInfo &info) {
  if (info.dtype == DType::Raw) throw TensorFileError("npy dtype '" + info.descr + "' is not a dump dtype");
  f.file_dtype = info.dtype;
  f.shape = info.shape;
  f.data_offset = info.data_offset;
  f.element_count = info.element_count;
  f.data_bytes = info.data_bytes;
  f.fortran_order = info.fortran_order;
}

// A .bin file of `size` bytes for tensor `t`.
void fill_from_bin(TensorFile &f, const TensorInfo &t, uint64_t size) {
  if (!t.dtype || *t.dtype == DType::Raw) {
    // A type the collector has no statistics for (complex, fp8...): its raw bytes, nothing to check them by.
    f.file_dtype = DType::Raw;
    f.shape = t.shape;
    f.element_count = f.data_bytes = size;
    return;
  }
  if (!t.shape_ok) throw TensorFileError("the entry has no valid shape: cannot interpret the .bin file");
  f.file_dtype = *t.dtype;
  f.shape = t.shape;
  f.element_count = t.element_count();
  f.data_bytes = format::storage_bytes(f.file_dtype, f.element_count);
  if (size != f.data_bytes)
    throw TensorFileError("size " + std::to_string(size) + " bytes, but " + t.dtype_text + " " + shape_text(t.shape) +
                          " needs " + std::to_string(f.data_bytes));
}

// An .lz4 file: decompressed once (frame and checksum checked), keeping the start for the npy header.
void open_compressed(TensorFile &f, const TensorInfo &t) {
  constexpr size_t kKeep = size_t{1} << 20;  // more than any npy header the collector writes
  std::string start;
  uint64_t size = 0;
  try {
    format::lz4_decompress_file(f.path, [&](const void *p, size_t n) {
      if (start.size() < kKeep) start.append(static_cast<const char *>(p), std::min(n, kKeep - start.size()));
      size += n;
    });
  } catch (const format::Lz4Error &e) {
    throw TensorFileError(e.what());
  }
  f.compressed = true;
  // name.npy.lz4 / name.bin.lz4; a long name replaced by digits keeps only ".lz4": the content decides.
  std::string inner_name = f.path.filename().string();
  inner_name.erase(inner_name.size() - format::kLz4Suffix.size() - 1);
  f.kind = tensor_file_kind(inner_name);
  if (f.kind != TensorFileKind::Npy && f.kind != TensorFileKind::Bin)
    f.kind = start.compare(0, 6, "\x93NUMPY") == 0 ? TensorFileKind::Npy : TensorFileKind::Bin;
  if (f.kind == TensorFileKind::Bin) return fill_from_bin(f, t, size);
  format::NpyInfo info;
  try {
    info = format::parse_npy_header(start);
  } catch (const format::NpyError &e) {
    throw TensorFileError(std::string(e.what()) + " (in the decompressed content)");
  }
  if (size != info.data_offset + info.data_bytes)
    throw TensorFileError("data size mismatch: shape and descr need " + std::to_string(info.data_bytes) +
                          " bytes, the decompressed file has " +
                          std::to_string(size >= info.data_offset ? size - info.data_offset : 0));
  fill_from_npy(f, info);
}

}  // namespace

TensorFile open_tensor_file(const std::filesystem::path &path, const TensorInfo &t) {
  TensorFile f;
  f.path = path;
  f.kind = tensor_file_kind(path.filename().string());
  std::error_code ec;
  const auto st = std::filesystem::symlink_status(path, ec);
  if (ec || !std::filesystem::exists(st)) throw TensorFileError("missing file");
  if (std::filesystem::is_symlink(st)) throw TensorFileError("is a symbolic link (msprobe refuses those)");
  if (!std::filesystem::is_regular_file(st)) throw TensorFileError("not a regular file");
  switch (f.kind) {
    case TensorFileKind::Lz4: open_compressed(f, t); return f;
    case TensorFileKind::Unknown: throw TensorFileError("unknown tensor file suffix (expected .npy, .bin or .lz4)");
    case TensorFileKind::Npy: {
      format::NpyInfo info;
      try {
        info = format::read_npy_info(path);
      } catch (const format::NpyError &e) {
        std::string what = e.what();
        // read_npy_info prefixes the path; the caller names the file already.
        const std::string prefix = path.string() + ": ";
        if (what.rfind(prefix, 0) == 0) what.erase(0, prefix.size());
        throw TensorFileError(what);
      }
      fill_from_npy(f, info);
      return f;
    }
    case TensorFileKind::Bin: {
      const uint64_t size = std::filesystem::file_size(path, ec);
      if (ec) throw TensorFileError("cannot stat: " + ec.message());
      fill_from_bin(f, t, size);
      return f;
    }
  }
  return f;
}

namespace {

// The data part of a compressed file, streamed: the content before data_offset skipped, whole elements handed on.
void read_compressed_chunks(const TensorFile &f, const std::function<void(const void *, uint64_t)> &fn) {
  const uint64_t chunk = chunk_bytes(f.file_dtype);
  std::vector<unsigned char> buf;
  buf.reserve(static_cast<size_t>(chunk));
  uint64_t pos = 0, delivered = 0;
  try {
    format::lz4_decompress_file(f.path, [&](const void *data, size_t n) {
      const auto *p = static_cast<const unsigned char *>(data);
      const uint64_t end = pos + n;
      if (end > f.data_offset) {
        const uint64_t skip = pos < f.data_offset ? f.data_offset - pos : 0;
        uint64_t take = std::min<uint64_t>(n - skip, f.data_bytes - std::min(f.data_bytes, delivered + buf.size()));
        const unsigned char *q = p + skip;
        while (take > 0) {
          const uint64_t m = std::min<uint64_t>(take, chunk - buf.size());
          buf.insert(buf.end(), q, q + m);
          q += m;
          take -= m;
          if (buf.size() == chunk) {
            fn(buf.data(), chunk_elements(f, delivered, buf.size()));
            delivered += buf.size();
            buf.clear();
          }
        }
      }
      pos = end;
    });
  } catch (const format::Lz4Error &e) {
    throw TensorFileError(e.what());
  }
  if (!buf.empty()) {
    fn(buf.data(), chunk_elements(f, delivered, buf.size()));
    delivered += buf.size();
  }
  if (delivered != f.data_bytes) throw TensorFileError("file shorter than its header says (changed while reading?)");
}

}  // namespace

void read_tensor_chunks(const TensorFile &f, const std::function<void(const void *, uint64_t)> &fn) {
  if (f.compressed) return read_compressed_chunks(f, fn);
  Fd fd(f.path);
  if (fd.get() < 0) throw TensorFileError(std::string("cannot open: ") + std::strerror(errno));
  const uint64_t chunk = chunk_bytes(f.file_dtype);
  std::vector<unsigned char> buf(static_cast<size_t>(std::min(chunk, std::max<uint64_t>(f.data_bytes, 1))));
  uint64_t done = 0;
  while (done < f.data_bytes) {
    const uint64_t want = std::min<uint64_t>(buf.size(), f.data_bytes - done);
    const ssize_t r = format::read_full(fd.get(), buf.data(), want, static_cast<int64_t>(f.data_offset + done));
    if (r < 0) throw TensorFileError(std::string("read error: ") + std::strerror(errno));
    if (static_cast<uint64_t>(r) < want)
      throw TensorFileError("file shorter than its header says (changed while reading?)");
    fn(buf.data(), chunk_elements(f, done, want));
    done += want;
  }
}

std::vector<double> read_tensor_values(const TensorFile &f) {
  if (f.fortran_order)
    throw TensorFileError("Fortran-order npy files are not supported (the collector writes C order)");
  std::vector<double> out;
  out.reserve(static_cast<size_t>(f.element_count));
  const uint64_t esize = format::element_size(f.file_dtype);
  const bool packed = format::element_bits(f.file_dtype) % 8 != 0;
  read_tensor_chunks(f, [&](const void *data, uint64_t count) {
    const auto *p = static_cast<const unsigned char *>(data);
    for (uint64_t i = 0; i < count; ++i)
      out.push_back(packed ? format::narrow_to_float(f.file_dtype, format::narrow_code_at(f.file_dtype, p, i))
                           : element_as_double(f.file_dtype, p + i * esize));
  });
  return out;
}

Recomputed recompute(const TensorFile &f, DType entry_dtype, bool zero_dim, format::Framework framework) {
  // The npy of a bf16 tensor holds float32 widened from bf16: narrowing back is exact (the low half is zero).
  const bool narrow = f.file_dtype == DType::F32 && entry_dtype == DType::BF16;
  const DType stat_dtype = narrow ? DType::BF16 : f.file_dtype;
  format::StatsAccumulator low(stat_dtype, format::StatPrecision::Low);
  format::StatsAccumulator high(stat_dtype, format::StatPrecision::High);
  const bool bf16_as_f32 = entry_dtype == DType::BF16 && framework == format::Framework::MindSpore;
  uint32_t crc = 0;
  std::vector<uint16_t> narrowed;
  read_tensor_chunks(f, [&](const void *data, uint64_t count) {
    if (narrow) {
      narrowed.resize(static_cast<size_t>(count));
      const auto *p = static_cast<const unsigned char *>(data);
      for (uint64_t i = 0; i < count; ++i) narrowed[i] = static_cast<uint16_t>(load<uint32_t>(p + 4 * i) >> 16);
      low.update(narrowed.data(), count);
      high.update(narrowed.data(), count);
      crc = bf16_as_f32 ? format::crc32_update(crc, data, count * 4)
                        : format::crc32_update(crc, narrowed.data(), count * 2);
      return;
    }
    low.update(data, count);
    high.update(data, count);
    if ((bf16_as_f32 && f.file_dtype == DType::BF16) || format::is_narrow_float(f.file_dtype))
      crc = format::crc32_update_as_f32(crc, f.file_dtype, data, count);
    else
      crc = format::crc32_update(crc, data, count * format::element_size(f.file_dtype));
  });
  Recomputed r;
  r.low = low.finish(zero_dim);
  r.high = high.finish(zero_dim);
  r.crc = format::crc32_hex(crc);
  return r;
}

}  // namespace msprobe::tools
