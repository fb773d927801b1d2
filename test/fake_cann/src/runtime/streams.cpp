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
#include <thread>

#include "acl/acl_base.h"
#include "fakecann/stream.h"

namespace fakecann {

struct Stream {
  int32_t id = 0;
  std::mutex mu;
  std::condition_variable work_cv, idle_cv;
  std::deque<std::function<void()>> tasks;
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
    std::function<void()> task;
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
      task();
    } catch (const KernelError &e) {
      err = ACL_ERROR_RT_AICORE_EXCEPTION;
      text = e.what();
    } catch (const std::exception &e) {
      err = ACL_ERROR_RT_INTERNAL_ERROR;
      text = e.what();
    }
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

void stream_enqueue(Stream *s, std::function<void()> task, const char * /*what*/) {
  {
    std::lock_guard<std::mutex> lk(s->mu);
    s->tasks.push_back(std::move(task));
    ++s->enqueued;
  }
  s->work_cv.notify_one();
}

int stream_synchronize(Stream *s, int32_t timeout_ms) {
  std::unique_lock<std::mutex> lk(s->mu);
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

int synchronize_all_streams() {
  std::set<Stream *> copy;
  {
    std::lock_guard<std::mutex> lk(g_registry_mu);
    copy = *g_streams;
  }
  int first = 0;
  for (Stream *s : copy) {
    int e = stream_synchronize(s);
    if (first == 0) first = e;
  }
  return first;
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
