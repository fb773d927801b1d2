#include "shim/device/device_stats.h"

#include <link.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>
#include <vector>

#include "acl/acl.h"
#include "shim/base/reentry.h"
#include "shim/device/device_stats_lanes.h"
#include "shim/device/device_stats_ops.h"
#include "shim/device/runtime_api.h"
#include "shim/device/staging.h"

// The batch: one kernel's tensors added to it, their reductions run from a lane's executors (device_stats_lanes.h,
// made with the ops of device_stats_ops.h) or, where the runtime keeps none, made for this launch alone; the results
// copied to the host in one copy; overflow_check's snapshots.
namespace msprobe::shim {

using namespace device_stats_internal;

namespace {

double load_value(const unsigned char *p, int32_t acl) {
  if (acl == kAclFloat) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  if (acl == kAclBf16) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  // IEEE half
  uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  double v;
  if (exp == 0)
    v = std::ldexp((double)man, -24);
  else if (exp == 31)
    v = man ? std::nan("") : INFINITY;
  else
    v = std::ldexp((double)(man | 0x400), (int)exp - 25);
  return sign ? -v : v;
}

// Where one tensor's results go in the kernel's block, from byte `used` on.
ResultSlots place_results(uint64_t used, int32_t dt, int32_t mean_dt, StatsWanted what) {
  ResultSlots r{};
  uint64_t at = used;
  for (int i = 0; i < (what == StatsWanted::Extremes ? 2 : 4); ++i) {
    uint64_t size = size_of(i < 2 ? dt : mean_dt);
    at = (at + size - 1) / size * size;
    r.stats[i] = at;
    at += size;
  }
  r.end = at;
  return r;
}

NodeKey key_of(const TensorMeta &m, int32_t mean_dt, StatsWanted what, int side) {
  NodeKey k;
  k.dtype = m.dtype;
  k.format = m.format;
  k.mean_dtype = mean_dt;
  k.ndim = m.ndim;
  k.storage_ndim = m.storage_ndim;
  k.extremes = what == StatsWanted::Extremes;
  k.side = (uint8_t)side;
  k.offset = m.offset;
  for (int i = 0; i < m.ndim; ++i) k.shape[i] = m.shape[i], k.strides[i] = m.strides[i];
  for (int i = 0; i < m.storage_ndim; ++i) k.storage[i] = m.storage[i];
  return k;
}

}  // namespace

struct DeviceStatsBatch::Results {
  std::shared_ptr<const record::HostBlock> host;  // the copied values, once the kernel's event completed
  std::vector<bool> lost;  // by tensor: a reduction was refused after its arguments were taken (no statistics)
};

namespace {

// One tensor's values in its batch's results: its four statistics, or its extremes only.
class TensorResult final : public record::PrecomputedStats {
 public:
  TensorResult(std::shared_ptr<DeviceStatsBatch::Results> r, size_t index, int32_t dtype, int32_t mean_dtype,
               uint64_t count, const ResultSlots &slots, StatsWanted what)
      : r_(std::move(r)),
        index_(index),
        dtype_(dtype),
        mean_dtype_(mean_dtype),
        count_(count),
        what_(what),
        slots_(slots) {}
  std::optional<format::TensorStats> stats() const override {
    if (!r_->host || r_->lost[index_]) return std::nullopt;
    const auto *base = static_cast<const unsigned char *>(r_->host->data());
    format::TensorStats s;
    s.count = count_;
    s.max = format::StatValue::of_real(load_value(base + slots_.stats[0], dtype_));
    s.min = format::StatValue::of_real(load_value(base + slots_.stats[1], dtype_));
    if (what_ != StatsWanted::Extremes) {
      s.mean = format::StatValue::of_real(load_value(base + slots_.stats[2], mean_dtype_));
      s.norm = format::StatValue::of_real(load_value(base + slots_.stats[3], mean_dtype_));
    }
    // Not counted on the device: at least one of each the extremes show (the overflow checks count from the bytes).
    s.counts_exact = false;
    if (std::isnan(s.max.real) || std::isnan(s.min.real)) s.nan_count = 1;
    if (s.max.real == HUGE_VAL) s.pos_inf_count = 1;
    if (s.min.real == -HUGE_VAL) s.neg_inf_count = 1;
    return s;
  }

 private:
  std::shared_ptr<DeviceStatsBatch::Results> r_;
  size_t index_;
  int32_t dtype_, mean_dtype_;
  uint64_t count_;
  StatsWanted what_;
  ResultSlots slots_;
};

// overflow_check: a tensor's bytes kept on the device, read back only when the collector asks for them.
class DeviceSnapshot final : public record::HostBlock {
 public:
  DeviceSnapshot(void *dev, uint64_t bytes, int32_t device) : dev_(dev), bytes_(bytes), device_(device) {}
  ~DeviceSnapshot() override {
    ReentryGuard guard;
    if (auto f = runtime::aclrtFree.get()) f(dev_);
    std::lock_guard<std::mutex> lk(pool().mu);
    pool().snapshot_bytes -= bytes_;
  }
  // Called by the collector after the kernel's event, so the device-to-device copy is complete.
  const void *data() const override {
    std::lock_guard<std::mutex> lk(mu_);
    if (!fetched_) {
      fetched_ = true;
      ReentryGuard guard;
      host_.assign(bytes_, 0);
      auto set_device = runtime::aclrtSetDevice.get();
      auto memcpy_fn = runtime::aclrtMemcpy.get();
      if (set_device) set_device(device_);  // the collector's thread has no device of its own
      if (memcpy_fn && memcpy_fn(host_.data(), bytes_, dev_, bytes_, kD2H) == ACL_SUCCESS) {
        count(kFetched);
        count(kFetchedBytes, bytes_);
      }
    }
    return host_.data();
  }
  uint64_t size() const override { return bytes_; }

 private:
  void *dev_;
  uint64_t bytes_;
  int32_t device_;
  mutable std::mutex mu_;
  mutable bool fetched_ = false;
  mutable std::vector<unsigned char> host_;
};

}  // namespace

DeviceStatsBatch::DeviceStatsBatch(void *stream, const DeviceStatsSettings &settings, Staging &staging)
    : stream_(stream), settings_(settings), staging_(staging) {}

DeviceStatsBatch::~DeviceStatsBatch() { check_in(lane_); }

bool DeviceStatsBatch::enabled(const DeviceStatsSettings &settings) {
  if (!settings.enabled) return false;
  // The reductions live in libopapi, which a process may load only after its first kernel (an rt kernel, a
  // collective): look again whenever objects were loaded since the last miss.
  static std::atomic<bool> available{false};
  static std::atomic<unsigned long long> looked_at{~0ull};
  if (available.load(std::memory_order_acquire)) return true;
  unsigned long long adds = 0;
  dl_iterate_phdr(
      [](dl_phdr_info *info, size_t, void *out) {
        *static_cast<unsigned long long *>(out) = info->dlpi_adds;
        return 1;
      },
      &adds);
  if (looked_at.exchange(adds) == adds) return false;
  if (!resolve_reductions()) return false;
  available.store(true, std::memory_order_release);
  return true;
}

bool DeviceStatsBatch::eligible(const TensorMeta &m) {
  if (m.dtype != kAclFloat && m.dtype != kAclFloat16 && m.dtype != kAclBf16) return false;
  if (m.format != kFormatNd && m.format != kFormatNchw && m.format != kFormatNhwc && m.format != -1) return false;
  if (m.ndim == 0 || m.data == nullptr) return false;  // 0-d: msprobe clones the value (a negative "Norm")
  int64_t n = m.numel();
  // No more bytes than the four results: copying the tensor itself is as cheap.
  return n > 0 && (uint64_t)n * size_of(m.dtype) > 4 * sizeof(float);
}

bool DeviceStatsBatch::cheaper_to_copy(const TensorMeta &m) {
  return (uint64_t)m.numel() * size_of(m.dtype) <= kCopyRatherThanReduce;
}

// The reductions of a tensor with executors made for this launch alone (the runtime refuses to keep them): phase 1
// and phase 2 of each, its norm included, as every launch did before executors were kept.
bool DeviceStatsBatch::one_shot(const TensorMeta &m, int32_t mean_dt, StatsWanted what, const uint64_t *stats) {
  const int32_t dt = m.dtype;
  void *block = lane_->block;
  Args args;
  void *self = view_of_host_tensor(args, m, dt);
  void *out[2] = {result_slot(args, block, dt, stats[0]), result_slot(args, block, dt, stats[1])};
  if (!self || !out[0] || !out[1]) return false;
  bool ok = true;
  // A refusal part-way leaves the earlier reductions queued: the block is then in use all the same.
  const auto step = [&](bool launched) { ok = launched, launched_ = launched_ || launched; };
  Scratch &scratch = lane_->scratch;
  step(launch(op_aminmax, stream_, scratch, self, out[1], out[0]));
  if (!ok || what == StatsWanted::Extremes) return ok;
  void *dims = all_dims(args, m);
  void *ord = order_two(args);
  void *mean_out = result_slot(args, block, mean_dt, stats[2]);
  void *norm_out = result_slot(args, block, mean_dt, stats[3]);
  if (!dims || !ord || !mean_out || !norm_out) return false;
  step(launch(op_mean, stream_, scratch, self, dims, false, mean_dt, mean_out));
  if (ok) step(launch(op_norm, stream_, scratch, self, ord, dims, false, mean_dt, norm_out));
  return ok;
}

std::shared_ptr<const record::PrecomputedStats> DeviceStatsBatch::add(const TensorMeta &m, StatsWanted what) {
  ReentryGuard guard;
  const int32_t dt = m.dtype, mean_dt = settings_.high_precision ? kAclFloat : m.dtype;
  const ResultSlots slots = place_results(used_, dt, mean_dt, what);
  if (slots.end > kBlockBytes) return nullptr;  // a kernel with hundreds of tensors: the rest take the host path
  if (lane_ == nullptr && (lane_ = check_out(stream_)) == nullptr) return nullptr;
  if (!results_) results_ = std::make_shared<Results>();
  const size_t index = results_->lost.size();
  bool ok = false;
  Node *n = nullptr;
  if (!off_lane_) {
    Node &parent = at_ ? *at_ : lane_->root;
    bool refused = false;
    n = node_for(*lane_, parent, key_of(m, mean_dt, what, side_), m, slots, &refused);
    if (n != nullptr) {
      // Its reductions run with the side's (end_side()): the executors are pointed at the tensor now.
      ok = true;
      if (n->bound != m.data) {
        ok = rebind(n->aminmax, n->view, m.data) && (n->key.extremes_only() || rebind(n->mean, n->view, m.data));
        if (ok) n->bound = m.data;
      }
      at_ = n;
    } else if (refused) {
      off_lane_ = true;  // the runtime keeps no executor now (huge-page memory on this thread...): this launch's
                         // reductions are made for it alone, at once
    }
  }
  if (off_lane_) {
    ok = one_shot(m, mean_dt, what, slots.stats);
    n = nullptr;
    count(kOneShot);
  }
  if (!ok) {
    count(kRefused);
    return nullptr;
  }
  used_ = slots.end;
  results_->lost.push_back(false);
  if (n != nullptr) pending_.emplace_back(n, index);
  count(kTensors);
  return std::make_shared<TensorResult>(results_, index, dt, mean_dt, (uint64_t)m.numel(), slots, what);
}

void DeviceStatsBatch::inputs_done(bool outputs_elsewhere) {
  // The kernel writes none of its inputs (the outputs' ranges are known and apart): their reductions can wait for
  // the outputs', after the kernel, and share their launches (one side, one aclnnForeachNorm).
  if (!outputs_elsewhere) end_side();
}

void DeviceStatsBatch::end_side() {
  ReentryGuard guard;
  ++side_;
  if (pending_.empty()) return;
  Side side;
  side.swap(pending_);
  const auto lose = [&](size_t i) {
    if (!results_->lost[side[i].second]) {
      results_->lost[side[i].second] = true;
      count(kLost);
    }
  };
  // Each tensor's extremes and mean, then the norms (neither mean nor norm for extremes only).
  for (size_t i = 0; i < side.size(); ++i) {
    Node &n = *side[i].first;
    bool ok = true;
    const auto step = [&](const Exec &e) {
      if (!ok) return;
      ok = run(*e.op, e.ex, e.ws, stream_, lane_->scratch);
      launched_ = launched_ || ok;
    };
    step(n.aminmax);
    if (!n.key.extremes_only()) step(n.mean);
    if (!ok) lose(i);
  }
  Node &end = *side.back().first;
  if (!end.groups_made) {
    end.groups_made = true;
    make_norm_groups(*lane_, end, side);
  }
  std::vector<bool> covered(side.size(), false);
  for (size_t i = 0; i < side.size(); ++i) covered[i] = side[i].first->key.extremes_only();
  for (auto &g : end.groups) {
    // A side reaches this node through the same nodes (the tree's paths are unique), unless one of its tensors was
    // sent to the host path after its node was made: then each tensor's own norm serves.
    bool ok = true;
    for (size_t j = 0; ok && j < g->members.size(); ++j)
      ok = g->members[j] < side.size() && side[g->members[j]].first == g->nodes[j];
    for (size_t j = 0; ok && j < g->members.size(); ++j) {
      Node &n = *side[g->members[j]].first;
      if (g->bound[j] == n.bound) continue;
      ok = runtime::aclSetDynamicInputTensorAddr.get()(g->exec.ex, 0, j, g->list, n.bound) == 0;
      if (ok) g->bound[j] = n.bound;
    }
    if (!ok || !run(op_foreach_norm, g->exec.ex, g->exec.ws, stream_, lane_->scratch)) continue;
    launched_ = true;
    for (size_t i : g->members) covered[i] = true;
    count(kListLaunches);
    count(kListNorms, g->members.size());
  }
  for (size_t i = 0; i < side.size(); ++i) {
    if (covered[i]) continue;
    Node &n = *side[i].first;
    bool ok = n.norm_bound == n.bound || rebind(n.norm, n.view, n.bound);
    if (ok) n.norm_bound = n.bound;
    if (ok && run(op_norm, n.norm.ex, n.norm.ws, stream_, lane_->scratch))
      launched_ = true;
    else
      lose(i);
  }
}

std::shared_ptr<const record::HostBlock> DeviceStatsBatch::snapshot(const TensorMeta &m, int64_t *offset) {
  ReentryGuard guard;
  int64_t lo = 0, hi = 0;
  if (!m.extent(&lo, &hi)) return nullptr;
  const uint64_t bytes = (uint64_t)(hi - lo + 1) * size_of(m.dtype);
  {
    std::lock_guard<std::mutex> lk(pool().mu);
    if (pool().snapshot_bytes + bytes > settings_.snapshot_budget) return nullptr;
    pool().snapshot_bytes += bytes;
  }
  int32_t device = 0;
  void *dev = nullptr;
  if (auto get = runtime::aclrtGetDevice.get()) get(&device);
  if (runtime::aclrtMalloc.get()(&dev, bytes, 0) != ACL_SUCCESS || dev == nullptr) {
    std::lock_guard<std::mutex> lk(pool().mu);
    pool().snapshot_bytes -= bytes;
    return nullptr;
  }
  auto snap = std::make_shared<DeviceSnapshot>(dev, bytes, device);  // frees and releases the budget
  const char *first = static_cast<const char *>(m.data) + lo * (int64_t)size_of(m.dtype);
  auto copy = runtime::aclrtMemcpyAsync.get();
  if (copy(dev, bytes, first, bytes, kD2D, stream_) != ACL_SUCCESS) return nullptr;
  launched_ = true;  // the copy must be complete before the batch's event
  *offset = m.offset - lo;
  count(kSnapshots);
  count(kSnapshotBytes, bytes);
  return snap;
}

bool DeviceStatsBatch::finish() {
  end_side();
  if (!results_) return launched_;  // snapshots only
  if (used_ > 0) {
    ReentryGuard guard;
    results_->host = staging_.copy_async(lane_->block, used_, stream_);
    if (results_->host) {
      count(kBatches);
      count(kResultBytes, used_);
    }
  }
  return launched_;
}

void DeviceStatsBatch::abandon() {
  // The kernel never ran: nothing is copied. The lane goes back when the batch dies, after the caller waited for
  // the stream; the next launch's reductions overwrite its block in stream order anyway.
}

void device_stats_device_ending() { release_idle_lanes(); }

DeviceStatsCounters device_stats_counters() {
  const auto get = [](Counter c) { return pool().counters[c].load(std::memory_order_relaxed); };
  DeviceStatsCounters c;
  c.tensors = get(kTensors);
  c.kernels = get(kKernels);
  c.executors = get(kExecutors);
  c.one_shot = get(kOneShot);
  c.lost = get(kLost);
  c.list_norms = get(kListNorms);
  c.list_launches = get(kListLaunches);
  c.batches = get(kBatches);
  c.result_bytes = get(kResultBytes);
  c.refused = get(kRefused);
  c.snapshots = get(kSnapshots);
  c.snapshot_bytes = get(kSnapshotBytes);
  c.fetched = get(kFetched);
  c.fetched_bytes = get(kFetchedBytes);
  return c;
}

}  // namespace msprobe::shim
