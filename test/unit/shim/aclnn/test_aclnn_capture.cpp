// aclnn two-phase capture (shim/aclnn/aclnn_capture.h) against the CANN stand-in's libopapi / libnnopbase: the
// stand-in's phase-1 and phase-2 symbols wrapped with aclnn_capture().wrap_symbol() and called as a host would,
// with a test Session published by activate_session(). Phase 1 records the op's arguments under its executor,
// phase 2 captures inputs before and outputs after the kernel (dump.json read back), an executor freed by phase 2
// is forgotten, a repeatable executor keeps its record across launches, a failed phase 2 submits nothing.
// What the shim's hooks would report (aclCreateScalar's value, aclSetAclOpExecutorRepeatable, aclDestroyAclOpExecutor)
// is reported here by hand: the hooks are not linked in unit tests.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>

#include "aclnn/acl_meta.h"
#include "shim/aclnn/aclnn_capture.h"
#include "shim/capture/session.h"
#include "shim/device/staging.h"
#include "test/unit/shim/capture/capture_test_util.h"

using namespace msprobe::shim;
using namespace capture_test;

namespace {

using AddPhase1 = aclnnStatus (*)(const aclTensor *, const aclTensor *, const aclScalar *, aclTensor *, uint64_t *,
                                  aclOpExecutor **);
using Phase2 = aclnnStatus (*)(void *, uint64_t, aclOpExecutor *, aclrtStream);

class AclnnCaptureTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { aclInit(nullptr); }

  void SetUp() override {
    unsetenv("RANK_ID");
    unsetenv("RANK");
    ASSERT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    ASSERT_EQ(aclrtCreateStream(&stream_), ACL_SUCCESS);
    dir_ = fresh_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    // Host statistics: each staged tensor is one copy, counted by the staging pool.
    session_ = std::make_unique<Session>(config_of({{"MSPROBE_DEVICE_STATS", "off"}}, dir_));
    activate_session(session_.get());
    // The stand-in's libopapi, as the host's framework opens it (not linked: the test names none of its symbols).
    const char *home = std::getenv("ASCEND_HOME_PATH");
    ASSERT_NE(home, nullptr) << "ASCEND_HOME_PATH is set by the test environment";
    void *opapi = dlopen((std::string(home) + "/lib64/libopapi.so").c_str(), RTLD_NOW | RTLD_GLOBAL);
    ASSERT_NE(opapi, nullptr) << dlerror();
    add1_ = reinterpret_cast<AddPhase1>(wrapped(opapi, "aclnnAddGetWorkspaceSize"));
    add2_ = reinterpret_cast<Phase2>(wrapped(opapi, "aclnnAdd"));
    mul2_ = reinterpret_cast<Phase2>(wrapped(opapi, "aclnnMul"));
    float two = 2.0f;
    alpha_ = aclCreateScalar(&two, ACL_FLOAT);
    ScalarMeta s;  // what the aclCreateScalar hook records
    s.dtype = ACL_FLOAT;
    std::memcpy(s.raw.data(), &two, sizeof two);
    handles().put(alpha_, s);
  }

  void TearDown() override {
    activate_session(nullptr);
    session_.reset();
    handles().erase(alpha_);
    aclDestroyScalar(alpha_);
    for (aclTensor *t : acl_tensors_) aclDestroyTensor(t);
    for (const TensorMeta &t : tensors_) aclrtFree(t.data);
    aclrtDestroyStream(stream_);
    fs::remove_all(dir_);
  }

  void *wrapped(void *lib, const char *name) {
    void *real = dlsym(lib, name);
    EXPECT_NE(real, nullptr) << name;
    void *w = aclnn_capture().wrap_symbol(name, real);
    EXPECT_NE(w, real) << name << " is not wrapped";
    return w;
  }

  // A float tensor on the device and its aclTensor.
  aclTensor *tensor(const std::vector<float> &v, TensorMeta *meta = nullptr) {
    tensors_.push_back(device_floats(v));
    int64_t shape[1] = {(int64_t)v.size()}, stride[1] = {1};
    aclTensor *t = aclCreateTensor(shape, 1, ACL_FLOAT, stride, 0, ACL_FORMAT_ND, shape, 1, tensors_.back().data);
    acl_tensors_.push_back(t);
    if (meta) *meta = tensors_.back();
    return t;
  }

  void set(const TensorMeta &m, const std::vector<float> &v) {
    ASSERT_EQ(aclrtMemcpy(m.data, v.size() * 4, v.data(), v.size() * 4, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);
  }

  uint64_t copies() { return session_->stager().staging()->counters().copies; }

  // Closes the dump and returns its data.
  nlohmann::json finish() {
    EXPECT_EQ(aclrtSynchronizeStream(stream_), ACL_SUCCESS);
    session_->shutdown();
    return dump_data(dir_);
  }

  // An Add entry: inputs self, other and alpha = 2, output out.
  static void expect_add(const nlohmann::json &e, const std::vector<float> &x, const std::vector<float> &y,
                         const std::vector<float> &out, const std::string &what) {
    ASSERT_EQ(e["input_args"].size(), 3u) << what << ": " << e.dump();
    expect_stats(e["input_args"][0], x, what + " self");
    expect_stats(e["input_args"][1], y, what + " other");
    EXPECT_EQ(e["input_args"][2]["type"], "float") << what;
    EXPECT_EQ(e["input_args"][2]["value"].get<double>(), 2.0) << what;
    ASSERT_EQ(e["output"].size(), 1u) << what << ": " << e.dump();
    expect_stats(e["output"][0], out, what + " out");
  }

  fs::path dir_;
  std::unique_ptr<Session> session_;
  aclrtStream stream_ = nullptr;
  AddPhase1 add1_ = nullptr;
  Phase2 add2_ = nullptr, mul2_ = nullptr;
  aclScalar *alpha_ = nullptr;
  std::vector<aclTensor *> acl_tensors_;
  std::vector<TensorMeta> tensors_;
};

TEST_F(AclnnCaptureTest, PhaseOneRecordsAndPhaseTwoCapturesInputsAndOutputs) {
  const std::vector<float> x = {1, 2, 3}, y = {10, 20, 30}, zero = {0, 0, 0}, out = {21, 42, 63};
  aclTensor *tx = tensor(x), *ty = tensor(y), *to = tensor(zero);
  uint64_t ws = 0;
  aclOpExecutor *ex = nullptr;
  ASSERT_EQ(add1_(tx, ty, alpha_, to, &ws, &ex), 0);
  ASSERT_NE(ex, nullptr);
  EXPECT_EQ(copies(), 0u) << "phase 1 records, copies nothing";
  ASSERT_EQ(add2_(nullptr, ws, ex, stream_), 0);
  EXPECT_EQ(copies(), 3u) << "self and other before the kernel, out after it";
  const nlohmann::json data = finish();
  EXPECT_EQ(data.size(), 1u) << data.dump();
  ASSERT_TRUE(data.contains("Add.Default.0.forward")) << data.dump();
  expect_add(data["Add.Default.0.forward"], x, y, out, "Add");
}

TEST_F(AclnnCaptureTest, AnExecutorFreedByPhaseTwoIsForgotten) {
  const std::vector<float> x = {1, 1}, y = {2, 2}, zero = {0, 0};
  aclTensor *tx = tensor(x), *ty = tensor(y), *to = tensor(zero);
  uint64_t ws = 0;
  aclOpExecutor *ex = nullptr;
  ASSERT_EQ(add1_(tx, ty, alpha_, to, &ws, &ex), 0);
  ASSERT_EQ(add2_(nullptr, ws, ex, stream_), 0);
  ASSERT_EQ(copies(), 3u);
  // The executor is gone: the runtime refuses it, and the shim has no record left to copy inputs for.
  EXPECT_EQ(add2_(nullptr, ws, ex, stream_), ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(copies(), 3u) << "a stale executor's launch copies nothing";
  const nlohmann::json data = finish();
  EXPECT_EQ(data.size(), 1u) << data.dump();
  EXPECT_TRUE(data.contains("Add.Default.0.forward"));
}

TEST_F(AclnnCaptureTest, ARepeatableExecutorKeepsItsRecordAcrossLaunches) {
  const std::vector<float> x = {1, 2}, y1 = {10, 20}, y2 = {-5, 7}, zero = {0, 0};
  TensorMeta my;
  aclTensor *tx = tensor(x), *ty = tensor(y1, &my), *to = tensor(zero);
  uint64_t ws = 0;
  aclOpExecutor *ex = nullptr;
  ASSERT_EQ(add1_(tx, ty, alpha_, to, &ws, &ex), 0);
  ASSERT_EQ(aclSetAclOpExecutorRepeatable(ex), 0);
  aclnn_capture().on_repeatable(ex);  // what the aclSetAclOpExecutorRepeatable hook reports
  ASSERT_EQ(add2_(nullptr, ws, ex, stream_), 0);
  ASSERT_EQ(aclrtSynchronizeStream(stream_), ACL_SUCCESS);
  set(my, y2);  // the host refills `other` and launches the same executor again
  ASSERT_EQ(add2_(nullptr, ws, ex, stream_), 0);
  EXPECT_EQ(copies(), 6u);
  ASSERT_EQ(aclrtSynchronizeStream(stream_), ACL_SUCCESS);
  ASSERT_EQ(aclDestroyAclOpExecutor(ex), 0);
  aclnn_capture().on_destroyed(ex);  // what the aclDestroyAclOpExecutor hook reports
  const nlohmann::json data = finish();
  EXPECT_EQ(data.size(), 2u) << data.dump();
  ASSERT_TRUE(data.contains("Add.Default.0.forward") && data.contains("Add.Default.1.forward")) << data.dump();
  expect_add(data["Add.Default.0.forward"], x, y1, {21, 42}, "first launch");
  expect_add(data["Add.Default.1.forward"], x, y2, {-9, 16}, "second launch");
}

TEST_F(AclnnCaptureTest, AFailedPhaseTwoSubmitsNothingAndKeepsTheRecord) {
  const std::vector<float> x = {3, 4}, y = {1, 1}, zero = {0, 0};
  aclTensor *tx = tensor(x), *ty = tensor(y), *to = tensor(zero);
  uint64_t ws = 0;
  aclOpExecutor *ex = nullptr;
  ASSERT_EQ(add1_(tx, ty, alpha_, to, &ws, &ex), 0);
  // Launched by the wrong op's phase 2: the runtime refuses it (the kernel never runs).
  EXPECT_EQ(mul2_(nullptr, ws, ex, stream_), ACLNN_ERR_PARAM_INVALID);
  EXPECT_EQ(copies(), 2u) << "the inputs were staged before the launch failed";
  // The executor is still live and still recorded: its real launch is captured in full.
  ASSERT_EQ(add2_(nullptr, ws, ex, stream_), 0);
  EXPECT_EQ(copies(), 5u);
  const nlohmann::json data = finish();
  EXPECT_EQ(data.size(), 1u) << data.dump();
  EXPECT_FALSE(data.contains("Mul.Default.0.forward")) << "the failed launch is named but not written";
  ASSERT_TRUE(data.contains("Add.Default.0.forward")) << data.dump();
  expect_add(data["Add.Default.0.forward"], x, y, {5, 6}, "Add");
}

TEST_F(AclnnCaptureTest, WithoutAnActiveSessionNothingIsRecorded) {
  activate_session(nullptr);
  const std::vector<float> x = {1}, y = {1}, zero = {0};
  aclTensor *tx = tensor(x), *ty = tensor(y), *to = tensor(zero);
  uint64_t ws = 0;
  aclOpExecutor *ex = nullptr;
  ASSERT_EQ(add1_(tx, ty, alpha_, to, &ws, &ex), 0);
  activate_session(session_.get());  // published between the phases: phase 2 has no record
  ASSERT_EQ(add2_(nullptr, ws, ex, stream_), 0);
  EXPECT_EQ(copies(), 0u);
  ASSERT_EQ(aclrtSynchronizeStream(stream_), ACL_SUCCESS);
  session_->shutdown();
  EXPECT_FALSE(fs::exists(dir_)) << "a launch without arguments is counted, not written";
}

}  // namespace
