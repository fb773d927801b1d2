// Streams (one worker thread each), events, the per-thread current device and error message.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "acl/acl_base.h"
#include "fakecann/stream.h"

namespace fakecann {

struct Task {
  std::function<void()> run, release;
};

// A model runtime instance made by capture: the tasks, in the order the capturing stream received them.
struct CapturedModel {
  std::mutex mu;
  std::vector<Task> tasks;
  int mode = kCaptureGlobal;
  std::thread::id owner;  // the thread that began the capture
  bool ended = false;
  int running = 0;  // replays enqueued and not yet finished
};

struct Stream {
  int32_t id = 0;
  std::mutex mu;
  std::condition_variable work_cv, idle_cv;
  std::deque<Task> tasks;
  CapturedModel *capture = nullptr;  // set while the stream is capturing
  uint64_t enqueued = 0, completed = 0;
  bool stopping = false;
  int sticky_error = 0;
  std::string error_text;
  std::thread worker;
};

struct Event {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t recorded = 0;   // how many records were issued
  uint64_t completed = 0;  // how many records have executed
};

namespace {

std::mutex g_registry_mu;
std::set<Stream *> *g_streams = new std::set<Stream *>;  // leaked: streams outlive static destructors
std::set<Event *> *g_events = new std::set<Event *>;
// Models being captured and made (under g_registry_mu).
std::set<CapturedModel *> *g_capturing = new std::set<CapturedModel *>;
std::set<CapturedModel *> *g_models = new std::set<CapturedModel *>;
std::atomic<int32_t> g_next_stream_id{0};

long task_delay_us() {
  static long d = [] {
    const char *s = std::getenv("FAKE_CANN_TASK_DELAY_US");
    return s ? std::strtol(s, nullptr, 10) : 0L;
  }();
  return d;
}

void worker_loop(Stream *s) {
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> lk(s->mu);
      s->work_cv.wait(lk, [s] { return s->stopping || !s->tasks.empty(); });
      if (s->tasks.empty()) return;
      task = std::move(s->tasks.front());
      s->tasks.pop_front();
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
    if (task.release) task.release();
    std::lock_guard<std::mutex> lk(s->mu);
    if (err != 0 && s->sticky_error == 0) {
      s->sticky_error = err;
      s->error_text = text;
      std::fprintf(stderr, "[fake_cann] stream %d: task failed: %s\n", s->id, text.c_str());
    }
    ++s->completed;
    if (s->completed == s->enqueued) s->idle_cv.notify_all();
  }
}

Stream *make_stream() {
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
  // The worker must not take the host's signals (a real device has no thread in the process).
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  s->worker = std::thread(worker_loop, s);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return s;
}

Stream *default_stream() {
  static Stream *d = [] {
    Stream *s = make_stream();
    std::lock_guard<std::mutex> lk(g_registry_mu);
    g_streams->insert(s);
    return s;
  }();
  return d;
}

thread_local int32_t t_current_device = -1;
thread_local std::string t_error_message;

}  // namespace

Stream *stream_create() {
  Stream *s = make_stream();
  std::lock_guard<std::mutex> lk(g_registry_mu);
  g_streams->insert(s);
  return s;
}

bool stream_destroy(Stream *s) {
  Stream *dflt = default_stream();  // before taking g_registry_mu: its first call takes it too
  {
    std::lock_guard<std::mutex> lk(g_registry_mu);
    if (s == nullptr || s == dflt || g_streams->erase(s) == 0) return false;
  }
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
    return default_stream();
  }
  std::lock_guard<std::mutex> lk(g_registry_mu);
  auto *s = static_cast<Stream *>(handle);
  *ok = g_streams->count(s) != 0;
  return *ok ? s : nullptr;
}

int32_t stream_id(Stream *s) { return s->id; }

void stream_enqueue(Stream *s, std::function<void()> task, const char * /*what*/, std::function<void()> release) {
  {
    std::lock_guard<std::mutex> lk(s->mu);
    if (s->capture != nullptr) {  // recorded into the model, run at its replays
      std::lock_guard<std::mutex> mk(s->capture->mu);
      s->capture->tasks.push_back(Task{std::move(task), std::move(release)});
      return;
    }
    s->tasks.push_back(Task{std::move(task), std::move(release)});
    ++s->enqueued;
  }
  s->work_cv.notify_one();
}

namespace {

int wait_idle(Stream *s, int32_t timeout_ms, bool refuse_capturing) {
  std::unique_lock<std::mutex> lk(s->mu);
  if (refuse_capturing && s->capture != nullptr) {
    set_error_message("the stream is capturing: synchronize it after aclmdlRICaptureEnd");
    return ACL_ERROR_RT_STREAM_CAPTURED;
  }
  uint64_t target = s->enqueued;
  auto done = [s, target] { return s->completed >= target; };
  if (timeout_ms >= 0) {
    if (!s->idle_cv.wait_for(lk, std::chrono::milliseconds(timeout_ms), done)) return ACL_ERROR_RT_STREAM_SYNC_TIMEOUT;
  } else {
    s->idle_cv.wait(lk, done);
  }
  int err = s->sticky_error;
  if (err != 0) set_error_message(s->error_text);
  s->sticky_error = 0;
  return err;
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
    return ACL_ERROR_RT_PARAM_INVALID;
  }
  if (s == default_stream()) {
    set_error_message("the default stream cannot be captured");
    return ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT;
  }
  auto *m = new CapturedModel;
  m->mode = mode;
  m->owner = std::this_thread::get_id();
  std::lock_guard<std::mutex> rk(g_registry_mu);
  std::lock_guard<std::mutex> lk(s->mu);
  if (s->capture != nullptr) {
    delete m;
    set_error_message("the stream is capturing already");
    return ACL_ERROR_RT_STREAM_CAPTURED;
  }
  s->capture = m;
  g_capturing->insert(m);
  g_models->insert(m);
  return 0;
}

int stream_end_capture(Stream *s, CapturedModel **model) {
  if (model == nullptr) return ACL_ERROR_RT_PARAM_INVALID;
  std::lock_guard<std::mutex> rk(g_registry_mu);
  std::lock_guard<std::mutex> lk(s->mu);
  CapturedModel *m = s->capture;
  if (m == nullptr) {
    set_error_message("the stream is not capturing");
    return ACL_ERROR_RT_STREAM_NOT_CAPTURED;
  }
  if (m->mode != kCaptureRelaxed && m->owner != std::this_thread::get_id()) {
    set_error_message("a capture not begun in relaxed mode must end on the thread that began it");
    return ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD;
  }
  s->capture = nullptr;
  g_capturing->erase(m);
  m->ended = true;
  *model = m;
  return 0;
}

int stream_capture_info(Stream *s, int *status, CapturedModel **model) {
  if (status == nullptr || model == nullptr) return ACL_ERROR_RT_PARAM_INVALID;
  std::lock_guard<std::mutex> lk(s->mu);
  *status = s->capture != nullptr ? kCaptureActive : kCaptureNone;
  if (s->capture != nullptr) *model = s->capture;
  return 0;
}

bool stream_capturing(Stream *s) {
  std::lock_guard<std::mutex> lk(s->mu);
  return s->capture != nullptr;
}

namespace {

// Under g_registry_mu: 0 when `m` is a model whose capture ended, else the error code.
int check_ended_model(CapturedModel *m) {
  if (m == nullptr || g_models->count(m) == 0) return ACL_ERROR_RT_PARAM_INVALID;
  if (!m->ended) {
    set_error_message("the model is still being captured");
    return ACL_ERROR_RT_MODEL_CAPTURED;
  }
  return 0;
}

}  // namespace

int captured_model_execute(CapturedModel *m, Stream *s) {
  {
    std::lock_guard<std::mutex> rk(g_registry_mu);
    if (int e = check_ended_model(m)) return e;
    std::lock_guard<std::mutex> mk(m->mu);
    ++m->running;
  }
  stream_enqueue(
      s,
      [m] {
        std::vector<Task> tasks;
        {
          std::lock_guard<std::mutex> mk(m->mu);
          tasks = m->tasks;  // copies of the closures: the model keeps its own
        }
        for (Task &t : tasks) t.run();
      },
      "aclmdlRIExecuteAsync",
      [m] {
        std::lock_guard<std::mutex> mk(m->mu);
        --m->running;
      });
  return 0;
}

int captured_model_destroy(CapturedModel *m) {
  std::vector<Task> tasks;
  {
    std::lock_guard<std::mutex> rk(g_registry_mu);
    if (int e = check_ended_model(m)) return e;
    std::lock_guard<std::mutex> mk(m->mu);
    if (m->running != 0) {
      set_error_message("the model is still running: synchronize its stream first");
      return ACL_ERROR_RT_MODEL_RUNNING;
    }
    g_models->erase(m);
    tasks.swap(m->tasks);
  }
  for (Task &t : tasks)
    if (t.release) t.release();
  delete m;
  return 0;
}

int64_t captured_model_tasks(CapturedModel *m) {
  std::lock_guard<std::mutex> rk(g_registry_mu);
  if (m == nullptr || g_models->count(m) == 0) return -1;
  std::lock_guard<std::mutex> mk(m->mu);
  return (int64_t)m->tasks.size();
}

int capture_forbids_unsafe_call() {
  std::lock_guard<std::mutex> rk(g_registry_mu);
  for (CapturedModel *m : *g_capturing)
    if (m->mode == kCaptureGlobal || (m->mode == kCaptureThreadLocal && m->owner == std::this_thread::get_id())) {
      set_error_message(
          "an unsafe call (synchronous copy or memset, copy from pageable host memory) while a stream "
          "is capturing in a mode that forbids it");
      return ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT;
    }
  return 0;
}

Event *event_create() {
  auto *e = new Event;
  std::lock_guard<std::mutex> lk(g_registry_mu);
  g_events->insert(e);
  return e;
}

bool event_destroy(Event *e) {
  std::lock_guard<std::mutex> lk(g_registry_mu);
  if (g_events->erase(e) == 0) return false;
  // Tasks already enqueued may still reference it; leak rather than free under them.
  return true;
}

bool event_valid(Event *e) {
  std::lock_guard<std::mutex> lk(g_registry_mu);
  return g_events->count(e) != 0;
}

void event_record(Event *e, Stream *s) {
  uint64_t seq;
  {
    std::lock_guard<std::mutex> lk(e->mu);
    seq = ++e->recorded;
  }
  stream_enqueue(
      s,
      [e, seq] {
        std::lock_guard<std::mutex> lk(e->mu);
        if (e->completed < seq) e->completed = seq;
        e->cv.notify_all();
      },
      "event_record");
}

void stream_wait_event(Stream *s, Event *e) {
  uint64_t target;
  {
    std::lock_guard<std::mutex> lk(e->mu);
    target = e->recorded;
  }
  stream_enqueue(
      s,
      [e, target] {
        std::unique_lock<std::mutex> lk(e->mu);
        e->cv.wait(lk, [e, target] { return e->completed >= target; });
      },
      "stream_wait_event");
}

void event_synchronize(Event *e) {
  std::unique_lock<std::mutex> lk(e->mu);
  uint64_t target = e->recorded;
  e->cv.wait(lk, [e, target] { return e->completed >= target; });
}

bool event_completed(Event *e) {
  std::lock_guard<std::mutex> lk(e->mu);
  return e->completed >= e->recorded;
}

int32_t current_device() { return t_current_device; }
void set_current_device(int32_t dev) { t_current_device = dev; }

int32_t device_count() {
  static int32_t n = [] {
    const char *s = std::getenv("FAKE_CANN_DEVICE_COUNT");
    long v = s ? std::strtol(s, nullptr, 10) : 8;
    return (int32_t)((v >= 1 && v <= 64) ? v : 8);
  }();
  return n;
}

void set_error_message(const std::string &msg) { t_error_message = msg; }
const char *error_message() { return t_error_message.c_str(); }

}  // namespace fakecann
