// Driven by bench_stacks.py through ctypes.PyDLL (the GIL stays held, so captures read Python frames). Every
// function times the capture call alone (CLOCK_MONOTONIC around StackTable::capture) and reports nanoseconds.
#include <cstdint>

#include "bench_common.h"
#include "shim/stacks/stack_unwind.h"

using namespace msprobe::shim;

#define BENCH_EXPORT extern "C" __attribute__((visibility("default")))

namespace {
StackCaptureOptions options(int native, int python) {
  StackCaptureOptions o;
  o.native = native != 0;
  o.python = python != 0;
  return o;
}
}  // namespace

// This library's frames stand for the host framework's: keep them (they would be skipped as the shim's).
BENCH_EXPORT void bench_setup() { StackTable::global().set_own_frames(OwnFrames::CallOnly); }

// `iters` captures from one call site in a C loop; with `vary`, iteration i goes through a distinct native path
// (a new stack each time). Native stack depth: `depth` levels of recursion plus what is below this library.
BENCH_EXPORT void bench_loop(int depth, int iters, int native, int python, int vary, uint64_t *out_ns,
                             uint32_t *out_id) {
  bench::Run r;
  r.opts = options(native, python);
  for (int i = 0; i < iters; ++i) {
    r.bits = vary ? static_cast<uint64_t>(i) + 1 : 0;
    bench::step(r, depth);
    out_ns[i] = r.ns;
    out_id[i] = r.id;
  }
}

BENCH_EXPORT uint64_t bench_once(int depth, int native, int python, uint32_t *id) {
  bench::Run r;
  r.opts = options(native, python);
  bench::step(r, depth);
  *id = r.id;
  return r.ns;
}

BENCH_EXPORT int bench_native_frames(uint32_t id) {
  return static_cast<int>(StackTable::global().native_addresses(id).size());
}
BENCH_EXPORT int bench_python_frames(uint32_t id) {
  return static_cast<int>(StackTable::global().python_frame_ids(id).size());
}
BENCH_EXPORT void bench_set_unwinder(int u) { set_native_unwinder(static_cast<NativeUnwinder>(u)); }
BENCH_EXPORT const char *bench_unwinder() { return to_string(active_native_unwinder()); }

// Two clock reads with nothing between them: the measurement's own cost.
BENCH_EXPORT void bench_timer(int iters, uint64_t *out_ns) {
  for (int i = 0; i < iters; ++i) {
    const uint64_t t0 = bench::now_ns();
    out_ns[i] = bench::now_ns() - t0;
  }
}
