// ACL runtime: the device allocations beside aclrtMalloc that torch_npu and CANN's samples make
// (docs/zh/api_ref/11-01_device_memory_malloc_and_free.md, 11-04_virtual_memory_management.md), all device memory the
// host cannot read, as aclrtMalloc's:
// - aclrtMallocAlign32, aclrtMallocCached, aclrtMallocWithCfg: an allocation as aclrtMalloc's (the configuration's
//   module and device ids are accepted; the stand-in has one arena for every device).
// - aclrtMallocPhysical gives a handle of physical memory, no address; aclrtReserveMemAddress a range of device
//   addresses nothing backs; aclrtMapMem backs [virPtr, virPtr+size) with a handle's memory (then copies and kernels
//   reach it), aclrtUnmapMem takes it back (the handle keeps the bytes, seen again where it is mapped next);
//   aclrtReleaseMemAddress and aclrtFreePhysical end them (not while mapped). Granularity 2 MiB (1 GiB for the HUGE1G
//   attributes).
// - peer access between devices (below).
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "acl/acl.h"
#include "fakecann/device.h"
#include "fakecann/rt_internal.h"
#include "fakecann/stream.h"
#include "fakecann/tensor_io.h"
#include "runtime/rt.h"

using namespace fakecann;

namespace {

constexpr size_t kGranularity = 2u << 20, kGranularity1G = 1u << 30;

// A physical memory handle: where it is mapped (null: nowhere) and, while unmapped, the bytes it held.
struct Physical {
  size_t size = 0;
  void *mapped_at = nullptr;
  std::vector<char> bytes;  // empty until it was first unmapped
};

std::mutex g_mu;
std::map<const void *, std::unique_ptr<Physical>> *g_physical = new std::map<const void *, std::unique_ptr<Physical>>;
std::map<const void *, Physical *> *g_mappings = new std::map<const void *, Physical *>;  // virPtr -> handle

aclError refuse(aclError code, const std::string &why) {
  set_error_message(why);
  return code / 1000 % 100 == 7 ? rt_error(code) : code;  // x07yyy: a runtime error, the thread's last one
}

Physical *find_physical(aclrtDrvMemHandle handle) {
  auto it = g_physical->find(handle);
  return it == g_physical->end() ? nullptr : it->second.get();
}

bool huge_1g(aclrtMemAttr attr) {
  return attr == ACL_HBM_MEM_HUGE1G || attr == ACL_HBM_MEM_P2P_HUGE1G || attr == ACL_MEM_HUGE1G ||
         attr == ACL_MEM_P2P_HUGE1G;
}

}  // namespace

extern "C" {

aclError aclrtMallocAlign32(void **devPtr, size_t size, aclrtMemMallocPolicy policy) {
  return aclrtMalloc(devPtr, size, policy);
}

aclError aclrtMallocCached(void **devPtr, size_t size, aclrtMemMallocPolicy policy) {
  return aclrtMalloc(devPtr, size, policy);
}

aclError aclrtMallocWithCfg(void **devPtr, size_t size, aclrtMemMallocPolicy policy, aclrtMallocConfig *cfg) {
  if (cfg != nullptr && cfg->numAttrs != 0 && cfg->attrs == nullptr)
    return refuse(ACL_ERROR_INVALID_PARAM, "aclrtMallocWithCfg: numAttrs without attrs");
  if (cfg != nullptr)
    for (size_t i = 0; i < cfg->numAttrs; ++i)
      if (cfg->attrs[i].attr == ACL_RT_MEM_ATTR_DEVICE_ID && (int32_t)cfg->attrs[i].value.deviceId >= device_count())
        return refuse(ACL_ERROR_RT_INVALID_DEVICEID, "aclrtMallocWithCfg: no such device");
  return aclrtMalloc(devPtr, size, policy);
}

aclError aclrtMemGetAllocationGranularity(aclrtPhysicalMemProp *prop, aclrtMemGranularityOptions option,
                                          size_t *granularity) {
  if (prop == nullptr || granularity == nullptr) return ACL_ERROR_INVALID_PARAM;
  if (option != ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM && option != ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED)
    return ACL_ERROR_INVALID_PARAM;
  *granularity = huge_1g(prop->memAttr) ? kGranularity1G : kGranularity;
  return ACL_SUCCESS;
}

aclError aclrtMallocPhysical(aclrtDrvMemHandle *handle, size_t size, const aclrtPhysicalMemProp *prop,
                             uint64_t flags) {
  if (handle == nullptr || prop == nullptr || size == 0 || flags != 0) return ACL_ERROR_INVALID_PARAM;
  if (int e = require_context()) return e;
  if (prop->location.type != ACL_MEM_LOCATION_TYPE_DEVICE)
    return refuse(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, "aclrtMallocPhysical: the stand-in has device memory only");
  if ((int32_t)prop->location.id >= device_count()) return rt_error(ACL_ERROR_RT_INVALID_DEVICEID);
  auto p = std::make_unique<Physical>();
  p->size = size;
  std::lock_guard<std::mutex> lk(g_mu);
  *handle = p.get();
  (*g_physical)[p.get()] = std::move(p);
  return ACL_SUCCESS;
}

aclError aclrtFreePhysical(aclrtDrvMemHandle handle) {
  std::lock_guard<std::mutex> lk(g_mu);
  Physical *p = find_physical(handle);
  if (p == nullptr) return ACL_ERROR_INVALID_PARAM;
  if (p->mapped_at != nullptr) return refuse(ACL_ERROR_RT_PARAM_INVALID, "aclrtFreePhysical: the memory is mapped");
  g_physical->erase(handle);
  return ACL_SUCCESS;
}

// alignment is reserved (0); expectPtr, when given, must be free device address space.
aclError aclrtReserveMemAddress(void **virPtr, size_t size, size_t alignment, void *expectPtr, uint64_t flags) {
  if (virPtr == nullptr || size == 0 || alignment != 0 || flags != 0) return ACL_ERROR_INVALID_PARAM;
  if (int e = require_context()) return e;
  void *p = device_reserve(size, kGranularity);
  if (p == nullptr) return rt_error(ACL_ERROR_RT_MEMORY_ALLOCATION);
  if (expectPtr != nullptr && expectPtr != p) {  // the stand-in grants the first fit only
    device_release(p);
    return refuse(ACL_ERROR_RT_PARAM_INVALID, "aclrtReserveMemAddress: expectPtr is not free address space");
  }
  *virPtr = p;
  return ACL_SUCCESS;
}

aclError aclrtReleaseMemAddress(void *virPtr) {
  if (virPtr == nullptr) return ACL_ERROR_INVALID_PARAM;
  return device_release(virPtr) ? ACL_SUCCESS
                                : refuse(ACL_ERROR_RT_PARAM_INVALID, "aclrtReleaseMemAddress: no such reservation, or "
                                                                     "still mapped");
}

// offset and flags are reserved (0); the handle's memory backs [virPtr, virPtr+size), size at most the handle's.
aclError aclrtMapMem(void *virPtr, size_t size, size_t offset, aclrtDrvMemHandle handle, uint64_t flags) {
  if (virPtr == nullptr || size == 0 || offset != 0 || flags != 0) return ACL_ERROR_INVALID_PARAM;
  std::lock_guard<std::mutex> lk(g_mu);
  Physical *p = find_physical(handle);
  if (p == nullptr || size > p->size) return refuse(ACL_ERROR_INVALID_PARAM, "aclrtMapMem: bad handle or size");
  if (p->mapped_at != nullptr) return refuse(ACL_ERROR_RT_PARAM_INVALID, "aclrtMapMem: the handle is mapped already");
  if (!device_map(virPtr, size))
    return refuse(ACL_ERROR_RT_PARAM_INVALID, "aclrtMapMem: the range is not free inside one reservation");
  char *to = static_cast<char *>(device_bytes(virPtr, size));
  if (p->bytes.empty())
    std::memset(to, 0, size);
  else
    std::memcpy(to, p->bytes.data(), std::min(size, p->bytes.size()));
  p->mapped_at = virPtr;
  (*g_mappings)[virPtr] = p;
  return ACL_SUCCESS;
}

aclError aclrtUnmapMem(void *virPtr) {
  if (virPtr == nullptr) return ACL_ERROR_INVALID_PARAM;
  std::lock_guard<std::mutex> lk(g_mu);
  auto it = g_mappings->find(virPtr);
  if (it == g_mappings->end()) return refuse(ACL_ERROR_RT_PARAM_INVALID, "aclrtUnmapMem: not a mapping");
  Physical *p = it->second;
  uint64_t size = 0;
  const char *from = static_cast<const char *>(device_host_alias(virPtr, 1));
  if (from != nullptr) {  // the handle keeps what the mapping held
    device_allocation_of(virPtr, nullptr, &size);
    p->bytes.assign(from, from + size);
  }
  device_unmap(virPtr, &size);
  p->mapped_at = nullptr;
  g_mappings->erase(it);
  return ACL_SUCCESS;
}

// memory.cpp aclrtDeviceCanAccessPeer / EnablePeerAccess / DisablePeerAccess: a device and itself is the ACL's
// refusal, an unknown peer the runtime's (rtGetDevicePhyIdByIndex); enabling needs a current device and flags 0. Every
// pair of the stand-in's devices can reach each other (one server's HCCS). Enabling changes nothing: its devices share
// one arena, so a copy between two of them works whether peer access is enabled or not (CANN's driver decides what a
// copy without it does; its source does not say).
aclError aclrtDeviceCanAccessPeer(int32_t *canAccessPeer, int32_t deviceId, int32_t peerDeviceId) {
  if (canAccessPeer == nullptr || deviceId == peerDeviceId)
    return refuse(ACL_ERROR_INVALID_PARAM, "aclrtDeviceCanAccessPeer: deviceId cannot be equal to peerDeviceId");
  if (peerDeviceId < 0 || peerDeviceId >= device_count() || deviceId < 0 || deviceId >= device_count())
    return refuse(ACL_ERROR_RT_INVALID_DEVICEID, "aclrtDeviceCanAccessPeer: no such device");
  *canAccessPeer = 1;
  return ACL_SUCCESS;
}

aclError aclrtDeviceEnablePeerAccess(int32_t peerDeviceId, uint32_t flags) {
  if (flags != 0) return refuse(ACL_ERROR_FEATURE_UNSUPPORTED, "aclrtDeviceEnablePeerAccess: flags must be 0");
  const int32_t dev = current_device();
  if (dev < 0) return refuse(ACL_ERROR_RT_CONTEXT_NULL, "aclrtDeviceEnablePeerAccess: no current device");
  if (dev == peerDeviceId)
    return refuse(ACL_ERROR_INVALID_PARAM, "aclrtDeviceEnablePeerAccess: the peer is the current device");
  if (peerDeviceId < 0 || peerDeviceId >= device_count())
    return refuse(ACL_ERROR_RT_INVALID_DEVICEID, "aclrtDeviceEnablePeerAccess: no such device");
  return ACL_SUCCESS;
}

aclError aclrtDeviceDisablePeerAccess(int32_t peerDeviceId) {
  const int32_t dev = current_device();
  if (dev < 0) return refuse(ACL_ERROR_RT_CONTEXT_NULL, "aclrtDeviceDisablePeerAccess: no current device");
  if (dev == peerDeviceId)
    return refuse(ACL_ERROR_INVALID_PARAM, "aclrtDeviceDisablePeerAccess: the peer is the current device");
  if (peerDeviceId < 0 || peerDeviceId >= device_count())
    return refuse(ACL_ERROR_RT_INVALID_DEVICEID, "aclrtDeviceDisablePeerAccess: no such device");
  return ACL_SUCCESS;
}

}  // extern "C"
