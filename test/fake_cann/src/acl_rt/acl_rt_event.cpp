// ACL runtime: the aclrt* events (runtime src/acl/aclrt_impl/event.cpp over src/runtime's Event):
// - aclrtQueryEvent: ACL_EVENT_STATUS_COMPLETE (0) when the latest record executed, or none was issued; NOT_READY (1)
//   while one is pending (Event::Query).
// - aclrtQueryEventStatus: ACL_EVENT_RECORDED_STATUS_COMPLETE (1) once the latest record executed; before any record
//   COMPLETE for an event made by aclrtCreateEventExWithFlag ("new mode"), NOT_READY (0) for the others
//   (Event::QueryEventStatus).
// - Records and waits with the EXTERNAL flags, and waits on an ACL_EVENT_EXTERNAL event inside a capture, order
//   captured models with the outside (fakecann/stream.h); aclrtResetEvent clears the recorded state when the stream
//   reaches it.
// - IPC events (aclrtCreateEventExWithFlag(ACL_EVENT_IPC)): shared with the processes that open their handle (the
//   runtime's ipc_events.cpp).
#include <cstring>

#include "acl/acl.h"
#include "fakecann/call_counters.h"
#include "fakecann/rt_internal.h"
#include "fakecann/stream.h"
#include "runtime/rt.h"

using namespace fakecann;

namespace {

constexpr uint32_t kKnownEventFlags = ACL_EVENT_SYNC | ACL_EVENT_CAPTURE_STREAM_PROGRESS | ACL_EVENT_TIME_LINE |
                                      ACL_EVENT_DEVICE_USE_ONLY | ACL_EVENT_EXTERNAL | ACL_EVENT_IPC;

aclError create(aclrtEvent *event, uint32_t flag, bool ex_mode) {
  if (event == nullptr) return ACL_ERROR_INVALID_PARAM;
  if ((flag & ~kKnownEventFlags) != 0) {
    set_error_message("unknown event flag " + std::to_string(flag));
    return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  }
  if (int e = require_context()) return e;
  if (ex_mode && flag == ACL_EVENT_IPC) {  // api_impl.cc EventCreateEx: an IpcEvent
    Event *e = ipc_event_create();
    if (e == nullptr) return rt_error(ACL_ERROR_RT_MEMORY_ALLOCATION);
    *event = e;
    return ACL_SUCCESS;
  }
  *event = event_create(flag, ex_mode);
  return ACL_SUCCESS;
}

aclError event_and_stream(aclrtEvent event, aclrtStream stream, Event **e, Stream **s) {
  *e = static_cast<Event *>(event);
  if (event == nullptr || !event_valid(*e)) return ACL_ERROR_INVALID_PARAM;
  if (int r = require_context()) return r;
  return resolve_stream(stream, s);
}

}  // namespace

extern "C" {

aclError aclrtCreateEvent(aclrtEvent *event) { return rtEventCreate(event); }
aclError aclrtCreateEventWithFlag(aclrtEvent *event, uint32_t flag) { return create(event, flag, false); }
aclError aclrtCreateEventExWithFlag(aclrtEvent *event, uint32_t flag) { return create(event, flag, true); }
aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream) { return rtEventRecord(event, stream); }
aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event) { return rtStreamWaitEvent(stream, event); }
aclError aclrtSynchronizeEvent(aclrtEvent event) { return rtEventSynchronize(event); }
aclError aclrtDestroyEvent(aclrtEvent event) { return rtEventDestroy(event); }

// ACL_EVENT_RECORD_EXTERNAL only on a capturing stream (api_impl.cc EventRecord: RT_ERROR_STREAM_NOT_CAPTURED).
aclError aclrtRecordEventWithFlag(aclrtEvent event, aclrtStream stream, uint32_t flag) {
  if (flag != ACL_EVENT_RECORD_DEFAULT && flag != ACL_EVENT_RECORD_EXTERNAL) return ACL_ERROR_INVALID_PARAM;
  if (flag == ACL_EVENT_RECORD_DEFAULT) return aclrtRecordEvent(event, stream);
  Event *e;
  Stream *s;
  if (aclError r = event_and_stream(event, stream, &e, &s)) return r;
  if (!stream_capturing(s)) {
    set_error_message("aclrtRecordEventWithFlag(ACL_EVENT_RECORD_EXTERNAL) on a stream that is not capturing");
    return rt_error(ACL_ERROR_RT_STREAM_NOT_CAPTURED);
  }
  count_call(CallKind::EventRecord);
  return event_record(e, s, true);
}

// timeout is reserved (0); ACL_EVENT_WAIT_EXTERNAL waits, when the stream gets there, for the event to be recorded.
aclError aclrtStreamWaitEventWithFlag(aclrtStream stream, aclrtEvent event, uint32_t /*timeout*/, uint32_t flag) {
  if (flag != ACL_EVENT_WAIT_DEFAULT && flag != ACL_EVENT_WAIT_EXTERNAL) return ACL_ERROR_INVALID_PARAM;
  Event *e;
  Stream *s;
  if (aclError r = event_and_stream(event, stream, &e, &s)) return r;
  if (flag == ACL_EVENT_WAIT_EXTERNAL && !stream_capturing(s)) {
    set_error_message("aclrtStreamWaitEventWithFlag(ACL_EVENT_WAIT_EXTERNAL) on a stream that is not capturing");
    return rt_error(ACL_ERROR_RT_STREAM_NOT_CAPTURED);
  }
  count_call(CallKind::EventWait);
  return stream_wait_event(s, e, flag == ACL_EVENT_WAIT_EXTERNAL);
}

aclError aclrtResetEvent(aclrtEvent event, aclrtStream stream) {
  Event *e;
  Stream *s;
  if (aclError r = event_and_stream(event, stream, &e, &s)) return r;
  return event_reset(e, s);
}

aclError aclrtQueryEvent(aclrtEvent event, aclrtEventStatus *status) {
  if (event == nullptr || status == nullptr || !event_valid(static_cast<Event *>(event)))
    return ACL_ERROR_INVALID_PARAM;
  if (int e = event_capture_check(static_cast<Event *>(event))) return e;
  *status = event_completed(static_cast<Event *>(event)) ? ACL_EVENT_STATUS_COMPLETE : ACL_EVENT_STATUS_NOT_READY;
  return ACL_SUCCESS;
}

aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus *status) {
  auto *e = static_cast<Event *>(event);
  if (event == nullptr || status == nullptr || !event_valid(e)) return ACL_ERROR_INVALID_PARAM;
  if (int r = event_capture_check(e)) return r;
  bool ever = false;
  const bool recorded = event_recorded_state(e, &ever);
  const bool complete = ever ? recorded : event_ex_mode(e);
  *status = complete ? ACL_EVENT_RECORDED_STATUS_COMPLETE : ACL_EVENT_RECORDED_STATUS_NOT_READY;
  return ACL_SUCCESS;
}

// event.cpp aclrtIpcGetEventHandleImpl / aclrtIpcOpenEventHandleImpl, api_impl_event.cc: only an IPC event has a
// handle (107000 for another); opening needs a current context (107002) and a handle of a live IPC event.
aclError aclrtIpcGetEventHandle(aclrtEvent event, aclrtIpcEventHandle *handle) {
  if (handle == nullptr || event == nullptr) return ACL_ERROR_INVALID_PARAM;
  auto *e = static_cast<Event *>(event);
  const uint64_t id = event_valid(e) ? ipc_event_handle(e) : 0;
  if (id == 0) {
    set_error_message("aclrtIpcGetEventHandle: only events made with ACL_EVENT_IPC have a handle");
    return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  }
  std::memset(handle, 0, sizeof(*handle));
  std::memcpy(handle->reserved, &id, sizeof(id));
  return ACL_SUCCESS;
}

aclError aclrtIpcOpenEventHandle(aclrtIpcEventHandle handle, aclrtEvent *event) {
  if (event == nullptr) return ACL_ERROR_INVALID_PARAM;
  if (int e = require_context()) return e;
  uint64_t id;
  std::memcpy(&id, handle.reserved, sizeof(id));
  Event *e = ipc_event_open(id);
  if (e == nullptr) {
    set_error_message("aclrtIpcOpenEventHandle: no live IPC event has this handle");
    return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  }
  *event = e;
  return ACL_SUCCESS;
}

}  // extern "C"
