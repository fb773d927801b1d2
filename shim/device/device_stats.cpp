#include "shim/device/device_stats.h"

#include <link.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "acl/acl.h"
#include "shim/base/reentry.h"
#include "shim/base/symbols.h"
#include "shim/device/runtime_api.h"
#include "shim/device/staging.h"

namespace msprobe::shim {
namespace {

// aclDataType / aclFormat values (reference/cann_abi.md §3).
constexpr int32_t kAclFloat = 0, kAclFloat16 = 1, kAclInt64 = 9, kAclDouble = 11, kAclBool = 12, kAclBf16 = 27;
constexpr int32_t kD2H = 2, kD2D = 3;  // aclrtMemcpyKind
constexpr int32_t kFormatNchw = 0, kFormatNhwc = 1, kFormatNd = 2;

// The runtime functions the shim calls for its own kernels come from shim/device/runtime_api.h: the real ones, never
// its hooks (so its kernels and their argument objects are never captured or recorded). The argument objects' own:
HookSlot *const kArgumentObjectSlots[] = {&runtime::aclCreateTensor.slot,   &runtime::aclDestroyTensor.slot,
                                          &runtime::aclCreateIntArray.slot, &runtime::aclDestroyIntArray.slot,
                                          &runtime::aclCreateScalar.slot,   &runtime::aclDestroyScalar.slot};
// ... and the device memory ones.
HookSlot *const kMemorySlots[] = {&runtime::aclrtMalloc.slot,    &runtime::aclrtFree.slot,
                                  &runtime::aclrtMemcpy.slot,    &runtime::aclrtMemcpyAsync.slot,
                                  &runtime::aclrtGetDevice.slot, &runtime::aclrtSetDevice.slot};

// One reduction op: phase 1 and phase 2.
struct Op {
  HookSlot phase1, phase2;
};
Op op_aminmax{{"aclnnAminmaxAllGetWorkspaceSize"}, {"aclnnAminmaxAll"}};  // both extremes, one kernel
Op op_mean{{"aclnnMeanGetWorkspaceSize"}, {"aclnnMean"}};
Op op_norm{{"aclnnLinalgVectorNormGetWorkspaceSize"}, {"aclnnLinalgVectorNorm"}};
Op op_is_finite{{"aclnnIsFiniteGetWorkspaceSize"}, {"aclnnIsFinite"}};
Op op_is_pos_inf{{"aclnnIsPosInfGetWorkspaceSize"}, {"aclnnIsPosInf"}};
Op op_is_neg_inf{{"aclnnIsNegInfGetWorkspaceSize"}, {"aclnnIsNegInf"}};
Op op_reduce_sum{{"aclnnReduceSumGetWorkspaceSize"}, {"aclnnReduceSum"}};

using DestroyFn = decltype(runtime::aclDestroyTensor.get());  // all three argument objects' destructors
using Phase2Fn = int (*)(void *, uint64_t, void *, void *);

template <typename F>
F fn(HookSlot &s) {
  return reinterpret_cast<F>(s.resolve());
}

// One kernel's results: values packed at their natural alignment (a 0-d tensor with an element offset into
// the block addresses each), so an fp16 tensor costs 8 bytes and an fp32 one 16.
constexpr uint64_t kBlockBytes = 4096;

struct Pool {
  std::mutex mu;
  std::vector<void *> free_blocks;
  std::unordered_map<void *, std::pair<void *, uint64_t>> workspaces;  // stream -> buffer, size
  std::unordered_map<void *, std::pair<void *, uint64_t>> masks;       // stream -> bool scratch for the counts
  std::vector<void *> retired;  // workspaces and masks outgrown: kept, a queued kernel may still use them
  uint64_t snapshot_bytes = 0;  // overflow_check: device bytes held in snapshots now
  DeviceStatsCounters counters;
};

Pool &pool() {
  static auto *p = new Pool;  // immortal: used from exit handlers and late threads
  return *p;
}

void *device_alloc(uint64_t bytes) {
  auto m = runtime::aclrtMalloc.get();
  void *p = nullptr;
  if (m == nullptr || m(&p, bytes, 0 /*ACL_MEM_MALLOC_HUGE_FIRST*/) != ACL_SUCCESS) return nullptr;
  return p;
}

void *take_block() {
  Pool &p = pool();
  {
    std::lock_guard<std::mutex> lk(p.mu);
    if (!p.free_blocks.empty()) {
      void *b = p.free_blocks.back();
      p.free_blocks.pop_back();
      return b;
    }
  }
  return device_alloc(kBlockBytes);
}

void give_block(void *b) {
  Pool &p = pool();
  std::lock_guard<std::mutex> lk(p.mu);
  p.free_blocks.push_back(b);
}

// Scratch for the reductions of one stream: they run in stream order, so one buffer serves them all.
void *scratch_for(std::unordered_map<void *, std::pair<void *, uint64_t>> Pool::*which, void *stream, uint64_t bytes) {
  Pool &p = pool();
  std::lock_guard<std::mutex> lk(p.mu);
  auto &[ptr, size] = (p.*which)[stream];
  if (ptr != nullptr && size >= bytes) return ptr;
  uint64_t want = 64 << 10;
  while (want < bytes) want *= 2;
  void *fresh = device_alloc(want);
  if (fresh == nullptr) return nullptr;
  if (ptr != nullptr) p.retired.push_back(ptr);
  ptr = fresh;
  size = want;
  return ptr;
}

// Argument objects of the shim's own launches, destroyed after phase 2 (the executor holds what it needs).
struct Args {
  std::vector<std::pair<DestroyFn, void *>> owned;
  ~Args() {
    for (auto &[destroy, h] : owned)
      if (destroy && h) destroy(h);
  }
  void *keep(void *h, DestroyFn destroy) {
    if (h) owned.emplace_back(destroy, h);
    return h;
  }
};

// Phase 1 with `args`, then phase 2 with a workspace on the stream. False when either is refused.
template <typename... A>
bool launch(Op &op, void *stream, A... args) {
  auto p1 = reinterpret_cast<int (*)(A..., uint64_t *, void **)>(op.phase1.resolve());
  auto p2 = fn<Phase2Fn>(op.phase2);
  if (p1 == nullptr || p2 == nullptr) return false;
  uint64_t ws = 0;
  void *executor = nullptr;
  if (p1(args..., &ws, &executor) != 0 || executor == nullptr) return false;
  void *w = ws > 0 ? scratch_for(&Pool::workspaces, stream, ws) : nullptr;
  if (ws > 0 && w == nullptr) return false;  // the executor is the runtime's to reclaim; rare enough to leak
  if (p2(w, ws, executor, stream) != 0) return false;
  std::lock_guard<std::mutex> lk(pool().mu);
  ++pool().counters.kernels;
  return true;
}

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

// The dtypes the statistics kernels see: the eligible float types and the int64 of the counts.
size_t size_of(int32_t acl) { return acl == kAclFloat ? 4 : acl == kAclInt64 ? 8 : 2; }

}  // namespace

struct DeviceStatsBatch::Results {
  void *block = nullptr;
  std::shared_ptr<const record::HostBlock> host;  // the copied values, once the kernel's event completed
  // The block can be used again once this dies: its copy was enqueued (the collector drops the results only
  // after the kernel's event, which follows the copy), or the launching thread waited for the stream, or
  // nothing was launched. Otherwise a queued reduction may still write it, and it is left alone.
  bool reusable = false;
  ~Results() {
    if (block != nullptr && reusable) give_block(block);
  }
};

namespace {

// One tensor's four values in its batch's results, and its NaN/Inf counts when they were taken.
class TensorResult final : public record::PrecomputedStats {
 public:
  TensorResult(std::shared_ptr<DeviceStatsBatch::Results> r, int32_t dtype, int32_t mean_dtype, uint64_t count,
               const uint64_t offs[4], const uint64_t *count_offs)
      : r_(std::move(r)), dtype_(dtype), mean_dtype_(mean_dtype), count_(count), counts_(count_offs != nullptr) {
    std::memcpy(offs_, offs, sizeof offs_);
    if (counts_) std::memcpy(count_offs_, count_offs, sizeof count_offs_);
  }
  std::optional<format::TensorStats> stats() const override {
    if (!r_->host) return std::nullopt;
    const auto *base = static_cast<const unsigned char *>(r_->host->data());
    format::TensorStats s;
    s.count = count_;
    s.max = format::StatValue::of_real(load_value(base + offs_[0], dtype_));
    s.min = format::StatValue::of_real(load_value(base + offs_[1], dtype_));
    s.mean = format::StatValue::of_real(load_value(base + offs_[2], mean_dtype_));
    s.norm = format::StatValue::of_real(load_value(base + offs_[3], mean_dtype_));
    if (counts_) {
      int64_t finite, pinf, ninf;
      std::memcpy(&finite, base + count_offs_[0], 8);
      std::memcpy(&pinf, base + count_offs_[1], 8);
      std::memcpy(&ninf, base + count_offs_[2], 8);
      s.pos_inf_count = (uint64_t)pinf;
      s.neg_inf_count = (uint64_t)ninf;
      s.nan_count = count_ - (uint64_t)finite - s.pos_inf_count - s.neg_inf_count;
    } else {
      // Not counted on the device: at least one of each the extremes show (only the overflow checks read counts).
      s.counts_exact = false;
      if (std::isnan(s.max.real) || std::isnan(s.min.real)) s.nan_count = 1;
      if (s.max.real == HUGE_VAL) s.pos_inf_count = 1;
      if (s.min.real == -HUGE_VAL) s.neg_inf_count = 1;
    }
    return s;
  }

 private:
  std::shared_ptr<DeviceStatsBatch::Results> r_;
  int32_t dtype_, mean_dtype_;
  uint64_t count_;
  bool counts_;
  uint64_t offs_[4];
  uint64_t count_offs_[3] = {};
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
        std::lock_guard<std::mutex> lk(pool().mu);
        ++pool().counters.fetched;
        pool().counters.fetched_bytes += bytes_;
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

DeviceStatsBatch::~DeviceStatsBatch() = default;

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
  for (Op *op : {&op_aminmax, &op_mean, &op_norm, &op_is_finite, &op_is_pos_inf, &op_is_neg_inf, &op_reduce_sum})
    if (!op->phase1.resolve() || !op->phase2.resolve()) return false;
  // The argument objects come from the op library's own dependencies (the libnnopbase it links), the way
  // the ops themselves reach them: another interposer's global aclCreateTensor must not see the shim's.
  for (HookSlot *s : kArgumentObjectSlots) {
    void *expected = nullptr;
    if (void *f = lookup_in_object_of(op_aminmax.phase1.resolve(), s->name))
      s->original.compare_exchange_strong(expected, f);
  }
  for (const auto &slots : {std::span(kArgumentObjectSlots), std::span(kMemorySlots)})
    for (HookSlot *s : slots)
      if (!s->resolve()) return false;
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

namespace {

// Where one tensor's results go in the kernel's block, from byte `used` on: max and min in the tensor's dtype, mean
// and norm in the result dtype, then (overflow counts) three int64 counts, each naturally aligned.
struct ResultSlots {
  uint64_t stats[4];
  uint64_t counts[3] = {};
  uint64_t end;
};

ResultSlots place_results(uint64_t used, int32_t dt, int32_t mean_dt, bool counts) {
  ResultSlots r{};
  uint64_t at = used;
  for (int i = 0; i < 4; ++i) {
    uint64_t size = size_of(i < 2 ? dt : mean_dt);
    at = (at + size - 1) / size * size;
    r.stats[i] = at;
    at += size;
  }
  if (counts) {
    at = (at + 7) / 8 * 8;
    for (int i = 0; i < 3; ++i, at += 8) r.counts[i] = at;
  }
  r.end = at;
  return r;
}

// The host's tensor as the host described it (shape, strides, offset over its storage), for the shim's kernels.
void *view_of_host_tensor(Args &args, const TensorMeta &m, int32_t dt) {
  int64_t lo = 0, hi = 0;
  if (!m.extent(&lo, &hi)) return nullptr;
  int64_t flat_storage = m.offset + hi + 1;
  const int64_t *storage = m.storage_ndim ? m.storage.data() : &flat_storage;
  uint64_t storage_nd = m.storage_ndim ? m.storage_ndim : 1;
  return args.keep(runtime::aclCreateTensor.get()(m.shape.data(), m.ndim, dt, m.strides.data(), m.offset,
                                                  m.format < 0 ? kFormatNd : m.format, storage, storage_nd, m.data),
                   runtime::aclDestroyTensor.get());
}

// A 0-d tensor of dtype `t` at byte `offset` of the results block.
void *result_slot(Args &args, void *block, int32_t t, uint64_t offset) {
  int64_t elems = (int64_t)kBlockBytes / (int64_t)size_of(t);
  return args.keep(runtime::aclCreateTensor.get()(nullptr, 0, t, nullptr, (int64_t)(offset / size_of(t)), kFormatNd,
                                                  &elems, 1, block),
                   runtime::aclDestroyTensor.get());
}

}  // namespace

std::shared_ptr<const record::PrecomputedStats> DeviceStatsBatch::add(const TensorMeta &m, bool counts) {
  ReentryGuard guard;
  const int32_t dt = m.dtype, mean_dt = settings_.high_precision ? kAclFloat : m.dtype;
  const ResultSlots slots = place_results(used_, dt, mean_dt, counts);
  if (slots.end > kBlockBytes) return nullptr;  // a kernel with hundreds of tensors: the rest take the host path
  if (!results_) {
    void *block = take_block();
    if (block == nullptr) return nullptr;
    results_ = std::make_shared<Results>();
    results_->block = block;
  }
  Args args;
  void *self = view_of_host_tensor(args, m, dt);
  int64_t dims[kMaxDims];
  for (int i = 0; i < m.ndim; ++i) dims[i] = i;
  void *all_dims = args.keep(runtime::aclCreateIntArray.get()(dims, m.ndim), runtime::aclDestroyIntArray.get());
  double two = 2.0;
  void *ord = args.keep(runtime::aclCreateScalar.get()(&two, kAclDouble), runtime::aclDestroyScalar.get());
  void *out[4];
  for (int i = 0; i < 4; ++i) out[i] = result_slot(args, results_->block, i < 2 ? dt : mean_dt, slots.stats[i]);
  if (!self || !all_dims || !ord || !out[0] || !out[1] || !out[2] || !out[3]) return nullptr;
  bool ok = true;
  // A refusal part-way leaves the earlier reductions queued: the block is then in use all the same.
  const auto step = [&](bool launched) { ok = launched, launched_ = launched_ || launched; };
  step(launch(op_aminmax, stream_, self, out[1], out[0]));
  if (ok) step(launch(op_mean, stream_, self, all_dims, false, mean_dt, out[2]));
  if (ok) step(launch(op_norm, stream_, self, ord, all_dims, false, mean_dt, out[3]));
  if (ok && counts) {
    // finite, +inf, -inf: a BOOL mask of the tensor's shape (per-stream scratch), summed into an int64.
    void *mask_mem = scratch_for(&Pool::masks, stream_, (uint64_t)m.numel());
    void *mask = mask_mem ? args.keep(runtime::aclCreateTensor.get()(m.shape.data(), m.ndim, kAclBool, nullptr, 0,
                                                                     kFormatNd, m.shape.data(), m.ndim, mask_mem),
                                      runtime::aclDestroyTensor.get())
                          : nullptr;
    Op *tests[3] = {&op_is_finite, &op_is_pos_inf, &op_is_neg_inf};
    ok = mask != nullptr;
    for (int i = 0; ok && i < 3; ++i) {
      void *sum = result_slot(args, results_->block, kAclInt64, slots.counts[i]);
      ok = sum != nullptr;
      if (ok) step(launch(*tests[i], stream_, self, mask));
      if (ok) step(launch(op_reduce_sum, stream_, mask, all_dims, false, kAclInt64, sum));
    }
  }
  std::lock_guard<std::mutex> lk(pool().mu);
  if (!ok) {
    ++pool().counters.refused;
    return nullptr;
  }
  used_ = slots.end;
  ++pool().counters.tensors;
  return std::make_shared<TensorResult>(results_, dt, mean_dt, (uint64_t)m.numel(), slots.stats,
                                        counts ? slots.counts : nullptr);
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
  std::lock_guard<std::mutex> lk(pool().mu);
  ++pool().counters.snapshots;
  pool().counters.snapshot_bytes += bytes;
  return snap;
}

bool DeviceStatsBatch::finish() {
  if (!results_) return launched_;  // snapshots only
  if (used_ > 0) {
    ReentryGuard guard;
    results_->host = staging_.copy_async(results_->block, used_, stream_);
    if (results_->host) {
      std::lock_guard<std::mutex> lk(pool().mu);
      ++pool().counters.batches;
      pool().counters.result_bytes += used_;
    }
  }
  results_->reusable = results_->host != nullptr || !launched_;
  return launched_;
}

void DeviceStatsBatch::abandon() {
  if (results_) results_->reusable = true;  // the caller waits for the stream before dropping the batch
}

DeviceStatsCounters device_stats_counters() {
  std::lock_guard<std::mutex> lk(pool().mu);
  return pool().counters;
}

}  // namespace msprobe::shim
