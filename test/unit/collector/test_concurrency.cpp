// The collector under concurrent use (issue 8: run under TSan by scripts/sanitize.sh): many launching threads
// submit at once while other threads flush, staged bytes become ready out of order, and kernels are named from
// several threads. What is checked is the result: every kernel written once, in submission order, with the
// statistics and file contents of its own bytes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "collector/collector.h"
#include "collector/msprobe_writer.h"
#include "format/naming.h"
#include "format/npy.h"

namespace fs = std::filesystem;
using namespace msprobe::collector;

namespace {

class FloatBlock : public HostBlock {
 public:
  explicit FloatBlock(std::vector<float> v) : v_(std::move(v)) {}
  const void *data() const override { return v_.data(); }
  uint64_t size() const override { return v_.size() * sizeof(float); }

 private:
  std::vector<float> v_;
};

// Ready when the gate opens (a device copy finishing later than the launch).
class Gate {
 public:
  void open() {
    std::lock_guard<std::mutex> lock(m_);
    open_ = true;
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lock(m_);
    cv_.wait(lock, [&] { return open_; });
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool open_ = false;
};

class GateCompletion : public Completion {
 public:
  explicit GateCompletion(std::shared_ptr<Gate> g) : gate_(std::move(g)) {}
  bool wait() override {
    gate_->wait();
    return true;
  }

 private:
  std::shared_ptr<Gate> gate_;
};

fs::path fresh_dir(const std::string &name) {
  fs::path d = fs::temp_directory_path() / ("msprobe_concurrency_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}

nlohmann::ordered_json read_json(const fs::path &p) {
  std::ifstream in(p);
  return nlohmann::ordered_json::parse(in);
}

// The value every element of kernel (t, i)'s tensor holds: distinct per kernel, exact in float32.
float value_of(int t, int i) { return static_cast<float>(t * 1000 + i); }

}  // namespace

// A collector with msprobe's writer and every kernel written (the statistics and tensor tasks' retention).
CollectorParts writer_only(MsprobeWriterOptions o, unsigned threads = 0) {
  CollectorParts p;
  p.writer = msprobe_writer(std::move(o));
  p.writer_threads = threads;
  return p;
}

TEST(CollectorConcurrency, ManyProducersFlushersAndLateCompletions) {
  constexpr int kThreads = 6, kPerThread = 60;
  const fs::path root = fresh_dir("producers");
  MsprobeWriterOptions o;
  o.dump_path = root;
  o.dump_task = Task::Tensor;
  o.save_tensors = true;
  Collector c(writer_only(std::move(o), 3));

  std::mutex submit_mutex;  // makes launch_index the submission order, which dump.json must follow
  uint64_t next_index = 0;
  std::vector<std::shared_ptr<Gate>> gates;
  std::mutex gates_mutex;
  std::atomic<bool> producing{true};

  auto producer = [&](int t) {
    for (int i = 0; i < kPerThread; ++i) {
      KernelCapture k;
      k.step = static_cast<uint64_t>(i % 2);
      k.rank = 0;
      TensorCapture tc;
      tc.dtype = DType::F32;
      tc.shape = {4};
      tc.block_strides = {1};
      tc.block = std::make_shared<FloatBlock>(std::vector<float>(4, value_of(t, i)));
      k.inputs = CapturedList{CapturedArg{tc}};
      k.outputs = CapturedList{CapturedArg{tc}};
      if (i % 3 == 0) {  // every third kernel's bytes arrive late, released by the gate thread
        auto g = std::make_shared<Gate>();
        k.ready = std::make_shared<GateCompletion>(g);
        std::lock_guard<std::mutex> lock(gates_mutex);
        gates.push_back(g);
      }
      std::lock_guard<std::mutex> lock(submit_mutex);
      k.launch_index = next_index++;
      k.name = "T" + std::to_string(t) + ".Default." + std::to_string(i);
      c.submit(std::move(k));
    }
  };
  std::thread opener([&] {  // opens the gates in reverse order while the producers run
    while (producing.load() || [&] {
      std::lock_guard<std::mutex> lock(gates_mutex);
      return !gates.empty();
    }()) {
      std::shared_ptr<Gate> g;
      {
        std::lock_guard<std::mutex> lock(gates_mutex);
        if (!gates.empty()) {
          g = gates.back();
          gates.pop_back();
        }
      }
      if (g)
        g->open();
      else
        std::this_thread::yield();
    }
  });
  std::thread flusher([&] {
    while (producing.load()) c.flush();
  });
  std::vector<std::thread> producers;
  for (int t = 0; t < kThreads; ++t) producers.emplace_back(producer, t);
  for (auto &p : producers) p.join();
  producing = false;
  opener.join();
  flusher.join();
  c.close();

  const CollectorCounters n = c.counters();
  EXPECT_EQ(n.submitted, uint64_t{kThreads * kPerThread});
  EXPECT_EQ(n.written, uint64_t{kThreads * kPerThread});
  EXPECT_EQ(n.write_errors, 0u);
  EXPECT_EQ(n.tensor_files, uint64_t{2 * kThreads * kPerThread});

  size_t seen = 0;
  for (int step = 0; step < 2; ++step) {
    const fs::path dir = root / ("step" + std::to_string(step)) / "rank0";
    const auto dump = read_json(dir / std::string(kDumpJson));
    uint64_t last = 0;
    bool first = true;
    for (const auto &[name, e] : dump["data"].items()) {
      const uint64_t index = e["launch"]["index"].get<uint64_t>();
      EXPECT_TRUE(first || index > last) << name << " appended out of submission order";
      first = false;
      last = index;
      const int t = std::stoi(name.substr(1, name.find('.') - 1));
      const int i = std::stoi(name.substr(name.rfind('.') + 1));
      EXPECT_EQ(i % 2, step) << name;
      const float want = value_of(t, i);
      for (const char *side : {"input_args", "output"}) {
        const auto &tensor = e[side][0];
        EXPECT_EQ(tensor["Max"].get<double>(), want) << name;
        EXPECT_EQ(tensor["Min"].get<double>(), want) << name;
        const NpyFile f = read_npy_file(dir / std::string(kTensorDir) / tensor["data_name"].get<std::string>());
        ASSERT_EQ(f.data.size(), 4 * sizeof(float)) << name;
        const float *v = reinterpret_cast<const float *>(f.data.data());
        for (int k = 0; k < 4; ++k) EXPECT_EQ(v[k], want) << name;
      }
      ++seen;
    }
    EXPECT_EQ(read_json(dir / std::string(kConstructJson)).size(), dump["data"].size());
  }
  EXPECT_EQ(seen, size_t{kThreads * kPerThread});
  fs::remove_all(root);
}

TEST(CollectorConcurrency, SubmitsRacingCloseAreCountedNotLost) {
  const fs::path root = fresh_dir("close");
  MsprobeWriterOptions o;
  o.dump_path = root;
  auto c = std::make_unique<Collector>(writer_only(std::move(o)));
  std::atomic<uint64_t> submitted{0};
  std::vector<std::thread> producers;
  for (int t = 0; t < 4; ++t) {
    producers.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        KernelCapture k;
        k.name = "R" + std::to_string(t) + ".Default." + std::to_string(i);
        k.rank = 1;
        c->submit(std::move(k));
        ++submitted;
      }
    });
  }
  std::this_thread::yield();
  c->close();
  for (auto &p : producers) p.join();
  const CollectorCounters n = c->counters();
  EXPECT_EQ(n.submitted, submitted.load());  // after_close ones included
  EXPECT_EQ(n.written, n.submitted - n.after_close);
  c.reset();
  if (fs::exists(root / "step0" / "rank1")) {
    EXPECT_EQ(read_json(root / "step0" / "rank1" / std::string(kDumpJson))["data"].size(), n.written);
  } else {
    EXPECT_EQ(n.written, 0u);
  }
  fs::remove_all(root);
}
