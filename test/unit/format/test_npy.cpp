// npy writer and reader: exact headers, alignment, versions, bf16 widening, and rejection of malformed files.
// (numpy.load of every dtype and shape is checked in test_collector_formats.py.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "format/half.h"
#include "format/npy.h"

namespace mc = msprobe::format;
namespace fs = std::filesystem;
using mc::DType;

namespace {

// The header text between the length field and the padding.
std::string dict_of(const std::string &file, size_t prefix) {
  std::string h = file.substr(prefix);
  return h.substr(0, h.find('}') + 1);
}

TEST(Npy, HeaderTextAlignmentAndVersion) {
  const int64_t s23[] = {2, 3};
  std::string h = mc::npy_header(DType::F32, s23);
  EXPECT_EQ(h.size() % 64, 0u);
  EXPECT_EQ(h.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  EXPECT_EQ(static_cast<size_t>(static_cast<unsigned char>(h[8]) | static_cast<unsigned char>(h[9]) << 8),
            h.size() - 10);
  EXPECT_EQ(dict_of(h, 10), "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }");
  EXPECT_EQ(h.back(), '\n');
  EXPECT_EQ(dict_of(mc::npy_header(DType::I64, std::span<const int64_t>{}), 10),
            "{'descr': '<i8', 'fortran_order': False, 'shape': (), }");
  const int64_t s5[] = {5};
  EXPECT_EQ(dict_of(mc::npy_header(DType::Bool, s5), 10), "{'descr': '|b1', 'fortran_order': False, 'shape': (5,), }");
  EXPECT_EQ(dict_of(mc::npy_header(DType::BF16, s5), 10), "{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }");

  // Forced 2.0: four length bytes, still aligned.
  h = mc::npy_header(DType::F16, s23, {.min_major = 2});
  EXPECT_EQ(h[6], 2);
  EXPECT_EQ(h.size() % 64, 0u);
  EXPECT_EQ(mc::parse_npy_header(h).shape, std::vector<int64_t>({2, 3}));
  EXPECT_EQ(mc::parse_npy_header(h).data_offset, h.size());

  // A header over 65535 bytes switches to 2.0 by itself (msprobe's rule).
  std::vector<int64_t> many(30000, 1);
  h = mc::npy_header(DType::U8, many);
  EXPECT_EQ(h[6], 2);
  EXPECT_GT(h.size(), 65535u);
  EXPECT_EQ(h.size() % 64, 0u);
  EXPECT_EQ(mc::parse_npy_header(h).shape.size(), many.size());
  std::vector<int64_t> fits(5000, 1);
  EXPECT_EQ(mc::npy_header(DType::U8, fits)[6], 1);

  EXPECT_THROW(mc::npy_header(DType::Raw, s5), std::invalid_argument);
  const int64_t neg[] = {2, -1};
  EXPECT_THROW(mc::npy_header(DType::F32, neg), std::invalid_argument);
}

TEST(Npy, WriteAndReadBackEveryDtype) {
  const int64_t shape[] = {3, 4};
  for (DType t : {DType::F32, DType::F16, DType::F64, DType::I8, DType::I16, DType::I32, DType::I64, DType::U8,
                  DType::U16, DType::U32, DType::U64, DType::Bool}) {
    std::vector<unsigned char> data(12 * mc::element_size(t));
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<unsigned char>(t == DType::Bool ? i % 2 : i * 7);
    mc::StringSink sink;
    const uint64_t n = mc::write_npy(sink, t, shape, data.data());
    EXPECT_EQ(n, sink.str().size());
    const auto info = mc::parse_npy_header(sink.str());
    EXPECT_EQ(info.dtype, t);
    EXPECT_EQ(info.descr, mc::npy_descr(t));
    EXPECT_EQ(info.data_offset % 64, 0u);
    EXPECT_EQ(info.data_bytes, data.size());
    EXPECT_EQ(sink.str().substr(info.data_offset), std::string(data.begin(), data.end()));
  }
}

TEST(Npy, Bf16IsWidenedInChunks) {
  // More elements than one conversion chunk, so the streaming path is exercised across chunk boundaries.
  const size_t n = 200000;
  std::vector<uint16_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint16_t>(i * 40503u);
  const int64_t shape[] = {static_cast<int64_t>(n)};
  mc::StringSink sink;
  mc::write_npy(sink, DType::BF16, shape, b.data());
  const auto info = mc::parse_npy_header(sink.str());
  EXPECT_EQ(info.dtype, DType::F32);
  ASSERT_EQ(info.data_bytes, n * 4);
  for (size_t i = 0; i < n; i += 997) {
    uint32_t bits;
    std::memcpy(&bits, sink.str().data() + info.data_offset + 4 * i, 4);
    ASSERT_EQ(bits, static_cast<uint32_t>(b[i]) << 16) << i;
  }
}

TEST(Npy, FilesAndSizeChecks) {
  const fs::path dir = fs::temp_directory_path() / ("collector_npy_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const float v[] = {1, 2, 3, 4, 5, 6};
  const int64_t shape[] = {2, 3};
  mc::write_npy_file(dir / "a.npy", DType::F32, shape, v);
  EXPECT_EQ(fs::status(dir / "a.npy").permissions() & fs::perms::others_write, fs::perms::none);
  const auto f = mc::read_npy_file(dir / "a.npy");
  EXPECT_EQ(f.info.shape, std::vector<int64_t>({2, 3}));
  EXPECT_EQ(std::memcmp(f.data.data(), v, sizeof v), 0);
  // A truncated file and one with trailing bytes are both reported.
  fs::resize_file(dir / "a.npy", fs::file_size(dir / "a.npy") - 1);
  EXPECT_THROW(mc::read_npy_info(dir / "a.npy"), mc::NpyError);
  mc::write_npy_file(dir / "b.npy", DType::F32, shape, v);
  std::ofstream(dir / "b.npy", std::ios::app) << "x";
  try {
    mc::read_npy_info(dir / "b.npy");
    ADD_FAILURE() << "trailing byte accepted";
  } catch (const mc::NpyError &e) {
    EXPECT_NE(std::string(e.what()).find("data size mismatch"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("b.npy"), std::string::npos) << e.what();
  }
  EXPECT_THROW(mc::read_npy_info(dir / "missing.npy"), mc::NpyError);
  fs::remove_all(dir);
}

// A v1 preamble around an arbitrary header text (padding and newline added when asked).
std::string v1(const std::string &dict, bool newline = true) {
  std::string header = dict;
  if (newline) header += '\n';
  std::string s("\x93NUMPY\x01\x00", 8);
  s += static_cast<char>(header.size() & 0xff);
  s += static_cast<char>(header.size() >> 8);
  return s + header;
}

TEST(Npy, ParsesWhatNumpyWrites) {
  // numpy 1.24 pads with growth spaces and may order keys differently when hand-written; both are fine.
  auto i = mc::parse_npy_header(v1("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }          "));
  EXPECT_EQ(i.dtype, DType::F64);
  EXPECT_EQ(i.shape, std::vector<int64_t>({3}));
  i = mc::parse_npy_header(v1("{\"shape\": (2,3), \"fortran_order\": True, \"descr\": \"<i2\"}"));
  EXPECT_EQ(i.dtype, DType::I16);
  EXPECT_TRUE(i.fortran_order);
  EXPECT_EQ(i.element_count, 6u);
  i = mc::parse_npy_header(v1("{'descr': '<c8', 'fortran_order': False, 'shape': (4,)}"));
  EXPECT_EQ(i.dtype, DType::Raw);  // valid npy, not a collector dtype
  EXPECT_EQ(i.data_bytes, 32u);
  i = mc::parse_npy_header(v1("{'descr': '>f4', 'fortran_order': False, 'shape': (1,)}"));
  EXPECT_EQ(i.dtype, DType::Raw);  // big endian
  i = mc::parse_npy_header(v1("{'descr': '<M8[ns]', 'fortran_order': False, 'shape': (0,)}"));
  EXPECT_EQ(i.item_size, 8u);
}

TEST(Npy, RejectsMalformedHeadersWithClearErrors) {
  struct Case {
    std::string file, message;
  };
  const std::string ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  std::string bad_version = v1(ok);
  bad_version[6] = 9;
  std::string lying_length = v1(ok);
  lying_length[8] = static_cast<char>(0xff);
  const Case cases[] = {
      {"", "bad magic"},
      {"\x93NUMPX\x01\x00", "bad magic"},
      {bad_version, "unsupported format version 9.0"},
      {std::string("\x93NUMPY\x01\x00\x05", 9), "truncated before the header length"},
      {lying_length, "truncated header"},
      {v1(ok, false), "does not end with a newline"},
      {v1("['descr', '<f4']"), "expected '{'"},
      {v1("{'descr': '<f4', 'fortran_order': False}"), "needs the keys"},
      {v1("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}"), "unexpected key 'extra'"},
      {v1("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}"), "duplicate key 'descr'"},
      {v1("{'descr': '<f4', 'fortran_order': false, 'shape': (2,)}"), "True or False"},
      {v1("{'descr': '<f4', 'fortran_order': False, 'shape': (2)}"), "not a tuple"},
      {v1("{'descr': '<f4', 'fortran_order': False, 'shape': [2]}"), "must be a tuple"},
      {v1("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -1)}"), "non-negative integer"},
      {v1("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}"), "too large"},
      {v1("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296)}"), "overflows"},
      {v1("{'descr': '|O', 'fortran_order': False, 'shape': (2,)}"), "object arrays"},
      {v1("{'descr': 'float32', 'fortran_order': False, 'shape': (2,)}"), "not a simple numpy type"},
      {v1("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}"), "structured"},
      {v1("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} junk"), "text after the dict"},
      {v1("{'descr': '<f4' 'fortran_order': False, 'shape': (2,)}"), "expected '}'"},
      {v1("{'descr: '<f4', 'fortran_order': False, 'shape': (2,)}"), "expected ':'"},
  };
  for (const auto &c : cases) {
    try {
      mc::parse_npy_header(c.file);
      ADD_FAILURE() << "accepted: " << c.message;
    } catch (const mc::NpyError &e) {
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << "got: " << e.what();
    }
  }
}

}  // namespace
