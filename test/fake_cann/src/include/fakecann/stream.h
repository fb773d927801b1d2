// Streams and events of the stand-in. Every stream owns a worker thread: kernels, copies and event
// records enqueued on it run later, in order, on that thread, so results are valid only after a
// stream or event synchronization (as on a real NPU).
#pragma once
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

#include "fakecann/export.h"

namespace fakecann {

// A kernel that hits bad device memory or bad arguments throws this on the worker thread; the stream
// records it and the next synchronization reports ACL_ERROR_RT_AICORE_EXCEPTION.
struct FAKECANN_API KernelError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Stream;
struct Event;

// rtStream_t/aclrtStream values are Stream*. nullptr selects the process's default stream.
FAKECANN_API Stream *stream_create();
FAKECANN_API bool stream_destroy(Stream *s);  // false: not a live stream
// Resolves a handle given by the host: nullptr -> default stream; unknown or destroyed -> nullptr.
FAKECANN_API Stream *stream_resolve(void *handle, bool *ok);
FAKECANN_API int32_t stream_id(Stream *s);
FAKECANN_API void stream_enqueue(Stream *s, std::function<void()> task, const char *what);
// Waits until everything enqueued so far has run. Returns 0, or the RT error of a failed task
// (reported once), or ACL_ERROR_RT_STREAM_SYNC_TIMEOUT when timeout_ms >= 0 elapses.
FAKECANN_API int stream_synchronize(Stream *s, int32_t timeout_ms = -1);
FAKECANN_API int synchronize_all_streams();

FAKECANN_API Event *event_create();
FAKECANN_API bool event_destroy(Event *e);
FAKECANN_API bool event_valid(Event *e);
FAKECANN_API void event_record(Event *e, Stream *s);
FAKECANN_API void stream_wait_event(Stream *s, Event *e);
FAKECANN_API void event_synchronize(Event *e);
FAKECANN_API bool event_completed(Event *e);

// The calling thread's current device (set by rtSetDevice/aclrtSetDevice), -1 if none.
FAKECANN_API int32_t current_device();
FAKECANN_API void set_current_device(int32_t dev);
FAKECANN_API int32_t device_count();

// Last error text for aclGetRecentErrMsg, per thread.
FAKECANN_API void set_error_message(const std::string &msg);
FAKECANN_API const char *error_message();

}  // namespace fakecann
