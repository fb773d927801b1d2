// Device memory: the live allocations, so that raw kernels' argument blobs can be read (which 64-bit
// values are device pointers, and how far their data reaches).
//
// aclrtMalloc calls rtMalloc inside, as do ACL's other allocators (aclrtMallocAlign32, aclrtMallocCached:
// not interposed, their inner rtMalloc records them): both hooks see one aclrtMalloc, and recording the
// same base twice is harmless (the outer call's size wins). Frees drop the record before
// the memory goes back, so that an allocation another thread gets at the same address is never dropped
// by a late erase. The shim's own allocations (under ReentryGuard) are not the host's and stay out.
#include "acl/acl.h"
#include "runtime/mem.h"
#include "shim/capture/session.h"
#include "shim/device/device_allocations.h"
#include "shim/hooks/hook.h"

using namespace msprobe::shim;

namespace {

bool tracking() { return !ReentryGuard::active() && capture_enabled(); }

void allocated(void **devPtr, uint64_t size) {
  if (devPtr != nullptr && *devPtr != nullptr) device_allocations().insert(*devPtr, size);
}

void freeing(void *devPtr) {
  if (devPtr != nullptr) device_allocations().erase(devPtr);
}

}  // namespace

// The hooks of this family, one a line (shim/hooks/hook.h).
#define MSPROBE_MEMORY_HOOKS(X) \
  X(aclrtMalloc)                \
  X(aclrtFree)                  \
  X(rtMalloc)                   \
  X(rtFree)
MSPROBE_HOOK_SLOTS(MSPROBE_MEMORY_HOOKS)

MSPROBE_EXPORT aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy) {
  auto real = MSPROBE_REAL(aclrtMalloc);
  if (!real) return ACL_ERROR_BAD_ALLOC;
  aclError rc = real(devPtr, size, policy);
  if (rc == ACL_SUCCESS && tracking()) allocated(devPtr, size);
  return rc;
}

MSPROBE_EXPORT aclError aclrtFree(void *devPtr) {
  auto real = MSPROBE_REAL(aclrtFree);
  if (!real) return ACL_ERROR_INVALID_PARAM;
  if (tracking()) freeing(devPtr);
  return real(devPtr);
}

MSPROBE_EXPORT rtError_t rtMalloc(void **devPtr, uint64_t size, rtMemType_t type, const uint16_t moduleId) {
  auto real = MSPROBE_REAL(rtMalloc);
  if (!real) return ACL_ERROR_RT_MEMORY_ALLOCATION;
  rtError_t rc = real(devPtr, size, type, moduleId);
  if (rc == RT_ERROR_NONE && tracking()) allocated(devPtr, size);
  return rc;
}

MSPROBE_EXPORT rtError_t rtFree(void *devPtr) {
  auto real = MSPROBE_REAL(rtFree);
  if (!real) return ACL_ERROR_RT_PARAM_INVALID;
  if (tracking()) freeing(devPtr);
  return real(devPtr);
}

MSPROBE_HOOK_FAMILY(MSPROBE_MEMORY_HOOKS)
