// Runtime helpers shared by libruntime's own files and by libascendcl (which wraps rt* like the real
// ACL does), and libhccl's private path to the device, launch_task(). aclnn and aclop kernels do not use
// it: they launch through the exported rtRegisterAllKernel + rtKernelLaunchWithHandleV2, as real op
// libraries do (fakecann/op_task.h). Real HCCL's collective tasks are not rtKernelLaunch kernels, so
// libhccl keeps enqueueing its tasks here.
#pragma once
#include <cstdint>
#include <functional>

#include "acl/acl_base.h"
#include "fakecann/export.h"
#include "fakecann/stream.h"
#include "runtime/kernel.h"
#include "runtime/mem.h"


namespace fakecann {

FAKECANN_API int require_context();
// rtDeviceReset (force = false) and aclrtResetDeviceForce (true). Returns an RT error code.
FAKECANN_API int device_reset(int32_t dev, bool force);
FAKECANN_API int resolve_stream(void *handle, Stream **out);
// The stream an ACL entry point is given (null: the context's default), after its check that the thread has a context.
inline int context_stream(void *handle, Stream **out) {
  if (int e = require_context()) return e;
  return resolve_stream(handle, out);
}
FAKECANN_API int memcpy_impl(void *dst, uint64_t destMax, const void *src, uint64_t cnt, rtMemcpyKind_t kind,
                             void *stream, bool async);
FAKECANN_API int memset_impl(void *ptr, uint64_t destMax, uint32_t val, uint64_t cnt, void *stream, bool async);

// The binaries and functions of aclrtBinaryLoad* / aclrtBinaryGetFunction (the stand-in's ELF of device_kernels/): a
// binary is one rtRegisterAllKernel would take; a function is one of its kernels by symbol name. launch_function
// launches a function as rtKernelLaunch* launch their kernels (the args rules of rtArgsEx_t), without going through
// those exported entry points (CANN's aclrtLaunchKernel* reach the runtime by their own path). RT error codes.
FAKECANN_API int binary_load(const void *data, uint64_t length, uint32_t magic, void **handle);
FAKECANN_API int binary_unload(void *handle);
FAKECANN_API int binary_function(void *handle, const char *name, void **func);
FAKECANN_API int launch_function(void *func, uint32_t blockDim, const rtArgsEx_t &args, void *stream,
                                 const char *what);

// Checks the context and stream, then enqueues `kernel` on it. Returns an RT error code. For libhccl, and for
// libascendcl's model execution (one task per aclmdlExecute*, as rtModelExecute; no per-kernel launch).
FAKECANN_API int launch_task(void *stream, std::function<void()> kernel, const char *what);
// The same for a task a capture records like any other (a value write or wait, a reduce, a random number task): it
// must be runnable at every replay. Returns an RT error code.
FAKECANN_API int enqueue_device_task(void *stream, std::function<void()> task, const char *what);

}  // namespace fakecann
