// Per-thread: true while the shim itself is inside a runtime call or its capture logic, so that calls the
// shim makes into the runtime (copies, events, allocations) pass straight through the shim's own hooks.
#pragma once

namespace msprobe::shim {

class ReentryGuard {
 public:
  ReentryGuard() : was_(depth_++ > 0) {}
  ~ReentryGuard() { --depth_; }
  ReentryGuard(const ReentryGuard &) = delete;
  ReentryGuard &operator=(const ReentryGuard &) = delete;
  bool nested() const { return was_; }
  static bool active() { return depth_ > 0; }

 private:
  bool was_;
  static thread_local int depth_ __attribute__((tls_model("initial-exec")));
};

}  // namespace msprobe::shim
