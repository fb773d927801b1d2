// The flight task's ring (shim/device/device_ring.h) against the CANN stand-in: copies into device memory that read
// back equal once the launch's event completed, first-in first-out reuse of its space (wrapping), the owner asked to
// let its oldest kernel go when the ring is full, tensors larger than the ring refused, no waiting when only the
// caller's own open launch holds the ring, and pinned host memory when the device has none to spare.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "acl/acl.h"
#include "stand_in_device.h"
#include "shim/device/device_ring.h"
#include "shim/device/staging.h"

using namespace msprobe::shim;

namespace {

using Block = std::shared_ptr<const msprobe::record::HostBlock>;

class DeviceRingTest : public StandInDeviceTest {
 protected:
  // The stream is past every copy enqueued so far.
  void fence() {
    Staging staging(1 << 20);
    auto done = staging.fence(stream_);
    ASSERT_TRUE(done && done->wait());
  }
  static std::vector<unsigned char> read(const Block &b) {
    const auto *p = static_cast<const unsigned char *>(b->data());
    return p ? std::vector<unsigned char>(p, p + b->size()) : std::vector<unsigned char>{};
  }
};

TEST_F(DeviceRingTest, CopiesReadBackEqualAndStayOnTheDeviceUntilRead) {
  DeviceRing ring(1 << 20, nullptr);
  auto a = pattern(3000, 1), b = pattern(70000, 2);
  DeviceRing::Refusal why;
  Block ba = ring.copy_in(upload(a), a.size(), stream_, &why);
  Block bb = ring.copy_in(upload(b), b.size(), stream_, &why);
  ASSERT_TRUE(ba && bb);
  ring.seal();
  fence();
  EXPECT_EQ(ring.counters().fetched, 0u);
  EXPECT_EQ(read(ba), a);
  EXPECT_EQ(read(bb), b);
  DeviceRingCounters c = ring.counters();
  EXPECT_TRUE(c.on_device);
  EXPECT_EQ(c.copies, 2u);
  EXPECT_EQ(c.fetched, 2u);
  EXPECT_EQ(c.fetched_bytes, a.size() + b.size());
  EXPECT_EQ(c.high_water, 3072u + 70144u);  // 512-byte granules
}

TEST_F(DeviceRingTest, FullRingLetsTheOldestKeptGoFirstInFirstOut) {
  // A ring of 8 KiB, kept kernels of 3 KiB each: the owner keeps blocks in order and drops the oldest when asked.
  std::deque<Block> kept;
  int evictions = 0;
  DeviceRing ring(8192, [&] {
    if (kept.empty()) return false;
    kept.pop_front();
    ++evictions;
    return true;
  });
  std::vector<std::vector<unsigned char>> data;
  std::vector<Block> all;
  for (unsigned i = 0; i < 12; ++i) {
    data.push_back(pattern(3072, i));
    DeviceRing::Refusal why;
    Block b = ring.copy_in(upload(data.back()), 3072, stream_, &why);
    ASSERT_TRUE(b) << i << " refused " << (int)why;
    ring.seal();
    fence();
    EXPECT_EQ(read(b), data.back()) << i;
    kept.push_back(b);
    EXPECT_LE(kept.size(), 2u);  // two fit in 8 KiB (with the wrap), never three
  }
  EXPECT_EQ(evictions, 10);
  // The two kept last are still intact after everything that went through the ring after them.
  EXPECT_EQ(read(kept[0]), data[10]);
  EXPECT_EQ(read(kept[1]), data[11]);
  EXPECT_LE(ring.counters().high_water, 8192u);
}

TEST_F(DeviceRingTest, LargerThanTheRingIsRefused) {
  DeviceRing ring(4096, nullptr);
  auto big = pattern(4097, 3);
  DeviceRing::Refusal why = DeviceRing::Refusal::None;
  EXPECT_FALSE(ring.copy_in(upload(big), big.size(), stream_, &why));
  EXPECT_EQ(why, DeviceRing::Refusal::TooLarge);
  EXPECT_EQ(ring.counters().too_large, 1u);
}

TEST_F(DeviceRingTest, OwnOpenLaunchFillingTheRingIsRefusedWithoutWaiting) {
  DeviceRing ring(8192, [] { return false; });
  auto a = pattern(6000, 4);
  DeviceRing::Refusal why;
  Block first = ring.copy_in(upload(a), a.size(), stream_, &why);
  ASSERT_TRUE(first);
  // Not sealed: the launch holding the ring is this one, so waiting for it cannot help.
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(ring.copy_in(upload(a), a.size(), stream_, &why));
  EXPECT_EQ(why, DeviceRing::Refusal::NoRoom);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
  ring.seal();
  fence();
}

TEST_F(DeviceRingTest, SealedKernelBeingCheckedIsWaitedFor) {
  // The ring holds a sealed launch the owner does not keep yet (its check is running): a new copy waits for the
  // block to go, then takes its place.
  DeviceRing ring(8192, [] { return false; });
  auto a = pattern(6000, 5), b = pattern(5000, 6);
  DeviceRing::Refusal why;
  Block first = ring.copy_in(upload(a), a.size(), stream_, &why);
  ring.seal();
  fence();
  std::thread checker([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    first.reset();
  });
  Block second = ring.copy_in(upload(b), b.size(), stream_, &why);
  checker.join();
  ASSERT_TRUE(second);
  ring.seal();
  fence();
  EXPECT_EQ(read(second), b);
  EXPECT_EQ(ring.counters().waits, 1u);
}

TEST_F(DeviceRingTest, ForgetMemoryOnlyWhenNothingIsKept) {
  DeviceRing ring(8192, nullptr);
  auto a = pattern(1000, 7);
  DeviceRing::Refusal why;
  Block b = ring.copy_in(upload(a), a.size(), stream_, &why);
  ring.seal();
  fence();
  EXPECT_FALSE(ring.forget_memory());
  b.reset();
  EXPECT_TRUE(ring.forget_memory());
  // Asked for again at the next copy.
  Block c = ring.copy_in(upload(a), a.size(), stream_, &why);
  ring.seal();
  fence();
  EXPECT_EQ(read(c), a);
}

}  // namespace
