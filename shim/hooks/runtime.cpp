// The runtime calls that end a device's life: everything captured so far must be on disk before the
// runtime goes away (our copies and events live in it). Also the shim's own C API.
#include "acl/acl.h"
#include "shim/capture/graph_capture.h"
#include "shim/capture/session.h"
#include "shim/hooks/hook.h"

using namespace msprobe::shim;

// The hooks of this family, one a line (shim/hooks/hook.h).
#define MSPROBE_RUNTIME_HOOKS(X) \
  X(aclFinalize)                 \
  X(aclrtResetDevice)
MSPROBE_HOOK_SLOTS(MSPROBE_RUNTIME_HOOKS)

namespace {

// Both calls: the dump flushed (and the flight ring written or let go), then `real` (or `missing` when nothing defines
// it).
template <typename Real, typename... Args>
aclError flush_then(const char *call, Real real, aclError missing, Args... args) {
  if (!real) return missing;
  if (!ReentryGuard::active() && capture_enabled()) {
    if (GraphCapture *g = active_graph_capture()) g->finish(/*drain=*/true);  // before the runtime goes
    ReentryGuard guard;
    session().device_ending(call);
  }
  return real(args...);
}

}  // namespace

MSPROBE_HOOK aclError aclFinalize(void) {
  return flush_then("aclFinalize", MSPROBE_REAL(aclFinalize), ACL_ERROR_UNINITIALIZE);
}

MSPROBE_HOOK aclError aclrtResetDevice(int32_t deviceId) {
  return flush_then("aclrtResetDevice", MSPROBE_REAL(aclrtResetDevice), ACL_ERROR_INVALID_DEVICE, deviceId);
}

// The host marks the end of a training step (spec §4: "a step ends when the host calls msprobe_shim_step()").
MSPROBE_EXPORT void msprobe_shim_step(void) {
  if (capture_enabled()) session().end_step();
}

MSPROBE_HOOK_FAMILY(MSPROBE_RUNTIME_HOOKS, Linked)
