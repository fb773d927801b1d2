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
struct Context;

// ---- contexts (aclrtContext values are Context*) ----
// Every device has a default context, made by its first aclrtSetDevice; aclrtCreateContext makes more. Each context
// has a default stream (what a NULL stream handle means on a thread whose current context it is). Contexts are never
// freed (a thread may still name a destroyed one): context_live says whether one may be used.
FAKECANN_API Context *primary_context(int32_t dev);
FAKECANN_API Context *context_create(int32_t dev);
FAKECANN_API bool context_destroy(Context *c);  // false: not a live context made by context_create
FAKECANN_API bool context_live(Context *c);
FAKECANN_API int32_t context_device(Context *c);
FAKECANN_API Stream *context_default_stream(Context *c);
// The calling thread's current context (nullptr: none, or one that was destroyed since).
FAKECANN_API Context *current_context();
FAKECANN_API void set_current_context(Context *c);
// aclrtSetDevice's reference count of a device's default context: retained by every set, released by a reset; the
// last release (or a forced one) lets the default context go: the calling thread loses it if it was current there.
FAKECANN_API void device_retain(int32_t dev);
FAKECANN_API void device_release(int32_t dev, bool force);

// rtStream_t/aclrtStream values are Stream*. nullptr selects the current context's default stream (the process's own
// default stream on a thread without a context).
FAKECANN_API Stream *stream_create(uint32_t flags = 0, uint32_t priority = 0);
FAKECANN_API bool stream_destroy(Stream *s, bool force = false);  // false: not a live stream, or a default stream
// stream_destroy for the host: 0, ACL_ERROR_RT_STREAM_CAPTURED while it captures, ACL_ERROR_RT_PARAM_INVALID.
FAKECANN_API int stream_destroy_checked(Stream *s, bool force = false);
// Resolves a handle given by the host: nullptr -> default stream; unknown or destroyed -> nullptr.
FAKECANN_API Stream *stream_resolve(void *handle, bool *ok);
FAKECANN_API int32_t stream_id(Stream *s);
FAKECANN_API void stream_set_overflow_switch(Stream *s, uint32_t on);
FAKECANN_API uint32_t stream_overflow_switch(Stream *s);
FAKECANN_API uint32_t stream_flags(Stream *s);
FAKECANN_API uint32_t stream_priority(Stream *s);
// ACL_STOP_ON_FAILURE: once a task failed, the later tasks are skipped until a synchronization reported the error.
// Returns an ACL error code (stop cannot go back to continue).
FAKECANN_API int stream_set_failure_mode(Stream *s, uint64_t mode);
// Enqueues `task`; `release` (optional) lets its resources go once the task is done for good: right after it ran, or,
// for a task captured into a model runtime instance (below), when the instance is destroyed. A task enqueued on a
// capturing stream is recorded, not run, and runs at every replay: it must be runnable many times. Returns 0, or the
// ACL error of a refusal (a task group and a task update take kernels only: stream_enqueue_kernel).
FAKECANN_API int stream_enqueue(Stream *s, std::function<void()> task, const char *what,
                                std::function<void()> release = {});
// A kernel on the AI Core or Vector Core (what a task group holds and a task update replaces): as stream_enqueue.
FAKECANN_API int stream_enqueue_kernel(Stream *s, std::function<void()> task, const char *what,
                                       std::function<void()> release = {});
// Waits until everything enqueued so far has run. Returns 0, or the RT error of a failed task
// (reported once), or ACL_ERROR_RT_STREAM_SYNC_TIMEOUT when timeout_ms >= 0 elapses; ACL_ERROR_RT_STREAM_CAPTURED
// without waiting when the stream is capturing.
FAKECANN_API int stream_synchronize(Stream *s, int32_t timeout_ms = -1);
FAKECANN_API int synchronize_all_streams();
// For a task waiting on the device (a value wait, an IPC event wait): polls `ready` on the stream's worker until it
// holds (true), or until the stream is destroyed by force (false): device waits have no timeout of their own.
FAKECANN_API bool worker_wait_until(const std::function<bool()> &ready);
// Enqueues a host function (aclrtLaunchHostFunc): it runs when the stream reaches it, and the stream waits for it.
FAKECANN_API int stream_launch_host_func(Stream *s, void (*fn)(void *), void *args);

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
// Enqueues the whole model on `s` as one task (its tasks run in capture order, on s's worker; one replay of a model
// at a time).
FAKECANN_API int captured_model_execute(CapturedModel *m, Stream *s);
FAKECANN_API int captured_model_destroy(CapturedModel *m);
// How many tasks a model holds (-1: not a model).
FAKECANN_API int64_t captured_model_tasks(CapturedModel *m);
// aclmdlRIDebugJsonPrint: the model's tasks, in order, as JSON ({"tasks": [{"index", "type"}]}).
FAKECANN_API int captured_model_write_json(CapturedModel *m, const char *path);
// aclmdlRISetName / GetName (cut to max_len - 1 and 512 bytes) / GetId, aclmdlRIDestroy(Un)RegisterCallback (add:
// register; the callbacks run when the model is destroyed). Each returns 0 or an ACL error code.
FAKECANN_API int captured_model_set_name(CapturedModel *m, const char *name);
FAKECANN_API int captured_model_name(CapturedModel *m, uint32_t max_len, char *name);
FAKECANN_API int captured_model_id(CapturedModel *m, uint32_t *id);
FAKECANN_API int captured_model_on_destroy(CapturedModel *m, void (*fn)(void *), void *data, bool add);
// Task groups (aclmdlRICaptureTaskGrpBegin/End, kernels only) and their update (aclmdlRICaptureTaskUpdateBegin/End):
// each kernel a stream receives between UpdateBegin and UpdateEnd replaces the group's next task when the stream gets
// to it. Each returns 0 or an ACL error code.
struct TaskGroup;
FAKECANN_API int stream_task_group_begin(Stream *s);
FAKECANN_API int stream_task_group_end(Stream *s, TaskGroup **group);
FAKECANN_API int stream_task_update_begin(Stream *s, TaskGroup *group);
FAKECANN_API int stream_task_update_end(Stream *s);
// Exchanges the calling thread's capture mode (aclmdlRICaptureThreadExchangeMode).
FAKECANN_API int capture_exchange_thread_mode(int *mode);
// ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT when a capture in force forbids this thread's unsafe call, else 0.
FAKECANN_API int capture_forbids_unsafe_call();

// ---- models built from bound streams (aclmdlRIBuildBegin ...) and labels; each returns 0 or an ACL error code ----
FAKECANN_API int model_build_begin(uint32_t flag, CapturedModel **model);
// flag: 0 (a head stream, started by an execution) or 0x7FFFFFFF; the stream must be persistent.
FAKECANN_API int model_bind_stream(CapturedModel *m, Stream *s, uint32_t flag);
FAKECANN_API int model_unbind_stream(CapturedModel *m, Stream *s);
FAKECANN_API int model_end_task(CapturedModel *m, Stream *s);
FAKECANN_API int model_build_end(CapturedModel *m);
struct Label;
FAKECANN_API Label *label_create();
FAKECANN_API bool label_destroy(Label *l);  // false: not a live label
FAKECANN_API bool label_live(Label *l);
FAKECANN_API int label_set(Label *l, Stream *s);
// `list`: device memory holding `count` Label pointers (aclrtCreateLabelList's).
FAKECANN_API int label_switch_by_index(const void *index_ptr, uint32_t count, const void *list, Stream *s);

// ---- events (aclrtEvent values are Event*) ----
// flags: aclrtCreateEventWithFlag's (ACL_EVENT_EXTERNAL 0x20 ...); ex_mode: made by aclrtCreateEventExWithFlag.
FAKECANN_API Event *event_create(uint32_t flags = 0, bool ex_mode = false);
FAKECANN_API bool event_destroy(Event *e);
FAKECANN_API bool event_valid(Event *e);
// external: ACL_EVENT_RECORD_EXTERNAL inside a capture (each replay records the event anew). A plain record on a
// capturing stream is the capture's own (the event itself is not recorded; a wait on it joins the capture). Returns
// 0 or the ACL error (a task group takes no record).
FAKECANN_API int event_record(Event *e, Stream *s, bool external = false);
// Clears the event's recorded state when the stream reaches it (aclrtResetEvent).
FAKECANN_API int event_reset(Event *e, Stream *s);
// A wait on the records issued so far; an external wait (ACL_EVENT_WAIT_EXTERNAL, or a wait on an ACL_EVENT_EXTERNAL
// event inside a capture) waits, when the stream reaches it, until the event is recorded (and not reset since).
// A plain wait on an event recorded inside a capture still open joins that capture (its order within the model is
// the order the host submitted the tasks). Returns 0 or the ACL error.
FAKECANN_API int stream_wait_event(Stream *s, Event *e, bool external = false);
// ACL_ERROR_RT_EVENT_CAPTURED while the event's last record was made inside a capture still open (a query or a
// synchronization of it is refused then), else 0.
FAKECANN_API int event_capture_check(Event *e);
FAKECANN_API void event_synchronize(Event *e);
FAKECANN_API bool event_completed(Event *e);
// Whether a record was ever issued and every issued record executed (the runtime's RECORDED state).
FAKECANN_API bool event_recorded_state(Event *e, bool *ever_recorded);
FAKECANN_API uint32_t event_flags(Event *e);
// IPC events (aclrtCreateEventExWithFlag(ACL_EVENT_IPC)): records, waits and queries see every process's records.
FAKECANN_API Event *ipc_event_create();             // nullptr: no shared memory for it
FAKECANN_API uint64_t ipc_event_handle(Event *e);   // 0: not an IPC event
FAKECANN_API Event *ipc_event_open(uint64_t handle);  // nullptr: no live IPC event of that handle
FAKECANN_API bool event_ex_mode(Event *e);

// The device of the calling thread's current context (set by rtSetDevice/aclrtSetDevice, aclrtSetCurrentContext),
// -1 if none. set_current_device makes the device's default context current (-1: none).
FAKECANN_API int32_t current_device();
FAKECANN_API void set_current_device(int32_t dev);
FAKECANN_API int32_t device_count();

// Last error text for aclGetRecentErrMsg, per thread (nullptr: none yet, as CANN's when no error was reported).
FAKECANN_API void set_error_message(const std::string &msg);
FAKECANN_API const char *error_message();
// A runtime failure: records `code` as the thread's last error (aclrtGetLastError / aclrtPeekAtLastError) and returns
// it. CANN's runtime records every failure of its own (api_global_err.cc GetRtExtErrCodeAndSetGlobalErr); a refusal
// by the ACL layer's parameter checks (ACL_ERROR_INVALID_PARAM ...) never reaches the runtime and is not recorded.
FAKECANN_API int rt_error(int code);
// The thread's last runtime error; `clear` resets it to 0 (aclrtGetLastError), else it stays (aclrtPeekAtLastError).
FAKECANN_API int last_rt_error(bool clear);

}  // namespace fakecann
