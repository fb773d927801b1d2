#include "shim/device/device_stats.h"

#include <link.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "acl/acl.h"
#include "shim/base/log.h"
#include "shim/base/reentry.h"
#include "shim/base/symbols.h"
#include "shim/device/runtime_api.h"
#include "shim/device/staging.h"

namespace msprobe::shim {
namespace {

// aclDataType / aclFormat values (reference/cann_abi.md §3).
constexpr int32_t kAclFloat = 0, kAclFloat16 = 1, kAclDouble = 11, kAclBf16 = 27;
constexpr int32_t kD2H = 2, kD2D = 3;  // aclrtMemcpyKind
constexpr int32_t kFormatNchw = 0, kFormatNhwc = 1, kFormatNd = 2;

// The runtime functions the shim calls for its own kernels come from shim/device/runtime_api.h: the real ones, never
// its hooks (so its kernels, their argument objects and executors are never captured or recorded). The argument
// objects' and executors' own:
HookSlot *const kArgumentObjectSlots[] = {&runtime::aclCreateTensor.slot,
                                          &runtime::aclDestroyTensor.slot,
                                          &runtime::aclCreateIntArray.slot,
                                          &runtime::aclDestroyIntArray.slot,
                                          &runtime::aclCreateScalar.slot,
                                          &runtime::aclDestroyScalar.slot,
                                          &runtime::aclCreateTensorList.slot,
                                          &runtime::aclDestroyTensorList.slot,
                                          &runtime::aclSetAclOpExecutorRepeatable.slot,
                                          &runtime::aclDestroyAclOpExecutor.slot,
                                          &runtime::aclSetInputTensorAddr.slot,
                                          &runtime::aclSetDynamicInputTensorAddr.slot};
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
Op op_foreach_norm{{"aclnnForeachNormGetWorkspaceSize"}, {"aclnnForeachNorm"}};  // optional: the norms of a list

// aclnnForeachNorm takes at most this many tensors (ops-nn foreach_reduce_tiling_def.h MAX_TENSOR_CONT).
constexpr size_t kForeachMax = 256;

using DestroyFn = decltype(runtime::aclDestroyTensor.get());  // every argument object's destructor
using Phase2Fn = int (*)(void *, uint64_t, void *, void *);

template <typename F>
F fn(HookSlot &s) {
  return reinterpret_cast<F>(s.resolve());
}

// One kernel's results: values packed at their natural alignment (a 0-d tensor with an element offset into
// the block addresses each), so an fp16 tensor costs 8 bytes and an fp32 one 16.
constexpr uint64_t kBlockBytes = 4096;
// A lane keeps at most this many nodes (tensor places with their executors); past it, it starts over.
constexpr size_t kMaxNodesPerLane = 4096;

// DeviceStatsCounters, one atomic each (counted on the launching threads, read at the end).
enum Counter : size_t {
  kTensors,
  kKernels,
  kExecutors,
  kOneShot,
  kLost,
  kListNorms,
  kListLaunches,
  kBatches,
  kResultBytes,
  kRefused,
  kSnapshots,
  kSnapshotBytes,
  kFetched,
  kFetchedBytes,
  kCounters
};

struct Pool {
  std::mutex mu;
  uint64_t snapshot_bytes = 0;  // overflow_check: device bytes held in snapshots now
  std::atomic<uint64_t> counters[kCounters] = {};
};

Pool &pool() {
  static auto *p = new Pool;  // immortal: used from exit handlers and late threads
  return *p;
}

void count(Counter what, uint64_t n = 1) { pool().counters[what].fetch_add(n, std::memory_order_relaxed); }

void *device_alloc(uint64_t bytes) {
  auto m = runtime::aclrtMalloc.get();
  void *p = nullptr;
  if (m == nullptr || m(&p, bytes, 0 /*ACL_MEM_MALLOC_HUGE_FIRST*/) != ACL_SUCCESS) return nullptr;
  return p;
}

void device_free(void *p) {
  if (auto f = runtime::aclrtFree.get(); f && p) f(p);
}

// Scratch of one stream: its reductions run in stream order, so one buffer serves them all.
void *grow_scratch(std::pair<void *, uint64_t> &slot, uint64_t bytes, std::vector<void *> &retired) {
  auto &[ptr, size] = slot;
  if (ptr != nullptr && size >= bytes) return ptr;
  uint64_t want = 64 << 10;
  while (want < bytes) want *= 2;
  void *fresh = device_alloc(want);
  if (fresh == nullptr) return nullptr;
  if (ptr != nullptr) retired.push_back(ptr);
  ptr = fresh;
  size = want;
  return ptr;
}

// Argument objects, destroyed in reverse order of creation (a list before the tensors it does not own).
struct Args {
  std::vector<std::pair<DestroyFn, void *>> owned;
  Args() = default;
  Args(const Args &) = delete;
  Args &operator=(const Args &) = delete;
  ~Args() {
    for (auto it = owned.rbegin(); it != owned.rend(); ++it)
      if (it->first && it->second) it->first(it->second);
  }
  void *keep(void *h, DestroyFn destroy) {
    if (h) owned.emplace_back(destroy, h);
    return h;
  }
  // A tensor list owns its members: they go with it, not on their own.
  void *keep_list(void *list, size_t members) {
    if (list == nullptr) return nullptr;
    owned.resize(owned.size() - members);
    return keep(list, runtime::aclDestroyTensorList.get());
  }
};

// Device scratch of one stream's reductions (they run in stream order, so one buffer serves them all): the
// workspace. Outgrown buffers are kept: a queued kernel may still use them.
struct Scratch {
  std::pair<void *, uint64_t> workspace{nullptr, 0};
  std::vector<void *> retired;
  ~Scratch() {
    device_free(workspace.first);
    for (void *p : retired) device_free(p);
  }
};

// Phase 2 of an executor with a workspace on the stream. False when refused.
bool run(Op &op, void *executor, uint64_t ws, void *stream, Scratch &scratch) {
  auto p2 = fn<Phase2Fn>(op.phase2);
  void *w = ws > 0 ? grow_scratch(scratch.workspace, ws, scratch.retired) : nullptr;
  if (p2 == nullptr || (ws > 0 && w == nullptr) || p2(w, ws, executor, stream) != 0) return false;
  count(kKernels);
  return true;
}

// Phase 1 with `args`. The executor, or null when refused.
template <typename... A>
void *make(Op &op, uint64_t *ws, A... args) {
  auto p1 = reinterpret_cast<int (*)(A..., uint64_t *, void **)>(op.phase1.resolve());
  void *executor = nullptr;
  if (p1 == nullptr || p1(args..., ws, &executor) != 0) return nullptr;
  count(kExecutors);
  return executor;
}

// Phase 1 then phase 2, an executor for this launch alone.
template <typename... A>
bool launch(Op &op, void *stream, Scratch &scratch, A... args) {
  uint64_t ws = 0;
  void *executor = make(op, &ws, args...);
  // A refused phase 2 leaves the executor to the runtime; rare enough to leak.
  return executor != nullptr && run(op, executor, ws, stream, scratch);
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

// The dtypes the statistics kernels see: the eligible float types.
size_t size_of(int32_t acl) { return acl == kAclFloat ? 4 : 2; }

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

// A 0-d tensor of dtype `t` at byte `offset` of a results block.
void *result_slot(Args &args, void *block, int32_t t, uint64_t offset) {
  int64_t elems = (int64_t)kBlockBytes / (int64_t)size_of(t);
  return args.keep(runtime::aclCreateTensor.get()(nullptr, 0, t, nullptr, (int64_t)(offset / size_of(t)), kFormatNd,
                                                  &elems, 1, block),
                   runtime::aclDestroyTensor.get());
}

void *all_dims(Args &args, const TensorMeta &m) {
  int64_t dims[kMaxDims];
  for (int i = 0; i < m.ndim; ++i) dims[i] = i;
  return args.keep(runtime::aclCreateIntArray.get()(dims, m.ndim), runtime::aclDestroyIntArray.get());
}

void *order_two(Args &args) {
  double two = 2.0;
  return args.keep(runtime::aclCreateScalar.get()(&two, kAclDouble), runtime::aclDestroyScalar.get());
}

// Where one tensor's results go in the kernel's block, from byte `used` on: max and min in the tensor's dtype, mean
// and norm in the result dtype (not for extremes only), each naturally aligned.
struct ResultSlots {
  uint64_t stats[4] = {};
  uint64_t end;
};

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

// What a tensor's executors depend on besides its address: its layout, its results' place and dtypes, which
// reductions, and which side of the kernel it is on (a node's place in a lane's tree stands for the places before it).
struct NodeKey {
  int32_t dtype = 0, format = 0, mean_dtype = 0;
  StatsWanted what = StatsWanted::All;
  uint8_t ndim = 0, storage_ndim = 0, side = 0;
  bool extremes_only() const { return what == StatsWanted::Extremes; }
  int64_t offset = 0;
  std::array<int64_t, kMaxDims> shape{}, strides{}, storage{};
  bool operator==(const NodeKey &) const = default;
};

NodeKey key_of(const TensorMeta &m, int32_t mean_dt, StatsWanted what, int side) {
  NodeKey k;
  k.dtype = m.dtype;
  k.format = m.format;
  k.mean_dtype = mean_dt;
  k.ndim = m.ndim;
  k.storage_ndim = m.storage_ndim;
  k.what = what;
  k.side = (uint8_t)side;
  k.offset = m.offset;
  for (int i = 0; i < m.ndim; ++i) k.shape[i] = m.shape[i], k.strides[i] = m.strides[i];
  for (int i = 0; i < m.storage_ndim; ++i) k.storage[i] = m.storage[i];
  return k;
}

// An executor made repeatable, with its workspace size. Destroyed by its owner.
struct Exec {
  Op *op = nullptr;
  void *ex = nullptr;
  uint64_t ws = 0;
};

// Makes `op`'s executor for `args` repeatable. False (nothing kept) when phase 1 or the runtime refuses.
template <typename... A>
bool make_repeatable(Exec &e, Op &op, A... args) {
  e.op = &op;
  e.ex = make(op, &e.ws, args...);
  if (e.ex == nullptr) return false;
  if (runtime::aclSetAclOpExecutorRepeatable.get()(e.ex) != 0) {
    // Not repeatable: phase 2 would free it; unused, it is the caller's to destroy.
    runtime::aclDestroyAclOpExecutor.get()(e.ex);
    e.ex = nullptr;
    return false;
  }
  return true;
}

void destroy(Exec &e) {
  if (e.ex) runtime::aclDestroyAclOpExecutor.get()(e.ex);
  e.ex = nullptr;
}

// The norms of the tensors of one dtype on one side of a kernel, in one aclnnForeachNorm.
struct NormGroup {
  std::vector<size_t> members;      // indices into the side's tensors
  std::vector<const void *> nodes;  // ... and their nodes (a side that reaches the same end through them)
  std::vector<void *> bound;        // the address each member's view holds now
  void *list = nullptr;             // x: views of the members' tensors
  Exec exec;
  Args args;  // destroyed after the executor
};

}  // namespace

// One tensor's place in a lane: the executors of its reductions, their argument objects and results' places. Its
// children are the places after it; a node ending a side keeps that side's norm groups.
struct DeviceStatsBatch::Node {
  NodeKey key;
  Args args;              // destroyed after the executors (members below are destroyed first: see ~Node)
  void *view = nullptr;   // the host's tensor as described; its storage address is the last one bound
  void *bound = nullptr;  // the address the executors below hold (the norm's: norm_bound, set when it runs)
  void *norm_bound = nullptr;
  Exec aminmax, mean, norm;  // mean and norm: not for extremes only
  ResultSlots slots{};
  std::vector<std::unique_ptr<Node>> children;
  // Norm groups of the side that ends here (made at the first end_side() here); empty with `groups_made`: each
  // member's own norm serves.
  std::vector<std::unique_ptr<NormGroup>> groups;
  bool groups_made = false;

  ~Node() {
    for (auto &g : groups) destroy(g->exec);
    for (Exec *e : {&aminmax, &mean, &norm}) destroy(*e);
  }
};

// A results block and the executors that write into it, for one launch at a time on one stream.
struct DeviceStatsBatch::Lane {
  void *stream = nullptr;
  void *block = nullptr;  // kBlockBytes of device memory
  Scratch scratch;
  Node root;
  size_t nodes = 0;

  ~Lane() {
    root.children.clear();  // executors first, then the memory they point at
    device_free(block);
  }
};

namespace {

// Lanes not in use, by stream; and how many exist.
struct Lanes {
  std::mutex mu;
  std::unordered_map<void *, std::vector<DeviceStatsBatch::Lane *>> idle;
  size_t live = 0;
};

Lanes &lanes() {
  static auto *l = new Lanes;  // immortal, as the pool
  return *l;
}

DeviceStatsBatch::Lane *check_out(void *stream) {
  {
    Lanes &l = lanes();
    std::lock_guard<std::mutex> lk(l.mu);
    auto it = l.idle.find(stream);
    if (it != l.idle.end() && !it->second.empty()) {
      DeviceStatsBatch::Lane *lane = it->second.back();
      it->second.pop_back();
      return lane;
    }
  }
  void *block = device_alloc(kBlockBytes);
  if (block == nullptr) return nullptr;
  auto *lane = new DeviceStatsBatch::Lane;
  lane->stream = stream;
  lane->block = block;
  std::lock_guard<std::mutex> lk(lanes().mu);
  ++lanes().live;
  return lane;
}

void check_in(DeviceStatsBatch::Lane *lane) {
  if (lane == nullptr) return;
  if (lane->nodes > kMaxNodesPerLane) {
    // Too many places seen (a model of ever-changing shapes): start over. Its last kernels may still be queued:
    // the executors can go (the runtime took what it needed at phase 2), the memory waits for the stream.
    lane->root.children.clear();
    lane->nodes = 0;
  }
  std::lock_guard<std::mutex> lk(lanes().mu);
  lanes().idle[lane->stream].push_back(lane);
}

}  // namespace

void device_stats_device_ending() {
  std::vector<DeviceStatsBatch::Lane *> gone;
  {
    std::lock_guard<std::mutex> lk(lanes().mu);
    for (auto &[stream, idle] : lanes().idle) gone.insert(gone.end(), idle.begin(), idle.end());
    lanes().idle.clear();
    lanes().live -= gone.size();
  }
  ReentryGuard guard;
  for (auto *lane : gone) delete lane;
}

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

// Points an executor's input `index` at `addr` (its view `tensor` gets it too).
bool rebind(const Exec &e, void *tensor, void *addr) {
  return runtime::aclSetInputTensorAddr.get()(e.ex, 0, tensor, addr) == 0;
}

// The node of `m` after `parent`, made (its executors with it) on first sight; null when the runtime refuses one of
// its executors (made or repeatable: the caller then reduces the tensor the old way, or sends it to the host path).
DeviceStatsBatch::Node *node_for(DeviceStatsBatch::Lane &lane, DeviceStatsBatch::Node &parent, const NodeKey &key,
                                 const TensorMeta &m, const ResultSlots &slots, bool *refused) {
  *refused = false;
  for (auto &c : parent.children)
    if (c->key == key) return c.get();
  auto n = std::make_unique<DeviceStatsBatch::Node>();
  n->key = key;
  n->slots = slots;
  Args &a = n->args;
  const int32_t dt = key.dtype, mean_dt = key.mean_dtype;
  n->view = view_of_host_tensor(a, m, dt);
  n->bound = n->norm_bound = m.data;
  void *out[2];
  for (int i = 0; i < 2; ++i) out[i] = result_slot(a, lane.block, dt, slots.stats[i]);
  bool ok = n->view && out[0] && out[1] && make_repeatable(n->aminmax, op_aminmax, n->view, out[1], out[0]);
  if (ok && !key.extremes_only()) {
    void *dims = all_dims(a, m);
    void *ord = order_two(a);
    void *mean_out = result_slot(a, lane.block, mean_dt, slots.stats[2]);
    void *norm_out = result_slot(a, lane.block, mean_dt, slots.stats[3]);
    ok = dims && ord && mean_out && norm_out &&
         make_repeatable(n->mean, op_mean, n->view, dims, false, mean_dt, mean_out);
    // The tensor's own norm: what serves when no aclnnForeachNorm does (made now, so that a refusal still leaves the
    // host path open for this tensor).
    ok = ok && make_repeatable(n->norm, op_norm, n->view, ord, dims, false, mean_dt, norm_out);
  }
  if (!ok) {
    *refused = true;
    return nullptr;  // the node's destructor lets go of whatever was made
  }
  ++lane.nodes;
  parent.children.push_back(std::move(n));
  return parent.children.back().get();
}

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
  for (Op *op : {&op_aminmax, &op_mean, &op_norm})
    if (!op->phase1.resolve() || !op->phase2.resolve()) return false;
  // The argument objects come from the op library's own dependencies (the libnnopbase it links), the way
  // the ops themselves reach them: another interposer's global aclCreateTensor must not see the shim's.
  for (HookSlot *s : kArgumentObjectSlots) {
    void *expected = nullptr;
    if (void *f = lookup_in_object_of(op_aminmax.phase1.resolve(), s->name))
      s->original.compare_exchange_strong(expected, f);
  }
  for (std::span<HookSlot *const> slots :
       {std::span<HookSlot *const>(kArgumentObjectSlots), std::span<HookSlot *const>(kMemorySlots)})
    for (HookSlot *s : slots)
      if (!s->resolve()) return false;
  // aclnnForeachNorm is optional (CANN 8.0 and later, Atlas A2/A3): without it each tensor has its own norm.
  (void)op_foreach_norm.phase1.resolve();
  (void)op_foreach_norm.phase2.resolve();
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
  std::vector<std::pair<Node *, size_t>> side;
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
    make_norm_groups(end, side);
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

// The norm groups of a side ending at `end`: one aclnnForeachNorm per dtype, up to 256 tensors each, of the tensors
// whose norm is in their own dtype (with MSPROBE_PRECISION=high an fp16 tensor's norm is a float32: aclnnForeachNorm
// writes x's dtype). Without aclnnForeachNorm, or if the runtime refuses one, each tensor's own norm serves.
void DeviceStatsBatch::make_norm_groups(Node &end, const std::vector<std::pair<Node *, size_t>> &side) {
  if (!op_foreach_norm.phase1.resolve() || !op_foreach_norm.phase2.resolve()) return;
  std::vector<std::unique_ptr<NormGroup>> groups;
  for (size_t i = 0; i < side.size(); ++i) {
    const NodeKey &k = side[i].first->key;
    if (k.mean_dtype != k.dtype || k.extremes_only()) continue;
    NormGroup *g = nullptr;
    for (auto &c : groups)
      if (side[c->members.front()].first->key.dtype == k.dtype && c->members.size() < kForeachMax) g = c.get();
    if (g == nullptr) g = groups.emplace_back(std::make_unique<NormGroup>()).get();
    g->members.push_back(i);
  }
  for (auto &g : groups) {
    if (g->members.size() < 2) continue;  // one tensor: its own norm is one launch all the same
    Args &a = g->args;
    std::vector<void *> views, outs;
    for (size_t i : g->members) {
      const Node &n = *side[i].first;
      // The layout the node was made for, at the address its view holds. Format ND: aclnnForeachNorm wants each
      // output's format to be its x's, and the NCHW/NHWC views this path takes are laid out as ND ones.
      TensorMeta m;
      m.dtype = n.key.dtype, m.format = kFormatNd, m.ndim = n.key.ndim, m.storage_ndim = n.key.storage_ndim;
      m.offset = n.key.offset, m.shape = n.key.shape, m.strides = n.key.strides, m.storage = n.key.storage;
      m.data = n.bound;
      views.push_back(view_of_host_tensor(a, m, m.dtype));
      g->nodes.push_back(&n);
      g->bound.push_back(n.bound);
    }
    bool ok = std::find(views.begin(), views.end(), nullptr) == views.end();
    void *x = ok ? a.keep_list(runtime::aclCreateTensorList.get()(views.data(), views.size()), views.size()) : nullptr;
    for (size_t i : g->members) {
      const Node &n = *side[i].first;
      if (x) outs.push_back(result_slot(a, lane_->block, n.key.dtype, n.slots.stats[3]));
    }
    ok = x && std::find(outs.begin(), outs.end(), nullptr) == outs.end();
    void *out = ok ? a.keep_list(runtime::aclCreateTensorList.get()(outs.data(), outs.size()), outs.size()) : nullptr;
    void *ord = out ? order_two(a) : nullptr;
    g->list = x;
    if (!ord || !make_repeatable(g->exec, op_foreach_norm, x, ord, out)) return;  // refused: own norms serve
  }
  for (auto &g : groups)
    if (g->members.size() >= 2) end.groups.push_back(std::move(g));
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
