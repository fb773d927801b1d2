// ACL graph capture (aclmdlRICaptureBegin ... aclmdlRICaptureEnd, aclmdlRIExecuteAsync: MindSpore's
// set_kernel_launch_capture, reference/mindspore_runtime.md §2): between Begin and End the tasks submitted to the
// stream are recorded into a model runtime instance, not run; each aclmdlRIExecuteAsync replays them with no host call
// per kernel.
//
// What the shim records for a kernel launched into a capture: its description (op type, name, arguments' dtype, shape,
// stride, offset, its stack), no data, and the note `acl_graph` naming the graph. Taking data is not safe there: a
// copy, an event or a statistics kernel the shim enqueued on the capturing stream would itself be captured, run at
// every replay into staging memory the shim has long given back, and its event would complete only at a replay; and at
// the launch nothing has run yet. Replays are not captured kernel by kernel: the first replay of each graph says so
// once, naming it (docs/capture.md, "MindSpore").
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "shim/device/stager.h"

namespace msprobe::shim {

class AclGraphs {
 public:
  // The hooks report the host's successful calls.
  void capture_began(const void *stream);
  void capture_ended(const void *stream, const void *model_ri);
  // Before the host's aclmdlRIExecuteAsync: the first replay of a graph is said once (log_warn).
  void replaying(const void *model_ri);
  void destroyed(const void *model_ri);

  // The graph `stream` is being captured into ("acl_graph_0"), if any, for a kernel of step `step` launched into it.
  // One atomic load when no capture is in force (inline: every launch asks).
  std::optional<std::string> capturing(const void *stream, uint64_t step) {
    if (capturing_.load(std::memory_order_acquire) == 0) return std::nullopt;
    return capturing_stream(stream, step);
  }
  // The staging of a kernel launched into that graph: nothing taken, the note `acl_graph` in its entry.
  std::unique_ptr<LaunchStaging> staging_for(const std::string &graph);

 private:
  struct Graph {
    std::string name;
    uint64_t step = 0, kernels = 0;  // the step of its first kernel
    bool said = false;
  };
  std::optional<std::string> capturing_stream(const void *stream, uint64_t step);
  std::mutex mu_;
  std::atomic<int> capturing_{0};
  uint64_t next_ = 0;
  std::map<const void *, Graph> by_stream_;  // being captured
  std::map<const void *, Graph> by_model_;   // captured, by model runtime instance
};

}  // namespace msprobe::shim
