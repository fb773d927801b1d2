// Core semantics of the CANN stand-in: device memory the host cannot touch, copies, streams, events,
// and aclnn executor lifetime (phase 2 frees unless repeatable; aclSetTensorAddr rebinds).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "acl/acl.h"
#include "aclnnop/aclnn_add.h"
#include "aclnnop/aclnn_cat.h"

namespace {

class Core : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    aclInit(nullptr);
    ASSERT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
  }
  void SetUp() override { ASSERT_EQ(aclrtSetDevice(0), ACL_SUCCESS); }

  void *upload(const std::vector<float> &v) {
    void *d = nullptr;
    EXPECT_EQ(aclrtMalloc(&d, v.size() * 4, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    EXPECT_EQ(aclrtMemcpy(d, v.size() * 4, v.data(), v.size() * 4, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);
    return d;
  }
  std::vector<float> download(void *d, size_t n) {
    std::vector<float> v(n);
    EXPECT_EQ(aclrtMemcpy(v.data(), n * 4, d, n * 4, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS);
    return v;
  }
  aclTensor *tensor(void *d, int64_t n) {
    int64_t shape[1] = {n}, stride[1] = {1};
    return aclCreateTensor(shape, 1, ACL_FLOAT, stride, 0, ACL_FORMAT_ND, shape, 1, d);
  }
};

TEST_F(Core, DeviceMemoryIsAlignedAndFreedOnce) {
  void *a = nullptr, *b = nullptr;
  ASSERT_EQ(aclrtMalloc(&a, 100, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
  ASSERT_EQ(aclrtMalloc(&b, 1, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % 64, 0u);
  EXPECT_NE(a, b);
  EXPECT_EQ(aclrtFree(a), ACL_SUCCESS);
  EXPECT_NE(aclrtFree(a), ACL_SUCCESS);  // double free is refused, not a crash
  EXPECT_NE(aclrtFree(static_cast<char *>(b) + 1), ACL_SUCCESS);  // interior pointer
  EXPECT_EQ(aclrtFree(b), ACL_SUCCESS);
  void *z = nullptr;
  EXPECT_NE(aclrtMalloc(&z, 0, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
}

TEST_F(Core, HostCannDereferenceDeviceMemory) {
  void *d = upload({1.0f, 2.0f});
  EXPECT_DEATH(
      {
        volatile float x = *static_cast<volatile float *>(d);
        (void)x;
      },
      "");
  aclrtFree(d);
}

TEST_F(Core, CopiesCheckKindAndBounds) {
  std::vector<float> host = {1, 2, 3, 4};
  void *d = upload(host);
  std::vector<float> out(4);
  // Wrong direction for the pointers given.
  EXPECT_NE(aclrtMemcpy(out.data(), 16, d, 16, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);
  // count > destMax.
  EXPECT_NE(aclrtMemcpy(out.data(), 8, d, 16, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS);
  // Reading past the allocation.
  EXPECT_NE(aclrtMemcpy(out.data(), 32, d, 32, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS);
  EXPECT_EQ(aclrtMemcpy(out.data(), 16, d, 16, ACL_MEMCPY_DEFAULT), ACL_SUCCESS);
  EXPECT_EQ(out, host);
  aclrtFree(d);
  // After free the range is gone.
  EXPECT_NE(aclrtMemcpy(out.data(), 16, d, 16, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS);
}

TEST_F(Core, NoContextWithoutSetDevice) {
  std::thread t([] {
    void *p = nullptr;
    EXPECT_NE(aclrtMalloc(&p, 64, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    aclrtStream s = nullptr;
    EXPECT_NE(aclrtCreateStream(&s), ACL_SUCCESS);
  });
  t.join();
}

TEST_F(Core, StreamsRunInOrderAndDestroyedStreamsAreRefused) {
  aclrtStream s = nullptr;
  ASSERT_EQ(aclrtCreateStream(&s), ACL_SUCCESS);
  void *d = nullptr;
  ASSERT_EQ(aclrtMalloc(&d, 1024, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
  std::vector<uint8_t> out(1024);
  for (int v = 1; v <= 5; ++v) ASSERT_EQ(aclrtMemsetAsync(d, 1024, v, 1024, s), ACL_SUCCESS);
  ASSERT_EQ(aclrtMemcpyAsync(out.data(), 1024, d, 1024, ACL_MEMCPY_DEVICE_TO_HOST, s), ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeStream(s), ACL_SUCCESS);
  EXPECT_EQ(out[0], 5);
  EXPECT_EQ(out[1023], 5);
  ASSERT_EQ(aclrtDestroyStream(s), ACL_SUCCESS);
  EXPECT_NE(aclrtMemsetAsync(d, 1024, 0, 1024, s), ACL_SUCCESS);
  EXPECT_NE(aclrtSynchronizeStream(s), ACL_SUCCESS);
  aclrtFree(d);
}

TEST_F(Core, EventsOrderTwoStreams) {
  aclrtStream a = nullptr, b = nullptr;
  aclrtEvent e = nullptr;
  ASSERT_EQ(aclrtCreateStream(&a), ACL_SUCCESS);
  ASSERT_EQ(aclrtCreateStream(&b), ACL_SUCCESS);
  ASSERT_EQ(aclrtCreateEvent(&e), ACL_SUCCESS);
  void *d = nullptr;
  ASSERT_EQ(aclrtMalloc(&d, 4096, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
  for (int i = 0; i < 50; ++i) ASSERT_EQ(aclrtMemsetAsync(d, 4096, 7, 4096, a), ACL_SUCCESS);
  ASSERT_EQ(aclrtRecordEvent(e, a), ACL_SUCCESS);
  ASSERT_EQ(aclrtStreamWaitEvent(b, e), ACL_SUCCESS);
  std::vector<uint8_t> out(4096, 0);
  ASSERT_EQ(aclrtMemcpyAsync(out.data(), 4096, d, 4096, ACL_MEMCPY_DEVICE_TO_HOST, b), ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeStream(b), ACL_SUCCESS);
  EXPECT_EQ(out[4095], 7);
  ASSERT_EQ(aclrtSynchronizeEvent(e), ACL_SUCCESS);
  // CANN's ACL_EVENT_STATUS_COMPLETE is 0 (runtime include/external/acl/acl_rt.h, aclrtEventStatus).
  aclrtEventStatus status = ACL_EVENT_STATUS_RESERVED;
  ASSERT_EQ(aclrtQueryEvent(e, &status), ACL_SUCCESS);
  EXPECT_EQ(status, ACL_EVENT_STATUS_COMPLETE);
  EXPECT_EQ((int)status, 0);
  aclrtDestroyEvent(e);
  aclrtDestroyStream(a);
  aclrtDestroyStream(b);
  aclrtFree(d);
}

TEST_F(Core, KernelFaultIsReportedOnSynchronize) {
  aclrtStream s = nullptr;
  ASSERT_EQ(aclrtCreateStream(&s), ACL_SUCCESS);
  void *x = upload({1, 2, 3, 4}), *o = upload({0, 0, 0, 0});
  float one = 1.0f;
  aclScalar *alpha = aclCreateScalar(&one, ACL_FLOAT);
  // A tensor that claims 1000 elements of a 4-element allocation: the kernel faults on the device.
  aclTensor *big = tensor(x, 1000), *out = tensor(o, 1000);
  uint64_t ws = 0;
  aclOpExecutor *ex = nullptr;
  ASSERT_EQ(aclnnAddGetWorkspaceSize(big, big, alpha, out, &ws, &ex), 0);
  ASSERT_EQ(aclnnAdd(nullptr, ws, ex, s), 0);  // the launch itself succeeds: the fault is asynchronous
  EXPECT_EQ(aclrtSynchronizeStream(s), ACL_ERROR_RT_AICORE_EXCEPTION);
  EXPECT_EQ(aclrtSynchronizeStream(s), ACL_SUCCESS);  // reported once
  aclDestroyTensor(big);
  aclDestroyTensor(out);
  aclDestroyScalar(alpha);
  aclrtDestroyStream(s);
}

TEST_F(Core, ExecutorIsFreedByPhase2UnlessRepeatable) {
  void *x = upload({1, 2, 3}), *y = upload({10, 20, 30}), *o = upload({0, 0, 0}), *y2 = upload({100, 200, 300});
  float two = 2.0f;
  aclScalar *alpha = aclCreateScalar(&two, ACL_FLOAT);
  aclTensor *tx = tensor(x, 3), *ty = tensor(y, 3), *to = tensor(o, 3);
  uint64_t ws = 0;
  aclOpExecutor *ex = nullptr;
  ASSERT_EQ(aclnnAddGetWorkspaceSize(tx, ty, alpha, to, &ws, &ex), 0);
  ASSERT_EQ(aclnnAdd(nullptr, ws, ex, nullptr), 0);
  EXPECT_EQ(aclnnAdd(nullptr, ws, ex, nullptr), ACLNN_ERR_PARAM_INVALID);  // freed by the first phase 2
  ASSERT_EQ(aclrtSynchronizeStream(nullptr), ACL_SUCCESS);
  EXPECT_EQ(download(o, 3), (std::vector<float>{21, 42, 63}));

  ASSERT_EQ(aclnnAddGetWorkspaceSize(tx, ty, alpha, to, &ws, &ex), 0);
  ASSERT_EQ(aclSetAclOpExecutorRepeatable(ex), 0);
  ASSERT_EQ(aclnnAdd(nullptr, ws, ex, nullptr), 0);
  ASSERT_EQ(aclSetTensorAddr(ex, 1, ty, y2), 0);  // rebind `other` (index 1)
  ASSERT_EQ(aclnnAdd(nullptr, ws, ex, nullptr), 0);
  ASSERT_EQ(aclrtSynchronizeStream(nullptr), ACL_SUCCESS);
  EXPECT_EQ(download(o, 3), (std::vector<float>{201, 402, 603}));
  void *addr = nullptr;
  ASSERT_EQ(aclGetRawTensorAddr(ty, &addr), 0);
  EXPECT_EQ(addr, y2);  // aclSetTensorAddr also rewrites the tensor's own address
  EXPECT_EQ(aclSetTensorAddr(ex, 7, ty, y2), 0);  // the index of a built-in op is ignored (acl_op_api.cpp)
  ASSERT_EQ(aclDestroyAclOpExecutor(ex), 0);
  EXPECT_NE(aclDestroyAclOpExecutor(ex), 0);

  EXPECT_EQ(aclnnAddGetWorkspaceSize(nullptr, ty, alpha, to, &ws, &ex), ACLNN_ERR_PARAM_NULLPTR);
  EXPECT_EQ(aclDestroyTensor(tx), 0);
  EXPECT_NE(aclDestroyTensor(tx), 0);  // double destroy refused
  aclDestroyTensor(ty);
  aclDestroyTensor(to);
  aclDestroyScalar(alpha);
}

TEST_F(Core, TensorGettersAllocateWithNewArray) {
  int64_t shape[2] = {2, 3}, stride[2] = {1, 2}, storage[1] = {6};
  void *d = upload({0, 0, 0, 0, 0, 0});
  aclTensor *t = aclCreateTensor(shape, 2, ACL_BF16, stride, 0, ACL_FORMAT_ND, storage, 1, d);
  ASSERT_NE(t, nullptr);
  int64_t *dims = nullptr, *strides = nullptr;
  uint64_t n = 0, m = 0;
  ASSERT_EQ(aclGetViewShape(t, &dims, &n), 0);
  ASSERT_EQ(aclGetViewStrides(t, &strides, &m), 0);
  EXPECT_EQ(n, 2u);
  EXPECT_EQ(dims[1], 3);
  EXPECT_EQ(strides[1], 2);
  delete[] dims;
  delete[] strides;
  aclDataType dt;
  ASSERT_EQ(aclGetDataType(t, &dt), 0);
  EXPECT_EQ(dt, ACL_BF16);
  EXPECT_EQ(aclGetViewShape(nullptr, &dims, &n), ACLNN_ERR_PARAM_NULLPTR);
  aclTensor *member = aclCreateTensor(shape, 2, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, storage, 1, d);
  const aclTensor *items[2] = {t, member};
  aclTensorList *list = aclCreateTensorList(items, 2);
  ASSERT_NE(list, nullptr);
  ASSERT_EQ(aclDestroyTensorList(list), 0);
  EXPECT_NE(aclDestroyTensor(t), 0);  // the list destroyed its members
  aclrtFree(d);
}

// opbase src/nnopbase/common/api/acl_op_api.cpp: for built-in ops aclSet{,Input,Output}TensorAddr ignore their index
// ([[maybe_unused]]) and set the tensor's storage address; the Acl* names are aliases. The executor reads every
// tensor's storage address when it launches (common_types.cpp: the executor's tensors share the host tensor's
// aclStorage), so an address set between phase 1 and phase 2 is the one the kernel runs at.
TEST_F(Core, AddressSettersIgnoreTheIndexAndTheKernelReadsAddressesAtLaunch) {
  void *x = upload({1, 2, 3}), *y = upload({10, 20, 30}), *o = upload({0, 0, 0}), *y2 = upload({100, 200, 300});
  void *o2 = upload({0, 0, 0});
  float one = 1.0f;
  aclScalar *alpha = aclCreateScalar(&one, ACL_FLOAT);
  aclTensor *tx = tensor(x, 3), *ty = tensor(y, 3), *to = tensor(o, 3);
  uint64_t ws = 0;
  aclOpExecutor *ex = nullptr;
  // Rebound after phase 1, before phase 2, with no setter at all: the launch reads the new address.
  ASSERT_EQ(aclnnAddGetWorkspaceSize(tx, ty, alpha, to, &ws, &ex), 0);
  ASSERT_EQ(aclSetRawTensorAddr(ty, y2), 0);
  ASSERT_EQ(aclnnAdd(nullptr, ws, ex, nullptr), 0);
  ASSERT_EQ(aclrtSynchronizeStream(nullptr), ACL_SUCCESS);
  EXPECT_EQ(download(o, 3), (std::vector<float>{101, 202, 303}));
  // A repeatable executor: an out-of-range index is no error, the tensor named is rebound.
  ASSERT_EQ(aclSetRawTensorAddr(ty, y), 0);
  ASSERT_EQ(aclnnAddGetWorkspaceSize(tx, ty, alpha, to, &ws, &ex), 0);
  ASSERT_EQ(aclSetAclOpExecutorRepeatable(ex), 0);
  EXPECT_EQ(aclSetInputTensorAddr(ex, 99, ty, y2), 0);
  EXPECT_EQ(AclSetOutputTensorAddr(ex, 12345, to, o2), 0);
  ASSERT_EQ(aclnnAdd(nullptr, ws, ex, nullptr), 0);
  ASSERT_EQ(aclrtSynchronizeStream(nullptr), ACL_SUCCESS);
  EXPECT_EQ(download(o2, 3), (std::vector<float>{101, 202, 303}));
  EXPECT_EQ(download(o, 3), (std::vector<float>{101, 202, 303}));  // untouched by the second launch
  EXPECT_EQ(AclSetTensorAddr(ex, 0, nullptr, y), ACLNN_ERR_INNER_NULLPTR);
  EXPECT_EQ(aclSetInputTensorAddr(nullptr, 0, ty, y), ACLNN_ERR_INNER_NULLPTR);  // the tensor is set first
  void *now = nullptr;
  ASSERT_EQ(aclGetRawTensorAddr(ty, &now), 0);
  EXPECT_EQ(now, y);
  ASSERT_EQ(aclDestroyAclOpExecutor(ex), 0);
  for (aclTensor *t : {tx, ty, to}) aclDestroyTensor(t);
  aclDestroyScalar(alpha);
}

// acl_op_api.cpp aclSetDynamic{,Input,Output}TensorAddr: member `relativeIndex` of the list gets the address
// (relativeIndex out of the list: ACLNN_ERR_PARAM_INVALID; no list: ACLNN_ERR_INNER_NULLPTR); irIndex is not used.
TEST_F(Core, DynamicSettersRebindAListMember) {
  void *a = upload({1, 2}), *b = upload({3, 4}), *b2 = upload({30, 40}), *o = upload({0, 0, 0, 0});
  aclTensor *ta = tensor(a, 2), *tb = tensor(b, 2), *to = tensor(o, 4);
  const aclTensor *members[2] = {ta, tb};
  aclTensorList *list = aclCreateTensorList(members, 2);
  uint64_t ws = 0;
  aclOpExecutor *ex = nullptr;
  ASSERT_EQ(aclnnCatGetWorkspaceSize(list, 0, to, &ws, &ex), 0);
  ASSERT_EQ(aclSetAclOpExecutorRepeatable(ex), 0);
  EXPECT_EQ(aclSetDynamicInputTensorAddr(ex, 77, 2, list, b2), ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(AclSetDynamicTensorAddr(ex, 0, 0, nullptr, b2), ACLNN_ERR_INNER_NULLPTR);
  ASSERT_EQ(AclSetDynamicInputTensorAddr(ex, 77, 1, list, b2), 0);
  ASSERT_EQ(aclnnCat(nullptr, ws, ex, nullptr), 0);
  ASSERT_EQ(aclrtSynchronizeStream(nullptr), ACL_SUCCESS);
  EXPECT_EQ(download(o, 4), (std::vector<float>{1, 2, 30, 40}));
  ASSERT_EQ(aclDestroyAclOpExecutor(ex), 0);
  aclDestroyTensorList(list);
  aclDestroyTensor(to);
}

// opbase common_types.cpp aclTensor::InitTensor (aclInitTensor): re-initializes the tensor in place; NULL view dims,
// storage dims or address keep its own; the new address is its storage's, seen by an executor made before.
TEST_F(Core, InitTensorReinitializesInPlace) {
  void *x = upload({1, 2, 3, 4}), *x2 = upload({5, 6, 7, 8}), *o = upload({0, 0, 0, 0});
  float one = 1.0f;
  aclScalar *alpha = aclCreateScalar(&one, ACL_FLOAT);
  aclTensor *tx = tensor(x, 4), *to = tensor(o, 4);
  uint64_t ws = 0;
  aclOpExecutor *ex = nullptr;
  ASSERT_EQ(aclnnAddGetWorkspaceSize(tx, tx, alpha, to, &ws, &ex), 0);
  ASSERT_EQ(aclInitTensor(tx, nullptr, 0, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, nullptr, 0, x2), 0);
  int64_t *dims = nullptr;
  uint64_t n = 0;
  ASSERT_EQ(aclGetViewShape(tx, &dims, &n), 0);
  EXPECT_EQ(n, 1u);  // kept
  EXPECT_EQ(dims[0], 4);
  delete[] dims;
  ASSERT_EQ(aclnnAdd(nullptr, ws, ex, nullptr), 0);
  ASSERT_EQ(aclrtSynchronizeStream(nullptr), ACL_SUCCESS);
  EXPECT_EQ(download(o, 4), (std::vector<float>{10, 12, 14, 16}));
  int64_t two[2] = {2, 2};
  ASSERT_EQ(aclInitTensor(tx, two, 2, ACL_FLOAT16, nullptr, 1, ACL_FORMAT_NCHW, nullptr, 0, nullptr), 0);
  void *addr = nullptr;
  ASSERT_EQ(aclGetRawTensorAddr(tx, &addr), 0);
  EXPECT_EQ(addr, x2);  // a NULL address keeps the tensor's
  aclDataType dt;
  ASSERT_EQ(aclGetDataType(tx, &dt), 0);
  EXPECT_EQ(dt, ACL_FLOAT16);
  int64_t off = -1;
  ASSERT_EQ(aclGetViewOffset(tx, &off), 0);
  EXPECT_EQ(off, 1);
  EXPECT_EQ(aclInitTensor(nullptr, two, 2, ACL_FLOAT, nullptr, 0, ACL_FORMAT_ND, nullptr, 0, x), ACLNN_ERR_PARAM_NULLPTR);
  aclDestroyTensor(tx);
  aclDestroyTensor(to);
  aclDestroyScalar(alpha);
}

}  // namespace
