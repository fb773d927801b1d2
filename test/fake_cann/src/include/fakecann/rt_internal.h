// Runtime helpers shared by libruntime's own files and by libascendcl (which wraps rt* like the real
// ACL does). Kernels from libopapi, libascendcl (aclop) and libhccl are enqueued with launch_task(),
// the stand-in's private path to the device (the real op libraries also launch through internal
// runtime entry points, not through the public rtKernelLaunch).
#pragma once
#include <cstdint>
#include <functional>

#include "fakecann/export.h"
#include "fakecann/stream.h"
#include "runtime/mem.h"

#define ACL_ERROR_RT_CONTEXT_NULL 107002

namespace fakecann {

FAKECANN_API int require_context();
FAKECANN_API int resolve_stream(void *handle, Stream **out);
FAKECANN_API int memcpy_impl(void *dst, uint64_t destMax, const void *src, uint64_t cnt, rtMemcpyKind_t kind,
                             void *stream, bool async);
FAKECANN_API int memset_impl(void *ptr, uint64_t destMax, uint32_t val, uint64_t cnt, void *stream, bool async);

// Checks the context and stream, then enqueues `kernel` on it. Returns an RT error code.
FAKECANN_API int launch_task(void *stream, std::function<void()> kernel, const char *what);

}  // namespace fakecann
