// Device memory: the live allocations, so that raw kernels' argument blobs can be read (which 64-bit
// values are device pointers, and how far their data reaches).
//
// aclrtMalloc calls rtMalloc inside, and ACL's other allocators (aclrtMallocAlign32, aclrtMallocCached,
// aclrtMallocWithCfg) call aclrtMalloc or the runtime: an allocation is recorded once, by the outermost hook (its
// size), and likewise aclrtFree's inner rtFree forgets nothing more (a table update fewer on the host's thread for
// each). The other allocators are hooked themselves because their inner calls need not reach a hook: CANN 9's libacl_rt
// is linked -Bsymbolic and keeps its runtime calls inside libruntime (test_shim_layouts.py). Frees drop the record
// before the memory goes back, so that an allocation another thread gets at the same address is never dropped by a late
// erase. The shim's own allocations (under ReentryGuard) are not the host's and stay out.
#include "acl/acl.h"
#include "runtime/mem.h"
#include "shim/capture/capture_call.h"
#include "shim/capture/session.h"
#include "shim/device/device_allocations.h"
#include "shim/hooks/hook.h"

using namespace msprobe::shim;

namespace {

bool tracking() { return !ReentryGuard::active() && capture_enabled(); }

// True on a thread inside an interposed ACL allocator's real call (aclrtMalloc and the others, aclrtFree): the
// aclrtMalloc, rtMalloc or rtFree it makes is the outer call's allocation, recorded or forgotten by the outer hook.
thread_local bool t_in_acl_call __attribute__((tls_model("initial-exec"))) = false;

struct InAclCall {
  bool was = t_in_acl_call;
  InAclCall() { t_in_acl_call = true; }
  ~InAclCall() { t_in_acl_call = was; }
  InAclCall(const InAclCall &) = delete;
  InAclCall &operator=(const InAclCall &) = delete;
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
  X(rtMalloc)                   \
  X(rtFree)
MSPROBE_HOOK_SLOTS(MSPROBE_MEMORY_HOOKS)

namespace {

// The allocators' shared body: `missing` when nothing defines `real`; a made allocation is recorded, by the outermost
// hook (`acl`: an ACL allocator, whose inner aclrtMalloc or rtMalloc records nothing).
template <bool acl, typename Real, typename Rc, typename Size, typename... Rest>
Rc allocate(Real real, Rc missing, void **devPtr, Size size, Rest... rest) {
  if (!real) return missing;
  if (t_in_acl_call) return real(devPtr, size, rest...);
  Rc rc;
  if constexpr (acl) {
    InAclCall inside;
    rc = real(devPtr, size, rest...);
  } else {
    rc = real(devPtr, size, rest...);
  }
  if (rc == 0 && tracking()) allocated(devPtr, size);  // ACL_SUCCESS, RT_ERROR_NONE
  return rc;
}

// The frees' shared body: the record goes before the memory does (by the outermost hook, as above).
template <bool acl, typename Real, typename Rc>
Rc release(Real real, Rc missing, void *devPtr) {
  if (!real) return missing;
  if (!acl && t_in_acl_call) return real(devPtr);
  if (tracking()) freeing(devPtr);
  if constexpr (acl) {
    InAclCall inside;
    return real(devPtr);
  } else {
    return real(devPtr);
  }
}

}  // namespace

MSPROBE_HOOK aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy) {
  return allocate<true>(MSPROBE_REAL(aclrtMalloc), aclError{ACL_ERROR_BAD_ALLOC}, devPtr, size, policy);
}

MSPROBE_HOOK aclError aclrtMallocAlign32(void **devPtr, size_t size, aclrtMemMallocPolicy policy) {
  return allocate<true>(MSPROBE_REAL(aclrtMallocAlign32), aclError{ACL_ERROR_BAD_ALLOC}, devPtr, size, policy);
}

MSPROBE_HOOK aclError aclrtMallocCached(void **devPtr, size_t size, aclrtMemMallocPolicy policy) {
  return allocate<true>(MSPROBE_REAL(aclrtMallocCached), aclError{ACL_ERROR_BAD_ALLOC}, devPtr, size, policy);
}

MSPROBE_HOOK aclError aclrtMallocWithCfg(void **devPtr, size_t size, aclrtMemMallocPolicy policy,
                                         aclrtMallocConfig *cfg) {
  return allocate<true>(MSPROBE_REAL(aclrtMallocWithCfg), aclError{ACL_ERROR_BAD_ALLOC}, devPtr, size, policy, cfg);
}

MSPROBE_HOOK aclError aclrtFree(void *devPtr) {
  return release<true>(MSPROBE_REAL(aclrtFree), aclError{ACL_ERROR_INVALID_PARAM}, devPtr);
}

MSPROBE_HOOK rtError_t rtMalloc(void **devPtr, uint64_t size, rtMemType_t type, const uint16_t moduleId) {
  return allocate<false>(MSPROBE_REAL(rtMalloc), rtError_t{ACL_ERROR_RT_MEMORY_ALLOCATION}, devPtr, size, type,
                         moduleId);
}

MSPROBE_HOOK rtError_t rtFree(void *devPtr) {
  return release<false>(MSPROBE_REAL(rtFree), rtError_t{ACL_ERROR_RT_PARAM_INVALID}, devPtr);
}

MSPROBE_HOOK_FAMILY(MSPROBE_MEMORY_HOOKS, Linked)
