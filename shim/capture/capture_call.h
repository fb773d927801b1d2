// The one body of every captured launch - raw runtime kernels, HCCL collectives, aclop and aclnn's phase 2 - and the
// one gate in front of it: whether a launch is looked at at all (capture_gate), and then what the session decides for
// it (the filters, the ticket). An API family only says which tensors and values are inputs and outputs:
//
//   return capture_call("HcclAllReduce", stream,
//       [&](KernelLaunch &k) { k.input_tensor(send); k.input_value(op); },  // before the real call
//       [&] { return real(args...); },                                      // the host's call: always made, once
//       [&](KernelLaunch &k) { k.output_tensor(recv); },                    // after it, when it succeeded
//       [](HcclResult rc) { return rc == HCCL_SUCCESS; });
//
// Exception policy: the host's call is never inside a try and is never skipped or repeated; it returns its own
// result. A describe step (or the decision, or the hand-over) that throws drops that one kernel's record, never the
// call: what it had staged is waited for and let go, and the problem is said once and counted (shim/base/problems.h).
// A call split in two (aclnn: the launch's inputs in a pre-call hook, its outputs in a post-call one) or one with work
// of its own between the gate and the decision (HCCL numbers its calls) uses capture_gate() and CaptureCall directly.
#pragma once
#include <cstdint>
#include <exception>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>

#include "shim/base/problems.h"
#include "shim/base/reentry.h"
#include "shim/capture/kernel_launch.h"

namespace msprobe::shim {

// Test seam (SHIM_TEST_DESCRIBE_THROWS=<where>[:<n>], read by the composition root): the first `n` (default: every)
// describe steps of that side throw, or the preparation of an aclnn launch (Launch: after its record is looked up,
// before its inputs are described: where an exception once left the thread marked as inside a launch for good).
enum class DescribeFault : uint8_t { None, Inputs, Outputs, Launch };
void set_describe_fault(DescribeFault fault, uint64_t times = UINT64_MAX) noexcept;
// Throws when the seam says so for `where`.
void describe_fault_point(DescribeFault where);

// For the hooks that only record descriptors (tensor handles, allocations, attributes, communicators): the bookkeeping
// runs, and whatever it throws stays in the shim (a hook never throws into the host), said once per kind and counted.
template <typename Record>
void guarded(Problem kind, Record &&record) noexcept {
  try {
    record();
  } catch (const std::exception &e) {
    report_problem(kind, e.what());
  } catch (...) {
    report_problem(kind, "unknown exception");
  }
}

// The one gate: the session when a launch made now, on this thread, is one the shim looks at; null when it is not:
// a call the shim itself makes into the runtime (ReentryGuard), a launch made inside another one on this thread (an
// aclnn or aclop kernel's own rtKernelLaunch*, HCCL's: it belongs to the outer one), or capture off (disabled,
// misconfigured, a fork child). The first launch of the process starts capture (start_session()).
Session *capture_gate() noexcept;

// Defined by the composition root (shim/hooks/activation.cpp): the process's session, started on first use (the
// configuration is read then); null when capture is off. The weak default (no composition root linked: the unit
// tests, which activate their own session) answers null.
Session *start_session() noexcept;

class CaptureCall {
 public:
  // After the gate opened: the session decides (the filters, then the ticket: name, indices, whether to capture). A
  // launch that no filter can select (its op type is never captured, or no step or rank ahead is) is only counted:
  // no stack walk, no name. The stack (its OpName, its stack.json group) is the calling thread's. Never throws; when
  // the launch cannot be made, the call is not recorded but the kernels it launches stay its own.
  CaptureCall(Session &session, std::string_view op_type, void *stream) noexcept
      : CaptureCall(session, op_type, stream, nullptr, [&] { return launch_stack(session); }) {}
  // The same with the op type's facts kept by the caller (session.facts_of(op_type): aclnn keeps them per bound
  // function) and the stack given by `stack_of()`, asked only when the launch is named (aclnn: phase 1's stack).
  template <typename StackOf>
  CaptureCall(Session &session, std::string_view op_type, void *stream, const OpTypeFacts &facts,
              StackOf &&stack_of) noexcept
      : CaptureCall(session, op_type, stream, &facts, std::forward<StackOf>(stack_of)) {}
  // A call never finished (its real function threw) counts as failed.
  ~CaptureCall();
  CaptureCall(const CaptureCall &) = delete;
  CaptureCall &operator=(const CaptureCall &) = delete;

  bool capturing() const noexcept { return launch_ && !dropped_ && launch_->capturing(); }
  // describe(KernelLaunch &), before the real call. `writes`: what the call will write, when known (see
  // KernelLaunch::inputs_done).
  template <typename Describe>
  void inputs(Describe &&describe, const std::vector<TensorMeta> *writes = nullptr) noexcept {
    run(DescribeFault::Inputs, [&](KernelLaunch &k) {
      describe(k);
      k.inputs_done(writes);
    });
  }
  // describe(KernelLaunch &), after a successful real call.
  template <typename Describe>
  void outputs(Describe &&describe) noexcept {
    run(DescribeFault::Outputs, std::forward<Describe>(describe));
  }
  // The record goes to the collector (ok) or is let go (the call failed: the kernel never ran).
  void finish(bool ok) noexcept;

 private:
  template <typename Describe>
  void run(DescribeFault side, Describe &&describe) noexcept {
    if (!capturing()) return;
    ReentryGuard guard;  // the shim's own runtime calls (descriptor reads, copies) are not the host's
    try {
      describe_fault_point(side);
      describe(*launch_);
    } catch (const std::exception &e) {
      drop(e.what());
    } catch (...) {
      drop("unknown exception");
    }
  }
  template <typename StackOf>
  CaptureCall(Session &session, std::string_view op_type, void *stream, const OpTypeFacts *facts,
              StackOf &&stack_of) noexcept {
    ReentryGuard guard;  // the session's decision and the stack walk make no host calls
    if (only_counted(session, op_type, stream, facts)) return;
    StackId stack = kEmptyStack;
    guarded(Problem::StackNotTaken, [&] { stack = stack_of(); });
    begin(session, op_type, stack, stream, facts);
  }
  // A launch no filter can select: counted, not named (true), else false.
  bool only_counted(Session &session, std::string_view op_type, void *stream, const OpTypeFacts *facts) noexcept;
  void begin(Session &session, std::string_view op_type, StackId stack, void *stream,
             const OpTypeFacts *facts) noexcept;
  void drop(const char *why) noexcept;

  std::optional<KernelLaunch> launch_;
  std::optional<KernelLaunch::Uncaptured> nested_;  // no launch: the kernels it launches still belong to this call
  bool dropped_ = false;
  bool finished_ = false;
};

// A call made in one piece: the gate, the decision, the inputs, the real call, the outputs when `ok(result)`, finish.
// Returns the real call's result. `op_type`: the OpType, or a callable that gives it (asked only when the gate opens:
// raw kernels look their name up).
template <typename OpType, typename Inputs, typename Forward, typename Outputs, typename Ok>
auto capture_call(OpType &&op_type, void *stream, Inputs &&inputs, Forward &&forward, Outputs &&outputs, Ok &&ok) {
  Session *session = capture_gate();
  if (session == nullptr) return forward();
  std::optional<CaptureCall> call;
  if constexpr (std::is_invocable_v<OpType>)
    call.emplace(*session, std::string_view(op_type()), stream);
  else
    call.emplace(*session, std::string_view(op_type), stream);
  call->inputs(std::forward<Inputs>(inputs));
  auto result = forward();
  const bool success = ok(result);
  if (success) call->outputs(std::forward<Outputs>(outputs));
  call->finish(success);
  return result;
}

}  // namespace msprobe::shim
