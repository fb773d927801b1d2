// The pinned staging pool (shim/device/staging.h) against the CANN stand-in: size classes, copies of device memory
// that are valid once fence()'s event completed, buffers going back to the pool and reused, and the budget:
// idle buffers freed to make room, launches that overshoot rather than deadlock, launches that wait for a buffer
// handed to the collector.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "acl/acl.h"
#include "stand_in_device.h"
#include "shim/device/staging.h"

using namespace msprobe::shim;

namespace {

using Block = std::shared_ptr<const msprobe::record::HostBlock>;

std::vector<unsigned char> bytes_of(const Block &b) {
  const auto *p = static_cast<const unsigned char *>(b->data());
  return std::vector<unsigned char>(p, p + b->size());
}

using StagingTest = StandInDeviceTest;

TEST(StagingSizeClass, FourClassesPerPowerOfTwoAtLeast4KiB) {
  EXPECT_EQ(Staging::size_class(0), 4096u);
  EXPECT_EQ(Staging::size_class(1), 4096u);
  EXPECT_EQ(Staging::size_class(4096), 4096u);
  EXPECT_EQ(Staging::size_class(4097), 5120u);  // 4096 < n <= 8192: steps of 1024
  EXPECT_EQ(Staging::size_class(5120), 5120u);
  EXPECT_EQ(Staging::size_class(5121), 6144u);
  EXPECT_EQ(Staging::size_class(8192), 8192u);
  EXPECT_EQ(Staging::size_class(8193), 10240u);
  EXPECT_EQ(Staging::size_class((1u << 20) + 1), (1u << 20) + (1u << 18));
  for (uint64_t n : {4097ull, 6000ull, 12345ull, 1000000ull, 123456789ull}) {
    const uint64_t c = Staging::size_class(n);
    EXPECT_GE(c, n);
    EXPECT_LE(c, n + n / 4) << "at most 25% rounding for " << n;
    EXPECT_EQ(Staging::size_class(c), c) << "a class is its own class";
  }
}

TEST_F(StagingTest, CopiesAreTheDeviceBytesOnceTheFenceCompleted) {
  Staging s(uint64_t{1} << 20);
  const std::vector<unsigned char> a = pattern(1000, 1), b = pattern(70000, 2);
  void *da = upload(a), *db = upload(b);
  Block ba = s.copy_async(da, a.size(), stream_);
  // A view into the middle of a buffer: only those bytes.
  Block bb = s.copy_async(static_cast<char *>(db) + 100, 5000, stream_);
  ASSERT_TRUE(ba && bb);
  auto done = s.fence(stream_);
  ASSERT_TRUE(done);
  EXPECT_TRUE(done->wait());
  EXPECT_EQ(ba->size(), 1000u);
  EXPECT_EQ(bytes_of(ba), a);
  EXPECT_EQ(bytes_of(bb), std::vector<unsigned char>(b.begin() + 100, b.begin() + 5100));
  const StagingCounters c = s.counters();
  EXPECT_EQ(c.copies, 2u);
  EXPECT_EQ(c.bytes, 6000u);
  EXPECT_EQ(c.failed, 0u);
  EXPECT_EQ(c.host_allocs, 2u);
  EXPECT_EQ(c.high_water, 4096u + 5120u);
}

TEST_F(StagingTest, CopiesFollowStreamOrder) {
  // The device buffer is overwritten after the copy was enqueued, by a copy later on the same stream.
  Staging s(uint64_t{1} << 20);
  const std::vector<unsigned char> before = pattern(4096, 3), after = pattern(4096, 4);
  void *d = upload(before);
  Block b = s.copy_async(d, before.size(), stream_);
  ASSERT_TRUE(b);
  ASSERT_EQ(aclrtMemcpyAsync(d, after.size(), after.data(), after.size(), ACL_MEMCPY_HOST_TO_DEVICE, stream_),
            ACL_SUCCESS);
  Block b2 = s.copy_async(d, after.size(), stream_);
  auto done = s.fence(stream_);
  ASSERT_TRUE(done && done->wait());
  EXPECT_EQ(bytes_of(b), before);
  EXPECT_EQ(bytes_of(b2), after);
}

TEST_F(StagingTest, ReleasedBuffersAreReusedFromThePool) {
  Staging s(uint64_t{1} << 20);
  const std::vector<unsigned char> a = pattern(3000, 5);
  void *d = upload(a);
  for (int i = 0; i < 5; ++i) {
    Block b = s.copy_async(d, a.size(), stream_);
    ASSERT_TRUE(b);
    ASSERT_TRUE(s.fence(stream_)->wait());
    EXPECT_EQ(bytes_of(b), a) << "round " << i;
  }  // each block goes back to the pool here
  StagingCounters c = s.counters();
  EXPECT_EQ(c.copies, 5u);
  EXPECT_EQ(c.host_allocs, 1u);
  EXPECT_EQ(c.reuses, 4u);
  EXPECT_EQ(c.host_frees, 0u);
  EXPECT_EQ(c.pool_high_water, 4096u);
  // Another size of the same class reuses the same buffer; a larger class does not.
  Block same = s.copy_async(d, 100, stream_);
  Block other = s.copy_async(d, a.size(), stream_);  // the one idle buffer is taken: a new one
  ASSERT_TRUE(s.fence(stream_)->wait());
  c = s.counters();
  EXPECT_EQ(c.reuses, 5u);
  EXPECT_EQ(c.host_allocs, 2u);
  EXPECT_EQ(std::memcmp(same->data(), a.data(), 100), 0);
}

TEST_F(StagingTest, IdleBuffersAreFreedToMakeRoomForAnotherClass) {
  Staging s(16384);
  void *d = upload(pattern(16384, 6));
  {
    Block b = s.copy_async(d, 8192, stream_);
    ASSERT_TRUE(b);
    ASSERT_TRUE(s.fence(stream_)->wait());
  }                                             // 8 KiB idle
  Block big = s.copy_async(d, 16384, stream_);  // 16 KiB: the whole budget
  ASSERT_TRUE(big);
  ASSERT_TRUE(s.fence(stream_)->wait());
  const StagingCounters c = s.counters();
  EXPECT_EQ(c.host_allocs, 2u);
  EXPECT_EQ(c.host_frees, 1u) << "the idle 8 KiB buffer made room";
  EXPECT_EQ(c.pool_high_water, 16384u) << "in use plus idle never above the budget";
  EXPECT_EQ(c.overshoots, 0u);
  EXPECT_EQ(c.budget_waits, 0u);
}

TEST_F(StagingTest, UnfencedCopiesOvershootTheBudgetInsteadOfWaiting) {
  Staging s(8192);
  void *d = upload(pattern(8192, 7));
  // Three 4 KiB copies of one launch not fenced yet: nobody could release the first two, so the third goes over.
  Block a = s.copy_async(d, 4096, stream_), b = s.copy_async(d, 4096, stream_), c3 = s.copy_async(d, 4096, stream_);
  ASSERT_TRUE(a && b && c3);
  ASSERT_TRUE(s.fence(stream_)->wait());
  StagingCounters c = s.counters();
  EXPECT_EQ(c.overshoots, 1u);
  EXPECT_EQ(c.budget_waits, 0u);
  EXPECT_EQ(c.high_water, 12288u);
  // A single tensor larger than the whole budget goes through alone, and its buffer is not pooled.
  a.reset();
  b.reset();
  c3.reset();
  void *dbig = upload(pattern(20000, 8));
  {
    Block big = s.copy_async(dbig, 20000, stream_);
    ASSERT_TRUE(big);
    ASSERT_TRUE(s.fence(stream_)->wait());
    EXPECT_EQ(bytes_of(big), pattern(20000, 8));
  }
  c = s.counters();
  EXPECT_EQ(c.overshoots, 2u);
  EXPECT_EQ(c.host_frees, c.host_allocs) << "pooled buffers freed for room, the oversized one on release";
}

TEST_F(StagingTest, ALaunchWaitsForABufferHandedToTheCollector) {
  Staging s(8192);
  void *d = upload(pattern(8192, 9));
  Block held = s.copy_async(d, 8192, stream_);  // the whole budget, fenced: the collector holds it
  ASSERT_TRUE(held);
  ASSERT_TRUE(s.fence(stream_)->wait());
  Block got;
  std::thread launcher([&] {
    aclrtSetDevice(0);  // the device is per thread
    got = s.copy_async(d, 4096, stream_);
    s.fence(stream_)->wait();
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (s.counters().budget_waits == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(s.counters().budget_waits, 1u) << "the other launch waits for room";
  EXPECT_EQ(s.counters().copies, 1u) << "and has not copied yet";
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  held.reset();  // the collector is done with it
  launcher.join();
  ASSERT_TRUE(got);
  const std::vector<unsigned char> want = pattern(8192, 9);
  EXPECT_EQ(bytes_of(got), std::vector<unsigned char>(want.begin(), want.begin() + 4096));
  const StagingCounters c = s.counters();
  EXPECT_EQ(c.budget_waits, 1u);
  EXPECT_GE(c.wait_ns, 100000000u) << "waited at least until the release";
  EXPECT_EQ(c.overshoots, 0u);
  EXPECT_LE(c.pool_high_water, 8192u);
}

}  // namespace
