// libruntime's own view of streams, events and contexts (fakecann/stream.h is the exported one): the objects behind
// the handles, shared by streams.cpp (streams, their workers, capture), events.cpp and contexts.cpp.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fakecann/stream.h"

namespace fakecann {

struct Task {
  std::function<void()> run, release;
  // A record of an event made inside a capture with ACL_EVENT_RECORD_EXTERNAL: each replay is a new record of the
  // event, numbered when the replay is enqueued (so that a wait issued after aclmdlRIExecuteAsync waits for it).
  Event *external_record = nullptr;
  const char *what = nullptr;  // what kind of task (aclmdlRIDebugJsonPrint names them)
  // A task of a built model that decides where its stream goes on (a label switch, the end of the graph): given its
  // own index, the index of the next task to run (kLaneEnd: the stream's part of the model is done).
  std::function<size_t(size_t)> jump;
  // A kernel on the AI Core or Vector Core: the only task a task group may hold and a task update may replace
  // (capture_adapt_v100.cc TaskTypeIsSupportTaskGroup).
  bool kernel = false;
};

constexpr size_t kLaneEnd = ~size_t(0);

// A stream bound to a model built by aclmdlRIBuildBegin: the tasks it received since. Head streams start when the
// model executes.
struct Lane {
  Stream *stream = nullptr;
  bool head = false;
  std::vector<Task> tasks;
};

// aclrtCreateLabel: a place in a bound stream's tasks, fixed by aclrtSetLabel.
struct Label {
  CapturedModel *model = nullptr;  // null until set
  size_t lane = 0;                 // the model's stream it was set on
  size_t index = 0;                // its LABEL_SET task there
};

// The tasks of a capture between aclmdlRICaptureTaskGrpBegin and End: the model's tasks at these indices.
struct TaskGroup {
  CapturedModel *model = nullptr;
  std::vector<size_t> tasks;
  Stream *updater = nullptr;  // between aclmdlRICaptureTaskUpdateBegin and End on that stream
};

// A model runtime instance made by capture: the tasks, in the order the capturing stream received them.
struct CapturedModel {
  std::mutex mu;
  std::vector<Task> tasks;
  std::vector<Task> retired;  // replaced by a task update; released with the model (a replay may still hold them)
  std::vector<TaskGroup *> groups;
  int mode = kCaptureGlobal;
  std::thread::id owner;  // the thread that began the capture
  bool ended = false;
  bool built = false;        // made by aclmdlRIBuildBegin: its tasks are its lanes', not `tasks`
  std::vector<Lane> lanes;   // the streams bound to a built model, in bind order
  int running = 0;  // replays enqueued and not yet finished
  // A model runs on streams of its own (capture_model.cc): one replay at a time, whichever stream enqueued it.
  std::mutex run_mu;
  // Cross-stream capture (dev_guide 04-02): the stream that began it, the streams that joined it by waiting on an
  // event recorded inside it, and for each of them the event whose record is its last task (null: another task).
  Stream *origin = nullptr;
  std::vector<Stream *> joined;
  std::map<Stream *, Event *> last_record;
  std::vector<Event *> events;  // recorded inside the capture (their capture state ends with it)
  std::string name;             // aclmdlRISetName
  uint32_t id = 0;
  std::vector<std::pair<void (*)(void *), void *>> on_destroy;  // aclmdlRIDestroyRegisterCallback
};

struct Stream {
  int32_t id = 0;
  Context *ctx = nullptr;  // null: the process's own default stream (a thread without a context)
  bool is_default = false;
  uint32_t flags = 0, priority = 0;
  uint64_t failure_mode = 0;  // ACL_CONTINUE_ON_FAILURE (0) or ACL_STOP_ON_FAILURE (1)
  std::atomic<uint32_t> overflow_switch{0};  // aclrtSetStreamOverflowSwitch
  std::mutex mu;
  std::condition_variable work_cv, idle_cv;
  std::deque<Task> tasks;
  CapturedModel *capture = nullptr;  // set while the stream is capturing
  TaskGroup *group = nullptr;        // an open task group of the capture
  TaskGroup *updating = nullptr;     // between aclmdlRICaptureTaskUpdateBegin and End: kernels replace the group's
  size_t update_next = 0;            // the group's task the next kernel replaces
  CapturedModel *bound = nullptr;  // bound to a built model: its tasks go into lanes[lane]
  size_t lane = 0;
  uint64_t enqueued = 0, completed = 0;
  bool stopping = false;
  std::atomic<bool> aborting{false};  // destroyed by force: a task waiting on the device gives up (worker_wait_until)
  std::atomic<int> pins{0};  // threads synchronizing every stream (a device reset) still looking at this one
  int sticky_error = 0;
  std::string error_text;
  std::thread worker;
};

struct Event {
  std::mutex mu;
  std::condition_variable cv;
  Context *ctx = nullptr;
  uint32_t flags = 0;      // aclrtCreateEventWithFlag's
  bool ex_mode = false;    // made by aclrtCreateEventExWithFlag (CANN's "new mode")
  uint64_t recorded = 0;   // how many records were issued
  uint64_t completed = 0;  // how many records have executed
  bool signaled = false;   // a record executed since the last reset (what an external wait waits for)
  // An IPC event (aclrtCreateEventExWithFlag(ACL_EVENT_IPC)): its state is shared memory every process that opened
  // it maps (ipc_events.cpp); the creator's id names it.
  struct IpcShared *ipc = nullptr;
  uint64_t ipc_id = 0;
  bool ipc_creator = false;
  // Recorded inside a capture that is still open (under registry_mutex()): a wait on it joins that capture, a query or
  // synchronization is refused (ACL_ERROR_RT_EVENT_CAPTURED). Cleared when the capture ends.
  CapturedModel *capture = nullptr;
  bool capture_waited = false, waited_by_origin = false;
};

// ipc_events.cpp: the IPC side of events.cpp's operations.
void ipc_release(Event *e);
void ipc_record(Event *e, Stream *s);
void ipc_wait(Event *e, Stream *s);
void ipc_synchronize(Event *e);
bool ipc_recorded(Event *e);  // no record pending at the current slot, or its flag is set

// capture.cpp, with s->mu held: `t` submitted to a capturing stream goes into its model; `t` submitted to a stream
// updating a task group becomes the task that puts it in place of the group's next task. 0 or the ACL error.
int capture_task(Stream *s, Task t);
int update_task(Stream *s, Task &t);
// A stream is capturing (aclrtSynchronizeDevice refuses to wait then).
bool any_stream_capturing();
// The registry lock of streams and models (streams.cpp); held across fork() (see make_stream).
std::mutex &registry_mutex();
// A context's default stream (contexts.cpp makes them, streams.cpp owns streams).
Stream *make_default_stream(Context *ctx);
// stream_enqueue with the whole task (an external record, a kernel). 0, or the ACL error of a refusal: a task group
// or a task update takes kernels only, an update no more than its group holds.
int stream_enqueue_task(Stream *s, Task t);
// The registry of models (streams.cpp), under registry_mutex().
void register_model(CapturedModel *m);
bool model_live(CapturedModel *m);
// model_build.cpp: runs a built model's head streams, each on its own thread (the first on the caller's).
void run_built_model(CapturedModel *m);
// Lets a model's streams go when it is destroyed (under the registry lock and the model's).
void release_bound_streams(CapturedModel *m);
// capture.cpp: a record or a wait of `e` on `s` that a capture takes (a record on a capturing stream; a wait on an
// event recorded inside a capture still open, which joins `s` to it): *taken says whether it was the capture's;
// returns 0 or the ACL error.
int capture_event_record(Event *e, Stream *s, bool *taken);
int capture_event_wait(Event *e, Stream *s, bool *taken);
// ACL_ERROR_RT_EVENT_CAPTURED while `e` was recorded inside a capture still open, else 0.
int capture_event_query(Event *e);
// events.cpp: one more record of `e` issued (its number), and that record executed.
uint64_t event_issue_record(Event *e);
void event_complete_record(Event *e, uint64_t seq);

}  // namespace fakecann
