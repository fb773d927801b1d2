#include "collector/retention.h"

#include <atomic>
#include <cstdio>
#include <deque>
#include <functional>
#include <mutex>
#include <utility>

#include "collector/tensor_view.h"
#include "format/naming.h"
#include "format/stack_text.h"

namespace msprobe::collector {
namespace {

using format::json_key::kFlightTrigger;
using format::json_key::kFlightTriggerKernel;
using format::json_key::kOverflow;

// Encodes and appends one kernel; an overflow found is its note.
void write(PendingKernel &k, DumpWriter &writer) {
  if (!k.overflow.empty()) k.k.notes.emplace_back(kOverflow, k.overflow);
  writer.encode(k);
  writer.append(k);
}

class WriteAll final : public Retention {
 public:
  bool examine(PendingKernel &) override { return true; }
  void commit(PendingKernel &&k, DumpWriter &writer) override { writer.append(k); }
};

// Every tensor of an argument list, lists included.
void for_each_tensor(std::optional<record::CapturedList> &args, const std::function<void(record::TensorCapture &)> &f) {
  if (!args) return;
  std::function<void(record::CapturedArg &)> visit = [&](record::CapturedArg &a) {
    if (auto *t = std::get_if<record::TensorCapture>(&a.v)) f(*t);
    if (auto *l = std::get_if<record::CapturedList>(&a.v))
      for (record::CapturedArg &x : *l) visit(x);
  };
  for (record::CapturedArg &a : *args) visit(a);
}

// What overflow_check and the flight task share: the check, the limit and the message.
class OutputCheck : public Retention {
 public:
  OutputCheck(int64_t limit, format::StatPrecision precision, std::shared_ptr<record::StackRenderer> stacks)
      : limit_(limit), precision_(precision), stacks_(std::move(stacks)) {
    reached_.store(limit == 0, std::memory_order_relaxed);
  }
  bool examine(PendingKernel &k) override {
    if (k.have_data) k.overflow = nonfinite_outputs(k.k, precision_);
    return false;
  }
  bool limit_reached() const noexcept override { return reached_.load(std::memory_order_relaxed); }
  void count(CollectorCounters &c) const override {
    std::lock_guard<std::mutex> lk(mu_);
    c.overflows += found_;
  }

 protected:
  // One more found: false when the limit had been reached before it. In submission order.
  bool count_one() {
    std::lock_guard<std::mutex> lk(mu_);
    if (limit_ >= 0 && found_ >= (uint64_t)limit_) return false;
    ++found_;
    if (limit_ >= 0 && found_ >= (uint64_t)limit_) reached_.store(true, std::memory_order_relaxed);
    return true;
  }
  // "Muls.x.0.forward (step 1, rank0, launch 12): output.0: ...; launched at File train.py, line 89, in forward, ...".
  std::string where(const record::KernelCapture &k, const std::string &overflow) const {
    std::string w = k.name + " (step " + std::to_string(k.step) + ", " + format::rank_dir_name(k.rank) + ", launch " +
                    std::to_string(k.launch_index) + "): " + overflow;
    // The user's own line says where it came from, as every tool says it (format/stack_text.h); the whole stack is in
    // stack.json.
    if (uint64_t g = stacks_ ? stacks_->group(k.stack_id) : 0; g != 0) {
      const std::vector<std::string> frames = stacks_->frames(g);
      if (const std::optional<size_t> user = format::user_frame(frames))
        w += "; launched at " + format::frame_line(frames[*user]);
    }
    return w;
  }
  format::StatPrecision precision() const { return precision_; }
  // A tensor whose bytes were kept (on the device, in the ring) lets its device results go: its statistics, if it is
  // ever written, come from the bytes (the device may have reduced its extremes only, for the check).
  static void use_kept_bytes(PendingKernel &k) {
    for (auto *args : {&k.k.inputs, &k.k.outputs})
      for_each_tensor(*args, [](record::TensorCapture &t) {
        if (t.block) t.device_stats.reset();
      });
  }
  // An overflow found from the extremes says which kinds; the record says how many, from the bytes.
  void count_exactly(PendingKernel &k) const {
    use_kept_bytes(k);
    if (std::string exact = nonfinite_outputs(k.k, precision_); !exact.empty()) k.overflow = std::move(exact);
  }

 private:
  const int64_t limit_;
  const format::StatPrecision precision_;
  const std::shared_ptr<record::StackRenderer> stacks_;
  std::atomic<bool> reached_{false};  // read on launching threads, without the lock
  mutable std::mutex mu_;
  uint64_t found_ = 0;
};

class FirstOverflows final : public OutputCheck {
 public:
  using OutputCheck::OutputCheck;
  void commit(PendingKernel &&k, DumpWriter &writer) override {
    if (!k.have_data || k.overflow.empty()) return;  // a clean kernel: nothing to write
    if (!count_one()) return;
    count_exactly(k);
    // Every one on stderr: they are the findings.
    std::fprintf(stderr, "msprobe-shim: overflow: %s\n", where(k.k, k.overflow).c_str());
    write(k, writer);
  }
};

class FlightRecord final : public OutputCheck {
 public:
  FlightRecord(uint64_t keep, bool exact, int64_t limit, format::StatPrecision precision,
               std::shared_ptr<record::StackRenderer> stacks)
      : OutputCheck(limit, precision, std::move(stacks)), keep_(keep), exact_(exact) {}

  bool examine(PendingKernel &k) override {
    OutputCheck::examine(k);
    // The device's results (and the pinned memory they came back in) need not stay for as long as the ring keeps
    // the kernel.
    use_kept_bytes(k);
    return false;
  }

  // In submission order: a clean kernel is kept, one with NaN/Inf is written with the kept ones before it.
  void commit(PendingKernel &&k, DumpWriter &writer) override {
    if (limit_reached()) return;  // the records asked for are written
    if (k.overflow.empty()) return keep(std::move(k));
    if (!count_one()) return;
    count_exactly(k);
    std::deque<PendingKernel> record = take_kept();
    std::fprintf(stderr, "msprobe-shim: flight record: overflow: %s; written with the %zu kernels before it\n",
                 where(k.k, k.overflow).c_str(), record.size());
    const std::string trigger_kernel = k.k.name;
    record.push_back(std::move(k));
    write_record(record, "overflow", trigger_kernel, writer);
    if (limit_reached()) take_kept();  // nothing more will be written
  }

  bool drop_oldest_kept(bool checks_pending) override {
    PendingKernel dropped;  // let go outside the lock
    std::lock_guard<std::mutex> lk(kept_mu_);
    if (kept_.empty()) return false;
    if (exact_ && kept_.size() <= keep_ && checks_pending) return false;  // among the last N before one being checked
    dropped = std::move(kept_.front());
    kept_.pop_front();
    return true;
  }

  void write_kept(const std::string &trigger, DumpWriter &writer) override {
    if (limit_reached()) return;
    std::deque<PendingKernel> record = take_kept();
    if (record.empty()) return;
    std::fprintf(stderr, "msprobe-shim: flight record: %s: writing the last %zu kernels (step %llu to step %llu)\n",
                 trigger.c_str(), record.size(), (unsigned long long)record.front().k.step,
                 (unsigned long long)record.back().k.step);
    write_record(record, trigger, "", writer);
  }

  void release_kept() override { take_kept(); }

  void count(CollectorCounters &c) const override {
    OutputCheck::count(c);
    std::lock_guard<std::mutex> lk(kept_mu_);
    c.kept_high_water = std::max(c.kept_high_water, high_water_);
  }

 private:
  void keep(PendingKernel &&k) {
    std::deque<PendingKernel> dropped;  // let go outside the lock: their bytes go back to the producer
    std::lock_guard<std::mutex> lk(kept_mu_);
    kept_.push_back(std::move(k));
    while (kept_.size() > keep_) {
      dropped.push_back(std::move(kept_.front()));
      kept_.pop_front();
    }
    high_water_ = std::max<uint64_t>(high_water_, kept_.size());
  }

  std::deque<PendingKernel> take_kept() {
    std::lock_guard<std::mutex> lk(kept_mu_);
    return std::exchange(kept_, {});
  }

  // A record, oldest first: each kernel written as the tensor task writes it, marked with the trigger.
  void write_record(std::deque<PendingKernel> &record, const std::string &trigger, const std::string &trigger_kernel,
                    DumpWriter &writer) {
    for (PendingKernel &k : record) {
      k.k.notes.emplace_back(kFlightTrigger, trigger);
      if (!trigger_kernel.empty()) k.k.notes.emplace_back(kFlightTriggerKernel, trigger_kernel);
      write(k, writer);
    }
    record.clear();
  }

  const uint64_t keep_;
  const bool exact_;
  // Its own lock: the producer lets the oldest go (drop_oldest_kept) while a record is being written.
  mutable std::mutex kept_mu_;
  std::deque<PendingKernel> kept_;
  uint64_t high_water_ = 0;
};

}  // namespace

std::unique_ptr<Retention> write_all() { return std::make_unique<WriteAll>(); }

std::unique_ptr<Retention> first_overflows(int64_t limit, format::StatPrecision precision,
                                           std::shared_ptr<record::StackRenderer> stacks) {
  return std::make_unique<FirstOverflows>(limit, precision, std::move(stacks));
}

std::unique_ptr<Retention> flight_record(uint64_t keep, bool exact, int64_t limit, format::StatPrecision precision,
                                         std::shared_ptr<record::StackRenderer> stacks) {
  return std::make_unique<FlightRecord>(keep, exact, limit, precision, std::move(stacks));
}

}  // namespace msprobe::collector
