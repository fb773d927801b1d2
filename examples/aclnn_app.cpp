// aclnn_app: a plain C++ program that needs only the runtime and the aclnn ops, linked the way CANN 9 links such a
// program: libacl_rt, libnnopbase and libopapi, nothing else (bin/cann9/aclnn_app; bin/aclnn_app is the same source
// linked against CANN 8.x's libascendcl). Two dense layers, each one kernel of four aclnn ops, over memory from
// aclrtMalloc and aclrtMallocAlign32 (torch_npu's allocator):
//   h = Relu(Matmul(x, w) + b)          aclnnMatmul, aclnnAdd (alpha 1), aclnnRelu
//   h += 0.5 * b                        aclnnInplaceAdd (broadcast over the rows)
// then the second layer over h. The results are checked against the same computation on the host (products summed
// in double in index order, rounded once, as the stand-in's kernel does). Exit status 0 when every result matches, 1 on
// a mismatch, 2 on an API error. Every launch happens in a `static` NOINLINE helper (LAUNCH SITES), so that native
// stack frames name them.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "acl/acl.h"
#include "aclnn/acl_meta.h"
#include "aclnnop/aclnn_add.h"
#include "aclnnop/aclnn_matmul.h"
#include "aclnnop/aclnn_relu.h"

#define NOINLINE __attribute__((noinline))

namespace {

constexpr int64_t kRows = 4, kIn = 8, kHidden = 6;

int g_api_errors = 0;

bool ok(long rc, const char *what) {
  if (rc == 0) return true;
  const char *msg = aclGetRecentErrMsg();
  std::fprintf(stderr, "aclnn_app: %s failed with %ld%s%s\n", what, rc, msg && *msg ? ": " : "", msg ? msg : "");
  ++g_api_errors;
  return false;
}

// A row-major fp32 matrix in device memory: from aclrtMalloc, or from aclrtMallocAlign32 when `align32`.
struct Matrix {
  int64_t rows = 0, cols = 0;
  void *ptr = nullptr;
  aclTensor *tensor = nullptr;
  Matrix(int64_t r, int64_t c, bool align32) : rows(r), cols(c) {
    const size_t bytes = (size_t)(r * c) * sizeof(float);
    if (align32)
      ok(aclrtMallocAlign32(&ptr, bytes, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMallocAlign32");
    else
      ok(aclrtMalloc(&ptr, bytes, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc");
    const int64_t dims[2] = {r, c}, strides[2] = {c, 1};
    tensor = aclCreateTensor(dims, 2, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, dims, 2, ptr);
  }
  ~Matrix() {
    aclDestroyTensor(tensor);
    if (ptr) aclrtFree(ptr);
  }
  Matrix(const Matrix &) = delete;
  Matrix &operator=(const Matrix &) = delete;
  size_t bytes() const { return (size_t)(rows * cols) * sizeof(float); }
};

void upload(Matrix &m, const std::vector<float> &host) {
  ok(aclrtMemcpy(m.ptr, m.bytes(), host.data(), host.size() * sizeof(float), ACL_MEMCPY_HOST_TO_DEVICE), "aclrtMemcpy");
}

std::vector<float> download(aclrtStream stream, const Matrix &m) {
  std::vector<float> host((size_t)(m.rows * m.cols), NAN);
  if (ok(aclrtSynchronizeStream(stream), "aclrtSynchronizeStream"))
    ok(aclrtMemcpy(host.data(), m.bytes(), m.ptr, m.bytes(), ACL_MEMCPY_DEVICE_TO_HOST), "aclrtMemcpy");
  return host;
}

bool workspace_fits(const char *op, uint64_t ws, uint64_t pool_bytes) {
  if (ws <= pool_bytes) return true;
  std::fprintf(stderr, "aclnn_app: aclnn%s wants %llu bytes of workspace\n", op, (unsigned long long)ws);
  ++g_api_errors;
  return false;
}

// Phase 1, then phase 2 with its workspace from `pool`: direct calls, as a program makes them.
#define ACLNN_LAUNCH(op, ...)                                                                              \
  [&] {                                                                                                    \
    uint64_t ws = 0;                                                                                       \
    aclOpExecutor *executor = nullptr;                                                                     \
    return ok(aclnn##op##GetWorkspaceSize(__VA_ARGS__, &ws, &executor), "aclnn" #op "GetWorkspaceSize") && \
           workspace_fits(#op, ws, pool_bytes) &&                                                          \
           ok(aclnn##op(ws ? pool : nullptr, ws, executor, stream), "aclnn" #op);                          \
  }()

// The host's reference: Relu(x @ w + b) + 0.5 * b, products summed in double in index order.
std::vector<float> reference(const std::vector<float> &x, const std::vector<float> &w, const std::vector<float> &b,
                             int64_t rows, int64_t in, int64_t out) {
  std::vector<float> h((size_t)(rows * out));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < out; ++c) {
      double acc = 0;
      for (int64_t k = 0; k < in; ++k) acc += (double)x[r * in + k] * (double)w[k * out + c];
      const float sum = (float)acc + b[c];
      h[r * out + c] = (sum > 0.0f ? sum : 0.0f) + 0.5f * b[c];
    }
  return h;
}

bool verify(const char *what, const std::vector<float> &got, const std::vector<float> &want) {
  bool same = got.size() == want.size();
  for (size_t i = 0; same && i < got.size(); ++i)
    same = std::fabs(got[i] - want[i]) <= 1e-6f * (1.0f + std::fabs(want[i]));
  std::printf("%-8s %s\n", what, same ? "ok" : "MISMATCH");
  return same;
}

}  // namespace

// ---- LAUNCH SITES -----------------------------------------------------------------------------------

// h = Relu(x @ w + b) + 0.5 * b; `pre` holds x @ w + b.
static NOINLINE bool launch_dense(aclrtStream stream, Matrix &x, Matrix &w, Matrix &b, Matrix &pre, Matrix &h,
                                  void *pool, uint64_t pool_bytes) {
  float one = 1.0f, half = 0.5f;
  aclScalar *alpha = aclCreateScalar(&one, ACL_FLOAT), *scale = aclCreateScalar(&half, ACL_FLOAT);
  const bool good = ACLNN_LAUNCH(Matmul, x.tensor, w.tensor, pre.tensor, 0) &&
                    ACLNN_LAUNCH(Add, pre.tensor, b.tensor, alpha, pre.tensor) &&
                    ACLNN_LAUNCH(Relu, pre.tensor, h.tensor) && ACLNN_LAUNCH(InplaceAdd, h.tensor, b.tensor, scale);
  aclDestroyScalar(alpha);
  aclDestroyScalar(scale);
  return good;
}

// ----------------------------------------------------------------------------------------------------

int main() {
  if (!ok(aclInit(nullptr), "aclInit") || !ok(aclrtSetDevice(0), "aclrtSetDevice")) return 2;
  aclrtStream stream = nullptr;
  if (!ok(aclrtCreateStream(&stream), "aclrtCreateStream")) return 2;

  std::vector<float> hx(kRows * kIn), hw1(kIn * kHidden), hb1(kHidden), hw2(kHidden * kHidden), hb2(kHidden);
  for (size_t i = 0; i < hx.size(); ++i) hx[i] = 0.25f * (float)(i % 7) - 0.5f;
  for (size_t i = 0; i < hw1.size(); ++i) hw1[i] = 0.125f * (float)((i * 5) % 9) - 0.5f;
  for (size_t i = 0; i < hw2.size(); ++i) hw2[i] = 0.0625f * (float)((i * 3) % 11) - 0.25f;
  for (size_t i = 0; i < hb1.size(); ++i) hb1[i] = 0.1f * (float)i - 0.2f;
  for (size_t i = 0; i < hb2.size(); ++i) hb2[i] = 0.3f - 0.05f * (float)i;
  const std::vector<float> want1 = reference(hx, hw1, hb1, kRows, kIn, kHidden);
  const std::vector<float> want2 = reference(want1, hw2, hb2, kRows, kHidden, kHidden);

  bool all_ok = true;
  {
    Matrix x(kRows, kIn, false), w1(kIn, kHidden, true), b1(1, kHidden, true), pre1(kRows, kHidden, false),
        h1(kRows, kHidden, true), w2(kHidden, kHidden, true), b2(1, kHidden, false), pre2(kRows, kHidden, true),
        h2(kRows, kHidden, false);
    void *pool = nullptr;
    const uint64_t pool_bytes = 1 << 20;
    ok(aclrtMallocAlign32(&pool, pool_bytes, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMallocAlign32");
    upload(x, hx);
    upload(w1, hw1);
    upload(b1, hb1);
    upload(w2, hw2);
    upload(b2, hb2);
    if (launch_dense(stream, x, w1, b1, pre1, h1, pool, pool_bytes))
      all_ok &= verify("layer 1", download(stream, h1), want1);
    if (launch_dense(stream, h1, w2, b2, pre2, h2, pool, pool_bytes))
      all_ok &= verify("layer 2", download(stream, h2), want2);
    ok(aclrtSynchronizeStream(stream), "aclrtSynchronizeStream");
    if (pool) aclrtFree(pool);
  }

  ok(aclrtDestroyStream(stream), "aclrtDestroyStream");
  ok(aclrtResetDevice(0), "aclrtResetDevice");
  ok(aclFinalize(), "aclFinalize");
  if (g_api_errors > 0) {
    std::printf("aclnn_app: %d API error(s)\n", g_api_errors);
    return 2;
  }
  std::printf("aclnn_app: %s\n", all_ok ? "all results match" : "MISMATCH");
  return all_ok ? 0 : 1;
}
