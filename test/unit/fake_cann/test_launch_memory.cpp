// Kernels loaded and launched through the ACL (aclrtBinaryLoad*, aclrtBinaryGetFunction, aclrtLaunchKernel*,
// aclrtKernelArgs*) and the device allocations beside aclrtMalloc (aclrtMallocAlign32 / Cached / WithCfg, physical
// memory mapped into reserved addresses), against CANN's runtime: src/acl/aclrt_impl/kernel.cpp,
// docs/zh/api_ref/14_Kernel_loading_and_execution.md, 11-01_device_memory_malloc_and_free.md,
// 11-04_virtual_memory_management.md. The kernels are the stand-in's own (device_kernels/README.md).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "acl/acl.h"

namespace {

std::string kernels_path() {
  const char *home = std::getenv("ASCEND_HOME_PATH");
  return std::string(home ? home : ".") + "/opp/kernel/fake_kernels.o";
}

class LaunchMemory : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    ASSERT_EQ(aclrtCreateStream(&stream_), ACL_SUCCESS);
  }
  void TearDown() override {
    aclrtDestroyStream(stream_);
    aclrtResetDevice(0);
  }
  void *upload(const std::vector<float> &v) {
    void *d = nullptr;
    EXPECT_EQ(aclrtMalloc(&d, v.size() * 4, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    EXPECT_EQ(aclrtMemcpy(d, v.size() * 4, v.data(), v.size() * 4, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);
    return d;
  }
  std::vector<float> download(void *d, size_t n) {
    std::vector<float> v(n, -1);
    EXPECT_EQ(aclrtMemcpy(v.data(), n * 4, d, n * 4, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS);
    return v;
  }
  aclrtStream stream_ = nullptr;
};

// kernel.cpp aclrtLaunchKernelImpl sets isNoNeedH2DCopy: aclrtLaunchKernel's argsData is device memory the kernel
// reads when it runs. aclrtBinaryGetFunction names a kernel by symbol; an unloaded binary's functions are gone.
TEST_F(LaunchMemory, LaunchKernelReadsItsArgsFromDeviceMemory) {
  aclrtBinHandle bin = nullptr;
  ASSERT_EQ(aclrtBinaryLoadFromFile(kernels_path().c_str(), nullptr, &bin), ACL_SUCCESS);
  aclrtFuncHandle add = nullptr, none = nullptr;
  ASSERT_EQ(aclrtBinaryGetFunction(bin, "fake_vector_add", &add), ACL_SUCCESS);
  EXPECT_EQ(aclrtBinaryGetFunction(bin, "no_such_kernel", &none), ACL_ERROR_RT_SYMBOL_NOT_FOUND);
  void *x = upload({1, 2, 3}), *y = upload({10, 20, 30}), *z = upload({0, 0, 0});
  const uint64_t args[4] = {(uint64_t)x, (uint64_t)y, (uint64_t)z, 3};
  void *dargs = nullptr;
  ASSERT_EQ(aclrtMalloc(&dargs, sizeof args, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
  ASSERT_EQ(aclrtMemcpy(dargs, sizeof args, args, sizeof args, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);
  ASSERT_EQ(aclrtLaunchKernel(add, 1, dargs, sizeof args, stream_), ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeStream(stream_), ACL_SUCCESS);
  EXPECT_EQ(download(z, 3), (std::vector<float>{11, 22, 33}));
  EXPECT_EQ(aclrtLaunchKernel(add, 1, args, sizeof args, stream_), ACL_ERROR_RT_PARAM_INVALID);  // host args
  EXPECT_EQ(aclrtLaunchKernel(nullptr, 1, dargs, sizeof args, stream_), ACL_ERROR_INVALID_PARAM);
  ASSERT_EQ(aclrtBinaryUnLoad(bin), ACL_SUCCESS);
  EXPECT_EQ(aclrtLaunchKernel(add, 1, dargs, sizeof args, stream_), ACL_ERROR_RT_INVALID_HANDLE);
  EXPECT_EQ(aclrtBinaryGetFunction(bin, "fake_vector_add", &add), ACL_ERROR_RT_INVALID_HANDLE);
  EXPECT_EQ(aclrtBinaryUnLoad(bin), ACL_ERROR_RT_INVALID_HANDLE);
  for (void *p : {x, y, z, dargs}) aclrtFree(p);
}

// kernel.cpp aclrtLaunchKernelWithHostArgsImpl: host args are copied at launch; a placeholder {addrOffset,
// dataOffset} has the slot at addrOffset receive the device address of the args' own bytes at dataOffset. Here x's
// values travel inside the args and the kernel reads them there.
TEST_F(LaunchMemory, HostArgsPlaceholdersPointIntoTheCopiedArgs) {
  aclrtBinHandle bin = nullptr;
  ASSERT_EQ(aclrtBinaryLoadFromFile(kernels_path().c_str(), nullptr, &bin), ACL_SUCCESS);
  aclrtFuncHandle add = nullptr;
  ASSERT_EQ(aclrtBinaryGetFunction(bin, "fake_vector_add", &add), ACL_SUCCESS);
  void *y = upload({10, 20}), *z = upload({0, 0});
  struct {
    uint64_t x_slot, y, z, n;
    float x[2];
  } args{0, (uint64_t)y, (uint64_t)z, 2, {5, 6}};
  aclrtPlaceHolderInfo ph{0, (uint32_t)offsetof(decltype(args), x)};
  ASSERT_EQ(aclrtLaunchKernelWithHostArgs(add, 1, stream_, nullptr, &args, sizeof args, &ph, 1), ACL_SUCCESS);
  args.x[0] = 1000;  // the args were copied at launch
  ASSERT_EQ(aclrtSynchronizeStream(stream_), ACL_SUCCESS);
  EXPECT_EQ(download(z, 2), (std::vector<float>{15, 26}));
  aclrtBinaryUnLoad(bin);
  for (void *p : {y, z}) aclrtFree(p);
}

// 14_Kernel_loading_and_execution.md (runtime example/2_advanced_features/kernel/0_launch_kernel, placeholder mode):
// aclrtKernelArgsAppend copies a parameter, aclrtKernelArgsAppendPlaceHolder reserves a pointer slot whose data the
// host writes into aclrtKernelArgsGetPlaceHolderBuffer's buffer; the launch needs the args finalized.
TEST_F(LaunchMemory, KernelArgsHandlesBuildTheArgsWithPlaceholders) {
  aclrtBinHandle bin = nullptr;
  ASSERT_EQ(aclrtBinaryLoadFromFile(kernels_path().c_str(), nullptr, &bin), ACL_SUCCESS);
  aclrtFuncHandle add = nullptr;
  ASSERT_EQ(aclrtBinaryGetFunction(bin, "fake_vector_add", &add), ACL_SUCCESS);
  void *y = upload({1, 2, 3}), *z = upload({0, 0, 0});
  aclrtArgsHandle args = nullptr;
  aclrtParamHandle px = nullptr, py = nullptr, pz = nullptr, pn = nullptr;
  ASSERT_EQ(aclrtKernelArgsInit(add, &args), ACL_SUCCESS);
  ASSERT_EQ(aclrtKernelArgsAppendPlaceHolder(args, &px), ACL_SUCCESS);
  ASSERT_EQ(aclrtKernelArgsAppend(args, &y, sizeof(void *), &py), ACL_SUCCESS);
  ASSERT_EQ(aclrtKernelArgsAppend(args, &z, sizeof(void *), &pz), ACL_SUCCESS);
  uint64_t n = 3;
  ASSERT_EQ(aclrtKernelArgsAppend(args, &n, sizeof n, &pn), ACL_SUCCESS);
  float *xs = nullptr;
  ASSERT_EQ(aclrtKernelArgsGetPlaceHolderBuffer(args, px, 3 * sizeof(float), reinterpret_cast<void **>(&xs)),
            ACL_SUCCESS);
  EXPECT_EQ(aclrtKernelArgsGetPlaceHolderBuffer(args, py, 4, reinterpret_cast<void **>(&xs)), ACL_ERROR_INVALID_PARAM);
  ASSERT_EQ(aclrtKernelArgsGetPlaceHolderBuffer(args, px, 3 * sizeof(float), reinterpret_cast<void **>(&xs)),
            ACL_SUCCESS);
  xs[0] = 100, xs[1] = 200, xs[2] = 300;
  EXPECT_EQ(aclrtLaunchKernelWithConfig(add, 1, stream_, nullptr, args, nullptr), ACL_ERROR_INVALID_PARAM);
  ASSERT_EQ(aclrtKernelArgsFinalize(args), ACL_SUCCESS);
  ASSERT_EQ(aclrtLaunchKernelWithConfig(add, 1, stream_, nullptr, args, nullptr), ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeStream(stream_), ACL_SUCCESS);
  EXPECT_EQ(download(z, 3), (std::vector<float>{101, 202, 303}));
  aclrtBinaryUnLoad(bin);
  for (void *p : {y, z}) aclrtFree(p);
}

// 11-01: aclrtMallocAlign32 / aclrtMallocCached / aclrtMallocWithCfg give device memory as aclrtMalloc does (copies
// reach it, aclrtFree frees it once); a configuration naming no device is refused.
TEST_F(LaunchMemory, MallocVariantsGiveDeviceMemory) {
  aclrtMallocAttribute attr{ACL_RT_MEM_ATTR_MODULE_ID, {}};
  attr.value.moduleId = 7;
  aclrtMallocConfig cfg{&attr, 1};
  void *p[3] = {};
  ASSERT_EQ(aclrtMallocAlign32(&p[0], 100, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
  ASSERT_EQ(aclrtMallocCached(&p[1], 100, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
  ASSERT_EQ(aclrtMallocWithCfg(&p[2], 100, ACL_MEM_MALLOC_HUGE_FIRST, &cfg), ACL_SUCCESS);
  const std::vector<float> v = {1.5f, 2.5f};
  for (void *d : p) {
    EXPECT_EQ((uintptr_t)d % 32, 0u);
    ASSERT_EQ(aclrtMemcpy(d, 100, v.data(), 8, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);
    EXPECT_EQ(download(d, 2), v);
    EXPECT_EQ(aclrtFree(d), ACL_SUCCESS);
    EXPECT_NE(aclrtFree(d), ACL_SUCCESS);
  }
  attr.attr = ACL_RT_MEM_ATTR_DEVICE_ID;
  attr.value.deviceId = 999;
  EXPECT_EQ(aclrtMallocWithCfg(&p[0], 100, ACL_MEM_MALLOC_HUGE_FIRST, &cfg), ACL_ERROR_RT_INVALID_DEVICEID);
  EXPECT_EQ(aclrtMallocAlign32(&p[0], 0, ACL_MEM_MALLOC_HUGE_FIRST), ACL_ERROR_INVALID_PARAM);
}

// 11-04: a reserved range is addresses nothing backs until physical memory is mapped there; then it is device memory
// like any other (copies, kernels); unmapped it is gone, and the physical memory keeps its bytes for its next mapping.
// Neither can be released while mapped; aclrtFree does not free a mapping.
TEST_F(LaunchMemory, PhysicalMemoryMappedIntoReservedAddresses) {
  aclrtPhysicalMemProp prop{};
  prop.handleType = ACL_MEM_HANDLE_TYPE_NONE;
  prop.allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED;
  prop.memAttr = ACL_HBM_MEM_HUGE;
  prop.location = {0, ACL_MEM_LOCATION_TYPE_DEVICE};
  size_t gran = 0;
  ASSERT_EQ(aclrtMemGetAllocationGranularity(&prop, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &gran), ACL_SUCCESS);
  EXPECT_EQ(gran, 2u << 20);
  void *va = nullptr;
  ASSERT_EQ(aclrtReserveMemAddress(&va, 2 * gran, 0, nullptr, 0), ACL_SUCCESS);
  aclrtDrvMemHandle h = nullptr;
  ASSERT_EQ(aclrtMallocPhysical(&h, gran, &prop, 0), ACL_SUCCESS);
  float probe = 0;
  EXPECT_NE(aclrtMemcpy(&probe, 4, va, 4, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS);  // not backed yet
  ASSERT_EQ(aclrtMapMem(va, gran, 0, h, 0), ACL_SUCCESS);
  EXPECT_EQ(aclrtMapMem(static_cast<char *>(va) + gran, gran, 0, h, 0), ACL_ERROR_RT_PARAM_INVALID);  // mapped once
  const std::vector<float> v = {4, 5, 6};
  ASSERT_EQ(aclrtMemcpy(va, gran, v.data(), 12, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);
  EXPECT_EQ(download(va, 3), v);
  EXPECT_NE(aclrtFree(va), ACL_SUCCESS);
  EXPECT_EQ(aclrtFreePhysical(h), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclrtReleaseMemAddress(va), ACL_ERROR_RT_PARAM_INVALID);
  ASSERT_EQ(aclrtUnmapMem(va), ACL_SUCCESS);
  EXPECT_NE(aclrtMemcpy(&probe, 4, va, 4, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS);
  void *second = static_cast<char *>(va) + gran;
  ASSERT_EQ(aclrtMapMem(second, gran, 0, h, 0), ACL_SUCCESS);
  EXPECT_EQ(download(second, 3), v);  // the physical memory's bytes
  ASSERT_EQ(aclrtUnmapMem(second), ACL_SUCCESS);
  EXPECT_EQ(aclrtUnmapMem(second), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclrtReleaseMemAddress(va), ACL_SUCCESS);
  EXPECT_EQ(aclrtFreePhysical(h), ACL_SUCCESS);
  EXPECT_EQ(aclrtReserveMemAddress(&va, gran, 64, nullptr, 0), ACL_ERROR_INVALID_PARAM);  // alignment is reserved
  prop.location.type = ACL_MEM_LOCATION_TYPE_HOST;
  EXPECT_EQ(aclrtMallocPhysical(&h, gran, &prop, 0), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
}

}  // namespace
