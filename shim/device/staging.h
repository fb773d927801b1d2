// Copies of device tensors to the host, in stream order, without making the launching thread wait for
// the device: each copy is an aclrtMemcpyAsync into pinned host memory on the kernel's own stream, and an
// event recorded after the last copy tells the collector when the bytes are valid.
//
// Pinned memory comes from a pool: buffers are sized in classes (4 per power of two, at least 4 KiB) and go
// back to the pool when the collector is done with them, so in steady state no kernel costs an
// aclrtMallocHost/aclrtFreeHost (pinning pages is expensive on a real device). Everything the pool holds, in
// use or idle, stays within MSPROBE_BUFFER_MB: idle buffers are freed to make room for another class, and a
// launch waits (counted, timed) only when the buffers in use fill the budget. Nothing is dropped.
//
// A launch copies its inputs before the kernel and its outputs after it, and hands them to the collector only
// at fence(): buffers of launches not yet fenced cannot be released by anyone, so when they are all that is
// in use the launch goes over the budget instead of waiting forever (counted as an overshoot). A single
// tensor larger than the whole budget likewise goes through, alone.
#pragma once
#include <cstdint>
#include <memory>

#include "record/kernel_record.h"

namespace msprobe::shim {

struct StagingCounters {
  uint64_t copies = 0, bytes = 0, failed = 0;
  uint64_t budget_waits = 0, wait_ns = 0;                // launches that waited for the budget, and for how long in all
  uint64_t overshoots = 0;                               // launches let over the budget (see above)
  uint64_t wait_timeouts = 0;                            // waits given up after 10 s (a stream the host holds up)
  uint64_t high_water = 0;                               // most bytes of pinned buffers in use at once (class sizes)
  uint64_t pool_high_water = 0;                          // most bytes held at once, in use plus idle
  uint64_t host_allocs = 0, host_frees = 0, reuses = 0;  // aclrtMallocHost / aclrtFreeHost calls, pool hits
};

class Staging {
 public:
  explicit Staging(uint64_t budget_bytes);
  // Enqueues a copy of [device_src, device_src + bytes) on `stream`; nullptr when the runtime refuses it
  // (the kernel is then recorded without this tensor's data).
  std::shared_ptr<const record::HostBlock> copy_async(const void *device_src, uint64_t bytes, void *stream);
  // An event recorded on `stream` after everything enqueued so far; nullptr if the runtime refuses. The copies
  // this thread made since its last fence are handed over (their release no longer depends on this launch).
  std::shared_ptr<record::Completion> fence(void *stream);
  StagingCounters counters() const;
  uint64_t budget() const;

  // The pool's size class for a request (exposed for tests).
  static uint64_t size_class(uint64_t bytes);

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace msprobe::shim
