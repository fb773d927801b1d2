#include "shim/device/stager.h"

#include <utility>

#include "shim/base/log.h"
#include "shim/device/acl_types.h"
#include "shim/device/device_ring.h"
#include "shim/device/staging.h"

namespace msprobe::shim {
namespace {

using record::Completion;
using record::TensorCapture;

// The device range a tensor's view covers, as a copy needs it: first byte and length, and the element at the first byte
// (*lo). False for what the collector cannot read (raw types: complex, int4), an empty view or no address. Packed
// sub-byte elements (FP4, FP6) are copied from the byte their run of whole bytes starts on.
[[gnu::always_inline]] inline bool byte_extent(const TensorMeta &m, const TensorCapture &t, const char **first,
                                               uint64_t *bytes, int64_t *lo) {
  int64_t hi = 0;
  const unsigned bits = acl_dtype_bits(m.dtype);
  if (t.dtype == format::DType::Raw || bits == 0 || m.data == nullptr || !m.extent(lo, &hi)) return false;
  *lo -= *lo % (int64_t)format::whole_byte_elements(t.dtype);
  *first = static_cast<const char *>(m.data) + (int64_t)format::storage_bytes(t.dtype, (uint64_t)*lo);
  *bytes = format::storage_bytes(t.dtype, (uint64_t)(hi - *lo + 1));
  return true;
}

// ---- structure ------------------------------------------------------------------------------------------------------
class NothingTaken final : public LaunchStaging {
 public:
  void take(const TensorMeta &, TensorSide, size_t, int64_t, TensorCapture &) override {}
  std::shared_ptr<Completion> finish() override { return nullptr; }
  void abandon() override {}
};

class MetadataOnly final : public Stager {
 public:
  std::unique_ptr<LaunchStaging> begin(void *) override { return std::make_unique<NothingTaken>(); }
};

// ---- host copies, and what the other stagers share
// ------------------------------------------------------------------- The copies of one launch into pinned host memory,
// and the device statistics batch when there is one: everything in flight is fenced by one event at finish().
class StagedLaunch : public LaunchStaging {
 public:
  StagedLaunch(void *stream, Staging &staging) : stream_(stream), staging_(staging) {}

  void take(const TensorMeta &m, TensorSide, size_t, int64_t, TensorCapture &t) override { copy_to_host(m, t); }

  void inputs_done(const std::vector<TensorMeta> *writes) override {
    if (batch_) batch_->inputs_done(writes != nullptr && apart(reduced_inputs_, *writes));
  }

  std::shared_ptr<Completion> finish() override {
    // One copy of every tensor's device statistics, before the event that says the kernel's data is here.
    if (batch_ && batch_->finish()) staged_ = true;
    return staged_ ? staging_.fence(stream_) : nullptr;
  }

  void abandon() override {
    // The kernel never ran, but copies and reductions of its inputs may be in flight: their memory must outlive them.
    if (batch_) batch_->abandon();
    if (staged_ || batch_)
      if (auto done = staging_.fence(stream_)) done->wait();
  }

 protected:
  void copy_to_host(const TensorMeta &m, TensorCapture &t) {
    const char *first = nullptr;
    uint64_t bytes = 0;
    int64_t lo = 0;
    if (!byte_extent(m, t, &first, &bytes, &lo)) return;
    t.block = staging_.copy_async(first, bytes, stream_);
    t.block_offset = m.offset - lo;
    staged_ = staged_ || t.block != nullptr;
  }
  DeviceStatsBatch &batch(const DeviceStatsSettings &settings) {
    if (!batch_) batch_ = std::make_unique<DeviceStatsBatch>(stream_, settings, staging_);
    return *batch_;
  }
  void *stream() const { return stream_; }
  void set_staged() { staged_ = true; }
  // An input whose reductions the batch holds (it must not be written before they ran).
  void reduced_input(const TensorMeta &m) { reduced_inputs_.push_back(m); }

 private:
  // No byte of `a` is a byte of `b` (false when a range is unknown).
  static bool apart(const std::vector<TensorMeta> &a, const std::vector<TensorMeta> &b) {
    for (const TensorMeta &x : a)
      for (const TensorMeta &y : b) {
        int64_t xl = 0, xh = 0, yl = 0, yh = 0;
        const int64_t xs = (int64_t)acl_dtype_size(x.dtype), ys = (int64_t)acl_dtype_size(y.dtype);
        if (y.data == nullptr || !y.extent(&yl, &yh)) continue;  // writes nothing
        if (xs == 0 || ys == 0 || !x.extent(&xl, &xh)) return false;
        const char *x0 = static_cast<const char *>(x.data) + xl * xs,
                   *x1 = static_cast<const char *>(x.data) + (xh + 1) * xs;
        const char *y0 = static_cast<const char *>(y.data) + yl * ys,
                   *y1 = static_cast<const char *>(y.data) + (yh + 1) * ys;
        if (x0 < y1 && y0 < x1) return false;
      }
    return true;
  }
  void *stream_;
  Staging &staging_;
  std::unique_ptr<DeviceStatsBatch> batch_;
  std::vector<TensorMeta> reduced_inputs_;
  bool staged_ = false;
};

// What staging did, at the end of the run.
void log_staging(const Staging &s) {
  const StagingCounters c = s.counters();
  log_info(
      "staging high water %llu of %llu bytes (pool %llu), %llu copies, %llu pinned allocations, %llu budget "
      "waits (%.3f s)",
      (unsigned long long)c.high_water, (unsigned long long)s.budget(), (unsigned long long)c.pool_high_water,
      (unsigned long long)c.copies, (unsigned long long)c.host_allocs, (unsigned long long)c.budget_waits,
      (double)c.wait_ns / 1e9);
  // Waiting slowed the host down: say so without being asked (MSPROBE_LOG_LEVEL=info not needed).
  if (c.budget_waits)
    log_warn(
        "MSPROBE_BUFFER_MB=%llu: kernel launches waited %llu times (%.3f s in all) for the writer to free "
        "staging memory; a larger budget would avoid it",
        (unsigned long long)(s.budget() >> 20), (unsigned long long)c.budget_waits, (double)c.wait_ns / 1e9);
}

void log_device_stats() {
  const DeviceStatsCounters d = device_stats_counters();
  if (d.tensors + d.refused + d.snapshots == 0) return;
  log_info(
      "device statistics: %llu tensors, %llu reduction kernels launched with %llu executors made (%llu tensors "
      "with executors of their own, not kept; %llu norms in %llu aclnnForeachNorm launches), %llu bytes copied to "
      "the host in %llu copies; %llu tensors refused by the runtime (computed on the host); %llu tensors kept on "
      "the device (%llu bytes), %llu read back (%llu bytes)",
      (unsigned long long)d.tensors, (unsigned long long)d.kernels, (unsigned long long)d.executors,
      (unsigned long long)d.one_shot, (unsigned long long)d.list_norms, (unsigned long long)d.list_launches,
      (unsigned long long)d.result_bytes, (unsigned long long)d.batches, (unsigned long long)d.refused,
      (unsigned long long)d.snapshots, (unsigned long long)d.snapshot_bytes, (unsigned long long)d.fetched,
      (unsigned long long)d.fetched_bytes);
  if (d.lost)
    log_warn(
        "device statistics: the runtime refused the reductions of %llu tensors after taking their arguments: "
        "they have no statistics in the dump",
        (unsigned long long)d.lost);
}

class HostCopies : public Stager {
 public:
  explicit HostCopies(uint64_t budget) : staging_(budget) {}
  std::unique_ptr<LaunchStaging> begin(void *stream) override {
    return std::make_unique<StagedLaunch>(stream, staging_);
  }
  void log_summary() const override { log_staging(staging_); }
  const Staging *staging() const override { return &staging_; }

 protected:
  Staging staging_;
};

// ---- statistics on the device
// ----------------------------------------------------------------------------------------
class DeviceStatsLaunch final : public StagedLaunch {
 public:
  DeviceStatsLaunch(void *stream, Staging &staging, const DeviceStatsSettings &settings)
      : StagedLaunch(stream, staging), settings_(settings), enabled_(DeviceStatsBatch::enabled(settings)) {}

  // A few scalars cross the host link instead of the tensor. overflow_check keeps the bytes on the device instead,
  // read back only if the kernel turns out to overflow: its check needs only each output's extremes, and a written
  // kernel's statistics and exact NaN/Inf counts come from the bytes.
  void take(const TensorMeta &m, TensorSide side, size_t, int64_t, TensorCapture &t) override {
    if (enabled_ && DeviceStatsBatch::eligible(m) && !DeviceStatsBatch::cheaper_to_copy(m)) {
      if (!settings_.overflow) {
        t.device_stats = batch(settings_).add(m);
        if (t.device_stats && side == TensorSide::Input) reduced_input(m);
        if (t.device_stats) return;
      } else if (int64_t offset = 0; auto kept = batch(settings_).snapshot(m, &offset)) {
        // Without them (the runtime refused), the check reads the snapshot back.
        if (side == TensorSide::Output) t.device_stats = batch(settings_).add(m, StatsWanted::Extremes);
        t.block = std::move(kept);
        t.block_offset = offset;
        return;
      }
    }
    copy_to_host(m, t);
  }

 private:
  const DeviceStatsSettings &settings_;
  const bool enabled_;
};

class DeviceStatistics final : public HostCopies {
 public:
  DeviceStatistics(uint64_t budget, DeviceStatsSettings settings) : HostCopies(budget), settings_(settings) {}
  std::unique_ptr<LaunchStaging> begin(void *stream) override {
    return std::make_unique<DeviceStatsLaunch>(stream, staging_, settings_);
  }
  void log_summary() const override {
    HostCopies::log_summary();
    log_device_stats();
  }
  void device_ending() override { device_stats_device_ending(); }

 private:
  const DeviceStatsSettings settings_;
};

// ---- the flight ring
// -------------------------------------------------------------------------------------------------
class FlightLaunch final : public StagedLaunch {
 public:
  FlightLaunch(void *stream, Staging &staging, const DeviceStatsSettings &settings, DeviceRing &ring)
      : StagedLaunch(stream, staging),
        settings_(settings),
        ring_(ring),
        enabled_(DeviceStatsBatch::enabled(settings)) {}

  void take(const TensorMeta &m, TensorSide side, size_t slot, int64_t item, TensorCapture &t) override {
    const bool eligible = enabled_ && DeviceStatsBatch::eligible(m);
    const char *first = nullptr;
    uint64_t bytes = 0;
    int64_t lo = 0;
    if (!byte_extent(m, t, &first, &bytes, &lo)) return;
    DeviceRing::Refusal why = DeviceRing::Refusal::None;
    t.block = ring_.copy_in(first, bytes, stream(), &why);
    if (t.block) {
      t.block_offset = m.offset - lo;
      set_staged();
      // The check: NaN and Inf show in an output's extremes, reduced on the device (only scalars come back). The
      // rest of its statistics come from the kept bytes, if the kernel is ever written.
      if (side == TensorSide::Output && eligible) t.device_stats = batch(settings_).add(m, StatsWanted::Extremes);
      return;
    }
    // Not kept: its statistics, from the device, stand for it (an output's serve as the check too).
    if (eligible) t.device_stats = batch(settings_).add(m);
    note(side, slot, item, bytes, why, t.device_stats != nullptr);
  }

  void handed_over() override { ring_.seal(); }  // the collector lets its ring bytes go in time
  format::EntryNotes notes() override {
    if (notes_.empty()) return {};
    return {{std::string(format::json_key::kFlightNote), std::move(notes_)}};
  }

 private:
  // Made only when the ring refuses a tensor: the label is not worth building for every tensor.
  void note(TensorSide side, size_t slot, int64_t item, uint64_t bytes, DeviceRing::Refusal why, bool stats) {
    const char *reason = why == DeviceRing::Refusal::TooLarge   ? "is larger than the ring"
                         : why == DeviceRing::Refusal::NoRoom   ? "found no room in the ring (kernels being checked)"
                         : why == DeviceRing::Refusal::NoMemory ? "has no ring (no memory for it)"
                                                                : "could not be copied into the ring";
    std::string where = std::string(side == TensorSide::Output ? "output." : "input.") + std::to_string(slot);
    if (item >= 0) where += "." + std::to_string(item);
    notes_ += (notes_.empty() ? "" : "; ") + where + " (" + std::to_string(bytes) + " bytes) " + reason +
              (stats ? ": statistics only" : ": described only");
  }

  const DeviceStatsSettings &settings_;
  DeviceRing &ring_;
  const bool enabled_;
  std::string notes_;
};

class FlightRing final : public HostCopies {
 public:
  FlightRing(uint64_t budget, DeviceStatsSettings settings, std::function<bool()> evict_oldest)
      : HostCopies(budget), settings_(settings), ring_(budget, std::move(evict_oldest)) {}
  std::unique_ptr<LaunchStaging> begin(void *stream) override {
    return std::make_unique<FlightLaunch>(stream, staging_, settings_, ring_);
  }
  void device_ending() override {
    ring_.forget_memory();
    device_stats_device_ending();
  }
  void log_summary() const override {
    HostCopies::log_summary();
    log_device_stats();
    const DeviceRingCounters r = ring_.counters();
    log_info(
        "flight: ring of %llu bytes in %s memory, high water %llu; %llu tensors copied in (%llu bytes), %llu read back "
        "(%llu bytes); %llu kernels let go for room, %llu waits (%.3f s); refused: %llu larger than the ring, %llu "
        "for lack of room",
        (unsigned long long)r.capacity, r.on_device ? "device" : "host", (unsigned long long)r.high_water,
        (unsigned long long)r.copies, (unsigned long long)r.bytes, (unsigned long long)r.fetched,
        (unsigned long long)r.fetched_bytes, (unsigned long long)r.evictions, (unsigned long long)r.waits,
        (double)r.wait_ns / 1e9, (unsigned long long)r.too_large, (unsigned long long)r.no_room);
  }

 private:
  const DeviceStatsSettings settings_;
  DeviceRing ring_;
};

}  // namespace

std::unique_ptr<Stager> metadata_only() { return std::make_unique<MetadataOnly>(); }
std::unique_ptr<Stager> host_copies(uint64_t budget_bytes) { return std::make_unique<HostCopies>(budget_bytes); }
std::unique_ptr<Stager> device_statistics(uint64_t budget_bytes, DeviceStatsSettings settings) {
  return std::make_unique<DeviceStatistics>(budget_bytes, settings);
}
std::unique_ptr<Stager> flight_ring(uint64_t budget_bytes, DeviceStatsSettings settings,
                                    std::function<bool()> evict_oldest) {
  return std::make_unique<FlightRing>(budget_bytes, settings, std::move(evict_oldest));
}

}  // namespace msprobe::shim
