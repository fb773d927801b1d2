// aclnn argument objects (libnnopbase): their creation, destruction and storage addresses are recorded in the handle
// table (every launch asks it for the addresses bound then), and executor reuse (repeatable, destroy) is reported to
// the aclnn capture.
#include <cstring>
#include <utility>

#include "aclnn/acl_meta.h"
#include "shim/aclnn/aclnn_capture.h"
#include "shim/capture/capture_call.h"
#include "shim/capture/session.h"
#include "shim/device/acl_types.h"
#include "shim/device/handles.h"
#include "shim/hooks/hook.h"

using namespace msprobe::shim;

namespace {

template <typename T>
std::vector<T> copy_values(const T *p, uint64_t n) {
  return (p && n) ? std::vector<T>(p, p + n) : std::vector<T>{};
}

std::vector<const void *> copy_members(const void *const *p, uint64_t n) {
  return (p && n) ? std::vector<const void *>(p, p + n) : std::vector<const void *>{};
}

// Fills `m` (a fresh TensorMeta: zeros past the dims given) from aclCreateTensor's arguments.
void fill_tensor_meta(TensorMeta &m, const int64_t *viewDims, uint64_t viewDimsNum, aclDataType dataType,
                      const int64_t *stride, int64_t offset, aclFormat format, const int64_t *storageDims,
                      uint64_t storageDimsNum, void *tensorData) {
  m.dtype = dataType;
  m.format = format;
  m.ndim = (uint8_t)viewDimsNum;
  m.offset = offset;
  m.data = tensorData;
  for (uint64_t i = 0; i < viewDimsNum; ++i) m.shape[i] = viewDims[i];
  // A NULL stride means contiguous (CANN doc examples pass NULL).
  int64_t s = 1;
  for (uint64_t i = viewDimsNum; i-- > 0;) {
    m.strides[i] = stride ? stride[i] : s;
    s *= viewDims[i] > 0 ? viewDims[i] : 1;
  }
  m.storage_ndim = (uint8_t)(storageDims && storageDimsNum <= (uint64_t)kMaxDims ? storageDimsNum : 0);
  for (int i = 0; i < m.storage_ndim; ++i) m.storage[i] = storageDims[i];
}

// The tables' bookkeeping, only while this process captures: a fork child (capture is off there, and a table's lock
// may be held by a thread that did not come along) and a process that does not capture leave them alone.
template <typename Record>
void record(Record &&r) noexcept {
  if (capture_enabled()) guarded(Problem::DescriptorNotKept, std::forward<Record>(r));
}

// aclCreateTensorList and aclCreateScalarList: a created list is recorded with its members.
template <typename Real, typename T>
auto create_list(Real real, const T *const *value, uint64_t size) -> decltype(real(value, size)) {
  if (!real) return nullptr;
  auto *l = real(value, size);
  if (l) record([&] { handles().put(l, copy_members(reinterpret_cast<const void *const *>(value), size)); });
  return l;
}

// The executor reuse calls: what the runtime accepted is reported to the aclnn capture.
template <typename Real, typename Report>
aclnnStatus on_executor(Real real, aclOpExecutor *executor, Report report) {
  if (!real) return ACLNN_ERR_INNER_NULLPTR;
  aclnnStatus rc = real(executor);
  if (rc == ACLNN_SUCCESS) record([&] { (aclnn_capture().*report)(executor); });
  return rc;
}

}  // namespace

// The hooks of this family, one a line (shim/hooks/hook.h).
#define MSPROBE_ACLNN_META_HOOKS(X) \
  X(aclCreateTensor)                \
  X(aclCreateScalar)                \
  X(aclCreateIntArray)              \
  X(aclCreateFloatArray)            \
  X(aclCreateBoolArray)             \
  X(aclCreateTensorList)            \
  X(aclCreateScalarList)            \
  X(aclDestroyTensor)               \
  X(aclDestroyScalar)               \
  X(aclDestroyIntArray)             \
  X(aclDestroyFloatArray)           \
  X(aclDestroyBoolArray)            \
  X(aclDestroyTensorList)           \
  X(aclDestroyScalarList)           \
  X(aclSetRawTensorAddr)            \
  X(aclSetAclOpExecutorRepeatable)  \
  X(aclDestroyAclOpExecutor)        \
  X(aclSetTensorAddr)               \
  X(aclSetInputTensorAddr)          \
  X(aclSetOutputTensorAddr)         \
  X(aclSetDynamicTensorAddr)        \
  X(aclSetDynamicInputTensorAddr)   \
  X(aclSetDynamicOutputTensorAddr)
MSPROBE_HOOK_SLOTS(MSPROBE_ACLNN_META_HOOKS)

MSPROBE_HOOK aclTensor *aclCreateTensor(const int64_t *viewDims, uint64_t viewDimsNum, aclDataType dataType,
                                        const int64_t *stride, int64_t offset, aclFormat format,
                                        const int64_t *storageDims, uint64_t storageDimsNum, void *tensorData) {
  auto real = MSPROBE_REAL(aclCreateTensor);
  if (!real) return nullptr;
  aclTensor *t = real(viewDims, viewDimsNum, dataType, stride, offset, format, storageDims, storageDimsNum, tensorData);
  // The runtime validated the arguments: only a created tensor is recorded (and its dims are readable).
  if (t && viewDimsNum <= (uint64_t)kMaxDims)
    record([&] {
      // Written in place into the table's slot: a tensor's record is ~230 bytes, not copied on the host's thread.
      handles().put_with(t, [&](HandleMeta &meta) {
        fill_tensor_meta(meta.emplace<TensorMeta>(), viewDims, viewDimsNum, dataType, stride, offset, format,
                         storageDims, storageDimsNum, tensorData);
      });
    });
  return t;
}

MSPROBE_HOOK aclScalar *aclCreateScalar(void *value, aclDataType dataType) {
  auto real = MSPROBE_REAL(aclCreateScalar);
  if (!real) return nullptr;
  aclScalar *s = real(value, dataType);
  if (s && value)
    record([&] {
      handles().put_with(s, [&](HandleMeta &meta) {
        ScalarMeta &m = meta.emplace<ScalarMeta>();
        m.dtype = dataType;
        size_t n = scalar_size(dataType);
        if (n > 0 && n <= m.raw.size()) std::memcpy(m.raw.data(), value, n);  // read now, as the runtime does
      });
    });
  return s;
}

#define MSPROBE_CREATE_ARRAY_HOOK(fn, Ret, T)                           \
  MSPROBE_HOOK Ret *fn(const T *value, uint64_t size) {                 \
    auto real = MSPROBE_REAL(fn);                                       \
    if (!real) return nullptr;                                          \
    Ret *a = real(value, size);                                         \
    if (a) record([&] { handles().put(a, copy_values(value, size)); }); \
    return a;                                                           \
  }
MSPROBE_CREATE_ARRAY_HOOK(aclCreateIntArray, aclIntArray, int64_t)
MSPROBE_CREATE_ARRAY_HOOK(aclCreateFloatArray, aclFloatArray, float)
MSPROBE_CREATE_ARRAY_HOOK(aclCreateBoolArray, aclBoolArray, bool)
#undef MSPROBE_CREATE_ARRAY_HOOK

MSPROBE_HOOK aclTensorList *aclCreateTensorList(const aclTensor *const *value, uint64_t size) {
  return create_list(MSPROBE_REAL(aclCreateTensorList), value, size);
}

MSPROBE_HOOK aclScalarList *aclCreateScalarList(const aclScalar *const *value, uint64_t size) {
  return create_list(MSPROBE_REAL(aclCreateScalarList), value, size);
}

// Destruction is forwarded first; the record goes only if the runtime accepted it (a refused double
// destroy must not make us forget a live handle that was re-created at the same address).
#define MSPROBE_DESTROY_HOOK(fn, T)                                        \
  MSPROBE_HOOK aclnnStatus fn(const T *obj) {                              \
    auto real = MSPROBE_REAL(fn);                                          \
    if (!real) return ACLNN_ERR_INNER_NULLPTR;                             \
    aclnnStatus rc = real(obj);                                            \
    if (rc == ACLNN_SUCCESS && obj) record([&] { handles().erase(obj); }); \
    return rc;                                                             \
  }
MSPROBE_DESTROY_HOOK(aclDestroyTensor, aclTensor)
MSPROBE_DESTROY_HOOK(aclDestroyScalar, aclScalar)
MSPROBE_DESTROY_HOOK(aclDestroyIntArray, aclIntArray)
MSPROBE_DESTROY_HOOK(aclDestroyFloatArray, aclFloatArray)
MSPROBE_DESTROY_HOOK(aclDestroyBoolArray, aclBoolArray)
#undef MSPROBE_DESTROY_HOOK

// Lists own their members: destroying the list destroys them inside the runtime, without calls we see.
#define MSPROBE_DESTROY_LIST_HOOK(fn, T)                                   \
  MSPROBE_HOOK aclnnStatus fn(const T *list) {                             \
    auto real = MSPROBE_REAL(fn);                                          \
    if (!real) return ACLNN_ERR_INNER_NULLPTR;                             \
    std::optional<HandleMeta> members;                                     \
    if (list) record([&] { members = handles().get(list); });              \
    aclnnStatus rc = real(list);                                           \
    if (rc == ACLNN_SUCCESS && list)                                       \
      record([&] {                                                         \
        handles().erase(list);                                             \
        if (members)                                                       \
          if (auto *m = std::get_if<std::vector<const void *>>(&*members)) \
            for (const void *h : *m) handles().erase(h);                   \
      });                                                                  \
    return rc;                                                             \
  }
MSPROBE_DESTROY_LIST_HOOK(aclDestroyTensorList, aclTensorList)
MSPROBE_DESTROY_LIST_HOOK(aclDestroyScalarList, aclScalarList)
#undef MSPROBE_DESTROY_LIST_HOOK

MSPROBE_HOOK aclnnStatus aclSetRawTensorAddr(aclTensor *tensor, void *addr) {
  auto real = MSPROBE_REAL(aclSetRawTensorAddr);
  if (!real) return ACLNN_ERR_INNER_NULLPTR;
  aclnnStatus rc = real(tensor, addr);
  if (rc == ACLNN_SUCCESS) record([&] { handles().set_tensor_data(tensor, addr); });
  return rc;
}

MSPROBE_HOOK aclnnStatus aclSetAclOpExecutorRepeatable(aclOpExecutor *executor) {
  return on_executor(MSPROBE_REAL(aclSetAclOpExecutorRepeatable), executor, &AclnnCapture::on_repeatable);
}

MSPROBE_HOOK aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor *executor) {
  return on_executor(MSPROBE_REAL(aclDestroyAclOpExecutor), executor, &AclnnCapture::on_destroyed);
}

// The executor's address setters. CANN ignores their index for built-in ops: the call sets the storage address of the
// tensor it names (a list's member `relativeIndex` for the dynamic ones), and the executor reads every tensor's address
// when it launches (reference/cann_source.md §3.4). So does the shim: the handle table holds the address, and the
// aclnn capture asks it at each launch.
#define MSPROBE_SET_ADDR_HOOK(fn)                                                                           \
  MSPROBE_HOOK aclnnStatus fn(aclOpExecutor *executor, const size_t index, aclTensor *tensor, void *addr) { \
    auto real = MSPROBE_REAL(fn);                                                                           \
    if (!real) return ACLNN_ERR_INNER_NULLPTR;                                                              \
    aclnnStatus rc = real(executor, index, tensor, addr);                                                   \
    if (rc == ACLNN_SUCCESS) record([&] { handles().set_tensor_data(tensor, addr); });                      \
    return rc;                                                                                              \
  }
MSPROBE_SET_ADDR_HOOK(aclSetTensorAddr)
MSPROBE_SET_ADDR_HOOK(aclSetInputTensorAddr)
MSPROBE_SET_ADDR_HOOK(aclSetOutputTensorAddr)
#undef MSPROBE_SET_ADDR_HOOK

#define MSPROBE_SET_DYNAMIC_ADDR_HOOK(fn)                                                              \
  MSPROBE_HOOK aclnnStatus fn(aclOpExecutor *executor, size_t irIndex, const size_t relativeIndex,     \
                              aclTensorList *tensors, void *addr) {                                    \
    auto real = MSPROBE_REAL(fn);                                                                      \
    if (!real) return ACLNN_ERR_INNER_NULLPTR;                                                         \
    aclnnStatus rc = real(executor, irIndex, relativeIndex, tensors, addr);                            \
    if (rc == ACLNN_SUCCESS) record([&] { handles().set_member_data(tensors, relativeIndex, addr); }); \
    return rc;                                                                                         \
  }
MSPROBE_SET_DYNAMIC_ADDR_HOOK(aclSetDynamicTensorAddr)
MSPROBE_SET_DYNAMIC_ADDR_HOOK(aclSetDynamicInputTensorAddr)
MSPROBE_SET_DYNAMIC_ADDR_HOOK(aclSetDynamicOutputTensorAddr)
#undef MSPROBE_SET_DYNAMIC_ADDR_HOOK

MSPROBE_HOOK_FAMILY(MSPROBE_ACLNN_META_HOOKS, Linked)
