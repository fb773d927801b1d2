// A plain ACL program of the CANN 9 kind, linked directly against the stand-in, for test_shim_cann9.py: what the
// shim must see beyond the rt* launches and aclrtMalloc of older programs (issue 40 item 3).
//
//   cann9_host kernels                the ACL kernel API over the stand-in's device binary (fake_kernels.o):
//                                     aclrtBinaryLoadFromData / FromFile, aclrtBinaryGetFunction, and
//                                       1. aclrtLaunchKernelWithHostArgs  fake_vector_add  z = x + y
//                                       2. aclrtLaunchKernelWithHostArgs  fake_vector_add  w = hx + y, hx a host input
//                                          behind the slots (a placeholder patches x's slot)
//                                       3. aclrtLaunchKernelWithConfig    fake_scale       s = x * 2, then, after
//                                          aclrtKernelArgsParaUpdate, s = x * 3
//                                       4. aclrtLaunchKernel              fake_relu        r = relu(z - 5) (z minus 5
//                                          first, by a second vector_add), its args blob in device memory
//                                     over buffers from aclrtMallocAlign32 (x), aclrtMallocCached (y),
//                                     aclrtMallocWithCfg (z), aclrtMalloc (w, t, r) and a mapping of physical memory
//                                     (aclrtMallocPhysical + aclrtReserveMemAddress + aclrtMapMem: s, at its end)
//   cann9_host models OM              the model API's other loads and executions over graph_mlp.om:
//                                     aclmdlLoadFromFileWithMem + aclmdlExecuteV2 (2 runs), aclmdlLoadWithConfig
//                                     (from memory, in the caller's memory) + aclmdlExecuteAsyncV2 (1 run), and
//                                     aclmdlLoadFromFileWithQ (refused by the stand-in: no data queues)
//   cann9_host acl-init-dump CONFIG OM [--callback]
//                                     aclInit(CONFIG) (whose "dump" section the test writes), the model run twice
//                                     through aclmdlLoadFromFile + aclmdlExecute; with --callback the program's own
//                                     acldumpRegCallback counts the files and chunks it gets
//   cann9_host teardown-counted       aclInit twice, aclrtSetDevice twice; vector_add, aclrtResetDevice (one
//                                     reference left), vector_add, aclFinalizeReference (one left), vector_add,
//                                     aclrtResetDeviceForce (the device ends), aclFinalizeReference (ACL ends)
//   cann9_host teardown-reference     aclInit once; vector_add, aclFinalizeReference (ACL ends), then
//                                     aclrtResetDevice
//   cann9_host cast                   aclnnCast (FAKE_CANN_SOC=Ascend950PR_9599: Ascend 950 takes the 8- and 4-bit
//                                     floats): x (FLOAT [16]) to each of HIFLOAT8, FLOAT8_E5M2, FLOAT8_E4M3FN,
//                                     FLOAT4_E2M1, FLOAT4_E1M2 and back to FLOAT; the FLOAT4_E2M1 tensor's odd elements
//                                     (a view: offset 1, stride 2) to FLOAT (no Cast reads FLOAT8_E8M0)
//   cann9_host hccl-fp8               one rank (HcclCommInitRootInfo): HcclAllGather of the codes 0x30..0x37 as
//                                     HCCL_DATA_TYPE_FP8E4M3, FP8E5M2, HIF8 and FP8E8M0
//   cann9_host addresses              the addresses a kernel reads at its launch (CANN reads every tensor's address
//                                     then), each rebinding between two launches of a repeatable executor or between
//                                     phase 1 and phase 2:
//                                       1. Add (x1 + y), aclSetRawTensorAddr(x, x2), the same executor again (x2 + y)
//                                       2. FlashAttentionScore (BSND, decoded at phase 1: its inputLayout is a char *)
//                                          with q rebound from q1 to q2 between phase 1 and phase 2
//                                       3. Cat [a, b], aclSetDynamicInputTensorAddr(list, 1, b2), again: [a, b2]
//                                       4. Add (x1 + y), aclSetInputTensorAddr(index 7, x, x2): the index is ignored
//                                          for a built-in op, x is rebound, again (x2 + y)
//
// Every computed value is checked here against the CPU; one line per check. Exit status 0 when all match, 1 on a
// mismatch, 2 on an API or usage error.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "acl/acl.h"
#include "acl/acl_dump.h"
#include "aclnnop/aclnn_add.h"
#include "aclnnop/aclnn_cast.h"
#include "aclnnop/aclnn_cat.h"
#include "aclnnop/aclnn_flash_attention_score.h"
#include "hccl/hccl.h"

namespace {

constexpr int kN = 8;
int g_status = 0;

bool ok(aclError rc, const char *what) {
  if (rc == ACL_SUCCESS) return true;
  const char *msg = aclGetRecentErrMsg();
  std::fprintf(stderr, "cann9_host: %s failed with %d%s%s\n", what, rc, msg && *msg ? ": " : "", msg ? msg : "");
  g_status = 2;
  return false;
}

float x_at(int i) { return 0.5f * (float)i - 1.0f; }
float y_at(int i) { return 2.0f + 0.25f * (float)i; }
float hx_at(int i) { return 10.0f - (float)i; }

std::vector<float> values(float (*f)(int)) {
  std::vector<float> v(kN);
  for (int i = 0; i < kN; ++i) v[i] = f(i);
  return v;
}

bool to_device(void *dev, const std::vector<float> &v) {
  return ok(aclrtMemcpy(dev, v.size() * 4, v.data(), v.size() * 4, ACL_MEMCPY_HOST_TO_DEVICE), "H2D");
}

std::vector<float> from_device(const void *dev) {
  std::vector<float> v(kN, NAN);
  ok(aclrtMemcpy(v.data(), v.size() * 4, dev, v.size() * 4, ACL_MEMCPY_DEVICE_TO_HOST), "D2H");
  return v;
}

void check(const char *what, const std::vector<float> &got, const std::vector<float> &want) {
  bool same = got.size() == want.size();
  for (size_t i = 0; same && i < got.size(); ++i) same = got[i] == want[i];
  std::printf("%s %s\n", what, same ? "ok" : "MISMATCH");
  if (!same && g_status == 0) g_status = 1;
}

std::string kernel_binary_path() {
  const char *home = std::getenv("ASCEND_HOME_PATH");
  return std::string(home ? home : "") + "/opp/kernel/fake_kernels.o";
}

// The device buffers of the kernels mode, each from another allocator.
struct Buffers {
  void *x = nullptr, *y = nullptr, *z = nullptr, *w = nullptr, *t = nullptr, *r = nullptr, *s = nullptr;
  void *args = nullptr;  // aclrtLaunchKernel's args blob
  aclrtDrvMemHandle physical = nullptr;
  void *reserved = nullptr;
  size_t granularity = 0;

  bool allocate() {
    const size_t b = kN * 4;
    aclrtMallocConfig cfg{nullptr, 0};
    if (!ok(aclrtMallocAlign32(&x, b, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMallocAlign32") ||
        !ok(aclrtMallocCached(&y, b, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMallocCached") ||
        !ok(aclrtMallocWithCfg(&z, b, ACL_MEM_MALLOC_HUGE_FIRST, &cfg), "aclrtMallocWithCfg") ||
        !ok(aclrtMalloc(&w, b, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc") ||
        !ok(aclrtMalloc(&t, b, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc") ||
        !ok(aclrtMalloc(&r, b, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc") ||
        !ok(aclrtMalloc(&args, 24, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc"))
      return false;
    aclrtPhysicalMemProp prop{};
    prop.handleType = ACL_MEM_HANDLE_TYPE_NONE;
    prop.allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED;
    prop.memAttr = ACL_HBM_MEM_HUGE;
    prop.location = {0, ACL_MEM_LOCATION_TYPE_DEVICE};
    if (!ok(aclrtMemGetAllocationGranularity(&prop, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &granularity),
            "aclrtMemGetAllocationGranularity") ||
        !ok(aclrtMallocPhysical(&physical, granularity, &prop, 0), "aclrtMallocPhysical") ||
        !ok(aclrtReserveMemAddress(&reserved, granularity, 0, nullptr, 0), "aclrtReserveMemAddress") ||
        !ok(aclrtMapMem(reserved, granularity, 0, physical, 0), "aclrtMapMem"))
      return false;
    s = static_cast<char *>(reserved) + granularity - b;  // the mapping's last kN floats
    return true;
  }
  void release() {
    for (void *p : {x, y, z, w, t, r, args}) ok(aclrtFree(p), "aclrtFree");
    ok(aclrtUnmapMem(reserved), "aclrtUnmapMem");
    ok(aclrtReleaseMemAddress(reserved), "aclrtReleaseMemAddress");
    ok(aclrtFreePhysical(physical), "aclrtFreePhysical");
  }
};

struct Functions {
  aclrtBinHandle from_data = nullptr, from_file = nullptr;
  aclrtFuncHandle add = nullptr, scale = nullptr, relu = nullptr;
  std::vector<char> elf;

  bool load() {
    const std::string path = kernel_binary_path();
    std::ifstream f(path, std::ios::binary);
    elf.assign(std::istreambuf_iterator<char>(f), {});
    if (elf.empty()) {
      std::fprintf(stderr, "cann9_host: cannot read %s\n", path.c_str());
      g_status = 2;
      return false;
    }
    return ok(aclrtBinaryLoadFromData(elf.data(), elf.size(), nullptr, &from_data), "aclrtBinaryLoadFromData") &&
           ok(aclrtBinaryLoadFromFile(path.c_str(), nullptr, &from_file), "aclrtBinaryLoadFromFile") &&
           ok(aclrtBinaryGetFunction(from_data, "fake_vector_add", &add), "aclrtBinaryGetFunction") &&
           ok(aclrtBinaryGetFunction(from_file, "fake_scale", &scale), "aclrtBinaryGetFunction") &&
           ok(aclrtBinaryGetFunction(from_data, "fake_relu", &relu), "aclrtBinaryGetFunction");
  }
  void unload() {
    ok(aclrtBinaryUnLoad(from_data), "aclrtBinaryUnLoad");
    ok(aclrtBinaryUnLoad(from_file), "aclrtBinaryUnLoad");
  }
};

struct AddArgs {
  uint64_t x, y, z, n;
};

uint64_t addr(const void *p) { return (uint64_t)(uintptr_t)p; }

bool vector_add(const Functions &fn, aclrtStream stream, const void *a, const void *b, void *out) {
  AddArgs args{addr(a), addr(b), addr(out), kN};
  return ok(aclrtLaunchKernelWithHostArgs(fn.add, 1, stream, nullptr, &args, sizeof args, nullptr, 0),
            "aclrtLaunchKernelWithHostArgs");
}

// w = hx + y: x's slot is a placeholder the runtime points at the host data behind the slots.
bool vector_add_host_input(const Functions &fn, aclrtStream stream, const Buffers &b) {
  struct {
    AddArgs slots;
    float hx[kN];
  } args{{0, addr(b.y), addr(b.w), kN}, {}};
  for (int i = 0; i < kN; ++i) args.hx[i] = hx_at(i);
  aclrtPlaceHolderInfo placeholder{0, (uint32_t)offsetof(decltype(args), hx)};
  return ok(aclrtLaunchKernelWithHostArgs(fn.add, 1, stream, nullptr, &args, sizeof args, &placeholder, 1),
            "aclrtLaunchKernelWithHostArgs");
}

// s = x * 2 launched, then s = x * 3 through the same args handle after aclrtKernelArgsParaUpdate.
bool scale_twice(const Functions &fn, aclrtStream stream, const Buffers &b, std::vector<float> &first) {
  aclrtArgsHandle h = nullptr;
  aclrtParamHandle px = nullptr, ps = nullptr, pn = nullptr, pf = nullptr;
  uint64_t x = addr(b.x), s = addr(b.s), n = kN;
  float factor = 2.0f;
  if (!ok(aclrtKernelArgsInit(fn.scale, &h), "aclrtKernelArgsInit") ||
      !ok(aclrtKernelArgsAppend(h, &x, 8, &px), "aclrtKernelArgsAppend") ||
      !ok(aclrtKernelArgsAppend(h, &s, 8, &ps), "aclrtKernelArgsAppend") ||
      !ok(aclrtKernelArgsAppend(h, &n, 8, &pn), "aclrtKernelArgsAppend") ||
      !ok(aclrtKernelArgsAppend(h, &factor, 4, &pf), "aclrtKernelArgsAppend") ||
      !ok(aclrtKernelArgsFinalize(h), "aclrtKernelArgsFinalize") ||
      !ok(aclrtLaunchKernelWithConfig(fn.scale, 1, stream, nullptr, h, nullptr), "aclrtLaunchKernelWithConfig") ||
      !ok(aclrtSynchronizeStream(stream), "aclrtSynchronizeStream"))
    return false;
  first = from_device(b.s);
  factor = 3.0f;
  return ok(aclrtKernelArgsParaUpdate(h, pf, &factor, 4), "aclrtKernelArgsParaUpdate") &&
         ok(aclrtLaunchKernelWithConfig(fn.scale, 1, stream, nullptr, h, nullptr), "aclrtLaunchKernelWithConfig");
}

// r = relu(t), the args blob copied into device memory first.
bool relu_device_args(const Functions &fn, aclrtStream stream, const Buffers &b) {
  uint64_t args[3] = {addr(b.t), addr(b.r), kN};
  return ok(aclrtMemcpy(b.args, sizeof args, args, sizeof args, ACL_MEMCPY_HOST_TO_DEVICE), "H2D") &&
         ok(aclrtLaunchKernel(fn.relu, 1, b.args, sizeof args, stream), "aclrtLaunchKernel");
}

int kernels() {
  aclrtStream stream = nullptr;
  Buffers b;
  Functions fn;
  if (!ok(aclInit(nullptr), "aclInit") || !ok(aclrtSetDevice(0), "aclrtSetDevice") ||
      !ok(aclrtCreateStream(&stream), "aclrtCreateStream") || !b.allocate() || !fn.load())
    return 2;
  std::vector<float> x = values(x_at), y = values(y_at), hx = values(hx_at), minus5(kN, -5.0f), scaled2;
  if (!to_device(b.x, x) || !to_device(b.y, y) || !to_device(b.r, minus5)) return 2;
  if (!vector_add(fn, stream, b.x, b.y, b.z) || !vector_add_host_input(fn, stream, b) ||
      !scale_twice(fn, stream, b, scaled2) || !vector_add(fn, stream, b.z, b.r, b.t) ||
      !relu_device_args(fn, stream, b) || !ok(aclrtSynchronizeStream(stream), "aclrtSynchronizeStream"))
    return 2;
  std::vector<float> z(kN), w(kN), s2(kN), s3(kN), r(kN);
  for (int i = 0; i < kN; ++i) {
    z[i] = x[i] + y[i];
    w[i] = hx[i] + y[i];
    s2[i] = x[i] * 2.0f;
    s3[i] = x[i] * 3.0f;
    r[i] = std::fmax(z[i] - 5.0f, 0.0f);
  }
  check("z = x + y", from_device(b.z), z);
  check("w = hx + y", from_device(b.w), w);
  check("s = x * 2", scaled2, s2);
  check("s = x * 3", from_device(b.s), s3);
  check("r = relu(z - 5)", from_device(b.r), r);
  fn.unload();
  b.release();
  ok(aclrtDestroyStream(stream), "aclrtDestroyStream");
  ok(aclrtResetDevice(0), "aclrtResetDevice");
  ok(aclFinalize(), "aclFinalize");
  return g_status;
}

// ---- models --------------------------------------------------------------------------------------------------------

constexpr int kB = 4, kD = 8, kO = 4;  // graph_mlp.json: x [4, 8] -> y [4, 4]

std::vector<float> model_input(int run) {
  std::vector<float> x(kB * kD);
  for (int i = 0; i < kB * kD; ++i) x[i] = (float)((run * 13 + i * 3) % 17 - 8) / 4.0f;
  return x;
}

// Device buffers for the MLP's one input and one output, and the datasets over them.
struct ModelIo {
  void *in_ptr = nullptr, *out_ptr = nullptr;
  aclmdlDataset *in = aclmdlCreateDataset(), *out = aclmdlCreateDataset();
  bool create() {
    return ok(aclrtMalloc(&in_ptr, kB * kD * 4, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc") &&
           ok(aclrtMalloc(&out_ptr, kB * kO * 4, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc") &&
           ok(aclmdlAddDatasetBuffer(in, aclCreateDataBuffer(in_ptr, kB * kD * 4)), "aclmdlAddDatasetBuffer") &&
           ok(aclmdlAddDatasetBuffer(out, aclCreateDataBuffer(out_ptr, kB * kO * 4)), "aclmdlAddDatasetBuffer");
  }
  ~ModelIo() {
    for (aclmdlDataset *set : {in, out}) {
      for (size_t i = 0; i < aclmdlGetDatasetNumBuffers(set); ++i) aclDestroyDataBuffer(aclmdlGetDatasetBuffer(set, i));
      aclmdlDestroyDataset(set);
    }
    aclrtFree(in_ptr);
    aclrtFree(out_ptr);
  }
};

// One execution of model `id` on input `run`: through ExecuteV2 (stream null: the model's own) or ExecuteAsyncV2.
bool execute_v2(uint32_t id, ModelIo &io, int run, aclrtStream async_stream) {
  std::vector<float> x = model_input(run);
  if (!ok(aclrtMemcpy(io.in_ptr, x.size() * 4, x.data(), x.size() * 4, ACL_MEMCPY_HOST_TO_DEVICE), "H2D")) return false;
  aclmdlExecConfigHandle *cfg = aclmdlCreateExecConfigHandle();
  bool good = async_stream == nullptr
                  ? ok(aclmdlExecuteV2(id, io.in, io.out, nullptr, cfg), "aclmdlExecuteV2")
                  : ok(aclmdlExecuteAsyncV2(id, io.in, io.out, async_stream, cfg), "aclmdlExecuteAsyncV2") &&
                        ok(aclrtSynchronizeStream(async_stream), "aclrtSynchronizeStream");
  aclmdlDestroyExecConfigHandle(cfg);
  float y0 = NAN;
  if (good) good = ok(aclrtMemcpy(&y0, 4, io.out_ptr, 4, ACL_MEMCPY_DEVICE_TO_HOST), "D2H");
  std::printf("model %u run %d y[0] %g\n", id, run, y0);
  return good;
}

struct ModelMemory {
  void *work = nullptr, *weight = nullptr;
  size_t work_size = 0, weight_size = 0;
  bool allocate(const char *om) {
    return ok(aclmdlQuerySize(om, &work_size, &weight_size), "aclmdlQuerySize") &&
           ok(aclrtMalloc(&work, work_size, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc") &&
           ok(aclrtMalloc(&weight, weight_size, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc");
  }
  ~ModelMemory() {
    if (work) aclrtFree(work);
    if (weight) aclrtFree(weight);
  }
};

template <typename T>
bool set_opt(aclmdlConfigHandle *h, aclmdlConfigAttr attr, T value) {
  return ok(aclmdlSetConfigOpt(h, attr, &value, sizeof value), "aclmdlSetConfigOpt");
}

// aclmdlLoadWithConfig: the model from memory, in the caller's memory.
bool load_with_config(const std::vector<char> &om, ModelMemory &mem, uint32_t *id) {
  aclmdlConfigHandle *h = aclmdlCreateConfigHandle();
  bool good = set_opt(h, ACL_MDL_LOAD_TYPE_SIZET, (size_t)ACL_MDL_LOAD_FROM_MEM_WITH_MEM) &&
              set_opt(h, ACL_MDL_MEM_ADDR_PTR, (const void *)om.data()) && set_opt(h, ACL_MDL_MEM_SIZET, om.size()) &&
              set_opt(h, ACL_MDL_WORKSPACE_ADDR_PTR, mem.work) && set_opt(h, ACL_MDL_WORKSPACE_SIZET, mem.work_size) &&
              set_opt(h, ACL_MDL_WEIGHT_ADDR_PTR, mem.weight) && set_opt(h, ACL_MDL_WEIGHT_SIZET, mem.weight_size) &&
              ok(aclmdlLoadWithConfig(h, id), "aclmdlLoadWithConfig");
  aclmdlDestroyConfigHandle(h);
  return good;
}

int models(const char *om) {
  aclrtStream stream = nullptr;
  if (!ok(aclInit(nullptr), "aclInit") || !ok(aclrtSetDevice(0), "aclrtSetDevice") ||
      !ok(aclrtCreateStream(&stream), "aclrtCreateStream"))
    return 2;
  std::ifstream f(om, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  {
    ModelMemory mem1, mem2;
    ModelIo io;
    uint32_t id1 = 0, id2 = 0;
    if (!mem1.allocate(om) || !mem2.allocate(om) || !io.create()) return 2;
    if (!ok(aclmdlLoadFromFileWithMem(om, &id1, mem1.work, mem1.work_size, mem1.weight, mem1.weight_size),
            "aclmdlLoadFromFileWithMem") ||
        !execute_v2(id1, io, 0, nullptr) || !execute_v2(id1, io, 1, nullptr) || !ok(aclmdlUnload(id1), "aclmdlUnload"))
      return 2;
    if (!load_with_config(bytes, mem2, &id2) || !execute_v2(id2, io, 2, stream) ||
        !ok(aclmdlUnload(id2), "aclmdlUnload"))
      return 2;
  }
  const uint32_t in_q = 1, out_q = 2;
  uint32_t id3 = 0;
  std::printf("aclmdlLoadFromFileWithQ: %d\n", aclmdlLoadFromFileWithQ(om, &id3, &in_q, 1, &out_q, 1));
  ok(aclrtDestroyStream(stream), "aclrtDestroyStream");
  ok(aclrtResetDevice(0), "aclrtResetDevice");
  ok(aclFinalize(), "aclFinalize");
  return g_status;
}

// ---- aclInit's dump ------------------------------------------------------------------------------------------------

int g_chunks = 0, g_files = 0;
uint64_t g_bytes = 0;

int32_t count_chunk(const acldumpChunk *chunk, int32_t len) {
  if (chunk == nullptr || len != (int32_t)(sizeof(acldumpChunk) + chunk->bufLen)) return 1;
  ++g_chunks;
  g_bytes += chunk->bufLen;
  if (chunk->isLastChunk) ++g_files;
  return 0;
}

int acl_init_dump(const char *config, const char *om, bool callback) {
  if (!ok(aclInit(config), "aclInit") || !ok(aclrtSetDevice(0), "aclrtSetDevice")) return 2;
  if (callback && !ok(acldumpRegCallback(count_chunk, 0), "acldumpRegCallback")) return 2;
  uint32_t id = 0;
  if (!ok(aclmdlLoadFromFile(om, &id), "aclmdlLoadFromFile")) return 2;
  {
    ModelIo io;
    if (!io.create()) return 2;
    for (int run = 0; run < 2; ++run) {
      std::vector<float> x = model_input(run);
      float y0 = NAN;
      if (!ok(aclrtMemcpy(io.in_ptr, x.size() * 4, x.data(), x.size() * 4, ACL_MEMCPY_HOST_TO_DEVICE), "H2D") ||
          !ok(aclmdlExecute(id, io.in, io.out), "aclmdlExecute") ||
          !ok(aclrtMemcpy(&y0, 4, io.out_ptr, 4, ACL_MEMCPY_DEVICE_TO_HOST), "D2H"))
        return 2;
      std::printf("run %d y[0] %g\n", run, y0);
    }
  }
  ok(aclmdlUnload(id), "aclmdlUnload");
  ok(aclrtResetDevice(0), "aclrtResetDevice");
  ok(aclFinalize(), "aclFinalize");  // ends aclInit's dump: every queued chunk delivered first
  if (callback) acldumpUnregCallback();
  if (callback)
    std::printf("own callback: %d files in %d chunks, %llu bytes\n", g_files, g_chunks, (unsigned long long)g_bytes);
  return g_status;
}

// ---- teardown
// --------------------------------------------------------------------------------------------------------

struct Teardown {
  aclrtStream stream = nullptr;
  Buffers b;
  Functions fn;
  int launches = 0;

  bool start(int acl_refs, int device_refs) {
    for (int i = 0; i < acl_refs; ++i) {
      const aclError rc = aclInit(nullptr);
      if (rc != ACL_SUCCESS && !(i > 0 && rc == ACL_ERROR_REPEAT_INITIALIZE)) return ok(rc, "aclInit");
    }
    for (int i = 0; i < device_refs; ++i)
      if (!ok(aclrtSetDevice(0), "aclrtSetDevice")) return false;
    return ok(aclrtCreateStream(&stream), "aclrtCreateStream") && b.allocate() && fn.load() &&
           to_device(b.x, values(x_at)) && to_device(b.y, values(y_at));
  }
  // z = x + y, then synchronized; said on stdout.
  bool launch() {
    const bool good = vector_add(fn, stream, b.x, b.y, b.z) && ok(aclrtSynchronizeStream(stream), "sync");
    std::printf("vector_add %d\n", launches++);
    return good;
  }
  void said(const char *call, aclError rc) { std::printf("%s: %d\n", call, rc); }
};

int teardown_counted() {
  Teardown t;
  if (!t.start(2, 2) || !t.launch()) return 2;
  t.said("aclrtResetDevice", aclrtResetDevice(0));
  if (!t.launch()) return 2;
  uint64_t refs = 99;
  t.said("aclFinalizeReference", aclFinalizeReference(&refs));
  std::printf("acl references left: %llu\n", (unsigned long long)refs);
  if (!t.launch()) return 2;
  t.said("aclrtResetDeviceForce", aclrtResetDeviceForce(0));
  t.said("aclFinalizeReference", aclFinalizeReference(&refs));
  std::printf("acl references left: %llu\n", (unsigned long long)refs);
  return g_status;
}

int teardown_reference() {
  Teardown t;
  if (!t.start(1, 1) || !t.launch()) return 2;
  t.said("aclFinalizeReference", aclFinalizeReference(nullptr));
  t.said("aclrtResetDevice", aclrtResetDevice(0));
  return g_status;
}

// ---- the narrow floats ----------------------------------------------------------------------------------------------

constexpr int kCastN = 16;

// Values that round differently in each type: halves between codes, beyond the largest finite value, below the
// smallest, negative and zero.
float cast_input(int i) {
  const float v[kCastN] = {0.0f, 1.0625f, -1.1875f, 3.3f,  -6.5f, 0.015625f, 100.0f, -448.5f,
                           2.5f, 0.3f,    -0.7f,    1e-5f, 7.0f,  -0.0625f,  1.75f,  40000.0f};
  return v[i];
}

// An aclTensor over `dev` of `dtype`: shape [n], strides {stride}, `offset` elements into storage of `storage`.
aclTensor *tensor(void *dev, aclDataType dtype, int64_t n, int64_t stride = 1, int64_t offset = 0,
                  int64_t storage = -1) {
  const int64_t shape[1] = {n}, strides[1] = {stride}, storage_shape[1] = {storage < 0 ? n : storage};
  return aclCreateTensor(shape, 1, dtype, strides, offset, ACL_FORMAT_ND, storage_shape, 1, dev);
}

bool cast(aclTensor *from, aclDataType to, aclTensor *out, aclrtStream stream) {
  uint64_t ws = 0;
  aclOpExecutor *executor = nullptr;
  if (!ok(aclnnCastGetWorkspaceSize(from, to, out, &ws, &executor), "aclnnCastGetWorkspaceSize")) return false;
  if (ws != 0) {
    std::fprintf(stderr, "cann9_host: aclnnCast wants %llu bytes of workspace\n", (unsigned long long)ws);
    g_status = 2;
    return false;
  }
  return ok(aclnnCast(nullptr, 0, executor, stream), "aclnnCast");
}

void *device_buffer(size_t bytes) {
  void *p = nullptr;
  ok(aclrtMalloc(&p, bytes < 32 ? 32 : bytes, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc");
  return p;
}

int casts() {
  aclrtStream stream = nullptr;
  if (!ok(aclInit(nullptr), "aclInit") || !ok(aclrtSetDevice(0), "aclrtSetDevice") ||
      !ok(aclrtCreateStream(&stream), "aclrtCreateStream"))
    return 2;
  std::vector<float> x(kCastN);
  for (int i = 0; i < kCastN; ++i) x[i] = cast_input(i);
  void *dx = device_buffer(kCastN * 4);
  if (!ok(aclrtMemcpy(dx, kCastN * 4, x.data(), kCastN * 4, ACL_MEMCPY_HOST_TO_DEVICE), "H2D")) return 2;
  aclTensor *tx = tensor(dx, ACL_FLOAT, kCastN);
  void *fp4 = nullptr;
  for (aclDataType t : {ACL_HIFLOAT8, ACL_FLOAT8_E5M2, ACL_FLOAT8_E4M3FN, ACL_FLOAT4_E2M1, ACL_FLOAT4_E1M2}) {
    void *dy = device_buffer(kCastN), *dz = device_buffer(kCastN * 4);
    aclTensor *ty = tensor(dy, t, kCastN), *tz = tensor(dz, ACL_FLOAT, kCastN);
    if (!cast(tx, t, ty, stream) || !cast(ty, ACL_FLOAT, tz, stream)) return 2;
    if (t == ACL_FLOAT4_E2M1) fp4 = dy;
  }
  // The FLOAT4_E2M1 tensor's odd elements: a view starting inside its first byte.
  void *dodd = device_buffer(kCastN / 2 * 4);
  if (!cast(tensor(fp4, ACL_FLOAT4_E2M1, kCastN / 2, 2, 1, kCastN), ACL_FLOAT, tensor(dodd, ACL_FLOAT, kCastN / 2),
            stream))
    return 2;
  if (!ok(aclrtSynchronizeStream(stream), "aclrtSynchronizeStream")) return 2;
  std::printf("casts done\n");
  ok(aclrtResetDevice(0), "aclrtResetDevice");
  ok(aclFinalize(), "aclFinalize");
  return g_status;
}

// One rank (the root info's only one) all-gathers 8 codes as each fp8 HcclDataType.
int hccl_fp8() {
  HcclRootInfo root{};
  HcclComm comm = nullptr;
  aclrtStream stream = nullptr;
  if (!ok(aclInit(nullptr), "aclInit") || !ok(aclrtSetDevice(0), "aclrtSetDevice") ||
      !ok(aclrtCreateStream(&stream), "aclrtCreateStream"))
    return 2;
  if (HcclGetRootInfo(&root) != HCCL_SUCCESS || HcclCommInitRootInfo(1, &root, 0, &comm) != HCCL_SUCCESS) {
    std::fprintf(stderr, "cann9_host: no communicator\n");
    return 2;
  }
  uint8_t codes[8];
  for (int i = 0; i < 8; ++i) codes[i] = (uint8_t)(0x30 + i);
  void *send = device_buffer(8), *recv = device_buffer(8);
  for (HcclDataType t : {HCCL_DATA_TYPE_FP8E4M3, HCCL_DATA_TYPE_FP8E5M2, HCCL_DATA_TYPE_HIF8, HCCL_DATA_TYPE_FP8E8M0})
    if (!ok(aclrtMemcpy(send, 8, codes, 8, ACL_MEMCPY_HOST_TO_DEVICE), "H2D") ||
        HcclAllGather(send, recv, 8, t, comm, stream) != HCCL_SUCCESS ||
        !ok(aclrtSynchronizeStream(stream), "aclrtSynchronizeStream")) {
      std::fprintf(stderr, "cann9_host: HcclAllGather of type %d failed\n", (int)t);
      return 2;
    }
  HcclCommDestroy(comm);
  std::printf("all-gathers done\n");
  ok(aclrtResetDevice(0), "aclrtResetDevice");
  ok(aclFinalize(), "aclFinalize");
  return g_status;
}

// ---- addresses at launch -------------------------------------------------------------------------------------------

float linear(int i, float a, float b) { return a + b * (float)i; }

// A device buffer holding `v`, and a 1-d (or `shape`) FLOAT tensor over it.
struct DeviceTensor {
  void *dev = nullptr;
  aclTensor *t = nullptr;
  DeviceTensor(const std::vector<float> &v, std::vector<int64_t> shape = {}) {
    if (shape.empty()) shape = {(int64_t)v.size()};
    std::vector<int64_t> strides(shape.size(), 1);
    for (size_t d = shape.size() - 1; d-- > 0;) strides[d] = strides[d + 1] * shape[d + 1];
    dev = device_buffer(v.size() * 4);
    if (!v.empty()) ok(aclrtMemcpy(dev, v.size() * 4, v.data(), v.size() * 4, ACL_MEMCPY_HOST_TO_DEVICE), "H2D");
    t = aclCreateTensor(shape.data(), shape.size(), ACL_FLOAT, strides.data(), 0, ACL_FORMAT_ND, shape.data(),
                        shape.size(), dev);
  }
};

std::vector<float> filled(int n, float a, float b) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = linear(i, a, b);
  return v;
}

// phase1(&executor), the executor made repeatable, phase 2, rebind(executor), phase 2 again.
template <typename Phase1, typename Phase2, typename Rebind>
bool twice(const char *op, Phase1 phase1, Phase2 phase2, Rebind rebind, aclrtStream stream) {
  aclOpExecutor *executor = nullptr;
  return ok(phase1(&executor), op) && ok(aclSetAclOpExecutorRepeatable(executor), "aclSetAclOpExecutorRepeatable") &&
         ok(phase2(nullptr, 0, executor, stream), op) && ok(rebind(executor), "rebind") &&
         ok(phase2(nullptr, 0, executor, stream), op) && ok(aclrtSynchronizeStream(stream), "sync") &&
         ok(aclDestroyAclOpExecutor(executor), "aclDestroyAclOpExecutor");
}

// 1 and 4: Add (alpha 1) launched twice; `by_index` rebinds x through aclSetInputTensorAddr with an index CANN
// ignores, else through aclSetRawTensorAddr.
bool add_rebound(aclrtStream stream, bool by_index) {
  DeviceTensor x{filled(kN, 0.5f, by_index ? 2.0f : 0.5f)}, y{filled(kN, 1.0f, 1.0f)}, z{std::vector<float>(kN)};
  DeviceTensor x2{filled(kN, 100.0f, by_index ? -3.0f : -1.0f)};
  float one = 1.0f;
  aclScalar *alpha = aclCreateScalar(&one, ACL_FLOAT);
  uint64_t ws = 0;
  auto phase1 = [&](aclOpExecutor **e) { return aclnnAddGetWorkspaceSize(x.t, y.t, alpha, z.t, &ws, e); };
  auto rebind = [&](aclOpExecutor *e) {
    return by_index ? aclSetInputTensorAddr(e, 7, x.t, x2.dev) : aclSetRawTensorAddr(x.t, x2.dev);
  };
  return twice("aclnnAdd", phase1, aclnnAdd, rebind, stream);
}

// 2: FlashAttentionScore, B 1, S 4, N 2, D 8 in BSND; q rebound between the phases.
bool attention_rebound(aclrtStream stream) {
  constexpr int kS = 4, kHeads = 2, kD = 8, kCount = kS * kHeads * kD;
  const std::vector<int64_t> bsnd = {1, kS, kHeads, kD}, stats = {1, kHeads, kS, 8};
  std::vector<float> q1(kCount), q2(kCount), k(kCount), v(kCount);
  for (int i = 0; i < kCount; ++i) {
    q1[i] = (float)((i * 7) % 11 - 5) / 8.0f;
    q2[i] = (float)((i * 5) % 13 - 6) / 8.0f;
    k[i] = (float)((i * 3) % 7 - 3) / 4.0f;
    v[i] = (float)((i * 11) % 9 - 4) / 2.0f;
  }
  DeviceTensor q{q1, bsnd}, q_other{q2, bsnd}, tk{k, bsnd}, tv{v, bsnd}, out{std::vector<float>(kCount), bsnd};
  DeviceTensor smax{std::vector<float>(kHeads * kS * 8), stats}, ssum{std::vector<float>(kHeads * kS * 8), stats};
  char layout[] = "BSND";
  uint64_t ws = 0;
  aclOpExecutor *executor = nullptr;
  if (!ok(aclnnFlashAttentionScoreGetWorkspaceSize(q.t, tk.t, tv.t, nullptr, nullptr, nullptr, nullptr, nullptr,
                                                   1.0 / std::sqrt((double)kD), 1.0, 65536, 65536, kHeads, layout, 0, 0,
                                                   smax.t, ssum.t, nullptr, out.t, &ws, &executor),
          "aclnnFlashAttentionScoreGetWorkspaceSize"))
    return false;
  void *workspace = ws ? device_buffer(ws) : nullptr;
  return ok(aclSetRawTensorAddr(q.t, q_other.dev), "aclSetRawTensorAddr") &&
         ok(aclnnFlashAttentionScore(workspace, ws, executor, stream), "aclnnFlashAttentionScore") &&
         ok(aclrtSynchronizeStream(stream), "sync");
}

// 3: Cat of [a, b] along dim 0, then b's member rebound to b2 through aclSetDynamicInputTensorAddr.
bool cat_rebound(aclrtStream stream) {
  DeviceTensor a{filled(6, 1.0f, 1.0f), {2, 3}}, b{filled(6, 7.0f, 1.0f), {2, 3}}, b2{filled(6, -1.0f, -1.0f), {2, 3}};
  DeviceTensor out{std::vector<float>(12), {4, 3}};
  const aclTensor *members[2] = {a.t, b.t};
  aclTensorList *list = aclCreateTensorList(members, 2);
  uint64_t ws = 0;
  auto phase1 = [&](aclOpExecutor **e) { return aclnnCatGetWorkspaceSize(list, 0, out.t, &ws, e); };
  auto rebind = [&](aclOpExecutor *e) { return aclSetDynamicInputTensorAddr(e, 0, 1, list, b2.dev); };
  return twice("aclnnCat", phase1, aclnnCat, rebind, stream);
}

int addresses() {
  aclrtStream stream = nullptr;
  if (!ok(aclInit(nullptr), "aclInit") || !ok(aclrtSetDevice(0), "aclrtSetDevice") ||
      !ok(aclrtCreateStream(&stream), "aclrtCreateStream"))
    return 2;
  if (!add_rebound(stream, false) || !attention_rebound(stream) || !cat_rebound(stream) || !add_rebound(stream, true))
    return 2;
  std::printf("addresses done\n");
  ok(aclrtResetDevice(0), "aclrtResetDevice");
  ok(aclFinalize(), "aclFinalize");
  return g_status;
}

}  // namespace

int main(int argc, char **argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  int status = 2;
  if (mode == "kernels" && argc == 2)
    status = kernels();
  else if (mode == "models" && argc == 3)
    status = models(argv[2]);
  else if (mode == "acl-init-dump" && (argc == 4 || (argc == 5 && std::string(argv[4]) == "--callback")))
    status = acl_init_dump(argv[2], argv[3], argc == 5);
  else if (mode == "teardown-counted" && argc == 2)
    status = teardown_counted();
  else if (mode == "teardown-reference" && argc == 2)
    status = teardown_reference();
  else if (mode == "cast" && argc == 2)
    status = casts();
  else if (mode == "hccl-fp8" && argc == 2)
    status = hccl_fp8();
  else if (mode == "addresses" && argc == 2)
    status = addresses();
  else
    std::fprintf(stderr, "usage: see the head of test/integration/shim/cann9_host.cpp\n");
  std::printf("cann9_host: %s\n", status == 0 ? "all results match" : status == 1 ? "MISMATCH" : "API error");
  return status;
}
