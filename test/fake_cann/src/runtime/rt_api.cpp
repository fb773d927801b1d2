// libruntime.so: device, memory, stream and event calls of the rt* API (runtime/{dev,mem,stream}.h).
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "acl/acl_base.h"
#include "fakecann/call_counters.h"
#include "fakecann/caller.h"
#include "fakecann/device.h"
#include "fakecann/rt_internal.h"
#include "fakecann/stream.h"
#include "fakecann/tensor_io.h"
#include "runtime/rt.h"
#include "stream_impl.h"

namespace fakecann {

namespace {
std::mutex g_host_mu;
std::map<const char *, uint64_t> *g_host_allocs = new std::map<const char *, uint64_t>;  // pinned: base -> bytes

// Are [p, p+bytes) inside one pinned host allocation (rtMallocHost / aclrtMallocHost)?
bool is_pinned_host(const void *p, uint64_t bytes = 1) {
  const char *c = static_cast<const char *>(p);
  std::lock_guard<std::mutex> lk(g_host_mu);
  auto it = g_host_allocs->upper_bound(c);
  if (it == g_host_allocs->begin()) return false;
  --it;
  return c + bytes <= it->first + it->second;
}
}  // namespace

int require_context() {
  if (current_device() < 0) {
    set_error_message("no current device on this thread: call aclrtSetDevice/rtSetDevice first");
    return rt_error(ACL_ERROR_RT_CONTEXT_NULL);
  }
  return RT_ERROR_NONE;
}

int resolve_stream(void *handle, Stream **out) {
  bool ok = false;
  *out = stream_resolve(handle, &ok);
  if (!ok) {
    set_error_message("invalid or destroyed stream handle");
    return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  }
  return RT_ERROR_NONE;
}

namespace {

enum class Dir { HostToHost, HostToDevice, DeviceToHost, DeviceToDevice, Invalid };

Dir direction(rtMemcpyKind_t kind, const void *dst, const void *src) {
  bool dd = in_device_range(dst), sd = in_device_range(src);
  Dir inferred = sd ? (dd ? Dir::DeviceToDevice : Dir::DeviceToHost) : (dd ? Dir::HostToDevice : Dir::HostToHost);
  Dir asked;
  switch (kind) {
    case RT_MEMCPY_HOST_TO_HOST: asked = Dir::HostToHost; break;
    case RT_MEMCPY_HOST_TO_DEVICE:
    case RT_MEMCPY_HOST_TO_DEVICE_EX: asked = Dir::HostToDevice; break;
    case RT_MEMCPY_DEVICE_TO_HOST:
    case RT_MEMCPY_DEVICE_TO_HOST_EX: asked = Dir::DeviceToHost; break;
    case RT_MEMCPY_DEVICE_TO_DEVICE:
    case RT_MEMCPY_ADDR_DEVICE_TO_DEVICE: asked = Dir::DeviceToDevice; break;
    case RT_MEMCPY_DEFAULT: return inferred;
    default: return Dir::Invalid;
  }
  return asked == inferred ? asked : Dir::Invalid;
}

// Performs the copy now. Throws KernelError if a device range is not inside a live allocation.
void copy_now(void *dst, const void *src, uint64_t cnt, Dir d, bool preloaded) {
  if (cnt == 0) return;
  void *to = (d == Dir::HostToDevice || d == Dir::DeviceToDevice) ? device_bytes(dst, cnt) : dst;
  const void *from = (d == Dir::DeviceToHost || d == Dir::DeviceToDevice) ? device_bytes(src, cnt) : src;
  std::memmove(to, from, cnt);
  CopyCounters &c = copy_counters();
  switch (d) {  // totals, and the part a preloaded tool asked for
    case Dir::HostToDevice: c.host_to_device += cnt, c.preloaded_host_to_device += preloaded ? cnt : 0; break;
    case Dir::DeviceToHost: c.device_to_host += cnt, c.preloaded_device_to_host += preloaded ? cnt : 0; break;
    case Dir::DeviceToDevice: c.device_to_device += cnt, c.preloaded_device_to_device += preloaded ? cnt : 0; break;
    default: c.host_to_host += cnt, c.preloaded_host_to_host += preloaded ? cnt : 0; break;
  }
}

int check_copy(void *dst, uint64_t destMax, const void *src, uint64_t cnt, rtMemcpyKind_t kind, Dir *d) {
  if (dst == nullptr || src == nullptr) return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  if (cnt > destMax) {
    set_error_message("memcpy count exceeds destMax");
    return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  }
  *d = direction(kind, dst, src);
  if (*d == Dir::Invalid) {
    set_error_message("memcpy kind does not match the source and destination memory");
    return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  }
  bool dev_dst = (*d == Dir::HostToDevice || *d == Dir::DeviceToDevice);
  bool dev_src = (*d == Dir::DeviceToHost || *d == Dir::DeviceToDevice);
  if ((dev_dst && device_host_alias(dst, cnt) == nullptr) || (dev_src && device_host_alias(src, cnt) == nullptr)) {
    set_error_message("memcpy range is not inside a live device allocation");
    return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  }
  return RT_ERROR_NONE;
}

}  // namespace

int memcpy_impl(void *dst, uint64_t destMax, const void *src, uint64_t cnt, rtMemcpyKind_t kind, void *stream,
                bool async) {
  count_call(CallKind::Copy);
  Dir d = Dir::Invalid;
  if (int e = check_copy(dst, destMax, src, cnt, kind, &d)) return e;
  if (d != Dir::HostToHost)
    if (int e = require_context()) return e;
  const bool preloaded = CallerScope::preloaded();
  // Unsafe while a capture forbids it: a synchronous copy, an asynchronous one from pageable host memory.
  const bool pageable_host = (d == Dir::HostToDevice && !is_pinned_host(src)) ||
                             (d == Dir::DeviceToHost && !is_pinned_host(dst)) || d == Dir::HostToHost;
  if (!async || pageable_host)
    if (int e = capture_forbids_unsafe_call()) return e;
  if (!async) {
    try {
      copy_now(dst, src, cnt, d, preloaded);
    } catch (const KernelError &) {
      return rt_error(ACL_ERROR_RT_PARAM_INVALID);
    }
    return RT_ERROR_NONE;
  }
  Stream *s;
  if (int e = resolve_stream(stream, &s)) return e;
  // The host side is read (or written) when the copy executes, not now: the host buffer must stay
  // valid until the stream is synchronized, as on the real device.
  return stream_enqueue(
      s, [=] { copy_now(dst, src, cnt, d, preloaded); }, "memcpy");
}

int memset_impl(void *ptr, uint64_t destMax, uint32_t val, uint64_t cnt, void *stream, bool async) {
  if (ptr == nullptr || cnt > destMax) return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  if (int e = require_context()) return e;
  // Host memory the runtime allocated is set too (api_ref 11-03: "Host or Device, decided by the address").
  const bool host = is_pinned_host(ptr, cnt);
  if (!host && device_host_alias(ptr, cnt) == nullptr) return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  auto run = [=] { std::memset(host ? ptr : device_bytes(ptr, cnt), (int)(val & 0xff), cnt); };
  if (!async) {
    if (int e = capture_forbids_unsafe_call()) return e;
    run();
    return RT_ERROR_NONE;
  }
  Stream *s;
  if (int e = resolve_stream(stream, &s)) return e;
  return stream_enqueue(s, run, "memset");
}

}  // namespace fakecann

using namespace fakecann;

extern "C" {

rtError_t rtSetDevice(int32_t devId) {
  if (devId < 0 || devId >= device_count()) return rt_error(ACL_ERROR_RT_INVALID_DEVICEID);
  device_retain(devId);
  set_current_device(devId);
  return RT_ERROR_NONE;
}

rtError_t rtGetDevice(int32_t *devId) {
  if (devId == nullptr) return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  if (int e = require_context()) return e;
  *devId = current_device();
  return RT_ERROR_NONE;
}

rtError_t rtGetDeviceCount(int32_t *cnt) {
  if (cnt == nullptr) return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  *cnt = device_count();
  return RT_ERROR_NONE;
}

rtError_t rtDeviceReset(int32_t devId) { return device_reset(devId, false); }

rtError_t rtDeviceSynchronize(void) {
  if (int e = require_context()) return e;
  if (any_stream_capturing()) {  // context.cc Synchronize: a capturing stream cannot be waited on
    set_error_message("aclrtSynchronizeDevice while a stream is capturing");
    return rt_error(ACL_ERROR_RT_STREAM_CAPTURED);
  }
  return synchronize_all_streams();
}

rtError_t rtMalloc(void **devPtr, uint64_t size, rtMemType_t /*type*/, const uint16_t /*moduleId*/) {
  if (devPtr == nullptr || size == 0) return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  if (int e = require_context()) return e;
  void *p = device_alloc(size);
  if (p == nullptr) return rt_error(ACL_ERROR_RT_MEMORY_ALLOCATION);
  *devPtr = p;
  return RT_ERROR_NONE;
}

rtError_t rtFree(void *devPtr) {
  if (devPtr == nullptr) return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  if (!device_free(devPtr)) {
    set_error_message("rtFree: not the base of a live device allocation");
    return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  }
  return RT_ERROR_NONE;
}

rtError_t rtMallocHost(void **hostPtr, uint64_t size, const uint16_t /*moduleId*/) {
  if (hostPtr == nullptr || size == 0) return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  void *p = std::aligned_alloc(64, (size + 63) / 64 * 64);
  if (p == nullptr) return rt_error(ACL_ERROR_RT_MEMORY_ALLOCATION);
  std::lock_guard<std::mutex> lk(g_host_mu);
  g_host_allocs->emplace(static_cast<const char *>(p), size);
  *hostPtr = p;
  return RT_ERROR_NONE;
}

rtError_t rtFreeHost(void *hostPtr) {
  {
    std::lock_guard<std::mutex> lk(g_host_mu);
    if (hostPtr == nullptr || g_host_allocs->erase(static_cast<const char *>(hostPtr)) == 0)
      return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  }
  std::free(hostPtr);
  return RT_ERROR_NONE;
}

rtError_t rtMemcpy(void *dst, uint64_t destMax, const void *src, uint64_t cnt, rtMemcpyKind_t kind) {
  CallerScope caller(__builtin_return_address(0));
  return memcpy_impl(dst, destMax, src, cnt, kind, nullptr, false);
}

rtError_t rtMemcpyAsync(void *dst, uint64_t destMax, const void *src, uint64_t cnt, rtMemcpyKind_t kind,
                        rtStream_t stm) {
  CallerScope caller(__builtin_return_address(0));
  return memcpy_impl(dst, destMax, src, cnt, kind, stm, true);
}

rtError_t rtMemset(void *devPtr, uint64_t destMax, uint32_t val, uint64_t cnt) {
  return memset_impl(devPtr, destMax, val, cnt, nullptr, false);
}

rtError_t rtMemsetAsync(void *ptr, uint64_t destMax, uint32_t val, uint64_t cnt, rtStream_t stm) {
  return memset_impl(ptr, destMax, val, cnt, stm, true);
}

rtError_t rtStreamCreate(rtStream_t *stm, int32_t priority) {
  if (stm == nullptr) return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  if (int e = require_context()) return e;
  *stm = stream_create(0, (uint32_t)priority);
  return RT_ERROR_NONE;
}

rtError_t rtStreamDestroy(rtStream_t stm) {
  return stream_destroy_checked(static_cast<Stream *>(stm));
}

rtError_t rtStreamSynchronize(rtStream_t stm) {
  Stream *s;
  if (int e = resolve_stream(stm, &s)) return e;
  return stream_synchronize(s);
}

rtError_t rtGetStreamId(rtStream_t stm, int32_t *streamId) {
  Stream *s;
  if (streamId == nullptr) return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  if (int e = resolve_stream(stm, &s)) return e;
  *streamId = stream_id(s);
  return RT_ERROR_NONE;
}

// An event belongs to the current context: none, no event (api_impl.cc EventCreate: RT_ERROR_CONTEXT_NULL).
rtError_t rtEventCreate(rtEvent_t *evt) {
  if (evt == nullptr) return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  if (int e = require_context()) return e;
  *evt = event_create();
  return RT_ERROR_NONE;
}

rtError_t rtEventRecord(rtEvent_t evt, rtStream_t stm) {
  count_call(CallKind::EventRecord);
  Stream *s;
  if (!event_valid(static_cast<Event *>(evt))) return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  if (int e = resolve_stream(stm, &s)) return e;
  return event_record(static_cast<Event *>(evt), s);
}

rtError_t rtEventSynchronize(rtEvent_t evt) {
  count_call(CallKind::EventWait);
  if (!event_valid(static_cast<Event *>(evt))) return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  if (int e = event_capture_check(static_cast<Event *>(evt))) return e;
  event_synchronize(static_cast<Event *>(evt));
  return RT_ERROR_NONE;
}

rtError_t rtEventDestroy(rtEvent_t evt) {
  return event_destroy(static_cast<Event *>(evt)) ? RT_ERROR_NONE : ACL_ERROR_RT_PARAM_INVALID;
}

// Inside a capture, a wait on an event made with ACL_EVENT_EXTERNAL waits for the event's record at each replay.
rtError_t rtStreamWaitEvent(rtStream_t stm, rtEvent_t evt) {
  count_call(CallKind::EventWait);
  Stream *s;
  auto *e = static_cast<Event *>(evt);
  if (!event_valid(e)) return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  if (int r = resolve_stream(stm, &s)) return r;
  return stream_wait_event(s, e, stream_capturing(s) && (event_flags(e) & 0x20u) != 0);  // ACL_EVENT_EXTERNAL
}

// Stand-in only (not CANN): bytes moved across the host link since process start, for tests and
// benchmarks that check how much a tool copies. Never called by the shim.
__attribute__((visibility("default"))) void fakeCannGetCopyCounters(uint64_t *h2d, uint64_t *d2h, uint64_t *d2d) {
  CopyCounters &c = copy_counters();
  if (h2d) *h2d = c.host_to_device.load();
  if (d2h) *d2h = c.device_to_host.load();
  if (d2d) *d2d = c.device_to_device.load();
}

}  // extern "C"

namespace fakecann {

// Waits for the device's work, then releases one aclrtSetDevice reference of its default context (all of them when
// forced): the last lets the default context go on this thread.
int device_reset(int32_t dev, bool force) {
  if (dev < 0 || dev >= device_count()) return rt_error(ACL_ERROR_RT_INVALID_DEVICEID);
  synchronize_all_streams();
  device_release(dev, force);
  return RT_ERROR_NONE;
}

int launch_task(void *stream, std::function<void()> kernel, const char *what) {
  if (int e = require_context()) return e;
  Stream *s;
  if (int e = resolve_stream(stream, &s)) return e;
  // Collectives and whole models run once (they hold per-run state): the stand-in does not capture them.
  if (stream_capturing(s)) {
    set_error_message(std::string(what) + " on a capturing stream is not captured by the stand-in");
    return rt_error(ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT);
  }
  return stream_enqueue(s, std::move(kernel), what);
}

int enqueue_device_task(void *stream, std::function<void()> task, const char *what) {
  if (int e = require_context()) return e;
  Stream *s;
  if (int e = resolve_stream(stream, &s)) return e;
  return stream_enqueue(s, std::move(task), what);
}

}  // namespace fakecann
