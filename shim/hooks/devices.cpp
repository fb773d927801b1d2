// Which device each thread works on: a process that drives several devices (a thread per device, as CANN's own HCCL
// samples run) writes one rank folder per rank, each thread's kernels in its device's (shim/capture/rank_map.h).
// aclrtSetDevice and aclrtSetCurrentContext change the calling thread's device; the hooks tell the session, after the
// runtime accepted the call. aclrtSetDevice also adds a reference to the device (shim/hooks/references.h).
#include "acl/acl.h"
#include "shim/capture/capture_call.h"
#include "shim/capture/session.h"
#include "shim/device/runtime_api.h"
#include "shim/hooks/hook.h"
#include "shim/hooks/references.h"

using namespace msprobe::shim;

// The hooks of this family, one a line (shim/hooks/hook.h).
#define MSPROBE_DEVICE_HOOKS(X) \
  X(aclrtSetDevice)             \
  X(aclrtSetCurrentContext)
MSPROBE_HOOK_SLOTS(MSPROBE_DEVICE_HOOKS)

namespace {

void thread_device(int32_t device) {
  if (ReentryGuard::active() || !capture_enabled()) return;
  guarded(Problem::DescriptorNotKept, [&] { session().thread_device(device); });
}

}  // namespace

MSPROBE_HOOK aclError aclrtSetDevice(int32_t deviceId) {
  auto real = MSPROBE_REAL(aclrtSetDevice);
  if (!real) return ACL_ERROR_INVALID_DEVICE;
  const aclError rc = real(deviceId);
  if (rc != ACL_SUCCESS) return rc;
  if (!ReentryGuard::active()) references().add(deviceId);  // the reset that really ends it flushes first
  thread_device(deviceId);
  return rc;
}

MSPROBE_HOOK aclError aclrtSetCurrentContext(aclrtContext context) {
  auto real = MSPROBE_REAL(aclrtSetCurrentContext);
  if (!real) return ACL_ERROR_INVALID_PARAM;
  const aclError rc = real(context);
  if (rc != ACL_SUCCESS || ReentryGuard::active()) return rc;
  // The context's device, as the runtime now says it is the thread's.
  if (auto get = runtime::aclrtGetDevice.get()) {
    int32_t device = -1;
    bool known = false;
    {
      ReentryGuard guard;
      known = get(&device) == ACL_SUCCESS;
    }
    if (known) thread_device(device);
  }
  return rc;
}

MSPROBE_HOOK_FAMILY(MSPROBE_DEVICE_HOOKS, Linked)
