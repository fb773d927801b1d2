// A client written from shared/reference/cann_abi.md alone: its own declarations (none of the stand-in's
// headers), libraries opened with dlopen from $ASCEND_HOME_PATH/lib64 and every function found with
// dlsym on the handle, as torch_npu and MindSpore do. Checks Add, Matmul, LayerNorm and Cat on strided,
// offset, bf16 tensors against reference math written here.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern "C" {
typedef int aclError;
typedef int32_t aclnnStatus;
typedef void *aclrtStream;
typedef struct aclTensor aclTensor;
typedef struct aclScalar aclScalar;
typedef struct aclIntArray aclIntArray;
typedef struct aclTensorList aclTensorList;
typedef struct aclOpExecutor aclOpExecutor;
}

namespace {

constexpr int kFloat = 0, kBf16 = 27, kFormatNd = 2;
constexpr int kH2D = 1, kD2H = 2;

using InitFn = aclError (*)(const char *);
using SetDeviceFn = aclError (*)(int32_t);
using MallocFn = aclError (*)(void **, size_t, int);
using FreeFn = aclError (*)(void *);
using MemcpyFn = aclError (*)(void *, size_t, const void *, size_t, int);
using SyncFn = aclError (*)(aclrtStream);
using CreateStreamFn = aclError (*)(aclrtStream *);
using CreateTensorFn = aclTensor *(*)(const int64_t *, uint64_t, int, const int64_t *, int64_t, int, const int64_t *,
                                      uint64_t, void *);
using CreateScalarFn = aclScalar *(*)(void *, int);
using CreateIntArrayFn = aclIntArray *(*)(const int64_t *, uint64_t);
using CreateTensorListFn = aclTensorList *(*)(const aclTensor *const *, uint64_t);
using Phase2Fn = aclnnStatus (*)(void *, uint64_t, aclOpExecutor *, aclrtStream);

uint16_t to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}
float from_bf16(uint16_t b) {
  uint32_t x = (uint32_t)b << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}
float round_bf16(float f) { return from_bf16(to_bf16(f)); }

class AbiOnly : public ::testing::Test {
 protected:
  void *acl = nullptr, *nnopbase = nullptr, *opapi = nullptr;
  MallocFn malloc_ = nullptr;
  MemcpyFn memcpy_ = nullptr;
  CreateTensorFn create_tensor = nullptr;
  aclrtStream stream = nullptr;
  SyncFn sync = nullptr;

  static std::string lib(const char *name) {
    const char *home = std::getenv("ASCEND_HOME_PATH");
    return std::string(home ? home : "build/fake_cann") + "/lib64/" + name;
  }
  template <typename F>
  F sym(void *h, const char *name) {
    void *p = dlsym(h, name);
    EXPECT_NE(p, nullptr) << name;
    return reinterpret_cast<F>(p);
  }

  void SetUp() override {
    acl = dlopen(lib("libascendcl.so").c_str(), RTLD_LAZY);
    nnopbase = dlopen(lib("libnnopbase.so").c_str(), RTLD_LAZY);
    opapi = dlopen(lib("libopapi.so").c_str(), RTLD_LAZY);
    ASSERT_TRUE(acl && nnopbase && opapi) << dlerror();
    sym<InitFn>(acl, "aclInit")(nullptr);
    ASSERT_EQ(sym<SetDeviceFn>(acl, "aclrtSetDevice")(0), 0);
    malloc_ = sym<MallocFn>(acl, "aclrtMalloc");
    memcpy_ = sym<MemcpyFn>(acl, "aclrtMemcpy");
    sync = sym<SyncFn>(acl, "aclrtSynchronizeStream");
    ASSERT_EQ(sym<CreateStreamFn>(acl, "aclrtCreateStream")(&stream), 0);
    // libopapi depends on libnnopbase, so the meta API is reachable through the opapi handle too.
    create_tensor = sym<CreateTensorFn>(opapi, "aclCreateTensor");
  }

  void *upload_bf16(const std::vector<float> &v) {
    std::vector<uint16_t> bits(v.size());
    for (size_t i = 0; i < v.size(); ++i) bits[i] = to_bf16(v[i]);
    void *d = nullptr;
    EXPECT_EQ(malloc_(&d, bits.size() * 2, 0), 0);
    EXPECT_EQ(memcpy_(d, bits.size() * 2, bits.data(), bits.size() * 2, kH2D), 0);
    return d;
  }
  std::vector<float> download_bf16(void *d, size_t n) {
    EXPECT_EQ(sync(stream), 0);
    std::vector<uint16_t> bits(n);
    EXPECT_EQ(memcpy_(bits.data(), n * 2, d, n * 2, kD2H), 0);
    std::vector<float> out(n);
    for (size_t i = 0; i < n; ++i) out[i] = from_bf16(bits[i]);
    return out;
  }
  aclTensor *view(void *storage, int64_t storage_elems, std::vector<int64_t> shape, std::vector<int64_t> strides,
                  int64_t offset) {
    int64_t st[1] = {storage_elems};
    return create_tensor(shape.data(), shape.size(), kBf16, strides.data(), offset, kFormatNd, st, 1, storage);
  }
  // Runs phase 1 (already done by the caller) + phase 2 with a real workspace.
  void run(const char *op, uint64_t ws, aclOpExecutor *ex) {
    void *w = nullptr;
    if (ws > 0) {
      ASSERT_EQ(malloc_(&w, ws, 0), 0);
    }
    ASSERT_EQ(sym<Phase2Fn>(opapi, op)(w, ws, ex, stream), 0) << op;
    ASSERT_EQ(sync(stream), 0);
  }
};

std::vector<float> iota_values(size_t n, float scale, float shift) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = round_bf16(std::sin((float)i * 0.7f) * scale + shift);
  return v;
}

TEST_F(AbiOnly, AddOnTransposedOffsetBf16Views) {
  // self: a 2x3 view with row stride 5 at offset 1 of a 12-element storage.
  auto s = iota_values(12, 2.0f, 0.5f), o = iota_values(8, 1.5f, -0.25f);
  void *ds = upload_bf16(s), *dother = upload_bf16(o), *dout = upload_bf16(std::vector<float>(6, 0));
  aclTensor *self = view(ds, 12, {2, 3}, {5, 1}, 1);
  aclTensor *other = view(dother, 8, {2, 3}, {1, 2}, 2);  // a transposed (column-major) view, offset 2
  aclTensor *out = view(dout, 6, {2, 3}, {3, 1}, 0);
  float alpha = 0.5f;
  aclScalar *a = sym<CreateScalarFn>(nnopbase, "aclCreateScalar")(&alpha, kFloat);
  using Fn = aclnnStatus (*)(const aclTensor *, const aclTensor *, const aclScalar *, aclTensor *, uint64_t *,
                             aclOpExecutor **);
  uint64_t ws = 0;
  aclOpExecutor *ex = nullptr;
  ASSERT_EQ(sym<Fn>(opapi, "aclnnAddGetWorkspaceSize")(self, other, a, out, &ws, &ex), 0);
  run("aclnnAdd", ws, ex);
  auto got = download_bf16(dout, 6);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      float want = round_bf16(s[1 + i * 5 + j] + 0.5f * o[2 + i + j * 2]);
      EXPECT_NEAR(got[i * 3 + j], want, 1e-2f * (1 + std::fabs(want))) << i << "," << j;
    }
}

TEST_F(AbiOnly, MatmulOnTransposedBf16View) {
  // self = A^T where A is a contiguous 3x2 storage; mat2 = a 3x4 view at offset 3 of a 15-element storage.
  auto a = iota_values(6, 1.0f, 0.0f), b = iota_values(15, 1.0f, 0.1f);
  void *da = upload_bf16(a), *db = upload_bf16(b), *dout = upload_bf16(std::vector<float>(8, 0));
  aclTensor *self = view(da, 6, {2, 3}, {1, 2}, 0);
  aclTensor *mat2 = view(db, 15, {3, 4}, {4, 1}, 3);
  aclTensor *out = view(dout, 8, {2, 4}, {4, 1}, 0);
  using Fn = aclnnStatus (*)(const aclTensor *, const aclTensor *, aclTensor *, int8_t, uint64_t *, aclOpExecutor **);
  uint64_t ws = 0;
  aclOpExecutor *ex = nullptr;
  ASSERT_EQ(sym<Fn>(opapi, "aclnnMatmulGetWorkspaceSize")(self, mat2, out, 0, &ws, &ex), 0);
  run("aclnnMatmul", ws, ex);
  auto got = download_bf16(dout, 8);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j) {
      double acc = 0;
      for (int k = 0; k < 3; ++k) acc += (double)a[k * 2 + i] * b[3 + k * 4 + j];
      EXPECT_NEAR(got[i * 4 + j], acc, 2e-2 * (1 + std::fabs(acc))) << i << "," << j;
    }
}

TEST_F(AbiOnly, LayerNormOnOffsetBf16Rows) {
  // input: 2 rows of 4, row stride 6, offset 2; weight/bias contiguous.
  auto x = iota_values(14, 3.0f, 1.0f), w = iota_values(4, 0.5f, 1.0f), bvals = iota_values(4, 0.2f, 0.0f);
  void *dx = upload_bf16(x), *dw = upload_bf16(w), *db = upload_bf16(bvals);
  void *dout = upload_bf16(std::vector<float>(8, 0));
  aclTensor *input = view(dx, 14, {2, 4}, {6, 1}, 2);
  aclTensor *weight = view(dw, 4, {4}, {1}, 0), *bias = view(db, 4, {4}, {1}, 0);
  aclTensor *out = view(dout, 8, {2, 4}, {4, 1}, 0);
  int64_t norm_shape[1] = {4};
  aclIntArray *ns = sym<CreateIntArrayFn>(nnopbase, "aclCreateIntArray")(norm_shape, 1);
  using Fn = aclnnStatus (*)(const aclTensor *, const aclIntArray *, const aclTensor *, const aclTensor *, double,
                             aclTensor *, aclTensor *, aclTensor *, uint64_t *, aclOpExecutor **);
  uint64_t ws = 0;
  aclOpExecutor *ex = nullptr;
  const double eps = 1e-5;
  ASSERT_EQ(sym<Fn>(opapi, "aclnnLayerNormGetWorkspaceSize")(input, ns, weight, bias, eps, out, nullptr, nullptr, &ws,
                                                              &ex),
            0);
  run("aclnnLayerNorm", ws, ex);
  auto got = download_bf16(dout, 8);
  for (int r = 0; r < 2; ++r) {
    double mean = 0, var = 0;
    for (int c = 0; c < 4; ++c) mean += x[2 + r * 6 + c];
    mean /= 4;
    for (int c = 0; c < 4; ++c) var += (x[2 + r * 6 + c] - mean) * (x[2 + r * 6 + c] - mean);
    var /= 4;
    for (int c = 0; c < 4; ++c) {
      double want = (x[2 + r * 6 + c] - mean) / std::sqrt(var + eps) * w[c] + bvals[c];
      EXPECT_NEAR(got[r * 4 + c], want, 3e-2 * (1 + std::fabs(want))) << r << "," << c;
    }
  }
}

TEST_F(AbiOnly, CatOfStridedBf16Tensors) {
  auto p = iota_values(10, 1.0f, 0.0f), q = iota_values(9, 2.0f, 1.0f);
  void *dp = upload_bf16(p), *dq = upload_bf16(q), *dout = upload_bf16(std::vector<float>(10, 0));
  aclTensor *first = view(dp, 10, {2, 2}, {4, 2}, 1);   // every other element of rows 0 and 1, offset 1
  aclTensor *second = view(dq, 9, {3, 2}, {1, 3}, 0);   // transposed 2x3 storage
  aclTensor *out = view(dout, 10, {5, 2}, {2, 1}, 0);
  const aclTensor *items[2] = {first, second};
  aclTensorList *list = sym<CreateTensorListFn>(nnopbase, "aclCreateTensorList")(items, 2);
  using Fn = aclnnStatus (*)(const aclTensorList *, int64_t, aclTensor *, uint64_t *, aclOpExecutor **);
  uint64_t ws = 0;
  aclOpExecutor *ex = nullptr;
  ASSERT_EQ(sym<Fn>(opapi, "aclnnCatGetWorkspaceSize")(list, 0, out, &ws, &ex), 0);
  run("aclnnCat", ws, ex);
  auto got = download_bf16(dout, 10);
  std::vector<float> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) want.push_back(p[1 + i * 4 + j * 2]);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j) want.push_back(q[i + j * 3]);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << i;  // a copy is exact
}

}  // namespace
