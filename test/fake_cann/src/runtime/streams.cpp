// Streams (one worker thread each): their tasks, failures and synchronization. What a capturing stream or a stream
// updating a task group receives is capture.cpp's, events are events.cpp's, contexts contexts.cpp's.
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
std::atomic<int32_t> g_next_stream_id{0};
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
  // Named as real CANN names its threads: a benchmark tells each stream's worker by its comm (at most 15 bytes).
  pthread_setname_np(pthread_self(), ("fake_stream" + std::to_string(s->id % 10000)).c_str());
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
  // Another thread resetting its device may be synchronizing this stream still (synchronize_all_streams): it is done
  // at once (the stream is idle now), then the memory goes.
  while (s->pins.load(std::memory_order_acquire) != 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
  delete s;
  return true;
}

int stream_destroy_checked(Stream *s, bool force) {
  {
    std::lock_guard<std::mutex> lk(g_registry_mu);
    if (s == nullptr || g_streams->count(s) == 0 || s->is_default) return rt_error(ACL_ERROR_RT_PARAM_INVALID);
    std::lock_guard<std::mutex> sl(s->mu);
    if (s->capture != nullptr) {  // api_error.cc StreamDestroy
      set_error_message("a stream cannot be destroyed while it is capturing");
      return rt_error(ACL_ERROR_RT_STREAM_CAPTURED);
    }
  }
  return stream_destroy(s, force) ? 0 : rt_error(ACL_ERROR_RT_PARAM_INVALID);
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

int stream_enqueue(Stream *s, std::function<void()> task, const char *what, std::function<void()> release) {
  return stream_enqueue_task(s, Task{std::move(task), std::move(release), nullptr, what, {}, false});
}

int stream_enqueue_kernel(Stream *s, std::function<void()> task, const char *what, std::function<void()> release) {
  return stream_enqueue_task(s, Task{std::move(task), std::move(release), nullptr, what, {}, true});
}

int stream_enqueue_task(Stream *s, Task t) {
  {
    std::lock_guard<std::mutex> lk(s->mu);
    if (s->updating != nullptr) {  // a task update: `t` becomes the task that applies it when the stream gets there
      if (int e = update_task(s, t)) return e;
    } else if (s->capture != nullptr) {  // recorded into the model, run at its replays
      return capture_task(s, std::move(t));
    } else if (s->bound != nullptr) {  // a stream of a model being built: the task is part of the model
      std::lock_guard<std::mutex> mk(s->bound->mu);
      s->bound->lanes[s->lane].tasks.push_back(std::move(t));
      return 0;
    }
    s->tasks.push_back(std::move(t));
    ++s->enqueued;
  }
  s->work_cv.notify_one();
  return 0;
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

int stream_launch_host_func(Stream *s, void (*fn)(void *), void *args) {
  return stream_enqueue(s, [fn, args] { fn(args); }, "host_func");
}

namespace {

int wait_idle(Stream *s, int32_t timeout_ms, bool refuse_capturing) {
  std::unique_lock<std::mutex> lk(s->mu);
  if (refuse_capturing && s->capture != nullptr) {
    set_error_message("the stream is capturing: synchronize it after aclmdlRICaptureEnd");
    return rt_error(ACL_ERROR_RT_STREAM_CAPTURED);
  }
  uint64_t target = s->enqueued;
  // min: tasks a forced destroy drops (aclrtDestroyStreamForce) never complete, and are no longer waited for.
  auto done = [s, target] { return s->completed >= std::min(target, s->enqueued); };
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

bool any_stream_capturing() {
  std::lock_guard<std::mutex> lk(g_registry_mu);
  for (Stream *s : *g_streams) {
    std::lock_guard<std::mutex> sl(s->mu);
    if (s->capture != nullptr) return true;
  }
  return false;
}

int synchronize_all_streams() {
  std::set<Stream *> copy;
  {
    std::lock_guard<std::mutex> lk(g_registry_mu);
    copy = *g_streams;
    for (Stream *s : copy) s->pins.fetch_add(1, std::memory_order_relaxed);  // not deleted under us (stream_destroy)
  }
  int first = 0;
  for (Stream *s : copy) {
    int e = wait_idle(s, -1, false);  // a capturing stream's earlier tasks too
    if (first == 0) first = e;
    s->pins.fetch_sub(1, std::memory_order_release);
  }
  return first;
}

}  // namespace fakecann
