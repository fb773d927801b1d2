// Statistics on the device: in the statistics and overflow_check tasks, a captured floating-point tensor's Max, Min,
// Mean and L2 Norm are computed by the runtime's own reduction ops (aclnnAminmaxAll for both extremes in one
// kernel, aclnnMean, aclnnLinalgVectorNorm), launched by the shim on the kernel's stream (inputs before the
// kernel, outputs after it), so that only a few scalars per tensor cross the host link instead of the tensor.
//
// The results of one kernel's tensors are packed into one small device block (each value in its own dtype,
// at its natural alignment) and copied to the host with one asynchronous copy through Staging after the
// kernel's last reduction; the collector reads them when the kernel's event completes. The shim's kernels
// are launched through the real aclnn functions (never through its own hooks, so they are never captured),
// read the host's tensors without writing them, and never make the host wait. Workspace comes from a
// per-stream device buffer (kernels of one stream run in order, so they can share it).
//
// In the overflow_check task the outputs' NaN/+Inf/-Inf are counted on the device too (aclnnIsFinite,
// aclnnIsPosInf, aclnnIsNegInf, each summed by aclnnReduceSum), and each tensor is copied device-to-device
// into a snapshot that is read back only if the collector writes the kernel (it overflowed).
//
// Tensors that take the host path instead (the collector computes from a full copy): dtypes other than
// fp32/fp16/bf16, 0-d and empty tensors (msprobe's rules for them need the value itself), tensors whose bytes
// are no more than the scalars would be, private formats (NZ, 5HD), md5 mode, the tensor task, and any tensor
// for which the runtime refuses a reduction.
#pragma once
#include <cstdint>
#include <memory>

#include "record/kernel_record.h"
#include "shim/device/handles.h"

namespace msprobe::shim {

struct DeviceStatsCounters {
  uint64_t tensors = 0;                        // tensors whose statistics were computed on the device
  uint64_t kernels = 0;                        // reduction kernels the shim launched
  uint64_t batches = 0;                        // result copies (one per captured kernel with device statistics)
  uint64_t result_bytes = 0;                   // bytes of those copies (device -> host)
  uint64_t refused = 0;                        // tensors sent back to the host path because a reduction was refused
  uint64_t snapshots = 0, snapshot_bytes = 0;  // overflow_check: tensors kept on the device
  uint64_t fetched = 0, fetched_bytes = 0;     // ... and read back (their kernel overflowed)
};

class Staging;

// What the configuration asks of device statistics (filled by the session from its Config).
struct DeviceStatsSettings {
  bool enabled = false;          // statistics or overflow_check task, statistics summary mode, MSPROBE_DEVICE_STATS on
  bool overflow = false;         // overflow_check: outputs' NaN/Inf counted, tensors kept on the device
  bool high_precision = false;   // MSPROBE_PRECISION=high: means and norms in fp32
  uint64_t snapshot_budget = 0;  // device bytes overflow_check may hold in snapshots (MSPROBE_BUFFER_MB)
};

// The device statistics of one captured kernel. Not thread-safe: one launch, one thread.
class DeviceStatsBatch {
 public:
  // `settings` and `staging` outlive the batch (they are the session's).
  DeviceStatsBatch(void *stream, const DeviceStatsSettings &settings, Staging &staging);
  ~DeviceStatsBatch();
  DeviceStatsBatch(const DeviceStatsBatch &) = delete;
  DeviceStatsBatch &operator=(const DeviceStatsBatch &) = delete;

  // True when the configuration asks for device statistics and the runtime offers the reductions.
  static bool enabled(const DeviceStatsSettings &settings);
  // True when this tensor's statistics can be computed on the device (see the list above).
  static bool eligible(const TensorMeta &m);

  // Enqueues the reductions of `m` on the stream (with the NaN/+Inf/-Inf counts when `counts`); nullptr when
  // the tensor must take the host path.
  std::shared_ptr<const record::PrecomputedStats> add(const TensorMeta &m, bool counts = false);
  // overflow_check: a device-to-device copy of the tensor's bytes, in stream order, read back to the host
  // only if the collector asks for the data (the kernel overflowed). *offset: the view's first element in
  // the copy. nullptr when device memory or the MSPROBE_BUFFER_MB budget is short (host path instead).
  std::shared_ptr<const record::HostBlock> snapshot(const TensorMeta &m, int64_t *offset);
  // After the last add: enqueues the one copy of the results to the host. True when something was launched
  // (the caller then records the kernel's event after it).
  bool finish();
  // The kernel never ran: nothing is copied; the block is kept until the stream is past the reductions
  // already enqueued (the caller waits for its event, then destroys the batch).
  void abandon();

  struct Results;

 private:
  void *stream_;
  const DeviceStatsSettings &settings_;
  Staging &staging_;
  std::shared_ptr<Results> results_;
  uint64_t used_ = 0;
  bool launched_ = false;
};

DeviceStatsCounters device_stats_counters();

}  // namespace msprobe::shim
