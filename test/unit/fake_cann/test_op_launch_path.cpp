// aclnn phase 2 and aclop execution launch their kernels through libruntime's exported rtRegisterAllKernel +
// rtKernelLaunchWithHandleV2, reached through the PLT: this program runs with rt_launch_counter.c preloaded (as a
// tool would be), which counts those calls, copies the last args blob and can refuse a launch. Results are
// checked against values computed here.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "acl/acl.h"
#include "acl/acl_op.h"
#include "acl/acl_op_compiler.h"
#include "aclnnop/aclnn_add.h"
#include "test/unit/fake_cann/device_buffers.h"
#include "rt_launch_counter.h"

namespace {

RtCounter snapshot() {
  static auto fn = reinterpret_cast<void (*)(RtCounter *)>(dlsym(RTLD_DEFAULT, "rtCounterSnapshot"));
  RtCounter c{};
  if (fn) fn(&c);
  return c;
}

void fail_next_launch(int code) {
  auto fn = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "rtCounterFailNext"));
  ASSERT_NE(fn, nullptr);
  fn(code);
}

uint64_t addr(const void *p) { return reinterpret_cast<uint64_t>(p); }

class OpLaunchPath : public ::testing::Test, protected DeviceBuffers {
 protected:
  static void SetUpTestSuite() {
    aclInit(nullptr);
    ASSERT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
  }
  void SetUp() override {
    ASSERT_NE(dlsym(RTLD_DEFAULT, "rtCounterSnapshot"), nullptr) << "run with LD_PRELOAD=librt_launch_counter.so";
    ASSERT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    ASSERT_EQ(aclrtCreateStream(&stream_), ACL_SUCCESS);
  }
  void TearDown() override {
    free_all();
    aclrtDestroyStream(stream_);
  }
  aclTensor *tensor(void *d) {
    int64_t shape[1] = {kN}, stride[1] = {1};
    return aclCreateTensor(shape, 1, ACL_FLOAT, stride, 0, ACL_FORMAT_ND, shape, 1, d);
  }
  // aclnnAdd(x, y, alpha) into out, on `stream`; returns phase 2's status (phase 1 must succeed).
  int aclnn_add(void *x, void *y, float alpha, void *out, aclrtStream stream, uint64_t *ws_out = nullptr) {
    aclTensor *tx = tensor(x), *ty = tensor(y), *to = tensor(out);
    aclScalar *a = aclCreateScalar(&alpha, ACL_FLOAT);
    uint64_t ws = 0;
    aclOpExecutor *ex = nullptr;
    EXPECT_EQ(aclnnAddGetWorkspaceSize(tx, ty, a, to, &ws, &ex), 0);
    void *workspace = ws > 0 ? alloc(ws) : nullptr;
    int rc = aclnnAdd(workspace, ws, ex, stream);
    if (ws_out) *ws_out = ws;
    aclDestroyTensor(tx);
    aclDestroyTensor(ty);
    aclDestroyTensor(to);
    aclDestroyScalar(a);
    return rc;
  }
  // aclop "Add" through aclopExecuteV2 (compile = false) or aclopCompileAndExecute.
  aclError aclop_add(void *x, void *y, void *z, bool compile) {
    int64_t dims[1] = {kN};
    aclTensorDesc *d[3];
    aclDataBuffer *b[3];
    void *dev[3] = {x, y, z};
    for (int i = 0; i < 3; ++i) {
      d[i] = aclCreateTensorDesc(ACL_FLOAT, 1, dims, ACL_FORMAT_ND);
      b[i] = aclCreateDataBuffer(dev[i], kN * 4);
    }
    aclopAttr *attr = aclopCreateAttr();
    aclError rc = compile ? aclopCompileAndExecute("Add", 2, d, b, 1, d + 2, b + 2, attr, ACL_ENGINE_SYS,
                                                   ACL_COMPILE_SYS, nullptr, stream_)
                          : aclopExecuteV2("Add", 2, d, b, 1, d + 2, b + 2, attr, stream_);
    aclopDestroyAttr(attr);
    for (int i = 0; i < 3; ++i) {
      aclDestroyTensorDesc(d[i]);
      aclDestroyDataBuffer(b[i]);
    }
    return rc;
  }
  static constexpr int64_t kN = 6;
  const std::vector<float> xs_{1, -2, 3.5f, 0, 8, -0.25f}, ys_{0.5f, 4, -1, 2, -8, 1};
  aclrtStream stream_ = nullptr;
};

// The TBE blob of an op kernel: `n` device addresses, the tiling slot, the 24-byte tiling data.
void expect_op_blob(const RtCounter &c, const std::vector<uint64_t> &addresses) {
  const uint32_t n = (uint32_t)addresses.size();
  EXPECT_EQ(c.tiling_key, 1u);  // fake_op_task_1
  EXPECT_EQ(c.args_size, 8 * (n + 1) + 24);
  EXPECT_EQ(c.has_tiling, 1);
  EXPECT_EQ(c.tiling_addr_offset, 8 * n);
  EXPECT_EQ(c.tiling_data_offset, 8 * (n + 1));
  for (uint32_t i = 0; i < n; ++i) EXPECT_EQ(c.words[i], addresses[i]) << "address slot " << i;
  EXPECT_EQ(c.words[n + 3], n);  // the tiling data's address count
}

TEST_F(OpLaunchPath, AclnnPhase2LaunchesThroughTheExportedHandleLaunch) {
  void *x = upload(xs_), *y = upload(ys_), *out = upload(std::vector<float>(kN, 0));
  const RtCounter before = snapshot();
  uint64_t ws = 0;
  ASSERT_EQ(aclnn_add(x, y, 2.0f, out, stream_, &ws), 0);
  const RtCounter after = snapshot();
  EXPECT_EQ(after.launch_with_handle_v2, before.launch_with_handle_v2 + 1);
  EXPECT_EQ(after.launch_other, before.launch_other);
  ASSERT_EQ(ws, 0u);  // Add has no workspace: the blob holds x, y, out
  expect_op_blob(after, {addr(x), addr(y), addr(out)});
  ASSERT_EQ(aclrtSynchronizeStream(stream_), ACL_SUCCESS);
  auto got = download(out, kN);
  for (int i = 0; i < kN; ++i) EXPECT_EQ(got[i], xs_[i] + 2.0f * ys_[i]) << i;
}

TEST_F(OpLaunchPath, AclopLaunchesThroughTheExportedHandleLaunch) {
  void *x = upload(xs_), *y = upload(ys_), *z1 = upload(std::vector<float>(kN, 0)),
       *z2 = upload(std::vector<float>(kN, 0));
  const RtCounter before = snapshot();
  ASSERT_EQ(aclop_add(x, y, z1, false), ACL_SUCCESS);
  RtCounter mid = snapshot();
  EXPECT_EQ(mid.launch_with_handle_v2, before.launch_with_handle_v2 + 1);
  expect_op_blob(mid, {addr(x), addr(y), addr(z1)});
  ASSERT_EQ(aclop_add(y, x, z2, true), ACL_SUCCESS);
  RtCounter after = snapshot();
  EXPECT_EQ(after.launch_with_handle_v2, before.launch_with_handle_v2 + 2);
  EXPECT_EQ(after.launch_other, before.launch_other);
  expect_op_blob(after, {addr(y), addr(x), addr(z2)});
  ASSERT_EQ(aclrtSynchronizeStream(stream_), ACL_SUCCESS);
  auto a = download(z1, kN), b = download(z2, kN);
  for (int i = 0; i < kN; ++i) {
    EXPECT_EQ(a[i], xs_[i] + ys_[i]) << i;
    EXPECT_EQ(b[i], xs_[i] + ys_[i]) << i;
  }
}

TEST_F(OpLaunchPath, EachOpLibraryRegistersItsBinaryOnce) {
  void *x = upload(xs_), *y = upload(ys_), *out = upload(std::vector<float>(kN, 0));
  // Both libraries have launched by now (or do so here); after that, launches register nothing.
  ASSERT_EQ(aclnn_add(x, y, 1.0f, out, stream_), 0);
  ASSERT_EQ(aclop_add(x, y, out, false), ACL_SUCCESS);
  const RtCounter before = snapshot();
  EXPECT_GE(before.register_all_kernel, 2u);  // libnnopbase's and libascendcl's
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(aclnn_add(x, y, 1.0f, out, stream_), 0);
    ASSERT_EQ(aclop_add(x, y, out, true), ACL_SUCCESS);
  }
  const RtCounter after = snapshot();
  EXPECT_EQ(after.register_all_kernel, before.register_all_kernel);
  EXPECT_EQ(after.launch_with_handle_v2, before.launch_with_handle_v2 + 10);
  ASSERT_EQ(aclrtSynchronizeStream(stream_), ACL_SUCCESS);
}

// The launch really depends on the function reached through the PLT: refused there, the op is not run.
TEST_F(OpLaunchPath, ALaunchRefusedByThePreloadedFunctionRunsNothing) {
  void *x = upload(xs_), *y = upload(ys_), *out = upload(std::vector<float>(kN, -7.0f));
  fail_next_launch(ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclnn_add(x, y, 1.0f, out, stream_), ACLNN_ERR_RUNTIME_ERROR);
  fail_next_launch(ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(aclop_add(x, y, out, false), ACL_ERROR_RT_PARAM_INVALID);
  ASSERT_EQ(aclrtSynchronizeStream(stream_), ACL_SUCCESS);
  EXPECT_EQ(download(out, kN), std::vector<float>(kN, -7.0f));
  // The next launches go through.
  ASSERT_EQ(aclnn_add(x, y, 1.0f, out, stream_), 0);
  ASSERT_EQ(aclrtSynchronizeStream(stream_), ACL_SUCCESS);
  auto got = download(out, kN);
  for (int i = 0; i < kN; ++i) EXPECT_EQ(got[i], xs_[i] + ys_[i]) << i;
}

// A bad stream is refused by the runtime's launch (the op libraries no longer check it themselves).
TEST_F(OpLaunchPath, ABadStreamIsRefusedAtTheRuntimeLaunch) {
  void *x = upload(xs_), *y = upload(ys_), *out = upload(std::vector<float>(kN, 0));
  int bogus = 0;
  const RtCounter before = snapshot();
  EXPECT_EQ(aclnn_add(x, y, 1.0f, out, &bogus), ACLNN_ERR_RUNTIME_ERROR);
  EXPECT_EQ(snapshot().launch_with_handle_v2, before.launch_with_handle_v2 + 1);
}

}  // namespace
