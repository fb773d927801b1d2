// ACL runtime: the aclrt* API of devices, contexts, streams and memory, implemented over libruntime's rt* calls as
// the real ACL is (aclrtStream is the rtStream_t value itself; runtime src/acl/aclrt_impl/{device,context,stream}.cpp).
// Events are acl_rt_event.cpp's, aclInit/aclFinalize acl_init.cpp's.
#include <cstdio>

#include "acl/acl.h"
#include "fakecann/caller.h"
#include "fakecann/device.h"
#include "fakecann/rt_internal.h"
#include "fakecann/stream.h"
#include "runtime/rt.h"

using namespace fakecann;

namespace {

rtMemcpyKind_t to_rt_kind(aclrtMemcpyKind kind, bool *ok) {
  *ok = true;
  switch (kind) {
    case ACL_MEMCPY_HOST_TO_HOST: return RT_MEMCPY_HOST_TO_HOST;
    case ACL_MEMCPY_HOST_TO_DEVICE:
    case ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE: return RT_MEMCPY_HOST_TO_DEVICE;
    case ACL_MEMCPY_DEVICE_TO_HOST: return RT_MEMCPY_DEVICE_TO_HOST;
    case ACL_MEMCPY_DEVICE_TO_DEVICE:
    case ACL_MEMCPY_INNER_DEVICE_TO_DEVICE:
    case ACL_MEMCPY_INTER_DEVICE_TO_DEVICE: return RT_MEMCPY_DEVICE_TO_DEVICE;
    case ACL_MEMCPY_DEFAULT: return RT_MEMCPY_DEFAULT;
    default: *ok = false; return RT_MEMCPY_RESERVED;
  }
}

// A stream the host names: the current context is needed, NULL is its default stream.
aclError host_stream(aclrtStream stream, Stream **s) {
  if (int e = require_context()) return e;
  return resolve_stream(stream, s);
}

// The stand-in plays an Atlas A2 device (Ascend910B1): 24 AI Cores (cube), 48 vector cores.
constexpr uint32_t kCubeCores = 24, kVectorCores = 48;

}  // namespace

extern "C" {

// Needs no aclInit: CANN's aclrtSetDevice is rtSetDevice (device.cpp), which makes the device's default context.
aclError aclrtSetDevice(int32_t deviceId) { return rtSetDevice(deviceId); }
aclError aclrtGetDevice(int32_t *deviceId) { return rtGetDevice(deviceId); }
aclError aclrtResetDevice(int32_t deviceId) { return rtDeviceReset(deviceId); }
aclError aclrtResetDeviceForce(int32_t deviceId) { return device_reset(deviceId, true); }

aclError aclrtGetDeviceCount(uint32_t *count) {
  if (count == nullptr) return ACL_ERROR_INVALID_PARAM;
  int32_t n = 0;
  if (aclError e = rtGetDeviceCount(&n)) return e;
  *count = (uint32_t)n;
  return ACL_SUCCESS;
}

aclError aclrtGetRunMode(aclrtRunMode *runMode) {
  if (runMode == nullptr) return ACL_ERROR_INVALID_PARAM;
  *runMode = ACL_HOST;
  return ACL_SUCCESS;
}

aclError aclrtSynchronizeDevice(void) { return rtDeviceSynchronize(); }

// ---- contexts ----

aclError aclrtCreateContext(aclrtContext *context, int32_t deviceId) {
  if (context == nullptr) return ACL_ERROR_INVALID_PARAM;
  Context *c = context_create(deviceId);
  if (c == nullptr) return rt_error(ACL_ERROR_RT_INVALID_DEVICEID);
  set_current_context(c);  // the new context is the thread's (05_context_management.md)
  *context = c;
  return ACL_SUCCESS;
}

aclError aclrtDestroyContext(aclrtContext context) {
  if (context == nullptr) return ACL_ERROR_INVALID_PARAM;
  auto *c = static_cast<Context *>(context);
  if (!context_live(c)) return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  synchronize_all_streams();
  // Only a context made by aclrtCreateContext can go; a device's default one goes with aclrtResetDevice.
  return context_destroy(c) ? ACL_SUCCESS : rt_error(ACL_ERROR_RT_PARAM_INVALID);
}

aclError aclrtSetCurrentContext(aclrtContext context) {
  if (context == nullptr) return ACL_ERROR_INVALID_PARAM;
  auto *c = static_cast<Context *>(context);
  if (!context_live(c)) return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  set_current_context(c);
  return ACL_SUCCESS;
}

aclError aclrtGetCurrentContext(aclrtContext *context) {
  if (context == nullptr) return ACL_ERROR_INVALID_PARAM;
  Context *c = current_context();
  if (c == nullptr) return rt_error(ACL_ERROR_RT_CONTEXT_NULL);
  *context = c;
  return ACL_SUCCESS;
}

aclError aclrtCtxGetCurrentDefaultStream(aclrtStream *stream) {
  if (stream == nullptr) return ACL_ERROR_INVALID_PARAM;
  Context *c = current_context();
  if (c == nullptr) return rt_error(ACL_ERROR_RT_CONTEXT_NULL);
  *stream = context_default_stream(c);
  return ACL_SUCCESS;
}

// Without a limit of its own the thread may use every core of the device.
aclError aclrtGetResInCurrentThread(aclrtDevResLimitType type, uint32_t *value) {
  if (value == nullptr) return ACL_ERROR_INVALID_PARAM;
  if (int e = require_context()) return e;
  switch (type) {
    case ACL_RT_DEV_RES_CUBE_CORE: *value = kCubeCores; return ACL_SUCCESS;
    case ACL_RT_DEV_RES_VECTOR_CORE: *value = kVectorCores; return ACL_SUCCESS;
    default: return ACL_ERROR_INVALID_PARAM;
  }
}

// ---- streams ----

aclError aclrtCreateStream(aclrtStream *stream) { return rtStreamCreate(stream, RT_STREAM_PRIORITY_DEFAULT); }

aclError aclrtCreateStreamWithConfig(aclrtStream *stream, uint32_t priority, uint32_t flag) {
  if (stream == nullptr) return ACL_ERROR_INVALID_PARAM;
  if (int e = require_context()) return e;
  *stream = stream_create(flag, priority);
  return ACL_SUCCESS;
}

aclrtStreamConfigHandle *aclrtCreateStreamConfigHandle(void) { return new aclrtStreamConfigHandle{}; }

aclError aclrtDestroyStreamConfigHandle(aclrtStreamConfigHandle *handle) {
  if (handle == nullptr) return ACL_ERROR_INVALID_PARAM;
  delete handle;
  return ACL_SUCCESS;
}

aclError aclrtSetStreamConfigOpt(aclrtStreamConfigHandle *handle, aclrtStreamConfigAttr attr, const void *attrValue,
                                 size_t valueSize) {
  if (handle == nullptr || attrValue == nullptr) return ACL_ERROR_INVALID_PARAM;
  switch (attr) {
    case ACL_RT_STREAM_WORK_ADDR_PTR:
      if (valueSize != sizeof(void *)) return ACL_ERROR_INVALID_PARAM;
      handle->workptr = *static_cast<void *const *>(attrValue);
      return ACL_SUCCESS;
    case ACL_RT_STREAM_WORK_SIZE:
      if (valueSize != sizeof(size_t)) return ACL_ERROR_INVALID_PARAM;
      handle->workSize = *static_cast<const size_t *>(attrValue);
      return ACL_SUCCESS;
    case ACL_RT_STREAM_FLAG:
      if (valueSize != sizeof(uint32_t)) return ACL_ERROR_INVALID_PARAM;
      handle->flag = *static_cast<const uint32_t *>(attrValue);
      return ACL_SUCCESS;
    case ACL_RT_STREAM_PRIORITY:
      if (valueSize != sizeof(uint32_t)) return ACL_ERROR_INVALID_PARAM;
      handle->priority = *static_cast<const uint32_t *>(attrValue);
      return ACL_SUCCESS;
    default: return ACL_ERROR_INVALID_PARAM;
  }
}

aclError aclrtCreateStreamV2(aclrtStream *stream, const aclrtStreamConfigHandle *handle) {
  if (stream == nullptr || handle == nullptr) return ACL_ERROR_INVALID_PARAM;
  return aclrtCreateStreamWithConfig(stream, handle->priority, (uint32_t)handle->flag);
}

aclError aclrtDestroyStream(aclrtStream stream) {
  if (stream == nullptr) return ACL_ERROR_INVALID_PARAM;
  return rtStreamDestroy(stream);
}

// The tasks not yet started are dropped, not run (rtStreamDestroyForce).
aclError aclrtDestroyStreamForce(aclrtStream stream) {
  if (stream == nullptr) return ACL_ERROR_INVALID_PARAM;
  return stream_destroy_checked(static_cast<Stream *>(stream), true);
}

aclError aclrtSynchronizeStream(aclrtStream stream) { return rtStreamSynchronize(stream); }

aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout) {
  Stream *s;
  if (int e = resolve_stream(stream, &s)) return e;
  return stream_synchronize(s, timeout < 0 ? -1 : timeout);
}

aclError aclrtStreamGetId(aclrtStream stream, int32_t *streamId) {
  if (streamId == nullptr) return ACL_ERROR_INVALID_PARAM;
  Stream *s;
  if (aclError e = host_stream(stream, &s)) return e;
  *streamId = stream_id(s);
  return ACL_SUCCESS;
}

aclError aclrtStreamGetPriority(aclrtStream stream, uint32_t *priority) {
  if (priority == nullptr) return ACL_ERROR_INVALID_PARAM;
  Stream *s;
  if (aclError e = host_stream(stream, &s)) return e;
  *priority = stream_priority(s);
  return ACL_SUCCESS;
}

aclError aclrtStreamGetFlags(aclrtStream stream, uint32_t *flags) {
  if (flags == nullptr) return ACL_ERROR_INVALID_PARAM;
  Stream *s;
  if (aclError e = host_stream(stream, &s)) return e;
  *flags = stream_flags(s);
  return ACL_SUCCESS;
}

// ACL_CONTINUE_ON_FAILURE / ACL_STOP_ON_FAILURE; stop cannot go back to continue (api_impl.cc StreamSetMode).
aclError aclrtSetStreamFailureMode(aclrtStream stream, uint64_t mode) {
  Stream *s;
  if (aclError e = host_stream(stream, &s)) return e;
  return stream_set_failure_mode(s, mode);
}

aclError aclrtLaunchHostFunc(aclrtStream stream, aclrtHostFunc fn, void *args) {
  if (fn == nullptr) return ACL_ERROR_INVALID_PARAM;
  Stream *s;
  if (aclError e = host_stream(stream, &s)) return e;
  return stream_launch_host_func(s, fn, args);
}

// ---- memory ----

aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy /*policy*/) {
  if (devPtr == nullptr || size == 0) return ACL_ERROR_INVALID_PARAM;
  return rtMalloc(devPtr, size, RT_MEMORY_HBM, 0);
}

aclError aclrtFree(void *devPtr) { return rtFree(devPtr); }
aclError aclrtMallocHost(void **hostPtr, size_t size) { return rtMallocHost(hostPtr, size, 0); }
aclError aclrtFreeHost(void *hostPtr) { return rtFreeHost(hostPtr); }

aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind) {
  CallerScope caller(__builtin_return_address(0));
  bool ok;
  rtMemcpyKind_t k = to_rt_kind(kind, &ok);
  if (!ok) return ACL_ERROR_INVALID_PARAM;
  return rtMemcpy(dst, destMax, src, count, k);
}

aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind,
                          aclrtStream stream) {
  CallerScope caller(__builtin_return_address(0));
  bool ok;
  rtMemcpyKind_t k = to_rt_kind(kind, &ok);
  if (!ok) return ACL_ERROR_INVALID_PARAM;
  return rtMemcpyAsync(dst, destMax, src, count, k, stream);
}

// memory.cpp aclrtMemsetImpl: nothing to set is a success before the null check.
aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count) {
  if (count == 0) return ACL_SUCCESS;
  if (devPtr == nullptr) return ACL_ERROR_INVALID_PARAM;
  return rtMemset(devPtr, maxCount, (uint32_t)value, count);
}

aclError aclrtMemsetAsync(void *devPtr, size_t maxCount, int32_t value, size_t count, aclrtStream stream) {
  return rtMemsetAsync(devPtr, maxCount, (uint32_t)value, count, stream);
}

aclError aclrtGetMemInfo(aclrtMemAttr /*attr*/, size_t *free, size_t *total) {
  if (free == nullptr || total == nullptr) return ACL_ERROR_INVALID_PARAM;
  *total = device_total_bytes();
  *free = *total - device_used_bytes();
  return ACL_SUCCESS;
}

}  // extern "C"
