// The aclnn meta objects of libnnopbase (opaque in the public headers) and the executor API that
// libopapi's ops are written against. An executor holds copies of its tensors' views, one Slot per
// tensor-typed parameter in declaration order (absent optional tensors included, lists as one slot), and each
// tensor's storage: as in nnopbase (common_types.h aclTensor::storage_), the storage address is read when the kernel
// is launched (phase 2), so a tensor rebound after phase 1 (aclSetRawTensorAddr, aclSet*TensorAddr) runs at its new
// address.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "aclnn/acl_meta.h"
#include "fakecann/export.h"
#include "fakecann/tensor_io.h"

namespace fakecann::nn {
// A tensor's storage address, shared by the tensor and the executors made from it (they outlive a destroyed tensor).
struct Storage {
  void *addr = nullptr;
};
}  // namespace fakecann::nn

struct aclTensor {
  fakecann::TensorView view;  // view.data follows storage->addr
  std::shared_ptr<fakecann::nn::Storage> storage;
};
struct aclScalar {
  aclDataType dtype;
  double value;
  unsigned char raw[16];
};
struct aclIntArray {
  std::vector<int64_t> values;
};
struct aclFloatArray {
  std::vector<float> values;
};
struct aclBoolArray {
  std::vector<bool> values;
};
struct aclTensorList {
  std::vector<aclTensor *> items;
};
struct aclScalarList {
  std::vector<aclScalar *> items;
};

namespace fakecann::nn {

enum class Kind { Tensor, Scalar, IntArray, FloatArray, BoolArray, TensorList, ScalarList, Executor };

// True when `p` is a live handle of that kind (created and not yet destroyed).
FAKECANN_API bool live(const void *p, Kind kind);

enum class Io { Input, Output, InOut };

struct Slot {
  Io io = Io::Input;
  bool present = false;              // false: an absent optional tensor (NULL)
  std::vector<TensorView> views;                 // one for a tensor, n for a tensor list
  std::vector<std::shared_ptr<Storage>> storages;  // each view's storage, read at launch (null: the view's own data)
};

FAKECANN_API Slot slot(const aclTensor *t, Io io);
FAKECANN_API Slot slot(const aclTensorList *l, Io io);

// Runs on the stream worker with the views bound at launch time.
using Kernel = std::function<void(const std::vector<Slot> &slots)>;

struct ExecutorSpec {
  std::string op;  // "Add" for aclnnAdd
  std::vector<Slot> slots;
  uint64_t workspace_bytes = 0;
  Kernel kernel;
};

// Phase 1: registers the executor and writes *workspaceSize / *executor.
FAKECANN_API aclnnStatus create_executor(ExecutorSpec spec, uint64_t *workspaceSize, aclOpExecutor **executor);
// Phase 2: checks executor, op name and workspace, launches the kernel through the exported
// rtKernelLaunchWithHandleV2 (fakecann/op_task.h; the runtime checks context and stream), and frees the executor
// unless it was made repeatable.
// `caller`: the return address of the aclnnX call (see fakecann/caller.h; for FAKE_CANN_LAUNCH_LOG).
FAKECANN_API aclnnStatus launch(const char *op, void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                aclrtStream stream, const void *caller = nullptr);

}  // namespace fakecann::nn

// Defines phase 2 of op X: aclnnX(workspace, size, executor, stream).
#define FAKECANN_ACLNN_PHASE2(X)                                                                              \
  extern "C" aclnnStatus aclnn##X(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,           \
                                  aclrtStream stream) {                                                       \
    return fakecann::nn::launch(#X, workspace, workspaceSize, executor, stream, __builtin_return_address(0)); \
  }
