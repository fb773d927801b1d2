// The stand-in's single-op dump (dump_op_switch "on", cann_dump.md §9): aclnnAdd, aclnnInplaceAdd and aclop Add
// with dump on deliver files named {op_type}.{op_name}.{task}.{stream}.{us} under {dump_path}/{time}/{device}/,
// decoded here with an own protobuf reader: the input file holds the tensors before the kernel ran, the output
// file after; the host call returns only once its dumps were taken (the stream was drained); the executor cache is
// off while any dump is in force.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <regex>
#include <string>
#include <vector>

#include "acl/acl.h"
#include "acl/acl_dump.h"
#include "aclnnop/aclnn_add.h"
#include "test/unit/fake_cann/device_buffers.h"
#include "../time_scale.h"
#include "test/unit/fake_cann/proto_fields.h"

extern "C" {  // libnnopbase's executor cache helpers (reference/cann_abi.md §6.4)
bool CanUsePTACache(const char *api);
void InitPTACacheThreadLocal(void);
void UnInitPTACacheThreadLocal(void);
void SetPTAHashKey(uint64_t hash);
aclOpExecutor *PTAGetExecCache(uint64_t hash, uint64_t *workspaceSize);
void AddTensorAddrToCachedList(void *addr);
}

namespace fs = std::filesystem;

using namespace fakecann_test;

namespace {

// Under qemu (MSPROBE_TEST_TIME_SCALE) the host side of a call is slower: the sync test's "the call only queued"
// bound is the delay, so the delay grows with it.
[[maybe_unused]] const bool g_delay_scaled = msprobe::test::scale_fake_cann_task_delay();

const bool g_acl = aclInit(nullptr) == ACL_SUCCESS;

// A dump file split into its DumpData and the tensor bytes that follow it.
struct DumpFile {
  Fields header;
  std::string data;
};
DumpFile parse(const std::string &file) {
  uint64_t h = 0;
  EXPECT_GE(file.size(), 8u);
  std::memcpy(&h, file.data(), 8);
  return {decode(file.substr(8, h)), file.substr(8 + h)};
}


// ---- chunks through the callback ----

std::mutex g_mu;
std::map<std::string, std::string> g_files, g_open;

int32_t on_chunk(const acldumpChunk *c, int32_t) {
  std::lock_guard<std::mutex> lk(g_mu);
  g_open[c->fileName].append(reinterpret_cast<const char *>(c) + 4116, c->bufLen);
  if (c->isLastChunk) g_files[c->fileName] = std::move(g_open[c->fileName]), g_open.erase(c->fileName);
  return 0;
}

class OpDump : public ::testing::Test, protected DeviceBuffers {
 protected:
  void SetUp() override {
    ASSERT_TRUE(g_acl);
    ASSERT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    ASSERT_EQ(aclrtCreateStream(&stream_), ACL_SUCCESS);
    dir_ = (fs::temp_directory_path() / ("fake_cann_opdump_" + std::to_string(getpid()))).string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::lock_guard<std::mutex> lk(g_mu);
    g_files.clear();
  }
  void TearDown() override {
    free_all();
    for (aclTensor *t : tensors_) aclDestroyTensor(t);
    aclrtDestroyStream(stream_);
    fs::remove_all(dir_);
  }

  // InitDump + SetDump with `extra` fields (and a callback unless `to_disk`).
  void start(const std::string &extra = R"("dump_mode": "all")", bool to_disk = false) {
    if (!to_disk) {
      ASSERT_EQ(acldumpRegCallback(on_chunk, 0), ACL_SUCCESS);
    }
    std::string cfg = dir_ + "/dump.json";
    std::ofstream(cfg) << R"({"dump": {"dump_path": ")" << dir_ << R"(", "dump_list": [], "dump_op_switch": "on", )"
                       << extra << "}}";
    ASSERT_EQ(aclmdlInitDump(), ACL_SUCCESS);
    ASSERT_EQ(aclmdlSetDump(cfg.c_str()), ACL_SUCCESS);
    callback_ = !to_disk;
  }
  // FinalizeDump (every chunk delivered); the files by base name.
  std::map<std::string, std::string> stop() {
    EXPECT_EQ(aclmdlFinalizeDump(), ACL_SUCCESS);
    if (callback_) acldumpUnregCallback();
    std::lock_guard<std::mutex> lk(g_mu);
    std::map<std::string, std::string> out;
    for (auto &[path, bytes] : g_files) {
      EXPECT_EQ(fs::path(path).parent_path().parent_path().parent_path().string(), dir_) << path;
      EXPECT_EQ(fs::path(path).parent_path().filename().string(), "0") << path;  // {time}/{device}
      out[fs::path(path).filename().string()] = bytes;
    }
    return out;
  }

  aclTensor *tensor(void *d) {
    int64_t shape[2] = {2, 3}, strides[2] = {3, 1};
    tensors_.push_back(aclCreateTensor(shape, 2, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, shape, 2, d));
    return tensors_.back();
  }
  int add(void *x, void *y, void *o, float a) {
    aclScalar *alpha = aclCreateScalar(&a, ACL_FLOAT);
    uint64_t ws = 0;
    aclOpExecutor *ex = nullptr;
    int rc = aclnnAddGetWorkspaceSize(tensor(x), tensor(y), alpha, tensor(o), &ws, &ex);
    void *w = rc == 0 && ws > 0 ? alloc(ws) : nullptr;
    if (rc == 0) rc = aclnnAdd(w, ws, ex, stream_);
    aclDestroyScalar(alpha);
    return rc;
  }

  aclrtStream stream_ = nullptr;
  std::string dir_;
  bool callback_ = false;
  std::vector<aclTensor *> tensors_;
};

const std::vector<float> kX = {1, 2, 3, 4, 5, 6}, kY = {10, 20, 30, 40, 50, 60};
const std::vector<float> kSum = {21, 42, 63, 84, 105, 126};  // x + 2 y

// Checks one tensor entry of DumpData: DT_FLOAT (proto numbering), ND, shape [2,3], 24 bytes.
void expect_float23(const std::string &msg) {
  Fields t = decode(msg);
  EXPECT_EQ(t.varint(1), 1u);  // DT_FLOAT
  EXPECT_EQ(t.varint(2), 2u);  // FORMAT_ND
  ASSERT_EQ(t.all(3).size(), 1u);
  EXPECT_EQ(dims(t.all(3)[0]), (std::vector<uint64_t>{2, 3}));
}

TEST_F(OpDump, AclnnAddDumpsItsInputsBeforeAndOutputsAfterAtBothLevels) {
  void *x = upload(kX), *y = upload(kY), *o = upload(std::vector<float>(6, 0));
  start();
  ASSERT_EQ(add(x, y, o, 2.0f), 0);
  auto files = stop();
  // dump_level "all" (default): the API (L2) and its kernel (L0), inputs and outputs: four files.
  ASSERT_EQ(files.size(), 4u);
  const std::string name = R"(aclnnAdd_(\d+)_(L[02])\.(aclnnAdd|Add)\.(\d+)\.(\d+)\.(\d{16}))";
  for (const auto &[file, bytes] : files) EXPECT_TRUE(std::regex_match(file, std::regex(name))) << file;
  for (const char *level : {"L0", "L2"}) {
    const std::string op = std::string(level) == "L0" ? "Add" : "aclnnAdd";
    std::vector<std::string> pair;
    for (const auto &[file, bytes] : files)
      if (file.find(std::string("_") + level + ".") != std::string::npos) pair.push_back(bytes);
    ASSERT_EQ(pair.size(), 2u);
    DumpFile a = parse(pair[0]), b = parse(pair[1]);
    DumpFile &in = a.header.all(4).empty() ? b : a, &out = a.header.all(4).empty() ? a : b;
    ASSERT_EQ(in.header.all(4).size(), 2u);
    EXPECT_TRUE(in.header.all(3).empty());
    for (const std::string &t : in.header.all(4)) {
      expect_float23(t);
      EXPECT_EQ(decode(t).varint(5), 24u);
    }
    EXPECT_EQ(in.data, bytes_of(kX) + bytes_of(kY));
    ASSERT_EQ(out.header.all(3).size(), 1u);
    expect_float23(out.header.all(3)[0]);
    EXPECT_EQ(decode(out.header.all(3)[0]).varint(6), 24u);
    EXPECT_EQ(out.data, bytes_of(kSum));
    for (DumpFile *f : {&in, &out}) {
      EXPECT_EQ(f->header.all(1), std::vector<std::string>{"2.0"});
      EXPECT_EQ(f->header.all(6), std::vector<std::string>{op});
      EXPECT_GT(f->header.varint(2), 0u);  // dump_time
    }
  }
}

TEST_F(OpDump, InputDumpOfAnInPlaceOpHoldsTheValuesBeforeTheKernel) {
  void *self = upload(kX), *other = upload(kY);
  start(R"("dump_mode": "all", "dump_level": "kernel")");
  float a = 2.0f;
  aclScalar *alpha = aclCreateScalar(&a, ACL_FLOAT);
  uint64_t ws = 0;
  aclOpExecutor *ex = nullptr;
  ASSERT_EQ(aclnnInplaceAddGetWorkspaceSize(tensor(self), tensor(other), alpha, &ws, &ex), 0);
  ASSERT_EQ(aclnnInplaceAdd(nullptr, ws, ex, stream_), 0);
  aclDestroyScalar(alpha);
  auto files = stop();
  ASSERT_EQ(files.size(), 2u);  // dump_level "kernel": the L0 kernel only
  std::vector<DumpFile> parsed;
  for (const auto &[file, bytes] : files) {
    EXPECT_TRUE(std::regex_match(file, std::regex(R"(aclnnInplaceAdd_\d+_L0\.InplaceAdd\.\d+\.\d+\.\d{16})"))) << file;
    parsed.push_back(parse(bytes));
  }
  DumpFile &in = parsed[0].header.all(4).empty() ? parsed[1] : parsed[0];
  DumpFile &out = parsed[0].header.all(4).empty() ? parsed[0] : parsed[1];
  EXPECT_EQ(in.data, bytes_of(kX) + bytes_of(kY));  // selfRef before += 2 * other
  EXPECT_EQ(out.data, bytes_of(kSum));              // selfRef (in-out) after
  EXPECT_EQ(download(self, 6), kSum);
}

TEST_F(OpDump, DumpModeOutputDumpsOutputsOnlyAndWritesFilesWithoutACallback) {
  void *x = upload(kX), *y = upload(kY), *o = upload(std::vector<float>(6, 0));
  start(R"("dump_mode": "output", "dump_level": "op")", /*to_disk=*/true);
  ASSERT_EQ(add(x, y, o, 2.0f), 0);
  stop();
  std::vector<fs::path> found;
  for (const auto &e : fs::recursive_directory_iterator(dir_))
    if (e.is_regular_file() && e.path().filename() != "dump.json") found.push_back(e.path());
  ASSERT_EQ(found.size(), 1u);
  EXPECT_TRUE(std::regex_match(found[0].filename().string(), std::regex(R"(aclnnAdd_\d+_L2\.aclnnAdd\..*)")));
  EXPECT_TRUE(std::regex_match(found[0].parent_path().parent_path().filename().string(), std::regex(R"(\d{14})")));
  std::ifstream f(found[0], std::ios::binary);
  DumpFile d = parse(std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>()));
  EXPECT_TRUE(d.header.all(4).empty());
  EXPECT_EQ(d.data, bytes_of(kSum));
}

TEST_F(OpDump, AclopAddDumpsInputsAndOutputs) {
  void *x = upload(kX), *y = upload(kY), *o = upload(std::vector<float>(6, 0));
  int64_t d[2] = {2, 3};
  aclTensorDesc *desc[3];
  for (auto &p : desc) p = aclCreateTensorDesc(ACL_FLOAT, 2, d, ACL_FORMAT_ND);
  aclDataBuffer *in[2] = {aclCreateDataBuffer(x, 24), aclCreateDataBuffer(y, 24)}, *out[1] = {aclCreateDataBuffer(o, 24)};
  start();
  aclopAttr *attr = aclopCreateAttr();
  ASSERT_EQ(aclopExecuteV2("Add", 2, desc, in, 1, desc + 2, out, attr, stream_), ACL_SUCCESS);
  auto files = stop();
  std::vector<float> sum(6);
  for (int i = 0; i < 6; ++i) sum[(size_t)i] = kX[(size_t)i] + kY[(size_t)i];
  ASSERT_EQ(files.size(), 2u);
  std::vector<DumpFile> parsed;
  for (const auto &[file, bytes] : files) {
    EXPECT_TRUE(std::regex_match(file, std::regex(R"(Add\.Add\.\d+\.\d+\.\d{16})"))) << file;
    parsed.push_back(parse(bytes));
  }
  DumpFile &i = parsed[0].header.all(4).empty() ? parsed[1] : parsed[0];
  DumpFile &s = parsed[0].header.all(4).empty() ? parsed[0] : parsed[1];
  EXPECT_EQ(i.data, bytes_of(kX) + bytes_of(kY));
  EXPECT_EQ(s.data, bytes_of(sum));
  aclopDestroyAttr(attr);
  for (auto *b : {in[0], in[1], out[0]}) aclDestroyDataBuffer(b);
  for (auto *p : desc) aclDestroyTensorDesc(p);
}

// FAKE_CANN_TASK_DELAY_US delays every stream task: a call with dump on returns only after the stream ran its queued
// work, the kernel and the dump kernels (four dumps at level all, each draining the stream); without dump the call
// only queues.
TEST_F(OpDump, SyncTheCallReturnsOnlyAfterItsDumps) {
  const char *env = std::getenv("FAKE_CANN_TASK_DELAY_US");
  if (env == nullptr) GTEST_SKIP() << "needs FAKE_CANN_TASK_DELAY_US";
  const auto delay = std::chrono::microseconds(std::atol(env));
  void *x = upload(kX), *y = upload(kY), *o = upload(std::vector<float>(6, 0));
  using Clock = std::chrono::steady_clock;
  auto t0 = Clock::now();
  ASSERT_EQ(add(x, y, o, 2.0f), 0);
  EXPECT_LT(Clock::now() - t0, delay);  // dump off: queued, not run
  ASSERT_EQ(aclrtSynchronizeStream(stream_), ACL_SUCCESS);

  start();
  std::vector<float> host(6, 7.0f);
  ASSERT_EQ(aclrtMemcpyAsync(x, 24, host.data(), 24, ACL_MEMCPY_HOST_TO_DEVICE, stream_), ACL_SUCCESS);  // queued
  t0 = Clock::now();
  ASSERT_EQ(add(x, y, o, 2.0f), 0);
  // copy + 2 input dumps + kernel + 2 output dumps: six tasks ran before the call returned.
  EXPECT_GE(Clock::now() - t0, 6 * delay);
  std::vector<float> want(6);
  for (int i = 0; i < 6; ++i) want[(size_t)i] = 7.0f + 2 * kY[(size_t)i];
  EXPECT_EQ(download(o, 6), want);  // the kernel ran: no synchronize needed
  stop();
}

// With any dump in force, nnopbase's executor cache is off: CanUsePTACache says no, a miss's phase 1 is not stored,
// so the next call looks up nothing and runs phase 1 again. After FinalizeDump the same sequence is cached.
TEST_F(OpDump, ExecutorCacheIsOffWhileDumpIsOn) {
  void *x = upload(kX), *y = upload(kY), *o = upload(std::vector<float>(6, 0));
  auto call = [&](uint64_t hash) {  // torch_npu's hit_cache: lookup, and phase 1 + 2 on a miss; true on a hit
    InitPTACacheThreadLocal();
    for (void *p : {x, y, o}) AddTensorAddrToCachedList(p);
    SetPTAHashKey(hash);
    uint64_t ws = 0;
    aclOpExecutor *ex = PTAGetExecCache(hash, &ws);
    bool hit = ex != nullptr;
    if (hit)
      EXPECT_EQ(aclnnAdd(nullptr, ws, ex, stream_), 0);
    else
      EXPECT_EQ(add(x, y, o, 2.0f), 0);
    UnInitPTACacheThreadLocal();
    return hit;
  };
  start(R"("dump_mode": "output", "dump_level": "kernel")");
  EXPECT_FALSE(CanUsePTACache("aclnnAdd"));
  const uint64_t h = 0x5eed0000u + (uint64_t)getpid();
  EXPECT_FALSE(call(h));
  EXPECT_FALSE(call(h));  // not stored: phase 1 again
  EXPECT_EQ(stop().size(), 2u);
  EXPECT_TRUE(CanUsePTACache("aclnnAdd"));
  EXPECT_FALSE(call(h + 1));
  EXPECT_TRUE(call(h + 1));  // dump off: the cached executor is reused
  ASSERT_EQ(aclrtSynchronizeStream(stream_), ACL_SUCCESS);
  EXPECT_EQ(download(o, 6), kSum);
}

TEST_F(OpDump, AclDumpOpTensorsDumpsInputsThenOutputsOnlyWhileOperatorDumpIsOn) {
  void *x = upload(kX), *y = upload(kY);
  aclTensor *t[2] = {tensor(x), tensor(y)};
  EXPECT_EQ(aclDumpOpTensors("Custom", "my.op", t, 1, 1, stream_), 0);  // dump off: nothing
  EXPECT_EQ(aclDumpOpTensors("Custom", "my.op", nullptr, 1, 1, stream_), ACLNN_ERR_PARAM_NULLPTR);
  start();
  EXPECT_EQ(aclDumpOpTensors("Custom", "my.op", t, 1, 1, stream_), 0);
  auto files = stop();
  ASSERT_EQ(files.size(), 1u);
  EXPECT_TRUE(std::regex_match(files.begin()->first, std::regex(R"(Custom\.my_op\.\d+\.\d+\.\d{16})")));
  DumpFile d = parse(files.begin()->second);
  EXPECT_EQ(d.header.all(6), std::vector<std::string>{"my.op"});  // unsanitised in the proto
  EXPECT_EQ(d.header.all(4).size(), 1u);
  EXPECT_EQ(d.header.all(3).size(), 1u);
  EXPECT_EQ(d.data, bytes_of(kX) + bytes_of(kY));
}

TEST_F(OpDump, StatsModeDeliversCsvPerDump) {
  void *x = upload(kX), *y = upload(kY), *o = upload(std::vector<float>(6, 0));
  start(R"("dump_mode": "output", "dump_level": "kernel", "dump_data": "stats")");
  ASSERT_EQ(add(x, y, o, 2.0f), 0);
  auto files = stop();
  ASSERT_EQ(files.size(), 1u);
  EXPECT_TRUE(std::regex_match(files.begin()->first, std::regex(R"(aclnnAdd_\d+_L0\.Add\.\d+\.\d+\.\d{16}\.csv)")));
  const std::string &csv = files.begin()->second;
  EXPECT_EQ(csv.rfind("Input/Output,Index,Data Size,Data Type,Format,Shape,Max Value,Min Value,Avg Value,", 0), 0u);
  EXPECT_NE(csv.find("\nOutput,0,24,DT_FLOAT,ND,2x3,126,21,"), std::string::npos) << csv;
}

// A kernel that faults: its dumps still run, and the error still reaches the host's own synchronize.
TEST_F(OpDump, AKernelFaultStillReachesTheHostsSynchronize) {
  void *x = upload({1, 2, 3, 4});
  float one = 1.0f;
  aclScalar *alpha = aclCreateScalar(&one, ACL_FLOAT);
  int64_t n = 1000, stride = 1;  // claims 1000 elements of a 4-element allocation
  aclTensor *big = aclCreateTensor(&n, 1, ACL_FLOAT, &stride, 0, ACL_FORMAT_ND, &n, 1, x);
  tensors_.push_back(big);
  start(R"("dump_mode": "output", "dump_level": "kernel")");
  uint64_t ws = 0;
  aclOpExecutor *ex = nullptr;
  ASSERT_EQ(aclnnAddGetWorkspaceSize(big, big, alpha, big, &ws, &ex), 0);
  EXPECT_EQ(aclnnAdd(nullptr, ws, ex, stream_), 0);
  EXPECT_EQ(aclrtSynchronizeStream(stream_), ACL_ERROR_RT_AICORE_EXCEPTION);
  aclDestroyScalar(alpha);
  stop();
}

TEST_F(OpDump, ModelOnlyConfigDumpsNoSingleOpsButStillDisablesTheCache) {
  void *x = upload(kX), *y = upload(kY), *o = upload(std::vector<float>(6, 0));
  ASSERT_EQ(acldumpRegCallback(on_chunk, 0), ACL_SUCCESS);
  std::string cfg = dir_ + "/dump.json";
  std::ofstream(cfg) << R"({"dump": {"dump_path": ")" << dir_ << R"(", "dump_list": [{"model_name": "m"}]}})";
  ASSERT_EQ(aclmdlInitDump(), ACL_SUCCESS);
  ASSERT_EQ(aclmdlSetDump(cfg.c_str()), ACL_SUCCESS);
  callback_ = true;
  EXPECT_FALSE(CanUsePTACache("aclnnAdd"));
  ASSERT_EQ(add(x, y, o, 2.0f), 0);
  EXPECT_TRUE(stop().empty());
  ASSERT_EQ(aclrtSynchronizeStream(stream_), ACL_SUCCESS);
  EXPECT_EQ(download(o, 6), kSum);
}

}  // namespace
