// How a task takes the data of each captured tensor: the capture side's half of a task's policy, chosen once per
// session from the configuration (shim/capture/task_policy.h; the collector's half is its Retention). Each captured
// launch gets a LaunchStaging from the session's stager; inputs are taken before the real launch and outputs after
// it, in stream order, and the launch never waits for the device.
//
//   metadata_only()      structure: tensors are described, nothing is copied
//   host_copies()        tensor task, md5: every tensor's bytes into pinned host memory (staging.h)
//   device_statistics()  statistics, overflow_check: the device's own reductions, a few scalars cross the host link
//                        (device_stats.h); a tensor they cannot take is copied as host_copies() would
//   flight_ring()        flight: bytes device-to-device into the ring (device_ring.h), the outputs' extremes reduced
//                        on the device as the NaN/Inf check
//
// A fused statistics kernel of one's own (AscendC, one per chip) would be one more Stager here: take() records each
// tensor's descriptor (address, dtype, shape, strides) and where its results go, inputs_done() and finish() launch
// one kernel over the side's tensors (or keep them for a later launch until a hazard: the next write to one of
// them, an event, a sync), and finish() copies the results to the host with one copy, as device_statistics() does
// with the runtime's reductions (device_stats.h).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "record/kernel_record.h"
#include "shim/device/device_stats.h"
#include "shim/device/handles.h"

namespace msprobe::shim {

class Staging;

enum class TensorSide : uint8_t { Input, Output };

// The staging of one captured launch. Not thread-safe: one launch, one thread.
class LaunchStaging {
 public:
  virtual ~LaunchStaging() = default;
  // Takes `m` (an input before the launch, an output after it) into `t`, which already describes it: its bytes,
  // statistics computed elsewhere, or nothing. `slot` and `item` (-1: not in a list) name it in a note.
  virtual void take(const TensorMeta &m, TensorSide side, size_t slot, int64_t item, record::TensorCapture &t) = 0;
  // Every input was taken (before the real launch): work a stager gathers per side of the kernel is enqueued now,
  // or, when `writes` (what the launch will write, its in-place tensors included; null: not known) leaves every
  // input's bytes alone, after the launch with the outputs'.
  virtual void inputs_done(const std::vector<TensorMeta> *writes) { (void)writes; }
  // The launch ran: what the collector waits on before it reads what was taken (null when nothing is in flight).
  virtual std::shared_ptr<record::Completion> finish() = 0;
  // The launch failed, so the kernel never ran: what is in flight is waited for and let go.
  virtual void abandon() = 0;
  // The launch's record was handed to the collector (after finish()), or abandon() ran.
  virtual void handed_over() {}
  // Members for the kernel's entry on tensors taken in part only (flight_note: "output.0 (123 bytes) is larger than
  // the ring: statistics only").
  virtual format::EntryNotes notes() { return {}; }
};

class Stager {
 public:
  virtual ~Stager() = default;
  virtual std::unique_ptr<LaunchStaging> begin(void *stream) = 0;
  // aclFinalize / aclrtResetDevice: the runtime takes the device's memory back.
  virtual void device_ending() {}
  // One summary of what was staged, at the end of the run (MSPROBE_LOG_LEVEL=info; budget waits as a warning).
  virtual void log_summary() const {}
  // The pinned-memory pool the copies to the host go through; null when this stager copies nothing.
  virtual const Staging *staging() const { return nullptr; }
};

std::unique_ptr<Stager> metadata_only();
// budget_bytes: MSPROBE_BUFFER_MB.
std::unique_ptr<Stager> host_copies(uint64_t budget_bytes);
std::unique_ptr<Stager> device_statistics(uint64_t budget_bytes, DeviceStatsSettings settings);
// evict_oldest: lets the oldest kept kernel go (the collector's drop_oldest_kept), see device_ring.h.
std::unique_ptr<Stager> flight_ring(uint64_t budget_bytes, DeviceStatsSettings settings,
                                    std::function<bool()> evict_oldest);

}  // namespace msprobe::shim
