// The runtime calls that begin and end a device's or ACL's life: everything captured so far must be on disk before the
// runtime goes away (our copies and events live in it). Also the shim's own C API.
//
// ACL and devices are reference counted (runtime src/acl/aclrt_impl/acl.cpp): aclInit adds a reference (a repeated one
// answers ACL_ERROR_REPEAT_INITIALIZE), aclFinalizeReference drops one and finalizes with the last, aclFinalize
// finalizes whatever the count; aclrtSetDevice adds a reference to its device (shim/hooks/devices.cpp),
// aclrtResetDevice drops one and resets with the last, aclrtResetDeviceForce resets whatever the count. The shim keeps
// the same counts, so that it flushes (and drains CANN's data dump, which would otherwise be off for the models still
// loaded) only before the call that really ends them; a count it never saw grow (the device opened before the shim
// looked) ends at the first call.
//
// aclInit(config) may turn CANN's data dump on from the file's "dump" section: the program's dump then stays the
// program's (shim/capture/graph_capture.h).
#include <cstdint>

#include "acl/acl.h"
#include "shim/capture/graph_capture.h"
#include "shim/capture/session.h"
#include "shim/hooks/hook.h"
#include "shim/hooks/references.h"

using namespace msprobe::shim;

// The hooks of this family, one a line (shim/hooks/hook.h).
#define MSPROBE_RUNTIME_HOOKS(X) \
  X(aclInit)                     \
  X(aclFinalize)                 \
  X(aclFinalizeReference)        \
  X(aclrtResetDevice)            \
  X(aclrtResetDeviceForce)
MSPROBE_HOOK_SLOTS(MSPROBE_RUNTIME_HOOKS)

namespace {

constexpr aclError kRepeatInitialize = 100002;  // ACL_ERROR_REPEAT_INITIALIZE: a reference all the same
constexpr int32_t kAcl = kAclReference;

bool hosts_call() { return !ReentryGuard::active(); }

// Before a call that ends the runtime or a device: the dump flushed (and the flight ring written or let go).
void ending(const char *call) {
  if (!capture_enabled()) return;
  if (GraphCapture *g = active_graph_capture()) g->finish(/*drain=*/true);  // before the runtime goes
  ReentryGuard guard;
  session().device_ending(call);
}

// `real` (or `missing` when nothing defines it), after the flush when `ends`; `counted(rc)` keeps the count after it.
template <typename Real, typename Counted, typename... Args>
aclError end_then(const char *call, bool ends, Real real, aclError missing, Counted counted, Args... args) {
  if (!real) return missing;
  if (!hosts_call()) return real(args...);
  if (ends) ending(call);
  const aclError rc = real(args...);
  if (rc == ACL_SUCCESS) counted();
  return rc;
}

}  // namespace

MSPROBE_HOOK aclError aclInit(const char *configPath) {
  auto real = MSPROBE_REAL(aclInit);
  if (!real) return ACL_ERROR_UNINITIALIZE;
  const aclError rc = real(configPath);
  if (!hosts_call()) return rc;
  if (rc == kRepeatInitialize) references().add(kAcl);
  if (rc != ACL_SUCCESS) return rc;
  references().set(kAcl, 1);
  // Capture starts here only for a program whose config turned the dump on: the shim must know before a model loads.
  if (acl_init_turned_dump_on(configPath) && capture_enabled())
    if (GraphCapture *g = active_graph_capture()) g->host_acl_init(configPath);
  return rc;
}

MSPROBE_HOOK aclError aclFinalize(void) {
  return end_then("aclFinalize", true, MSPROBE_REAL(aclFinalize), ACL_ERROR_UNINITIALIZE,
                  [] { references().set(kAcl, 0); });
}

MSPROBE_HOOK aclError aclFinalizeReference(uint64_t *refCount) {
  return end_then(
      "aclFinalizeReference", references().last(kAcl), MSPROBE_REAL(aclFinalizeReference), ACL_ERROR_UNINITIALIZE,
      [] { references().drop(kAcl); }, refCount);
}

MSPROBE_HOOK aclError aclrtResetDevice(int32_t deviceId) {
  return end_then(
      "aclrtResetDevice", references().last(deviceId), MSPROBE_REAL(aclrtResetDevice), ACL_ERROR_INVALID_DEVICE,
      [deviceId] { references().drop(deviceId); }, deviceId);
}

MSPROBE_HOOK aclError aclrtResetDeviceForce(int32_t deviceId) {
  return end_then(
      "aclrtResetDeviceForce", true, MSPROBE_REAL(aclrtResetDeviceForce), ACL_ERROR_INVALID_DEVICE,
      [deviceId] { references().set(deviceId, 0); }, deviceId);
}

// The host marks the end of a training step (spec §4: "a step ends when the host calls msprobe_shim_step()").
MSPROBE_EXPORT void msprobe_shim_step(void) {
  if (capture_enabled()) session().end_step();
}

MSPROBE_HOOK_FAMILY(MSPROBE_RUNTIME_HOOKS, Linked)
