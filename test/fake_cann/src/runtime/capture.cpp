// Stream capture into model runtime instances (aclmdlRICapture*, runtime feature/aclgraph: context_aclgraph.cc,
// stream_capture.cc, capture_model.cc, api_error_aclgraph.cc; docs/zh/dev_guide/04-01, 04-02 and api_ref 15):
// - Between Begin and End the tasks submitted to the stream are recorded into the model, not run. A stream that waits
//   on an event recorded inside the capture joins it (cross-stream capture); its tasks are the model's too, in the
//   order the host submitted them, and before End it must return to the origin stream through an event record the
//   origin waits on (else ACL_ERROR_RT_STREAM_UNJOINED).
// - End on the wrong thread (not RELAXED), with a task group open or with a stream not joined back ends the capture
//   and drops the model (ClearCaptureModel), besides the error.
// - A task group holds kernels only (AI Core / Vector Core tasks: ACL_ERROR_RT_TASK_TYPE_NOT_SUPPORT for the others).
//   A task update gives the group's kernels anew, one for one, on a stream that is not capturing: each replaces its
//   group's task when the update stream gets to it (an SQE update, in that stream's order); more kernels than the
//   group holds fail at the launch, fewer at UpdateEnd (both RT_ERROR_STREAM_TASKGRP_UPDATE:
//   ACL_ERROR_RT_INTERNAL_ERROR), the kernels given so far staying in force.
// - A replay runs the model's tasks as they are when it reaches each one, on streams of the model's own: one replay
//   of a model at a time, whichever stream enqueued it. aclmdlRIDestroy waits up to 10 s for the replays in flight
//   (context.cc ModelDestroy), then refuses (ACL_ERROR_RT_MODEL_RUNNING).
#include <algorithm>
#include <chrono>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "acl/acl_base.h"
#include "fakecann/stream.h"
#include "stream_impl.h"

namespace fakecann {

namespace {

// Models being captured, live models and task groups (under registry_mutex()).
std::set<CapturedModel *> *g_capturing = new std::set<CapturedModel *>;
std::set<CapturedModel *> *g_models = new std::set<CapturedModel *>;
std::set<TaskGroup *> *g_groups = new std::set<TaskGroup *>;
uint32_t g_next_model_id = 0;
// aclmdlRICaptureThreadExchangeMode's per-thread mode: how unsafe calls of this thread meet captures in force.
thread_local int t_capture_mode = kCaptureGlobal;

int refuse(int code, const std::string &why) {
  set_error_message(why);
  return rt_error(code);
}

// Under the registry lock: the streams of `m`'s capture leave it, its events' capture state ends.
void leave_capture(CapturedModel *m) {
  std::vector<Stream *> streams = m->joined;
  streams.push_back(m->origin);
  for (Stream *s : streams) {
    std::lock_guard<std::mutex> lk(s->mu);
    if (s->capture != m) continue;
    s->capture = nullptr;
    delete s->group;  // never ended: nobody holds it
    s->group = nullptr;
  }
  for (Event *e : m->events)
    if (e->capture == m) e->capture = nullptr;
  g_capturing->erase(m);
}

// Under the registry lock: the capture ends and its model goes (ClearCaptureModel). Returns `code`.
int clear_capture(CapturedModel *m, int code, const std::string &why) {
  leave_capture(m);
  g_models->erase(m);
  std::vector<Task> tasks;
  {
    std::lock_guard<std::mutex> mk(m->mu);
    tasks.swap(m->tasks);
    for (TaskGroup *g : m->groups) g_groups->erase(g), delete g;
  }
  for (Task &t : tasks)
    if (t.release) t.release();
  delete m;
  return refuse(code, why);
}

// context_aclgraph.cc CheckCaptureModelValidity: no task group open; every joined stream's last task is the record of
// an event some stream of the capture waited on, and the origin waited on one of them.
int check_joined_back(CapturedModel *m) {
  for (Stream *s : m->joined)
    if (s->group != nullptr) return ACL_ERROR_STREAM_TASK_GROUP_STATUS;
  if (m->origin->group != nullptr) return ACL_ERROR_STREAM_TASK_GROUP_STATUS;
  bool origin_waited = m->joined.empty();
  for (Stream *s : m->joined) {
    Event *e = m->last_record[s];
    if (e == nullptr || !e->capture_waited) return ACL_ERROR_RT_STREAM_UNJOINED;
    origin_waited = origin_waited || e->waited_by_origin;
  }
  return origin_waited ? 0 : ACL_ERROR_RT_STREAM_UNJOINED;
}

}  // namespace

void register_model(CapturedModel *m) {
  m->id = g_next_model_id++;
  g_models->insert(m);
}
bool model_live(CapturedModel *m) { return m != nullptr && g_models->count(m) != 0; }

int stream_begin_capture(Stream *s, int mode) {
  if (mode != kCaptureGlobal && mode != kCaptureThreadLocal && mode != kCaptureRelaxed)
    return refuse(ACL_ERROR_RT_PARAM_INVALID, "unknown capture mode " + std::to_string(mode));
  if (s->is_default) return refuse(ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT, "the default stream cannot be captured");
  std::lock_guard<std::mutex> rk(registry_mutex());
  std::lock_guard<std::mutex> lk(s->mu);
  if (s->capture != nullptr) return refuse(ACL_ERROR_RT_STREAM_CAPTURED, "the stream is capturing already");
  if (s->updating != nullptr)
    return refuse(ACL_ERROR_STREAM_TASK_GROUP_STATUS, "the stream is updating a task group: end the update first");
  auto *m = new CapturedModel;
  m->mode = mode;
  m->owner = std::this_thread::get_id();
  m->origin = s;
  s->capture = m;
  g_capturing->insert(m);
  register_model(m);
  return 0;
}

int stream_end_capture(Stream *s, CapturedModel **model) {
  if (model == nullptr) return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  std::lock_guard<std::mutex> rk(registry_mutex());
  CapturedModel *m;
  {
    std::lock_guard<std::mutex> lk(s->mu);
    m = s->capture;
  }
  if (m == nullptr) return refuse(ACL_ERROR_RT_STREAM_NOT_CAPTURED, "the stream is not capturing");
  if (m->origin != s)
    return refuse(ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED, "the capture was not begun on this stream (it joined one)");
  if (m->mode != kCaptureRelaxed && m->owner != std::this_thread::get_id())
    return clear_capture(m, ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD,
                         "a capture not begun in relaxed mode must end on the thread that began it: the capture is "
                         "dropped");
  if (int e = check_joined_back(m))
    return clear_capture(m, e,
                         e == ACL_ERROR_STREAM_TASK_GROUP_STATUS
                             ? "a task group is still open: the capture is dropped"
                             : "a stream that joined the capture did not return to the origin stream through an "
                               "event record the origin waits on: the capture is dropped");
  leave_capture(m);
  m->ended = true;
  *model = m;
  return 0;
}

int stream_capture_info(Stream *s, int *status, CapturedModel **model) {
  if (status == nullptr || model == nullptr) return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  std::lock_guard<std::mutex> lk(s->mu);
  *status = s->capture != nullptr ? kCaptureActive : kCaptureNone;
  if (s->capture != nullptr) *model = s->capture;
  return 0;
}

bool stream_capturing(Stream *s) {
  std::lock_guard<std::mutex> lk(s->mu);
  return s->capture != nullptr;
}

// ---- what the stream receives meanwhile ----

int capture_task(Stream *s, Task t) {
  CapturedModel *m = s->capture;
  if (s->group != nullptr && !t.kernel)
    return refuse(ACL_ERROR_RT_TASK_TYPE_NOT_SUPPORT,
                  std::string("a task group holds kernels only (AI Core or Vector Core tasks), not ") +
                      (t.what != nullptr ? t.what : "this task"));
  std::lock_guard<std::mutex> mk(m->mu);
  if (s->group != nullptr) s->group->tasks.push_back(m->tasks.size());
  m->tasks.push_back(std::move(t));
  m->last_record[s] = nullptr;
  return 0;
}

int update_task(Stream *s, Task &t) {
  TaskGroup *g = s->updating;
  if (!t.kernel)
    return refuse(ACL_ERROR_RT_TASK_TYPE_NOT_SUPPORT,
                  std::string("a task update takes kernels only (AI Core or Vector Core tasks), not ") +
                      (t.what != nullptr ? t.what : "this task"));
  if (s->update_next >= g->tasks.size())
    return refuse(ACL_ERROR_RT_INTERNAL_ERROR, "the task update gives more tasks than its task group holds (" +
                                                   std::to_string(g->tasks.size()) + ")");
  const size_t at = g->tasks[s->update_next++];
  CapturedModel *m = g->model;
  auto fresh = std::make_shared<Task>(std::move(t));
  t = Task{};
  t.what = "task_update";
  t.run = [m, at, fresh] {
    std::lock_guard<std::mutex> rk(registry_mutex());
    if (!model_live(m) || !fresh->run) return;  // destroyed meanwhile: the release below lets it go
    std::lock_guard<std::mutex> mk(m->mu);
    m->retired.push_back(std::move(m->tasks[at]));  // a replay may still run the old one: kept until destroy
    m->tasks[at] = std::move(*fresh);
    *fresh = Task{};
  };
  t.release = [fresh] {
    if (fresh->release) fresh->release();  // never put in place
  };
  return 0;
}

// ---- events inside a capture ----

int capture_event_record(Event *e, Stream *s, bool *taken) {
  std::lock_guard<std::mutex> rk(registry_mutex());
  CapturedModel *m;
  {
    std::lock_guard<std::mutex> lk(s->mu);
    m = s->capture;
    if (m == nullptr) return 0;
    *taken = true;
    if (int r = capture_task(s, Task{[] {}, {}, nullptr, "event_record", {}, false})) return r;
  }
  std::lock_guard<std::mutex> mk(m->mu);
  m->last_record[s] = e;
  if (e->capture != m) m->events.push_back(e);
  e->capture = m;
  e->capture_waited = e->waited_by_origin = false;
  return 0;
}

int capture_event_wait(Event *e, Stream *s, bool *taken) {
  std::lock_guard<std::mutex> rk(registry_mutex());
  CapturedModel *m = e->capture;
  if (m == nullptr) return 0;
  *taken = true;
  std::lock_guard<std::mutex> lk(s->mu);
  if (s->capture != nullptr && s->capture != m)
    return refuse(ACL_ERROR_STREAM_CAPTURE_CONFLICT,
                  "the event was recorded in another capture than the one this stream is in");
  if (s->capture == nullptr) {  // joins the capture: what it receives from now on is the model's
    if (s->is_default) return refuse(ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT, "the default stream cannot join a capture");
    s->capture = m;
    m->joined.push_back(s);
  }
  if (int r = capture_task(s, Task{[] {}, {}, nullptr, "event_wait", {}, false})) return r;
  e->capture_waited = true;
  e->waited_by_origin = e->waited_by_origin || s == m->origin;
  return 0;
}

int capture_event_query(Event *e) {
  std::lock_guard<std::mutex> rk(registry_mutex());
  return e->capture != nullptr ? refuse(ACL_ERROR_RT_EVENT_CAPTURED, "the event was recorded in a capture still open")
                               : 0;
}

// ---- task groups and their update ----

int stream_task_group_begin(Stream *s) {
  std::lock_guard<std::mutex> rk(registry_mutex());
  std::lock_guard<std::mutex> lk(s->mu);
  if (s->group != nullptr || s->updating != nullptr)
    return refuse(ACL_ERROR_STREAM_TASK_GROUP_STATUS, "a task group is open already on this stream, or it updates one");
  if (s->capture == nullptr)
    return refuse(ACL_ERROR_RT_STREAM_NOT_CAPTURED, "aclmdlRICaptureTaskGrpBegin on a stream that is not capturing");
  s->group = new TaskGroup;
  s->group->model = s->capture;
  return 0;
}

int stream_task_group_end(Stream *s, TaskGroup **group) {
  if (group == nullptr) return ACL_ERROR_INVALID_PARAM;
  std::lock_guard<std::mutex> rk(registry_mutex());
  std::lock_guard<std::mutex> lk(s->mu);
  TaskGroup *g = s->group;
  if (g == nullptr)
    return refuse(ACL_ERROR_STREAM_TASK_GROUP_STATUS, "aclmdlRICaptureTaskGrpEnd without aclmdlRICaptureTaskGrpBegin");
  if (s->capture == nullptr)
    return refuse(ACL_ERROR_RT_STREAM_NOT_CAPTURED, "aclmdlRICaptureTaskGrpEnd on a stream that is not capturing");
  std::lock_guard<std::mutex> mk(g->model->mu);
  g->model->groups.push_back(g);
  g_groups->insert(g);
  s->group = nullptr;
  *group = g;
  return 0;
}

int stream_task_update_begin(Stream *s, TaskGroup *group) {
  std::lock_guard<std::mutex> rk(registry_mutex());
  if (group == nullptr || g_groups->count(group) == 0)
    return refuse(ACL_ERROR_RT_PARAM_INVALID, "aclmdlRICaptureTaskUpdateBegin: not a task group of a live model");
  std::lock_guard<std::mutex> lk(s->mu);
  if (s->capture != nullptr)
    return refuse(ACL_ERROR_RT_STREAM_CAPTURED, "aclmdlRICaptureTaskUpdateBegin on a stream that is capturing");
  if (s->updating != nullptr || group->updater != nullptr)
    return refuse(ACL_ERROR_STREAM_TASK_GROUP_STATUS,
                  "the stream updates a task group already, or another stream updates this one");
  s->updating = group;
  s->update_next = 0;
  group->updater = s;
  return 0;
}

int stream_task_update_end(Stream *s) {
  std::lock_guard<std::mutex> rk(registry_mutex());
  std::lock_guard<std::mutex> lk(s->mu);
  if (s->capture != nullptr)
    return refuse(ACL_ERROR_RT_STREAM_CAPTURED, "aclmdlRICaptureTaskUpdateEnd on a stream that is capturing");
  TaskGroup *g = s->updating;
  if (g == nullptr)
    return refuse(ACL_ERROR_STREAM_TASK_GROUP_STATUS,
                  "aclmdlRICaptureTaskUpdateEnd without aclmdlRICaptureTaskUpdateBegin");
  s->updating = nullptr;
  g->updater = nullptr;
  if (s->update_next != g->tasks.size())
    return refuse(ACL_ERROR_RT_INTERNAL_ERROR, "the task update gave " + std::to_string(s->update_next) +
                                                   " of the task group's " + std::to_string(g->tasks.size()) +
                                                   " tasks (those stay updated)");
  return 0;
}

// ---- replays ----

namespace {

// Under the registry lock: 0 when `m` is a model whose capture ended, else the error code.
// A built model may be destroyed before aclmdlRIBuildEnd (`destroying`), not executed.
int check_ended_model(CapturedModel *m, bool destroying = false) {
  if (m == nullptr || g_models->count(m) == 0) return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  if (m->built && !m->ended && !destroying)
    return refuse(ACL_ERROR_RT_PARAM_INVALID, "the model is still being built: call aclmdlRIBuildEnd first");
  if (!m->built && !m->ended) return refuse(ACL_ERROR_RT_MODEL_CAPTURED, "the model is still being captured");
  return 0;
}

// One replay of a captured model, on the worker of the stream that enqueued it: each task is read when the replay
// reaches it (a task update applied meanwhile is in force); `records`: this replay's numbers of the external records.
void replay(CapturedModel *m, const std::vector<uint64_t> &records) {
  std::lock_guard<std::mutex> run(m->run_mu);
  size_t k = 0;
  for (size_t i = 0;; ++i) {
    Task t;
    {
      std::lock_guard<std::mutex> mk(m->mu);
      if (i >= m->tasks.size()) break;
      t = m->tasks[i];  // a copy of the closure: the model keeps its own
    }
    if (t.external_record == nullptr)
      t.run();
    else if (k < records.size())  // an update may not bring records the replay did not number
      event_complete_record(t.external_record, records[k++]);
  }
}

}  // namespace

int captured_model_execute(CapturedModel *m, Stream *s) {
  std::vector<uint64_t> records;  // this replay's record numbers of the model's external records, in task order
  {
    std::lock_guard<std::mutex> rk(registry_mutex());
    if (int e = check_ended_model(m)) return e;
    std::lock_guard<std::mutex> mk(m->mu);
    ++m->running;
    for (const Task &t : m->tasks)
      if (t.external_record != nullptr) records.push_back(event_issue_record(t.external_record));
  }
  auto done = [m] {
    std::lock_guard<std::mutex> mk(m->mu);
    --m->running;
  };
  int rc = m->built ? stream_enqueue(
                          s,
                          [m] {
                            std::lock_guard<std::mutex> run(m->run_mu);
                            run_built_model(m);
                          },
                          "aclmdlRIExecuteAsync", done)
                    : stream_enqueue(
                          s, [m, records] { replay(m, records); }, "aclmdlRIExecuteAsync", done);
  if (rc != 0) done();
  return rc;
}

int captured_model_destroy(CapturedModel *m) {
  std::vector<Task> tasks;
  for (int waited_ms = 0;; ++waited_ms) {
    {
      std::lock_guard<std::mutex> rk(registry_mutex());
      if (int e = check_ended_model(m, true)) return e;
      std::unique_lock<std::mutex> mk(m->mu);
      if (m->running == 0) {
        g_models->erase(m);
        for (TaskGroup *g : m->groups) g_groups->erase(g);
        tasks.swap(m->tasks);
        for (Task &t : m->retired) tasks.push_back(std::move(t));
        mk.unlock();
        release_bound_streams(m);
        for (Lane &l : m->lanes)
          for (Task &t : l.tasks) tasks.push_back(std::move(t));
        break;
      }
    }
    if (waited_ms >= 10000)
      return refuse(ACL_ERROR_RT_MODEL_RUNNING, "the model is still running after 10 s: synchronize its stream first");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (Task &t : tasks)
    if (t.release) t.release();
  for (auto [fn, data] : m->on_destroy) fn(data);
  for (TaskGroup *g : m->groups) delete g;
  delete m;
  return 0;
}

int64_t captured_model_tasks(CapturedModel *m) {
  std::lock_guard<std::mutex> rk(registry_mutex());
  if (m == nullptr || g_models->count(m) == 0) return -1;
  std::lock_guard<std::mutex> mk(m->mu);
  return (int64_t)m->tasks.size();
}

int captured_model_write_json(CapturedModel *m, const char *path) {
  std::vector<std::string> names;
  {
    std::lock_guard<std::mutex> rk(registry_mutex());
    if (int e = check_ended_model(m)) return e;
    std::lock_guard<std::mutex> mk(m->mu);
    for (const Task &t : m->tasks) names.push_back(t.what != nullptr ? t.what : "task");
  }
  std::ofstream f(path);
  if (!f) {
    set_error_message(std::string("cannot write ") + path);
    return ACL_ERROR_INVALID_FILE;
  }
  f << "{\"tasks\": [";
  for (size_t i = 0; i < names.size(); ++i)
    f << (i ? ", " : "") << "{\"index\": " << i << ", \"type\": \"" << names[i] << "\"}";
  f << "]}\n";
  return f ? 0 : ACL_ERROR_WRITE_FILE;
}

// ---- names, ids and destroy callbacks ----

int captured_model_set_name(CapturedModel *m, const char *name) {
  std::lock_guard<std::mutex> rk(registry_mutex());
  if (!model_live(m)) return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  m->name = name;
  return 0;
}

int captured_model_name(CapturedModel *m, uint32_t max_len, char *name) {
  std::lock_guard<std::mutex> rk(registry_mutex());
  if (!model_live(m) || max_len == 0) return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  const size_t n = std::min<size_t>({m->name.size(), max_len - 1, 512});  // cut at 512 bytes (api_ref 15)
  m->name.copy(name, n);
  name[n] = '\0';
  return 0;
}

int captured_model_id(CapturedModel *m, uint32_t *id) {
  std::lock_guard<std::mutex> rk(registry_mutex());
  if (!model_live(m)) return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  *id = m->id;
  return 0;
}

int captured_model_on_destroy(CapturedModel *m, void (*fn)(void *), void *data, bool add) {
  std::lock_guard<std::mutex> rk(registry_mutex());
  if (!model_live(m) || fn == nullptr) return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  auto &cbs = m->on_destroy;
  if (add) {
    cbs.emplace_back(fn, data);
    return 0;
  }
  for (auto it = cbs.begin(); it != cbs.end(); ++it)
    if (it->first == fn) {
      cbs.erase(it);
      return 0;
    }
  return rt_error(ACL_ERROR_RT_PARAM_INVALID);
}

// ---- capture modes ----

int capture_exchange_thread_mode(int *mode) {
  if (mode == nullptr || (*mode != kCaptureGlobal && *mode != kCaptureThreadLocal && *mode != kCaptureRelaxed))
    return ACL_ERROR_INVALID_PARAM;
  std::swap(*mode, t_capture_mode);
  return 0;
}

// A thread in relaxed mode may make unsafe calls; one in thread-local mode is stopped by its own non-relaxed captures;
// one in global mode (the default) also by another thread's global capture.
int capture_forbids_unsafe_call() {
  if (t_capture_mode == kCaptureRelaxed) return 0;
  std::lock_guard<std::mutex> rk(registry_mutex());
  for (CapturedModel *m : *g_capturing) {
    const bool own = m->owner == std::this_thread::get_id();
    if ((own && m->mode != kCaptureRelaxed) || (t_capture_mode == kCaptureGlobal && m->mode == kCaptureGlobal))
      return refuse(ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT,
                    "an unsafe call (synchronous copy or memset, copy from pageable host memory) while a stream is "
                    "capturing in a mode that forbids it");
  }
  return 0;
}

}  // namespace fakecann
