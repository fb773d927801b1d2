// Copies of device tensors to the host, in stream order, without making the launching thread wait for
// the device: each copy is an aclrtMemcpyAsync into pinned host memory (aclrtMallocHost) on the
// kernel's own stream, and an event recorded after the last copy tells the collector when the bytes
// are valid. In-flight bytes are bounded by MSPROBE_BUFFER_MB: a launch waits (and the wait is counted)
// only when the budget is exhausted; nothing is dropped.
#pragma once
#include <cstdint>
#include <memory>

#include "collector/collector.h"

namespace msprobe::shim {

struct StagingCounters {
  uint64_t copies = 0, bytes = 0, budget_waits = 0, wait_ns = 0, high_water = 0, failed = 0;
};

class Staging {
 public:
  explicit Staging(uint64_t budget_bytes);
  // Enqueues a copy of [device_src, device_src + bytes) on `stream`; nullptr when the runtime refuses it
  // (the kernel is then recorded without this tensor's data).
  std::shared_ptr<const collector::HostBlock> copy_async(const void *device_src, uint64_t bytes, void *stream);
  // An event recorded on `stream` after everything enqueued so far; nullptr if the runtime refuses.
  std::shared_ptr<collector::Completion> fence(void *stream);
  StagingCounters counters() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace msprobe::shim
