#include "shim/capture/capture_call.h"

#include <atomic>
#include <stdexcept>

#include "shim/base/log.h"

namespace msprobe::shim {
namespace {

constinit std::atomic<DescribeFault> g_fault{DescribeFault::None};
constinit std::atomic<uint64_t> g_dropped{0};

}  // namespace

void set_describe_fault(DescribeFault fault) noexcept { g_fault.store(fault, std::memory_order_relaxed); }

void CaptureCall::fault_point(DescribeFault side) {
  if (g_fault.load(std::memory_order_relaxed) == side) throw std::runtime_error("test seam: describe step throws");
}

CaptureCall::CaptureCall(Session &session, std::string_view op_type, StackId stack, void *stream) noexcept {
  ReentryGuard guard;  // the session's decision and the stack walk make no host calls
  try {
    launch_.emplace(session, op_type, stack, stream);
  } catch (...) {
    launch_.reset();
    nested_.emplace();
    drop("the kernel could not be named");
  }
}

CaptureCall::CaptureCall(Session &session, std::string_view op_type, void *stream) noexcept
    : CaptureCall(
          session, op_type,
          [&]() noexcept {
            try {
              return launch_stack(session);
            } catch (...) {
              return kEmptyStack;
            }
          }(),
          stream) {}

CaptureCall::~CaptureCall() { finish(false); }

void CaptureCall::drop(const char *why) noexcept {
  dropped_ = true;
  if (g_dropped.fetch_add(1, std::memory_order_relaxed) == 0)
    log_warn(
        "a kernel could not be recorded (%s); the host's call went through, and the kernel is missing from the "
        "dump (further ones are counted, not shown)",
        why);
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
