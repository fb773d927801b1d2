// ACL runtime: floating-point overflow detection (acl device.cpp, stream.cpp over runtime api_impl.cc and
// api_error.cc): the saturation mode is the process's (fakecann/soc.h; SATURATION until set; only SATURATION and INFNAN
// can be set; the fp8 conversions follow it); a stream's detection switch is 0 or 1 (the ACL's check); the overflow
// status is each context's 64 bytes of device memory (OVERFLOW_OUTPUT_SIZE), which aclrtGetOverflowStatus copies to the caller's device memory
// and aclrtResetOverflowStatus clears, both as tasks on the stream (not on a capturing one). The stand-in's kernels
// never record an overflow into it, so it reads zero.
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>

#include "acl/acl.h"
#include "fakecann/device.h"
#include "fakecann/rt_internal.h"
#include "fakecann/soc.h"
#include "fakecann/stream.h"
#include "fakecann/tensor_io.h"

using namespace fakecann;

namespace {

constexpr size_t kStatusBytes = 64;
std::mutex g_mu;
std::map<Context *, void *> *g_status = new std::map<Context *, void *>;  // contexts are never freed

// The current context's status buffer, made (zeroed) when first asked for; nullptr without a context.
void *context_status() {
  Context *c = current_context();
  if (c == nullptr) return nullptr;
  std::lock_guard<std::mutex> lk(g_mu);
  void *&buf = (*g_status)[c];
  if (buf == nullptr) {
    buf = device_alloc_high(kStatusBytes);
    if (buf != nullptr) std::memset(device_bytes(buf, kStatusBytes), 0, kStatusBytes);
  }
  return buf;
}


}  // namespace

extern "C" {

aclError aclrtSetDeviceSatMode(aclrtFloatOverflowMode mode) {
  if (mode != ACL_RT_OVERFLOW_MODE_SATURATION && mode != ACL_RT_OVERFLOW_MODE_INFNAN) {
    set_error_message("aclrtSetDeviceSatMode: mode must be SATURATION or INFNAN");
    return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  }
  set_saturation_mode(mode);
  return ACL_SUCCESS;
}

aclError aclrtGetDeviceSatMode(aclrtFloatOverflowMode *mode) {
  if (mode == nullptr) return ACL_ERROR_INVALID_PARAM;
  *mode = static_cast<aclrtFloatOverflowMode>(saturation_mode());
  return ACL_SUCCESS;
}

aclError aclrtSetStreamOverflowSwitch(aclrtStream stream, uint32_t flag) {
  if (flag > 1) return ACL_ERROR_INVALID_PARAM;
  Stream *s;
  if (aclError e = context_stream(stream, &s)) return e;
  stream_set_overflow_switch(s, flag);
  return ACL_SUCCESS;
}

aclError aclrtGetStreamOverflowSwitch(aclrtStream stream, uint32_t *flag) {
  if (flag == nullptr) return ACL_ERROR_INVALID_PARAM;
  Stream *s;
  if (aclError e = context_stream(stream, &s)) return e;
  *flag = stream_overflow_switch(s);
  return ACL_SUCCESS;
}

aclError aclrtGetOverflowStatus(void *outputAddr, size_t outputSize, aclrtStream stream) {
  if (outputAddr == nullptr) return ACL_ERROR_INVALID_PARAM;
  if (outputSize != kStatusBytes) {
    set_error_message("aclrtGetOverflowStatus: only 64 bytes of status are supported");
    return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  }
  Stream *s;
  if (aclError e = context_stream(stream, &s)) return e;
  if (stream_capturing(s)) return rt_error(ACL_ERROR_RT_STREAM_CAPTURED);
  if (device_host_alias(outputAddr, kStatusBytes) == nullptr) {
    set_error_message("aclrtGetOverflowStatus: outputAddr is not 64 bytes of device memory");
    return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  }
  void *status = context_status();
  return enqueue_device_task(
      stream, [=] { std::memcpy(device_bytes(outputAddr, kStatusBytes), device_bytes(status, kStatusBytes), 64); },
      "OVERFLOW_STATUS");
}

aclError aclrtResetOverflowStatus(aclrtStream stream) {
  Stream *s;
  if (aclError e = context_stream(stream, &s)) return e;
  void *status = context_status();
  return enqueue_device_task(
      stream, [=] { std::memset(device_bytes(status, kStatusBytes), 0, kStatusBytes); }, "OVERFLOW_STATUS_CLEAN");
}

}  // extern "C"
