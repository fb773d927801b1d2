// Streams are asynchronous: with FAKE_CANN_TASK_DELAY_US set (by ctest) every stream task runs late,
// so a host read before synchronization observably sees the old data.
#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "../time_scale.h"
#include "acl/acl.h"

namespace {
// Before any stream task runs: a slower machine gets a longer delay, so that the scaled bound below stays under it.
[[maybe_unused]] const bool g_delay_scaled = msprobe::test::scale_fake_cann_task_delay();
}  // namespace

TEST(Async, ReadBeforeSynchronizeSeesStaleData) {
  aclInit(nullptr);
  ASSERT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
  aclrtStream s = nullptr;
  ASSERT_EQ(aclrtCreateStream(&s), ACL_SUCCESS);
  std::vector<float> host(256, 1.0f), back(256, 0.0f);
  void *d = nullptr;
  ASSERT_EQ(aclrtMalloc(&d, 1024, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
  ASSERT_EQ(aclrtMemset(d, 1024, 0, 1024), ACL_SUCCESS);
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(aclrtMemcpyAsync(d, 1024, host.data(), 1024, ACL_MEMCPY_HOST_TO_DEVICE, s), ACL_SUCCESS);
  auto enqueue_time = std::chrono::steady_clock::now() - t0;
  // The launch did not wait for the device (the task starts FAKE_CANN_TASK_DELAY_US = 30 ms, scaled, later).
  EXPECT_LT(enqueue_time, msprobe::test::scaled(std::chrono::milliseconds(20)));
  // The synchronous copy does not wait for the stream: it still reads zeros.
  ASSERT_EQ(aclrtMemcpy(back.data(), 1024, d, 1024, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS);
  EXPECT_EQ(back[0], 0.0f);
  ASSERT_EQ(aclrtSynchronizeStream(s), ACL_SUCCESS);
  ASSERT_EQ(aclrtMemcpy(back.data(), 1024, d, 1024, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS);
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_EQ(back[255], 1.0f);
  // A timed synchronize of a slow stream times out with the real error code.
  ASSERT_EQ(aclrtMemsetAsync(d, 1024, 0, 1024, s), ACL_SUCCESS);
  EXPECT_EQ(aclrtSynchronizeStreamWithTimeout(s, 1), ACL_ERROR_RT_STREAM_SYNC_TIMEOUT);
  ASSERT_EQ(aclrtSynchronizeStream(s), ACL_SUCCESS);
  aclrtFree(d);
  aclrtDestroyStream(s);
}
