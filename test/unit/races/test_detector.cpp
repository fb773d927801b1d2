// races/detector.h: which accesses race, what is kept, and a brute-force check of random programs.
#include "races/detector.h"

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <tuple>

#include "races/clocks.h"

namespace msprobe::races {
namespace {

using record::AccessKind;
using record::AccessRole;
using record::DeviceAccess;

int s_handle, t_handle, e_handle;
const void *const S = &s_handle, *const T = &t_handle, *const E = &e_handle;

DeviceAccess in(uint64_t b, uint64_t e, uint32_t slot = 0) { return {b, e, AccessKind::Read, AccessRole::Input, slot}; }
DeviceAccess out(uint64_t b, uint64_t e, uint32_t slot = 0) {
  return {b, e, AccessKind::Write, AccessRole::Output, slot};
}

std::shared_ptr<const Launch> launch(record::LaunchStamp stamp, std::string name, std::vector<DeviceAccess> raw) {
  auto l = std::make_shared<Launch>();
  l->stamp = std::move(stamp);
  l->origin.name = std::move(name);
  l->accesses = accesses_of(raw);
  return l;
}

TEST(Accesses, MergedByRangeAndNamedAsDumpJsonNamesThem) {
  std::vector<DeviceAccess> raw = {in(0, 64, 0), in(64, 128, 1), out(0, 64, 0),
                                   DeviceAccess{200, 208, AccessKind::Read, AccessRole::Input, 2, 1},
                                   DeviceAccess{300, 300, AccessKind::Read, AccessRole::Input, 3}};  // empty
  std::vector<Access> a = accesses_of(raw);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[0].kind, AccessKind::ReadWrite);
  EXPECT_EQ(a[0].tensors, (std::vector<std::string>{"input.0", "output.0"}));
  EXPECT_EQ(a[1].kind, AccessKind::Read);
  EXPECT_EQ(a[2].tensors, std::vector<std::string>{"input.2.1"});
  std::vector<Access> copy = accesses_of({{0, 8, AccessKind::Read, AccessRole::Source},
                                          {8, 16, AccessKind::Unknown, AccessRole::Destination}});
  EXPECT_EQ(copy[0].tensors, std::vector<std::string>{"src"});
  EXPECT_EQ(copy[1].tensors, std::vector<std::string>{"dst"});
  EXPECT_STREQ(race_kind(AccessKind::Write, AccessKind::ReadWrite), "write-write");
  EXPECT_STREQ(race_kind(AccessKind::Read, AccessKind::Write), "read-write");
  EXPECT_STREQ(race_kind(AccessKind::Unknown, AccessKind::Read), "unknown");
}

TEST(Detector, AnUnorderedWriteAndReadOfTheSameBytesRace) {
  StreamClocks c;
  RaceDetector d;
  auto w = launch(c.launch(S), "Muls.a.0.forward", {in(1000, 1100), out(0, 256)});
  auto r = launch(c.launch(T), "HcclAllReduce.b.0.forward", {in(128, 512)});
  EXPECT_TRUE(d.check(w).empty());
  std::vector<Race> found = d.check(r);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].earlier, w);
  EXPECT_EQ(found[0].later, r);
  EXPECT_EQ(found[0].earlier_access, 1u);  // w's output
  EXPECT_EQ(found[0].later_access, 0u);
  EXPECT_EQ(found[0].begin, 128u);  // the bytes both touch
  EXPECT_EQ(found[0].end, 256u);
}

TEST(Detector, NoRaceWithoutSharedBytesBetweenReadsOrWithAnEvent) {
  StreamClocks c;
  RaceDetector d;
  EXPECT_TRUE(d.check(launch(c.launch(S), "a", {out(0, 100)})).empty());
  EXPECT_TRUE(d.check(launch(c.launch(T), "b", {in(100, 200)})).empty());  // adjacent, not overlapping
  EXPECT_TRUE(d.check(launch(c.launch(S), "c", {in(150, 300)})).empty());  // two reads
  c.record(E, S);
  c.wait(T, E);
  EXPECT_TRUE(d.check(launch(c.launch(T), "d", {out(0, 300)})).empty());  // after everything on S
}

TEST(Detector, AnInPlaceLaunchIsOneReadWriteAccessAndNeverRacesWithItself) {
  StreamClocks c;
  RaceDetector d;
  auto inplace = launch(c.launch(S), "InplaceAdd.x.0.forward", {in(0, 64, 0), in(64, 128, 1), out(0, 64, 0)});
  EXPECT_TRUE(d.check(inplace).empty());
  auto other = launch(c.launch(T), "Muls.y.0.forward", {out(32, 48)});
  std::vector<Race> found = d.check(other);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].earlier->accesses[found[0].earlier_access].tensors,
            (std::vector<std::string>{"input.0", "output.0"}));
  EXPECT_STREQ(race_kind(found[0].earlier->accesses[found[0].earlier_access].kind,
                         found[0].later->accesses[found[0].later_access].kind),
               "write-write");
}

TEST(Detector, UnknownAccessesRaceWithReadsAndAreSaidUnknown) {
  StreamClocks c;
  RaceDetector d;
  d.check(launch(c.launch(S), "raw", {{0, 64, AccessKind::Unknown, AccessRole::Input}}));
  std::vector<Race> found = d.check(launch(c.launch(T), "reader", {in(0, 8)}));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_STREQ(race_kind(AccessKind::Unknown, AccessKind::Read), "unknown");
}

TEST(Detector, AWriteOrderedAfterEarlierAccessesReplacesThem) {
  StreamClocks c;
  RaceDetector d;
  auto w1 = launch(c.launch(S), "w1", {out(0, 100)});
  auto w2 = launch(c.launch(S), "w2", {out(0, 100)});
  d.check(w1);
  d.check(w2);
  EXPECT_EQ(d.ranges(), 1u);
  EXPECT_EQ(d.entries(), 1u);  // w1 is ordered before w2, which writes every byte of it
  std::vector<Race> found = d.check(launch(c.launch(T), "r", {in(0, 10)}));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].earlier, w2);  // the race with w1 is reported through w2
}

TEST(Detector, ReadsOnSeveralStreamsAreAllKeptUntilAWriteOrderedAfterThem) {
  StreamClocks c;
  RaceDetector d;
  d.check(launch(c.launch(S), "r1", {in(0, 100)}));
  d.check(launch(c.launch(T), "r2", {in(0, 100)}));
  EXPECT_EQ(d.entries(), 2u);
  c.record(E, T);
  c.wait(S, E);
  std::vector<Race> none = d.check(launch(c.launch(S), "w", {out(0, 100)}));
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(d.entries(), 1u);
}

TEST(Detector, PartialOverlapsSplitAndCoalesceAgain) {
  StreamClocks c;
  RaceDetector d;
  d.check(launch(c.launch(S), "a", {out(0, 100)}));
  d.check(launch(c.launch(S), "b", {out(40, 60)}));
  EXPECT_EQ(d.ranges(), 3u);  // [0,40) a, [40,60) b, [60,100) a
  d.check(launch(c.launch(S), "c", {out(0, 100)}));
  EXPECT_EQ(d.ranges(), 1u);
  EXPECT_EQ(d.entries(), 1u);
  // A race over split ranges is one race over their hull.
  RaceDetector d2;
  auto a = launch(c.launch(S), "a", {out(0, 100)});
  d2.check(a);
  d2.check(launch(c.launch(S), "b", {in(40, 60)}));  // splits a's range (reads keep a's write)
  std::vector<Race> found = d2.check(launch(c.launch(T), "t", {in(10, 90)}));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].earlier, a);
  EXPECT_EQ(found[0].begin, 10u);
  EXPECT_EQ(found[0].end, 90u);
}

TEST(Detector, OutOfOrderChecksInventNothing) {
  StreamClocks c;
  RaceDetector d;
  auto k = launch(c.launch(S), "k", {out(0, 64)});
  c.record(E, S);
  c.wait(T, E);
  auto l = launch(c.launch(T), "l", {in(0, 64)});
  EXPECT_TRUE(d.check(l).empty());  // submitted first by its thread
  EXPECT_TRUE(d.check(k).empty());
}

// ---- Random programs against the brute force: every pair of accesses of two launches ---------------------------
struct Op {
  std::shared_ptr<const Launch> launch;
};

struct Program {
  std::vector<std::shared_ptr<const Launch>> launches;
};

Program random_program(std::mt19937 &rng) {
  static int streams[3], events[3];
  StreamClocks c;
  Program p;
  std::uniform_int_distribution<int> what(0, 9), pick(0, 2), addr(0, 63), len(1, 24), kind(0, 9);
  for (int i = 0; i < 60; ++i) {
    const int w = what(rng);
    if (w <= 5 || w == 9) {
      std::vector<DeviceAccess> raw;
      const int n = 1 + pick(rng);
      for (int j = 0; j < n; ++j) {
        const uint64_t b = (uint64_t)addr(rng), e = b + (uint64_t)len(rng);
        const int k = kind(rng);
        const AccessKind ak = k < 5 ? AccessKind::Read : k < 8 ? AccessKind::Write : AccessKind::Unknown;
        raw.push_back({b, e, ak, j % 2 ? AccessRole::Output : AccessRole::Input, (uint32_t)j});
      }
      p.launches.push_back(launch(w == 9 ? c.host_access() : c.launch(&streams[pick(rng)]), "k" + std::to_string(i),
                                  std::move(raw)));
    } else if (w == 6) {
      c.record(&events[pick(rng)], &streams[pick(rng)]);
    } else if (w == 7) {
      c.wait(&streams[pick(rng)], &events[pick(rng)]);
    } else {
      c.host_learns(pick(rng) == 0 ? c.of_device() : c.of_stream(&streams[pick(rng)]));
    }
  }
  return p;
}

bool overlap(const Access &a, const Access &b) { return a.begin < b.end && b.begin < a.end; }

TEST(Detector, RandomProgramsAgreeWithTheBruteForce) {
  std::mt19937 rng(45);
  size_t races_seen = 0;
  for (int round = 0; round < 400; ++round) {
    Program p = random_program(rng);
    RaceDetector d;
    for (size_t li = 0; li < p.launches.size(); ++li) {
      const auto &l = p.launches[li];
      // The truth: which of l's accesses race with some access of an earlier launch, and with which.
      std::set<std::tuple<const Launch *, uint32_t, uint32_t>> truth;
      for (size_t ei = 0; ei < li; ++ei) {
        const auto &e = p.launches[ei];
        if (ordered_before(e->stamp, l->stamp) || ordered_before(l->stamp, e->stamp)) continue;
        for (uint32_t a = 0; a < e->accesses.size(); ++a)
          for (uint32_t b = 0; b < l->accesses.size(); ++b)
            if (overlap(e->accesses[a], l->accesses[b]) &&
                (may_write(e->accesses[a].kind) || may_write(l->accesses[b].kind)))
              truth.emplace(e.get(), a, b);
      }
      std::set<uint32_t> truth_accesses, found_accesses;
      for (const auto &[e, a, b] : truth) truth_accesses.insert(b);
      for (const Race &r : d.check(l)) {
        // Nothing invented: the pair races, and the bytes are both accesses'.
        EXPECT_TRUE(truth.count({r.earlier.get(), r.earlier_access, r.later_access})) << "round " << round;
        const Access &ea = r.earlier->accesses[r.earlier_access], &la = l->accesses[r.later_access];
        EXPECT_GE(r.begin, std::max(ea.begin, la.begin));
        EXPECT_LE(r.end, std::min(ea.end, la.end));
        found_accesses.insert(r.later_access);
        ++races_seen;
      }
      // Nothing lost: each access that races with something is reported racing with something.
      EXPECT_EQ(found_accesses, truth_accesses) << "round " << round << " launch " << li;
    }
  }
  EXPECT_GT(races_seen, 1000u);  // the programs do race
}

}  // namespace
}  // namespace msprobe::races
