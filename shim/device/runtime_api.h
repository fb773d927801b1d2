// The ACL functions the shim calls itself, in one table: its own copies, events, allocations and the argument
// objects of its statistics kernels. Each is the real definition (never the shim's hook, so nothing the shim does
// for itself is captured), looked up once on first use; a test may put its own function in a slot first.
// Types are spelt with plain C types of the same ABI as the CANN headers (reference/cann_abi.md): an aclError is
// an int32_t, an aclrtMemcpyKind an int, handles are pointers.
#pragma once
#include <cstddef>
#include <cstdint>

#include "shim/base/symbols.h"

// X(name, function pointer type)
#define MSPROBE_RUNTIME_API(X)                                                                                         \
  /* memory, copies and events: staging, device statistics */                                                          \
  X(aclrtMalloc, int32_t (*)(void **, size_t, int32_t))                                                                \
  X(aclrtFree, int32_t (*)(void *))                                                                                    \
  X(aclrtMallocHost, int32_t (*)(void **, size_t))                                                                     \
  X(aclrtFreeHost, int32_t (*)(void *))                                                                                \
  X(aclrtMemcpy, int32_t (*)(void *, size_t, const void *, size_t, int32_t))                                           \
  X(aclrtMemcpyAsync, int32_t (*)(void *, size_t, const void *, size_t, int32_t, void *))                              \
  X(aclrtGetDevice, int32_t (*)(int32_t *))                                                                            \
  X(aclrtSetDevice, int32_t (*)(int32_t))                                                                              \
  X(aclrtCreateEvent, int32_t (*)(void **))                                                                            \
  X(aclrtRecordEvent, int32_t (*)(void *, void *))                                                                     \
  X(aclrtStreamWaitEvent, int32_t (*)(void *, void *))                                                                 \
  X(aclmdlRICaptureGetInfo, int32_t (*)(void *, int32_t *, void **))                                                   \
  X(aclrtSynchronizeEvent, int32_t (*)(void *))                                                                        \
  X(aclrtDestroyEvent, int32_t (*)(void *))                                                                            \
  /* aclnn argument objects: the device statistics' own kernels */                                                     \
  X(aclCreateTensor, void *(*)(const int64_t *, uint64_t, int32_t, const int64_t *, int64_t, int32_t, const int64_t *, \
                               uint64_t, void *))                                                                      \
  X(aclDestroyTensor, int32_t (*)(const void *))                                                                       \
  X(aclCreateIntArray, void *(*)(const int64_t *, uint64_t))                                                           \
  X(aclDestroyIntArray, int32_t (*)(const void *))                                                                     \
  X(aclCreateScalar, void *(*)(void *, int32_t))                                                                       \
  X(aclDestroyScalar, int32_t (*)(const void *))                                                                       \
  X(aclCreateTensorList, void *(*)(const void *const *, uint64_t))                                                     \
  X(aclDestroyTensorList, int32_t (*)(const void *))                                                                   \
  /* ... and their executors, made once per tensor layout and used again (aclSetAclOpExecutorRepeatable) */            \
  X(aclSetAclOpExecutorRepeatable, int32_t (*)(void *))                                                                \
  X(aclDestroyAclOpExecutor, int32_t (*)(void *))                                                                      \
  X(aclSetInputTensorAddr, int32_t (*)(void *, size_t, void *, void *))                                                \
  X(aclSetDynamicInputTensorAddr, int32_t (*)(void *, size_t, size_t, void *, void *))                                 \
  /* a tensor argument, described by the runtime on the thread of phase 2 */                                           \
  X(aclGetViewShape, int32_t (*)(const void *, int64_t **, uint64_t *))                                                \
  X(aclGetViewStrides, int32_t (*)(const void *, int64_t **, uint64_t *))                                              \
  X(aclGetViewOffset, int32_t (*)(const void *, int64_t *))                                                            \
  X(aclGetDataType, int32_t (*)(const void *, int32_t *))                                                              \
  X(aclGetFormat, int32_t (*)(const void *, int32_t *))                                                                \
  X(aclGetRawTensorAddr, int32_t (*)(const void *, void **))                                                           \
  /* CANN's data dump: graph-sunk kernels (shim/capture/graph_capture.h) */                                            \
  X(aclmdlInitDump, int32_t (*)())                                                                                     \
  X(aclmdlSetDump, int32_t (*)(const char *))                                                                          \
  X(aclmdlFinalizeDump, int32_t (*)())                                                                                 \
  X(acldumpRegCallback, int32_t (*)(int32_t(*)(const void *, int32_t), int32_t))                                       \
  X(acldumpUnregCallback, void (*)())                                                                                  \
  X(acldumpGetPath, const char *(*)(int32_t))                                                                          \
  X(aclrtSynchronizeDevice, int32_t (*)())                                                                             \
  /* aclop's tensor descriptors and data buffers, read to describe an aclop kernel's arguments */                      \
  X(aclGetTensorDescType, int32_t (*)(const void *))                                                                   \
  X(aclGetTensorDescFormat, int32_t (*)(const void *))                                                                 \
  X(aclGetTensorDescNumDims, size_t (*)(const void *))                                                                 \
  X(aclGetTensorDescDimV2, int32_t (*)(const void *, size_t, int64_t *))                                               \
  X(aclGetDataBufferAddr, void *(*)(const void *))                                                                     \
  /* HCCL communicators, described for the entries' comm object (HcclComm is a pointer, HcclResult an int) */          \
  X(HcclGetRankSize, int32_t (*)(void *, uint32_t *))                                                                  \
  X(HcclGetRankId, int32_t (*)(void *, uint32_t *))                                                                    \
  X(HcclGetCommName, int32_t (*)(void *, char *))                                                                      \
  /* the communicator an MC2 kernel names by its group (hcom.h) */                                                     \
  X(HcomGetCommHandleByGroup, int32_t (*)(const char *, void **))

namespace msprobe::shim::runtime {

// One outbound function: `runtime::aclrtMemcpyAsync.get()` is the real one, or nullptr when nothing defines it.
template <typename F>
struct Function {
  HookSlot slot;
  F get() { return reinterpret_cast<F>(slot.resolve()); }
};

#define MSPROBE_DECLARE_RUNTIME_FUNCTION(name, ...) extern Function<__VA_ARGS__> name;
MSPROBE_RUNTIME_API(MSPROBE_DECLARE_RUNTIME_FUNCTION)
#undef MSPROBE_DECLARE_RUNTIME_FUNCTION

}  // namespace msprobe::shim::runtime
