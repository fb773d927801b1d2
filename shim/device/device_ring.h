// The flight task's ring: the tensors of the last captured kernels, kept where copies are cheapest. On a device
// that is device memory (one allocation of MSPROBE_BUFFER_MB, filled by device-to-device copies in stream order,
// never read by the host unless a flight record is written); only when the device cannot spare it, pinned host
// memory (device-to-host copies). The budget is the ring's size, so it is never exceeded.
//
// Space is handed out first in, first out: each copy takes the bytes after the newest one, wrapping to the start.
// When the ring is full the oldest kept kernels are let go through `evict_oldest` (their owner, the collector,
// drops them and their blocks give the space back). Tensors of kernels still being checked cannot be let go: a
// launch then waits for the check (bounded), unless only its own launch holds the ring, when waiting cannot help.
// A tensor larger than the ring is refused (the kernel keeps its statistics).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>

#include "record/kernel_record.h"

namespace msprobe::shim {

struct DeviceRingCounters {
  uint64_t capacity = 0;
  bool on_device = false;                   // the ring is device memory (else pinned host memory)
  uint64_t copies = 0, bytes = 0;           // tensors copied in
  uint64_t evictions = 0;                   // kernels let go to make room
  uint64_t waits = 0, wait_ns = 0;          // copies that waited for a check to finish
  uint64_t too_large = 0, no_room = 0;      // tensors refused: larger than the ring; no room after waiting
  uint64_t fetched = 0, fetched_bytes = 0;  // tensors read back to the host (a flight record was written)
  uint64_t high_water = 0;                  // most bytes in use at once
};

class DeviceRing {
 public:
  // `evict_oldest` lets go of the oldest kept kernel and returns true, or returns false when nothing is kept. It is
  // called without any lock of the ring held.
  DeviceRing(uint64_t capacity_bytes, std::function<bool()> evict_oldest);
  ~DeviceRing();
  DeviceRing(const DeviceRing &) = delete;
  DeviceRing &operator=(const DeviceRing &) = delete;

  enum class Refusal { None, TooLarge, NoRoom, NoMemory, CopyFailed };
  // Enqueues a copy of [device_src, device_src + bytes) into the ring on `stream`; the block's data() reads it back
  // (after the launch's fence completed). nullptr, with *why, when the tensor is not kept.
  std::shared_ptr<const record::HostBlock> copy_in(const void *device_src, uint64_t bytes, void *stream, Refusal *why);
  // The calling thread's launch was handed to the collector: its tensors will be let go in time, so later copies
  // may wait for them.
  void seal();
  // Before the runtime takes the device's memory back (aclFinalize, aclrtResetDevice): frees the ring if nothing is
  // kept in it any more, so that a later copy asks for it again. False when blocks still hold it.
  bool forget_memory();
  uint64_t capacity() const;
  DeviceRingCounters counters() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace msprobe::shim
