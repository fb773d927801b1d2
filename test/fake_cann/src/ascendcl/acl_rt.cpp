// libascendcl.so: aclInit/aclFinalize and the aclrt* API, implemented over libruntime's rt* calls as
// the real ACL is (aclrtStream is the rtStream_t value itself).
#include <atomic>
#include <cstdio>

#include "acl/acl.h"
#include "fakecann/caller.h"
#include "fakecann/device.h"
#include "fakecann/rt_internal.h"
#include "fakecann/stream.h"
#include "runtime/rt.h"

using namespace fakecann;

namespace {

std::atomic<bool> g_initialized{false};

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

}  // namespace

namespace fakecann::dump {
bool acl_initialized() { return g_initialized; }
}  // namespace fakecann::dump

extern "C" {

aclError aclInit(const char *configPath) {
  if (configPath != nullptr && configPath[0] != '\0') {
    FILE *f = std::fopen(configPath, "r");
    if (f == nullptr) return ACL_ERROR_INVALID_PARAM;  // real ACL: the config file must exist
    std::fclose(f);
  }
  bool expected = false;
  if (!g_initialized.compare_exchange_strong(expected, true)) return ACL_ERROR_REPEAT_INITIALIZE;
  return ACL_SUCCESS;
}

aclError aclFinalize(void) {
  bool expected = true;
  if (!g_initialized.compare_exchange_strong(expected, false)) return ACL_ERROR_UNINITIALIZE;
  synchronize_all_streams();
  return ACL_SUCCESS;
}

const char *aclGetRecentErrMsg(void) { return error_message(); }

aclError aclrtSetDevice(int32_t deviceId) {
  if (!g_initialized) return ACL_ERROR_UNINITIALIZE;
  return rtSetDevice(deviceId);
}

aclError aclrtGetDevice(int32_t *deviceId) { return rtGetDevice(deviceId); }
aclError aclrtResetDevice(int32_t deviceId) { return rtDeviceReset(deviceId); }

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

aclError aclrtCreateStream(aclrtStream *stream) { return rtStreamCreate(stream, RT_STREAM_PRIORITY_DEFAULT); }

aclError aclrtCreateStreamWithConfig(aclrtStream *stream, uint32_t priority, uint32_t /*flag*/) {
  return rtStreamCreate(stream, (int32_t)priority);
}

aclError aclrtDestroyStream(aclrtStream stream) {
  if (stream == nullptr) return ACL_ERROR_INVALID_PARAM;
  return rtStreamDestroy(stream);
}

aclError aclrtSynchronizeStream(aclrtStream stream) { return rtStreamSynchronize(stream); }

aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout) {
  Stream *s;
  if (int e = resolve_stream(stream, &s)) return e;
  return stream_synchronize(s, timeout < 0 ? -1 : timeout);
}

aclError aclrtCreateEvent(aclrtEvent *event) { return rtEventCreate(event); }
aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream) { return rtEventRecord(event, stream); }
aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event) { return rtStreamWaitEvent(stream, event); }
aclError aclrtSynchronizeEvent(aclrtEvent event) { return rtEventSynchronize(event); }
aclError aclrtDestroyEvent(aclrtEvent event) { return rtEventDestroy(event); }

aclError aclrtQueryEvent(aclrtEvent event, int32_t *status) {
  if (status == nullptr || !event_valid(static_cast<Event *>(event))) return ACL_ERROR_INVALID_PARAM;
  *status = event_completed(static_cast<Event *>(event)) ? 1 : 0;  // ACL_EVENT_STATUS_COMPLETE = 1
  return ACL_SUCCESS;
}

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

aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count) {
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
