// tiny_npu's launch queue: the native consumer thread of torch_npu's task queue in miniature.
//
// The Python thread does phase 1 of an aclnn op (argument conversion, aclnnXGetWorkspaceSize,
// workspace allocation) and submits the rest here. This thread, which has no Python frames, then
// runs phase 2 on the stream and destroys the converted arguments, exactly the split torch_npu
// uses with TASK_QUEUE_ENABLE=1. Every CANN function arrives as a pointer the Python side found
// by dlsym, so this library has no link dependency on the CANN libraries.
#include <pthread.h>

#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

extern "C" {

// One native call of a queue item. `kind` says how `fn` is called:
//   TNQ_RELEASE  int fn(void *a0)                                    aclDestroyTensor & co.
//   TNQ_SET_ADDR int fn(void *a0, size_t a1, void *a2, void *a3)     aclSetTensorAddr(executor, index, tensor, addr)
//   TNQ_PHASE2   int fn(void *a0, uint64_t a1, void *a2, void *a3)   aclnnX(workspace, size, executor, stream)
//   TNQ_CALL     int fn(void *a0, void *a1, void *a2, void *a3)      any other four-pointer call
//   TNQ_SET_DYN_ADDR int fn(void *a0, size_t a1, size_t a2, void *a3, void *a4)
//                                        aclSetDynamicTensorAddr(executor, irIndex, relIndex, list, addr)
enum { TNQ_RELEASE = 0, TNQ_SET_ADDR = 1, TNQ_PHASE2 = 2, TNQ_CALL = 3, TNQ_SET_DYN_ADDR = 4 };

struct tnq_call {
  int32_t kind;
  void *fn;
  uintptr_t a[5];
};

}  // extern "C"

namespace {

using Release = int (*)(void *);
using SetAddr = int (*)(void *, size_t, void *, void *);
using Phase2 = int (*)(void *, uint64_t, void *, void *);
using Call4 = int (*)(void *, void *, void *, void *);
using SetDynAddr = int (*)(void *, size_t, size_t, void *, void *);
using SetDevice = int (*)(int32_t);

struct Item {
  std::string what;  // for error messages: "aclnnAdd"
  std::vector<tnq_call> calls;
};

class TaskQueue {
 public:
  // threaded == false: TASK_QUEUE_ENABLE=0, every item runs at once on the submitting thread.
  TaskQueue(int32_t device, SetDevice set_device, bool threaded)
      : device_(device), set_device_(set_device), threaded_(threaded) {
    if (threaded_) worker_ = std::thread([this] { run(); });
  }

  ~TaskQueue() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    if (worker_.joinable()) worker_.join();
  }

  void submit(Item item) {
    if (!threaded_) {
      execute(item);
      std::lock_guard<std::mutex> lk(mu_);
      ++submitted_;
      ++completed_;
      return;
    }
    {
      std::lock_guard<std::mutex> lk(mu_);
      items_.push_back(std::move(item));
      ++submitted_;
    }
    wake_.notify_one();
  }

  // CPU time the consumer thread has used, in ns (0 without one): lets a benchmark charge the cost of a launch
  // to the threads that launch, not to the device's threads that share the machine's cores.
  uint64_t worker_cpu_ns() {
    clockid_t clock;
    timespec ts;
    if (!threaded_ || pthread_getcpuclockid(worker_.native_handle(), &clock) != 0 || clock_gettime(clock, &ts) != 0)
      return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
  }

  // Waits until everything submitted so far has run; returns (and clears) the first error.
  int drain(std::string *message) {
    std::unique_lock<std::mutex> lk(mu_);
    uint64_t target = submitted_;
    done_cv_.wait(lk, [&] { return completed_ >= target; });
    int rc = error_;
    *message = error_text_;
    error_ = 0;
    error_text_.clear();
    return rc;
  }

 private:
  void run() {
    // The consumer thread needs its own current device, as torch_npu's does (SetDevice on start).
    int rc = set_device_ ? set_device_(device_) : 0;
    if (rc != 0) record(rc, "aclrtSetDevice(" + std::to_string(device_) + ") on the task-queue thread");
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
      wake_.wait(lk, [&] { return stop_ || !items_.empty(); });
      if (items_.empty()) return;  // stop_ and nothing left
      Item item = std::move(items_.front());
      items_.pop_front();
      lk.unlock();
      execute(item);
      lk.lock();
      ++completed_;
      done_cv_.notify_all();
    }
  }

  void execute(const Item &item) {
    for (const tnq_call &c : item.calls) {
      int rc = 0;
      auto p = [&](int i) { return reinterpret_cast<void *>(c.a[i]); };
      switch (c.kind) {
        case TNQ_RELEASE: rc = reinterpret_cast<Release>(c.fn)(p(0)); break;
        case TNQ_SET_ADDR: rc = reinterpret_cast<SetAddr>(c.fn)(p(0), (size_t)c.a[1], p(2), p(3)); break;
        case TNQ_PHASE2: rc = reinterpret_cast<Phase2>(c.fn)(p(0), (uint64_t)c.a[1], p(2), p(3)); break;
        case TNQ_CALL: rc = reinterpret_cast<Call4>(c.fn)(p(0), p(1), p(2), p(3)); break;
        case TNQ_SET_DYN_ADDR:
          rc = reinterpret_cast<SetDynAddr>(c.fn)(p(0), (size_t)c.a[1], (size_t)c.a[2], p(3), p(4));
          break;
        default: rc = -1;
      }
      // Keep going after a failure so that every handle of the item is still released.
      if (rc != 0) record(rc, item.what + " (call kind " + std::to_string(c.kind) + ")");
    }
  }

  void record(int rc, const std::string &what) {
    std::lock_guard<std::mutex> lk(mu_);
    if (error_ == 0) {
      error_ = rc;
      error_text_ = what + " returned " + std::to_string(rc);
    }
  }

  int32_t device_;
  SetDevice set_device_;
  bool threaded_;
  std::mutex mu_;
  std::condition_variable wake_, done_cv_;
  std::deque<Item> items_;
  uint64_t submitted_ = 0, completed_ = 0;
  bool stop_ = false;
  int error_ = 0;
  std::string error_text_;
  std::thread worker_;
};

thread_local std::string t_last_error;

}  // namespace

extern "C" {

// threaded != 0: a consumer thread that first calls set_device_fn(device); 0: run items inline.
__attribute__((visibility("default"))) void *tnq_create(int32_t device, void *set_device_fn, int32_t threaded) {
  return new TaskQueue(device, reinterpret_cast<SetDevice>(set_device_fn), threaded != 0);
}

// Runs the remaining items, then stops and joins the thread.
__attribute__((visibility("default"))) void tnq_destroy(void *q) { delete static_cast<TaskQueue *>(q); }

// Enqueues one item: `n` calls run in order on the queue thread. The array is copied.
__attribute__((visibility("default"))) int tnq_submit(void *q, const char *what, const tnq_call *calls, size_t n) {
  if (q == nullptr || (n > 0 && calls == nullptr)) return -1;
  Item item{what ? what : "?", std::vector<tnq_call>(calls, calls + n)};
  static_cast<TaskQueue *>(q)->submit(std::move(item));
  return 0;
}

// The torch_npu-shaped launch: phase 2 of an aclnn op, then the destruction of its converted
// arguments (destroy_fns[i](handles[i])).
__attribute__((visibility("default"))) int tnq_launch(void *q, const char *what, void *phase2, void *workspace,
                                                      uint64_t workspace_size, void *executor, void *stream,
                                                      void *const *destroy_fns, void *const *handles, size_t n) {
  if (q == nullptr || phase2 == nullptr || (n > 0 && (destroy_fns == nullptr || handles == nullptr))) return -1;
  Item item{what ? what : "?", {}};
  item.calls.reserve(n + 1);
  item.calls.push_back({TNQ_PHASE2, phase2, {(uintptr_t)workspace, (uintptr_t)workspace_size,
                                             (uintptr_t)executor, (uintptr_t)stream, 0}});
  for (size_t i = 0; i < n; ++i) item.calls.push_back({TNQ_RELEASE, destroy_fns[i], {(uintptr_t)handles[i], 0, 0, 0, 0}});
  static_cast<TaskQueue *>(q)->submit(std::move(item));
  return 0;
}

// Blocks until every submitted item ran. Returns 0 or the first nonzero return code of a queued
// call since the last drain (its description is then in tnq_last_error()).
__attribute__((visibility("default"))) int tnq_drain(void *q) {
  if (q == nullptr) return -1;
  int rc = static_cast<TaskQueue *>(q)->drain(&t_last_error);
  return rc;
}

// CPU time of the consumer thread in ns; 0 for an inline (TASK_QUEUE_ENABLE=0) queue.
__attribute__((visibility("default"))) uint64_t tnq_worker_cpu_ns(void *q) {
  return q == nullptr ? 0 : static_cast<TaskQueue *>(q)->worker_cpu_ns();
}

__attribute__((visibility("default"))) const char *tnq_last_error(void) { return t_last_error.c_str(); }

}  // extern "C"
