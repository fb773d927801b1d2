// Device memory: the live allocations, so that raw kernels' argument blobs can be read (which 64-bit
// values are device pointers, and how far their data reaches).
//
// Every allocator a host reaches is hooked: aclrtMalloc and its variants (aclrtMallocAlign32, torch_npu's caching
// allocator; aclrtMallocCached; aclrtMallocWithCfg), the runtime's rtMalloc, and virtual memory (a range is device
// memory from aclrtMapMem to aclrtUnmapMem; aclrtMallocPhysical gives a handle, no address). In CANN 9.x libacl_rt.so
// is linked -Bsymbolic, so an ACL allocator's own rtMalloc never reaches a hook; in 8.x it does. Either way an
// allocation is recorded once, by the outermost hooked call (its size), and a free forgets it once: a hooked call
// made inside another one passes straight through (a table update fewer on the host's thread). Frees drop the
// record before the memory goes back, so that an allocation another thread gets at the same address is never dropped
// by a late erase. The shim's own allocations (under ReentryGuard) are not the host's and stay out.
#include "acl/acl.h"
#include "runtime/mem.h"
#include "shim/capture/capture_call.h"
#include "shim/capture/session.h"
#include "shim/device/device_allocations.h"
#include "shim/hooks/hook.h"

using namespace msprobe::shim;

namespace {

bool tracking() { return !ReentryGuard::active() && capture_enabled(); }

// True on a thread inside an interposed allocator's or free's real call: what it allocates or frees inside (an
// aclrtMallocAlign32's aclrtMalloc, an aclrtMalloc's rtMalloc) is the outer call's, recorded or forgotten by the outer
// hook.
thread_local bool t_in_call __attribute__((tls_model("initial-exec"))) = false;

struct InCall {
  bool was = t_in_call;
  InCall() { t_in_call = true; }
  ~InCall() { t_in_call = was; }
  InCall(const InCall &) = delete;
  InCall &operator=(const InCall &) = delete;
};

void allocated(void **devPtr, uint64_t size) {
  if (devPtr != nullptr && *devPtr != nullptr)
    guarded(Problem::DescriptorNotKept, [&] { device_allocations().insert(*devPtr, size); });
}

void freeing(void *devPtr) {
  if (devPtr != nullptr) guarded(Problem::DescriptorNotKept, [&] { device_allocations().erase(devPtr); });
}

}  // namespace

// The hooks of this family, one a line (shim/hooks/hook.h).
#define MSPROBE_MEMORY_HOOKS(X) \
  X(aclrtMalloc)                \
  X(aclrtMallocAlign32)         \
  X(aclrtMallocCached)          \
  X(aclrtMallocWithCfg)         \
  X(aclrtFree)                  \
  X(aclrtMapMem)                \
  X(aclrtUnmapMem)              \
  X(rtMalloc)                   \
  X(rtFree)
MSPROBE_HOOK_SLOTS(MSPROBE_MEMORY_HOOKS)

namespace {

// The allocators' shared body: `missing` when nothing defines `real`; a made allocation of `size` bytes at *devPtr is
// recorded by the outermost hooked call.
template <typename Real, typename Rc, typename... Args>
Rc allocate(Real real, Rc missing, void **devPtr, uint64_t size, Args... args) {
  if (!real) return missing;
  if (t_in_call) return real(args...);
  Rc rc;
  {
    InCall inside;
    rc = real(args...);
  }
  if (rc == 0 && tracking()) allocated(devPtr, size);  // ACL_SUCCESS, RT_ERROR_NONE
  return rc;
}

// The frees' shared body: the record of the allocation at devPtr goes before the memory does (by the outermost hook).
template <typename Real, typename Rc>
Rc release(Real real, Rc missing, void *devPtr) {
  if (!real) return missing;
  if (t_in_call) return real(devPtr);
  if (tracking()) freeing(devPtr);
  InCall inside;
  return real(devPtr);
}

}  // namespace

MSPROBE_HOOK aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy) {
  return allocate(MSPROBE_REAL(aclrtMalloc), aclError{ACL_ERROR_BAD_ALLOC}, devPtr, size, devPtr, size, policy);
}

MSPROBE_HOOK aclError aclrtMallocAlign32(void **devPtr, size_t size, aclrtMemMallocPolicy policy) {
  return allocate(MSPROBE_REAL(aclrtMallocAlign32), aclError{ACL_ERROR_BAD_ALLOC}, devPtr, size, devPtr, size, policy);
}

MSPROBE_HOOK aclError aclrtMallocCached(void **devPtr, size_t size, aclrtMemMallocPolicy policy) {
  return allocate(MSPROBE_REAL(aclrtMallocCached), aclError{ACL_ERROR_BAD_ALLOC}, devPtr, size, devPtr, size, policy);
}

MSPROBE_HOOK aclError aclrtMallocWithCfg(void **devPtr, size_t size, aclrtMemMallocPolicy policy,
                                         aclrtMallocConfig *cfg) {
  return allocate(MSPROBE_REAL(aclrtMallocWithCfg), aclError{ACL_ERROR_BAD_ALLOC}, devPtr, size, devPtr, size, policy,
                  cfg);
}

MSPROBE_HOOK aclError aclrtFree(void *devPtr) {
  return release(MSPROBE_REAL(aclrtFree), aclError{ACL_ERROR_INVALID_PARAM}, devPtr);
}

// A mapping makes [virPtr, virPtr + size) device memory until it is unmapped.
MSPROBE_HOOK aclError aclrtMapMem(void *virPtr, size_t size, size_t offset, aclrtDrvMemHandle handle, uint64_t flags) {
  return allocate(MSPROBE_REAL(aclrtMapMem), aclError{ACL_ERROR_INVALID_PARAM}, &virPtr, size, virPtr, size, offset,
                  handle, flags);
}

MSPROBE_HOOK aclError aclrtUnmapMem(void *virPtr) {
  return release(MSPROBE_REAL(aclrtUnmapMem), aclError{ACL_ERROR_INVALID_PARAM}, virPtr);
}

MSPROBE_HOOK rtError_t rtMalloc(void **devPtr, uint64_t size, rtMemType_t type, const uint16_t moduleId) {
  return allocate(MSPROBE_REAL(rtMalloc), rtError_t{ACL_ERROR_RT_MEMORY_ALLOCATION}, devPtr, size, devPtr, size, type,
                  moduleId);
}

MSPROBE_HOOK rtError_t rtFree(void *devPtr) {
  return release(MSPROBE_REAL(rtFree), rtError_t{ACL_ERROR_RT_PARAM_INVALID}, devPtr);
}

MSPROBE_HOOK_FAMILY(MSPROBE_MEMORY_HOOKS, Linked)
