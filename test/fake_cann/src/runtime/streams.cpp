// Streams (one worker thread each) and stream capture into model runtime instances (task groups and their update
// included). Events are events.cpp's, contexts contexts.cpp's.
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
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

std::mutex g_registry_mu;
std::set<Stream *> *g_streams = new std::set<Stream *>;  // leaked: streams outlive static destructors
// Models being captured and made (under g_registry_mu).
std::set<CapturedModel *> *g_capturing = new std::set<CapturedModel *>;
std::set<CapturedModel *> *g_models = new std::set<CapturedModel *>;
std::set<TaskGroup *> *g_groups = new std::set<TaskGroup *>;
std::atomic<int32_t> g_next_stream_id{0};
// aclmdlRICaptureThreadExchangeMode's per-thread mode: how unsafe calls of this thread meet captures in force.
thread_local int t_capture_mode = kCaptureGlobal;
// The stream whose worker this thread is (null on other threads).
thread_local Stream *t_worker_stream = nullptr;

constexpr uint64_t kStopOnFailure = 1;

long task_delay_us() {
  static long d = [] {
    const char *s = std::getenv("FAKE_CANN_TASK_DELAY_US");
    return s ? std::strtol(s, nullptr, 10) : 0L;
  }();
  return d;
}

// Runs one task on the worker: its failure becomes the stream's sticky error, reported by the next synchronization.
void run_task(Stream *s, Task &task) {
  {
    std::lock_guard<std::mutex> lk(s->mu);
    if (s->failure_mode == kStopOnFailure && s->sticky_error != 0) return;  // stopped: skipped until reported
  }
  if (long d = task_delay_us(); d > 0) std::this_thread::sleep_for(std::chrono::microseconds(d));
  int err = 0;
  std::string text;
  try {
    task.run();
  } catch (const KernelError &e) {
    err = ACL_ERROR_RT_AICORE_EXCEPTION;
    text = e.what();
  } catch (const std::exception &e) {
    err = ACL_ERROR_RT_INTERNAL_ERROR;
    text = e.what();
  }
  if (err == 0) return;
  std::lock_guard<std::mutex> lk(s->mu);
  if (s->sticky_error == 0) {
    s->sticky_error = err;
    s->error_text = text;
    std::fprintf(stderr, "[fake_cann] stream %d: task failed: %s\n", s->id, text.c_str());
  }
}

void worker_loop(Stream *s) {
  t_worker_stream = s;
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> lk(s->mu);
      s->work_cv.wait(lk, [s] { return s->stopping || !s->tasks.empty(); });
      if (s->tasks.empty()) return;
      task = std::move(s->tasks.front());
      s->tasks.pop_front();
    }
    run_task(s, task);
    if (task.release) task.release();
    std::lock_guard<std::mutex> lk(s->mu);
    ++s->completed;
    if (s->completed == s->enqueued) s->idle_cv.notify_all();
  }
}

Stream *make_stream(Context *ctx, bool is_default, uint32_t flags, uint32_t priority) {
  // A host may fork while another thread (a worker, a preloaded tool's thread) is inside the registry's lock or
  // inside task_delay_us()'s static initialization: the child would wait forever on a lock or guard held by a thread
  // it does not have. The registry's lock is held across fork(), and the delay is read here, on the creating thread,
  // before any worker exists.
  static const int atfork =
      pthread_atfork([] { g_registry_mu.lock(); }, [] { g_registry_mu.unlock(); }, [] { g_registry_mu.unlock(); });
  (void)atfork;
  (void)task_delay_us();
  auto *s = new Stream;
  s->id = g_next_stream_id.fetch_add(1);
  s->ctx = ctx;
  s->is_default = is_default;
  s->flags = flags;
  s->priority = priority;
  // The worker must not take the host's signals (a real device has no thread in the process).
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  s->worker = std::thread(worker_loop, s);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  std::lock_guard<std::mutex> lk(g_registry_mu);
  g_streams->insert(s);
  return s;
}

// The process's own default stream: what a NULL stream means on a thread without a context.
Stream *process_default_stream() {
  static Stream *d = make_stream(nullptr, true, 0, 0);
  return d;
}

}  // namespace

std::mutex &registry_mutex() { return g_registry_mu; }

Stream *make_default_stream(Context *ctx) { return make_stream(ctx, true, 0, 0); }

Stream *stream_create(uint32_t flags, uint32_t priority) {
  return make_stream(current_context(), false, flags, priority);
}

bool stream_destroy(Stream *s, bool force) {
  {
    std::lock_guard<std::mutex> lk(g_registry_mu);
    if (s == nullptr || g_streams->count(s) == 0 || s->is_default) return false;
    g_streams->erase(s);
    if (CapturedModel *m = s->bound) {  // the model keeps the stream's tasks, not the stream
      std::lock_guard<std::mutex> mk(m->mu);
      m->lanes[s->lane].stream = nullptr;
      s->bound = nullptr;
    }
  }
  std::deque<Task> dropped;
  if (force) {  // the tasks not yet started never run, a waiting one gives up (aclrtDestroyStreamForce)
    s->aborting = true;
    std::lock_guard<std::mutex> lk(s->mu);
    dropped.swap(s->tasks);
    s->enqueued -= dropped.size();
  }
  for (Task &t : dropped)
    if (t.release) t.release();
  stream_synchronize(s);
  {
    std::lock_guard<std::mutex> lk(s->mu);
    s->stopping = true;
  }
  s->work_cv.notify_all();
  if (s->worker.joinable()) s->worker.join();
  delete s;
  return true;
}

Stream *stream_resolve(void *handle, bool *ok) {
  if (handle == nullptr) {
    *ok = true;
    Context *c = current_context();
    return c != nullptr ? context_default_stream(c) : process_default_stream();
  }
  std::lock_guard<std::mutex> lk(g_registry_mu);
  auto *s = static_cast<Stream *>(handle);
  *ok = g_streams->count(s) != 0;
  return *ok ? s : nullptr;
}

int32_t stream_id(Stream *s) { return s->id; }
void stream_set_overflow_switch(Stream *s, uint32_t on) { s->overflow_switch = on; }
uint32_t stream_overflow_switch(Stream *s) { return s->overflow_switch; }
uint32_t stream_flags(Stream *s) { return s->flags; }
uint32_t stream_priority(Stream *s) { return s->priority; }

int stream_set_failure_mode(Stream *s, uint64_t mode) {
  if (mode > kStopOnFailure) {
    set_error_message("failure mode must be ACL_CONTINUE_ON_FAILURE or ACL_STOP_ON_FAILURE");
    return ACL_ERROR_INVALID_PARAM;
  }
  std::lock_guard<std::mutex> lk(s->mu);
  if (s->failure_mode == kStopOnFailure && mode != kStopOnFailure) {
    set_error_message("a stream in stop mode cannot go back to continue mode");
    return rt_error(ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
  }
  s->failure_mode = mode;
  return 0;
}

void stream_enqueue(Stream *s, std::function<void()> task, const char *what, std::function<void()> release) {
  stream_enqueue_task(s, Task{std::move(task), std::move(release), nullptr, what, {}});
}

void stream_enqueue_task(Stream *s, Task t) {
  {
    std::lock_guard<std::mutex> lk(s->mu);
    if (s->updating != nullptr) {  // a task update: replaces a task of the group when UpdateEnd runs
      s->update_tasks.push_back(std::move(t));
      return;
    }
    if (s->capture != nullptr) {  // recorded into the model, run at its replays
      std::lock_guard<std::mutex> mk(s->capture->mu);
      s->capture->tasks.push_back(std::move(t));
      return;
    }
    if (s->bound != nullptr) {  // a stream of a model being built: the task is part of the model
      std::lock_guard<std::mutex> mk(s->bound->mu);
      s->bound->lanes[s->lane].tasks.push_back(std::move(t));
      return;
    }
    s->tasks.push_back(std::move(t));
    ++s->enqueued;
  }
  s->work_cv.notify_one();
}

bool worker_wait_until(const std::function<bool()> &ready) {
  auto pause = std::chrono::microseconds(20);
  while (!ready()) {
    if (t_worker_stream != nullptr && t_worker_stream->aborting) return false;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
  return true;
}

void stream_launch_host_func(Stream *s, void (*fn)(void *), void *args) {
  stream_enqueue(s, [fn, args] { fn(args); }, "host_func");
}

namespace {

int wait_idle(Stream *s, int32_t timeout_ms, bool refuse_capturing) {
  std::unique_lock<std::mutex> lk(s->mu);
  if (refuse_capturing && s->capture != nullptr) {
    set_error_message("the stream is capturing: synchronize it after aclmdlRICaptureEnd");
    return rt_error(ACL_ERROR_RT_STREAM_CAPTURED);
  }
  uint64_t target = s->enqueued;
  auto done = [s, target] { return s->completed >= target; };
  if (timeout_ms >= 0) {
    if (!s->idle_cv.wait_for(lk, std::chrono::milliseconds(timeout_ms), done))
      return rt_error(ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
  } else {
    s->idle_cv.wait(lk, done);
  }
  int err = s->sticky_error;
  if (err != 0) set_error_message(s->error_text);
  s->sticky_error = 0;
  return rt_error(err);
}

}  // namespace

int stream_synchronize(Stream *s, int32_t timeout_ms) { return wait_idle(s, timeout_ms, true); }

int synchronize_all_streams() {
  std::set<Stream *> copy;
  {
    std::lock_guard<std::mutex> lk(g_registry_mu);
    copy = *g_streams;
  }
  int first = 0;
  for (Stream *s : copy) {
    int e = wait_idle(s, -1, false);  // a capturing stream's earlier tasks too
    if (first == 0) first = e;
  }
  return first;
}

// ---- capture ----

int stream_begin_capture(Stream *s, int mode) {
  if (mode != kCaptureGlobal && mode != kCaptureThreadLocal && mode != kCaptureRelaxed) {
    set_error_message("unknown capture mode " + std::to_string(mode));
    return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  }
  if (s->is_default) {
    set_error_message("the default stream cannot be captured");
    return rt_error(ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT);
  }
  auto *m = new CapturedModel;
  m->mode = mode;
  m->owner = std::this_thread::get_id();
  std::lock_guard<std::mutex> rk(g_registry_mu);
  std::lock_guard<std::mutex> lk(s->mu);
  if (s->capture != nullptr) {
    delete m;
    set_error_message("the stream is capturing already");
    return rt_error(ACL_ERROR_RT_STREAM_CAPTURED);
  }
  s->capture = m;
  g_capturing->insert(m);
  g_models->insert(m);
  return 0;
}

int stream_end_capture(Stream *s, CapturedModel **model) {
  if (model == nullptr) return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  std::lock_guard<std::mutex> rk(g_registry_mu);
  std::lock_guard<std::mutex> lk(s->mu);
  CapturedModel *m = s->capture;
  if (m == nullptr) {
    set_error_message("the stream is not capturing");
    return rt_error(ACL_ERROR_RT_STREAM_NOT_CAPTURED);
  }
  if (m->mode != kCaptureRelaxed && m->owner != std::this_thread::get_id()) {
    set_error_message("a capture not begun in relaxed mode must end on the thread that began it");
    return rt_error(ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD);
  }
  if (s->group != nullptr) {
    set_error_message("a task group is still open: end it with aclmdlRICaptureTaskGrpEnd first");
    return ACL_ERROR_STREAM_TASK_GROUP_STATUS;
  }
  s->capture = nullptr;
  g_capturing->erase(m);
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

// ---- task groups and their update ----

int stream_task_group_begin(Stream *s) {
  std::lock_guard<std::mutex> rk(g_registry_mu);
  std::lock_guard<std::mutex> lk(s->mu);
  if (s->capture == nullptr) {
    set_error_message("aclmdlRICaptureTaskGrpBegin on a stream that is not capturing");
    return rt_error(ACL_ERROR_RT_STREAM_NOT_CAPTURED);
  }
  if (s->group != nullptr) {
    set_error_message("a task group is open already on this stream");
    return ACL_ERROR_STREAM_TASK_GROUP_STATUS;
  }
  auto *g = new TaskGroup;
  g->model = s->capture;
  std::lock_guard<std::mutex> mk(g->model->mu);
  g->begin = g->end = g->model->tasks.size();
  s->group = g;
  return 0;
}

int stream_task_group_end(Stream *s, TaskGroup **group) {
  if (group == nullptr) return ACL_ERROR_INVALID_PARAM;
  std::lock_guard<std::mutex> rk(g_registry_mu);
  std::lock_guard<std::mutex> lk(s->mu);
  if (s->capture == nullptr) {
    set_error_message("aclmdlRICaptureTaskGrpEnd on a stream that is not capturing");
    return rt_error(ACL_ERROR_RT_STREAM_NOT_CAPTURED);
  }
  TaskGroup *g = s->group;
  if (g == nullptr) {
    set_error_message("aclmdlRICaptureTaskGrpEnd without aclmdlRICaptureTaskGrpBegin");
    return ACL_ERROR_STREAM_TASK_GROUP_STATUS;
  }
  std::lock_guard<std::mutex> mk(g->model->mu);
  g->end = g->model->tasks.size();
  g->model->groups.push_back(g);
  g_groups->insert(g);
  s->group = nullptr;
  *group = g;
  return 0;
}

int stream_task_update_begin(Stream *s, TaskGroup *group) {
  std::lock_guard<std::mutex> rk(g_registry_mu);
  if (group == nullptr || g_groups->count(group) == 0) {
    set_error_message("aclmdlRICaptureTaskUpdateBegin: not a task group of a live model");
    return ACL_ERROR_INVALID_PARAM;
  }
  std::lock_guard<std::mutex> lk(s->mu);
  if (s->capture != nullptr || s->updating != nullptr) {
    set_error_message("aclmdlRICaptureTaskUpdateBegin on a stream that is capturing or updating");
    return rt_error(ACL_ERROR_RT_STREAM_CAPTURED);
  }
  s->updating = group;
  s->update_tasks.clear();
  return 0;
}

int stream_task_update_end(Stream *s) {
  TaskGroup *g;
  std::vector<Task> tasks;
  {
    std::lock_guard<std::mutex> lk(s->mu);
    g = s->updating;
    if (g == nullptr) {
      set_error_message("aclmdlRICaptureTaskUpdateEnd without aclmdlRICaptureTaskUpdateBegin");
      return ACL_ERROR_STREAM_TASK_GROUP_STATUS;
    }
    s->updating = nullptr;
    tasks.swap(s->update_tasks);
  }
  if (tasks.size() != g->end - g->begin) {
    set_error_message("a task update gave " + std::to_string(tasks.size()) + " tasks for a group of " +
                      std::to_string(g->end - g->begin));
    for (Task &t : tasks)
      if (t.release) t.release();
    return rt_error(ACL_ERROR_RT_MODEL_UPDATE_FAILED);
  }
  // The update reaches the model when the update stream does (the device applies it in order with that stream).
  auto shared = std::make_shared<std::vector<Task>>(std::move(tasks));
  stream_enqueue(
      s,
      [g, shared] {
        std::lock_guard<std::mutex> mk(g->model->mu);
        for (size_t i = 0; i < shared->size(); ++i) {
          g->model->retired.push_back(std::move(g->model->tasks[g->begin + i]));
          g->model->tasks[g->begin + i] = std::move((*shared)[i]);
        }
        shared->clear();
      },
      "task_update",
      [shared] {
        for (Task &t : *shared)  // never applied (a failed stream): let them go
          if (t.release) t.release();
      });
  return 0;
}

namespace {

// Under g_registry_mu: 0 when `m` is a model whose capture ended, else the error code.
// A built model may be destroyed before aclmdlRIBuildEnd (`destroying`), not executed.
int check_ended_model(CapturedModel *m, bool destroying = false) {
  if (m == nullptr || g_models->count(m) == 0) return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  if (m->built && !m->ended && !destroying) {
    set_error_message("the model is still being built: call aclmdlRIBuildEnd first");
    return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  }
  if (!m->built && !m->ended) {
    set_error_message("the model is still being captured");
    return rt_error(ACL_ERROR_RT_MODEL_CAPTURED);
  }
  return 0;
}

}  // namespace

void register_model(CapturedModel *m) { g_models->insert(m); }
bool model_live(CapturedModel *m) { return m != nullptr && g_models->count(m) != 0; }

namespace {

}  // namespace

int captured_model_execute(CapturedModel *m, Stream *s) {
  std::vector<uint64_t> records;  // this replay's record numbers of the model's external records, in task order
  {
    std::lock_guard<std::mutex> rk(g_registry_mu);
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
  if (m->built) {
    stream_enqueue(s, [m] { run_built_model(m); }, "aclmdlRIExecuteAsync", done);
    return 0;
  }
  stream_enqueue(
      s,
      [m, records] {
        // Each task is read when the replay reaches it: a task update applied meanwhile is in force.
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
      },
      "aclmdlRIExecuteAsync", done);
  return 0;
}

int captured_model_destroy(CapturedModel *m) {
  std::vector<Task> tasks;
  {
    std::lock_guard<std::mutex> rk(g_registry_mu);
    if (int e = check_ended_model(m, true)) return e;
    std::lock_guard<std::mutex> mk(m->mu);
    if (m->running != 0) {
      set_error_message("the model is still running: synchronize its stream first");
      return rt_error(ACL_ERROR_RT_MODEL_RUNNING);
    }
    g_models->erase(m);
    for (TaskGroup *g : m->groups) g_groups->erase(g);
    tasks.swap(m->tasks);
    for (Task &t : m->retired) tasks.push_back(std::move(t));
    release_bound_streams(m);
    for (Lane &l : m->lanes)
      for (Task &t : l.tasks) tasks.push_back(std::move(t));
  }
  for (Task &t : tasks)
    if (t.release) t.release();
  for (TaskGroup *g : m->groups) delete g;
  delete m;
  return 0;
}

int64_t captured_model_tasks(CapturedModel *m) {
  std::lock_guard<std::mutex> rk(g_registry_mu);
  if (m == nullptr || g_models->count(m) == 0) return -1;
  std::lock_guard<std::mutex> mk(m->mu);
  return (int64_t)m->tasks.size();
}

int captured_model_write_json(CapturedModel *m, const char *path) {
  std::vector<std::string> names;
  {
    std::lock_guard<std::mutex> rk(g_registry_mu);
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
  for (size_t i = 0; i < names.size(); ++i) f << (i ? ", " : "") << "{\"index\": " << i << ", \"type\": \"" << names[i] << "\"}";
  f << "]}\n";
  return f ? 0 : ACL_ERROR_WRITE_FILE;
}

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
  std::lock_guard<std::mutex> rk(g_registry_mu);
  for (CapturedModel *m : *g_capturing) {
    const bool own = m->owner == std::this_thread::get_id();
    if ((own && m->mode != kCaptureRelaxed) || (t_capture_mode == kCaptureGlobal && m->mode == kCaptureGlobal)) {
      set_error_message(
          "an unsafe call (synchronous copy or memset, copy from pageable host memory) while a stream "
          "is capturing in a mode that forbids it");
      return rt_error(ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT);
    }
  }
  return 0;
}

}  // namespace fakecann
