#include "shim/device/device_stats_ops.h"

#include <span>

#include "acl/acl.h"

namespace msprobe::shim::device_stats_internal {

Op op_aminmax{{"aclnnAminmaxAllGetWorkspaceSize"}, {"aclnnAminmaxAll"}};
Op op_mean{{"aclnnMeanGetWorkspaceSize"}, {"aclnnMean"}};
Op op_norm{{"aclnnLinalgVectorNormGetWorkspaceSize"}, {"aclnnLinalgVectorNorm"}};
Op op_foreach_norm{{"aclnnForeachNormGetWorkspaceSize"}, {"aclnnForeachNorm"}};

namespace {

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

using Phase2Fn = int (*)(void *, uint64_t, void *, void *);

template <typename F>
F fn(HookSlot &s) {
  return reinterpret_cast<F>(s.resolve());
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

}  // namespace

bool resolve_reductions() {
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
  return true;
}

void *device_alloc(uint64_t bytes) {
  auto m = runtime::aclrtMalloc.get();
  void *p = nullptr;
  if (m == nullptr || m(&p, bytes, 0 /*ACL_MEM_MALLOC_HUGE_FIRST*/) != ACL_SUCCESS) return nullptr;
  return p;
}

void device_free(void *p) {
  if (auto f = runtime::aclrtFree.get(); f && p) f(p);
}

Scratch::~Scratch() {
  device_free(workspace.first);
  for (void *p : retired) device_free(p);
}

bool run(Op &op, void *executor, uint64_t ws, void *stream, Scratch &scratch) {
  auto p2 = fn<Phase2Fn>(op.phase2);
  void *w = ws > 0 ? grow_scratch(scratch.workspace, ws, scratch.retired) : nullptr;
  if (p2 == nullptr || (ws > 0 && w == nullptr) || p2(w, ws, executor, stream) != 0) return false;
  count(kKernels);
  return true;
}

Args::~Args() {
  for (auto it = owned.rbegin(); it != owned.rend(); ++it)
    if (it->first && it->second) it->first(it->second);
}

void *Args::keep(void *h, DestroyFn destroy) {
  if (h) owned.emplace_back(destroy, h);
  return h;
}

void *Args::keep_list(void *list, size_t members) {
  if (list == nullptr) return nullptr;
  owned.resize(owned.size() - members);
  return keep(list, runtime::aclDestroyTensorList.get());
}

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

}  // namespace msprobe::shim::device_stats_internal
