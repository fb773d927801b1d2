// A host in the shape of CANN's own HCCL samples (hccl examples/01_point_to_point, 02_collectives): one process drives
// N devices with a thread per device. The main thread makes one root info on device 0; each thread sets its device,
// joins the communicator as the rank of its device, and runs the collectives on a stream of its own: an all-reduce,
// a broadcast, an all-gather, a reduce-scatter, a reduce, a scatter, the three all-to-alls, a barrier and a ring of
// send/receive, then checks every result.
//
//   hccl_threads [--devices N] [--nan-rank R] [--steps S]
//
// --nan-rank R plants a NaN in rank R's all-reduce input at the last round (a test seam: the NaN crosses every rank).
// There is no optimizer kernel: every round is in the dump's step 0. Prints one line per rank and round, "rank r step s
// ok", and exits non-zero when a result is wrong.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "acl/acl.h"
#include "hccl/hccl.h"

namespace {

constexpr uint64_t kCount = 64;  // elements per rank

struct Options {
  uint32_t devices = 4;
  int nan_rank = -1;
  int steps = 2;
};

std::mutex g_out;

void *to_device(const std::vector<float> &v) {
  void *d = nullptr;
  if (aclrtMalloc(&d, v.size() * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) return nullptr;
  aclrtMemcpy(d, v.size() * sizeof(float), v.data(), v.size() * sizeof(float), ACL_MEMCPY_HOST_TO_DEVICE);
  return d;
}

std::vector<float> from_device(const void *d, size_t n) {
  std::vector<float> v(n);
  aclrtMemcpy(v.data(), n * sizeof(float), d, n * sizeof(float), ACL_MEMCPY_DEVICE_TO_HOST);
  return v;
}

// x[i] of rank r at step s: distinct per rank, so that every collective's result says where each value came from.
float value(uint32_t r, int s, uint64_t i) { return (float)(r + 1) * 0.5f + (float)i * 0.25f + (float)s; }

std::vector<float> input(uint32_t r, int s, uint64_t n) {
  std::vector<float> x(n);
  for (uint64_t i = 0; i < n; ++i) x[i] = value(r, s, i);
  return x;
}

// The all-to-all-v counts: rank i sends i + j + 1 elements to rank j (so what q sends r is what r expects from q),
// blocks packed in rank order.
uint64_t a2a_count(uint32_t from, uint32_t to) { return from + to + 1; }
uint64_t a2a_offset(uint32_t from, uint32_t to) {
  uint64_t o = 0;
  for (uint32_t j = 0; j < to; ++j) o += a2a_count(from, j);
  return o;
}

// The rooted collectives and the all-to-alls of rank r at step s (HcclReduce to rank 1, HcclScatter from rank 0,
// HcclAlltoAll of kBlock elements a pair, HcclAlltoAllV and HcclAlltoAllVC of a2a_count elements, HcclBarrier),
// each checked. Returns "" or what was wrong.
constexpr uint64_t kBlock = 8;
std::string rooted_and_all_to_all(uint32_t r, uint32_t n, int s, HcclComm comm, aclrtStream stream) {
  const uint32_t reduce_root = 1 % n, scatter_root = 0;
  void *x = to_device(input(r, s, kCount)), *reduced = to_device(std::vector<float>(kCount, 0.f));
  void *scattered = to_device(std::vector<float>(kCount, 0.f));
  void *a2a_in = to_device(input(r, s, kBlock * n)), *a2a_out = to_device(std::vector<float>(kBlock * n, 0.f));
  std::vector<uint64_t> sc(n), sd(n), rc(n), rd(n), matrix((size_t)n * n);
  for (uint32_t j = 0; j < n; ++j) {
    sc[j] = a2a_count(r, j), sd[j] = a2a_offset(r, j), rc[j] = a2a_count(j, r);
    rd[j] = j == 0 ? 0 : rd[j - 1] + rc[j - 1];
    for (uint32_t i = 0; i < n; ++i) matrix[(size_t)i * n + j] = a2a_count(i, j);
  }
  const uint64_t v_in = a2a_offset(r, n), v_out = rd[n - 1] + rc[n - 1];
  void *v_send = to_device(input(r, s, v_in)), *v_recv = to_device(std::vector<float>(v_out, 0.f));
  void *vc_recv = to_device(std::vector<float>(v_out, 0.f));
  constexpr HcclDataType f32 = HCCL_DATA_TYPE_FP32;
  bool ok = HcclReduce(x, reduced, kCount, f32, HCCL_REDUCE_SUM, reduce_root, comm, stream) == HCCL_SUCCESS &&
            HcclScatter(x, scattered, kCount / n, f32, scatter_root, comm, stream) == HCCL_SUCCESS &&
            HcclAlltoAll(a2a_in, kBlock, f32, a2a_out, kBlock, f32, comm, stream) == HCCL_SUCCESS &&
            HcclAlltoAllV(v_send, sc.data(), sd.data(), f32, v_recv, rc.data(), rd.data(), f32, comm, stream) ==
                HCCL_SUCCESS &&
            HcclAlltoAllVC(v_send, matrix.data(), f32, vc_recv, f32, comm, stream) == HCCL_SUCCESS &&
            HcclBarrier(comm, stream) == HCCL_SUCCESS && aclrtSynchronizeStream(stream) == ACL_SUCCESS;
  std::string wrong = ok ? "" : "a call failed";
  const std::vector<float> got_r = from_device(reduced, kCount), got_s = from_device(scattered, kCount / n);
  const std::vector<float> got_a = from_device(a2a_out, kBlock * n), got_v = from_device(v_recv, v_out),
                           got_vc = from_device(vc_recv, v_out);
  for (uint64_t i = 0; wrong.empty() && r == reduce_root && i < kCount; ++i) {
    float want = 0;
    for (uint32_t q = 0; q < n; ++q) want += value(q, s, i);
    if (got_r[i] != want) wrong = "reduce";
  }
  for (uint64_t i = 0; wrong.empty() && i < kCount / n; ++i)
    if (got_s[i] != value(scatter_root, s, r * (kCount / n) + i)) wrong = "scatter";
  for (uint32_t q = 0; wrong.empty() && q < n; ++q) {
    for (uint64_t i = 0; i < kBlock; ++i)
      if (got_a[q * kBlock + i] != value(q, s, r * kBlock + i)) wrong = "all-to-all";
    for (uint64_t i = 0; i < rc[q]; ++i) {
      const float want = value(q, s, a2a_offset(q, r) + i);
      if (got_v[rd[q] + i] != want) wrong = "all-to-all-v";
      if (got_vc[rd[q] + i] != want) wrong = "all-to-all-vc";
    }
  }
  for (void *p : {x, reduced, scattered, a2a_in, a2a_out, v_send, v_recv, vc_recv}) aclrtFree(p);
  return wrong;
}

// One step of rank r: every collective, each checked against what the ranks sent. Returns "" or what was wrong.
std::string step(uint32_t r, uint32_t n, int s, bool plant_nan, HcclComm comm, aclrtStream stream) {
  std::vector<float> x = input(r, s, kCount);
  if (plant_nan) x[3] = NAN;
  void *send = to_device(x), *sum = to_device(std::vector<float>(kCount, 0.f));
  void *bcast = to_device(input(r, s, kCount)), *gathered = to_device(std::vector<float>(kCount * n, 0.f));
  void *scattered = to_device(std::vector<float>(kCount / n, 0.f)), *ring = to_device(std::vector<float>(kCount, 0.f));
  void *whole = to_device(input(r, s, kCount));  // the reduce-scatter's input: kCount, cut into n blocks
  const uint32_t next = (r + 1) % n, prev = (r + n - 1) % n;
  bool ok = HcclAllReduce(send, sum, kCount, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, stream) == HCCL_SUCCESS &&
            HcclBroadcast(bcast, kCount, HCCL_DATA_TYPE_FP32, 0, comm, stream) == HCCL_SUCCESS &&
            HcclAllGather(send, gathered, kCount, HCCL_DATA_TYPE_FP32, comm, stream) == HCCL_SUCCESS &&
            HcclReduceScatter(whole, scattered, kCount / n, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, stream) ==
                HCCL_SUCCESS;
  // The ring: even ranks send first, odd ranks receive first (as the samples order a blocking ring).
  for (int half = 0; ok && half < 2; ++half) {
    const bool sends = (half == 0) == (r % 2 == 0);
    ok = sends ? HcclSend(send, kCount, HCCL_DATA_TYPE_FP32, next, comm, stream) == HCCL_SUCCESS
               : HcclRecv(ring, kCount, HCCL_DATA_TYPE_FP32, prev, comm, stream) == HCCL_SUCCESS;
  }
  ok = ok && aclrtSynchronizeStream(stream) == ACL_SUCCESS;
  std::string wrong = ok ? rooted_and_all_to_all(r, n, s, comm, stream) : "a call failed";
  const std::vector<float> got_sum = from_device(sum, kCount), got_b = from_device(bcast, kCount);
  const std::vector<float> got_g = from_device(gathered, kCount * n), got_ring = from_device(ring, kCount);
  const std::vector<float> got_s = from_device(scattered, kCount / n);
  for (uint64_t i = 0; wrong.empty() && i < kCount / n; ++i) {
    float want = 0;  // block r of every rank's `whole`, summed
    for (uint32_t q = 0; q < n; ++q) want += value(q, s, r * (kCount / n) + i);
    if (got_s[i] != want) wrong = "reduce-scatter";
  }
  for (uint64_t i = 0; wrong.empty() && i < kCount; ++i) {
    float want = 0;
    for (uint32_t q = 0; q < n; ++q) want += value(q, s, i);
    if (!std::isnan(got_sum[i]) && got_sum[i] != want) wrong = "all-reduce";
    if (got_b[i] != value(0, s, i)) wrong = "broadcast";
    if (!std::isnan(got_ring[i]) && got_ring[i] != value(prev, s, i)) wrong = "send/receive";
    for (uint32_t q = 0; q < n; ++q)
      if (!std::isnan(got_g[q * kCount + i]) && got_g[q * kCount + i] != value(q, s, i)) wrong = "all-gather";
  }
  for (void *p : {send, sum, bcast, gathered, scattered, ring, whole}) aclrtFree(p);
  return wrong;
}

void rank_thread(uint32_t r, const Options &o, HcclRootInfo info, std::vector<std::string> &errors) {
  if (aclrtSetDevice((int32_t)r) != ACL_SUCCESS) {
    errors[r] = "aclrtSetDevice failed";
    return;
  }
  HcclComm comm = nullptr;
  aclrtStream stream = nullptr;
  if (HcclCommInitRootInfo(o.devices, &info, r, &comm) != HCCL_SUCCESS || aclrtCreateStream(&stream) != ACL_SUCCESS) {
    errors[r] = "communicator or stream not made";
    return;
  }
  for (int s = 0; s < o.steps && errors[r].empty(); ++s) {
    errors[r] = step(r, o.devices, s, (int)r == o.nan_rank && s == o.steps - 1, comm, stream);
    std::lock_guard<std::mutex> lk(g_out);
    if (errors[r].empty()) std::printf("rank %u step %d ok\n", r, s);
  }
  HcclCommDestroy(comm);
  aclrtDestroyStream(stream);
  aclrtResetDevice((int32_t)r);
}

Options parse(int argc, char **argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (a == "--devices" && v >= 2 && v <= 8)
      o.devices = (uint32_t)v;
    else if (a == "--nan-rank")
      o.nan_rank = v;
    else if (a == "--steps" && v >= 1)
      o.steps = v;
    else {
      std::fprintf(stderr, "usage: hccl_threads [--devices 2..8] [--nan-rank R] [--steps S]\n");
      std::exit(2);
    }
  }
  return o;
}

}  // namespace

int main(int argc, char **argv) {
  const Options o = parse(argc, argv);
  if (aclInit(nullptr) != ACL_SUCCESS || aclrtSetDevice(0) != ACL_SUCCESS) return 1;
  HcclRootInfo info;
  if (HcclGetRootInfo(&info) != HCCL_SUCCESS) return 1;
  std::vector<std::string> errors(o.devices);
  std::vector<std::thread> threads;
  for (uint32_t r = 0; r < o.devices; ++r) threads.emplace_back(rank_thread, r, std::cref(o), info, std::ref(errors));
  for (std::thread &t : threads) t.join();
  int status = 0;
  for (uint32_t r = 0; r < o.devices; ++r)
    if (!errors[r].empty()) std::fprintf(stderr, "rank %u: %s\n", r, errors[r].c_str()), status = 1;
  aclrtResetDevice(0);
  aclFinalize();
  return status;
}
