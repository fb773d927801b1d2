// ACL graph capture (aclmdlRICaptureBegin ... aclmdlRICaptureEnd, aclmdlRIExecuteAsync: vLLM-Ascend's NPUGraph,
// MindSpore's set_kernel_launch_capture, reference/mindspore_runtime.md §2): between Begin and End the tasks submitted
// to the stream are recorded into a model runtime instance, not run; each aclmdlRIExecuteAsync replays them with no
// host call per kernel.
//
// So the shim records its own work into the graph too: for each kernel launched into the capture, a device-to-device
// copy of each of its tensors (inputs before the kernel, outputs after it) into device memory the graph owns, within
// MSPROBE_BUFFER_MB (graph_staging.cpp). The capture step's kernel is described without data (nothing ran yet). After
// each replay (aclmdlRIExecuteAsync hooked) the shim copies those snapshots to the host on the replay stream and hands
// every captured kernel to the collector as a kernel of the current step, named and counted as an eager launch would
// be, with its stack from the capture and the note `acl_graph` naming the graph and the replay. An event recorded
// after the copies orders the next replay of the graph on another stream after them; nothing waits on the host.
//
// Task groups: the runtime takes no copy inside one (kernels only), so the copies of a kernel launched in a group are
// enqueued when the group ends, after it (valid when the group's kernels do not write their own inputs). A task update
// (aclmdlRICaptureTaskUpdateBegin ... End) launches kernels that replace the group's, one for one: the shim counts
// no kernel for them and takes their arguments as what the group's kernels hold from the next replay on.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "record/kernel_record.h"
#include "shim/device/stager.h"

namespace msprobe::shim {

class Staging;

class AclGraphs {
 public:
  AclGraphs();
  ~AclGraphs();
  // The hooks report the host's successful calls.
  void capture_began(const void *stream);
  void capture_ended(const void *stream, const void *model_ri);
  // aclmdlRICaptureEnd failed: when the runtime dropped the capture (CANN does on the wrong thread, unjoined streams,
  // an open task group), so does the shim.
  void capture_failed(void *stream);
  // Before the host's aclmdlRIExecuteAsync: the replay stream waits for the last readback of the graph when that ran
  // on another stream. After it: the replay's kernels, read back and handed to the collector.
  void replaying(const void *model_ri, void *stream);
  // The session's half of a replay (the session owns this object, so it is not seen from here): the ticket of a
  // kernel launched now, and the hand-over of its finished record.
  struct Ticket {
    format::KernelHeader header;
    bool capture = false, with_inputs = true, with_outputs = true, with_data = true;
  };
  using BeginLaunch = std::function<Ticket(const std::string &op_type, const std::string &op_name)>;
  using Submit = std::function<void(record::KernelCapture)>;
  void replayed(const void *model_ri, void *stream, const BeginLaunch &begin, const Submit &submit);
  void destroyed(const void *model_ri);
  // aclmdlRICaptureTaskGrpBegin / End on a capturing stream, aclmdlRICaptureTaskUpdateBegin / End.
  void group_began(const void *stream);
  void group_ended(void *stream, const void *handle);
  void update_began(const void *stream, const void *handle);
  void update_ended(const void *stream);

  // The graph `stream` is being captured into ("acl_graph_0"), if any. One atomic load when no capture is in force
  // (inline: every launch asks).
  std::optional<std::string> capturing(const void *stream) {
    if (capturing_.load(std::memory_order_acquire) == 0) return std::nullopt;
    return capturing_stream(stream);
  }
  // True while `stream` is between aclmdlRICaptureTaskUpdateBegin and End: its launches replace a group's kernels
  // (they run nowhere themselves). One atomic load when no update is in force (inline: every launch asks).
  bool updating(const void *stream) {
    return updating_.load(std::memory_order_acquire) != 0 && updating_stream(stream);
  }
  // The staging of a kernel launched into that graph: its tensors copied into the graph's own device memory, all the
  // graphs' snapshots within `budget` bytes (MSPROBE_BUFFER_MB); described only when not `with_data`.
  std::unique_ptr<LaunchStaging> staging_for(void *stream, bool with_data, uint64_t budget);

  // A kernel launched into a capture, described (no data), and the staging that copied its tensors.
  struct Kernel {
    std::string op_type, op_name;
    std::shared_ptr<std::string> named;  // the OpName the framework gave the capture's launch later (scope_names.h)
    uint64_t stack_id = 0;
    record::CapturedList inputs, outputs;
    struct Snapshot {
      void *device = nullptr;  // null: not taken (over the budget, no extent)
      uint64_t bytes = 0;
      int64_t block_offset = 0;
    };
    std::vector<Snapshot> snapshots;  // one per tensor, inputs then outputs, depth first
  };
  // KernelLaunch hands over each kernel launched into a capture (`staging`: what staging_for() gave it), and each
  // kernel launched by a task update (its description replaces the group's next kernel's).
  void kernel_captured(const void *stream, Kernel k, LaunchStaging *staging);
  void kernel_updated(const void *stream, Kernel k);

  struct Graph;
  struct Copy {
    void *device;
    const void *source;
    uint64_t bytes;
  };
  // graph_staging.cpp: a snapshot buffer within the budget (null: over it), a copy into it now or at the group's end.
  void *snapshot_buffer(const void *stream, uint64_t bytes);
  bool copy_or_defer(void *stream, const Copy &c);

 private:
  std::optional<std::string> capturing_stream(const void *stream);
  bool updating_stream(const void *stream);
  void say_over_budget(Graph &g);
  std::mutex mu_;
  std::atomic<int> capturing_{0}, updating_{0};
  uint64_t next_ = 0;
  std::map<const void *, std::unique_ptr<Graph>> by_stream_;                     // being captured
  std::map<const void *, std::unique_ptr<Graph>> by_model_;                      // captured, by model runtime instance
  std::map<const void *, std::pair<Graph *, std::vector<size_t>>> groups_;       // task groups' kernels, by handle
  std::map<const void *, std::pair<Graph *, std::vector<size_t>>> open_groups_;  // by stream, until GrpEnd
  std::map<const void *, std::pair<const void *, size_t>> updates_;  // updating stream -> (group, next kernel)
  std::map<const void *, std::vector<Copy>> deferred_;  // copies of kernels in a task group still open, by stream
  std::unique_ptr<Staging> staging_;                    // the readbacks' pinned memory
  uint64_t snapshot_bytes_ = 0;                         // device bytes the graphs' snapshots hold
  uint64_t budget_ = 0;
};

}  // namespace msprobe::shim
