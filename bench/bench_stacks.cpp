// Native-only stack capture cost (no Python in this process): per capture, median and p99, for a stack seen
// before (dedupe hit) and a new one (miss), at 30 and 64 frames, with libunwind and with glibc backtrace(), from
// two threads at once; and the writer-side cost of rendering a stack (ELF symbolization, cold and warm).
//     bench_stacks [--quick]
// The Python half (30 native + 20 Python frames) is bench_stacks.py.
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench_common.h"
#include "shim/stacks/stack_unwind.h"

using namespace msprobe::shim;

namespace {

double g_timer_median = 0;

void report(const char *name, int native, std::vector<double> ns) {
  std::sort(ns.begin(), ns.end());
  const double med = bench::percentile(ns, 50), p99 = bench::percentile(ns, 99);
  std::printf("%-44s native=%3d  n=%7zu  median=%8.0f ns  p99=%8.0f ns  (median minus timer %6.0f ns)\n", name, native,
              ns.size(), med, p99, med - g_timer_median);
}

int native_frames(uint32_t id) { return static_cast<int>(StackTable::global().native_addresses(id).size()); }

// Depth of recursion that gives `frames` native frames in total.
int depth_for(int frames) {
  bench::Run r;
  r.opts.python = false;
  r.bits = 0;
  bench::step(r, 0);
  return frames - native_frames(r.id);
}

__attribute__((noinline)) std::vector<double> hits(int depth, int iters, int *frames) {
  bench::Run r;
  r.opts.python = false;
  bench::step(r, depth);  // first sight
  *frames = native_frames(r.id);
  std::vector<double> ns;
  ns.reserve(static_cast<size_t>(iters));
  for (int i = 0; i < iters; ++i) {
    bench::step(r, depth);
    ns.push_back(static_cast<double>(r.ns));
  }
  return ns;
}

__attribute__((noinline)) std::vector<double> misses(int depth, int iters, uint64_t first_bits, int *frames) {
  bench::Run r;
  r.opts.python = false;
  std::vector<double> ns;
  const size_t before = StackTable::global().size();
  for (int i = 0; i < iters; ++i) {
    r.bits = first_bits + static_cast<uint64_t>(i);
    bench::step(r, depth);
    ns.push_back(static_cast<double>(r.ns));
  }
  *frames = native_frames(r.id);
  if (StackTable::global().size() - before != static_cast<size_t>(iters)) std::printf("warning: not all misses\n");
  return ns;
}

// The unwinder alone at the same depth as hits(): the table's share of a capture is the difference.
__attribute__((noinline)) std::vector<double> unwind_alone(int depth, int iters, int *frames) {
  bench::Run r;
  r.unwind_only = true;
  std::vector<double> ns;
  for (int i = 0; i < iters; ++i) {
    bench::step(r, depth);
    ns.push_back(static_cast<double>(r.ns));
  }
  *frames = static_cast<int>(r.id);
  return ns;
}

}  // namespace

int main(int argc, char **argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const int iters = quick ? 500 : 200000;
  const int miss_iters = quick ? 200 : 20000;
  StackTable::global().set_own_frames(OwnFrames::CallOnly);  // these frames stand for the host's

  std::vector<double> timer;
  for (int i = 0; i < iters; ++i) {
    const uint64_t t0 = bench::now_ns();
    timer.push_back(static_cast<double>(bench::now_ns() - t0));
  }
  std::sort(timer.begin(), timer.end());
  g_timer_median = bench::percentile(timer, 50);
  report("timer (two clock reads, nothing between)", 0, timer);
  std::printf("unwinder: %s\n", to_string(active_native_unwinder()));

  int frames = 0;
  const int d30 = depth_for(30), d64 = depth_for(64);
  std::vector<double> ns = hits(d30, iters, &frames);
  report("hit, libunwind", frames, ns);
  ns = unwind_alone(d30, iters, &frames);
  report("unw_backtrace alone (no table), same depth", frames, ns);
  ns = hits(d64, iters, &frames);
  report("hit, libunwind", frames, ns);
  ns = misses(d30, miss_iters, 1, &frames);
  report("miss (new stack), libunwind", frames, ns);

  set_native_unwinder(NativeUnwinder::Backtrace);
  ns = hits(d30, iters, &frames);
  report("hit, glibc backtrace()", frames, ns);
  set_native_unwinder(NativeUnwinder::Auto);

  {  // two threads capturing known stacks at once (the CI machine has 2 cores)
    std::vector<double> a, b;
    int fa = 0, fb = 0;
    std::thread ta([&] { a = hits(d30, iters / 2, &fa); });
    std::thread tb([&] { b = hits(d30, iters / 2, &fb); });
    ta.join();
    tb.join();
    a.insert(a.end(), b.begin(), b.end());
    report("hit, libunwind, 2 threads at once", fa, a);
  }

  {  // writer side: render distinct stacks (the first render loads the ELF symbol tables)
    const int n = quick ? 50 : 2000;
    std::vector<uint32_t> ids;
    bench::Run r;
    r.opts.python = false;
    for (int i = 0; i < n; ++i) {
      r.bits = (uint64_t{1} << 40) + static_cast<uint64_t>(i);
      bench::step(r, d30);
      ids.push_back(r.id);
    }
    std::vector<double> cold, warm;
    size_t chars = 0;
    for (uint32_t id : ids) {
      const uint64_t t0 = bench::now_ns();
      chars += StackTable::global().frames(id, StackMode::Native).size();
      cold.push_back(static_cast<double>(bench::now_ns() - t0));
    }
    for (uint32_t id : ids) {
      const uint64_t t0 = bench::now_ns();
      chars += StackTable::global().frames(id, StackMode::Native).size();
      warm.push_back(static_cast<double>(bench::now_ns() - t0));
    }
    std::printf("render: first stack %.0f us (loads symbol tables)\n", cold[0] / 1000.0);
    cold.erase(cold.begin());
    report("render a new stack, 30 frames (writer side)", 30, cold);
    report("render again (writer side)", 30, warm);
    if (chars == 0) return 1;
  }
  return 0;
}
