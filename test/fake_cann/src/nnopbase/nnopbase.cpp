// libnnopbase.so: aclTensor and friends, their getters and destruction, and aclnn executors.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>

#include "aclnn/aclnn_base.h"
#include "fakecann/call_counters.h"
#include "fakecann/caller.h"
#include "fakecann/device.h"
#include "fakecann/dtype.h"
#include "fakecann/nn.h"
#include "fakecann/op_dump.h"
#include "fakecann/op_task.h"
#include "fakecann/pta_cache.h"
#include "fakecann/stream.h"

struct aclOpExecutor {
  fakecann::nn::ExecutorSpec spec;
  bool repeatable = false;
  bool huge_mem = false;  // made inside InitHugeMemThreadLocal: never repeatable (opbase SetRepeatable)
  std::shared_ptr<fakecann::nn::PtaLink> pta = nullptr;  // torch_npu's executor cache (pta_cache.cpp)
  uint64_t sequence = 0;                                 // the L2 call's log sequence (single-op dump names)
};

namespace fakecann::nn {
namespace {

std::mutex g_mu;
std::atomic<uint64_t> g_sequence{0};  // nnopbase's OpGetLogSequence: one per aclnn call
std::unordered_map<const void *, Kind> *g_live = new std::unordered_map<const void *, Kind>;

template <typename T>
T *track(T *p, Kind k) {
  std::lock_guard<std::mutex> lk(g_mu);
  (*g_live)[p] = k;
  return p;
}

bool untrack(const void *p, Kind k) {
  std::lock_guard<std::mutex> lk(g_mu);
  auto it = g_live->find(p);
  if (it == g_live->end() || it->second != k) return false;
  g_live->erase(it);
  return true;
}

uint64_t numel(const std::vector<int64_t> &dims) {
  uint64_t n = 1;
  for (int64_t d : dims) n *= (uint64_t)d;
  return n;
}

// The tensors of `slots` a single-op dump reads, inputs or outputs (in-out tensors are both): a contiguous view's
// own bytes, else its whole storage.
std::vector<opdump::Tensor> dumped(const std::vector<Slot> &slots, bool inputs) {
  std::vector<opdump::Tensor> out;
  for (const Slot &s : slots) {
    if (!s.present || s.io == (inputs ? Io::Output : Io::Input)) continue;
    for (const TensorView &v : s.views) {
      if (v.is_contiguous() && dtype_bytes(v.dtype, (uint64_t)v.offset) * 8 == (uint64_t)v.offset * dtype_bits(v.dtype))
        out.push_back({v.dtype, v.format, v.shape,
                       static_cast<char *>(v.data) + dtype_bytes(v.dtype, (uint64_t)v.offset),
                       dtype_bytes(v.dtype, numel(v.shape))});
      else
        out.push_back({v.dtype, v.format, v.storage_shape, v.data, dtype_bytes(v.dtype, numel(v.storage_shape))});
    }
  }
  return out;
}

// The single-op dump of one aclnn call (cann_dump.md §9): the L2 API's tensors around the call, the kernel's (L0)
// around its launch, inputs before and outputs after, each a synchronous adump call. Names as nnopbase gives
// them: op type "aclnnX_<seq>_L2" / "aclnnX_<seq>_L0", op name the API name / the kernel's op.
class CallDump {
 public:
  CallDump(const std::string &op, uint64_t seq, const std::vector<Slot> &slots, aclrtStream stream)
      : sw_(opdump::op_switch()), api_("aclnn" + op), op_(op), seq_(std::to_string(seq)), stream_(stream) {
    if (!sw_.on) return;
    task_ = opdump::next_task_id();
    in_ = dumped(slots, true);
    out_ = dumped(slots, false);
  }
  void before() const {
    if (!sw_.on || !sw_.inputs) return;
    if (sw_.l2) dump("_L2", api_, true);
    if (sw_.l0) dump("_L0", op_, true);
  }
  void after() const {
    if (!sw_.on || !sw_.outputs) return;
    if (sw_.l0) dump("_L0", op_, false);
    if (sw_.l2) dump("_L2", api_, false);
  }

 private:
  // A failed dump is only logged, as nnopbase does: the op's result stands.
  void dump(const char *level, const std::string &name, bool inputs) const {
    static const std::vector<opdump::Tensor> none;
    int rc = opdump::dump_tensors(api_ + "_" + seq_ + level, name, task_, inputs ? in_ : none, inputs ? none : out_,
                                  stream_);
    if (rc != 0) std::fprintf(stderr, "[fake_cann] %s: single-op dump failed (%d)\n", api_.c_str(), rc);
  }
  opdump::Switch sw_;  // read once per call
  std::string api_, op_, seq_;
  aclrtStream stream_;
  uint32_t task_ = 0;
  std::vector<opdump::Tensor> in_, out_;
};

}  // namespace

bool live(const void *p, Kind kind) {
  if (p == nullptr) return false;
  std::lock_guard<std::mutex> lk(g_mu);
  auto it = g_live->find(p);
  return it != g_live->end() && it->second == kind;
}

Slot slot(const aclTensor *t, Io io) {
  Slot s;
  s.io = io;
  if (t != nullptr) {
    s.present = true;
    s.views.push_back(t->view);
    s.storages.push_back(t->storage);
  }
  return s;
}

Slot slot(const aclTensorList *l, Io io) {
  Slot s;
  s.io = io;
  if (l != nullptr) {
    s.present = true;
    for (aclTensor *t : l->items) {
      s.views.push_back(t->view);
      s.storages.push_back(t->storage);
    }
  }
  return s;
}

aclnnStatus create_executor(ExecutorSpec spec, uint64_t *workspaceSize, aclOpExecutor **executor) {
  if (workspaceSize == nullptr || executor == nullptr) return ACLNN_ERR_PARAM_NULLPTR;
  *workspaceSize = spec.workspace_bytes;
  auto *ex = new aclOpExecutor{std::move(spec), false, huge_mem_active(), nullptr, g_sequence++};
  ex->pta = pta_link_new_executor(ex->spec);
  *executor = track(ex, Kind::Executor);
  return ACLNN_SUCCESS;
}

aclnnStatus launch(const char *op, void *workspace, uint64_t workspaceSize, aclOpExecutor *ex, aclrtStream stream,
                   const void *caller) {
  count_call(CallKind::Phase2);
  if (ex == nullptr) return ACLNN_ERR_PARAM_NULLPTR;
  if (!live(ex, Kind::Executor)) {
    set_error_message(std::string("aclnn") + op + ": executor is not live (freed by an earlier phase 2?)");
    return ACLNN_ERR_PARAM_INVALID;
  }
  if (ex->spec.op != op) {
    set_error_message(std::string("aclnn") + op + ": executor was created by aclnn" + ex->spec.op);
    return ACLNN_ERR_PARAM_INVALID;
  }
  uint64_t need = ex->spec.workspace_bytes;
  if (need > 0 && (workspace == nullptr || workspaceSize < need || device_host_alias(workspace, need) == nullptr)) {
    set_error_message(std::string("aclnn") + op + ": workspace missing, too small or not device memory");
    return ACLNN_ERR_PARAM_INVALID;
  }
  std::vector<Slot> slots = ex->spec.slots;
  for (Slot &s : slots)  // every tensor's storage address as it is now (a rebound tensor runs at its new address)
    for (size_t i = 0; i < s.views.size() && i < s.storages.size(); ++i)
      if (s.storages[i]) s.views[i].data = s.storages[i]->addr;
  if (ex->pta) {
    aclnnStatus rc = pta_before_launch(*ex->pta, slots, op);  // a cache hit: the reported addresses
    if (rc != ACLNN_SUCCESS) return rc;
  }
  // The kernel's args, TBE style: every tensor's device address in parameter order, then the workspace.
  std::vector<uint64_t> addresses;
  for (const Slot &s : slots) {
    if (!s.present) addresses.push_back(0);
    for (const TensorView &v : s.views) addresses.push_back(reinterpret_cast<uint64_t>(v.data));
  }
  if (need > 0) addresses.push_back(reinterpret_cast<uint64_t>(workspace));
  const CallDump dump(ex->spec.op, ex->sequence, slots, stream);
  dump.before();
  Kernel kernel = ex->spec.kernel;
  // Through libruntime's exported launch API, as real aclnn ops launch their kernels (fakecann/op_task.h).
  int rc = launch_op_task(stream, addresses, [slots = std::move(slots), kernel, workspace, need] {
    // Kernels scribble on their workspace, as real ones do, so it must be real device memory.
    if (need > 0) std::memset(device_bytes(workspace, need), 0x5a, need);
    kernel(slots);
  });
  if (rc != 0) return ACLNN_ERR_RUNTIME_ERROR;
  log_kernel_launch(op, caller);
  dump.after();
  if (ex->pta) pta_after_launch(*ex->pta);
  if (!ex->repeatable && untrack(ex, Kind::Executor)) delete ex;
  return ACLNN_SUCCESS;
}

}  // namespace fakecann::nn

using namespace fakecann;
using namespace fakecann::nn;

namespace {

// Sets a tensor's storage address: the tensor's own view and every executor made from it see it (read at launch).
void set_storage(aclTensor *tensor, void *addr) {
  tensor->storage->addr = addr;
  tensor->view.data = addr;
}

// aclSetTensorAddr and friends, in nnopbase's order (opbase src/nnopbase/common/api/acl_op_api.cpp): the tensor the
// host names (a list's member for the Dynamic ones) gets the storage address first, NULL being
// ACLNN_ERR_INNER_NULLPTR, then the executor is checked (NULL: ACLNN_ERR_INNER_NULLPTR). For the executors of built-in
// ops the index is [[maybe_unused]]: nothing is rebound by index, the kernel reads the storage address at launch; an
// index out of range is no error. A handle that is no live tensor or executor (use after destroy, undefined in CANN)
// is ACLNN_ERR_PARAM_INVALID here.
aclnnStatus rebind(aclOpExecutor *ex, aclTensor *tensor, void *addr) {
  count_call(CallKind::ExecutorAddress);
  if (tensor == nullptr) return ACLNN_ERR_INNER_NULLPTR;
  if (!live(tensor, Kind::Tensor)) return ACLNN_ERR_PARAM_INVALID;
  set_storage(tensor, addr);
  if (ex == nullptr) return ACLNN_ERR_INNER_NULLPTR;
  if (!live(ex, Kind::Executor)) return ACLNN_ERR_PARAM_INVALID;
  return ACLNN_SUCCESS;
}

// A Dynamic call's tensor: member `rel` of `list`, or NULL (the caller then reports ACLNN_ERR_INNER_NULLPTR).
aclnnStatus list_member(aclTensorList *list, size_t rel, aclTensor **out) {
  *out = nullptr;
  if (list == nullptr) return ACLNN_ERR_INNER_NULLPTR;
  if (!live(list, Kind::TensorList)) return ACLNN_ERR_PARAM_INVALID;
  if (rel >= list->items.size()) return ACLNN_ERR_PARAM_INVALID;
  *out = list->items[rel];
  return ACLNN_SUCCESS;
}

// The fields aclCreateTensor and aclInitTensor set; NULL view dims, storage dims or address keep the tensor's own.
void init_tensor(aclTensor *t, const int64_t *viewDims, uint64_t viewDimsNum, aclDataType dataType,
                 const int64_t *stride, int64_t offset, aclFormat format, const int64_t *storageDims,
                 uint64_t storageDimsNum, void *addr) {
  TensorView &v = t->view;
  v.dtype = dataType;
  v.format = format;
  if (viewDims != nullptr && viewDimsNum > 0) v.shape.assign(viewDims, viewDims + viewDimsNum);
  v.strides = stride != nullptr ? std::vector<int64_t>(stride, stride + v.shape.size()) : contiguous_strides(v.shape);
  v.offset = offset;
  if (storageDims != nullptr && storageDimsNum > 0) v.storage_shape.assign(storageDims, storageDims + storageDimsNum);
  if (addr != nullptr) set_storage(t, addr);
}

aclnnStatus destroy_tensor(const aclTensor *tensor) {
  if (tensor == nullptr) return ACLNN_SUCCESS;  // destroying NULL is a no-op
  if (!untrack(tensor, Kind::Tensor)) return ACLNN_ERR_PARAM_INVALID;
  delete tensor;
  return ACLNN_SUCCESS;
}

aclnnStatus destroy_scalar(const aclScalar *scalar) {
  if (scalar == nullptr) return ACLNN_SUCCESS;
  if (!untrack(scalar, Kind::Scalar)) return ACLNN_ERR_PARAM_INVALID;
  delete scalar;
  return ACLNN_SUCCESS;
}

template <typename T>
aclnnStatus copy_dims(const std::vector<int64_t> &src, int64_t **out, uint64_t *n) {
  if (out == nullptr || n == nullptr) return ACLNN_ERR_PARAM_NULLPTR;
  *out = new int64_t[src.empty() ? 1 : src.size()];
  if (!src.empty()) std::memcpy(*out, src.data(), src.size() * sizeof(int64_t));
  *n = src.size();
  return ACLNN_SUCCESS;
}

}  // namespace

extern "C" {

aclnnStatus aclnnInit(const char * /*configPath*/) { return ACLNN_SUCCESS; }
aclnnStatus aclnnFinalize(void) { return ACLNN_SUCCESS; }

aclTensor *aclCreateTensor(const int64_t *viewDims, uint64_t viewDimsNum, aclDataType dataType, const int64_t *stride,
                           int64_t offset, aclFormat format, const int64_t *storageDims, uint64_t storageDimsNum,
                           void *tensorData) {
  count_call(CallKind::ArgumentCreated);
  if ((viewDimsNum > 0 && viewDims == nullptr) || viewDimsNum > 8 || offset < 0) return nullptr;
  if (dtype_bits(dataType) == 0) return nullptr;
  if (storageDimsNum > 0 && storageDims == nullptr) return nullptr;
  if (std::any_of(viewDims, viewDims + viewDimsNum, [](int64_t d) { return d < 0; })) return nullptr;
  auto *t = new aclTensor;
  t->storage = std::make_shared<Storage>();
  init_tensor(t, viewDims, viewDimsNum, dataType, stride, offset, format, storageDims, storageDimsNum, tensorData);
  if (viewDimsNum == 0) t->view.shape.clear(), t->view.strides.clear();  // a scalar tensor
  if (storageDims == nullptr) t->view.storage_shape = {(int64_t)numel(t->view.shape)};
  return track(t, Kind::Tensor);
}

// common_types.cpp aclTensor::InitTensor: NULL (or 0) view dims, storage dims or address keep the tensor's own; the
// storage is the tensor's, so the executors made from it see a new address.
aclnnStatus aclInitTensor(aclTensor *tensor, const int64_t *viewDims, uint64_t viewDimsNum, aclDataType dataType,
                          const int64_t *stride, int64_t offset, aclFormat format, const int64_t *storageDims,
                          uint64_t storageDimsNum, void *tensorDataAddr) {
  if (tensor == nullptr) return ACLNN_ERR_PARAM_NULLPTR;
  if (!live(tensor, Kind::Tensor)) return ACLNN_ERR_PARAM_INVALID;
  if (viewDimsNum > 8 || offset < 0 || dtype_bits(dataType) == 0) return ACLNN_ERR_PARAM_INVALID;
  if (viewDims != nullptr && std::any_of(viewDims, viewDims + viewDimsNum, [](int64_t d) { return d < 0; }))
    return ACLNN_ERR_PARAM_INVALID;
  init_tensor(tensor, viewDims, viewDimsNum, dataType, stride, offset, format, storageDims, storageDimsNum,
              tensorDataAddr);
  return ACLNN_SUCCESS;
}

aclScalar *aclCreateScalar(void *value, aclDataType dataType) {
  count_call(CallKind::ArgumentCreated);
  uint64_t es = dtype_size(dataType);
  if (value == nullptr || es == 0 || es > 16) return nullptr;
  auto *s = new aclScalar;
  s->dtype = dataType;
  std::memset(s->raw, 0, sizeof s->raw);
  std::memcpy(s->raw, value, es);  // read now: the host value may change after creation
  s->value = dtype_is_numeric(dataType) ? load_element(s->raw, dataType, 0) : 0.0;
  return track(s, Kind::Scalar);
}

aclIntArray *aclCreateIntArray(const int64_t *value, uint64_t size) {
  count_call(CallKind::ArgumentCreated);
  if (size > 0 && value == nullptr) return nullptr;
  return track(new aclIntArray{std::vector<int64_t>(value, value + size)}, Kind::IntArray);
}

aclFloatArray *aclCreateFloatArray(const float *value, uint64_t size) {
  count_call(CallKind::ArgumentCreated);
  if (size > 0 && value == nullptr) return nullptr;
  return track(new aclFloatArray{std::vector<float>(value, value + size)}, Kind::FloatArray);
}

aclBoolArray *aclCreateBoolArray(const bool *value, uint64_t size) {
  count_call(CallKind::ArgumentCreated);
  if (size > 0 && value == nullptr) return nullptr;
  return track(new aclBoolArray{std::vector<bool>(value, value + size)}, Kind::BoolArray);
}

aclTensorList *aclCreateTensorList(const aclTensor *const *value, uint64_t size) {
  count_call(CallKind::ArgumentCreated);
  if (size > 0 && value == nullptr) return nullptr;
  auto *l = new aclTensorList;
  for (uint64_t i = 0; i < size; ++i) {
    if (!live(value[i], Kind::Tensor)) {
      delete l;
      return nullptr;
    }
    l->items.push_back(const_cast<aclTensor *>(value[i]));
  }
  return track(l, Kind::TensorList);
}

aclScalarList *aclCreateScalarList(const aclScalar *const *value, uint64_t size) {
  count_call(CallKind::ArgumentCreated);
  if (size > 0 && value == nullptr) return nullptr;
  auto *l = new aclScalarList;
  for (uint64_t i = 0; i < size; ++i) {
    if (!live(value[i], Kind::Scalar)) {
      delete l;
      return nullptr;
    }
    l->items.push_back(const_cast<aclScalar *>(value[i]));
  }
  return track(l, Kind::ScalarList);
}

aclnnStatus aclDestroyTensor(const aclTensor *tensor) {
  count_call(CallKind::ArgumentDestroyed);
  return destroy_tensor(tensor);
}

aclnnStatus aclDestroyScalar(const aclScalar *scalar) {
  count_call(CallKind::ArgumentDestroyed);
  return destroy_scalar(scalar);
}

aclnnStatus aclDestroyIntArray(const aclIntArray *array) {
  count_call(CallKind::ArgumentDestroyed);
  if (array == nullptr) return ACLNN_SUCCESS;
  if (!untrack(array, Kind::IntArray)) return ACLNN_ERR_PARAM_INVALID;
  delete array;
  return ACLNN_SUCCESS;
}

aclnnStatus aclDestroyFloatArray(const aclFloatArray *array) {
  count_call(CallKind::ArgumentDestroyed);
  if (array == nullptr) return ACLNN_SUCCESS;
  if (!untrack(array, Kind::FloatArray)) return ACLNN_ERR_PARAM_INVALID;
  delete array;
  return ACLNN_SUCCESS;
}

aclnnStatus aclDestroyBoolArray(const aclBoolArray *array) {
  count_call(CallKind::ArgumentDestroyed);
  if (array == nullptr) return ACLNN_SUCCESS;
  if (!untrack(array, Kind::BoolArray)) return ACLNN_ERR_PARAM_INVALID;
  delete array;
  return ACLNN_SUCCESS;
}

aclnnStatus aclDestroyTensorList(const aclTensorList *array) {
  count_call(CallKind::ArgumentDestroyed);
  if (array == nullptr) return ACLNN_SUCCESS;
  if (!untrack(array, Kind::TensorList)) return ACLNN_ERR_PARAM_INVALID;
  for (aclTensor *t : array->items) destroy_tensor(t);  // the list owns its members
  delete array;
  return ACLNN_SUCCESS;
}

aclnnStatus aclDestroyScalarList(const aclScalarList *array) {
  count_call(CallKind::ArgumentDestroyed);
  if (array == nullptr) return ACLNN_SUCCESS;
  if (!untrack(array, Kind::ScalarList)) return ACLNN_ERR_PARAM_INVALID;
  for (aclScalar *s : array->items) destroy_scalar(s);
  delete array;
  return ACLNN_SUCCESS;
}

aclnnStatus aclGetViewShape(const aclTensor *tensor, int64_t **viewDims, uint64_t *viewDimsNum) {
  if (tensor == nullptr) return ACLNN_ERR_PARAM_NULLPTR;
  if (!live(tensor, Kind::Tensor)) return ACLNN_ERR_PARAM_INVALID;
  return copy_dims<int64_t>(tensor->view.shape, viewDims, viewDimsNum);
}

aclnnStatus aclGetStorageShape(const aclTensor *tensor, int64_t **storageDims, uint64_t *storageDimsNum) {
  if (tensor == nullptr) return ACLNN_ERR_PARAM_NULLPTR;
  if (!live(tensor, Kind::Tensor)) return ACLNN_ERR_PARAM_INVALID;
  return copy_dims<int64_t>(tensor->view.storage_shape, storageDims, storageDimsNum);
}

aclnnStatus aclGetViewStrides(const aclTensor *tensor, int64_t **stridesValue, uint64_t *stridesNum) {
  if (tensor == nullptr) return ACLNN_ERR_PARAM_NULLPTR;
  if (!live(tensor, Kind::Tensor)) return ACLNN_ERR_PARAM_INVALID;
  return copy_dims<int64_t>(tensor->view.strides, stridesValue, stridesNum);
}

aclnnStatus aclGetViewOffset(const aclTensor *tensor, int64_t *offset) {
  if (tensor == nullptr || offset == nullptr) return ACLNN_ERR_PARAM_NULLPTR;
  if (!live(tensor, Kind::Tensor)) return ACLNN_ERR_PARAM_INVALID;
  *offset = tensor->view.offset;
  return ACLNN_SUCCESS;
}

aclnnStatus aclGetFormat(const aclTensor *tensor, aclFormat *format) {
  if (tensor == nullptr || format == nullptr) return ACLNN_ERR_PARAM_NULLPTR;
  if (!live(tensor, Kind::Tensor)) return ACLNN_ERR_PARAM_INVALID;
  *format = tensor->view.format;
  return ACLNN_SUCCESS;
}

aclnnStatus aclGetDataType(const aclTensor *tensor, aclDataType *dataType) {
  if (tensor == nullptr || dataType == nullptr) return ACLNN_ERR_PARAM_NULLPTR;
  if (!live(tensor, Kind::Tensor)) return ACLNN_ERR_PARAM_INVALID;
  *dataType = tensor->view.dtype;
  return ACLNN_SUCCESS;
}

#define FAKECANN_SIZE_GETTER(Fn, Type, Member, K)                            \
  aclnnStatus Fn(const Type *array, uint64_t *size) {                        \
    if (array == nullptr || size == nullptr) return ACLNN_ERR_PARAM_NULLPTR; \
    if (!live(array, K)) return ACLNN_ERR_PARAM_INVALID;                     \
    *size = array->Member.size();                                            \
    return ACLNN_SUCCESS;                                                    \
  }
FAKECANN_SIZE_GETTER(aclGetIntArraySize, aclIntArray, values, Kind::IntArray)
FAKECANN_SIZE_GETTER(aclGetFloatArraySize, aclFloatArray, values, Kind::FloatArray)
FAKECANN_SIZE_GETTER(aclGetBoolArraySize, aclBoolArray, values, Kind::BoolArray)
FAKECANN_SIZE_GETTER(aclGetTensorListSize, aclTensorList, items, Kind::TensorList)
FAKECANN_SIZE_GETTER(aclGetScalarListSize, aclScalarList, items, Kind::ScalarList)
#undef FAKECANN_SIZE_GETTER

aclnnStatus aclGetRawTensorAddr(const aclTensor *tensor, void **addr) {
  if (tensor == nullptr || addr == nullptr) return ACLNN_ERR_PARAM_NULLPTR;
  if (!live(tensor, Kind::Tensor)) return ACLNN_ERR_PARAM_INVALID;
  *addr = tensor->view.data;
  return ACLNN_SUCCESS;
}

aclnnStatus aclSetRawTensorAddr(aclTensor *tensor, void *addr) {
  if (tensor == nullptr) return ACLNN_ERR_PARAM_NULLPTR;
  if (!live(tensor, Kind::Tensor)) return ACLNN_ERR_PARAM_INVALID;
  set_storage(tensor, addr);
  return ACLNN_SUCCESS;
}

aclnnStatus aclDumpOpTensors(const char *opType, const char *opName, aclTensor **tensors, size_t inputTensorNum,
                             size_t outputTensorNum, aclrtStream stream) {
  if (opType == nullptr || opName == nullptr || (inputTensorNum + outputTensorNum > 0 && tensors == nullptr))
    return ACLNN_ERR_PARAM_NULLPTR;
  if (!opdump::op_switch().on) return ACLNN_SUCCESS;
  std::vector<Slot> in, out;
  for (size_t i = 0; i < inputTensorNum + outputTensorNum; ++i) {
    if (!live(tensors[i], Kind::Tensor)) return ACLNN_ERR_PARAM_INVALID;
    (i < inputTensorNum ? in : out).push_back(slot(tensors[i], i < inputTensorNum ? Io::Input : Io::Output));
  }
  int rc = opdump::dump_tensors(opType, opName, opdump::next_task_id(), dumped(in, true), dumped(out, false), stream);
  return rc == 0 ? ACLNN_SUCCESS : ACLNN_ERR_RUNTIME_ERROR;
}

// Refused as nnopbase refuses it (opbase src/nnopbase/composite_op/aclnn_engine/op_executor.cpp SetRepeatable,
// common/api/acl_op_api.cpp): ACLNN_ERR_INNER_NULLPTR for NULL, ACLNN_ERR_INNER for an executor that is no executor
// (freed) or that uses huge-page memory (made inside InitHugeMemThreadLocal, as torch_npu's cache path does). nnopbase
// also refuses executors whose L0 kernels copy host data to the device (CopyToNpu) or depend on an output shape; no
// op of the stand-in builds one.
aclnnStatus aclSetAclOpExecutorRepeatable(aclOpExecutor *executor) {
  count_call(CallKind::ExecutorRepeatable);
  if (executor == nullptr) return ACLNN_ERR_INNER_NULLPTR;
  if (!live(executor, Kind::Executor)) return ACLNN_ERR_INNER;
  if (executor->huge_mem) {
    set_error_message(
        "aclSetAclOpExecutorRepeatable: the executor uses huge-page memory (made inside "
        "InitHugeMemThreadLocal) and cannot be repeatable");
    return ACLNN_ERR_INNER;
  }
  executor->repeatable = true;
  return ACLNN_SUCCESS;
}

aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor *executor) {
  count_call(CallKind::ExecutorDestroyed);
  if (executor == nullptr) return ACLNN_ERR_PARAM_NULLPTR;
  if (!untrack(executor, Kind::Executor)) return ACLNN_ERR_PARAM_INVALID;
  delete executor;
  return ACLNN_SUCCESS;
}

// The index of each is ignored for built-in ops (rebind); CANN's capitalised Acl* names are aliases.
#define FAKECANN_TENSOR_ADDR(Fn, Alias)                                                                        \
  aclnnStatus Fn(aclOpExecutor *executor, const size_t /*index*/, aclTensor *tensor, void *addr) {             \
    return rebind(executor, tensor, addr);                                                                     \
  }                                                                                                            \
  aclnnStatus Alias(aclOpExecutor *executor, const size_t index, aclTensor *tensor, void *addr) {              \
    return Fn(executor, index, tensor, addr);                                                                  \
  }
FAKECANN_TENSOR_ADDR(aclSetTensorAddr, AclSetTensorAddr)
FAKECANN_TENSOR_ADDR(aclSetInputTensorAddr, AclSetInputTensorAddr)
FAKECANN_TENSOR_ADDR(aclSetOutputTensorAddr, AclSetOutputTensorAddr)
#undef FAKECANN_TENSOR_ADDR
#define FAKECANN_DYNAMIC_ADDR(Fn, Alias)                                                                          \
  aclnnStatus Fn(aclOpExecutor *executor, size_t /*irIndex*/, const size_t relativeIndex, aclTensorList *tensors, \
                 void *addr) {                                                                                    \
    aclTensor *member = nullptr;                                                                                  \
    if (aclnnStatus rc = list_member(tensors, relativeIndex, &member); rc != ACLNN_SUCCESS) {                     \
      count_call(CallKind::ExecutorAddress);                                                                      \
      return rc;                                                                                                  \
    }                                                                                                             \
    return rebind(executor, member, addr);                                                                        \
  }                                                                                                               \
  aclnnStatus Alias(aclOpExecutor *executor, size_t irIndex, const size_t relativeIndex, aclTensorList *tensors,  \
                    void *addr) {                                                                                 \
    return Fn(executor, irIndex, relativeIndex, tensors, addr);                                                   \
  }
FAKECANN_DYNAMIC_ADDR(aclSetDynamicTensorAddr, AclSetDynamicTensorAddr)
FAKECANN_DYNAMIC_ADDR(aclSetDynamicInputTensorAddr, AclSetDynamicInputTensorAddr)
FAKECANN_DYNAMIC_ADDR(aclSetDynamicOutputTensorAddr, AclSetDynamicOutputTensorAddr)
#undef FAKECANN_DYNAMIC_ADDR

}  // extern "C"
