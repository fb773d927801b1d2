// libhccl with its ranks as threads of one process, one device per thread, as CANN's own HCCL samples run them (hccl
// examples/01_point_to_point, 02_collectives: aclrtSetDevice per thread, one root info for all). The collectives the
// samples call (HcclReduce, HcclScatter, HcclBatchSendRecv) and HcclCommInitAll, checked against values computed here.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "hccl/hccl.h"

namespace {

// Runs body(rank) on one thread per rank, each on device `rank`; the texts of the ranks that failed.
std::vector<std::string> run_ranks(uint32_t n, const std::function<std::string(uint32_t)> &body) {
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (uint32_t r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      if (aclrtSetDevice((int32_t)r) != ACL_SUCCESS) {
        errors[r] = "aclrtSetDevice failed";
        return;
      }
      errors[r] = body(r);
      aclrtResetDevice((int32_t)r);
    });
  for (std::thread &t : threads) t.join();
  std::vector<std::string> failed;
  for (uint32_t r = 0; r < n; ++r)
    if (!errors[r].empty()) failed.push_back("rank " + std::to_string(r) + ": " + errors[r]);
  return failed;
}

#define RANK_CHECK(cond)                                                                  \
  do {                                                                                    \
    if (!(cond)) return std::string(#cond) + " failed at line " + std::to_string(__LINE__); \
  } while (0)

template <typename T>
void *to_device(const std::vector<T> &v) {
  void *d = nullptr;
  const size_t bytes = std::max<size_t>(v.size() * sizeof(T), 1);
  if (aclrtMalloc(&d, bytes, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) return nullptr;
  if (!v.empty()) aclrtMemcpy(d, bytes, v.data(), v.size() * sizeof(T), ACL_MEMCPY_HOST_TO_DEVICE);
  return d;
}

template <typename T>
std::vector<T> from_device(void *d, size_t n) {
  std::vector<T> v(n);
  aclrtMemcpy(v.data(), n * sizeof(T), d, n * sizeof(T), ACL_MEMCPY_DEVICE_TO_HOST);
  return v;
}

class HcclThreads : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { aclInit(nullptr); }
  // A root info made on device 0, as the samples make it before starting their threads.
  HcclRootInfo root_info() {
    HcclRootInfo root;
    EXPECT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    EXPECT_EQ(HcclGetRootInfo(&root), HCCL_SUCCESS);
    return root;
  }
};

// hccl examples/02_collectives/01_allreduce and 05_reduce: every rank contributes; AllReduce's sum reaches every rank,
// HcclReduce's maximum only the root (src/ops/reduce/reduce_op.cc).
TEST_F(HcclThreads, AllReduceAndReduceAcrossThreads) {
  constexpr uint32_t n = 4, count = 1000, root = 2;
  HcclRootInfo info = root_info();
  auto failed = run_ranks(n, [&](uint32_t r) -> std::string {
    HcclComm comm = nullptr;
    RANK_CHECK(HcclCommInitRootInfo(n, &info, r, &comm) == HCCL_SUCCESS);
    aclrtStream stream = nullptr;
    RANK_CHECK(aclrtCreateStream(&stream) == ACL_SUCCESS);
    std::vector<float> x(count);
    std::vector<int32_t> k(count);
    for (uint32_t i = 0; i < count; ++i) x[i] = (float)(i * (r + 1)), k[i] = (int32_t)((i * 7 + r * 13) % 101);
    void *xs = to_device(x), *xr = to_device(std::vector<float>(count, -1));
    void *ks = to_device(k), *kr = to_device(std::vector<int32_t>(count, -1));
    RANK_CHECK(HcclAllReduce(xs, xr, count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, stream) == HCCL_SUCCESS);
    RANK_CHECK(HcclReduce(ks, kr, count, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_MAX, root, comm, stream) == HCCL_SUCCESS);
    RANK_CHECK(aclrtSynchronizeStream(stream) == ACL_SUCCESS);
    std::vector<float> sum = from_device<float>(xr, count);
    std::vector<int32_t> max = from_device<int32_t>(kr, count);
    for (uint32_t i = 0; i < count; ++i) {
      RANK_CHECK(sum[i] == (float)(i * (1 + 2 + 3 + 4)));
      int32_t want = 0;
      for (uint32_t q = 0; q < n; ++q) want = std::max(want, (int32_t)((i * 7 + q * 13) % 101));
      RANK_CHECK(max[i] == (r == root ? want : -1));  // only the root's recvBuf is written
    }
    RANK_CHECK(HcclReduce(ks, kr, count, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_MAX, n, comm, stream) == HCCL_E_PARA);
    RANK_CHECK(HcclReduce(nullptr, kr, count, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, 0, comm, stream) == HCCL_E_PTR);
    RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS);
    aclrtFree(xs), aclrtFree(xr), aclrtFree(ks), aclrtFree(kr);
    aclrtDestroyStream(stream);
    return "";
  });
  EXPECT_TRUE(failed.empty()) << ::testing::PrintToString(failed);
}

// hccl examples/02_collectives/09_scatter, src/ops/scatter/scatter_op.cc: block r of the root's sendBuf reaches rank
// r; only the root's sendBuf is read (the others may pass NULL). Blocks bigger than a staging slot go in chunks.
TEST_F(HcclThreads, ScatterSendsEachRankItsBlock) {
  constexpr uint32_t n = 3, count = 100000, root = 1;
  HcclRootInfo info = root_info();
  auto failed = run_ranks(n, [&](uint32_t r) -> std::string {
    HcclComm comm = nullptr;
    RANK_CHECK(HcclCommInitRootInfo(n, &info, r, &comm) == HCCL_SUCCESS);
    aclrtStream stream = nullptr;
    RANK_CHECK(aclrtCreateStream(&stream) == ACL_SUCCESS);
    std::vector<int64_t> all(n * count);
    std::iota(all.begin(), all.end(), 5);
    void *send = r == root ? to_device(all) : nullptr, *recv = to_device(std::vector<int64_t>(count, 0));
    RANK_CHECK(HcclScatter(send, recv, count, HCCL_DATA_TYPE_INT64, root, comm, stream) == HCCL_SUCCESS);
    RANK_CHECK(aclrtSynchronizeStream(stream) == ACL_SUCCESS);
    std::vector<int64_t> got = from_device<int64_t>(recv, count);
    RANK_CHECK(std::equal(got.begin(), got.end(), all.begin() + r * count));
    if (r == root) RANK_CHECK(HcclScatter(nullptr, recv, count, HCCL_DATA_TYPE_INT64, root, comm, stream) == HCCL_E_PTR);
    RANK_CHECK(HcclScatter(send, recv, 0, HCCL_DATA_TYPE_INT64, root, comm, stream) == HCCL_SUCCESS);  // nothing to do
    RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS);
    aclrtFree(send), aclrtFree(recv);
    aclrtDestroyStream(stream);
    return "";
  });
  EXPECT_TRUE(failed.empty()) << ::testing::PrintToString(failed);
}

// hccl examples/01_point_to_point/02_batch_send_recv_ring: every rank sends to the next and receives from the previous
// in one HcclBatchSendRecv, which runs its transfers at once (issued one after the other they would deadlock: every
// send waits for its receiver). Two transfers to one peer in one direction keep their order.
TEST_F(HcclThreads, BatchSendRecvRing) {
  constexpr uint32_t n = 4, count = 3000;
  HcclRootInfo info = root_info();
  auto failed = run_ranks(n, [&](uint32_t r) -> std::string {
    HcclComm comm = nullptr;
    RANK_CHECK(HcclCommInitRootInfo(n, &info, r, &comm) == HCCL_SUCCESS);
    aclrtStream stream = nullptr;
    RANK_CHECK(aclrtCreateStream(&stream) == ACL_SUCCESS);
    const uint32_t next = (r + 1) % n, prev = (r + n - 1) % n;
    void *a = to_device(std::vector<float>(count, (float)r)), *b = to_device(std::vector<float>(count, 100.0f + r));
    void *from_a = to_device(std::vector<float>(count, -1)), *from_b = to_device(std::vector<float>(count, -1));
    HcclSendRecvItem items[4] = {{HCCL_RECV, from_a, count, HCCL_DATA_TYPE_FP32, prev},
                                 {HCCL_SEND, a, count, HCCL_DATA_TYPE_FP32, next},
                                 {HCCL_SEND, b, count, HCCL_DATA_TYPE_FP32, next},
                                 {HCCL_RECV, from_b, count, HCCL_DATA_TYPE_FP32, prev}};
    RANK_CHECK(HcclBatchSendRecv(items, 4, comm, stream) == HCCL_SUCCESS);
    RANK_CHECK(aclrtSynchronizeStream(stream) == ACL_SUCCESS);
    RANK_CHECK(from_device<float>(from_a, count) == std::vector<float>(count, (float)prev));
    RANK_CHECK(from_device<float>(from_b, count) == std::vector<float>(count, 100.0f + prev));
    HcclSendRecvItem self{HCCL_SEND, a, count, HCCL_DATA_TYPE_FP32, r};
    RANK_CHECK(HcclBatchSendRecv(&self, 1, comm, stream) == HCCL_E_PARA);  // to itself
    RANK_CHECK(HcclBatchSendRecv(nullptr, 0, comm, stream) == HCCL_SUCCESS);
    RANK_CHECK(HcclBatchSendRecv(nullptr, 1, comm, stream) == HCCL_E_PTR);
    RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS);
    aclrtFree(a), aclrtFree(b), aclrtFree(from_a), aclrtFree(from_b);
    aclrtDestroyStream(stream);
    return "";
  });
  EXPECT_TRUE(failed.empty()) << ::testing::PrintToString(failed);
}

// hcomm HcclCommInitAll: one call makes a communicator per device of the list, rank i on devices[i]; a device listed
// twice is HCCL_E_PARA, NULL lists HCCL_E_PTR. The communicators then run collectives from one thread per device.
TEST_F(HcclThreads, CommInitAllMakesOneCommunicatorPerDevice) {
  ASSERT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
  int32_t devices[4] = {3, 1, 0, 2};
  HcclComm comms[4] = {};
  ASSERT_EQ(HcclCommInitAll(4, devices, comms), HCCL_SUCCESS);
  for (uint32_t i = 0; i < 4; ++i) {
    uint32_t rank = 99, size = 0;
    ASSERT_EQ(HcclGetRankId(comms[i], &rank), HCCL_SUCCESS);
    ASSERT_EQ(HcclGetRankSize(comms[i], &size), HCCL_SUCCESS);
    EXPECT_EQ(rank, i);
    EXPECT_EQ(size, 4u);
  }
  std::vector<std::string> errors(4);
  std::vector<std::thread> threads;
  for (uint32_t i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      errors[i] = [&]() -> std::string {
        RANK_CHECK(aclrtSetDevice(devices[i]) == ACL_SUCCESS);
        aclrtStream stream = nullptr;
        RANK_CHECK(aclrtCreateStream(&stream) == ACL_SUCCESS);
        void *send = to_device(std::vector<int32_t>{(int32_t)i * 10, devices[i]});
        void *recv = to_device(std::vector<int32_t>(8, -1));
        RANK_CHECK(HcclAllGather(send, recv, 2, HCCL_DATA_TYPE_INT32, comms[i], stream) == HCCL_SUCCESS);
        RANK_CHECK(aclrtSynchronizeStream(stream) == ACL_SUCCESS);
        RANK_CHECK(from_device<int32_t>(recv, 8) == (std::vector<int32_t>{0, 3, 10, 1, 20, 0, 30, 2}));
        aclrtFree(send), aclrtFree(recv);
        aclrtDestroyStream(stream);
        return "";
      }();
    });
  for (std::thread &t : threads) t.join();
  for (uint32_t i = 0; i < 4; ++i) EXPECT_EQ(errors[i], "") << "rank " << i;
  for (HcclComm c : comms) EXPECT_EQ(HcclCommDestroy(c), HCCL_SUCCESS);
  int32_t twice[2] = {1, 1};
  EXPECT_EQ(HcclCommInitAll(2, twice, comms), HCCL_E_PARA);
  EXPECT_EQ(HcclCommInitAll(0, devices, comms), HCCL_E_PARA);
  EXPECT_EQ(HcclCommInitAll(2, nullptr, comms), HCCL_E_PTR);
}

// hcomm include/hccl/hccl_types.h: HIF8, FP8 E4M3 / E5M2 / E8M0 are data types 14-17 (one byte); the stand-in moves
// them (Broadcast keeps every bit) and refuses to reduce them (HCCL_E_NOT_SUPPORT). The new results and the version-10
// configuration.
TEST_F(HcclThreads, EightBitFloatTypesAreMovedNotReduced) {
  EXPECT_EQ((int)HCCL_DATA_TYPE_HIF8, 14);
  EXPECT_EQ((int)HCCL_DATA_TYPE_FP8E4M3, 15);
  EXPECT_EQ((int)HCCL_DATA_TYPE_FP8E5M2, 16);
  EXPECT_EQ((int)HCCL_DATA_TYPE_FP8E8M0, 17);
  EXPECT_EQ((int)HCCL_E_OPRETRY_FAIL, 23);
  EXPECT_EQ((int)HCCL_E_OOM, 24);
  EXPECT_EQ((int)HCCL_E_IN_STATUS, 1041);
  EXPECT_EQ((int)HCCL_E_RESERVED, 1042);
  EXPECT_STREQ(HcclGetErrorString(HCCL_E_OOM), "out of memory");
  EXPECT_EQ(sizeof(HcclCommConfig), 2240u);
  HcclCommConfig config;
  HcclCommConfigInit(&config);
  uint32_t version = 0;
  std::memcpy(&version, config.reserved + sizeof(size_t) + sizeof(uint32_t), sizeof version);
  EXPECT_EQ(version, 10u);
  constexpr uint32_t n = 2, count = 256;
  HcclRootInfo info = root_info();
  auto failed = run_ranks(n, [&](uint32_t r) -> std::string {
    HcclComm comm = nullptr;
    RANK_CHECK(HcclCommInitRootInfo(n, &info, r, &comm) == HCCL_SUCCESS);
    aclrtStream stream = nullptr;
    RANK_CHECK(aclrtCreateStream(&stream) == ACL_SUCCESS);
    std::vector<uint8_t> bits(count);
    std::iota(bits.begin(), bits.end(), 0);  // every byte value, NaN and infinity encodings included
    void *buf = to_device(r == 0 ? bits : std::vector<uint8_t>(count, 0));
    for (HcclDataType t : {HCCL_DATA_TYPE_HIF8, HCCL_DATA_TYPE_FP8E4M3, HCCL_DATA_TYPE_FP8E5M2, HCCL_DATA_TYPE_FP8E8M0}) {
      RANK_CHECK(HcclBroadcast(buf, count, t, 0, comm, stream) == HCCL_SUCCESS);
      RANK_CHECK(HcclAllReduce(buf, buf, count, t, HCCL_REDUCE_SUM, comm, stream) == HCCL_E_NOT_SUPPORT);
    }
    RANK_CHECK(aclrtSynchronizeStream(stream) == ACL_SUCCESS);
    RANK_CHECK(from_device<uint8_t>(buf, count) == bits);
    RANK_CHECK(HcclCommDestroy(comm) == HCCL_SUCCESS);
    aclrtFree(buf);
    aclrtDestroyStream(stream);
    return "";
  });
  EXPECT_TRUE(failed.empty()) << ::testing::PrintToString(failed);
}

}  // namespace
