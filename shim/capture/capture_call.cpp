#include "shim/capture/capture_call.h"

#include <atomic>
#include <stdexcept>

namespace msprobe::shim {
namespace {

constinit std::atomic<DescribeFault> g_fault{DescribeFault::None};
constinit std::atomic<uint64_t> g_fault_times{0};

}  // namespace

__attribute__((weak)) Session *start_session() noexcept { return nullptr; }

Session *capture_gate() noexcept {
  if (ReentryGuard::active() || KernelLaunch::open_on_this_thread()) return nullptr;
  if (Session *session = active_session()) return session;
  return start_session();
}

void set_describe_fault(DescribeFault fault, uint64_t times) noexcept {
  g_fault_times.store(times, std::memory_order_relaxed);
  g_fault.store(fault, std::memory_order_relaxed);
}

void describe_fault_point(DescribeFault where) {
  if (g_fault.load(std::memory_order_relaxed) != where) return;
  uint64_t left = g_fault_times.load(std::memory_order_relaxed);
  while (left > 0 && !g_fault_times.compare_exchange_weak(left, left == UINT64_MAX ? left : left - 1)) {
  }
  if (left > 0) throw std::runtime_error("test seam: describe step throws");
}

bool CaptureCall::only_counted(Session &session, std::string_view op_type, void *stream,
                               const OpTypeFacts *facts) noexcept {
  bool counted_only = false;
  guarded(Problem::KernelNotRecorded, [&] {
    counted_only = !(facts ? facts->may_capture : session.may_capture(op_type)) || !session.captures_ahead();
    if (counted_only)
      session.skip_launch(op_type, stream, facts ? facts->step_marker : session.is_step_marker(op_type));
  });
  if (!counted_only) return false;
  nested_.emplace();  // the kernels it launches are its own, not the host's
  return true;
}

void CaptureCall::begin(Session &session, std::string_view op_type, StackId stack, void *stream,
                        const OpTypeFacts *facts) noexcept {
  try {
    launch_.emplace(session, op_type, stack, stream, facts ? std::optional<bool>(facts->step_marker) : std::nullopt);
  } catch (...) {
    launch_.reset();
    nested_.emplace();
    drop("the kernel could not be named");
  }
}

CaptureCall::~CaptureCall() { finish(false); }

void CaptureCall::drop(const char *why) noexcept {
  dropped_ = true;
  report_problem(Problem::KernelNotRecorded, why);
}

void CaptureCall::finish(bool ok) noexcept {
  if (finished_ || !launch_) return;
  finished_ = true;
  ReentryGuard guard;
  try {
    launch_->finish(ok && !dropped_);
  } catch (const std::exception &e) {
    drop(e.what());
  } catch (...) {
    drop("unknown exception");
  }
}

}  // namespace msprobe::shim
