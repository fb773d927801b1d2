// The stand-in's call counters (fakecann/call_counters.h).
#include "fakecann/call_counters.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace fakecann {
namespace {

constexpr size_t kKinds = (size_t)CallKind::Count;

// One cache line each: the launching threads count different kinds at once.
struct alignas(64) Counter {
  std::atomic<uint64_t> n{0};
};

Counter *counters() {
  static auto *c = new Counter[kKinds];  // immortal: counted until the last thread stops
  return c;
}

const char *const kNames[kKinds] = {"phase1",
                                    "phase2",
                                    "argument_created",
                                    "argument_destroyed",
                                    "executor_address",
                                    "executor_repeatable",
                                    "executor_destroyed",
                                    "copy",
                                    "event_record",
                                    "event_wait",
                                    "kernel_launch"};

void write_call_counters() {
  const char *path = std::getenv("FAKE_CANN_CALL_COUNTERS");
  if (path == nullptr || *path == '\0') return;
  std::string p(path);
  if (size_t at = p.find("%p"); at != std::string::npos) p.replace(at, 2, std::to_string(getpid()));
  FILE *f = std::fopen(p.c_str(), "w");
  if (f == nullptr) return;
  std::fputc('{', f);
  for (size_t i = 0; i < kKinds; ++i)
    std::fprintf(f, "%s\"%s\": %llu", i ? ", " : "", kNames[i], (unsigned long long)counters()[i].n.load());
  std::fputs("}\n", f);
  std::fclose(f);
}

// Registered when libruntime loads, before any tool's own exit handler, so it runs after them.
__attribute__((constructor)) void register_call_counter_report() { std::atexit(write_call_counters); }

}  // namespace

void count_call(CallKind kind) {
  if (kind < CallKind::Count) counters()[(size_t)kind].n.fetch_add(1, std::memory_order_relaxed);
}

const char *call_kind_name(CallKind kind) { return kind < CallKind::Count ? kNames[(size_t)kind] : nullptr; }

}  // namespace fakecann

extern "C" {

// Stand-in only (not CANN): up to n counters in CallKind order; returns how many kinds there are. Never called by
// the shim.
__attribute__((visibility("default"))) size_t fakeCannGetCallCounters(uint64_t *counts, size_t n) {
  for (size_t i = 0; i < n && i < fakecann::kKinds; ++i)
    counts[i] = fakecann::counters()[i].n.load(std::memory_order_relaxed);
  return fakecann::kKinds;
}

__attribute__((visibility("default"))) const char *fakeCannCallCounterName(size_t i) {
  return fakecann::call_kind_name((fakecann::CallKind)i);
}

}  // extern "C"
