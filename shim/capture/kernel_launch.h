// One kernel launch being captured, whichever API launched it (aclnn, aclop, rt kernels, HCCL): it takes
// the session's ticket (name, indices, capture decision), copies inputs before the real launch and
// outputs after it, in stream order, and hands the finished KernelCapture to the collector. The API
// families only say which tensors and values are inputs and outputs.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "record/kernel_record.h"
#include "shim/capture/session.h"
#include "shim/device/handles.h"
#include "shim/device/stager.h"
#include "shim/stacks/stacks.h"

namespace msprobe::shim {

// The calling thread's stack, as the session's MSPROBE_STACK asks (Python frames are always taken: the OpName is
// built from them). Call it in the hook of the call the user's code made.
StackId launch_stack(const Session &session);

class KernelLaunch {
 public:
  // The session decides (a ticket: name, indices, whether to capture) here, at construction. `stack` (from
  // launch_stack(), possibly taken earlier: aclnn takes it at phase 1) gives the kernel its OpName and its
  // stack.json group.
  // `is_marker`: the op type's step-marker fact when the caller keeps it (Session::begin_launch).
  KernelLaunch(Session &session, std::string_view op_type, StackId stack, void *stream,
               std::optional<bool> is_marker = std::nullopt);
  // Takes the stack now.
  KernelLaunch(Session &session, std::string_view op_type, void *stream)
      : KernelLaunch(session, op_type, launch_stack(session), stream) {}
  ~KernelLaunch();
  KernelLaunch(const KernelLaunch &) = delete;
  KernelLaunch &operator=(const KernelLaunch &) = delete;

  // True on this thread while a KernelLaunch exists: a kernel the runtime launches inside another launch
  // (an aclnn or aclop kernel's own rtKernelLaunch*, HCCL's) is part of that launch, not a kernel of its own.
  static bool open_on_this_thread() { return open_ > 0; }
  // A launch that is not captured (no KernelLaunch made for it) still owns the kernels launched inside it.
  struct Uncaptured {
    Uncaptured() { ++open_; }
    ~Uncaptured() { --open_; }
    Uncaptured(const Uncaptured &) = delete;
    Uncaptured &operator=(const Uncaptured &) = delete;
  };
  // The same for a launch split over two hooks that has no object to hold (aclnn's forwarder path out of memory):
  // every enter is matched by one leave on the same thread.
  static void enter_uncaptured() noexcept { ++open_; }
  static void leave_uncaptured() noexcept { --open_; }

  // Its arguments are taken: it is captured, or launched into an ACL graph being captured or by a task update (the
  // graph keeps its description for the replays).
  bool capturing() const { return ticket_.capture || graph_stream_ != nullptr || update_stream_ != nullptr; }
  const LaunchTicket &ticket() const { return ticket_; }
  // MSPROBE_RACECHECK: the family does not know which arguments the kernel reads and which it writes (a raw kernel's
  // blob): its device buffers are accesses of unknown kind, never guessed (docs/races.md). Before its tensors.
  void accesses_unknown() { race_unknown_ = true; }
  // HCCL kernels: the communicator and the kernel's place in it, written as the entry's "comm".
  void set_comm(format::CommInfo comm) { ticket_.comm = std::move(comm); }

  // Before the real launch (ignored unless capturing and data_mode includes inputs).
  void input_tensor(const TensorMeta &t);
  // After the last input, before the real launch (CaptureCall calls it). `writes`: what the launch will write (its
  // outputs and in-place tensors), when the family knows it before the launch; null: unknown.
  void inputs_done(const std::vector<TensorMeta> *writes = nullptr);
  void input_tensor_list(const std::vector<TensorMeta> &ts);
  void input_value(format::ValueArg v);
  void input_null();

  // After a successful real launch (ignored unless capturing and data_mode includes outputs).
  void output_tensor(const TensorMeta &t);
  void output_tensor_list(const std::vector<TensorMeta> &ts);
  void output_null();

  // Submits the capture (launched) or waits for the copies already enqueued and drops them (the
  // launch failed, so the kernel never ran). A launch begun while the framework names kernels (scope_names.h) waits
  // on its thread for its name instead.
  void finish(bool launched);

 private:
  // Inputs before the launch, outputs after it: the same rules for both.
  using Side = TensorSide;
  bool takes(Side side) const;
  // A launch into an ACL graph being captured, or by a task update: its description goes to the graph
  // (acl_graphs.h).
  void hand_to_graph();
  record::CapturedList &list_of(Side side) { return side == Side::Input ? inputs_ : outputs_; }
  void add_tensor(Side side, const TensorMeta &t);
  void add_tensor_list(Side side, const std::vector<TensorMeta> &ts);
  void add_null(Side side);
  // A launch named later: waits on its thread (scope_names.h), with its finished record when it was captured.
  // counted false: a launch into an ACL graph (no kernel of the step), which only takes its name.
  void park(std::optional<record::KernelCapture> kernel, bool counted = true);
  // `slot` / `item`: where the tensor is in its side's arguments (item -1: not in a list), for notes only.
  // Describes (and stages) one tensor into `into`, in place: moving a filled CapturedArg trips GCC 12's
  // -Wmaybe-uninitialized (a false positive) on aarch64.
  void tensor(const TensorMeta &m, Side side, size_t slot, int64_t item, record::CapturedArg &into);
  // MSPROBE_RACECHECK: the device bytes `m` covers, as an access of argument `slot` (`item`) of `side`.
  void race_access(const TensorMeta &m, Side side, int32_t item);
  Session &session_;
  StackId stack_ = kEmptyStack;
  std::string op_type_;  // for a launch named later (scope_names.h)
  LaunchTicket ticket_;
  record::CapturedList inputs_, outputs_;
  std::optional<record::RaceFacts> race_;    // MSPROBE_RACECHECK and captured: the stamp and the accesses so far
  uint32_t race_slots_[2] = {0, 0};          // arguments described so far per side, whether or not taken
  bool race_unknown_ = false;                // accesses_unknown()
  std::unique_ptr<LaunchStaging> staging_;   // the task's way of taking the tensors; null when not capturing
  void *graph_stream_ = nullptr;             // launched into the ACL graph this stream is capturing
  void *update_stream_ = nullptr;            // launched by a task update on this stream
  std::shared_ptr<std::string> graph_name_;  // the OpName of a launch into a graph named later (scope_names.h)
  bool named_later_ = false;                 // ... and whether the framework names it
  bool finished_ = false;
  static thread_local int open_ __attribute__((tls_model("initial-exec")));
};

}  // namespace msprobe::shim
