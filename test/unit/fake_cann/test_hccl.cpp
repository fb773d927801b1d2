// libhccl across processes. Every test forks one child per rank; the children do all ACL work (stream
// worker threads do not survive fork) and report through their exit code, printing what failed.
// Rank 0 makes the root info after aclrtSetDevice (as real HCCL requires) and hands it to the other
// ranks through memory the parent mapped MAP_SHARED before forking.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "../time_scale.h"
#include "acl/acl.h"
#include "hccl/hccl.h"
#include "half_ref.h"


namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

int g_rank = -1;  // in a child: its rank

#define CHECK(cond)                                                                                   \
  do {                                                                                                \
    if (!(cond)) {                                                                                    \
      std::fprintf(stderr, "[rank %d] %s:%d: check failed: %s\n", g_rank, __FILE__, __LINE__, #cond); \
      return 1;                                                                                       \
    }                                                                                                 \
  } while (0)

#define CHECK_EQ(a, b)                                                                                                \
  do {                                                                                                                \
    long long va_ = (long long)(a), vb_ = (long long)(b);                                                             \
    if (va_ != vb_) {                                                                                                 \
      std::fprintf(stderr, "[rank %d] %s:%d: %s == %lld, expected %s == %lld\n", g_rank, __FILE__, __LINE__, #a, va_, \
                   #b, vb_);                                                                                          \
      return 1;                                                                                                       \
    }                                                                                                                 \
  } while (0)

#define CHECK_OK(expr)                \
  do {                                \
    if (int rc_ = (expr)) return rc_; \
  } while (0)

// Memory shared by the parent and its rank children.
struct Shared {
  std::atomic<int> ready[4];
  HcclRootInfo roots[4];
};
Shared *g_shared = [] {
  void *p = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : new (p) Shared;
}();

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("signal ") + strsignal(WTERMSIG(status));
  return "status " + std::to_string(status);
}

// Runs body(rank) in n child processes; "" when every child returned 0, else what went wrong.
std::string run_ranks(int n, const std::function<int(int)> &body, std::chrono::seconds timeout = 30s) {
  for (int i = 0; i < 4; ++i) g_shared->ready[i].store(0);
  std::memset(g_shared->roots, 0, sizeof(g_shared->roots));
  std::fflush(nullptr);
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      g_rank = r;
      int rc = 1;
      try {
        rc = body(r);
      } catch (const std::exception &e) {
        std::fprintf(stderr, "[rank %d] exception: %s\n", r, e.what());
      }
      std::fflush(nullptr);
      _exit(rc);
    }
    pids.push_back(pid);
  }
  std::string problems;
  std::vector<bool> done(n, false);
  auto deadline = Clock::now() + msprobe::test::scaled(timeout);
  for (int left = n; left > 0;) {
    for (int r = 0; r < n; ++r) {
      int status = 0;
      if (done[r] || waitpid(pids[r], &status, WNOHANG) != pids[r]) continue;
      done[r] = true;
      --left;
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        problems += "rank " + std::to_string(r) + ": " + describe_status(status) + "; ";
    }
    if (left > 0 && Clock::now() > deadline) {
      for (int r = 0; r < n; ++r) {
        if (done[r]) continue;
        kill(pids[r], SIGKILL);
        waitpid(pids[r], nullptr, 0);
        problems += "rank " + std::to_string(r) + ": hung (killed); ";
      }
      break;
    }
    std::this_thread::sleep_for(2ms);
  }
  return problems;
}

// The rendezvous id inside a root info (format of the stand-in: "fakehccl-rootinfo-v1:<id>").
std::string root_id(const HcclRootInfo &root) {
  const char *colon = std::strchr(root.internal, ':');
  return colon ? std::string(colon + 1) : std::string();
}

// Entries of /dev/shm whose name contains `needle`.
std::vector<std::string> shm_entries_with(const std::string &needle) {
  std::vector<std::string> out;
  if (needle.empty()) return out;
  DIR *d = opendir("/dev/shm");
  if (d == nullptr) return out;
  while (dirent *e = readdir(d))
    if (std::strstr(e->d_name, needle.c_str()) != nullptr) out.push_back(e->d_name);
  closedir(d);
  return out;
}

// ---- in the children -------------------------------------------------------------------------------

int setup(int rank, aclrtStream *stream) {
  CHECK_EQ(aclInit(nullptr), ACL_SUCCESS);
  CHECK_EQ(aclrtSetDevice(rank), ACL_SUCCESS);
  CHECK_EQ(aclrtCreateStream(stream), ACL_SUCCESS);
  return 0;
}

// Rank 0 makes root info number `slot`; the others wait for it.
int share_root(int rank, int slot, HcclRootInfo *out) {
  if (rank == 0) {
    CHECK_EQ(HcclGetRootInfo(&g_shared->roots[slot]), HCCL_SUCCESS);
    g_shared->ready[slot].store(1, std::memory_order_release);
  } else {
    auto deadline = Clock::now() + msprobe::test::scaled(20s);
    while (g_shared->ready[slot].load(std::memory_order_acquire) == 0) {
      CHECK(Clock::now() < deadline);
      std::this_thread::sleep_for(1ms);
    }
  }
  *out = g_shared->roots[slot];
  return 0;
}

int init_comm(int n, int rank, int slot, HcclComm *comm) {
  HcclRootInfo root;
  CHECK_OK(share_root(rank, slot, &root));
  CHECK_EQ(HcclCommInitRootInfo(n, &root, rank, comm), HCCL_SUCCESS);
  uint32_t v = 99;
  CHECK_EQ(HcclGetRankSize(*comm, &v), HCCL_SUCCESS);
  CHECK_EQ(v, n);
  CHECK_EQ(HcclGetRankId(*comm, &v), HCCL_SUCCESS);
  CHECK_EQ(v, rank);
  return 0;
}

template <typename T>
void *to_device(const std::vector<T> &host) {
  void *d = nullptr;
  size_t bytes = std::max<size_t>(host.size() * sizeof(T), 1);
  if (aclrtMalloc(&d, bytes, ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) return nullptr;
  if (!host.empty()) aclrtMemcpy(d, bytes, host.data(), host.size() * sizeof(T), ACL_MEMCPY_HOST_TO_DEVICE);
  return d;
}

template <typename T>
std::vector<T> from_device(const void *d, size_t n) {
  std::vector<T> host(n);
  if (aclrtMemcpy(host.data(), n * sizeof(T), d, n * sizeof(T), ACL_MEMCPY_DEVICE_TO_HOST) != ACL_SUCCESS)
    std::fprintf(stderr, "[rank %d] copy back failed\n", g_rank);
  return host;
}

template <typename T>
double as_double(T v) {
  return (double)v;
}

// Bit-exact comparison (the reduction order is fixed, so every rank must produce these exact bits).
template <typename T>
int expect_bits(const std::vector<T> &got, const std::vector<T> &want, const char *what) {
  CHECK_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) {
      std::fprintf(stderr, "[rank %d] %s: element %zu is %.9g, expected %.9g\n", g_rank, what, i, as_double(got[i]),
                   as_double(want[i]));
      return 1;
    }
  }
  return 0;
}

// bf16 as raw bits, with a reference rounding written independently of the stand-in's (double math).
struct Bf16 {
  uint16_t bits;
};
double bf16_value(Bf16 b) {
  uint32_t u = (uint32_t)b.bits << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
Bf16 bf16_round(double x) {  // nearest even at 8 significant bits (normal range only)
  double r = x == 0 ? 0.0 : std::nearbyint(std::ldexp(x, 7 - std::ilogb(x))) * std::ldexp(1.0, std::ilogb(x) - 7);
  float f = (float)r;  // exact: r has 8 significant bits
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return Bf16{(uint16_t)(u >> 16)};
}
template <>
double as_double(Bf16 v) {
  return bf16_value(v);
}

// A value on a 1/256 grid in [-8, 8]: sums of three stay exact in float, so a reference rounds once.
double grid(int rank, size_t i) {
  return (double)((int)((i * 2654435761u + (unsigned)rank * 40503u) % 4097) - 2048) / 256.0;
}

// Every rank contributes gen(rank, i); element i must equal ref({gen(0,i), ..., gen(n-1,i)}).
template <typename T>
int check_allreduce(HcclComm comm, aclrtStream s, int rank, int n, HcclDataType dt, HcclReduceOp op, size_t count,
                    const std::function<T(int, size_t)> &gen, const std::function<T(const std::vector<T> &)> &ref,
                    const char *what, bool in_place = false) {
  std::vector<T> mine(count), want(count), across(n);
  for (size_t i = 0; i < count; ++i) {
    mine[i] = gen(rank, i);
    for (int r = 0; r < n; ++r) across[r] = gen(r, i);
    want[i] = ref(across);
  }
  void *send = to_device(mine);
  void *recv = in_place ? send : to_device(std::vector<T>(count));
  CHECK(send != nullptr && recv != nullptr);
  CHECK_EQ(HcclAllReduce(send, recv, count, dt, op, comm, s), HCCL_SUCCESS);
  CHECK_EQ(aclrtSynchronizeStream(s), ACL_SUCCESS);
  CHECK_OK(expect_bits(from_device<T>(recv, count), want, what));
  aclrtFree(send);
  if (!in_place) aclrtFree(recv);
  return 0;
}

template <typename T>
T ref_sum_float(const std::vector<T> &v) {
  double a = 0;
  for (T x : v) a += (double)x;
  return (T)a;
}
template <typename T>
T ref_max(const std::vector<T> &v) {
  return *std::max_element(v.begin(), v.end());
}
template <typename T>
T ref_min(const std::vector<T> &v) {
  return *std::min_element(v.begin(), v.end());
}
template <typename T, typename U>
T ref_sum_wrap(const std::vector<T> &v) {  // two's complement wrap at T's width
  U a = 0;
  for (T x : v) a = (U)(a + (U)x);
  return (T)a;
}
Bf16 ref_sum_bf16(const std::vector<Bf16> &v) {
  double a = 0;
  for (Bf16 x : v) a += bf16_value(x);
  return bf16_round(a);
}
Bf16 ref_max_bf16(const std::vector<Bf16> &v) {
  Bf16 best = v[0];
  for (Bf16 x : v)
    if (bf16_value(x) > bf16_value(best)) best = x;
  return best;
}

// AllReduce sum and max in the types the shim cares most about, plus in-place and min/prod.
int allreduce_suite(HcclComm comm, aclrtStream s, int rank, int n, size_t count) {
  std::function<float(int, size_t)> f32 = [](int r, size_t i) {
    return (float)(std::sin(0.37 * (double)i + r) * 100.0 + r * 0.001);
  };
  CHECK_OK(check_allreduce<float>(comm, s, rank, n, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, count, f32,
                                  ref_sum_float<float>, "fp32 sum"));
  CHECK_OK(check_allreduce<float>(comm, s, rank, n, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_MAX, count, f32, ref_max<float>,
                                  "fp32 max"));
  CHECK_OK(check_allreduce<float>(comm, s, rank, n, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_MIN, count, f32, ref_min<float>,
                                  "fp32 min"));
  CHECK_OK(check_allreduce<float>(comm, s, rank, n, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, count, f32,
                                  ref_sum_float<float>, "fp32 sum in place", true));
  std::function<float(int, size_t)> small = [](int r, size_t i) { return (float)(((i + r) % 5) * 0.5 - 1.0); };
  std::function<float(const std::vector<float> &)> prod = [](const std::vector<float> &v) {
    double a = 1;
    for (float x : v) a *= x;
    return (float)a;
  };
  CHECK_OK(
      check_allreduce<float>(comm, s, rank, n, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_PROD, count, small, prod, "fp32 prod"));

  std::function<_Float16(int, size_t)> f16 = [](int r, size_t i) { return (_Float16)grid(r, i); };
  std::function<_Float16(const std::vector<_Float16> &)> f16_sum = [](const std::vector<_Float16> &v) {
    double a = 0;
    for (_Float16 x : v) a += (double)x;
    return (_Float16)a;  // the compiler's own rounding as the reference
  };
  CHECK_OK(check_allreduce<_Float16>(comm, s, rank, n, HCCL_DATA_TYPE_FP16, HCCL_REDUCE_SUM, count, f16, f16_sum,
                                     "fp16 sum"));
  CHECK_OK(check_allreduce<_Float16>(comm, s, rank, n, HCCL_DATA_TYPE_FP16, HCCL_REDUCE_MAX, count, f16,
                                     ref_max<_Float16>, "fp16 max"));

  std::function<Bf16(int, size_t)> bf = [](int r, size_t i) { return bf16_round(grid(r, i)); };
  CHECK_OK(check_allreduce<Bf16>(comm, s, rank, n, HCCL_DATA_TYPE_BFP16, HCCL_REDUCE_SUM, count, bf, ref_sum_bf16,
                                 "bf16 sum"));
  CHECK_OK(check_allreduce<Bf16>(comm, s, rank, n, HCCL_DATA_TYPE_BFP16, HCCL_REDUCE_MAX, count, bf, ref_max_bf16,
                                 "bf16 max"));

  std::function<int32_t(int, size_t)> i32 = [](int r, size_t i) {
    return i % 7 == 0 ? (int32_t)(2147483647 - r) : (int32_t)((i * 7919 + r * 104729) % 2000001) - 1000000;
  };
  CHECK_OK(check_allreduce<int32_t>(comm, s, rank, n, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, count, i32,
                                    ref_sum_wrap<int32_t, uint32_t>, "int32 sum (wraps)"));
  CHECK_OK(check_allreduce<int32_t>(comm, s, rank, n, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_MAX, count, i32,
                                    ref_max<int32_t>, "int32 max"));
  return 0;
}

// ---- tests -----------------------------------------------------------------------------------------

TEST(Hccl, ErrorStrings) {
  EXPECT_STREQ(HcclGetErrorString(HCCL_SUCCESS), "no error");
  EXPECT_STREQ(HcclGetErrorString(HCCL_E_PARA), "parameter error");
  EXPECT_STREQ(HcclGetErrorString(HCCL_E_PTR), "empty pointer");
  EXPECT_STREQ(HcclGetErrorString(HCCL_E_TIMEOUT), "timeout");
  EXPECT_STREQ(HcclGetErrorString(HCCL_E_REMOTE), "error cqe");
  EXPECT_STREQ(HcclGetErrorString((HcclResult)99), "unknow error");
}

TEST(Hccl, ArgumentErrorsAndSingleRank) {
  ASSERT_NE(g_shared, nullptr);
  auto body = [](int rank) {
    HcclRootInfo root{};
    HcclComm comm = nullptr;
    // Real HCCL asks the runtime for the current device before anything else.
    CHECK_EQ(HcclGetRootInfo(&root), HCCL_E_RUNTIME);
    CHECK_EQ(HcclCommInitRootInfo(1, &root, 0, &comm), HCCL_E_RUNTIME);
    aclrtStream s = nullptr;
    CHECK_OK(setup(rank, &s));
    CHECK_EQ(HcclGetRootInfo(nullptr), HCCL_E_PTR);
    CHECK_EQ(HcclCommInitRootInfo(1, nullptr, 0, &comm), HCCL_E_PTR);
    CHECK_EQ(HcclCommInitRootInfo(1, &root, 0, &comm), HCCL_E_PARA);  // zeroed: not from HcclGetRootInfo
    CHECK_EQ(HcclGetRootInfo(&root), HCCL_SUCCESS);
    CHECK_EQ(HcclCommInitRootInfo(1, &root, 0, nullptr), HCCL_E_PTR);
    CHECK_EQ(HcclCommInitRootInfo(0, &root, 0, &comm), HCCL_E_PARA);
    CHECK_EQ(HcclCommInitRootInfo(2, &root, 2, &comm), HCCL_E_PARA);
    CHECK_EQ(HcclCommInitRootInfo(1, &root, 0, &comm), HCCL_SUCCESS);
    CHECK(shm_entries_with(root_id(root)).empty());  // the rendezvous name is gone once all joined

    uint32_t v = 0;
    CHECK_EQ(HcclGetRankSize(nullptr, &v), HCCL_E_PTR);
    CHECK_EQ(HcclGetRankId(comm, nullptr), HCCL_E_PTR);
    int not_a_comm = 0;
    CHECK_EQ(HcclGetRankSize(&not_a_comm, &v), HCCL_E_PARA);

    std::vector<float> host = {1.5f, -2.0f, 3.25f, 4.0f};
    void *a = to_device(host), *b = to_device(std::vector<float>(4));
    CHECK_EQ(HcclAllReduce(nullptr, b, 4, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, s), HCCL_E_PTR);
    CHECK_EQ(HcclAllReduce(a, nullptr, 4, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, s), HCCL_E_PTR);
    CHECK_EQ(HcclAllReduce(a, b, 4, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, nullptr, s), HCCL_E_PTR);
    CHECK_EQ(HcclAllReduce(a, b, 4, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, nullptr), HCCL_E_PTR);
    CHECK_EQ(HcclAllReduce(a, b, 4, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, &not_a_comm, s), HCCL_E_PARA);
    CHECK_EQ(HcclAllReduce(a, b, 4, HCCL_DATA_TYPE_INT128, HCCL_REDUCE_SUM, comm, s), HCCL_E_NOT_SUPPORT);
    CHECK_EQ(HcclAllReduce(a, b, 4, (HcclDataType)42, HCCL_REDUCE_SUM, comm, s), HCCL_E_PARA);
    CHECK_EQ(HcclAllReduce(a, b, 4, HCCL_DATA_TYPE_FP32, (HcclReduceOp)4, comm, s), HCCL_E_PARA);
    CHECK_EQ(HcclAllReduce(a, b, 4, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_RESERVED, comm, s), HCCL_E_PARA);
    CHECK_EQ(HcclBroadcast(a, 4, HCCL_DATA_TYPE_FP32, 1, comm, s), HCCL_E_PARA);
    CHECK_EQ(HcclBroadcast(nullptr, 4, HCCL_DATA_TYPE_FP32, 0, comm, s), HCCL_E_PTR);
    CHECK_EQ(HcclAllGather(a, nullptr, 4, HCCL_DATA_TYPE_FP32, comm, s), HCCL_E_PTR);
    CHECK_EQ(HcclReduceScatter(a, b, 4, HCCL_DATA_TYPE_FP32, (HcclReduceOp)9, comm, s), HCCL_E_PARA);
    CHECK_EQ(HcclBarrier(nullptr, s), HCCL_E_PTR);
    CHECK_EQ(HcclBarrier(comm, nullptr), HCCL_E_PTR);
    CHECK_EQ(HcclAllReduce(a, b, 0, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, s), HCCL_SUCCESS);  // nothing to do

    // One rank: every collective is a copy.
    CHECK_EQ(HcclAllReduce(a, b, 4, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, s), HCCL_SUCCESS);
    CHECK_EQ(HcclBarrier(comm, s), HCCL_SUCCESS);
    CHECK_EQ(aclrtSynchronizeStream(s), ACL_SUCCESS);
    CHECK_OK(expect_bits(from_device<float>(b, 4), host, "single-rank AllReduce"));

    // A host pointer is not device memory: the collective fails on the device, reported at sync,
    // and leaves the communicator unusable.
    std::vector<float> on_host(4);
    CHECK_EQ(HcclAllReduce(on_host.data(), b, 4, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, s), HCCL_SUCCESS);
    CHECK_EQ(aclrtSynchronizeStream(s), ACL_ERROR_RT_AICORE_EXCEPTION);
    CHECK_EQ(HcclAllReduce(a, b, 4, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, s), HCCL_SUCCESS);
    CHECK(aclrtSynchronizeStream(s) != ACL_SUCCESS);

    CHECK_EQ(HcclCommDestroy(nullptr), HCCL_E_PTR);
    CHECK_EQ(HcclCommDestroy(comm), HCCL_SUCCESS);
    CHECK_EQ(HcclCommDestroy(comm), HCCL_E_PARA);
    CHECK_EQ(HcclAllReduce(a, b, 4, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, s), HCCL_E_PARA);
    return 0;
  };
  EXPECT_EQ(run_ranks(1, body), "");
}

TEST(Hccl, AllReduceTwoRanks) {
  auto body = [](int rank) {
    aclrtStream s = nullptr;
    HcclComm comm = nullptr;
    CHECK_OK(setup(rank, &s));
    CHECK_OK(init_comm(2, rank, 0, &comm));
    CHECK_OK(allreduce_suite(comm, s, rank, 2, 1000));
    CHECK_EQ(HcclCommDestroy(comm), HCCL_SUCCESS);
    return 0;
  };
  EXPECT_EQ(run_ranks(2, body), "");
  EXPECT_TRUE(shm_entries_with(root_id(g_shared->roots[0])).empty());
}

// Three ranks, staging slots of 256 bytes so that every collective runs in many chunks, two
// communicators used alternately on one stream, and the other collectives.
TEST(Hccl, CollectivesThreeRanksChunked) {
  auto body = [](int rank) {
    setenv("FAKE_HCCL_SLOT_BYTES", "256", 1);
    const int n = 3;
    aclrtStream s = nullptr;
    HcclComm a = nullptr, b = nullptr;
    CHECK_OK(setup(rank, &s));
    CHECK_OK(init_comm(n, rank, 0, &a));
    CHECK_OK(init_comm(n, rank, 1, &b));
    CHECK_OK(allreduce_suite(a, s, rank, n, 301));

    std::function<int64_t(int, size_t)> i64 = [](int r, size_t i) {
      return i % 3 == 0 ? (int64_t)(9223372036854775807LL - r) : (int64_t)(i * 1000003) * (r + 1) - 5;
    };
    CHECK_OK(check_allreduce<int64_t>(b, s, rank, n, HCCL_DATA_TYPE_INT64, HCCL_REDUCE_SUM, 200, i64,
                                      ref_sum_wrap<int64_t, uint64_t>, "int64 sum (wraps)"));
    std::function<double(int, size_t)> f64 = [](int r, size_t i) { return 1.0 + 0.125 * (double)((i + r) % 9); };
    std::function<double(const std::vector<double> &)> prod = [](const std::vector<double> &v) {
      double p = 1;
      for (double x : v) p *= x;
      return p;
    };
    CHECK_OK(
        check_allreduce<double>(a, s, rank, n, HCCL_DATA_TYPE_FP64, HCCL_REDUCE_PROD, 100, f64, prod, "fp64 prod"));
    std::function<uint8_t(int, size_t)> u8 = [](int r, size_t i) { return (uint8_t)((i * 37 + r * 101) % 256); };
    CHECK_OK(check_allreduce<uint8_t>(b, s, rank, n, HCCL_DATA_TYPE_UINT8, HCCL_REDUCE_MAX, 777, u8, ref_max<uint8_t>,
                                      "uint8 max"));
    CHECK_OK(check_allreduce<uint8_t>(a, s, rank, n, HCCL_DATA_TYPE_UINT8, HCCL_REDUCE_SUM, 777, u8,
                                      ref_sum_wrap<uint8_t, uint8_t>, "uint8 sum (wraps)"));
    std::function<int8_t(int, size_t)> i8 = [](int r, size_t i) { return (int8_t)(i % 2 ? 127 - r : -(int)(i % 100)); };
    CHECK_OK(check_allreduce<int8_t>(b, s, rank, n, HCCL_DATA_TYPE_INT8, HCCL_REDUCE_SUM, 500, i8,
                                     ref_sum_wrap<int8_t, uint8_t>, "int8 sum (wraps)"));
    CHECK_OK(check_allreduce<int8_t>(a, s, rank, n, HCCL_DATA_TYPE_INT8, HCCL_REDUCE_MIN, 500, i8, ref_min<int8_t>,
                                     "int8 min"));

    // Broadcast from rank 1, on both communicators.
    const size_t bc = 1000;
    std::vector<float> mine(bc), from_root(bc);
    for (size_t i = 0; i < bc; ++i) {
      mine[i] = (float)(rank * 1000 + (int)i);
      from_root[i] = (float)(1 * 1000 + (int)i);
    }
    void *buf = to_device(mine);
    CHECK_EQ(HcclBroadcast(buf, bc, HCCL_DATA_TYPE_FP32, 1, a, s), HCCL_SUCCESS);
    std::vector<int8_t> mine8(bc), root8(bc);
    for (size_t i = 0; i < bc; ++i) {
      mine8[i] = (int8_t)(rank * 50 + (int)(i % 40));
      root8[i] = (int8_t)(2 * 50 + (int)(i % 40));
    }
    void *buf8 = to_device(mine8);
    CHECK_EQ(HcclBroadcast(buf8, bc, HCCL_DATA_TYPE_INT8, 2, b, s), HCCL_SUCCESS);
    CHECK_EQ(aclrtSynchronizeStream(s), ACL_SUCCESS);
    CHECK_OK(expect_bits(from_device<float>(buf, bc), from_root, "broadcast fp32 from rank 1"));
    CHECK_OK(expect_bits(from_device<int8_t>(buf8, bc), root8, "broadcast int8 from rank 2"));

    // AllGather: rank q's block lands at q * sendCount; fp16 bits move untouched (NaN included).
    const size_t sc = 333;
    auto gval = [](int r, size_t i) { return (_Float16)(i == 5 ? NAN : (double)r + (double)i / 512.0); };
    std::vector<_Float16> gsend(sc), gwant(sc * n);
    for (size_t i = 0; i < sc; ++i) gsend[i] = gval(rank, i);
    for (int q = 0; q < n; ++q)
      for (size_t i = 0; i < sc; ++i) gwant[q * sc + i] = gval(q, i);
    void *gs = to_device(gsend), *gr = to_device(std::vector<_Float16>(sc * n));
    CHECK_EQ(HcclAllGather(gs, gr, sc, HCCL_DATA_TYPE_FP16, b, s), HCCL_SUCCESS);

    // ReduceScatter: rank r gets the sum over ranks of block r.
    const size_t rc = 257;
    auto rval = [](int q, size_t j) { return (float)((double)((j * 31 + q * 7) % 1000) / 8.0 - 60.0); };
    std::vector<float> rsend(rc * n), rwant(rc);
    for (size_t j = 0; j < rc * n; ++j) rsend[j] = rval(rank, j);
    for (size_t i = 0; i < rc; ++i) {
      double acc = 0;
      for (int q = 0; q < n; ++q) acc += rval(q, rank * rc + i);
      rwant[i] = (float)acc;
    }
    void *rs = to_device(rsend), *rr = to_device(std::vector<float>(rc));
    CHECK_EQ(HcclReduceScatter(rs, rr, rc, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, a, s), HCCL_SUCCESS);
    // ReduceScatter max in place: recv is the rank's own block of send.
    std::vector<int32_t> isend(rc * n), iwant(rc);
    for (size_t j = 0; j < rc * n; ++j) isend[j] = (int32_t)((j * 2654435761u + rank * 977u) % 100000);
    for (size_t i = 0; i < rc; ++i) {
      int32_t m = INT32_MIN;
      for (int q = 0; q < n; ++q) m = std::max(m, (int32_t)(((rank * rc + i) * 2654435761u + q * 977u) % 100000));
      iwant[i] = m;
    }
    void *is = to_device(isend);
    void *ir = static_cast<char *>(is) + rank * rc * sizeof(int32_t);
    CHECK_EQ(HcclReduceScatter(is, ir, rc, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_MAX, b, s), HCCL_SUCCESS);
    CHECK_EQ(HcclBarrier(a, s), HCCL_SUCCESS);
    CHECK_EQ(aclrtSynchronizeStream(s), ACL_SUCCESS);
    CHECK_OK(expect_bits(from_device<_Float16>(gr, sc * n), gwant, "allgather fp16"));
    CHECK_OK(expect_bits(from_device<float>(rr, rc), rwant, "reducescatter fp32 sum"));
    CHECK_OK(expect_bits(from_device<int32_t>(ir, rc), iwant, "reducescatter int32 max in place"));

    CHECK_EQ(HcclCommDestroy(a), HCCL_SUCCESS);
    CHECK_EQ(HcclCommDestroy(b), HCCL_SUCCESS);
    return 0;
  };
  EXPECT_EQ(run_ranks(3, body), "");
  EXPECT_TRUE(shm_entries_with(root_id(g_shared->roots[0])).empty());
  EXPECT_TRUE(shm_entries_with(root_id(g_shared->roots[1])).empty());
}

// The collective is only enqueued: rank 1 issues it 600 ms (scaled: time_scale.h) late, so rank 0's result cannot exist
// before then, yet its HcclAllReduce returns at once and its buffer still holds the old data.
TEST(Hccl, CollectiveRunsOnTheStream) {
  auto body = [](int rank) {
    aclrtStream s = nullptr;
    HcclComm comm = nullptr;
    CHECK_OK(setup(rank, &s));
    CHECK_OK(init_comm(2, rank, 0, &comm));
    std::vector<int32_t> mine(64, rank + 1), sum(64, 3), zeros(64, 0);
    void *send = to_device(mine), *recv = to_device(zeros);
    if (rank == 1) std::this_thread::sleep_for(msprobe::test::scaled(600ms));
    auto t0 = Clock::now();
    CHECK_EQ(HcclAllReduce(send, recv, 64, HCCL_DATA_TYPE_INT32, HCCL_REDUCE_SUM, comm, s), HCCL_SUCCESS);
    if (rank == 0) {
      CHECK(Clock::now() - t0 < msprobe::test::scaled(300ms));
      CHECK_OK(expect_bits(from_device<int32_t>(recv, 64), zeros, "before synchronize"));
    }
    CHECK_EQ(aclrtSynchronizeStream(s), ACL_SUCCESS);
    if (rank == 0) CHECK(Clock::now() - t0 > msprobe::test::scaled(300ms));
    CHECK_OK(expect_bits(from_device<int32_t>(recv, 64), sum, "after synchronize"));
    CHECK_EQ(HcclCommDestroy(comm), HCCL_SUCCESS);
    return 0;
  };
  EXPECT_EQ(run_ranks(2, body), "");
}

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/hccl_test_XXXXXX";
    path = mkdtemp(tmpl) ? tmpl : "";
  }
  ~TempDir() {
    if (!path.empty()) std::system(("rm -rf '" + path + "'").c_str());
  }
  std::string write(const std::string &name, const std::string &text) const {
    std::string p = path + "/" + name;
    FILE *f = std::fopen(p.c_str(), "w");
    if (f) {
      std::fputs(text.c_str(), f);
      std::fclose(f);
    }
    return p;
  }
};

// The rendezvous name of a rank table, per the stand-in's documented scheme (FNV-1a 64 of the realpath).
std::string cluster_rendezvous(const std::string &path) {
  char *real = realpath(path.c_str(), nullptr);
  std::string p = real ? real : path;
  std::free(real);
  uint64_t h = 14695981039346656037ull;
  for (unsigned char ch : p) h = (h ^ ch) * 1099511628211ull;
  char name[40];
  std::snprintf(name, sizeof(name), "fakehccl-c%016llx", (unsigned long long)h);
  return name;
}

std::string g_table, g_bad_json, g_pending, g_duplicate;

TEST(Hccl, ClusterInfoFromRankTable) {
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  g_table = dir.write("rank_table.json", R"({
    "version": "1.0", "server_count": "1", "status": "completed",
    "server_list": [{"server_id": "127.0.0.1", "device": [
      {"device_id": "0", "device_ip": "192.168.100.101", "rank_id": "0"},
      {"device_id": "1", "device_ip": "192.168.100.102", "rank_id": "1"}]}]})");
  g_bad_json = dir.write("bad.json", R"({"server_list": [{"device": [{"rank_id": "0"}]})");
  g_pending =
      dir.write("pending.json", R"({"status": "initializing", "server_list": [{"device": [{"rank_id": "0"}]}]})");
  g_duplicate = dir.write("dup.json", R"({"server_list": [{"device": [{"rank_id": "0"}, {"rank_id": 0}]}]})");
  auto body = [](int rank) {
    aclrtStream s = nullptr;
    HcclComm comm = nullptr, other = nullptr;
    CHECK_EQ(HcclCommInitClusterInfo(g_table.c_str(), rank, &comm), HCCL_E_RUNTIME);  // no device yet
    CHECK_OK(setup(rank, &s));
    CHECK_EQ(HcclCommInitClusterInfo(nullptr, rank, &comm), HCCL_E_PTR);
    CHECK_EQ(HcclCommInitClusterInfo(g_table.c_str(), rank, nullptr), HCCL_E_PTR);
    CHECK_EQ(HcclCommInitClusterInfo("/nonexistent/rank_table.json", rank, &comm), HCCL_E_INTERNAL);
    CHECK_EQ(HcclCommInitClusterInfo(g_bad_json.c_str(), 0, &comm), HCCL_E_PARA);
    CHECK_EQ(HcclCommInitClusterInfo(g_pending.c_str(), 0, &comm), HCCL_E_PARA);
    CHECK_EQ(HcclCommInitClusterInfo(g_duplicate.c_str(), 0, &comm), HCCL_E_PARA);
    CHECK_EQ(HcclCommInitClusterInfo(g_table.c_str(), 2, &comm), HCCL_E_PARA);
    // Twice in a row (destroyed in between) from the same file: two distinct rendezvous.
    for (int round = 0; round < 2; ++round) {
      CHECK_EQ(HcclCommInitClusterInfo(g_table.c_str(), rank, &comm), HCCL_SUCCESS);
      CHECK_EQ(HcclCommInitClusterInfo(g_table.c_str(), rank, &other), HCCL_E_UNAVAIL);  // one per device
      uint32_t v = 0;
      CHECK_EQ(HcclGetRankSize(comm, &v), HCCL_SUCCESS);
      CHECK_EQ(v, 2);
      CHECK_EQ(HcclGetRankId(comm, &v), HCCL_SUCCESS);
      CHECK_EQ(v, rank);
      std::vector<float> mine(100), want(100);
      for (int i = 0; i < 100; ++i) {
        mine[i] = (float)(rank == 0 ? i : 1000 * round - i * 0.5);
        want[i] = (float)((double)i + (1000 * round - i * 0.5));
      }
      void *d = to_device(mine);
      CHECK_EQ(HcclAllReduce(d, d, 100, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, s), HCCL_SUCCESS);
      CHECK_EQ(aclrtSynchronizeStream(s), ACL_SUCCESS);
      CHECK_OK(expect_bits(from_device<float>(d, 100), want, "AllReduce over a rank-table comm"));
      CHECK(shm_entries_with(cluster_rendezvous(g_table)).empty());
      CHECK_EQ(HcclCommDestroy(comm), HCCL_SUCCESS);
      aclrtFree(d);
    }
    return 0;
  };
  EXPECT_EQ(run_ranks(2, body), "");
  EXPECT_TRUE(shm_entries_with(cluster_rendezvous(g_table)).empty());
}

TEST(Hccl, MissingPeerTimesOutAtInit) {
  auto body = [](int rank) {
    setenv("HCCL_CONNECT_TIMEOUT", "1", 1);
    aclrtStream s = nullptr;
    CHECK_OK(setup(rank, &s));
    HcclRootInfo root;
    CHECK_OK(share_root(rank, 0, &root));
    HcclComm comm = nullptr;
    auto t0 = Clock::now();
    CHECK_EQ(HcclCommInitRootInfo(2, &root, 0, &comm), HCCL_E_TIMEOUT);  // rank 1 never comes
    auto took = Clock::now() - t0;
    CHECK(took > 900ms && took < msprobe::test::scaled(5s));  // HCCL_CONNECT_TIMEOUT=1 ended the wait
    CHECK(std::strstr(aclGetRecentErrMsg(), "HCCL_CONNECT_TIMEOUT") != nullptr);
    return 0;
  };
  EXPECT_EQ(run_ranks(1, body), "");
  EXPECT_TRUE(shm_entries_with(root_id(g_shared->roots[0])).empty());
}

// A rank killed while waiting for its peers cannot clean up; the next rendezvous on the machine removes
// its file (nobody holds a lock in it any more).
TEST(Hccl, KilledRendezvousIsSweptLater) {
  for (int i = 0; i < 4; ++i) g_shared->ready[i].store(0);
  pid_t pid = fork();
  if (pid == 0) {
    g_rank = 0;
    aclrtStream s = nullptr;
    HcclRootInfo root;
    HcclComm comm = nullptr;
    if (setup(0, &s) == 0 && share_root(0, 0, &root) == 0) HcclCommInitRootInfo(2, &root, 0, &comm);  // blocks
    _exit(1);
  }
  auto deadline = Clock::now() + msprobe::test::scaled(10s);
  std::string id;
  while (Clock::now() < deadline) {
    if (g_shared->ready[0].load() != 0) id = root_id(g_shared->roots[0]);
    if (!id.empty() && !shm_entries_with(id).empty()) break;
    std::this_thread::sleep_for(2ms);
  }
  bool was_there = !id.empty() && !shm_entries_with(id).empty();
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  ASSERT_TRUE(was_there);  // (a concurrent test run may sweep it from here on, which is fine)
  auto body = [](int rank) {
    aclrtStream s = nullptr;
    HcclComm comm = nullptr;
    CHECK_OK(setup(rank, &s));
    CHECK_OK(init_comm(1, rank, 1, &comm));
    CHECK_EQ(HcclCommDestroy(comm), HCCL_SUCCESS);
    return 0;
  };
  EXPECT_EQ(run_ranks(1, body), "");
  EXPECT_TRUE(shm_entries_with(id).empty());
}

// A peer that dies after the rendezvous is seen at once (its liveness lock is gone), well before
// HCCL_EXEC_TIMEOUT; the communicator stays unusable afterwards.
TEST(Hccl, DeadPeerFailsTheCollective) {
  auto body = [](int rank) {
    setenv("HCCL_EXEC_TIMEOUT", "60", 1);
    aclrtStream s = nullptr;
    HcclComm comm = nullptr;
    CHECK_OK(setup(rank, &s));
    CHECK_OK(init_comm(2, rank, 0, &comm));
    if (rank == 1) _exit(0);  // dies without HcclCommDestroy
    std::vector<float> v(16, 1.0f);
    void *d = to_device(v);
    auto t0 = Clock::now();
    CHECK_EQ(HcclAllReduce(d, d, 16, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, s), HCCL_SUCCESS);
    CHECK_EQ(aclrtSynchronizeStream(s), ACL_ERROR_RT_AICORE_EXCEPTION);
    CHECK(Clock::now() - t0 < msprobe::test::scaled(10s));
    CHECK(std::strstr(aclGetRecentErrMsg(), "peer rank 1") != nullptr);
    CHECK_EQ(HcclBarrier(comm, s), HCCL_SUCCESS);
    CHECK_EQ(aclrtSynchronizeStream(s), ACL_ERROR_RT_AICORE_EXCEPTION);
    CHECK_EQ(HcclCommDestroy(comm), HCCL_SUCCESS);
    return 0;
  };
  EXPECT_EQ(run_ranks(2, body), "");
}

// A peer that is alive but never issues the collective: HCCL_EXEC_TIMEOUT ends the wait.
TEST(Hccl, SilentPeerTimesOut) {
  auto body = [](int rank) {
    setenv("HCCL_EXEC_TIMEOUT", "1", 1);
    aclrtStream s = nullptr;
    HcclComm comm = nullptr;
    CHECK_OK(setup(rank, &s));
    CHECK_OK(init_comm(2, rank, 0, &comm));
    if (rank == 1) {
      std::this_thread::sleep_for(msprobe::test::scaled(2500ms));  // longer than rank 0's bound below
      CHECK_EQ(HcclCommDestroy(comm), HCCL_SUCCESS);
      return 0;
    }
    std::vector<float> v(16, 1.0f);
    void *d = to_device(v);
    auto t0 = Clock::now();
    CHECK_EQ(HcclAllReduce(d, d, 16, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, s), HCCL_SUCCESS);
    CHECK_EQ(aclrtSynchronizeStream(s), ACL_ERROR_RT_AICORE_EXCEPTION);
    auto took = Clock::now() - t0;
    CHECK(took > 900ms && took < msprobe::test::scaled(2400ms));  // the timeout ended it, not rank 1's destroy
    CHECK(std::strstr(aclGetRecentErrMsg(), "HCCL_EXEC_TIMEOUT") != nullptr);
    CHECK_EQ(HcclCommDestroy(comm), HCCL_SUCCESS);
    return 0;
  };
  EXPECT_EQ(run_ranks(2, body), "");
}

// Ranks that disagree on the collective get an error on both sides instead of a hang or garbage.
TEST(Hccl, MismatchedCollectivesFail) {
  auto body = [](int rank) {
    aclrtStream s = nullptr;
    HcclComm comm = nullptr;
    CHECK_OK(setup(rank, &s));
    CHECK_OK(init_comm(2, rank, 0, &comm));
    std::vector<float> v(32, 1.0f);
    void *d = to_device(v);
    uint64_t count = rank == 0 ? 16 : 32;
    CHECK_EQ(HcclAllReduce(d, d, count, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, s), HCCL_SUCCESS);
    CHECK_EQ(aclrtSynchronizeStream(s), ACL_ERROR_RT_AICORE_EXCEPTION);
    CHECK(std::strstr(aclGetRecentErrMsg(), "different collectives") != nullptr);
    CHECK_EQ(HcclCommDestroy(comm), HCCL_SUCCESS);
    return 0;
  };
  EXPECT_EQ(run_ranks(2, body), "");
}

// ---- Communicator names, sub-communicators, point-to-point (issue 30) ----------------------------------------------

std::string comm_name(HcclComm comm) {
  char name[COMM_NAME_MAX_LENGTH] = {};
  if (HcclGetCommName(comm, name) != HCCL_SUCCESS) return "?";
  return name;
}

// Four ranks on a root-info communicator, split into {0, 2} and {1, 3} (HCCL's default names), one named by its
// config; collectives on a sub-communicator reduce over its members only; HCCL's rules for the arguments.
TEST(Hccl, SubCommunicatorsFromARankList) {
  auto body = [](int rank) {
    aclrtStream s = nullptr;
    HcclComm world = nullptr, sub = nullptr, named = nullptr, nested = nullptr;
    CHECK_OK(setup(rank, &s));
    CHECK_OK(init_comm(4, rank, 0, &world));
    // The communicator's name is the root info's identifier, the same on every member.
    CHECK(comm_name(world) == root_id(g_shared->roots[0]));
    CHECK_EQ(HcclGetCommName(world, nullptr), HCCL_E_PTR);
    HcclCommConfig config;
    HcclCommConfigInit(&config);
    uint32_t evens[] = {0, 2}, odds[] = {1, 3}, all[] = {0, 1, 2, 3};
    uint32_t *mine = rank % 2 == 0 ? evens : odds;
    const uint64_t id = rank % 2 == 0 ? 7 : 8;
    // Argument checks, before anything is created.
    uint32_t unordered[] = {2, 0};
    CHECK_EQ(HcclCreateSubCommConfig(&world, 2, unordered, 9, 0, &config, &sub), HCCL_E_PARA);
    CHECK_EQ(HcclCreateSubCommConfig(&world, 2, mine, 9, 1 - rank / 2, &config, &sub), HCCL_E_PARA);  // not its index
    CHECK_EQ(HcclCreateSubCommConfig(&world, 0, mine, 9, 0, &config, &sub), HCCL_E_PARA);
    CHECK_EQ(HcclCreateSubCommConfig(&world, 5, all, 9, 0, &config, &sub), HCCL_E_PARA);
    CHECK_EQ(HcclCreateSubCommConfig(nullptr, 2, mine, 9, rank / 2, &config, &sub), HCCL_E_PTR);
    CHECK_EQ(HcclCreateSubCommConfig(&world, 2, mine, 9, rank / 2, nullptr, &sub), HCCL_E_PTR);
    HcclCommConfig raw;
    std::memset(&raw, 0, sizeof raw);
    CHECK_EQ(HcclCreateSubCommConfig(&world, 2, mine, 9, rank / 2, &raw, &sub), HCCL_E_PARA);  // not initialized
    // A rank outside a sub-communicator passes no rank list and gets none.
    sub = &config;
    CHECK_EQ(HcclCreateSubCommConfig(&world, 0, nullptr, 0xFFFFFFFF, 0, &config, &sub), HCCL_SUCCESS);
    CHECK(sub == nullptr);
    CHECK_EQ(HcclCreateSubCommConfig(&world, 2, mine, id, rank / 2, &config, &sub), HCCL_SUCCESS);
    CHECK(comm_name(sub) == comm_name(world) + "_sub_" + std::to_string(id));
    uint32_t v = 99;
    CHECK_EQ(HcclGetRankSize(sub, &v), HCCL_SUCCESS);
    CHECK_EQ(v, 2);
    CHECK_EQ(HcclGetRankId(sub, &v), HCCL_SUCCESS);
    CHECK_EQ(v, rank / 2);
    CHECK_EQ(HcclCreateSubCommConfig(&world, 2, mine, id, rank / 2, &config, &nested), HCCL_E_PARA);  // id reused
    CHECK_EQ(HcclCreateSubCommConfig(&sub, 2, evens, 3, 0, &config, &nested), HCCL_E_NOT_SUPPORT);    // no nesting
    // A config's name wins over the default, and every member gets it.
    std::strcpy(config.hcclCommName, "all-four");
    CHECK_EQ(HcclCreateSubCommConfig(&world, 4, all, 1, rank, &config, &named), HCCL_SUCCESS);
    CHECK(comm_name(named) == "all-four");
    // Sums over the members only.
    std::vector<float> x(64, (float)(rank + 1)), want(64, (float)(rank % 2 == 0 ? 1 + 3 : 2 + 4));
    void *d = to_device(x);
    CHECK_EQ(HcclAllReduce(d, d, 64, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, sub, s), HCCL_SUCCESS);
    CHECK_EQ(aclrtSynchronizeStream(s), ACL_SUCCESS);
    CHECK_OK(expect_bits(from_device<float>(d, 64), want, "AllReduce over a sub-communicator"));
    CHECK_EQ(HcclAllReduce(d, d, 64, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, named, s), HCCL_SUCCESS);
    CHECK_EQ(aclrtSynchronizeStream(s), ACL_SUCCESS);
    CHECK_OK(
        expect_bits(from_device<float>(d, 64), std::vector<float>(64, 2 * (4.0f + 6.0f)), "AllReduce over all four"));
    CHECK_EQ(HcclCommDestroy(named), HCCL_SUCCESS);
    CHECK_EQ(HcclCommDestroy(sub), HCCL_SUCCESS);
    CHECK_EQ(HcclCommDestroy(world), HCCL_SUCCESS);
    aclrtFree(d);
    return 0;
  };
  EXPECT_EQ(run_ranks(4, body), "");
  EXPECT_TRUE(shm_entries_with(root_id(g_shared->roots[0])).empty());
}

// A chain 0 -> 1 -> 2 of send / recv in small staging slots (many chunks), each rank adding its part; then the
// argument rules and a count that the two sides disagree on.
TEST(Hccl, SendRecvChain) {
  auto body = [](int rank) {
    setenv("FAKE_HCCL_SLOT_BYTES", "256", 1);
    aclrtStream s = nullptr;
    HcclComm comm = nullptr;
    CHECK_OK(setup(rank, &s));
    CHECK_OK(init_comm(3, rank, 0, &comm));
    const size_t n = 1000;
    std::vector<float> part(n);
    for (size_t i = 0; i < n; ++i) part[i] = (float)(i % 17) + (float)rank * 1000.0f;
    void *d = to_device(part);
    void *got = to_device(std::vector<float>(n, 0.0f));
    for (int round = 0; round < 2; ++round) {  // twice: the pair's segment is joined once and reused
      if (rank > 0) {
        CHECK_EQ(HcclRecv(got, n, HCCL_DATA_TYPE_FP32, rank - 1, comm, s), HCCL_SUCCESS);
        CHECK_EQ(aclrtSynchronizeStream(s), ACL_SUCCESS);
        std::vector<float> want(n);
        for (size_t i = 0; i < n; ++i) want[i] = (float)(i % 17) + (float)(rank - 1) * 1000.0f + (float)round;
        CHECK_OK(expect_bits(from_device<float>(got, n), want, "HcclRecv"));
      }
      if (rank < 2) {
        std::vector<float> mine(n);
        for (size_t i = 0; i < n; ++i) mine[i] = part[i] + (float)round;
        aclrtMemcpy(d, n * 4, mine.data(), n * 4, ACL_MEMCPY_HOST_TO_DEVICE);
        CHECK_EQ(HcclSend(d, n, HCCL_DATA_TYPE_FP32, rank + 1, comm, s), HCCL_SUCCESS);
        CHECK_EQ(aclrtSynchronizeStream(s), ACL_SUCCESS);
      }
    }
    CHECK_EQ(HcclSend(d, n, HCCL_DATA_TYPE_FP32, rank, comm, s), HCCL_E_PARA);  // to itself
    CHECK_EQ(HcclSend(d, n, HCCL_DATA_TYPE_FP32, 3, comm, s), HCCL_E_PARA);     // no such rank
    CHECK_EQ(HcclRecv(nullptr, n, HCCL_DATA_TYPE_FP32, (rank + 1) % 3, comm, s), HCCL_E_PTR);
    CHECK_EQ(HcclSend(d, 0, HCCL_DATA_TYPE_FP32, (rank + 1) % 3, comm, s), HCCL_SUCCESS);  // nothing to move
    // Ranks 0 and 1 disagree on the count: both sides fail instead of hanging.
    if (rank == 0) {
      CHECK_EQ(HcclSend(d, 10, HCCL_DATA_TYPE_FP32, 1, comm, s), HCCL_SUCCESS);
      CHECK_EQ(aclrtSynchronizeStream(s), ACL_ERROR_RT_AICORE_EXCEPTION);
      CHECK(std::strstr(aclGetRecentErrMsg(), "do not match") != nullptr);
    } else if (rank == 1) {
      CHECK_EQ(HcclRecv(got, 11, HCCL_DATA_TYPE_FP32, 0, comm, s), HCCL_SUCCESS);
      CHECK_EQ(aclrtSynchronizeStream(s), ACL_ERROR_RT_AICORE_EXCEPTION);
    }
    CHECK_EQ(HcclCommDestroy(comm), HCCL_SUCCESS);
    aclrtFree(d);
    aclrtFree(got);
    return 0;
  };
  EXPECT_EQ(run_ranks(3, body), "");
  EXPECT_TRUE(shm_entries_with(root_id(g_shared->roots[0])).empty());
}

// A rank-table communicator is named as real HCCL names it; a root-info one with a config takes the config's name.
TEST(Hccl, CommunicatorNames) {
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  g_table = dir.write("rank_table.json", R"({"server_list": [{"device": [{"rank_id": "0"}, {"rank_id": "1"}]}]})");
  auto body = [](int rank) {
    aclrtStream s = nullptr;
    HcclComm comm = nullptr;
    CHECK_OK(setup(rank, &s));
    CHECK_EQ(HcclCommInitClusterInfo(g_table.c_str(), rank, &comm), HCCL_SUCCESS);
    CHECK(comm_name(comm) == "hccl_world_group");
    CHECK_EQ(HcclCommDestroy(comm), HCCL_SUCCESS);
    HcclRootInfo root;
    CHECK_OK(share_root(rank, 1, &root));
    HcclCommConfig config;
    HcclCommConfigInit(&config);
    std::strcpy(config.hcclCommName, "tp-group");
    CHECK_EQ(HcclCommInitRootInfoConfig(2, &root, rank, nullptr, &comm), HCCL_E_PTR);
    CHECK_EQ(HcclCommInitRootInfoConfig(2, &root, rank, &config, &comm), HCCL_SUCCESS);
    CHECK(comm_name(comm) == "tp-group");
    CHECK_EQ(HcclCommDestroy(comm), HCCL_SUCCESS);
    return 0;
  };
  EXPECT_EQ(run_ranks(2, body), "");
}

}  // namespace
