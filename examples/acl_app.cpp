// acl_app: a plain ACL C++ program, linked directly against the CANN libraries (no dlsym), that runs
// one kernel of each launch family and checks the results itself:
//   1. aclop:  aclopCompileAndExecute("Add")                                 z = x + y
//   2. rt:     rtDevBinaryRegister + rtFunctionRegister + rtKernelLaunch      z = x + y  (fake_vector_add; z from
//              aclrtMallocAlign32, torch_npu's allocator, the others from aclrtMalloc)
//   3. aclnn:  aclnnMulGetWorkspaceSize + aclnnMul                           z = x * y
//   4. HCCL:   HcclAllReduce (sum) over a one-rank communicator               z unchanged
// Exit status 0 when every result matches, 1 on a mismatch, 2 on an API error.
// `acl_app --op-dump DIR` also turns CANN's single-op dump on for the whole run (dump_op_switch "on", inputs and
// outputs, files written by CANN under DIR), as a host that dumps its own kernels does.
// Every launch happens inside a `static` helper (see the LAUNCH SITES below): tests of the capture
// shim check that native stack frames name them, so they are kept out of line.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "acl/acl.h"
#include "acl/acl_op_compiler.h"
#include "aclnn/acl_meta.h"
#include "aclnnop/aclnn_mul.h"
#include "hccl/hccl.h"
#include "runtime/kernel.h"

#ifndef ACL_APP_DEFAULT_ASCEND_HOME
#define ACL_APP_DEFAULT_ASCEND_HOME ""
#endif

#define NOINLINE __attribute__((noinline))

namespace {

constexpr int64_t kN = 8;

int g_api_errors = 0;

bool ok(long rc, const char *what) {
  if (rc == 0) return true;
  const char *msg = aclGetRecentErrMsg();
  std::fprintf(stderr, "acl_app: %s failed with %ld%s%s\n", what, rc, msg && *msg ? ": " : "", msg ? msg : "");
  ++g_api_errors;
  return false;
}

// Device memory from aclrtMalloc, or from aclrtMallocAlign32 (torch_npu's caching allocator) when `align32`.
struct DeviceBuffer {
  void *ptr = nullptr;
  size_t bytes = 0;
  explicit DeviceBuffer(size_t n, bool align32 = false) : bytes(n) {
    if (align32)
      ok(aclrtMallocAlign32(&ptr, n, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMallocAlign32");
    else
      ok(aclrtMalloc(&ptr, n, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc");
  }
  ~DeviceBuffer() {
    if (ptr) aclrtFree(ptr);
  }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
};

}  // namespace

static void upload(DeviceBuffer &dst, const std::vector<float> &host) {
  ok(aclrtMemcpy(dst.ptr, dst.bytes, host.data(), host.size() * sizeof(float), ACL_MEMCPY_HOST_TO_DEVICE),
     "aclrtMemcpy(H2D)");
}

static std::vector<float> download(aclrtStream stream, const DeviceBuffer &src) {
  std::vector<float> host(src.bytes / sizeof(float), NAN);
  if (!ok(aclrtSynchronizeStream(stream), "aclrtSynchronizeStream")) return host;
  ok(aclrtMemcpy(host.data(), src.bytes, src.ptr, src.bytes, ACL_MEMCPY_DEVICE_TO_HOST), "aclrtMemcpy(D2H)");
  return host;
}

// Compares against the reference and prints one line; false on a mismatch.
static bool verify(const char *what, const std::vector<float> &got, const std::vector<float> &want) {
  bool same = got.size() == want.size();
  for (size_t i = 0; same && i < got.size(); ++i) same = std::fabs(got[i] - want[i]) <= 1e-6f * (1.0f + std::fabs(want[i]));
  std::printf("%-8s %s [", what, same ? "ok      " : "MISMATCH");
  for (size_t i = 0; i < got.size(); ++i) std::printf(i ? " %g" : "%g", got[i]);
  std::printf("]\n");
  return same;
}

// ---- LAUNCH SITES -----------------------------------------------------------------------------------

static NOINLINE bool launch_aclop_add(aclrtStream stream, DeviceBuffer &x, DeviceBuffer &y, DeviceBuffer &z) {
  const int64_t dims[1] = {kN};
  aclTensorDesc *in_desc[2] = {aclCreateTensorDesc(ACL_FLOAT, 1, dims, ACL_FORMAT_ND),
                               aclCreateTensorDesc(ACL_FLOAT, 1, dims, ACL_FORMAT_ND)};
  aclTensorDesc *out_desc[1] = {aclCreateTensorDesc(ACL_FLOAT, 1, dims, ACL_FORMAT_ND)};
  aclDataBuffer *in_buf[2] = {aclCreateDataBuffer(x.ptr, x.bytes), aclCreateDataBuffer(y.ptr, y.bytes)};
  aclDataBuffer *out_buf[1] = {aclCreateDataBuffer(z.ptr, z.bytes)};
  aclopAttr *attr = aclopCreateAttr();
  bool good = ok(aclopCompileAndExecute("Add", 2, in_desc, in_buf, 1, out_desc, out_buf, attr, ACL_ENGINE_SYS,
                                        ACL_COMPILE_SYS, nullptr, stream),
                 "aclopCompileAndExecute(Add)");
  // Descriptors and buffers may go right away: the launch captured what it needs.
  aclopDestroyAttr(attr);
  for (aclTensorDesc *d : in_desc) aclDestroyTensorDesc(d);
  aclDestroyTensorDesc(out_desc[0]);
  for (aclDataBuffer *b : in_buf) aclDestroyDataBuffer(b);
  aclDestroyDataBuffer(out_buf[0]);
  return good;
}

static char g_vector_add_stub;  // the host-side stub whose address identifies the registered kernel

static NOINLINE bool launch_rt_vector_add(aclrtStream stream, DeviceBuffer &x, DeviceBuffer &y, DeviceBuffer &z,
                                          void **binary_handle) {
  const char *env = std::getenv("ASCEND_HOME_PATH");
  std::string home = env && *env ? env : ACL_APP_DEFAULT_ASCEND_HOME;
  std::string path = home + "/opp/kernel/fake_kernels.o";
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    std::fprintf(stderr, "acl_app: cannot read the kernel binary %s\n", path.c_str());
    ++g_api_errors;
    return false;
  }
  std::vector<char> elf(std::istreambuf_iterator<char>(f), {});  // the runtime copies what it keeps
  rtDevBinary_t bin{RT_DEV_BINARY_MAGIC_ELF, 0, elf.data(), elf.size()};
  if (!ok(rtDevBinaryRegister(&bin, binary_handle), "rtDevBinaryRegister")) return false;
  if (!ok(rtFunctionRegister(*binary_handle, &g_vector_add_stub, "fake_vector_add", "fake_vector_add", FUNC_MODE_NORMAL),
          "rtFunctionRegister"))
    return false;
  struct {
    uint64_t x, y, z, n;
  } args{(uint64_t)(uintptr_t)x.ptr, (uint64_t)(uintptr_t)y.ptr, (uint64_t)(uintptr_t)z.ptr, (uint64_t)kN};
  return ok(rtKernelLaunch(&g_vector_add_stub, 1, &args, sizeof args, nullptr, stream), "rtKernelLaunch");
}

static NOINLINE bool launch_aclnn_mul(aclrtStream stream, DeviceBuffer &x, DeviceBuffer &y, DeviceBuffer &z,
                                      DeviceBuffer &workspace_pool) {
  const int64_t dims[1] = {kN}, strides[1] = {1}, storage[1] = {kN};
  aclTensor *tx = aclCreateTensor(dims, 1, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, storage, 1, x.ptr);
  aclTensor *ty = aclCreateTensor(dims, 1, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, storage, 1, y.ptr);
  aclTensor *tz = aclCreateTensor(dims, 1, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, storage, 1, z.ptr);
  uint64_t ws = 0;
  aclOpExecutor *executor = nullptr;
  bool good = ok(aclnnMulGetWorkspaceSize(tx, ty, tz, &ws, &executor), "aclnnMulGetWorkspaceSize");
  if (good && ws > workspace_pool.bytes) {
    std::fprintf(stderr, "acl_app: aclnnMul wants %llu bytes of workspace\n", (unsigned long long)ws);
    ++g_api_errors;
    good = false;
  }
  if (good) good = ok(aclnnMul(ws ? workspace_pool.ptr : nullptr, ws, executor, stream), "aclnnMul");
  aclDestroyTensor(tx);
  aclDestroyTensor(ty);
  aclDestroyTensor(tz);
  return good;
}

static NOINLINE bool launch_hccl_all_reduce(aclrtStream stream, DeviceBuffer &z, HcclComm comm) {
  return ok(HcclAllReduce(z.ptr, z.ptr, kN, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, stream), "HcclAllReduce");
}

// ----------------------------------------------------------------------------------------------------

// aclmdlInitDump + aclmdlSetDump with a single-op dump config written into `dir`.
static bool start_op_dump(const std::string &dir) {
  std::string cfg = dir + "/acl_app_dump.json";
  std::ofstream(cfg) << "{\"dump\": {\"dump_path\": \"" << dir
                     << "\", \"dump_list\": [], \"dump_op_switch\": \"on\", \"dump_mode\": \"all\"}}";
  return ok(aclmdlInitDump(), "aclmdlInitDump") && ok(aclmdlSetDump(cfg.c_str()), "aclmdlSetDump");
}

int main(int argc, char **argv) {
  if (!ok(aclInit(nullptr), "aclInit") || !ok(aclrtSetDevice(0), "aclrtSetDevice")) return 2;
  const bool op_dump = argc == 3 && std::string(argv[1]) == "--op-dump";
  if (op_dump && !start_op_dump(argv[2])) return 2;
  aclrtStream stream = nullptr;
  if (!ok(aclrtCreateStream(&stream), "aclrtCreateStream")) return 2;

  std::vector<float> hx(kN), hy(kN);
  for (int64_t i = 0; i < kN; ++i) {
    hx[i] = 0.5f * (float)i - 1.0f;
    hy[i] = 2.0f + 0.25f * (float)i;
  }
  std::vector<float> sum(kN), prod(kN);
  for (int64_t i = 0; i < kN; ++i) {
    sum[i] = hx[i] + hy[i];
    prod[i] = hx[i] * hy[i];
  }

  bool all_ok = true;
  {
    const size_t bytes = kN * sizeof(float);
    DeviceBuffer x(bytes), y(bytes), z_op(bytes), z_rt(bytes, true), z_nn(bytes), workspace(1 << 20);
    upload(x, hx);
    upload(y, hy);

    if (launch_aclop_add(stream, x, y, z_op)) all_ok &= verify("aclop", download(stream, z_op), sum);

    void *binary = nullptr;
    if (launch_rt_vector_add(stream, x, y, z_rt, &binary)) all_ok &= verify("rt", download(stream, z_rt), sum);
    if (binary) ok(rtDevBinaryUnRegister(binary), "rtDevBinaryUnRegister");

    if (launch_aclnn_mul(stream, x, y, z_nn, workspace)) all_ok &= verify("aclnn", download(stream, z_nn), prod);

    HcclRootInfo root{};
    HcclComm comm = nullptr;
    if (ok(HcclGetRootInfo(&root), "HcclGetRootInfo") && ok(HcclCommInitRootInfo(1, &root, 0, &comm), "HcclCommInitRootInfo")) {
      if (launch_hccl_all_reduce(stream, z_nn, comm)) all_ok &= verify("hccl", download(stream, z_nn), prod);
      ok(HcclCommDestroy(comm), "HcclCommDestroy");
    }
    ok(aclrtSynchronizeStream(stream), "aclrtSynchronizeStream");
  }

  if (op_dump) ok(aclmdlFinalizeDump(), "aclmdlFinalizeDump");  // every dump file written
  ok(aclrtDestroyStream(stream), "aclrtDestroyStream");
  ok(aclrtResetDevice(0), "aclrtResetDevice");
  ok(aclFinalize(), "aclFinalize");
  if (g_api_errors > 0) {
    std::printf("acl_app: %d API error(s)\n", g_api_errors);
    return 2;
  }
  std::printf("acl_app: %s\n", all_ok ? "all results match" : "MISMATCH");
  return all_ok ? 0 : 1;
}
