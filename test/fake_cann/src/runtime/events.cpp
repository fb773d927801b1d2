// Events: records (counted: a wait or a synchronize waits for the records issued before it), resets, and the external
// records and waits of captured models (runtime src/runtime/core/src/event/event.cc, api_impl.cc EventRecord).
#include <pthread.h>

#include <mutex>
#include <set>

#include "acl/acl_base.h"
#include "fakecann/stream.h"
#include "stream_impl.h"

namespace fakecann {

namespace {

std::mutex g_events_mu;
std::set<Event *> *g_events = new std::set<Event *>;  // leaked: tasks may still name an event after the host's exit

// Marks record `seq` of `e` executed; under e->mu.
void complete_locked(Event *e, uint64_t seq) {
  if (e->completed < seq) e->completed = seq;
  e->signaled = true;
  e->cv.notify_all();
}

}  // namespace

Event *event_create(uint32_t flags, bool ex_mode) {
  // A fork in another thread must not leave the child with this lock held by a thread it does not have.
  static const int atfork =
      pthread_atfork([] { g_events_mu.lock(); }, [] { g_events_mu.unlock(); }, [] { g_events_mu.unlock(); });
  (void)atfork;
  auto *e = new Event;
  e->ctx = current_context();
  e->flags = flags;
  e->ex_mode = ex_mode;
  std::lock_guard<std::mutex> lk(g_events_mu);
  g_events->insert(e);
  return e;
}

bool event_destroy(Event *e) {
  std::lock_guard<std::mutex> lk(g_events_mu);
  if (g_events->erase(e) == 0) return false;
  ipc_release(e);
  // Tasks already enqueued may still reference it; leak rather than free under them.
  return true;
}

bool event_valid(Event *e) {
  std::lock_guard<std::mutex> lk(g_events_mu);
  return g_events->count(e) != 0;
}

uint64_t event_issue_record(Event *e) {
  std::lock_guard<std::mutex> lk(e->mu);
  return ++e->recorded;
}

void event_complete_record(Event *e, uint64_t seq) {
  std::lock_guard<std::mutex> lk(e->mu);
  complete_locked(e, seq);
}

int event_record(Event *e, Stream *s, bool external) {
  if (e->ipc != nullptr) return ipc_record(e, s), 0;
  if (external)  // inside a capture: numbered at each replay (captured_model_execute)
    return stream_enqueue_task(s, Task{{}, {}, e, "event_record", {}, false});
  bool taken = false;  // a record of the capture's own
  if (int r = capture_event_record(e, s, &taken); r != 0 || taken) return r;
  const uint64_t seq = event_issue_record(e);
  return stream_enqueue(s, [e, seq] { event_complete_record(e, seq); }, "event_record");
}

int event_reset(Event *e, Stream *s) {
  return stream_enqueue(
      s,
      [e] {
        std::lock_guard<std::mutex> lk(e->mu);
        e->signaled = false;
      },
      "event_reset");
}

int stream_wait_event(Stream *s, Event *e, bool external) {
  if (e->ipc != nullptr) return ipc_wait(e, s), 0;
  if (external)
    return stream_enqueue(
        s,
        [e] {
          std::unique_lock<std::mutex> lk(e->mu);
          e->cv.wait(lk, [e] { return e->signaled; });
        },
        "event_wait");
  bool taken = false;  // a wait in the capture the record was made in (joining it)
  if (int r = capture_event_wait(e, s, &taken); r != 0 || taken) return r;
  uint64_t target;
  {
    std::lock_guard<std::mutex> lk(e->mu);
    target = e->recorded;
  }
  return stream_enqueue(
      s,
      [e, target] {
        std::unique_lock<std::mutex> lk(e->mu);
        e->cv.wait(lk, [e, target] { return e->completed >= target; });
      },
      "event_wait");
}

void event_synchronize(Event *e) {
  if (e->ipc != nullptr) return ipc_synchronize(e);
  std::unique_lock<std::mutex> lk(e->mu);
  uint64_t target = e->recorded;
  e->cv.wait(lk, [e, target] { return e->completed >= target; });
}

bool event_completed(Event *e) {
  if (e->ipc != nullptr) return ipc_recorded(e);
  std::lock_guard<std::mutex> lk(e->mu);
  return e->completed >= e->recorded;
}

bool event_recorded_state(Event *e, bool *ever_recorded) {
  if (e->ipc != nullptr) {  // ipc_event.cc IpcEventQuery: no distinction of "never recorded"
    *ever_recorded = true;
    return ipc_recorded(e);
  }
  std::lock_guard<std::mutex> lk(e->mu);
  *ever_recorded = e->recorded != 0;
  return e->recorded != 0 && e->completed >= e->recorded;
}

int event_capture_check(Event *e) { return capture_event_query(e); }

uint32_t event_flags(Event *e) { return e->flags; }
bool event_ex_mode(Event *e) { return e->ex_mode; }

}  // namespace fakecann
