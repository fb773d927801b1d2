#include "shim/device/staging.h"

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <vector>

#include "acl/acl.h"
#include "shim/base/log.h"
#include "shim/device/runtime_api.h"

namespace msprobe::shim {
namespace {

using MallocHost = int32_t (*)(void **, size_t);
using FreeHost = int32_t (*)(void *);

constexpr uint64_t kMaxWaitNs = uint64_t{10} * 1000000000;  // see acquire()

// Bytes this thread copied since its last fence() (see staging.h). Trivial TLS: no destructor to register.
thread_local uint64_t tl_unsubmitted __attribute__((tls_model("initial-exec"))) = 0;

uint64_t elapsed_ns(std::chrono::steady_clock::time_point t0) {
  return (uint64_t)std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

uint64_t Staging::size_class(uint64_t bytes) {
  constexpr uint64_t kMin = 4096;
  if (bytes <= kMin) return kMin;
  // 2^k < bytes <= 2^(k+1): the next multiple of 2^k / 4 (at most 25% rounding).
  const int k = 63 - __builtin_clzll(bytes - 1);
  const uint64_t step = (uint64_t{1} << k) / 4;
  return (bytes + step - 1) / step * step;
}

struct Staging::State {
  uint64_t budget;
  mutable std::mutex mu;
  std::condition_variable cv;
  uint64_t in_use = 0;                           // bytes (class sizes) of buffers handed out
  uint64_t idle = 0;                             // bytes of buffers waiting in the pool
  uint64_t unsubmitted = 0;                      // bytes of in-use buffers of launches not fenced yet (all threads)
  std::map<uint64_t, std::vector<void *>> pool;  // class size -> idle buffers
  StagingCounters counters;

  // Frees idle buffers, largest classes first, until `target` more bytes fit in the budget. Caller holds mu.
  void make_room(uint64_t target, FreeHost free_host) {
    for (auto it = pool.end(); it != pool.begin() && in_use + idle + target > budget;) {
      --it;
      while (!it->second.empty() && in_use + idle + target > budget) {
        if (free_host) free_host(it->second.back());
        it->second.pop_back();
        idle -= it->first;
        ++counters.host_frees;
      }
    }
  }

  // A pinned buffer of class `cls`, from the pool or the runtime; nullptr when the runtime has none.
  void *acquire(uint64_t cls, MallocHost malloc_host, FreeHost free_host) {
    std::unique_lock<std::mutex> lk(mu);
    bool waited = false;
    std::chrono::steady_clock::time_point t0;
    void *p = nullptr;
    for (;;) {
      if (auto it = pool.find(cls); it != pool.end() && !it->second.empty()) {
        p = it->second.back();
        it->second.pop_back();
        idle -= cls;
        ++counters.reuses;
        break;
      }
      // Waiting helps only if some buffer in use belongs to a launch already handed to the collector. It is
      // bounded all the same: a stream held up by the host itself (waiting for an event this thread has yet to
      // record) would never let those buffers go, and the host must not hang.
      const bool only_unsubmitted = in_use <= unsubmitted;
      const bool waited_too_long = waited && elapsed_ns(t0) >= kMaxWaitNs;
      if (in_use + cls <= budget || only_unsubmitted || waited_too_long) {
        if (waited_too_long && counters.wait_timeouts++ == 0)
          log_warn(
              "MSPROBE_BUFFER_MB: waited %llu s for staged tensors to be written; going over the budget "
              "instead of waiting longer",
              (unsigned long long)(kMaxWaitNs / 1000000000));
        if (in_use + cls > budget) ++counters.overshoots;
        make_room(cls, free_host);
        in_use += cls;  // reserved while the runtime allocates, outside the lock
        lk.unlock();
        if (malloc_host(&p, cls) != ACL_SUCCESS) p = nullptr;
        lk.lock();
        if (p == nullptr) {
          in_use -= cls;
          cv.notify_all();
          if (waited) counters.wait_ns += elapsed_ns(t0);
          return nullptr;
        }
        ++counters.host_allocs;
        in_use -= cls;  // counted once, below
        break;
      }
      if (!waited) {
        waited = true;
        ++counters.budget_waits;
        t0 = std::chrono::steady_clock::now();
      }
      cv.wait_for(lk, std::chrono::milliseconds(100));
    }
    if (waited) counters.wait_ns += elapsed_ns(t0);
    in_use += cls;
    if (in_use > counters.high_water) counters.high_water = in_use;
    if (in_use + idle > counters.pool_high_water) counters.pool_high_water = in_use + idle;
    return p;
  }

  void release(void *p, uint64_t cls, FreeHost free_host) {
    {
      std::lock_guard<std::mutex> lk(mu);
      in_use -= cls;
      if (cls <= budget) {
        pool[cls].push_back(p);
        idle += cls;
      } else {
        if (free_host) free_host(p);
        ++counters.host_frees;
      }
    }
    cv.notify_all();
  }
};

namespace {

class PinnedBlock final : public record::HostBlock {
 public:
  PinnedBlock(std::shared_ptr<Staging::State> st, void *p, uint64_t n, uint64_t cls)
      : state_(std::move(st)), p_(p), n_(n), cls_(cls) {}
  ~PinnedBlock() override { state_->release(p_, cls_, runtime::aclrtFreeHost.get()); }
  const void *data() const override { return p_; }
  uint64_t size() const override { return n_; }

 private:
  std::shared_ptr<Staging::State> state_;
  void *p_;
  uint64_t n_, cls_;
};

class EventCompletion final : public record::Completion {
 public:
  explicit EventCompletion(aclrtEvent e) : event_(e) {}
  ~EventCompletion() override {
    if (auto f = runtime::aclrtDestroyEvent.get()) f(event_);
  }
  bool wait() override {
    auto f = runtime::aclrtSynchronizeEvent.get();
    return f && f(event_) == ACL_SUCCESS;
  }

 private:
  aclrtEvent event_;
};

}  // namespace

Staging::Staging(uint64_t budget_bytes) : state_(std::make_shared<State>()) { state_->budget = budget_bytes; }

uint64_t Staging::budget() const { return state_->budget; }

std::shared_ptr<const record::HostBlock> Staging::copy_async(const void *device_src, uint64_t bytes, void *stream) {
  auto malloc_host = runtime::aclrtMallocHost.get();
  auto free_host = runtime::aclrtFreeHost.get();
  auto memcpy_async = runtime::aclrtMemcpyAsync.get();
  if (!malloc_host || !free_host || !memcpy_async || bytes == 0) return nullptr;
  const uint64_t cls = size_class(bytes);
  void *host = state_->acquire(cls, malloc_host, free_host);
  if (host == nullptr) {
    std::lock_guard<std::mutex> lk(state_->mu);
    ++state_->counters.failed;
    return nullptr;
  }
  auto block = std::make_shared<PinnedBlock>(state_, host, bytes, cls);
  if (memcpy_async(host, bytes, device_src, bytes, ACL_MEMCPY_DEVICE_TO_HOST, stream) != ACL_SUCCESS) {
    std::lock_guard<std::mutex> lk(state_->mu);
    ++state_->counters.failed;
    return nullptr;  // the block goes back to the pool
  }
  std::lock_guard<std::mutex> lk(state_->mu);
  ++state_->counters.copies;
  state_->counters.bytes += bytes;
  state_->unsubmitted += cls;
  tl_unsubmitted += cls;
  return block;
}

std::shared_ptr<record::Completion> Staging::fence(void *stream) {
  if (tl_unsubmitted != 0) {
    std::lock_guard<std::mutex> lk(state_->mu);
    state_->unsubmitted -= tl_unsubmitted < state_->unsubmitted ? tl_unsubmitted : state_->unsubmitted;
    tl_unsubmitted = 0;
  }
  auto create = runtime::aclrtCreateEvent.get();
  auto record = runtime::aclrtRecordEvent.get();
  auto destroy = runtime::aclrtDestroyEvent.get();
  if (!create || !record || !destroy) return nullptr;
  aclrtEvent e = nullptr;
  if (create(&e) != ACL_SUCCESS) return nullptr;
  if (record(e, stream) != ACL_SUCCESS) {
    destroy(e);
    return nullptr;
  }
  return std::make_shared<EventCompletion>(e);
}

StagingCounters Staging::counters() const {
  std::lock_guard<std::mutex> lk(state_->mu);
  return state_->counters;
}

}  // namespace msprobe::shim
