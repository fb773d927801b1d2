// Device memory for the fake_cann tests that use the rt* API directly (test_rt_kernels.cpp, test_aicpu.cpp): typed
// vectors up and down, zeroed buffers, and every buffer made here freed by free_all() (the fixture's TearDown). Their
// fixtures derive from it (protected), as the ACL tests' do from DeviceBuffers.
#pragma once
#include <gtest/gtest.h>

#include <vector>

#include "runtime/rt.h"

class RtBuffers {
 public:
  template <typename T>
  void *upload(const std::vector<T> &v) {
    void *d = alloc(v.size() * sizeof(T));
    EXPECT_EQ(rtMemcpy(d, v.size() * sizeof(T), v.data(), v.size() * sizeof(T), RT_MEMCPY_HOST_TO_DEVICE), 0);
    return d;
  }
  void *alloc(size_t bytes) {
    void *d = nullptr;
    EXPECT_EQ(rtMalloc(&d, bytes, RT_MEMORY_HBM, 0), RT_ERROR_NONE);
    EXPECT_EQ(rtMemset(d, bytes, 0, bytes), RT_ERROR_NONE);
    buffers_.push_back(d);
    return d;
  }
  template <typename T>
  static std::vector<T> download(const void *d, size_t n) {
    std::vector<T> v(n);
    EXPECT_EQ(rtMemcpy(v.data(), n * sizeof(T), d, n * sizeof(T), RT_MEMCPY_DEVICE_TO_HOST), RT_ERROR_NONE);
    return v;
  }
  void free_all() {
    for (void *p : buffers_) rtFree(p);
    buffers_.clear();
  }

 private:
  std::vector<void *> buffers_;
};
