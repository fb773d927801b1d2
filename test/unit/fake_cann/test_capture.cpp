// Stream capture into model runtime instances (aclmdlRICaptureBegin / GetInfo / End, aclmdlRIExecuteAsync,
// aclmdlRIDestroy), as CANN documents them: tasks submitted to a capturing stream are recorded, not run; every replay
// runs them again over the memory as it is then; the capture modes restrict the unsafe calls; the error codes of
// rt_error_codes.h.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
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
  // Not RELAXED: the capture ends on the thread that began it; ending it on another thread drops it
  // (context_aclgraph.cc StreamEndCapture: ClearCaptureModel), so the stream is no longer capturing.
  EXPECT_EQ(on_other_thread([&] { return aclmdlRICaptureEnd(stream_, &ri); }),
            ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD);
  EXPECT_EQ(aclmdlRICaptureEnd(stream_, &ri), ACL_ERROR_RT_STREAM_NOT_CAPTURED);
  EXPECT_EQ(sync_copy(), ACL_SUCCESS);
  ASSERT_EQ(aclmdlRICaptureBegin(stream_, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL), ACL_SUCCESS);
  ASSERT_EQ(aclmdlRICaptureEnd(stream_, &ri), ACL_SUCCESS);
  EXPECT_EQ(aclmdlRIDestroy(ri), ACL_SUCCESS);
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

// docs/zh/api_ref/15_model_running_instance__management.md, runtime example/2_advanced_features/model_ri/1_model_update:
// the tasks launched on another stream between aclmdlRICaptureTaskUpdateBegin and End replace a task group's tasks
// when that stream gets there; replays before run the old ones, later replays the new ones. A wait on an
// ACL_EVENT_EXTERNAL event inside the capture waits, at each replay, for a record made outside; the captured
// aclrtResetEvent makes the next replay wait for the next one.
TEST_F(Capture, TaskUpdateReplacesAGroupsTasksAndExternalEventsOrderReplays) {
  void *x = upload({1, 2, 3}), *y = upload({10, 20, 30}), *out = upload({0, 0, 0}), *y2 = upload({100, 200, 300});
  aclOpExecutor *first = add(x, y, out, 3), *second = add(x, y2, out, 3);
  aclrtEvent ev = nullptr;
  ASSERT_EQ(aclrtCreateEventWithFlag(&ev, ACL_EVENT_EXTERNAL), ACL_SUCCESS);
  aclmdlRI ri = nullptr;
  aclrtTaskGrp grp = nullptr;
  ASSERT_EQ(aclmdlRICaptureBegin(stream_, ACL_MODEL_RI_CAPTURE_MODE_RELAXED), ACL_SUCCESS);
  ASSERT_EQ(aclrtStreamWaitEvent(stream_, ev), ACL_SUCCESS);
  ASSERT_EQ(aclrtResetEvent(ev, stream_), ACL_SUCCESS);
  ASSERT_EQ(aclmdlRICaptureTaskGrpBegin(stream_), ACL_SUCCESS);
  EXPECT_EQ(aclmdlRICaptureTaskGrpBegin(stream_), ACL_ERROR_STREAM_TASK_GROUP_STATUS);  // one at a time
  ASSERT_EQ(aclnnAdd(nullptr, 0, first, stream_), 0);
  ASSERT_EQ(aclmdlRICaptureTaskGrpEnd(stream_, &grp), ACL_SUCCESS);
  ASSERT_EQ(aclmdlRICaptureEnd(stream_, &ri), ACL_SUCCESS);
  aclrtStream update = nullptr;
  ASSERT_EQ(aclrtCreateStream(&update), ACL_SUCCESS);
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(aclmdlRIExecuteAsync(ri, stream_), ACL_SUCCESS);
    if (i == 1) {
      ASSERT_EQ(aclmdlRICaptureTaskUpdateBegin(update, grp), ACL_SUCCESS);
      ASSERT_EQ(aclnnAdd(nullptr, 0, second, update), 0);
      ASSERT_EQ(aclmdlRICaptureTaskUpdateEnd(update), ACL_SUCCESS);
    }
    // The replay waits for this record: the update before it is in force for replay 2.
    ASSERT_EQ(aclrtRecordEvent(ev, update), ACL_SUCCESS);
    ASSERT_EQ(aclrtSynchronizeStream(update), ACL_SUCCESS);
    ASSERT_EQ(aclrtSynchronizeStream(stream_), ACL_SUCCESS);
    EXPECT_EQ(download(out, 3), i == 0 ? (std::vector<float>{11, 22, 33}) : (std::vector<float>{101, 202, 303}));
  }
  // An update must give as many kernels as the group holds (context_aclgraph.cc StreamEndTaskUpdate:
  // RT_ERROR_STREAM_TASKGRP_UPDATE, which errcode_manage.cc maps to ACL_ERROR_RT_INTERNAL_ERROR).
  ASSERT_EQ(aclmdlRICaptureTaskUpdateBegin(update, grp), ACL_SUCCESS);
  EXPECT_EQ(aclmdlRICaptureTaskUpdateBegin(stream_, grp), ACL_ERROR_STREAM_TASK_GROUP_STATUS);  // one updater
  EXPECT_EQ(aclmdlRICaptureTaskUpdateEnd(update), ACL_ERROR_RT_INTERNAL_ERROR);
  EXPECT_EQ(aclmdlRICaptureTaskUpdateEnd(update), ACL_ERROR_STREAM_TASK_GROUP_STATUS);
  EXPECT_EQ(aclmdlRICaptureTaskGrpBegin(update), ACL_ERROR_RT_STREAM_NOT_CAPTURED);
  ASSERT_EQ(aclmdlRIDestroy(ri), ACL_SUCCESS);
  aclDestroyAclOpExecutor(first);
  aclDestroyAclOpExecutor(second);
  aclrtDestroyEvent(ev);
  aclrtDestroyStream(update);
}

// runtime example/2_advanced_features/model_ri/4_model_sync_external: a record made inside a capture with
// ACL_EVENT_RECORD_EXTERNAL is a new record of the event at every replay, so a wait issued after aclmdlRIExecuteAsync
// waits for the replay; ACL_EVENT_WAIT_EXTERNAL inside a capture waits for a record made outside. Both flags need a
// capturing stream (api_impl.cc EventRecord: RT_ERROR_STREAM_NOT_CAPTURED).
TEST_F(Capture, ExternalRecordsAndWaitsOrderAModelWithTheOutside) {
  void *src = upload({1, 2, 3, 4}), *mid = upload({0, 0, 0, 0}), *dst = upload({0, 0, 0, 0});
  aclrtStream other = nullptr;
  ASSERT_EQ(aclrtCreateStream(&other), ACL_SUCCESS);
  aclrtEvent ev = nullptr;
  ASSERT_EQ(aclrtCreateEventExWithFlag(&ev, ACL_EVENT_SYNC), ACL_SUCCESS);
  EXPECT_EQ(aclrtRecordEventWithFlag(ev, stream_, ACL_EVENT_RECORD_EXTERNAL), ACL_ERROR_RT_STREAM_NOT_CAPTURED);
  EXPECT_EQ(aclrtStreamWaitEventWithFlag(stream_, ev, 0, ACL_EVENT_WAIT_EXTERNAL), ACL_ERROR_RT_STREAM_NOT_CAPTURED);
  aclmdlRI producer = nullptr, consumer = nullptr;
  ASSERT_EQ(aclmdlRICaptureBegin(stream_, ACL_MODEL_RI_CAPTURE_MODE_RELAXED), ACL_SUCCESS);
  ASSERT_EQ(aclrtMemcpyAsync(mid, 16, src, 16, ACL_MEMCPY_DEVICE_TO_DEVICE, stream_), ACL_SUCCESS);
  ASSERT_EQ(aclrtRecordEventWithFlag(ev, stream_, ACL_EVENT_RECORD_EXTERNAL), ACL_SUCCESS);
  ASSERT_EQ(aclmdlRICaptureEnd(stream_, &producer), ACL_SUCCESS);
  ASSERT_EQ(aclmdlRICaptureBegin(other, ACL_MODEL_RI_CAPTURE_MODE_RELAXED), ACL_SUCCESS);
  ASSERT_EQ(aclrtStreamWaitEventWithFlag(other, ev, 0, ACL_EVENT_WAIT_EXTERNAL), ACL_SUCCESS);
  ASSERT_EQ(aclrtMemcpyAsync(dst, 16, mid, 16, ACL_MEMCPY_DEVICE_TO_DEVICE, other), ACL_SUCCESS);
  ASSERT_EQ(aclmdlRICaptureEnd(other, &consumer), ACL_SUCCESS);
  // The consumer is enqueued first: it must wait for the producer's replay.
  ASSERT_EQ(aclmdlRIExecuteAsync(consumer, other), ACL_SUCCESS);
  ASSERT_EQ(aclrtLaunchHostFunc(
                stream_, [](void *) { std::this_thread::sleep_for(std::chrono::milliseconds(20)); }, nullptr),
            ACL_SUCCESS);
  ASSERT_EQ(aclmdlRIExecuteAsync(producer, stream_), ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeStream(other), ACL_SUCCESS);
  EXPECT_EQ(download(dst, 4), (std::vector<float>{1, 2, 3, 4}));
  // A plain wait issued after the replay waits for the replay's record.
  ASSERT_EQ(aclrtMemcpy(src, 16, std::vector<float>{5, 6, 7, 8}.data(), 16, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);
  ASSERT_EQ(aclrtLaunchHostFunc(
                stream_, [](void *) { std::this_thread::sleep_for(std::chrono::milliseconds(20)); }, nullptr),
            ACL_SUCCESS);
  ASSERT_EQ(aclmdlRIExecuteAsync(producer, stream_), ACL_SUCCESS);
  ASSERT_EQ(aclrtStreamWaitEvent(other, ev), ACL_SUCCESS);
  std::vector<float> host(4, 0);
  ASSERT_EQ(aclrtMemcpyAsync(host.data(), 16, mid, 16, ACL_MEMCPY_DEVICE_TO_HOST, other), ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeStream(other), ACL_SUCCESS);
  EXPECT_EQ(host, (std::vector<float>{5, 6, 7, 8}));
  ASSERT_EQ(aclrtSynchronizeStream(stream_), ACL_SUCCESS);
  ASSERT_EQ(aclmdlRIDestroy(producer), ACL_SUCCESS);
  ASSERT_EQ(aclmdlRIDestroy(consumer), ACL_SUCCESS);
  aclrtDestroyEvent(ev);
  aclrtDestroyStream(other);
}

// runtime example/2_advanced_features/model_ri/0_simple_model: a thread that exchanges its mode for RELAXED may make
// an unsafe call while its own GLOBAL capture is in force, and exchanging back restores the refusal;
// aclmdlRIDebugJsonPrint writes the instance's tasks.
TEST_F(Capture, ThreadExchangeModeRelaxesTheThreadAndDebugJsonListsTheTasks) {
  void *x = upload({1, 2}), *y = upload({3, 4}), *out = upload({0, 0});
  aclOpExecutor *ex = add(x, y, out, 2);
  std::vector<float> host = {7, 8};
  aclmdlRI ri = nullptr;
  ASSERT_EQ(aclmdlRICaptureBegin(stream_, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL), ACL_SUCCESS);
  EXPECT_EQ(aclrtMemcpy(x, 8, host.data(), 8, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT);
  aclmdlRICaptureMode mode = ACL_MODEL_RI_CAPTURE_MODE_RELAXED;
  ASSERT_EQ(aclmdlRICaptureThreadExchangeMode(&mode), ACL_SUCCESS);
  EXPECT_EQ(mode, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL);  // the thread's previous mode
  EXPECT_EQ(aclrtMemcpy(x, 8, host.data(), 8, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);  // runs now, not captured
  ASSERT_EQ(aclmdlRICaptureThreadExchangeMode(&mode), ACL_SUCCESS);
  EXPECT_EQ(mode, ACL_MODEL_RI_CAPTURE_MODE_RELAXED);
  EXPECT_EQ(aclrtMemcpy(x, 8, host.data(), 8, ACL_MEMCPY_HOST_TO_DEVICE), ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT);
  ASSERT_EQ(aclnnAdd(nullptr, 0, ex, stream_), 0);
  ASSERT_EQ(aclrtMemsetAsync(y, 8, 0, 8, stream_), ACL_SUCCESS);
  ASSERT_EQ(aclmdlRICaptureEnd(stream_, &ri), ACL_SUCCESS);
  const std::string path = ::testing::TempDir() + "/model_ri.json";
  ASSERT_EQ(aclmdlRIDebugJsonPrint(ri, path.c_str(), ACL_MDLRI_DEBUG_JSON_PRINT_SUMMARY), ACL_SUCCESS);
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  EXPECT_NE(text.str().find(R"({"index": 1, "type": "memset"})"), std::string::npos) << text.str();
  EXPECT_EQ(aclmdlRIDebugJsonPrint(ri, nullptr, 0), ACL_ERROR_INVALID_PARAM);
  ASSERT_EQ(aclmdlRIExecuteAsync(ri, stream_), ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeStream(stream_), ACL_SUCCESS);
  EXPECT_EQ(download(out, 2), (std::vector<float>{10, 12}));
  ASSERT_EQ(aclmdlRIDestroy(ri), ACL_SUCCESS);
  aclDestroyAclOpExecutor(ex);
}

// docs/zh/dev_guide/04-02_cross_stream_capture.md, context_aclgraph.cc CheckCaptureModelValidity: a stream that waits
// on an event recorded inside a capture joins it (its tasks are the model's, not run); the capture ends on its origin
// stream only once every joined stream has returned to it through an event the origin waits on. Meanwhile the events
// recorded inside cannot be queried, the capturing stream cannot be destroyed nor the device synchronized. The model
// replays on any stream, as often as wanted.
TEST_F(Capture, CrossStreamCaptureJoinsThroughEventsAndReplaysOnAnyStream) {
  void *x = upload({1, 2, 3}), *y = upload({10, 20, 30}), *out = upload({0, 0, 0}), *acc = upload({0, 0, 0});
  aclOpExecutor *sum = add(x, y, out, 3), *accumulate = add(acc, out, acc, 3);
  aclrtStream side = nullptr, third = nullptr;
  ASSERT_EQ(aclrtCreateStream(&side), ACL_SUCCESS);
  ASSERT_EQ(aclrtCreateStream(&third), ACL_SUCCESS);
  aclrtEvent fork = nullptr, join = nullptr;
  ASSERT_EQ(aclrtCreateEvent(&fork), ACL_SUCCESS);
  ASSERT_EQ(aclrtCreateEvent(&join), ACL_SUCCESS);
  ASSERT_EQ(aclmdlRICaptureBegin(stream_, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL), ACL_SUCCESS);
  ASSERT_EQ(aclrtRecordEvent(fork, stream_), ACL_SUCCESS);
  ASSERT_EQ(aclrtStreamWaitEvent(side, fork), ACL_SUCCESS);
  aclmdlRICaptureStatus status = ACL_MODEL_RI_CAPTURE_STATUS_NONE;
  aclmdlRI origin_ri = nullptr, side_ri = nullptr;
  ASSERT_EQ(aclmdlRICaptureGetInfo(stream_, &status, &origin_ri), ACL_SUCCESS);
  ASSERT_EQ(aclmdlRICaptureGetInfo(side, &status, &side_ri), ACL_SUCCESS);
  EXPECT_EQ(status, ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE);
  EXPECT_EQ(side_ri, origin_ri);  // one capture, two streams
  ASSERT_EQ(aclnnAdd(nullptr, 0, sum, side), 0);
  aclrtEventRecordedStatus recorded;
  EXPECT_EQ(aclrtQueryEventStatus(fork, &recorded), ACL_ERROR_RT_EVENT_CAPTURED);
  EXPECT_EQ(aclrtSynchronizeEvent(fork), ACL_ERROR_RT_EVENT_CAPTURED);
  EXPECT_EQ(aclrtDestroyStream(stream_), ACL_ERROR_RT_STREAM_CAPTURED);
  EXPECT_EQ(aclrtSynchronizeDevice(), ACL_ERROR_RT_STREAM_CAPTURED);
  aclmdlRI ri = nullptr;
  EXPECT_EQ(aclmdlRICaptureEnd(side, &ri), ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED);  // not where it began
  ASSERT_EQ(aclrtRecordEvent(join, side), ACL_SUCCESS);
  ASSERT_EQ(aclrtStreamWaitEvent(stream_, join), ACL_SUCCESS);
  ASSERT_EQ(aclnnAdd(nullptr, 0, accumulate, stream_), 0);
  ASSERT_EQ(aclmdlRICaptureEnd(stream_, &ri), ACL_SUCCESS);
  ASSERT_EQ(aclmdlRICaptureGetInfo(side, &status, &side_ri), ACL_SUCCESS);
  EXPECT_EQ(status, ACL_MODEL_RI_CAPTURE_STATUS_NONE);  // the joined stream left with the end
  EXPECT_EQ(aclrtQueryEventStatus(fork, &recorded), ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeDevice(), ACL_SUCCESS);
  EXPECT_EQ(download(acc, 3), (std::vector<float>{0, 0, 0}));  // nothing ran
  ASSERT_EQ(aclmdlRIExecuteAsync(ri, third), ACL_SUCCESS);
  ASSERT_EQ(aclmdlRIExecuteAsync(ri, side), ACL_SUCCESS);  // one replay at a time, whichever stream
  ASSERT_EQ(aclrtSynchronizeStream(third), ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeStream(side), ACL_SUCCESS);
  EXPECT_EQ(download(acc, 3), (std::vector<float>{22, 44, 66}));
  ASSERT_EQ(aclmdlRIDestroy(ri), ACL_SUCCESS);

  // A joined stream that never returns: the end fails and drops the capture, on both streams.
  ASSERT_EQ(aclmdlRICaptureBegin(stream_, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL), ACL_SUCCESS);
  ASSERT_EQ(aclrtRecordEvent(fork, stream_), ACL_SUCCESS);
  ASSERT_EQ(aclrtStreamWaitEvent(side, fork), ACL_SUCCESS);
  ASSERT_EQ(aclnnAdd(nullptr, 0, sum, side), 0);
  EXPECT_EQ(aclmdlRICaptureEnd(stream_, &ri), ACL_ERROR_RT_STREAM_UNJOINED);
  for (aclrtStream s : {stream_, side}) {
    ASSERT_EQ(aclmdlRICaptureGetInfo(s, &status, &side_ri), ACL_SUCCESS);
    EXPECT_EQ(status, ACL_MODEL_RI_CAPTURE_STATUS_NONE);
  }
  ASSERT_EQ(aclrtSynchronizeDevice(), ACL_SUCCESS);
  EXPECT_EQ(download(acc, 3), (std::vector<float>{22, 44, 66}));
  aclDestroyAclOpExecutor(sum);
  aclDestroyAclOpExecutor(accumulate);
  aclrtDestroyEvent(fork);
  aclrtDestroyEvent(join);
  aclrtDestroyStream(side);
  aclrtDestroyStream(third);
}

// capture_adapt_v100.cc TaskTypeIsSupportTaskGroup: a task group holds kernels only; api_ref 15: aclmdlRISetName /
// GetName (cut to maxLen - 1) / GetId, and the destroy callbacks run when the instance goes.
TEST_F(Capture, TaskGroupsHoldKernelsOnlyAndInstancesHaveNamesIdsAndDestroyCallbacks) {
  void *x = upload({1, 2}), *y = upload({3, 4}), *out = upload({0, 0});
  aclOpExecutor *ex = add(x, y, out, 2);
  aclmdlRI ri = nullptr;
  aclrtTaskGrp grp = nullptr;
  ASSERT_EQ(aclmdlRICaptureBegin(stream_, ACL_MODEL_RI_CAPTURE_MODE_RELAXED), ACL_SUCCESS);
  ASSERT_EQ(aclmdlRICaptureTaskGrpBegin(stream_), ACL_SUCCESS);
  EXPECT_EQ(aclrtMemsetAsync(out, 8, 0, 8, stream_), ACL_ERROR_RT_TASK_TYPE_NOT_SUPPORT);
  ASSERT_EQ(aclnnAdd(nullptr, 0, ex, stream_), 0);
  ASSERT_EQ(aclmdlRICaptureTaskGrpEnd(stream_, &grp), ACL_SUCCESS);
  ASSERT_EQ(aclmdlRICaptureEnd(stream_, &ri), ACL_SUCCESS);
  EXPECT_EQ(aclmdlRIExecuteAsync(ri, stream_), ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeStream(stream_), ACL_SUCCESS);
  EXPECT_EQ(download(out, 2), (std::vector<float>{4, 6}));  // the refused memset is not part of it

  char name[16] = "junk";
  ASSERT_EQ(aclmdlRIGetName(ri, sizeof name, name), ACL_SUCCESS);
  EXPECT_STREQ(name, "");
  ASSERT_EQ(aclmdlRISetName(ri, "decode_bs4"), ACL_SUCCESS);
  ASSERT_EQ(aclmdlRIGetName(ri, 5, name), ACL_SUCCESS);
  EXPECT_STREQ(name, "deco");
  uint32_t id = 0, other_id = 0;
  ASSERT_EQ(aclmdlRIGetId(ri, &id), ACL_SUCCESS);
  aclmdlRI other = nullptr;
  ASSERT_EQ(aclmdlRICaptureBegin(stream_, ACL_MODEL_RI_CAPTURE_MODE_RELAXED), ACL_SUCCESS);
  ASSERT_EQ(aclmdlRICaptureEnd(stream_, &other), ACL_SUCCESS);
  ASSERT_EQ(aclmdlRIGetId(other, &other_id), ACL_SUCCESS);
  EXPECT_NE(id, other_id);
  static int destroyed = 0;
  auto count = [](void *data) { destroyed += *static_cast<int *>(data); };
  int weight = 5;
  ASSERT_EQ(aclmdlRIDestroyRegisterCallback(ri, count, &weight), ACL_SUCCESS);
  ASSERT_EQ(aclmdlRIDestroyRegisterCallback(other, count, &weight), ACL_SUCCESS);
  ASSERT_EQ(aclmdlRIDestroyUnregisterCallback(other, count), ACL_SUCCESS);
  EXPECT_EQ(aclmdlRIDestroyUnregisterCallback(other, count), ACL_ERROR_RT_PARAM_INVALID);
  ASSERT_EQ(aclmdlRIDestroy(other), ACL_SUCCESS);
  EXPECT_EQ(destroyed, 0);
  ASSERT_EQ(aclmdlRIDestroy(ri), ACL_SUCCESS);
  EXPECT_EQ(destroyed, 5);
  aclDestroyAclOpExecutor(ex);
}

// ---- instances built from bound streams, and labels ----

class Build : public ::testing::Test, protected DeviceBuffers {
 protected:
  void SetUp() override {
    ASSERT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    ASSERT_EQ(aclrtCreateStreamWithConfig(&graph_, 0, ACL_STREAM_PERSISTENT), ACL_SUCCESS);
    ASSERT_EQ(aclrtCreateStream(&exec_), ACL_SUCCESS);
    ASSERT_EQ(aclmdlRIBuildBegin(&ri_, 0), ACL_SUCCESS);
  }
  void TearDown() override {
    aclrtSynchronizeStream(exec_);
    EXPECT_EQ(aclmdlRIDestroy(ri_), ACL_SUCCESS);
    free_all();
    aclrtDestroyStream(graph_);
    aclrtDestroyStream(exec_);
  }
  uint32_t read_u32(void *d) {
    uint32_t v = 0;
    EXPECT_EQ(aclrtMemcpy(&v, 4, d, 4, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS);
    return v;
  }
  aclrtStream graph_ = nullptr, exec_ = nullptr;
  aclmdlRI ri_ = nullptr;
};

// The label sample (runtime example/2_advanced_features/label/0_simple_label) and label.cc / docs
// 10_label_management.md: a switch jumps to the label of the index it reads from device memory when it runs (the same
// instance takes another branch once the index changes); an index beyond the list lands on its last label. Tasks
// given to a bound stream are the instance's: they do not run when submitted.
TEST_F(Build, SwitchLabelByIndexTakesTheBranchOfTheIndexAtRunTime) {
  ASSERT_EQ(aclmdlRIBindStream(ri_, graph_, 0), ACL_SUCCESS);
  void *index = alloc(4), *a = alloc(4), *b = alloc(4);
  ASSERT_EQ(aclrtMemset(a, 4, 0, 4), ACL_SUCCESS);
  ASSERT_EQ(aclrtMemset(b, 4, 0, 4), ACL_SUCCESS);
  aclrtLabel labels[2] = {nullptr, nullptr};
  ASSERT_EQ(aclrtCreateLabel(&labels[0]), ACL_SUCCESS);
  ASSERT_EQ(aclrtCreateLabel(&labels[1]), ACL_SUCCESS);
  aclrtLabelList list = nullptr;
  ASSERT_EQ(aclrtCreateLabelList(labels, 2, &list), ACL_SUCCESS);
  ASSERT_EQ(aclrtSwitchLabelByIndex(index, 2, list, graph_), ACL_SUCCESS);
  ASSERT_EQ(aclrtSetLabel(labels[0], graph_), ACL_SUCCESS);
  ASSERT_EQ(aclrtMemsetAsync(a, 4, 0x11, 4, graph_), ACL_SUCCESS);
  ASSERT_EQ(aclmdlRIEndTask(ri_, graph_), ACL_SUCCESS);
  ASSERT_EQ(aclrtSetLabel(labels[1], graph_), ACL_SUCCESS);
  ASSERT_EQ(aclrtMemsetAsync(b, 4, 0x22, 4, graph_), ACL_SUCCESS);
  ASSERT_EQ(aclmdlRIEndTask(ri_, graph_), ACL_SUCCESS);
  ASSERT_EQ(aclmdlRIBuildEnd(ri_, nullptr), ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeStream(graph_), ACL_SUCCESS);
  EXPECT_EQ(read_u32(a), 0u);  // recorded, not run
  const struct {
    uint32_t index, a, b;
  } runs[] = {{0, 0x11111111u, 0}, {1, 0, 0x22222222u}, {7, 0, 0x22222222u}};
  for (const auto &r : runs) {
    ASSERT_EQ(aclrtMemset(a, 4, 0, 4), ACL_SUCCESS);
    ASSERT_EQ(aclrtMemset(b, 4, 0, 4), ACL_SUCCESS);
    ASSERT_EQ(aclrtMemcpy(index, 4, &r.index, 4, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);
    ASSERT_EQ(aclmdlRIExecuteAsync(ri_, exec_), ACL_SUCCESS);
    ASSERT_EQ(aclrtSynchronizeStream(exec_), ACL_SUCCESS);
    EXPECT_EQ(read_u32(a), r.a) << r.index;
    EXPECT_EQ(read_u32(b), r.b) << r.index;
  }
  ASSERT_EQ(aclmdlRIUnbindStream(ri_, graph_), ACL_SUCCESS);
  EXPECT_EQ(aclrtDestroyLabelList(list), ACL_SUCCESS);
  EXPECT_EQ(aclrtDestroyLabel(labels[0]), ACL_SUCCESS);
  EXPECT_EQ(aclrtDestroyLabel(labels[1]), ACL_SUCCESS);
  EXPECT_EQ(aclrtDestroyLabel(labels[1]), ACL_ERROR_RT_PARAM_INVALID);
}

// Head streams (flag 0) start together at each execution: one waits for a value the other writes (serially this
// would never end); a stream bound with ACL_MODEL_STREAM_FLAG_DEFAULT (0x7FFFFFFF) waits for an activation.
TEST_F(Build, HeadStreamsRunTogetherOthersWait) {
  aclrtStream second = nullptr, idle = nullptr;
  ASSERT_EQ(aclrtCreateStreamWithConfig(&second, 0, ACL_STREAM_PERSISTENT), ACL_SUCCESS);
  ASSERT_EQ(aclrtCreateStreamWithConfig(&idle, 0, ACL_STREAM_PERSISTENT), ACL_SUCCESS);
  ASSERT_EQ(aclmdlRIBindStream(ri_, graph_, 0), ACL_SUCCESS);
  ASSERT_EQ(aclmdlRIBindStream(ri_, second, 0), ACL_SUCCESS);
  ASSERT_EQ(aclmdlRIBindStream(ri_, idle, 0x7FFFFFFF), ACL_SUCCESS);
  void *flag = alloc(8), *out = alloc(4), *never = alloc(4);
  ASSERT_EQ(aclrtMemset(flag, 8, 0, 8), ACL_SUCCESS);
  ASSERT_EQ(aclrtMemset(never, 4, 0, 4), ACL_SUCCESS);
  ASSERT_EQ(aclrtValueWait(flag, 1, ACL_STREAM_WAIT_VALUE_EQ, graph_), ACL_SUCCESS);
  ASSERT_EQ(aclrtMemsetAsync(out, 4, 0x33, 4, graph_), ACL_SUCCESS);
  ASSERT_EQ(aclrtValueWrite(flag, 1, 0, second), ACL_SUCCESS);
  ASSERT_EQ(aclrtMemsetAsync(never, 4, 0x44, 4, idle), ACL_SUCCESS);
  for (aclrtStream s : {graph_, second, idle}) ASSERT_EQ(aclmdlRIEndTask(ri_, s), ACL_SUCCESS);
  ASSERT_EQ(aclmdlRIBuildEnd(ri_, nullptr), ACL_SUCCESS);
  ASSERT_EQ(aclmdlRIExecuteAsync(ri_, exec_), ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeStreamWithTimeout(exec_, 5000), ACL_SUCCESS);
  EXPECT_EQ(read_u32(out), 0x33333333u);
  EXPECT_EQ(read_u32(never), 0u);
  aclrtDestroyStream(second);  // destroying a bound stream unbinds it
  aclrtDestroyStream(idle);
}

// api_c_model.cc rtsModelCreate / rtsModelBindStream / rtsModelLoadComplete, model.cc CheckBindStream / UnbindStream,
// label.cc Label::Set, rtsLabelSwitchListCreate: the codes of each refusal.
TEST_F(Build, Refusals) {
  aclmdlRI other = nullptr;
  EXPECT_EQ(aclmdlRIBuildBegin(&other, 1), ACL_ERROR_RT_PARAM_INVALID);
  aclrtStream plain = nullptr;
  ASSERT_EQ(aclrtCreateStream(&plain), ACL_SUCCESS);
  EXPECT_EQ(aclmdlRIBindStream(ri_, plain, 0), ACL_ERROR_RT_PARAM_INVALID);  // not persistent
  EXPECT_EQ(aclmdlRIBindStream(ri_, graph_, 5), ACL_ERROR_RT_PARAM_INVALID);
  aclrtLabel label = nullptr;
  ASSERT_EQ(aclrtCreateLabel(&label), ACL_SUCCESS);
  EXPECT_EQ(aclrtSetLabel(label, graph_), ACL_ERROR_RT_STREAM_MODEL);  // not bound yet
  ASSERT_EQ(aclmdlRIBindStream(ri_, graph_, 0), ACL_SUCCESS);
  EXPECT_EQ(aclmdlRIBindStream(ri_, graph_, 0), ACL_ERROR_RT_STREAM_MODEL);
  ASSERT_EQ(aclrtSetLabel(label, graph_), ACL_SUCCESS);
  EXPECT_EQ(aclrtSetLabel(label, graph_), ACL_ERROR_RT_INTERNAL_ERROR);  // RT_ERROR_LABEL_SET
  aclrtLabelList list = nullptr;
  EXPECT_EQ(aclrtCreateLabelList(&label, 0, &list), ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclrtCreateLabelList(nullptr, 1, &list), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclmdlRIUnbindStream(ri_, plain), ACL_ERROR_RT_STREAM_MODEL);
  EXPECT_EQ(aclmdlRIBuildEnd(ri_, &other), ACL_ERROR_INVALID_PARAM);
  ASSERT_EQ(aclmdlRIBuildEnd(ri_, nullptr), ACL_SUCCESS);
  EXPECT_EQ(aclrtDestroyLabel(label), ACL_SUCCESS);
  aclrtDestroyStream(plain);
}

}  // namespace
