// The runtime calls that end a device's life: everything captured so far must be on disk before the
// runtime goes away (our copies and events live in it). Also the shim's own C API.
#include "acl/acl.h"
#include "shim/capture/session.h"
#include "shim/hooks/hook.h"

using namespace msprobe::shim;

// The hooks of this family, one a line (shim/hooks/hook.h).
#define MSPROBE_RUNTIME_HOOKS(X) \
  X(aclFinalize)                 \
  X(aclrtResetDevice)
MSPROBE_HOOK_SLOTS(MSPROBE_RUNTIME_HOOKS)

MSPROBE_EXPORT aclError aclFinalize(void) {
  auto real = MSPROBE_REAL(aclFinalize);
  if (!real) return ACL_ERROR_UNINITIALIZE;
  if (!ReentryGuard::active() && capture_enabled()) {
    ReentryGuard guard;
    session().flush();
  }
  return real();
}

MSPROBE_EXPORT aclError aclrtResetDevice(int32_t deviceId) {
  auto real = MSPROBE_REAL(aclrtResetDevice);
  if (!real) return ACL_ERROR_INVALID_DEVICE;
  if (!ReentryGuard::active() && capture_enabled()) {
    ReentryGuard guard;
    session().flush();
  }
  return real(deviceId);
}

// The host marks the end of a training step (spec §4: "a step ends when the host calls msprobe_shim_step()").
MSPROBE_EXPORT void msprobe_shim_step(void) {
  if (capture_enabled()) session().end_step();
}

MSPROBE_HOOK_FAMILY(MSPROBE_RUNTIME_HOOKS)
