#include "shim/staging.h"

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "acl/acl.h"
#include "shim/symbols.h"

namespace msprobe::shim {
namespace {

// The runtime functions the shim itself calls. They are looked up outside the shim, so a call never
// comes back through one of the shim's own hooks.
HookSlot slot_malloc_host{"aclrtMallocHost"};
HookSlot slot_free_host{"aclrtFreeHost"};
HookSlot slot_memcpy_async{"aclrtMemcpyAsync"};
HookSlot slot_create_event{"aclrtCreateEvent"};
HookSlot slot_record_event{"aclrtRecordEvent"};
HookSlot slot_sync_event{"aclrtSynchronizeEvent"};
HookSlot slot_destroy_event{"aclrtDestroyEvent"};

template <typename F>
F fn(HookSlot &s) {
  return reinterpret_cast<F>(s.resolve());
}

}  // namespace

struct Staging::State {
  uint64_t budget;
  mutable std::mutex mu;
  std::condition_variable cv;
  uint64_t in_flight = 0;
  StagingCounters counters;

  void acquire(uint64_t bytes) {
    std::unique_lock<std::mutex> lk(mu);
    // A single tensor larger than the whole budget still goes through, alone.
    if (in_flight > 0 && in_flight + bytes > budget) {
      ++counters.budget_waits;
      auto t0 = std::chrono::steady_clock::now();
      cv.wait(lk, [&] { return in_flight == 0 || in_flight + bytes <= budget; });
      counters.wait_ns += (uint64_t)std::chrono::duration_cast<std::chrono::nanoseconds>(
                              std::chrono::steady_clock::now() - t0).count();
    }
    in_flight += bytes;
    if (in_flight > counters.high_water) counters.high_water = in_flight;
  }

  void release(uint64_t bytes) {
    {
      std::lock_guard<std::mutex> lk(mu);
      in_flight -= bytes;
    }
    cv.notify_all();
  }
};

namespace {

class PinnedBlock final : public collector::HostBlock {
 public:
  PinnedBlock(std::shared_ptr<Staging::State> st, void *p, uint64_t n) : state_(std::move(st)), p_(p), n_(n) {}
  ~PinnedBlock() override {
    if (auto f = fn<aclError (*)(void *)>(slot_free_host)) f(p_);
    state_->release(n_);
  }
  const void *data() const override { return p_; }
  uint64_t size() const override { return n_; }

 private:
  std::shared_ptr<Staging::State> state_;
  void *p_;
  uint64_t n_;
};

class EventCompletion final : public collector::Completion {
 public:
  explicit EventCompletion(aclrtEvent e) : event_(e) {}
  ~EventCompletion() override {
    if (auto f = fn<aclError (*)(aclrtEvent)>(slot_destroy_event)) f(event_);
  }
  bool wait() override {
    auto f = fn<aclError (*)(aclrtEvent)>(slot_sync_event);
    return f && f(event_) == ACL_SUCCESS;
  }

 private:
  aclrtEvent event_;
};

}  // namespace

Staging::Staging(uint64_t budget_bytes) : state_(std::make_shared<State>()) { state_->budget = budget_bytes; }

std::shared_ptr<const collector::HostBlock> Staging::copy_async(const void *device_src, uint64_t bytes, void *stream) {
  auto malloc_host = fn<aclError (*)(void **, size_t)>(slot_malloc_host);
  auto free_host = fn<aclError (*)(void *)>(slot_free_host);
  auto memcpy_async = fn<aclError (*)(void *, size_t, const void *, size_t, aclrtMemcpyKind, aclrtStream)>(slot_memcpy_async);
  if (!malloc_host || !free_host || !memcpy_async || bytes == 0) return nullptr;
  state_->acquire(bytes);
  void *host = nullptr;
  if (malloc_host(&host, bytes) != ACL_SUCCESS || host == nullptr) {
    state_->release(bytes);
    std::lock_guard<std::mutex> lk(state_->mu);
    ++state_->counters.failed;
    return nullptr;
  }
  auto block = std::make_shared<PinnedBlock>(state_, host, bytes);
  if (memcpy_async(host, bytes, device_src, bytes, ACL_MEMCPY_DEVICE_TO_HOST, stream) != ACL_SUCCESS) {
    std::lock_guard<std::mutex> lk(state_->mu);
    ++state_->counters.failed;
    return nullptr;  // the block frees its memory
  }
  std::lock_guard<std::mutex> lk(state_->mu);
  ++state_->counters.copies;
  state_->counters.bytes += bytes;
  return block;
}

std::shared_ptr<collector::Completion> Staging::fence(void *stream) {
  auto create = fn<aclError (*)(aclrtEvent *)>(slot_create_event);
  auto record = fn<aclError (*)(aclrtEvent, aclrtStream)>(slot_record_event);
  auto destroy = fn<aclError (*)(aclrtEvent)>(slot_destroy_event);
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
