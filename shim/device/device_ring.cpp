#include "shim/device/device_ring.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <vector>

#include "acl/acl.h"
#include "shim/base/log.h"
#include "shim/base/reentry.h"
#include "shim/device/runtime_api.h"

namespace msprobe::shim {
namespace {

constexpr uint64_t kAlign = 512;                            // the runtime's own allocation granule
constexpr uint64_t kMaxWaitNs = uint64_t{10} * 1000000000;  // a stream the host holds up must not hang it
constexpr int32_t kD2H = 2, kD2D = 3;                       // aclrtMemcpyKind

// Bytes this thread's open launch holds in the ring (see seal()). Trivial TLS: no destructor to register.
thread_local uint64_t tl_unsealed __attribute__((tls_model("initial-exec"))) = 0;

uint64_t aligned(uint64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

}  // namespace

struct DeviceRing::State {
  uint64_t capacity = 0;
  std::function<bool()> evict_oldest;
  mutable std::mutex mu;
  std::condition_variable released_cv;
  bool tried = false;  // the memory was asked for (once)
  char *base = nullptr;
  bool on_device = false;
  int32_t device = 0;
  struct Region {
    Region(uint64_t a, uint64_t b) : at(a), bytes(b) {}
    uint64_t at, bytes;  // bytes: aligned
    std::atomic<bool> released{false};
  };
  // Oldest first; a deque keeps each region where it is, so a block can flag its own without the lock.
  std::deque<Region> regions;
  uint64_t in_use = 0;    // bytes of the regions (released ones included until they leave the front)
  uint64_t unsealed = 0;  // bytes held by launches not handed to the collector yet (all threads)
  DeviceRingCounters counters;
  std::atomic<uint64_t> fetched{0}, fetched_bytes{0};  // counted without the lock (see release)

  // Caller holds mu. The memory, asked for once: device memory, else pinned host memory.
  bool ensure_memory() {
    if (tried) return base != nullptr;
    tried = true;
    ReentryGuard guard;
    if (auto get = runtime::aclrtGetDevice.get()) get(&device);
    void *p = nullptr;
    if (auto m = runtime::aclrtMalloc.get(); m && m(&p, capacity, 0) == ACL_SUCCESS && p) {
      on_device = true;
    } else if (auto h = runtime::aclrtMallocHost.get(); h && h(&p, capacity) == ACL_SUCCESS && p) {
      log_warn("flight: no %llu MiB of device memory for the ring; it is in host memory (tensors copied to the host)",
               (unsigned long long)(capacity >> 20));
    } else {
      log_error("flight: no %llu MiB of device or host memory for the ring; kernels are kept as statistics only",
                (unsigned long long)(capacity >> 20));
      return false;
    }
    base = static_cast<char *>(p);
    counters.capacity = capacity;
    counters.on_device = on_device;
    return true;
  }

  // Caller holds mu. Where `bytes` (aligned) fit after the newest region, or nullopt.
  std::optional<uint64_t> place(uint64_t bytes) const {
    if (regions.empty()) return 0;
    const uint64_t oldest = regions.front().at;
    const uint64_t next = regions.back().at + regions.back().bytes;
    if (regions.back().at >= oldest) {  // not wrapped: free after the newest and before the oldest
      if (capacity - next >= bytes) return next;
      if (oldest >= bytes) return 0;
      return std::nullopt;
    }
    if (oldest - next >= bytes) return next;  // wrapped: free between the newest and the oldest
    return std::nullopt;
  }

  // Caller holds mu: the released regions at the front leave.
  void pop_released() {
    while (!regions.empty() && regions.front().released.load(std::memory_order_acquire)) {
      in_use -= regions.front().bytes;
      regions.pop_front();
    }
  }

  // Without waiting for the lock: a flight record may be written by the thread that finishes the dump while the
  // launching thread that holds the lock is stopped in a signal handler. Whoever holds the lock next pops it.
  void release(std::atomic<bool> &flag) {
    flag.store(true, std::memory_order_release);
    if (mu.try_lock()) {
      pop_released();
      mu.unlock();
    }
    released_cv.notify_all();
  }

  // The bytes of a region, on the host: the ring itself when it is host memory, else a copy read back once.
  const void *read(uint64_t at, uint64_t bytes, std::vector<unsigned char> &host) {
    if (!on_device) return base + at;
    ReentryGuard guard;
    host.resize(bytes);
    auto set_device = runtime::aclrtSetDevice.get();
    auto memcpy_fn = runtime::aclrtMemcpy.get();
    if (set_device) set_device(device);  // a writer thread has no device of its own
    if (!memcpy_fn || memcpy_fn(host.data(), bytes, base + at, bytes, kD2H) != ACL_SUCCESS) {
      log_error("flight: reading %llu bytes back from the ring failed; the tensor is written without data",
                (unsigned long long)bytes);
      host.clear();
      return nullptr;
    }
    fetched.fetch_add(1, std::memory_order_relaxed);
    fetched_bytes.fetch_add(bytes, std::memory_order_relaxed);
    return host.data();
  }
};

namespace {

class RingBlock final : public record::HostBlock {
 public:
  RingBlock(std::shared_ptr<DeviceRing::State> st, std::atomic<bool> &released, uint64_t at, uint64_t bytes)
      : state_(std::move(st)), released_(released), at_(at), bytes_(bytes) {}
  ~RingBlock() override { state_->release(released_); }
  // Called by the collector after the launch's event, so the copy into the ring is complete.
  const void *data() const override {
    std::lock_guard<std::mutex> lk(mu_);
    if (!read_) {
      read_ = true;
      data_ = state_->read(at_, bytes_, host_);
    }
    return data_;
  }
  uint64_t size() const override { return bytes_; }

 private:
  std::shared_ptr<DeviceRing::State> state_;
  std::atomic<bool> &released_;
  uint64_t at_, bytes_;
  mutable std::mutex mu_;
  mutable bool read_ = false;
  mutable const void *data_ = nullptr;
  mutable std::vector<unsigned char> host_;
};

}  // namespace

DeviceRing::DeviceRing(uint64_t capacity_bytes, std::function<bool()> evict_oldest)
    : state_(std::make_shared<State>()) {
  state_->capacity = capacity_bytes / kAlign * kAlign;
  state_->evict_oldest = std::move(evict_oldest);
}

// The memory stays: blocks still held (and the stream's queued copies) may use it after the session is gone.
DeviceRing::~DeviceRing() = default;

uint64_t DeviceRing::capacity() const { return state_->capacity; }

std::shared_ptr<const record::HostBlock> DeviceRing::copy_in(const void *device_src, uint64_t bytes, void *stream,
                                                             Refusal *why) {
  State &s = *state_;
  const uint64_t need = aligned(bytes);
  std::unique_lock<std::mutex> lk(s.mu);
  if (!s.ensure_memory()) return *why = Refusal::NoMemory, nullptr;
  if (bytes == 0 || need > s.capacity) {
    ++s.counters.too_large;
    return *why = Refusal::TooLarge, nullptr;
  }
  std::optional<uint64_t> at;
  bool waited = false;
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed_ns = [t0] {
    return (uint64_t)std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
        .count();
  };
  s.pop_released();
  while (!(at = s.place(need))) {
    lk.unlock();
    const bool evicted = s.evict_oldest && s.evict_oldest();
    lk.lock();
    s.pop_released();
    if (evicted) {
      ++s.counters.evictions;
      continue;
    }
    // Nothing kept to let go: the ring holds kernels being checked. Their checks end on their own unless every byte
    // is this thread's own open launch (or other open launches), or the device is held up for good.
    const uint64_t elapsed = elapsed_ns();
    if (s.in_use <= s.unsealed || elapsed >= kMaxWaitNs) {
      ++s.counters.no_room;
      if (waited) s.counters.wait_ns += elapsed;
      return *why = Refusal::NoRoom, nullptr;
    }
    if (!waited) ++s.counters.waits;
    waited = true;
    s.released_cv.wait_for(lk, std::chrono::milliseconds(20));
    s.pop_released();
  }
  if (waited) s.counters.wait_ns += elapsed_ns();
  State::Region &region = s.regions.emplace_back(*at, need);
  s.in_use += need;
  s.unsealed += need;
  tl_unsealed += need;
  if (s.in_use > s.counters.high_water) s.counters.high_water = s.in_use;
  auto block = std::make_shared<RingBlock>(state_, region.released, *at, bytes);  // gives the region back when it dies
  lk.unlock();
  ReentryGuard guard;
  auto copy = runtime::aclrtMemcpyAsync.get();
  if (!copy || copy(s.base + *at, bytes, device_src, bytes, s.on_device ? kD2D : kD2H, stream) != ACL_SUCCESS)
    return *why = Refusal::CopyFailed, nullptr;
  lk.lock();
  ++s.counters.copies;
  s.counters.bytes += bytes;
  *why = Refusal::None;
  return block;
}

void DeviceRing::seal() {
  if (tl_unsealed == 0) return;
  std::lock_guard<std::mutex> lk(state_->mu);
  state_->unsealed -= tl_unsealed < state_->unsealed ? tl_unsealed : state_->unsealed;
  tl_unsealed = 0;
}

bool DeviceRing::forget_memory() {
  State &s = *state_;
  std::lock_guard<std::mutex> lk(s.mu);
  s.pop_released();
  if (!s.regions.empty()) return false;
  if (s.base != nullptr) {
    ReentryGuard guard;
    if (s.on_device) {
      if (auto f = runtime::aclrtFree.get()) f(s.base);
    } else if (auto f = runtime::aclrtFreeHost.get()) {
      f(s.base);
    }
  }
  s.base = nullptr;
  s.tried = false;
  return true;
}

DeviceRingCounters DeviceRing::counters() const {
  std::lock_guard<std::mutex> lk(state_->mu);
  DeviceRingCounters c = state_->counters;
  c.fetched = state_->fetched.load();
  c.fetched_bytes = state_->fetched_bytes.load();
  return c;
}

}  // namespace msprobe::shim
