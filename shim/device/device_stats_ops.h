// The reductions device statistics launch (device_stats.h), as a table of ops: each op's two phases, looked up in the
// op library; phase 1 with the argument objects it takes (made through runtime_api.h, never through the shim's hooks,
// so nothing here is captured or recorded), phase 2 on a stream with workspace from one buffer per stream. Also the
// counters behind DeviceStatsCounters and the device memory calls. Internal to shim/device/device_stats*.cpp.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "shim/base/symbols.h"
#include "shim/device/handles.h"
#include "shim/device/runtime_api.h"

namespace msprobe::shim::device_stats_internal {

// aclDataType / aclFormat values (reference/cann_abi.md §3).
constexpr int32_t kAclFloat = 0, kAclFloat16 = 1, kAclDouble = 11, kAclBf16 = 27;
constexpr int32_t kD2H = 2, kD2D = 3;  // aclrtMemcpyKind
constexpr int32_t kFormatNchw = 0, kFormatNhwc = 1, kFormatNd = 2;

// One kernel's results: values packed at their natural alignment (a 0-d tensor with an element offset into
// the block addresses each), so an fp16 tensor costs 8 bytes and an fp32 one 16.
constexpr uint64_t kBlockBytes = 4096;

// The dtypes the statistics kernels see: the eligible float types.
inline size_t size_of(int32_t acl) { return acl == kAclFloat ? 4 : 2; }

// One reduction op: phase 1 and phase 2.
struct Op {
  HookSlot phase1, phase2;
};
extern Op op_aminmax;       // aclnnAminmaxAll: both extremes, one kernel
extern Op op_mean;          // aclnnMean
extern Op op_norm;          // aclnnLinalgVectorNorm
extern Op op_foreach_norm;  // aclnnForeachNorm, optional: the norms of a list

// aclnnForeachNorm takes at most this many tensors (ops-nn foreach_reduce_tiling_def.h MAX_TENSOR_CONT).
constexpr size_t kForeachMax = 256;

// Resolves the ops and the runtime functions they need (the argument objects from the op library's own
// dependencies). False when one the reductions cannot do without is missing; aclnnForeachNorm is optional.
bool resolve_reductions();

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

// Inline: counted on every reduction, as cheap as it was when all of this was one file.
inline Pool &pool() {
  static auto *p = new Pool;  // immortal: used from exit handlers and late threads
  return *p;
}
inline void count(Counter what, uint64_t n = 1) { pool().counters[what].fetch_add(n, std::memory_order_relaxed); }

void *device_alloc(uint64_t bytes);  // null when refused
void device_free(void *p);

// Device scratch of one stream's reductions (they run in stream order, so one buffer serves them all): the
// workspace. Outgrown buffers are kept: a queued kernel may still use them.
struct Scratch {
  std::pair<void *, uint64_t> workspace{nullptr, 0};
  std::vector<void *> retired;
  ~Scratch();
};

// Phase 2 of an executor with a workspace on the stream. False when refused.
bool run(Op &op, void *executor, uint64_t ws, void *stream, Scratch &scratch);

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

using DestroyFn = decltype(runtime::aclDestroyTensor.get());  // every argument object's destructor

// Argument objects, destroyed in reverse order of creation (a list before the tensors it does not own).
struct Args {
  std::vector<std::pair<DestroyFn, void *>> owned;
  Args() = default;
  Args(const Args &) = delete;
  Args &operator=(const Args &) = delete;
  ~Args();
  void *keep(void *h, DestroyFn destroy);
  // A tensor list owns its members: they go with it, not on their own.
  void *keep_list(void *list, size_t members);
};

// The host's tensor as the host described it (shape, strides, offset over its storage), for the shim's kernels.
void *view_of_host_tensor(Args &args, const TensorMeta &m, int32_t dt);
// A 0-d tensor of dtype `t` at byte `offset` of a results block.
void *result_slot(Args &args, void *block, int32_t t, uint64_t offset);
// The dimensions to reduce: all of the tensor's.
void *all_dims(Args &args, const TensorMeta &m);
// The norm's order: 2.
void *order_two(Args &args);

}  // namespace msprobe::shim::device_stats_internal
