// Tensor files: what verify recomputes from a file must equal what the collector computed from the tensor.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "format/half.h"
#include "format/npy.h"
#include "format/stats.h"
#include "tools/reader/tensor_data.h"

namespace mt = msprobe::tools;
namespace mc = msprobe::format;
namespace fs = std::filesystem;
using mc::DType;

namespace {

class TempDir {
 public:
  TempDir() : path_(fs::temp_directory_path() / ("tools_tensor_" + std::to_string(::getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  fs::path operator/(const std::string &n) const { return path_ / n; }

 private:
  fs::path path_;
};

mt::TensorInfo info(DType t, std::vector<int64_t> shape) {
  mt::TensorInfo i;
  i.dtype = t;
  i.dtype_text = std::string(mc::dtype_id(t));
  i.shape = std::move(shape);
  return i;
}

bool same(const mc::StatValue &a, const mc::StatValue &b) {
  if (a.kind != b.kind) return false;
  if (a.kind == mc::StatValue::Kind::Real) return a.real == b.real || (std::isnan(a.real) && std::isnan(b.real));
  return a == b;
}

void expect_same_stats(const mc::TensorStats &a, const mc::TensorStats &b) {
  EXPECT_TRUE(same(a.max, b.max));
  EXPECT_TRUE(same(a.min, b.min));
  EXPECT_TRUE(same(a.mean, b.mean));
  EXPECT_TRUE(same(a.norm, b.norm));
}

// Random elements of each dtype, with a NaN and an infinity among the floats.
std::vector<unsigned char> random_bytes(DType t, size_t n, std::mt19937 &rng) {
  std::vector<unsigned char> b(n * mc::element_size(t));
  std::uniform_real_distribution<float> f(-3, 3);
  for (size_t i = 0; i < n; ++i) {
    unsigned char *p = b.data() + i * mc::element_size(t);
    float v = f(rng);
    if (i == 3) v = std::numeric_limits<float>::infinity();
    switch (t) {
      case DType::F32: std::memcpy(p, &v, 4); break;
      case DType::F16: {
        const uint16_t h = mc::float_to_half(v);
        std::memcpy(p, &h, 2);
        break;
      }
      case DType::BF16: {
        const uint16_t h = mc::float_to_bf16(v);
        std::memcpy(p, &h, 2);
        break;
      }
      case DType::I32: {
        const int32_t x = static_cast<int32_t>(v * 1000);
        std::memcpy(p, &x, 4);
        break;
      }
      case DType::Bool: *p = v > 0; break;
      default: break;
    }
  }
  return b;
}

TEST(TensorData, NpyRecomputesWhatTheCollectorComputed) {
  TempDir dir;
  std::mt19937 rng(7);
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::Bool}) {
    for (const std::vector<int64_t> &shape : std::vector<std::vector<int64_t>>{{3, 700}, {}, {0, 4}, {300000}}) {
      uint64_t n = 1;
      for (int64_t d : shape) n *= static_cast<uint64_t>(d);
      const auto bytes = random_bytes(t, n, rng);
      const fs::path p = dir / "t.npy";
      mc::write_npy_file(p, t, shape, bytes.data());
      const mt::TensorFile f = mt::open_tensor_file(p, info(t, shape));
      EXPECT_EQ(f.file_dtype, mc::npy_storage_dtype(t));
      EXPECT_EQ(f.shape, shape);
      for (auto fw : {mc::Framework::MindSpore, mc::Framework::PyTorch}) {
        const mt::Recomputed r = mt::recompute(f, t, shape.empty(), fw);
        expect_same_stats(r.low, mc::compute_stats(t, bytes.data(), shape, mc::StatPrecision::Low));
        expect_same_stats(r.high, mc::compute_stats(t, bytes.data(), shape, mc::StatPrecision::High));
        // The collector's md5: CRC of the tensor's bytes; bf16 under mindspore hashed as float32.
        const uint32_t crc = (t == DType::BF16 && fw == mc::Framework::MindSpore)
                                 ? mc::crc32_update_bf16_as_f32(0, reinterpret_cast<const uint16_t *>(bytes.data()), n)
                                 : mc::crc32_update(0, bytes.data(), bytes.size());
        EXPECT_EQ(r.crc, mc::crc32_hex(crc)) << mc::dtype_id(t) << " n=" << n;
      }
    }
  }
}

TEST(TensorData, BinIsTheRawBytes) {
  TempDir dir;
  std::mt19937 rng(9);
  const auto bytes = random_bytes(DType::BF16, 1000, rng);
  const fs::path p = dir / "t.bin";
  std::ofstream(p, std::ios::binary)
      .write(reinterpret_cast<const char *>(bytes.data()), static_cast<long>(bytes.size()));
  const mt::TensorFile f = mt::open_tensor_file(p, info(DType::BF16, {10, 100}));
  EXPECT_EQ(f.kind, mt::TensorFileKind::Bin);
  EXPECT_EQ(f.file_dtype, DType::BF16);
  const auto r = mt::recompute(f, DType::BF16, false, mc::Framework::PyTorch);
  expect_same_stats(r.low, mc::compute_stats(DType::BF16, bytes.data(), std::vector<int64_t>{10, 100}));
  EXPECT_EQ(r.crc, mc::crc32_hex(mc::crc32_update(0, bytes.data(), bytes.size())));
  const auto values = mt::read_tensor_values(f);
  ASSERT_EQ(values.size(), 1000u);
  uint16_t h;
  std::memcpy(&h, bytes.data() + 2 * 17, 2);
  EXPECT_EQ(values[17], static_cast<double>(mc::bf16_to_float(h)));

  try {
    (void)mt::open_tensor_file(p, info(DType::F32, {10, 100}));
    FAIL();
  } catch (const mt::TensorFileError &e) {
    EXPECT_NE(std::string(e.what()).find("size 2000 bytes, but float32 [10, 100] needs 4000"), std::string::npos)
        << e.what();
  }
}

TEST(TensorData, BrokenFilesSayWhatIsWrong) {
  TempDir dir;
  const std::vector<float> v(100, 1.5f);
  const fs::path p = dir / "x.npy";
  mc::write_npy_file(p, DType::F32, std::vector<int64_t>{100}, v.data());
  fs::resize_file(p, fs::file_size(p) - 4);
  auto error_of = [](const fs::path &path, const mt::TensorInfo &t) {
    try {
      (void)mt::open_tensor_file(path, t);
    } catch (const mt::TensorFileError &e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const auto t = info(DType::F32, {100});
  EXPECT_NE(error_of(p, t).find("data size mismatch"), std::string::npos) << error_of(p, t);
  EXPECT_EQ(error_of(p, t).find(p.string()), std::string::npos);  // the caller names the file
  EXPECT_EQ(error_of(dir / "absent.npy", t), "missing file");
  std::ofstream(dir / "y.lz4") << "x";
  EXPECT_NE(error_of(dir / "y.lz4", t).find("not a valid lz4 frame"), std::string::npos) << error_of(dir / "y.lz4", t);
  std::ofstream(dir / "y.txt") << "x";
  EXPECT_NE(error_of(dir / "y.txt", t).find("unknown tensor file suffix"), std::string::npos);
  fs::create_symlink(p, dir / "link.npy");
  EXPECT_NE(error_of(dir / "link.npy", t).find("symbolic link"), std::string::npos);
  std::ofstream(dir / "garbage.npy") << "not an npy file at all, but long enough to hold a header.............";
  EXPECT_NE(error_of(dir / "garbage.npy", t).find("magic"), std::string::npos) << error_of(dir / "garbage.npy", t);
}

TEST(TensorData, FileKinds) {
  EXPECT_EQ(mt::tensor_file_kind("a.b.npy"), mt::TensorFileKind::Npy);
  EXPECT_EQ(mt::tensor_file_kind("a.bin"), mt::TensorFileKind::Bin);
  EXPECT_EQ(mt::tensor_file_kind("a.npy.lz4"), mt::TensorFileKind::Lz4);
  EXPECT_EQ(mt::tensor_file_kind("a"), mt::TensorFileKind::Unknown);
}

}  // namespace
