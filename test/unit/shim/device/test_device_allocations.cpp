// The live device allocation table (shim/device/device_allocations.h): interior pointers, frees, reuse of an
// address, the double report of one allocation by aclrtMalloc and its inner rtMalloc, concurrency.
#include "shim/device/device_allocations.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <random>
#include <thread>
#include <vector>

using msprobe::shim::DeviceAllocations;
using msprobe::shim::DeviceRange;

namespace {

const void *at(uint64_t a) { return reinterpret_cast<const void *>(a); }

}  // namespace

TEST(DeviceAllocations, FindsTheAllocationContainingAnyInteriorAddress) {
  DeviceAllocations t;
  t.insert(at(0x10000), 256);
  t.insert(at(0x20000), 64);
  EXPECT_EQ(t.find(0x10000), (DeviceRange{0x10000, 256}));
  EXPECT_EQ(t.find(0x10001), (DeviceRange{0x10000, 256}));
  EXPECT_EQ(t.find(0x100ff), (DeviceRange{0x10000, 256}));  // last byte
  EXPECT_FALSE(t.find(0x10100));                              // one past the end
  EXPECT_FALSE(t.find(0xffff));                               // just before
  EXPECT_FALSE(t.find(0x18000));                              // in the gap
  EXPECT_EQ(t.find(0x2003f), (DeviceRange{0x20000, 64}));
  EXPECT_FALSE(t.find(0x20040));
  EXPECT_FALSE(t.find(0));
  EXPECT_FALSE(t.find(UINT64_MAX));
  EXPECT_EQ(t.size(), 2u);
}

TEST(DeviceAllocations, AdjacentAllocationsDoNotBleedIntoEachOther) {
  DeviceAllocations t;
  t.insert(at(0x1000), 0x40);
  t.insert(at(0x1040), 0x40);
  EXPECT_EQ(t.find(0x103f)->base, 0x1000u);
  EXPECT_EQ(t.find(0x1040)->base, 0x1040u);
  EXPECT_EQ(t.size(), 2u);
}

TEST(DeviceAllocations, FreeForgetsOnlyTheFreedAllocation) {
  DeviceAllocations t;
  t.insert(at(0x1000), 0x100);
  t.insert(at(0x2000), 0x100);
  EXPECT_TRUE(t.erase(at(0x1000)));
  EXPECT_FALSE(t.find(0x1000));
  EXPECT_FALSE(t.find(0x1080));
  EXPECT_TRUE(t.find(0x2080));
  EXPECT_FALSE(t.erase(at(0x1000)));  // double free
  EXPECT_FALSE(t.erase(at(0x2080)));  // not a base: nothing is freed
  EXPECT_TRUE(t.find(0x2080));
  EXPECT_EQ(t.size(), 1u);
}

TEST(DeviceAllocations, ReallocationAtTheSameAddressHasItsOwnSize) {
  DeviceAllocations t;
  t.insert(at(0x4000), 0x1000);
  ASSERT_TRUE(t.erase(at(0x4000)));
  t.insert(at(0x4000), 0x20);
  EXPECT_EQ(t.find(0x401f), (DeviceRange{0x4000, 0x20}));
  EXPECT_FALSE(t.find(0x4020));
  EXPECT_FALSE(t.find(0x4800));
  // Larger again.
  ASSERT_TRUE(t.erase(at(0x4000)));
  t.insert(at(0x4000), 0x2000);
  EXPECT_EQ(t.find(0x5fff), (DeviceRange{0x4000, 0x2000}));
}

TEST(DeviceAllocations, OneAllocationReportedTwiceIsOneEntryWithTheOuterSize) {
  // aclrtMalloc's inner rtMalloc reports first (maybe padded), then aclrtMalloc with the host's size.
  DeviceAllocations t;
  t.insert(at(0x8000), 96);
  t.insert(at(0x8000), 80);
  EXPECT_EQ(t.size(), 1u);
  EXPECT_EQ(t.find(0x804f), (DeviceRange{0x8000, 80}));
  EXPECT_FALSE(t.find(0x8050));
  // aclrtFree then its inner rtFree: the second finds nothing.
  EXPECT_TRUE(t.erase(at(0x8000)));
  EXPECT_FALSE(t.erase(at(0x8000)));
  EXPECT_EQ(t.size(), 0u);
}

TEST(DeviceAllocations, AnAllocationOverlappingStaleEntriesReplacesThem) {
  // Frees the shim never saw (memory returned by a path it does not hook): the runtime handing out the
  // range again proves the old entries dead.
  DeviceAllocations t;
  t.insert(at(0x1000), 0x100);  // [0x1000, 0x1100)
  t.insert(at(0x1200), 0x100);  // [0x1200, 0x1300)
  t.insert(at(0x1400), 0x100);  // untouched
  t.insert(at(0x1080), 0x200);  // [0x1080, 0x1280): overlaps both
  EXPECT_FALSE(t.find(0x1000));
  EXPECT_EQ(t.find(0x1080)->base, 0x1080u);
  EXPECT_EQ(t.find(0x127f)->base, 0x1080u);
  EXPECT_FALSE(t.find(0x1280));
  EXPECT_EQ(t.find(0x1400)->base, 0x1400u);
  EXPECT_EQ(t.size(), 2u);
}

TEST(DeviceAllocations, EmptyAndWrappingAllocationsContainNothing) {
  DeviceAllocations t;
  t.insert(at(0x1000), 0);
  t.insert(at(UINT64_MAX - 4), 16);
  EXPECT_EQ(t.size(), 0u);
  EXPECT_FALSE(t.find(0x1000));
}

TEST(DeviceAllocations, FindAllAnswersEachAddress) {
  DeviceAllocations t;
  t.insert(at(0x1000), 0x10);
  t.insert(at(0x3000), 0x10);
  const std::vector<uint64_t> addrs{0x1008, 0x2000, 0x300f, 0x3010, 0};
  std::vector<std::optional<DeviceRange>> out(addrs.size());
  t.find_all(addrs, out);
  EXPECT_EQ(out[0], (DeviceRange{0x1000, 0x10}));
  EXPECT_FALSE(out[1]);
  EXPECT_EQ(out[2], (DeviceRange{0x3000, 0x10}));
  EXPECT_FALSE(out[3]);
  EXPECT_FALSE(out[4]);
}

TEST(DeviceAllocations, AgreesWithASimpleMapWhateverTheOrderOfAllocationsAndFrees) {
  // Blocks made in address order and freed first-made-first (a caching allocator's release at exit), last-made-first,
  // and at random, with re-allocations and stale overlaps between: every lookup agrees with a plain map.
  std::mt19937_64 rng(29);
  for (int order = 0; order < 3; ++order) {
    DeviceAllocations t;
    std::map<uint64_t, uint64_t> ref;
    int wrong = 0;
    auto check = [&](uint64_t addr) {
      std::optional<DeviceRange> want;
      auto it = ref.upper_bound(addr);
      if (it != ref.begin() && addr - std::prev(it)->first < std::prev(it)->second)
        want = DeviceRange{std::prev(it)->first, std::prev(it)->second};
      wrong += t.find(addr) != want;
    };
    std::vector<uint64_t> made;
    for (int round = 0; round < 4; ++round) {
      for (int i = 0; i < 300; ++i) {
        const uint64_t base = 0x100000 + (uint64_t)(rng() % 4096) * 0x100, size = 0x40 + rng() % 0x200;
        t.insert(at(base), size);
        for (auto it = ref.lower_bound(base); it != ref.end() && it->first < base + size;) it = ref.erase(it);
        if (auto it = ref.lower_bound(base); it != ref.begin() && std::prev(it)->first + std::prev(it)->second > base)
          ref.erase(std::prev(it));
        ref[base] = size;
        made.push_back(base);
      }
      if (order == 1) std::reverse(made.begin(), made.end());
      if (order == 2) std::shuffle(made.begin(), made.end(), rng);
      for (size_t i = 0; i < made.size() / 2; ++i) {
        const bool live = ref.count(made[i]) != 0;
        wrong += t.erase(at(made[i])) != live;
        ref.erase(made[i]);
      }
      made.erase(made.begin(), made.begin() + (std::ptrdiff_t)(made.size() / 2));
      for (int i = 0; i < 2000; ++i) check(0x100000 + rng() % (4097 * 0x100));
      wrong += t.size() != ref.size();
    }
    EXPECT_EQ(wrong, 0) << "order " << order;
  }
}

TEST(DeviceAllocations, ConcurrentAllocationsFreesAndLookupsStayConsistent) {
  DeviceAllocations t;
  constexpr int kThreads = 4, kRounds = 20000;
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int id = 0; id < kThreads; ++id)
    threads.emplace_back([&, id] {
      // Each thread owns one 1 MiB region and reallocates inside it with changing sizes.
      const uint64_t region = 0x100000000ull + (uint64_t)id * 0x100000;
      for (int i = 0; i < kRounds; ++i) {
        const uint64_t size = 64 + (uint64_t)(i % 97) * 64;
        t.insert(at(region), size);
        auto r = t.find(region + size - 1);
        if (!r || r->base != region || r->size != size) ++errors;
        if (t.find(region + size)) ++errors;
        if (!t.erase(at(region))) ++errors;
        if (t.find(region)) ++errors;
      }
    });
  for (auto &th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(t.size(), 0u);
}
