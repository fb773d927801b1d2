// Streams, events, waits and synchronizations: the edges of the race check's happens-before (MSPROBE_RACECHECK,
// races/clocks.h, docs/races.md). Nothing is captured here: each call is made as the host made it, and when the check
// is on its edge is added (a record or a wait when the call succeeded; a synchronization's clock is taken before the
// call and learnt by the host once it returned success). The shim's own calls (ReentryGuard) are not the host's.
#include "acl/acl.h"
#include "races/clocks.h"
#include "shim/capture/capture_call.h"
#include "shim/capture/session.h"
#include "shim/hooks/activation.h"
#include "shim/hooks/hook.h"

using namespace msprobe::shim;
using msprobe::races::StreamClocks;
using msprobe::races::VectorClock;

// The hooks of this family, one a line (shim/hooks/hook.h).
#define MSPROBE_STREAM_HOOKS(X)        \
  X(aclrtRecordEvent)                  \
  X(aclrtStreamWaitEvent)              \
  X(aclrtSynchronizeStream)            \
  X(aclrtSynchronizeStreamWithTimeout) \
  X(aclrtSynchronizeEvent)             \
  X(aclrtSynchronizeDevice)            \
  X(aclrtQueryEvent)                   \
  X(aclrtQueryEventStatus)
MSPROBE_HOOK_SLOTS(MSPROBE_STREAM_HOOKS)

namespace {

// The check's clocks when the host's call is one it orders by, else null.
StreamClocks *clocks() {
  if (ReentryGuard::active() || !capture_enabled()) return nullptr;
  return session().stream_clocks();
}

// A call made as the host made it; `edge(clocks)` after it when it succeeded and the check is on.
template <typename Real, typename Edge, typename... Args>
aclError with_edge(Real real, Edge &&edge, Args... args) {
  if (!real) return ACL_ERROR_FEATURE_UNSUPPORTED;
  const aclError rc = real(args...);
  if (rc == ACL_SUCCESS)
    if (StreamClocks *c = clocks()) guarded(Problem::DescriptorNotKept, [&] { edge(*c); });
  return rc;
}

// A synchronization: what `taken(clocks)` says before the call, the host's own once it returned success.
template <typename Real, typename Taken, typename... Args>
aclError synchronize(Real real, Taken &&taken, Args... args) {
  if (!real) return ACL_ERROR_FEATURE_UNSUPPORTED;
  StreamClocks *c = clocks();
  VectorClock before;
  if (c) guarded(Problem::DescriptorNotKept, [&] { before = taken(*c); });
  const aclError rc = real(args...);
  if (rc == ACL_SUCCESS && c) guarded(Problem::DescriptorNotKept, [&] { c->host_learns(before); });
  return rc;
}

// A query of an event: the host learns the event's clock (taken before the call) when the answer is "complete", as
// a caching allocator that polls the events of record_stream relies on.
template <typename Real, typename Status>
aclError query(Real real, aclrtEvent event, Status *status, Status complete) {
  if (!real) return ACL_ERROR_FEATURE_UNSUPPORTED;
  StreamClocks *c = clocks();
  VectorClock before;
  if (c) guarded(Problem::DescriptorNotKept, [&] { before = c->of_event(event); });
  const aclError rc = real(event, status);
  if (rc == ACL_SUCCESS && c && status != nullptr && *status == complete)
    guarded(Problem::DescriptorNotKept, [&] { c->host_learns(before); });
  return rc;
}

}  // namespace

MSPROBE_HOOK aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream) {
  return with_edge(
      MSPROBE_REAL(aclrtRecordEvent), [&](StreamClocks &c) { c.record(event, stream); }, event, stream);
}

MSPROBE_HOOK aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event) {
  return with_edge(
      MSPROBE_REAL(aclrtStreamWaitEvent), [&](StreamClocks &c) { c.wait(stream, event); }, stream, event);
}

MSPROBE_HOOK aclError aclrtSynchronizeStream(aclrtStream stream) {
  return synchronize(
      MSPROBE_REAL(aclrtSynchronizeStream), [&](StreamClocks &c) { return c.of_stream(stream); }, stream);
}

MSPROBE_HOOK aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout) {
  return synchronize(
      MSPROBE_REAL(aclrtSynchronizeStreamWithTimeout), [&](StreamClocks &c) { return c.of_stream(stream); }, stream,
      timeout);
}

MSPROBE_HOOK aclError aclrtSynchronizeEvent(aclrtEvent event) {
  return synchronize(
      MSPROBE_REAL(aclrtSynchronizeEvent), [&](StreamClocks &c) { return c.of_event(event); }, event);
}

MSPROBE_HOOK aclError aclrtSynchronizeDevice(void) {
  return synchronize(MSPROBE_REAL(aclrtSynchronizeDevice), [](StreamClocks &c) { return c.of_device(); });
}

MSPROBE_HOOK aclError aclrtQueryEvent(aclrtEvent event, aclrtEventStatus *status) {
  return query(MSPROBE_REAL(aclrtQueryEvent), event, status, ACL_EVENT_STATUS_COMPLETE);
}

MSPROBE_HOOK aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus *status) {
  return query(MSPROBE_REAL(aclrtQueryEventStatus), event, status, ACL_EVENT_RECORDED_STATUS_COMPLETE);
}

MSPROBE_HOOK_FAMILY(MSPROBE_STREAM_HOOKS, Linked)
