// Kernel names from the host framework's own record of its launches (MindSpore's runtime profiler: each graph kernel's
// fullname_with_scope, reference/mindspore_runtime.md §3(e1)), used as the kernel's OpName instead of the Python scope.
//
// The framework says which kernel it launched only once the launch returned: MindSpore records
// `Kernel::KernelLaunch::<fullname>` after KernelMod::Launch, on the thread that made the CANN calls. So while armed,
// a launch is counted at once (step, launch index, stream and task ids: Session::begin_unnamed_launch) but named later:
// its finished capture waits on its thread (park) until the thread's next kernel record, which names every kernel the
// thread launched since the previous one (one MindSpore kernel may launch several: an aclop's inner kernels, a
// fallback cast). Only then are the filters that need the name applied and the kernel handed to the collector; a
// kernel they reject has its staged data waited for and let go.
//
// A kernel no record names gets today's name (its Python scope, else Default): on a thread that never had a kernel
// record when another record of the framework arrives (PyNative's tasks), when more than kMaxPending wait on one
// thread, when the thread exits, and at every flush and at exit (resolve_all). Each of those happens at the same point
// of the same program in every run, so names stay run-invariant (spec §5).
#pragma once
#include <memory>
#include <string_view>

#include "record/kernel_record.h"
#include "shim/capture/session.h"
#include "shim/device/stager.h"

namespace msprobe::shim::scope_names {

inline constexpr size_t kMaxPending = 256;

// The composition root arms naming once the framework's records will come (its profiler is on and RecordData is
// hooked); from then on KernelLaunch begins unnamed launches. One atomic load.
void arm() noexcept;
bool armed() noexcept;

// A launch of this thread waiting for its name. `kernel` is set (with `staging`, handed_over() not yet called) when the
// launch ran and was provisionally captured; `fallback_op_name` is today's OpName for it.
struct Pending {
  Session *session = nullptr;
  LaunchTicket ticket;
  std::string op_type, fallback_op_name;
  std::optional<record::KernelCapture> kernel;
  std::unique_ptr<LaunchStaging> staging;
  std::shared_ptr<std::string> named;  // set: given the OpName too (an ACL graph's kernel, for its replays)
  bool counted = true;                 // false: a launch into an ACL graph, not a kernel of the step: named only
};
void park(Pending pending);

// The framework recorded the launch of the kernel `full_name` on this thread: it names what waits here.
void kernel_recorded(std::string_view full_name);
// Another record of the framework on this thread (not an inner step of a kernel's launch).
void other_record();
// Every waiting launch, of every thread, named as today (flush, exit).
void resolve_all() noexcept;

// Counters for the bench and the exit line: kernels named by a record, by fallback.
struct Counts {
  uint64_t named = 0, fallback = 0;
};
Counts counts() noexcept;

}  // namespace msprobe::shim::scope_names
