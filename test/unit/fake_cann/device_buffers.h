// Device memory for the fake_cann tests that run ops through ACL (test_op_dump.cpp, test_op_launch_path.cpp,
// test_capture.cpp): float vectors up and down, workspaces, and every buffer made here freed by free_all() (the
// fixture's TearDown). Their fixtures derive from it (protected).
#pragma once
#include <gtest/gtest.h>

#include <vector>

#include "acl/acl.h"

class DeviceBuffers {
 public:
  void *alloc(size_t bytes) {
    void *d = nullptr;
    EXPECT_EQ(aclrtMalloc(&d, bytes, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    buffers_.push_back(d);
    return d;
  }
  void *upload(const std::vector<float> &v) {
    void *d = alloc(v.size() * 4);
    EXPECT_EQ(aclrtMemcpy(d, v.size() * 4, v.data(), v.size() * 4, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);
    return d;
  }
  static std::vector<float> download(void *d, size_t n) {
    std::vector<float> v(n);
    EXPECT_EQ(aclrtMemcpy(v.data(), n * 4, d, n * 4, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS);
    return v;
  }
  void free_all() {
    for (void *d : buffers_) aclrtFree(d);
    buffers_.clear();
  }

 private:
  std::vector<void *> buffers_;
};
