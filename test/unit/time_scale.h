// Wall-clock bounds in tests scale with MSPROBE_TEST_TIME_SCALE (a number >= 1, default 1), set by a test
// environment where code runs slower than on the machine the bounds were written for: scripts/test_aarch64.sh
// (qemu-user emulation). Only upper bounds on how long work takes scale; lower bounds that come from a timeout or
// a delay the code under test must honour do not.
#pragma once
#include <chrono>
#include <cstdlib>
#include <string>

namespace msprobe::test {

inline double time_scale() {
  static const double scale = [] {
    const char *s = std::getenv("MSPROBE_TEST_TIME_SCALE");
    if (s == nullptr || *s == '\0') return 1.0;
    char *end = nullptr;
    const double v = std::strtod(s, &end);
    return end != s && *end == '\0' && v >= 1.0 && v <= 1000.0 ? v : 1.0;
  }();
  return scale;
}

// `d` scaled by time_scale(), in d's own unit (rounded up).
template <class Rep, class Period>
std::chrono::duration<Rep, Period> scaled(std::chrono::duration<Rep, Period> d) {
  const double v = static_cast<double>(d.count()) * time_scale();
  auto r = static_cast<Rep>(v);
  if (static_cast<double>(r) < v) ++r;
  return std::chrono::duration<Rep, Period>(r);
}

inline double scaled(double seconds) { return seconds * time_scale(); }

// The stand-in's FAKE_CANN_TASK_DELAY_US (every stream task starts that late) scaled by time_scale(), so that a
// scaled "the launch did not wait" bound stays below the delay. Call before the first stream task runs (the
// stand-in reads the variable once); a no-op when the variable is not set or the scale is 1.
inline bool scale_fake_cann_task_delay() {
  const char *s = std::getenv("FAKE_CANN_TASK_DELAY_US");
  if (s == nullptr || time_scale() == 1.0) return false;
  const long us = std::strtol(s, nullptr, 10);
  return ::setenv("FAKE_CANN_TASK_DELAY_US", std::to_string(static_cast<long>(us * time_scale())).c_str(), 1) == 0;
}

}  // namespace msprobe::test
