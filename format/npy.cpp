#include "format/npy.h"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <system_error>

#include "format/half.h"
#include "format/io.h"
#include "format/minifloat.h"

namespace msprobe::format {

void FdSink::write(const void *data, size_t bytes) {
  if (!write_all(fd_, data, bytes, &written_)) throw std::system_error(errno, std::generic_category(), "write");
}

void GatheringFdSink::write(const void *data, size_t bytes) {
  if (pending_.size() + bytes <= kSmall) {
    pending_.append(static_cast<const char *>(data), bytes);
    return;
  }
  iovec iov[2] = {{pending_.data(), pending_.size()}, {const_cast<void *>(data), bytes}};
  int first = pending_.empty() ? 1 : 0;
  while (first < 2) {
    const ssize_t n = ::writev(fd_, iov + first, 2 - first);
    ++syscalls_;
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::system_error(errno, std::generic_category(), "write");
    }
    written_ += static_cast<uint64_t>(n);
    // A short write: skip what went out, resume inside the iovec it stopped in.
    size_t left = static_cast<size_t>(n);
    while (first < 2 && left >= iov[first].iov_len) left -= iov[first++].iov_len;
    if (first < 2) {
      iov[first].iov_base = static_cast<char *>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
  pending_.clear();
}

void GatheringFdSink::flush() {
  if (pending_.empty()) return;
  FdSink s(fd_);
  s.write(pending_.data(), pending_.size());
  written_ += s.bytes_written();
  ++syscalls_;
  pending_.clear();
}

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
constexpr uint64_t kV1MaxHeader = 65535;

uint64_t element_count(std::span<const int64_t> shape) {
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw std::invalid_argument("npy: negative dimension " + std::to_string(d));
    if (d != 0 && n > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(d))
      throw std::invalid_argument("npy: element count overflows");
    n *= static_cast<uint64_t>(d);
  }
  return n;
}

// repr() of a Python tuple of ints: (), (3,), (2, 3).
std::string shape_repr(std::span<const int64_t> shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ',';
  return s + ")";
}

}  // namespace

uint64_t npy_data_bytes(DType dtype, std::span<const int64_t> shape) {
  const uint64_t n = element_count(shape);
  const uint64_t item = element_size(npy_storage_dtype(dtype));
  if (n > std::numeric_limits<uint64_t>::max() / item) throw std::invalid_argument("npy: byte count overflows");
  return n * item;
}

std::string npy_header(DType dtype, std::span<const int64_t> shape, NpyOptions options) {
  if (!npy_can_store(dtype)) throw std::invalid_argument("npy: dtype raw has no npy form");
  element_count(shape);  // validates the dims
  // The dict as numpy writes it (sorted keys, repr values, trailing ", ").
  const std::string dict = "{'descr': '" + std::string(npy_descr(dtype)) +
                           "', 'fortran_order': False, 'shape': " + shape_repr(shape) + ", }";
  auto build = [&](uint8_t major) {
    const size_t len_field = major == 1 ? 2 : 4;
    const size_t unpadded = kMagicLen + 2 + len_field + dict.size() + 1;
    const size_t pad = (kNpyAlign - unpadded % kNpyAlign) % kNpyAlign;
    const uint64_t hlen = dict.size() + pad + 1;
    std::string out(kMagic, kMagicLen);
    out += static_cast<char>(major);
    out += '\0';
    for (size_t i = 0; i < len_field; ++i) out += static_cast<char>((hlen >> (8 * i)) & 0xffu);
    out += dict;
    out.append(pad, ' ');
    out += '\n';
    return std::pair{out, hlen};
  };
  if (options.min_major <= 1) {
    auto [out, hlen] = build(1);
    if (hlen <= kV1MaxHeader) return out;
  }
  return build(2).first;
}

uint64_t write_npy_data(ByteSink &sink, DType dtype, const void *data, uint64_t count) {
  if (npy_storage_dtype(dtype) == dtype) {
    const uint64_t bytes = count * element_size(dtype);
    sink.write(data, bytes);
    return bytes;
  }
  // bf16 and the narrow floats: widened through a bounded buffer, no copy of the whole tensor.
  constexpr uint64_t kChunk = uint64_t{1} << 20;  // 4 MiB of float32 per write
  const uint64_t chunk = count < kChunk ? count : kChunk;
  std::unique_ptr<float[]> buf(new float[chunk ? chunk : 1]);
  const auto *in = static_cast<const unsigned char *>(data);
  for (uint64_t done = 0; done < count;) {
    const uint64_t n = count - done < chunk ? count - done : chunk;
    if (dtype == DType::BF16) {
      for (uint64_t i = 0; i < n; ++i) {
        uint16_t b;
        std::memcpy(&b, in + 2 * (done + i), 2);
        buf[i] = bf16_to_float(b);
      }
    } else {
      widen_to_float(dtype, data, done, n, buf.get());
    }
    sink.write(buf.get(), n * sizeof(float));
    done += n;
  }
  return count * sizeof(float);
}

uint64_t write_npy(ByteSink &sink, DType dtype, std::span<const int64_t> shape, const void *data, NpyOptions options) {
  const std::string header = npy_header(dtype, shape, options);
  sink.write(header.data(), header.size());
  return header.size() + write_npy_data(sink, dtype, data, element_count(shape));
}

void write_npy_file(const std::filesystem::path &path, DType dtype, std::span<const int64_t> shape, const void *data,
                    NpyOptions options) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, kFileMode);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "open " + path.string());
  try {
    FdSink sink(fd);
    write_npy(sink, dtype, shape, data, options);
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (::close(fd) != 0) throw std::system_error(errno, std::generic_category(), "close " + path.string());
}

// ---- Reading ------------------------------------------------------------------------------------------------------
namespace {

[[noreturn]] void fail(const std::string &what) { throw NpyError("npy: " + what); }

// Just enough of Python's literal syntax for an npy header dict: strings, True/False, tuples of ints.
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view s) : s_(s) {}

  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  bool eat(char c) {
    skip_ws();
    if (i_ < s_.size() && s_[i_] == c) return ++i_, true;
    return false;
  }
  void expect(char c, const char *where) {
    if (!eat(c)) fail(std::string("header dict: expected '") + c + "' " + where + at());
  }
  std::string at() const { return " at offset " + std::to_string(i_); }
  bool done() {
    skip_ws();
    return i_ == s_.size();
  }
  char peek() {
    skip_ws();
    return i_ < s_.size() ? s_[i_] : '\0';
  }

  std::string string_literal() {
    skip_ws();
    if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"')) fail("header dict: expected a string" + at());
    const char q = s_[i_++];
    std::string out;
    while (i_ < s_.size() && s_[i_] != q) {
      if (s_[i_] == '\\') {
        if (++i_ >= s_.size()) break;
      } else if (s_[i_] == '\n') {
        fail("header dict: newline inside a string" + at());
      }
      out += s_[i_++];
    }
    if (i_ >= s_.size()) fail("header dict: unterminated string");
    ++i_;
    return out;
  }

  bool boolean() {
    skip_ws();
    if (s_.substr(i_, 4) == "True") return i_ += 4, true;
    if (s_.substr(i_, 5) == "False") return i_ += 5, false;
    fail("header dict: fortran_order must be True or False" + at());
  }

  std::vector<int64_t> int_tuple() {
    if (!eat('(')) fail("header dict: shape must be a tuple" + at());
    std::vector<int64_t> dims;
    bool trailing_comma = false;
    while (!eat(')')) {
      if (!dims.empty() && !trailing_comma) fail("header dict: expected ',' or ')' in shape" + at());
      dims.push_back(integer());
      trailing_comma = eat(',');
    }
    if (dims.size() == 1 && !trailing_comma) fail("header dict: shape (n) is not a tuple; a 1-tuple is (n,)");
    return dims;
  }

  int64_t integer() {
    skip_ws();
    const size_t start = i_;
    uint64_t v = 0;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
      const uint64_t d = static_cast<uint64_t>(s_[i_++] - '0');
      if (v > (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - d) / 10)
        fail("header dict: dimension too large" + at());
      v = v * 10 + d;
    }
    if (i_ == start) fail("header dict: expected a non-negative integer in shape" + at());
    return static_cast<int64_t>(v);
  }

 private:
  std::string_view s_;
  size_t i_ = 0;
};

// descr -> (dtype, item size). Valid but foreign types become Raw with their item size.
void parse_descr(const std::string &descr, NpyInfo &info) {
  size_t i = 0;
  char order = '|';
  if (i < descr.size() && (descr[i] == '<' || descr[i] == '>' || descr[i] == '|' || descr[i] == '='))
    order = descr[i++];
  if (i >= descr.size()) fail("descr '" + descr + "' has no type");
  const char kind = descr[i++];
  if (kind == 'O') fail("descr '" + descr + "': object arrays (pickles) are not supported");
  uint64_t size = 0;
  const size_t digits = i;
  while (i < descr.size() && descr[i] >= '0' && descr[i] <= '9' && size < (1u << 30))
    size = size * 10 + static_cast<uint64_t>(descr[i++] - '0');
  const bool unit = i < descr.size() && descr[i] == '[' && descr.back() == ']' && (kind == 'M' || kind == 'm');
  if (i == digits || size == 0 || (i != descr.size() && !unit))
    fail("descr '" + descr + "' is not a simple numpy type string");
  info.item_size = kind == 'U' ? size * 4 : size;
  info.dtype = DType::Raw;
  if (order == '>' && size > 1) return;  // big endian: readable by numpy, not by us
  // Normalized to the spelling we write ('|' for one byte, '<' otherwise) and looked up in format.h's table;
  // F32 comes before BF16 (both are "<f4" on disk), so "<f4" reads as F32.
  const std::string normalized = (size == 1 ? "|" : "<") + std::string(1, kind) + std::to_string(size);
  for (int t = 0; t < kDTypeCount; ++t) {
    if (npy_descr(static_cast<DType>(t)) == normalized) {
      info.dtype = static_cast<DType>(t);
      return;
    }
  }
}

}  // namespace

NpyInfo parse_npy_header(std::string_view file_start) {
  NpyInfo info;
  if (file_start.size() < kMagicLen + 2 || file_start.substr(0, kMagicLen) != std::string_view(kMagic, kMagicLen))
    fail("not an npy file (bad magic)");
  info.major = static_cast<uint8_t>(file_start[6]);
  info.minor = static_cast<uint8_t>(file_start[7]);
  if (info.major < 1 || info.major > 3 || info.minor != 0)
    fail("unsupported format version " + std::to_string(info.major) + "." + std::to_string(info.minor));
  const size_t len_field = info.major == 1 ? 2 : 4;
  const size_t prefix = kMagicLen + 2 + len_field;
  if (file_start.size() < prefix) fail("truncated before the header length");
  uint64_t hlen = 0;
  for (size_t i = 0; i < len_field; ++i)
    hlen |= static_cast<uint64_t>(static_cast<unsigned char>(file_start[8 + i])) << (8 * i);
  info.data_offset = prefix + hlen;
  if (file_start.size() < info.data_offset)
    fail("truncated header: " + std::to_string(hlen) + " header bytes announced, " +
         std::to_string(file_start.size() - prefix) + " present");
  const std::string_view header = file_start.substr(prefix, hlen);
  if (header.empty() || header.back() != '\n') fail("header does not end with a newline");

  HeaderParser p(header);
  p.expect('{', "at the start of the header");
  bool have_descr = false, have_order = false, have_shape = false;
  while (!p.eat('}')) {
    const std::string key = p.string_literal();
    p.expect(':', "after a key");
    auto once = [&](bool &seen) {
      if (seen) fail("header dict: duplicate key '" + key + "'");
      seen = true;
    };
    if (key == "descr") {
      once(have_descr);
      if (p.peek() == '[') fail("descr: structured dtypes are not supported");
      info.descr = p.string_literal();
    } else if (key == "fortran_order") {
      once(have_order);
      info.fortran_order = p.boolean();
    } else if (key == "shape") {
      once(have_shape);
      info.shape = p.int_tuple();
    } else {
      fail("header dict: unexpected key '" + key + "'");
    }
    if (!p.eat(',')) {
      p.expect('}', "after a value");
      break;
    }
  }
  if (!p.done()) fail("header: text after the dict" + p.at());
  if (!have_descr || !have_order || !have_shape)
    fail("header dict: needs the keys 'descr', 'fortran_order' and 'shape'");
  parse_descr(info.descr, info);
  uint64_t n = 1;
  for (int64_t d : info.shape) {
    if (d != 0 && n > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(d)) fail("shape overflows");
    n *= static_cast<uint64_t>(d);
  }
  if (n != 0 && info.item_size > std::numeric_limits<uint64_t>::max() / n) fail("data size overflows");
  info.element_count = n;
  info.data_bytes = n * info.item_size;
  return info;
}

namespace {

std::string read_prefix(std::ifstream &in, uint64_t bytes) {
  std::string s(bytes, '\0');
  in.read(s.data(), static_cast<std::streamsize>(bytes));
  s.resize(static_cast<size_t>(in.gcount()));
  return s;
}

// Reads the preamble (never more than the file holds, whatever length the file announces) and parses it.
NpyInfo read_info(std::ifstream &in, uint64_t file_size) {
  std::string start = read_prefix(in, 12);
  uint64_t need = 12;
  if (start.size() >= 12 && start.compare(0, kMagicLen, kMagic, kMagicLen) == 0) {
    const auto b = [&](size_t i) { return static_cast<uint64_t>(static_cast<unsigned char>(start[i])); };
    need = start[6] == 1 ? 10 + (b(8) | b(9) << 8) : 12 + (b(8) | b(9) << 8 | b(10) << 16 | b(11) << 24);
  }
  if (need > file_size) need = file_size;
  if (need > start.size()) start += read_prefix(in, need - start.size());
  return parse_npy_header(start);
}

}  // namespace

NpyInfo read_npy_info(const std::filesystem::path &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw NpyError("npy: cannot open " + path.string());
  try {
    const uint64_t size = std::filesystem::file_size(path);
    NpyInfo info = read_info(in, size);
    if (size != info.data_offset + info.data_bytes)
      fail("data size mismatch: shape and descr need " + std::to_string(info.data_bytes) + " bytes, the file has " +
           std::to_string(size >= info.data_offset ? size - info.data_offset : 0));
    return info;
  } catch (const NpyError &e) {
    throw NpyError(path.string() + ": " + e.what());
  }
}

NpyFile read_npy_file(const std::filesystem::path &path) {
  NpyFile f;
  f.info = read_npy_info(path);
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(f.info.data_offset));
  f.data.resize(f.info.data_bytes);
  in.read(f.data.data(), static_cast<std::streamsize>(f.data.size()));
  if (static_cast<uint64_t>(in.gcount()) != f.info.data_bytes) throw NpyError(path.string() + ": npy: short read");
  return f;
}

}  // namespace msprobe::format
