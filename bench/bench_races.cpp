// What the race check costs per kernel, measured apart from the rest of capture (the machine's load moves the
// end-to-end figures by more than the check costs). Each figure is the median over rounds of a loop's thread CPU time
// divided by its kernels:
//   launching side   StreamClocks::launch on one of S streams (events recorded and waited for every few launches, as
//                    a framework's collectives do) and the kernel's accesses listed as KernelLaunch lists them (3
//                    tensors), moved into a record: what the host's thread pays
//   writer side      accesses_of() and RaceDetector::check for the same kernels over a working set of W buffers, with
//                    the ranges and entries it keeps: what a writer thread pays
//
//   bench_races [--quick]
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "races/clocks.h"
#include "races/detector.h"
#include "record/kernel_record.h"

using namespace msprobe;

namespace {

double thread_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int stream_handles[8], event_handles[8];

// One kernel's accesses as KernelLaunch lists them: two inputs and an output in a working set of `buffers` blocks.
void accesses(std::vector<record::DeviceAccess> &into, uint64_t i, uint64_t buffers) {
  constexpr uint64_t kBlock = 1 << 16;
  for (uint32_t slot = 0; slot < 3; ++slot) {
    const uint64_t b = ((i * 7 + slot * 13) % buffers) * kBlock + 0x100000;
    into.push_back({b, b + kBlock / 2, slot < 2 ? record::AccessKind::Read : record::AccessKind::Write,
                    slot < 2 ? record::AccessRole::Input : record::AccessRole::Output, slot < 2 ? slot : 0, -1});
  }
}

// The launching side for `n` kernels on `streams` streams; returns the records (kept: their freeing is not the
// launching thread's).
double launching(uint64_t n, int streams, std::vector<record::RaceFacts> &out) {
  races::StreamClocks clocks;
  out.clear();
  out.reserve(n);
  const double t0 = thread_ns();
  for (uint64_t i = 0; i < n; ++i) {
    const void *s = &stream_handles[i % streams];
    if (streams > 1 && i % 16 == 15) {  // a collective's events: record on this stream, the next one waits
      clocks.record(&event_handles[i % streams], s);
      clocks.wait(&stream_handles[(i + 1) % streams], &event_handles[i % streams]);
    }
    std::optional<record::RaceFacts> race;
    race.emplace().stamp = clocks.launch(s);
    accesses(race->accesses, i, 64);
    out.push_back(std::move(*race));
  }
  return (thread_ns() - t0) / (double)n;
}

double writer(const std::vector<record::RaceFacts> &facts, uint64_t buffers, size_t *ranges, size_t *entries) {
  races::RaceDetector d;
  std::vector<std::shared_ptr<const races::Launch>> launches;
  const double t0 = thread_ns();
  for (uint64_t i = 0; i < facts.size(); ++i) {
    auto l = std::make_shared<races::Launch>();
    l->stamp = facts[i].stamp;
    std::vector<record::DeviceAccess> raw;
    accesses(raw, i, buffers);
    l->accesses = races::accesses_of(raw);
    d.check(l);
  }
  const double per = (thread_ns() - t0) / (double)facts.size();
  *ranges = d.ranges();
  *entries = d.entries();
  return per;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char **argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const uint64_t n = quick ? 2000 : 200000;
  const int rounds = quick ? 1 : 7;
  std::printf("kernels per round %llu, rounds %d (median of rounds), thread CPU time\n\n",
              static_cast<unsigned long long>(n), rounds);
  std::printf("| side | streams | buffers | ns per kernel | ranges kept | accesses kept |\n|---|---|---|---|---|---|\n");
  std::vector<record::RaceFacts> facts;
  for (int streams : {1, 2, 4}) {
    std::vector<double> t;
    for (int r = 0; r < rounds; ++r) t.push_back(launching(n, streams, facts));
    std::printf("| launching | %d | 64 | %.0f | | |\n", streams, median(t));
  }
  for (uint64_t buffers : {64, 4096}) {
    std::vector<double> t;
    size_t ranges = 0, entries = 0;
    for (int r = 0; r < rounds; ++r) t.push_back(writer(facts, buffers, &ranges, &entries));
    std::printf("| writer | 4 | %llu | %.0f | %zu | %zu |\n", static_cast<unsigned long long>(buffers), median(t), ranges,
                entries);
  }
  return 0;
}
