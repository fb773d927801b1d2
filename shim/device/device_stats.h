// Statistics on the device: in the statistics and overflow_check tasks, a captured floating-point tensor's Max, Min,
// Mean and L2 Norm are computed by the runtime's own reduction ops (aclnnAminmaxAll for both extremes in one
// kernel, aclnnMean, and for the norms aclnnForeachNorm, one launch for all the tensors of one dtype on one side of
// the kernel, or aclnnLinalgVectorNorm where that cannot serve), launched by the shim on the kernel's stream (inputs
// before the kernel, outputs after it), so that only a few scalars per tensor cross the host link instead of the
// tensor.
//
// The host calls are few (issue 29): the reductions' executors are made once per tensor layout and position in the
// kernel, made repeatable (aclSetAclOpExecutorRepeatable) and kept with their argument objects; a later kernel with
// the same tensors in the same places only points their inputs at its tensors (aclSetInputTensorAddr, when the
// address moved) and runs phase 2. They live in a lane: a device block for the results and the executors that write
// into it at fixed places, one lane per launch in flight on a stream (checked out for the launch, so no two kernels
// share one at a time; kernels of one stream run in order, so the next kernel's reductions write the block only
// after this one's results were copied out). Where the runtime refuses repeatable executors (nnopbase: an executor
// made with huge-page memory, or whose op copies host data), the reductions are made and run once, as before.
//
// The results of one kernel's tensors are packed into the lane's block (each value in its own dtype, at its natural
// alignment) and copied to the host with one asynchronous copy through Staging after the kernel's last reduction;
// the collector reads them when the kernel's event completes. The shim's kernels are launched through the real
// aclnn functions (never through its own hooks, so they are never captured), read the host's tensors without
// writing them, and never make the host wait. Workspace comes from a per-stream device buffer (kernels of one stream
// run in order, so they can share it).
//
// In the overflow_check task each tensor is copied device-to-device into a snapshot, read back only if the collector
// writes the kernel (it overflowed), and only the outputs' extremes are reduced (aclnnAminmaxAll: NaN and Inf show in
// them) for the check; the flight task does the same with the tensors its ring keeps. A written kernel's statistics
// and exact NaN/+Inf/-Inf counts come from the bytes.
//
// Tensors that take the host path instead (the collector computes from a full copy): dtypes other than
// fp32/fp16/bf16, 0-d and empty tensors (msprobe's rules for them need the value itself), tensors whose bytes
// are no more than the scalars would be, in the statistics and overflow_check tasks tensors of at most 1 KiB (a copy
// is one task, the reductions two or three), private formats (NZ, 5HD), md5 mode, the tensor task, and any tensor
// for which the runtime refuses a reduction.
#pragma once
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "record/kernel_record.h"
#include "shim/device/handles.h"

namespace msprobe::shim {

namespace device_stats_internal {  // device_stats_lanes.h: the executor cache
struct Lane;
struct Node;
}  // namespace device_stats_internal

struct DeviceStatsCounters {
  uint64_t tensors = 0;                        // tensors whose statistics were computed on the device
  uint64_t kernels = 0;                        // reduction kernels the shim launched
  uint64_t executors = 0;                      // their executors made (phase 1); the rest were used again
  uint64_t one_shot = 0;                       // tensors reduced with executors made for them alone (no reuse)
  uint64_t lost = 0;                           // tensors whose reductions the runtime refused after taking them
  uint64_t list_norms = 0, list_launches = 0;  // norms taken by aclnnForeachNorm, and its launches
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

// What a tensor's reductions give: its extremes only (the NaN/Inf check of overflow_check and flight, for a tensor
// whose bytes they keep: its other statistics and exact counts come from the bytes if its kernel is ever written), or
// its four statistics.
enum class StatsWanted : uint8_t { Extremes, All };

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
  // True when copying the tensor to the host costs fewer device tasks than reducing it: at most kCopyRatherThanReduce
  // bytes (one copy task, next to nothing on the host link, and a few hundred elements for the collector to reduce,
  // where its statistics take two reductions and a share of a norm). The statistics and overflow_check tasks copy
  // such tensors; the flight task, which keeps them on the device anyway, still reduces their extremes.
  static bool cheaper_to_copy(const TensorMeta &m);
  static constexpr uint64_t kCopyRatherThanReduce = 1024;

  // Enqueues the reductions of `m` on the stream (`what` of them); nullptr when the tensor must take the host path.
  // Its norm may wait for end_side(). With StatsWanted::Extremes the result has no Mean and no Norm.
  std::shared_ptr<const record::PrecomputedStats> add(const TensorMeta &m, StatsWanted what = StatsWanted::All);
  // The tensors added since the last call were one side of the kernel (its inputs, before it runs): their reductions
  // are enqueued now, the norms with one aclnnForeachNorm for each dtype where it serves. finish() ends the last
  // side itself.
  void end_side();
  // After the inputs: end_side(), unless `outputs_elsewhere` (the kernel writes none of the inputs' bytes: the
  // reductions of its inputs then run after it, with its outputs').
  void inputs_done(bool outputs_elsewhere);
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
  using Lane = device_stats_internal::Lane;
  using Node = device_stats_internal::Node;
  bool one_shot(const TensorMeta &m, int32_t mean_dt, StatsWanted what, const uint64_t *stats);
  void *stream_;
  const DeviceStatsSettings &settings_;
  Staging &staging_;
  std::shared_ptr<Results> results_;
  Lane *lane_ = nullptr;   // checked out at the first add(), back at destruction
  Node *at_ = nullptr;     // the lane's node of the last tensor added (null: the root; device_stats_lanes.h)
  bool off_lane_ = false;  // a reduction of this launch was made for it alone: the rest of it are too
  int side_ = 0;           // end_side() calls so far
  std::vector<std::pair<Node *, size_t>> pending_;  // this side's tensors, reductions to come: node, result index
  uint64_t used_ = 0;
  bool launched_ = false;
};

DeviceStatsCounters device_stats_counters();
// aclFinalize / aclrtResetDevice: every lane not in use is let go (its executors destroyed, its block freed).
void device_stats_device_ending();

}  // namespace msprobe::shim
