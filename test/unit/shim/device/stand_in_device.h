// A test fixture on the CANN stand-in's device 0: a stream of its own, device buffers filled from the host (which
// the host cannot read back except through the runtime) and freed after the test, and recognizable byte patterns.
#pragma once
#include <gtest/gtest.h>

#include <vector>

#include "acl/acl.h"

class StandInDeviceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { aclInit(nullptr); }
  void SetUp() override {
    ASSERT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    ASSERT_EQ(aclrtCreateStream(&stream_), ACL_SUCCESS);
  }
  void TearDown() override {
    for (void *d : device_) aclrtFree(d);
    aclrtDestroyStream(stream_);
  }
  // A device buffer holding `bytes`.
  void *upload(const std::vector<unsigned char> &bytes) {
    void *d = nullptr;
    EXPECT_EQ(aclrtMalloc(&d, bytes.size(), ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    EXPECT_EQ(aclrtMemcpy(d, bytes.size(), bytes.data(), bytes.size(), ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);
    device_.push_back(d);
    return d;
  }
  static std::vector<unsigned char> pattern(size_t n, unsigned seed) {
    std::vector<unsigned char> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = (unsigned char)(i * 31 + seed * 7 + (i >> 8));
    return v;
  }

  aclrtStream stream_ = nullptr;
  std::vector<void *> device_;
};
