// The capture session: configuration, steps and ranks, the capture decision for each launch, and the
// collector the captures go to. Created lazily by the first hook that needs it (hooks may run before
// any constructor), closed by an exit handler.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "collector/collector.h"

namespace msprobe::shim {

struct Config;
class Staging;

// True when the shim is configured and capturing: the one check every hook makes first. The first
// call loads the configuration (an invalid one disables the shim: every call then passes through).
bool capture_enabled();

// What the session decided for one kernel launch. Every launch gets a name and indices (so names stay
// the same whatever the filters); only `capture` launches copy data.
struct LaunchTicket {
  bool capture = false;
  bool with_inputs = true;   // data_mode includes inputs
  bool with_outputs = true;  // data_mode includes outputs
  bool with_data = true;     // false: metadata only (structure task)
  std::string name;          // {OpType}.{OpName}.{n}
  uint64_t step = 0;
  std::optional<uint32_t> rank;
  uint64_t launch_index = 0, task_id = 0, stream_id = 0, timestamp_us = 0;
};

class Session {
 public:
  // Static filter, decided before launch time (MSPROBE_LIST by op type): false means no kernel of this
  // op type can ever be captured, so phase 1 need not record its arguments.
  bool may_capture(std::string_view op_type) const;
  // Called for every kernel launch, in launch order, on the launching thread.
  LaunchTicket begin_launch(std::string_view op_type, std::string_view op_name, const void *stream);
  // False once no kernel launched from now on can be captured: every selected step is past, or this process's rank
  // is known and not selected. Steps only grow and a known rank stays, so false stays false. One atomic load.
  bool captures_ahead() const noexcept;
  // Instead of begin_launch for a launch that will not be captured and whose name no later decision needs (its op
  // type can never be captured, or captures_ahead() is false): the same step, launch index and task id
  // bookkeeping, without naming it.
  // marker: is_step_marker(op_type), which callers may keep per op type (the configuration does not change).
  void skip_launch(std::string_view op_type, const void *stream, bool marker);
  bool is_step_marker(std::string_view op_type) const;
  void submit(collector::KernelCapture kernel);
  Staging &staging();
  const Config &config() const;
  // msprobe_shim_step(): the host says a step ended.
  void end_step();
  // The host looked msprobe_shim_step up: it marks steps itself, so optimizer kernels no longer do.
  void host_marks_steps();
  // The rank a communicator was created with (HCCL), used when no environment variable gave one.
  void set_rank_hint(uint32_t rank);
  // Everything captured so far is on disk (called at exit, aclFinalize, device reset).
  void flush();
  void shutdown();

  struct Impl;
  explicit Session(Impl *impl) : impl_(impl) {}

 private:
  Impl *impl_;
};

// The session; only valid when capture_enabled() returned true.
Session &session();

// In a child made by fork() without exec: capture is off for good, every call passes through (lifecycle.h).
void disable_capture_after_fork();

}  // namespace msprobe::shim
