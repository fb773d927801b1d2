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
// Enqueues `task`; `release` (optional) lets its resources go once the task is done for good: right after it ran, or,
// for a task captured into a model runtime instance (below), when the instance is destroyed. A task enqueued on a
// capturing stream is recorded, not run, and runs at every replay: it must be runnable many times.
FAKECANN_API void stream_enqueue(Stream *s, std::function<void()> task, const char *what,
                                 std::function<void()> release = {});
// Waits until everything enqueued so far has run. Returns 0, or the RT error of a failed task
// (reported once), or ACL_ERROR_RT_STREAM_SYNC_TIMEOUT when timeout_ms >= 0 elapses; ACL_ERROR_RT_STREAM_CAPTURED
// without waiting when the stream is capturing.
FAKECANN_API int stream_synchronize(Stream *s, int32_t timeout_ms = -1);
FAKECANN_API int synchronize_all_streams();

// ---- stream capture (aclmdlRICapture*: the tasks a capturing stream receives go into a model runtime instance) ----
// aclmdlRICaptureMode values: which threads may call the unsafe functions (synchronous aclrtMemcpy / aclrtMemset, an
// asynchronous copy from pageable host memory) while a capture is in force.
enum CaptureMode : int { kCaptureGlobal = 0, kCaptureThreadLocal = 1, kCaptureRelaxed = 2 };
// aclmdlRICaptureStatus values.
enum CaptureStatus : int { kCaptureNone = 0, kCaptureActive = 1, kCaptureInvalidated = 2 };
struct CapturedModel;  // an aclmdlRI
// Each returns 0 or an ACL error code (reference values of rt_error_codes.h).
FAKECANN_API int stream_begin_capture(Stream *s, int mode);
FAKECANN_API int stream_end_capture(Stream *s, CapturedModel **model);
FAKECANN_API int stream_capture_info(Stream *s, int *status, CapturedModel **model);
FAKECANN_API bool stream_capturing(Stream *s);
// Enqueues the whole model on `s` as one task (its tasks run in capture order, on s's worker).
FAKECANN_API int captured_model_execute(CapturedModel *m, Stream *s);
FAKECANN_API int captured_model_destroy(CapturedModel *m);
// How many tasks a model holds (-1: not a model).
FAKECANN_API int64_t captured_model_tasks(CapturedModel *m);
// ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT when a capture in force forbids this thread's unsafe call, else 0.
FAKECANN_API int capture_forbids_unsafe_call();

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
