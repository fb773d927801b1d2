// The one body of every captured launch - raw runtime kernels, HCCL collectives, aclop and aclnn's phase 2: it owns
// the reentry guard, the nesting (kernels launched inside the call belong to it), the exception policy and
// finish(ok). An API family only says which tensors and values are inputs and outputs:
//
//   return capture_call(session(), "HcclAllReduce", stream,
//       [&](KernelLaunch &k) { k.input_tensor(send); k.input_value(op); },  // before the real call
//       [&] { return real(args...); },                                      // the host's call: always made, once
//       [&](KernelLaunch &k) { k.output_tensor(recv); },                    // after it, when it succeeded
//       [](HcclResult rc) { return rc == HCCL_SUCCESS; });
//
// Exception policy: the host's call is never inside a try and is never skipped or repeated; it returns its own
// result. A describe step (or the decision, or the hand-over) that throws drops that one kernel's record, never the
// call: what it had staged is waited for and let go, and one line on stderr says so (the first time). A call split in
// two (aclnn: the launch's inputs in a pre-call hook, its outputs in a post-call one) uses CaptureCall directly.
#pragma once
#include <cstdint>
#include <exception>
#include <optional>
#include <string_view>
#include <utility>

#include "shim/base/reentry.h"
#include "shim/capture/kernel_launch.h"

namespace msprobe::shim {

// Test seam (SHIM_TEST_DESCRIBE_THROWS, read by the composition root): every describe step of that side throws.
enum class DescribeFault : uint8_t { None, Inputs, Outputs };
void set_describe_fault(DescribeFault fault) noexcept;

class CaptureCall {
 public:
  // The session decides here (the ticket: name, indices, whether to capture). `stack`: see KernelLaunch. Never
  // throws; when the launch cannot be made, the call is not recorded but the kernels it launches stay its own.
  CaptureCall(Session &session, std::string_view op_type, StackId stack, void *stream) noexcept;
  CaptureCall(Session &session, std::string_view op_type, void *stream) noexcept;
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
      fault_point(side);
      describe(*launch_);
    } catch (const std::exception &e) {
      drop(e.what());
    } catch (...) {
      drop("unknown exception");
    }
  }
  static void fault_point(DescribeFault side);
  void drop(const char *why) noexcept;

  std::optional<KernelLaunch> launch_;
  std::optional<KernelLaunch::Uncaptured> nested_;  // no launch: the kernels it launches still belong to this call
  bool dropped_ = false;
  bool finished_ = false;
};

// A call made in one piece: decide, describe the inputs, make the real call, describe the outputs when `ok(result)`,
// finish. Returns the real call's result.
template <typename Inputs, typename Forward, typename Outputs, typename Ok>
auto capture_call(Session &session, std::string_view op_type, void *stream, Inputs &&inputs, Forward &&forward,
                  Outputs &&outputs, Ok &&ok) {
  CaptureCall call(session, op_type, stream);
  call.inputs(std::forward<Inputs>(inputs));
  auto result = forward();
  const bool success = ok(result);
  if (success) call.outputs(std::forward<Outputs>(outputs));
  call.finish(success);
  return result;
}

// For the hooks that only record descriptors (tensor handles, allocations, attributes): the bookkeeping runs, and
// whatever it throws stays in the shim (a hook never throws into the host).
template <typename Record>
void guarded(Record &&record) noexcept {
  try {
    record();
  } catch (...) {
  }
}

}  // namespace msprobe::shim
