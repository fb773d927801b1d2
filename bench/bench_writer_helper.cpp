// C++ side of bench/bench_writer.py: the collector's own code timed on data the Python driver prepares.
//
//   bench_writer_helper stats DTYPE FILE REPS          compute_stats over the raw elements of FILE, REPS times;
//                                                     prints "ns_per_pass N bytes B elements E"
//   bench_writer_helper write DIR KERNELS FILE [lz4|nofiles]
//                                                     the Collector (tensor task) writes KERNELS kernels, each with
//                                                     one float32 tensor holding FILE's elements (nofiles: the
//                                                     statistics task, no tensor files); prints
//                                                     "seconds S tensor_bytes B file_bytes F threads T"
//   bench_writer_helper lz4 FILE...                    one LZ4 frame per file (in memory); prints
//                                                     "seconds S in_bytes B out_bytes F"
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "collector/collector.h"
#include "collector/msprobe_writer.h"
#include "format/lz4.h"
#include "format/stats.h"

namespace mc = msprobe::collector;

namespace {

std::string slurp(const char *path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", path);
    std::exit(2);
  }
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

class SharedBlock final : public mc::HostBlock {
 public:
  explicit SharedBlock(std::shared_ptr<const std::string> s) : s_(std::move(s)) {}
  const void *data() const override { return s_->data(); }
  uint64_t size() const override { return s_->size(); }

 private:
  std::shared_ptr<const std::string> s_;
};

int stats(const char *dtype, const char *file, int reps) {
  const auto t = mc::parse_dtype_id(dtype);
  if (!t) return std::fprintf(stderr, "unknown dtype %s\n", dtype), 2;
  const std::string data = slurp(file);
  const uint64_t n = data.size() / mc::element_size(*t);
  volatile double sink = 0;
  sink = sink + mc::compute_stats(*t, data.data(), n).count;  // warm-up (page faults, caches)
  const double t0 = now_s();
  for (int r = 0; r < reps; ++r) sink = sink + mc::compute_stats(*t, data.data(), n).norm.real;
  const double dt = now_s() - t0;
  std::printf("ns_per_pass %.0f bytes %zu elements %llu\n", dt / reps * 1e9, data.size(), (unsigned long long)n);
  return 0;
}

int write(const char *dir, int kernels, const char *file, bool lz4, bool files) {
  auto data = std::make_shared<const std::string>(slurp(file));
  const int64_t n = (int64_t)(data->size() / 4);
  mc::MsprobeWriterOptions o;
  o.dump_path = dir;
  o.dump_task = files ? mc::Task::Tensor : mc::Task::Statistics;
  o.save_tensors = files;
  o.compress = lz4 ? mc::Compression::Lz4 : mc::Compression::Off;
  const double t0 = now_s();
  mc::CollectorParts parts;
  parts.writer = mc::msprobe_writer(std::move(o));
  mc::Collector c(std::move(parts));
  for (int i = 0; i < kernels; ++i) {
    mc::KernelCapture k;
    k.name = "Write.Default." + std::to_string(i);
    mc::TensorCapture t;
    t.dtype = mc::DType::F32;
    t.shape = {n};
    t.block_strides = {1};
    t.block = std::make_shared<SharedBlock>(data);
    k.outputs = mc::CapturedList{mc::CapturedArg{std::move(t)}};
    c.submit(std::move(k));
  }
  c.close();
  const double dt = now_s() - t0;
  const mc::CollectorCounters cn = c.counters();
  std::printf("seconds %.6f tensor_bytes %llu file_bytes %llu threads %u\n", dt, (unsigned long long)cn.tensor_bytes,
              (unsigned long long)cn.file_bytes, std::min(4u, std::max(1u, std::thread::hardware_concurrency())));
  return cn.write_errors == 0 ? 0 : 1;
}

int lz4(int argc, char **argv) {
  std::vector<std::string> files;
  for (int i = 0; i < argc; ++i) files.push_back(slurp(argv[i]));
  uint64_t in = 0, out = 0;
  const double t0 = now_s();
  for (const std::string &f : files) {
    in += f.size();
    out += mc::lz4_compress(f).size();
  }
  std::printf("seconds %.6f in_bytes %llu out_bytes %llu\n", now_s() - t0, (unsigned long long)in,
              (unsigned long long)out);
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc >= 5 && std::strcmp(argv[1], "stats") == 0) return stats(argv[2], argv[3], std::atoi(argv[4]));
  if (argc >= 5 && std::strcmp(argv[1], "write") == 0)
    return write(argv[2], std::atoi(argv[3]), argv[4], argc > 5 && std::strcmp(argv[5], "lz4") == 0,
                 !(argc > 5 && std::strcmp(argv[5], "nofiles") == 0));
  if (argc >= 3 && std::strcmp(argv[1], "lz4") == 0) return lz4(argc - 2, argv + 2);
  std::fprintf(
      stderr,
      "usage: bench_writer_helper stats DTYPE FILE REPS | write DIR KERNELS FILE [lz4|nofiles] | lz4 FILE...\n");
  return 2;
}
