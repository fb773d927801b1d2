// The model API's load and execution variants against GE's acl model API (ge api/acl/acl_model/model/model.cpp):
// aclmdlQuerySize, the *WithMem loads into the caller's memory, the *WithQ loads refused for want of queues,
// aclmdlLoadWithConfig, aclmdlExecuteV2 / aclmdlExecuteAsyncV2. The toy model's output is checked against the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "acl/acl.h"
#include "test/unit/fake_cann/toy_model.h"

namespace {

constexpr int kRows = 4;
constexpr size_t kBytes = kRows * 3 * 4;

class ModelApi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { aclInit(nullptr); }
  void SetUp() override {
    ASSERT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    dir_ = toy_model::scratch_dir("fake_cann_mdlapi_", ::testing::UnitTest::GetInstance()->current_test_info()->name());
    path_ = toy_model::make_model(dir_, kRows);
    auto ref = toy_model::reference(kRows);
    for (void **p : {&x_, &y_, &out_}) ASSERT_EQ(aclrtMalloc(p, kBytes, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    ASSERT_EQ(aclrtMemcpy(x_, kBytes, ref["x"].data(), kBytes, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);
    ASSERT_EQ(aclrtMemcpy(y_, kBytes, ref["y"].data(), kBytes, ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);
    bufs_ = {aclCreateDataBuffer(x_, kBytes), aclCreateDataBuffer(y_, kBytes), aclCreateDataBuffer(out_, kBytes)};
    aclmdlAddDatasetBuffer(in_, bufs_[0]), aclmdlAddDatasetBuffer(in_, bufs_[1]), aclmdlAddDatasetBuffer(outs_, bufs_[2]);
  }
  void TearDown() override {
    aclmdlDestroyDataset(in_), aclmdlDestroyDataset(outs_);
    for (aclDataBuffer *b : bufs_) aclDestroyDataBuffer(b);
    for (void *p : {x_, y_, out_}) aclrtFree(p);
    std::filesystem::remove_all(dir_);
  }
  void expect_output() {
    std::vector<float> got(kRows * 3);
    ASSERT_EQ(aclrtMemcpy(got.data(), kBytes, out_, kBytes, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS);
    auto want = toy_model::reference(kRows)["out"];
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
  }
  std::string dir_, path_;
  void *x_ = nullptr, *y_ = nullptr, *out_ = nullptr;
  std::vector<aclDataBuffer *> bufs_;
  aclmdlDataset *in_ = aclmdlCreateDataset(), *outs_ = aclmdlCreateDataset();
};

// model.cpp aclmdlQuerySizeImpl / aclmdlLoadFromFileWithMemImpl: the model's intermediate tensors go into the work
// memory and its weights into the weight memory the caller gives (device memory of at least aclmdlQuerySize's sizes,
// else a GE failure); the model does not free them at unload.
TEST_F(ModelApi, LoadWithMemPutsTheModelInTheCallersMemory) {
  size_t work = 0, weight = 0;
  ASSERT_EQ(aclmdlQuerySize(path_.c_str(), &work, &weight), ACL_SUCCESS);
  EXPECT_EQ(work, 3u * 512);  // t0, t1, t2: 48 bytes each, 512-aligned
  EXPECT_EQ(weight, 512u);    // b: 12 bytes
  EXPECT_EQ(aclmdlQuerySize((dir_ + "/none.om").c_str(), &work, &weight), ACL_ERROR_READ_MODEL_FAILURE);
  void *w = nullptr, *wt = nullptr;
  ASSERT_EQ(aclrtMalloc(&w, work, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
  ASSERT_EQ(aclrtMalloc(&wt, weight, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
  uint32_t id = 0;
  EXPECT_EQ(aclmdlLoadFromFileWithMem(path_.c_str(), &id, w, work - 1, wt, weight), ACL_ERROR_GE_FAILURE);
  ASSERT_EQ(aclmdlLoadFromFileWithMem(path_.c_str(), &id, w, work, wt, weight), ACL_SUCCESS);
  float b[3] = {};
  ASSERT_EQ(aclrtMemcpy(b, 12, wt, 12, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS);  // the weights, placed at load
  EXPECT_EQ(std::vector<float>(b, b + 3), toy_model::reference(kRows)["b"]);
  ASSERT_EQ(aclmdlExecute(id, in_, outs_), ACL_SUCCESS);
  expect_output();
  float t2[12] = {};  // the third intermediate tensor, at 2 x 512 in the work memory
  ASSERT_EQ(aclrtMemcpy(t2, kBytes, static_cast<char *>(w) + 1024, kBytes, ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS);
  EXPECT_EQ(std::vector<float>(t2, t2 + 12), toy_model::reference(kRows)["t2"]);
  ASSERT_EQ(aclmdlUnload(id), ACL_SUCCESS);
  EXPECT_EQ(aclrtFree(w), ACL_SUCCESS);  // still the caller's
  EXPECT_EQ(aclrtFree(wt), ACL_SUCCESS);
  std::string image = toy_model::read_file(path_);
  ASSERT_EQ(aclmdlLoadFromMemWithMem(image.data(), image.size(), &id, nullptr, 0, nullptr, 0), ACL_SUCCESS);
  ASSERT_EQ(aclmdlExecute(id, in_, outs_), ACL_SUCCESS);
  expect_output();
  ASSERT_EQ(aclmdlUnload(id), ACL_SUCCESS);
}

// model.cpp aclmdlCheckQueueParam: no queue list or an empty one is ACL_ERROR_INVALID_PARAM; the stand-in has no data
// queues, so a queue id is refused as GE refuses an unknown one (ACL_ERROR_GE_EXEC_MODEL_QUEUE_ID_INVALID).
TEST_F(ModelApi, LoadWithQueuesIsRefused) {
  uint32_t id = 0, q_in[1] = {3}, q_out[1] = {4};
  EXPECT_EQ(aclmdlLoadFromFileWithQ(path_.c_str(), &id, nullptr, 1, q_out, 1), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclmdlLoadFromFileWithQ(path_.c_str(), &id, q_in, 0, q_out, 1), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclmdlLoadFromFileWithQ(path_.c_str(), &id, q_in, 1, q_out, 1),
            (aclError)ACL_ERROR_GE_EXEC_MODEL_QUEUE_ID_INVALID);
  std::string image = toy_model::read_file(path_);
  EXPECT_EQ(aclmdlLoadFromMemWithQ(image.data(), image.size(), &id, q_in, 1, q_out, 1),
            (aclError)ACL_ERROR_GE_EXEC_MODEL_QUEUE_ID_INVALID);
}

// model.cpp aclmdlLoadWithConfigImpl: ACL_MDL_LOAD_TYPE_SIZET picks the load, the other attributes are its arguments
// (the path copied); aclmdlExecuteV2 runs on the given stream and returns after it (model.cpp aclmdlExecuteV2Impl).
TEST_F(ModelApi, LoadWithConfigAndExecuteV2) {
  aclmdlConfigHandle *cfg = aclmdlCreateConfigHandle();
  uint32_t id = 0;
  EXPECT_EQ(aclmdlLoadWithConfig(cfg, &id), ACL_ERROR_INVALID_PARAM);  // no load type
  size_t type = ACL_MDL_LOAD_FROM_FILE;
  std::string path = path_;
  const char *p = path.c_str();
  ASSERT_EQ(aclmdlSetConfigOpt(cfg, ACL_MDL_LOAD_TYPE_SIZET, &type, sizeof type), ACL_SUCCESS);
  ASSERT_EQ(aclmdlSetConfigOpt(cfg, ACL_MDL_PATH_PTR, &p, sizeof p), ACL_SUCCESS);
  EXPECT_EQ(aclmdlSetConfigOpt(cfg, ACL_MDL_LOAD_TYPE_SIZET, &type, 4), ACL_ERROR_INVALID_PARAM);
  path.assign(path.size(), 'x');  // deep copy: the handle keeps its own
  ASSERT_EQ(aclmdlLoadWithConfig(cfg, &id), ACL_SUCCESS);
  ASSERT_EQ(aclmdlDestroyConfigHandle(cfg), ACL_SUCCESS);
  aclmdlExecConfigHandle *exec = aclmdlCreateExecConfigHandle();
  int32_t timeout = 5000;
  ASSERT_EQ(aclmdlSetExecConfigOpt(exec, ACL_MDL_STREAM_SYNC_TIMEOUT, &timeout, sizeof timeout), ACL_SUCCESS);
  aclrtStream s = nullptr;
  ASSERT_EQ(aclrtCreateStream(&s), ACL_SUCCESS);
  EXPECT_EQ(aclmdlExecuteV2(id, in_, outs_, s, nullptr), ACL_ERROR_INVALID_PARAM);
  ASSERT_EQ(aclmdlExecuteV2(id, in_, outs_, s, exec), ACL_SUCCESS);
  expect_output();  // no synchronize: aclmdlExecuteV2 waited
  ASSERT_EQ(aclrtMemset(out_, kBytes, 0, kBytes), ACL_SUCCESS);
  ASSERT_EQ(aclmdlExecuteAsyncV2(id, in_, outs_, s, exec), ACL_SUCCESS);
  ASSERT_EQ(aclrtSynchronizeStream(s), ACL_SUCCESS);
  expect_output();
  ASSERT_EQ(aclmdlDestroyExecConfigHandle(exec), ACL_SUCCESS);
  ASSERT_EQ(aclmdlUnload(id), ACL_SUCCESS);
  aclrtDestroyStream(s);
}

}  // namespace
