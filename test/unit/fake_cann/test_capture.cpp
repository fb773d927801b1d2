// Stream capture into model runtime instances (aclmdlRICaptureBegin / GetInfo / End, aclmdlRIExecuteAsync,
// aclmdlRIDestroy), as CANN documents them: tasks submitted to a capturing stream are recorded, not run; every replay
// runs them again over the memory as it is then; the capture modes restrict the unsafe calls; the error codes of
// rt_error_codes.h.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "acl/acl.h"
#include "aclnnop/aclnn_add.h"
#include "device_buffers.h"

namespace {

class Capture : public ::testing::Test, protected DeviceBuffers {
 protected:
  static void SetUpTestSuite() {
    aclInit(nullptr);
    ASSERT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
  }
  void SetUp() override {
    ASSERT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    ASSERT_EQ(aclrtCreateStream(&stream_), ACL_SUCCESS);
  }
  void TearDown() override {
    aclmdlRICaptureStatus st;
    aclmdlRI ri = nullptr;
    if (aclmdlRICaptureGetInfo(stream_, &st, &ri) == ACL_SUCCESS && st == ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE) {
      ASSERT_EQ(aclmdlRICaptureEnd(stream_, &ri), ACL_SUCCESS);
      aclmdlRIDestroy(ri);
    }
    aclrtSynchronizeStream(stream_);
    free_all();
    for (aclTensor *t : tensors_) aclDestroyTensor(t);
    aclrtDestroyStream(stream_);
  }
  aclTensor *tensor(void *d, int64_t n) {
    int64_t shape[1] = {n}, stride[1] = {1};
    aclTensor *t = aclCreateTensor(shape, 1, ACL_FLOAT, stride, 0, ACL_FORMAT_ND, shape, 1, d);
    tensors_.push_back(t);
    return t;
  }
  // out = x + y through aclnnAdd on the stream (a repeatable executor, made once, as MindSpore's are).
  aclOpExecutor *add(void *x, void *y, void *out, int64_t n) {
    float one = 1.0f;
    aclScalar *alpha = aclCreateScalar(&one, ACL_FLOAT);
    uint64_t ws = 0;
    aclOpExecutor *ex = nullptr;
    EXPECT_EQ(aclnnAddGetWorkspaceSize(tensor(x, n), tensor(y, n), alpha, tensor(out, n), &ws, &ex), 0);
    EXPECT_EQ(aclSetAclOpExecutorRepeatable(ex), 0);
    aclDestroyScalar(alpha);
    return ex;
  }
  aclrtStream stream_ = nullptr;
  std::vector<aclTensor *> tensors_;
};

TEST_F(Capture, CapturedTasksRunOnlyAtReplayAndEveryReplayRunsThemAgain) {
  void *x = upload({1, 2, 3}), *y = upload({10, 20, 30}), *out = upload({0, 0, 0}), *acc = upload({0, 0, 0});
  aclOpExecutor *sum = add(x, y, out, 3), *accumulate = add(acc, out, acc, 3);
  aclmdlRICaptureStatus status = ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE;
  aclmdlRI seen = nullptr;
  ASSERT_EQ(aclmdlRICaptureGetInfo(stream_, &status, &seen), ACL_SUCCESS);
  EXPECT_EQ(status, ACL_MODEL_RI_CAPTURE_STATUS_NONE);

  ASSERT_EQ(aclmdlRICaptureBegin(stream_, ACL_MODEL_RI_CAPTURE_MODE_RELAXED), ACL_SUCCESS);
  ASSERT_EQ(aclnnAdd(nullptr, 0, sum, stream_), 0);
  ASSERT_EQ(aclnnAdd(nullptr, 0, accumulate, stream_), 0);
  ASSERT_EQ(aclmdlRICaptureGetInfo(stream_, &status, &seen), ACL_SUCCESS);
  EXPECT_EQ(status, ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE);
  EXPECT_NE(seen, nullptr);
  EXPECT_EQ(aclrtSynchronizeStream(stream_), ACL_ERROR_RT_STREAM_CAPTURED);  // a capturing stream cannot be waited on
  aclmdlRI ri = nullptr;
  ASSERT_EQ(aclmdlRICaptureEnd(stream_, &ri), ACL_SUCCESS);
  EXPECT_EQ(ri, seen);
  ASSERT_EQ(aclrtSynchronizeStream(stream_), ACL_SUCCESS);
  EXPECT_EQ(download(out, 3), (std::vector<float>{0, 0, 0}));  // recorded, never run
  EXPECT_EQ(download(acc, 3), (std::vector<float>{0, 0, 0}));

  ASSERT_EQ(aclmdlRIExecuteAsync(ri, stream_), ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeStream(stream_), ACL_SUCCESS);
  EXPECT_EQ(download(out, 3), (std::vector<float>{11, 22, 33}));
  EXPECT_EQ(download(acc, 3), (std::vector<float>{11, 22, 33}));
  // A replay reads the memory as it is now.
  std::vector<float> x2 = {100, 200, 300};
  ASSERT_EQ(aclrtMemcpy(x, 12, x2.data(), 12, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);
  ASSERT_EQ(aclmdlRIExecuteAsync(ri, stream_), ACL_SUCCESS);
  ASSERT_EQ(aclmdlRIExecuteAsync(ri, stream_), ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeStream(stream_), ACL_SUCCESS);
  EXPECT_EQ(download(out, 3), (std::vector<float>{110, 220, 330}));
  EXPECT_EQ(download(acc, 3), (std::vector<float>{231, 462, 693}));
  // The executors are the host's (repeatable): still usable outside the model.
  ASSERT_EQ(aclnnAdd(nullptr, 0, sum, stream_), 0);
  ASSERT_EQ(aclrtSynchronizeStream(stream_), ACL_SUCCESS);
  EXPECT_EQ(aclmdlRIDestroy(ri), ACL_SUCCESS);
  EXPECT_EQ(aclmdlRIDestroy(ri), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclDestroyAclOpExecutor(sum), 0);
  EXPECT_EQ(aclDestroyAclOpExecutor(accumulate), 0);
}

TEST_F(Capture, AsyncCopiesFromPinnedMemoryAreCapturedFromPageableMemoryRefused) {
  void *d = upload({0, 0});
  void *pinned = nullptr;
  ASSERT_EQ(aclrtMallocHost(&pinned, 8), ACL_SUCCESS);
  static_cast<float *>(pinned)[0] = 1.5f;
  static_cast<float *>(pinned)[1] = -2.5f;
  std::vector<float> pageable = {7, 8};
  ASSERT_EQ(aclmdlRICaptureBegin(stream_, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL), ACL_SUCCESS);
  EXPECT_EQ(aclrtMemcpyAsync(d, 8, pageable.data(), 8, ACL_MEMCPY_HOST_TO_DEVICE, stream_),
            ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT);
  EXPECT_EQ(aclrtMemcpyAsync(d, 8, pinned, 8, ACL_MEMCPY_HOST_TO_DEVICE, stream_), ACL_SUCCESS);
  aclmdlRI ri = nullptr;
  ASSERT_EQ(aclmdlRICaptureEnd(stream_, &ri), ACL_SUCCESS);
  EXPECT_EQ(download(d, 2), (std::vector<float>{0, 0}));
  static_cast<float *>(pinned)[1] = 4.0f;  // read when the replay runs
  ASSERT_EQ(aclmdlRIExecuteAsync(ri, stream_), ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeStream(stream_), ACL_SUCCESS);
  EXPECT_EQ(download(d, 2), (std::vector<float>{1.5f, 4.0f}));
  EXPECT_EQ(aclmdlRIDestroy(ri), ACL_SUCCESS);
  aclrtFreeHost(pinned);
}

TEST_F(Capture, ModesRestrictTheUnsafeCalls) {
  void *d = upload({1, 2});
  std::vector<float> h = {3, 4};
  auto sync_copy = [&] { return aclrtMemcpy(d, 8, h.data(), 8, ACL_MEMCPY_HOST_TO_DEVICE); };
  auto on_other_thread = [&](auto f) {
    aclError rc = -1;
    std::thread t([&] {
      aclrtSetDevice(0);
      rc = f();
    });
    t.join();
    return rc;
  };
  aclmdlRI ri = nullptr;
  // GLOBAL: no thread may.
  ASSERT_EQ(aclmdlRICaptureBegin(stream_, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL), ACL_SUCCESS);
  EXPECT_EQ(sync_copy(), ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT);
  EXPECT_EQ(aclrtMemset(d, 8, 0, 8), ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT);
  EXPECT_EQ(on_other_thread(sync_copy), ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT);
  // Not RELAXED: the capture ends on the thread that began it.
  EXPECT_EQ(on_other_thread([&] { return aclmdlRICaptureEnd(stream_, &ri); }),
            ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD);
  ASSERT_EQ(aclmdlRICaptureEnd(stream_, &ri), ACL_SUCCESS);
  EXPECT_EQ(aclmdlRIDestroy(ri), ACL_SUCCESS);
  EXPECT_EQ(sync_copy(), ACL_SUCCESS);
  // THREAD_LOCAL: only the capturing thread may not.
  ASSERT_EQ(aclmdlRICaptureBegin(stream_, ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL), ACL_SUCCESS);
  EXPECT_EQ(sync_copy(), ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT);
  EXPECT_EQ(on_other_thread(sync_copy), ACL_SUCCESS);
  ASSERT_EQ(aclmdlRICaptureEnd(stream_, &ri), ACL_SUCCESS);
  EXPECT_EQ(aclmdlRIDestroy(ri), ACL_SUCCESS);
  // RELAXED: every thread may; another thread may end it.
  ASSERT_EQ(aclmdlRICaptureBegin(stream_, ACL_MODEL_RI_CAPTURE_MODE_RELAXED), ACL_SUCCESS);
  EXPECT_EQ(sync_copy(), ACL_SUCCESS);
  EXPECT_EQ(on_other_thread([&] { return aclmdlRICaptureEnd(stream_, &ri); }), ACL_SUCCESS);
  EXPECT_EQ(aclmdlRIDestroy(ri), ACL_SUCCESS);
}

TEST_F(Capture, ErrorCodes) {
  aclmdlRI ri = nullptr;
  EXPECT_EQ(aclmdlRICaptureBegin(nullptr, ACL_MODEL_RI_CAPTURE_MODE_RELAXED), ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT);
  EXPECT_EQ(aclmdlRICaptureBegin(stream_, (aclmdlRICaptureMode)7), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclmdlRICaptureEnd(stream_, &ri), ACL_ERROR_RT_STREAM_NOT_CAPTURED);
  ASSERT_EQ(aclmdlRICaptureBegin(stream_, ACL_MODEL_RI_CAPTURE_MODE_RELAXED), ACL_SUCCESS);
  EXPECT_EQ(aclmdlRICaptureBegin(stream_, ACL_MODEL_RI_CAPTURE_MODE_RELAXED), ACL_ERROR_RT_STREAM_CAPTURED);
  aclmdlRICaptureStatus status;
  aclmdlRI building = nullptr;
  ASSERT_EQ(aclmdlRICaptureGetInfo(stream_, &status, &building), ACL_SUCCESS);
  EXPECT_EQ(aclmdlRIExecuteAsync(building, nullptr), ACL_ERROR_RT_MODEL_CAPTURED);  // not ended yet
  EXPECT_EQ(aclmdlRIDestroy(building), ACL_ERROR_RT_MODEL_CAPTURED);
  EXPECT_EQ(aclmdlRIExecuteAsync(building, stream_), ACL_ERROR_RT_STREAM_CAPTURED);
  ASSERT_EQ(aclmdlRICaptureEnd(stream_, &ri), ACL_SUCCESS);
  int bogus = 0;
  EXPECT_EQ(aclmdlRIExecuteAsync(&bogus, stream_), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclmdlRIExecuteAsync(ri, stream_), ACL_SUCCESS);  // an empty model runs (nothing)
  ASSERT_EQ(aclrtSynchronizeStream(stream_), ACL_SUCCESS);
  EXPECT_EQ(aclmdlRIDestroy(ri), ACL_SUCCESS);
}

}  // namespace
