// The capture session: configuration, steps and ranks, the capture decision for each launch, and the
// collector the captures go to. A Session is built from a Config alone (tests build their own); the process's
// one session is made by the composition root (shim/hooks/activation.cpp) when the first hook runs, and
// published with activate_session() for the hooks and the aclnn wrappers.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "collector/collector.h"
#include "record/kernel_record.h"
#include "shim/capture/task_policy.h"

namespace msprobe::races {
class StreamClocks;
}

namespace msprobe::shim {

struct Config;
class AclGraphs;

// What the session decided for one kernel launch. Every launch gets a name and indices (so names stay
// the same whatever the filters); only `capture` launches copy data.
struct LaunchTicket : format::KernelHeader {
  bool capture = false;
  bool with_inputs = true;   // data_mode includes inputs
  bool with_outputs = true;  // data_mode includes outputs
  bool with_data = true;     // false: described only (TaskPolicy::takes_data)
  // begin_unnamed_launch(): `name` is empty and `capture` provisional until name_launch().
  bool name_pending = false;
};

// What the configuration says of an op type, for good (callers may keep it: the configuration does not change).
struct OpTypeFacts {
  bool may_capture = true;   // Session::may_capture
  bool step_marker = false;  // Session::is_step_marker
};

class Session {
 public:
  // Nothing is created on disk until the first captured kernel is submitted.
  explicit Session(Config config);
  // Closes the dump (shutdown()). The process's session is never destroyed (hooks may run after exit handlers).
  ~Session();
  Session(const Session &) = delete;
  Session &operator=(const Session &) = delete;

  // Static filter, decided before launch time (MSPROBE_LIST by op type): false means no kernel of this
  // op type can ever be captured, so phase 1 need not record its arguments.
  bool may_capture(std::string_view op_type) const;
  // Called for every kernel launch, in launch order, on the launching thread.
  // `is_marker`: whether the op type ends steps (its OpTypeFacts), when the caller knows it; else looked up.
  LaunchTicket begin_launch(std::string_view op_type, std::string_view op_name, const void *stream,
                            std::optional<bool> is_marker = std::nullopt);
  // begin_launch() for a launch whose OpName is known only after it (the framework names its kernels once they are
  // launched: scope_names.h): counted now, in launch order (step, launch index, stream and task ids), and selected by
  // everything but its name; `capture` says whether it may still be captured. name_launch() finishes the ticket.
  LaunchTicket begin_unnamed_launch(std::string_view op_type, const void *stream,
                                    std::optional<bool> is_marker = std::nullopt);
  // Names a ticket of begin_unnamed_launch() (call in the order its thread launched) and applies the filters that need
  // the name (MSPROBE_SCOPE, names in MSPROBE_LIST): `capture` stays set only when the kernel is selected.
  void name_launch(LaunchTicket &t, std::string_view op_type, std::string_view op_name);
  // Run first by flush() and shutdown(): the composition root gives the kernels still waiting for their names theirs.
  void set_before_flush(void (*before_flush)());
  // A kernel the device ran inside a model (graph-sunk, reported by CANN's data dump): its step is the model's, not
  // the launch order's, and its stream and task ids are the dump's. Named and selected as begin_launch does.
  LaunchTicket begin_graph_kernel(std::string_view op_type, std::string_view op_name, uint64_t step, uint64_t stream_id,
                                  uint64_t task_id);
  // False once no kernel launched from now on can be captured: every selected step is past, or this process's rank
  // is known and not selected. Steps only grow and a known rank stays, so false stays false. One atomic load.
  bool captures_ahead() const noexcept;
  // Instead of begin_launch for a launch that will not be captured and whose name no later decision needs (its op
  // type can never be captured, or captures_ahead() is false): the same step, launch index and task id
  // bookkeeping, without naming it.
  // marker: is_step_marker(op_type), which callers may keep per op type (the configuration does not change).
  void skip_launch(std::string_view op_type, const void *stream, bool marker);
  bool is_step_marker(std::string_view op_type) const;
  OpTypeFacts facts_of(std::string_view op_type) const { return {may_capture(op_type), is_step_marker(op_type)}; }
  void submit(record::KernelCapture kernel);
  // How the task takes each captured tensor (KernelLaunch asks it once per captured launch).
  Stager &stager();
  // The ACL graphs being captured and replayed (aclmdlRI*): a kernel launched into one is described only.
  AclGraphs &acl_graphs() { return *acl_graphs_; }
  // MSPROBE_RACECHECK=1: the happens-before between this process's streams and its host (races/clocks.h), which
  // launches, events, waits and synchronizations advance; null when the check is off.
  races::StreamClocks *stream_clocks() noexcept;
  const TaskPolicy &task_policy() const;
  const Config &config() const { return *config_; }
  // msprobe_shim_step(): the host says a step ended.
  void end_step();
  // The host looked msprobe_shim_step up: it marks steps itself, so optimizer kernels no longer do.
  void host_marks_steps();
  // The rank a communicator gave the calling thread's device (or `device`), used when no environment variable gave
  // one (shim/capture/rank_map.h). In a process on one device, the kernels recorded without a rank so far are moved
  // to that rank's folders.
  void set_rank_hint(uint32_t rank, int32_t device = -1);
  // The calling thread set its current device (aclrtSetDevice).
  void thread_device(int32_t device);
  // Everything captured so far is on disk (called at exit, aclFinalize, device reset).
  void flush();
  // aclFinalize / aclrtResetDevice (`call`): flush(), and what the task keeps in device memory, which the runtime
  // takes back (the flight ring), is written (MSPROBE_FLIGHT_ON_EXIT) or let go.
  void device_ending(const char *call);
  void shutdown();

  struct Impl;

 private:
  void adopt_unranked(uint32_t rank);
  Impl *impl_;
  // Parts of *impl_ every launch reads, reachable inline.
  const Config *config_;
  AclGraphs *acl_graphs_;
};

// The session that hooks and wrappers report to: null until the composition root publishes one, and again for good
// in a child made by fork() without exec (lifecycle.h). One atomic load.
Session *active_session() noexcept;
void activate_session(Session *session) noexcept;

}  // namespace msprobe::shim
