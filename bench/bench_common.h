// Shared by the stack benchmarks: a clock, a recursion that builds native stacks of a chosen depth (and, with
// `bits`, a distinct stack per value: each level picks one of four functions), and percentile helpers.
#pragma once
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "shim/stacks/stack_unwind.h"
#include "shim/stacks/stacks.h"

namespace bench {

inline uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

struct Run {
  msprobe::shim::StackCaptureOptions opts;
  uint64_t bits = 0;  // base-4 digit per level: which of four functions the level goes through
  uint64_t ns = 0;    // duration of the capture alone
  uint32_t id = 0;
  bool unwind_only = false;  // time the native unwinder alone (no StackTable), at the same depth
};

inline volatile uint32_t g_sink;

__attribute__((noinline)) inline void leaf(Run &r) {
  if (r.unwind_only) {
    uintptr_t buf[msprobe::shim::kMaxNativeFrames];
    const uint64_t t0 = now_ns();
    r.id = static_cast<uint32_t>(msprobe::shim::unwind_native(buf, msprobe::shim::kMaxNativeFrames));
    r.ns = now_ns() - t0;
    return;
  }
  const uint64_t t0 = now_ns();
  r.id = msprobe::shim::StackTable::global().capture(r.opts);
  r.ns = now_ns() - t0;
  g_sink = r.id;
}

void step(Run &r, int depth);

template <int K>
__attribute__((noinline)) void level(Run &r, int depth) {
  step(r, depth);
  g_sink = K;  // not a tail call: every level keeps its frame
}

inline void step(Run &r, int depth) {
  if (depth <= 0) {
    leaf(r);
    return;
  }
  // Two bits per level; deeper than 32 levels the pattern repeats (a shift by 64 or more is undefined).
  switch ((r.bits >> ((2 * (depth - 1)) & 63)) & 3) {
    case 0: level<0>(r, depth - 1); break;
    case 1: level<1>(r, depth - 1); break;
    case 2: level<2>(r, depth - 1); break;
    default: level<3>(r, depth - 1); break;
  }
}

// Nearest-rank percentile of already sorted values.
inline double percentile(const std::vector<double> &sorted, double p) {
  if (sorted.empty()) return 0;
  size_t i = static_cast<size_t>(p / 100.0 * static_cast<double>(sorted.size()));
  return sorted[std::min(i, sorted.size() - 1)];
}

}  // namespace bench
