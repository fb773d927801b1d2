// The Collector's writer threads: kernels prepared out of order are appended to dump.json / construct.json in
// submission order, nothing is lost or duplicated, statistics and files are right, and MSPROBE_COMPRESS=lz4 files
// decompress to exactly the uncompressed files. Also the pieces the writer uses: GatheringFdSink, Lz4FrameSink.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "collector/collector.h"
#include "collector/msprobe_writer.h"
#include "collector/tensor_view.h"
#include "format/format.h"
#include "format/half.h"
#include "format/lz4.h"
#include "format/npy.h"

namespace mc = msprobe::collector;
namespace fs = std::filesystem;
using mc::DType;

namespace {

std::string slurp(const fs::path &p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

fs::path fresh_dir(const std::string &name) {
  fs::path d = fs::temp_directory_path() / ("msprobe_collector_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

class VectorBlock final : public mc::HostBlock {
 public:
  explicit VectorBlock(std::vector<unsigned char> b) : bytes_(std::move(b)) {}
  const void *data() const override { return bytes_.data(); }
  uint64_t size() const override { return bytes_.size(); }

 private:
  std::vector<unsigned char> bytes_;
};

template <typename T>
std::shared_ptr<const mc::HostBlock> block_of(const std::vector<T> &v) {
  std::vector<unsigned char> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return std::make_shared<VectorBlock>(std::move(b));
}

mc::TensorCapture tensor(DType dt, std::vector<int64_t> shape, std::shared_ptr<const mc::HostBlock> block) {
  mc::TensorCapture t;
  t.dtype = dt;
  t.shape = shape;
  t.block_strides.assign(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) t.block_strides[i - 1] = t.block_strides[i] * shape[i];
  t.block = std::move(block);
  return t;
}

// Kernel 0's data becomes ready only after every other kernel's readiness was asked for: the other writer threads
// must prepare (and park) the later kernels while the first one is still waiting.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  int asked = 0;
};

class GatedCompletion final : public mc::Completion {
 public:
  GatedCompletion(Gate &g, bool first, int others) : g_(g), first_(first), others_(others) {}
  bool wait() override {
    std::unique_lock<std::mutex> lk(g_.mu);
    if (first_) {
      g_.cv.wait(lk, [&] { return g_.asked >= others_; });
    } else {
      ++g_.asked;
      g_.cv.notify_all();
    }
    return true;
  }

 private:
  Gate &g_;
  bool first_;
  int others_;
};

std::vector<std::string> keys_in_order(const fs::path &json_file, const char *member) {
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(slurp(json_file));
  const nlohmann::ordered_json &obj = member ? j.at(member) : j;
  std::vector<std::string> out;
  for (auto it = obj.begin(); it != obj.end(); ++it) out.push_back(it.key());
  return out;
}

// A collector with msprobe's writer and every kernel written (the statistics and tensor tasks' retention).
mc::CollectorParts writer_only(mc::MsprobeWriterOptions o, unsigned threads = 0) {
  mc::CollectorParts p;
  p.writer = mc::msprobe_writer(std::move(o));
  p.writer_threads = threads;
  return p;
}

// A strided view gathered into logical (row-major) order, checked against indexing by hand: a transposed matrix
// (inner stride not 1), a slice of padded rows (inner stride 1: copied a row at a time), a reversed dimension, and
// element sizes 1, 2, 4 and 8.
template <typename T>
void expect_gathered(DType dt, std::vector<int64_t> shape, std::vector<int64_t> strides, int64_t offset,
                     size_t storage) {
  std::vector<T> store(storage);
  for (size_t i = 0; i < storage; ++i) store[i] = static_cast<T>(i * 7 + 3);
  mc::TensorCapture t = tensor(dt, shape, block_of(store));
  t.block_strides = strides;
  t.block_offset = offset;
  std::vector<unsigned char> scratch;
  uint64_t bytes = 0;
  const unsigned char *got = mc::materialize(t, scratch, &bytes);
  ASSERT_NE(got, nullptr);
  std::vector<T> want;
  std::vector<int64_t> idx(shape.size(), 0);
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  for (uint64_t i = 0; i < n; ++i) {
    int64_t off = offset;
    for (size_t d = 0; d < shape.size(); ++d) off += idx[d] * strides[d];
    want.push_back(store[static_cast<size_t>(off)]);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  ASSERT_EQ(bytes, want.size() * sizeof(T));
  EXPECT_EQ(std::memcmp(got, want.data(), bytes), 0);
}

TEST(TensorView, StridedViewsAreGatheredInLogicalOrder) {
  expect_gathered<float>(DType::F32, {3, 5}, {1, 3}, 0, 15);                   // the transpose of a 5x3 matrix
  expect_gathered<uint16_t>(DType::F16, {4, 6}, {8, 1}, 2, 40);                // 6 of every 8, from offset 2
  expect_gathered<double>(DType::F64, {2, 3, 4}, {1, 8, 2}, 0, 32);            // three dimensions, none in order
  expect_gathered<int8_t>(DType::I8, {5, 2}, {-2, 1}, 8, 10);                  // rows in reverse
  expect_gathered<int64_t>(DType::I64, {2, 1, 3}, {3, 99, 1}, 0, 6);           // a size-1 dimension's stride is free
  expect_gathered<float>(DType::F32, {7}, {3}, 1, 21);                         // one dimension, every third
  expect_gathered<float>(DType::F32, {3, 1}, {2, 5}, 0, 6);                    // size-1 innermost, stride not 1
  expect_gathered<uint16_t>(DType::F16, {3, 4}, {0, 1}, 0, 4);                 // a broadcast row (stride 0)
  expect_gathered<int32_t>(DType::I32, {4, 3}, {1, 0}, 0, 4);                  // a broadcast column
}

TEST(Collector, WriterThreadsAppendInSubmissionOrder) {
  const fs::path dir = fresh_dir("order");
  constexpr int kKernels = 64;
  mc::MsprobeWriterOptions o;
  o.dump_path = dir;
  Gate gate;
  std::vector<std::vector<float>> data(kKernels);
  {
    mc::Collector c(writer_only(std::move(o), 4));
    for (int i = 0; i < kKernels; ++i) {
      mc::KernelCapture k;
      k.name = "Op" + std::to_string(i % 3) + ".Default." + std::to_string(i / 3);
      k.launch_index = (uint64_t)i;
      data[i].resize(16 + i);
      for (size_t j = 0; j < data[i].size(); ++j) data[i][j] = (float)(i + 1) * ((float)j - 7.5f);
      k.outputs = mc::CapturedList{mc::CapturedArg{tensor(DType::F32, {(int64_t)data[i].size()}, block_of(data[i]))}};
      k.inputs = mc::CapturedList{};
      k.ready = std::make_shared<GatedCompletion>(gate, i == 0, kKernels - 1);
      c.submit(std::move(k));
    }
    c.close();
    const mc::CollectorCounters n = c.counters();
    EXPECT_EQ(n.written, (uint64_t)kKernels);
    EXPECT_EQ(n.submitted, (uint64_t)kKernels);
    // Kernel 0 was the last to be ready, so later kernels waited for it.
    EXPECT_GT(n.reorder_high_water, 0u);
  }
  const fs::path rank_dir = dir / "step0" / "rank";
  const std::vector<std::string> dump_keys = keys_in_order(rank_dir / "dump.json", "data");
  const std::vector<std::string> construct_keys = keys_in_order(rank_dir / "construct.json", nullptr);
  ASSERT_EQ(dump_keys.size(), (size_t)kKernels);
  EXPECT_EQ(construct_keys, dump_keys);
  nlohmann::json j = nlohmann::json::parse(slurp(rank_dir / "dump.json"));
  for (int i = 0; i < kKernels; ++i) {
    EXPECT_EQ(dump_keys[i], "Op" + std::to_string(i % 3) + ".Default." + std::to_string(i / 3));
    const auto &e = j["data"][dump_keys[i]];
    EXPECT_EQ(e["launch"]["index"].get<int>(), i);
    // Max/Min of (i+1)*(j-7.5) over j in [0, 16+i).
    const float hi = (float)(i + 1) * ((float)(15 + i) - 7.5f), lo = (float)(i + 1) * -7.5f;
    EXPECT_EQ(e["output"][0]["Max"].get<double>(), (double)hi) << dump_keys[i];
    EXPECT_EQ(e["output"][0]["Min"].get<double>(), (double)lo) << dump_keys[i];
  }
  fs::remove_all(dir);
}

// A second writer through the seam (collector/writer.h): it writes nothing and records what the pipeline and the
// retention hand it, so that the seam, not msprobe's layout, is what these tests check.
struct WriterLog {
  std::mutex mu;
  std::vector<std::string> encoded, appended;
  std::vector<std::string> triggers;  // each appended kernel's flight trigger ("" when none)
  int closes = 0;
  // Each write_stacks(): its thread and how many kernels were appended by then.
  std::vector<std::pair<std::thread::id, size_t>> stacks;
};

class RecordingWriter final : public mc::DumpWriter {
 public:
  explicit RecordingWriter(std::shared_ptr<WriterLog> log) : log_(std::move(log)) {}
  void encode(mc::PendingKernel &k) override {
    std::lock_guard<std::mutex> lk(log_->mu);
    log_->encoded.push_back(k.k.name);
    k.encoded = std::make_unique<Encoding>(k.k.name);
  }
  void append(mc::PendingKernel &k) override {
    std::lock_guard<std::mutex> lk(log_->mu);
    // Every kernel reaches append() encoded, with its own encoding.
    const auto *e = dynamic_cast<const Encoding *>(k.encoded.get());
    log_->appended.push_back(e && e->name == k.k.name ? k.k.name : "not encoded: " + k.k.name);
    std::string trigger;
    for (const auto &[key, value] : k.k.notes)
      if (key == msprobe::format::json_key::kFlightTrigger) trigger = value;
    log_->triggers.push_back(trigger);
  }
  void write_stacks() override {
    std::lock_guard<std::mutex> lk(log_->mu);
    log_->stacks.emplace_back(std::this_thread::get_id(), log_->appended.size());
  }
  void close() override {
    std::lock_guard<std::mutex> lk(log_->mu);
    ++log_->closes;
  }
  void count(mc::CollectorCounters &c) const override {
    std::lock_guard<std::mutex> lk(log_->mu);
    c.written += log_->appended.size();
  }

 private:
  struct Encoding final : mc::EncodedKernel {
    explicit Encoding(std::string n) : name(std::move(n)) {}
    std::string name;
  };
  std::shared_ptr<WriterLog> log_;
};

mc::CollectorParts recording(std::shared_ptr<WriterLog> log, std::unique_ptr<mc::Retention> retention,
                             unsigned threads) {
  mc::CollectorParts p;
  p.writer = std::make_unique<RecordingWriter>(std::move(log));
  p.retention = std::move(retention);
  p.writer_threads = threads;
  return p;
}

// Kernel i has one output of 8 floats; `bad` ones hold a NaN.
mc::KernelCapture checked_kernel(int i, bool bad) {
  std::vector<float> v(8, (float)i);
  if (bad) v[3] = std::nanf("");
  mc::KernelCapture k;
  k.name = "Relu.k" + std::to_string(i) + ".0.forward";
  k.launch_index = (uint64_t)i;
  k.inputs = mc::CapturedList{};
  k.outputs = mc::CapturedList{mc::CapturedArg{tensor(DType::F32, {8}, block_of(v))}};
  return k;
}

std::vector<std::string> names(std::initializer_list<int> ids) {
  std::vector<std::string> out;
  for (int i : ids) out.push_back("Relu.k" + std::to_string(i) + ".0.forward");
  return out;
}

TEST(WriterSeam, PipelineHandsEveryKernelEncodedInSubmissionOrder) {
  auto log = std::make_shared<WriterLog>();
  constexpr int kKernels = 48;
  Gate gate;
  std::vector<std::string> submitted;
  {
    mc::Collector c(recording(log, nullptr, 4));
    for (int i = 0; i < kKernels; ++i) {
      mc::KernelCapture k = checked_kernel(i, false);
      k.ready = std::make_shared<GatedCompletion>(gate, i == 0, kKernels - 1);
      submitted.push_back(k.name);
      c.submit(std::move(k));
    }
    c.close();
    const mc::CollectorCounters n = c.counters();
    EXPECT_EQ(n.submitted, (uint64_t)kKernels);
    EXPECT_EQ(n.written, (uint64_t)kKernels);  // the writer's own count
    EXPECT_GT(n.reorder_high_water, 0u);       // kernel 0 came last, so the others were encoded before it
  }
  EXPECT_EQ(log->appended, submitted);
  std::vector<std::string> encoded = log->encoded;
  std::sort(encoded.begin(), encoded.end());
  std::sort(submitted.begin(), submitted.end());
  EXPECT_EQ(encoded, submitted);  // each once, in whatever order the threads got to them
  EXPECT_EQ(log->closes, 1);
}

TEST(WriterSeam, FlushHasAWriterThreadWriteTheStackFilesBeforeItReturns) {
  // The flushing thread is the host's (aclFinalize): it waits, and a writer thread renders and writes stack.json.
  auto log = std::make_shared<WriterLog>();
  {
    mc::Collector c(recording(log, nullptr, 2));
    for (int i = 0; i < 8; ++i) c.submit(checked_kernel(i, false));
    c.flush();
    {
      std::lock_guard<std::mutex> lk(log->mu);
      ASSERT_EQ(log->stacks.size(), 1u);
      EXPECT_NE(log->stacks[0].first, std::this_thread::get_id());
      EXPECT_EQ(log->stacks[0].second, 8u);  // written after every kernel submitted before the flush
    }
    for (int i = 8; i < 12; ++i) c.submit(checked_kernel(i, false));
    c.flush();
    c.close();
  }
  ASSERT_GE(log->stacks.size(), 2u);
  EXPECT_NE(log->stacks[1].first, std::this_thread::get_id());
  EXPECT_EQ(log->stacks[1].second, 12u);
  EXPECT_EQ(log->stacks.back().second, 12u);  // and once more at close: complete on disk
}

TEST(WriterSeam, FirstOverflowsAppendsOnlyTheFirstFound) {
  auto log = std::make_shared<WriterLog>();
  {
    mc::Collector c(
        recording(log, mc::first_overflows(2, msprobe::format::StatPrecision::High, nullptr), 2));
    for (int i = 0; i < 10; ++i) c.submit(checked_kernel(i, i == 2 || i == 5 || i == 7));
    c.flush();
    EXPECT_TRUE(c.write_limit_reached());
    c.close();
    EXPECT_EQ(c.counters().overflows, 2u);
  }
  EXPECT_EQ(log->appended, names({2, 5}));
}

TEST(WriterSeam, FlightRecordAppendsTheKeptKernelsWithTheirTrigger) {
  auto log = std::make_shared<WriterLog>();
  {
    mc::Collector c(recording(log, mc::flight_record(3, true, -1, msprobe::format::StatPrecision::High, nullptr), 2));
    for (int i = 0; i < 6; ++i) c.submit(checked_kernel(i, i == 4));
    c.flush();
    EXPECT_FALSE(c.write_limit_reached());  // no limit on records
    for (int i = 6; i < 12; ++i) c.submit(checked_kernel(i, false));
    c.write_kept("exit");
    c.close();
  }
  // The overflow at 4 with the 3 kept before it, then the last 3 at exit.
  EXPECT_EQ(log->appended, names({1, 2, 3, 4, 9, 10, 11}));
  EXPECT_EQ(log->triggers, (std::vector<std::string>{"overflow", "overflow", "overflow", "overflow", "exit", "exit", "exit"}));
}

// The same kernels through the tensor task, plain and lz4: every .npy.lz4 decompresses to the .npy byte for byte.
TEST(Collector, Lz4FilesDecompressToTheUncompressedFiles) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.f, 3.f);
  std::vector<float> f32(300000);  // > 1 MiB: several lz4 input pieces
  for (float &x : f32) x = nd(rng);
  std::vector<uint16_t> bf16(5000);
  for (uint16_t &x : bf16) x = mc::float_to_bf16(nd(rng));
  std::vector<int64_t> i64(10);
  for (size_t i = 0; i < i64.size(); ++i) i64[i] = (int64_t)i * 1000003 - 5;
  const std::string long_op(300, 'L');  // a name over 255 characters: renamed and mapped

  auto run = [&](mc::Compression z) {
    const fs::path dir = fresh_dir(z == mc::Compression::Lz4 ? "lz4" : "plain");
    mc::MsprobeWriterOptions o;
    o.dump_path = dir;
    o.dump_task = mc::Task::Tensor;
    o.save_tensors = true;
    o.compress = z;
    mc::Collector c(writer_only(std::move(o)));
    mc::KernelCapture k;
    k.name = "Mix.Default.0.forward";
    k.inputs = mc::CapturedList{mc::CapturedArg{tensor(DType::F32, {600, 500}, block_of(f32))},
                                mc::CapturedArg{tensor(DType::BF16, {50, 100}, block_of(bf16))}};
    k.outputs = mc::CapturedList{mc::CapturedArg{tensor(DType::I64, {10}, block_of(i64))}};
    c.submit(std::move(k));
    mc::KernelCapture l;
    l.name = long_op + ".Default.0";
    l.outputs = mc::CapturedList{mc::CapturedArg{tensor(DType::I64, {10}, block_of(i64))}};
    c.submit(std::move(l));
    c.close();
    EXPECT_EQ(c.counters().tensor_files, 4u);
    if (z == mc::Compression::Lz4) {
      EXPECT_LT(c.counters().file_bytes, c.counters().tensor_bytes);
    }
    return dir;
  };
  const fs::path plain = run(mc::Compression::Off), packed = run(mc::Compression::Lz4);
  const fs::path pt = plain / "step0" / "rank" / "dump_tensor_data",
                 zt = packed / "step0" / "rank" / "dump_tensor_data";
  nlohmann::json pj = nlohmann::json::parse(slurp(plain / "step0" / "rank" / "dump.json"));
  nlohmann::json zj = nlohmann::json::parse(slurp(packed / "step0" / "rank" / "dump.json"));
  int compared = 0;
  for (auto &[kernel, e] : pj["data"].items()) {
    for (const char *side : {"input_args", "output"}) {
      if (!e.contains(side)) continue;
      for (size_t i = 0; i < e[side].size(); ++i) {
        const std::string pn = e[side][i]["data_name"], zn = zj["data"][kernel][side][i]["data_name"];
        EXPECT_EQ(zj["data"][kernel][side][i]["Norm"], e[side][i]["Norm"]);
        const std::string want = slurp(pt / pn);
        if (kernel.size() < 200) {
          EXPECT_EQ(zn, pn + ".lz4");
        } else {
          // Renamed: 32 digits and the last suffix, as for any long name.
          EXPECT_EQ(zn.size(), 32u + 4u) << zn;
          EXPECT_EQ(zn.substr(32), ".lz4");
          EXPECT_NE(slurp(zt / "mapping.csv").find(zn + "," + kernel), std::string::npos);
        }
        EXPECT_EQ(mc::lz4_decompress(slurp(zt / zn)), want) << zn;
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 4);
  fs::remove_all(plain);
  fs::remove_all(packed);
}

TEST(GatheringFdSink, HeaderAndDataInOneSystemCall) {
  const fs::path dir = fresh_dir("sink");
  const fs::path p = dir / "x.npy";
  std::vector<float> v(100000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = (float)i * 0.5f;
  const int64_t shape[] = {(int64_t)v.size()};
  {
    const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0640);
    ASSERT_GE(fd, 0);
    mc::GatheringFdSink s(fd);
    mc::write_npy(s, DType::F32, shape, v.data());
    s.flush();
    EXPECT_EQ(s.syscalls(), 1u);
    EXPECT_EQ(s.bytes_written(), 128u + v.size() * 4);
    ::close(fd);
  }
  mc::StringSink ref;
  mc::write_npy(ref, DType::F32, shape, v.data());
  EXPECT_EQ(slurp(p), ref.str());
  // A small file: gathered entirely, written at flush().
  {
    const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0640);
    mc::GatheringFdSink s(fd);
    const int64_t s3[] = {3};
    mc::write_npy(s, DType::F32, s3, v.data());
    EXPECT_EQ(s.syscalls(), 0u);
    s.flush();
    EXPECT_EQ(s.syscalls(), 1u);
    ::close(fd);
  }
  EXPECT_EQ(mc::read_npy_file(p).data, std::string(reinterpret_cast<const char *>(v.data()), 12));
  fs::remove_all(dir);
}

TEST(Lz4, RoundTripAndDamage) {
  std::string data(9u << 20, '\0');  // 9 MiB: three 4 MiB blocks
  std::mt19937 rng(1);
  for (size_t i = 0; i < data.size(); ++i) data[i] = (char)((i % 251) ^ (rng() % 4));
  const std::string frame = mc::lz4_compress(data);
  EXPECT_LT(frame.size(), data.size());
  EXPECT_EQ(frame.substr(0, 4), std::string("\x04\x22\x4d\x18", 4));  // LZ4 frame magic
  EXPECT_EQ(mc::lz4_decompress(frame), data);
  EXPECT_EQ(mc::lz4_decompress(mc::lz4_compress("")), "");
  EXPECT_THROW(mc::lz4_decompress(frame.substr(0, frame.size() / 2)), mc::Lz4Error);
  EXPECT_THROW(mc::lz4_decompress("not a frame at all"), mc::Lz4Error);
  std::string flipped = frame;
  flipped[frame.size() / 2] ^= 0x55;
  EXPECT_THROW(mc::lz4_decompress(flipped), mc::Lz4Error);
}

}  // namespace
