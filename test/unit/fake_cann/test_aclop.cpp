// The aclop path: attributes, every built-in op through aclopExecuteV2, aclopCompileAndExecute and
// aclopCompileAndExecuteV2 against reference math written here (own index arithmetic, own fp16/bf16
// decoding), dynamic output shapes, error codes, and asynchrony.
#include <fcntl.h>
#include <gelf.h>
#include <gtest/gtest.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../time_scale.h"
#include "acl/acl.h"
#include "acl/acl_op_compiler.h"

#ifndef ACL_ERROR_RT_CONTEXT_NULL
#define ACL_ERROR_RT_CONTEXT_NULL 107002
#endif

namespace {

// Before any stream task runs (the *_async ctests): a slower machine gets a longer task delay, so that the scaled
// "did not wait" bound of AsyncResultsAreValidOnlyAfterSynchronize stays under it.
[[maybe_unused]] const bool g_delay_scaled = msprobe::test::scale_fake_cann_task_delay();

using Dims = std::vector<int64_t>;

int64_t count(const Dims &d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

// ---- element encoding, independent of the stand-in's conversions ----

float half_to_float(uint16_t h) {
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e == 31) return m ? NAN : ((h & 0x8000) ? -INFINITY : INFINITY);
  float mag = e == 0 ? std::ldexp((float)m, -24) : std::ldexp(1.0f + m / 1024.0f, e - 15);
  return (h & 0x8000) ? -mag : mag;
}
float bf16_to_float(uint16_t b) {
  uint32_t bits = (uint32_t)b << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
// Only for values exactly representable (the tests pick such inputs; checked by decoding back).
uint16_t exact_half(double v) {
  if (v == 0) return 0;
  int e;
  double frac = std::frexp(std::fabs(v), &e);
  uint16_t bits =
      (uint16_t)((v < 0 ? 0x8000 : 0) | ((e - 1 + 15) << 10) | (uint16_t)std::lround((frac * 2 - 1) * 1024));
  EXPECT_EQ(half_to_float(bits), v) << "input not exact in fp16";
  return bits;
}
uint16_t exact_bf16(double v) {
  float f = (float)v;
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  EXPECT_EQ(bits & 0xffff, 0u) << "input not exact in bf16: " << v;
  return (uint16_t)(bits >> 16);
}

size_t elem_size(aclDataType t) {
  switch (t) {
    case ACL_FLOAT:
    case ACL_INT32: return 4;
    case ACL_FLOAT16:
    case ACL_BF16: return 2;
    case ACL_INT64:
    case ACL_DOUBLE: return 8;
    case ACL_INT8:
    case ACL_UINT8:
    case ACL_BOOL: return 1;
    default: return 0;
  }
}

std::vector<char> encode(aclDataType t, const std::vector<double> &v) {
  std::vector<char> out(v.size() * elem_size(t));
  for (size_t i = 0; i < v.size(); ++i) {
    char *p = out.data() + i * elem_size(t);
    switch (t) {
      case ACL_FLOAT: {
        float f = (float)v[i];
        std::memcpy(p, &f, 4);
        break;
      }
      case ACL_FLOAT16: {
        uint16_t h = exact_half(v[i]);
        std::memcpy(p, &h, 2);
        break;
      }
      case ACL_BF16: {
        uint16_t h = exact_bf16(v[i]);
        std::memcpy(p, &h, 2);
        break;
      }
      case ACL_INT32: {
        int32_t x = (int32_t)v[i];
        std::memcpy(p, &x, 4);
        break;
      }
      case ACL_INT64: {
        int64_t x = (int64_t)v[i];
        std::memcpy(p, &x, 8);
        break;
      }
      case ACL_DOUBLE: std::memcpy(p, &v[i], 8); break;
      case ACL_INT8: {
        int8_t x = (int8_t)v[i];
        std::memcpy(p, &x, 1);
        break;
      }
      case ACL_UINT8:
      case ACL_BOOL: {
        uint8_t x = (uint8_t)v[i];
        std::memcpy(p, &x, 1);
        break;
      }
      default: ADD_FAILURE() << "dtype " << t;
    }
  }
  return out;
}

std::vector<double> decode(aclDataType t, const std::vector<char> &b) {
  size_t es = elem_size(t), n = b.size() / es;
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) {
    const char *p = b.data() + i * es;
    switch (t) {
      case ACL_FLOAT: {
        float f;
        std::memcpy(&f, p, 4);
        out[i] = f;
        break;
      }
      case ACL_FLOAT16: {
        uint16_t h;
        std::memcpy(&h, p, 2);
        out[i] = half_to_float(h);
        break;
      }
      case ACL_BF16: {
        uint16_t h;
        std::memcpy(&h, p, 2);
        out[i] = bf16_to_float(h);
        break;
      }
      case ACL_INT32: {
        int32_t x;
        std::memcpy(&x, p, 4);
        out[i] = x;
        break;
      }
      case ACL_INT64: {
        int64_t x;
        std::memcpy(&x, p, 8);
        out[i] = (double)x;
        break;
      }
      case ACL_DOUBLE: std::memcpy(&out[i], p, 8); break;
      case ACL_INT8: out[i] = (int8_t)*p; break;
      case ACL_UINT8:
      case ACL_BOOL: out[i] = (uint8_t)*p; break;
      default: ADD_FAILURE() << "dtype " << t;
    }
  }
  return out;
}

// Relative tolerance of one rounding to the dtype (accumulation in fp32 on the device).
double tolerance(aclDataType t, double ref) {
  switch (t) {
    case ACL_FLOAT: return std::fabs(ref) * 1e-6 + 1e-6;
    case ACL_FLOAT16: return std::fabs(ref) * (1.0 / 1024) + 1e-3;
    case ACL_BF16: return std::fabs(ref) * (1.0 / 128) + 1e-2;
    default: return 0.0;
  }
}

// Multiples of 0.25 in [-8, 8) (exact in fp16 and bf16), or integers for integral dtypes.
std::vector<double> sample(aclDataType t, int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> q(-32, 31), i(-100, 100);
  std::vector<double> v((size_t)n);
  for (double &x : v) x = (t == ACL_INT32 || t == ACL_INT64) ? i(rng) : q(rng) * 0.25;
  return v;
}

// ---- reference math ----

// numpy broadcasting by coordinates: the value of `in` (shape `s`) at output coordinate `c`.
double at_broadcast(const std::vector<double> &in, const Dims &s, const Dims &out_shape, const Dims &c) {
  size_t off = out_shape.size() - s.size();
  int64_t idx = 0;
  for (size_t d = 0; d < s.size(); ++d) idx = idx * s[d] + (s[d] == 1 ? 0 : c[off + d]);
  return in[(size_t)idx];
}

Dims coords(int64_t flat, const Dims &shape) {
  Dims c(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    c[d] = flat % shape[d];
    flat /= shape[d];
  }
  return c;
}

enum class Entry { ExecuteV2, CompileAndExecute, CompileAndExecuteV2 };

std::string entry_name(const ::testing::TestParamInfo<Entry> &i) {
  switch (i.param) {
    case Entry::ExecuteV2: return "aclopExecuteV2";
    case Entry::CompileAndExecute: return "aclopCompileAndExecute";
    default: return "aclopCompileAndExecuteV2";
  }
}

// One aclop tensor argument: desc + data buffer over device memory.
struct Tensor {
  aclTensorDesc *desc = nullptr;
  aclDataBuffer *buf = nullptr;
  void *dev = nullptr;
  aclDataType dtype = ACL_DT_UNDEFINED;
  size_t bytes = 0;
};

class AclopBase {
 protected:
  void init() {
    aclInit(nullptr);
    ASSERT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    ASSERT_EQ(aclrtCreateStream(&stream_), ACL_SUCCESS);
  }
  void cleanup() {
    aclrtSynchronizeStream(stream_);
    for (Tensor *t : tensors_) {
      if (t->desc) aclDestroyTensorDesc(t->desc);
      if (t->buf) aclDestroyDataBuffer(t->buf);
      if (t->dev) aclrtFree(t->dev);
      delete t;
    }
    for (aclopAttr *a : attrs_) aclopDestroyAttr(a);
    aclrtDestroyStream(stream_);
  }

  Tensor *tensor(aclDataType t, const Dims &dims, size_t bytes) {
    auto *x = new Tensor;
    tensors_.push_back(x);
    x->dtype = t;
    x->desc = aclCreateTensorDesc(t, (int)dims.size(), dims.data(), ACL_FORMAT_ND);
    x->bytes = bytes;
    if (bytes) {
      EXPECT_EQ(aclrtMalloc(&x->dev, bytes, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
      EXPECT_EQ(aclrtMemset(x->dev, bytes, 0, bytes), ACL_SUCCESS);
    }
    x->buf = aclCreateDataBuffer(x->dev, bytes);
    return x;
  }
  Tensor *input(aclDataType t, const Dims &dims, const std::vector<double> &values) {
    std::vector<char> b = encode(t, values);
    Tensor *x = tensor(t, dims, b.size());
    if (!b.empty()) {
      EXPECT_EQ(aclrtMemcpy(x->dev, b.size(), b.data(), b.size(), ACL_MEMCPY_HOST_TO_DEVICE), ACL_SUCCESS);
    }
    return x;
  }
  Tensor *output(aclDataType t, const Dims &dims) { return tensor(t, dims, (size_t)count(dims) * elem_size(t)); }
  // An unused optional input: ACL_DT_UNDEFINED desc and a NULL buffer (or a buffer over NULL).
  Tensor *absent(bool null_buffer) {
    auto *x = new Tensor;
    tensors_.push_back(x);
    x->desc = aclCreateTensorDesc(ACL_DT_UNDEFINED, 0, nullptr, ACL_FORMAT_UNDEFINED);
    x->buf = null_buffer ? nullptr : aclCreateDataBuffer(nullptr, 0);
    return x;
  }
  std::vector<double> read(const Tensor *t) {
    std::vector<char> b(t->bytes);
    EXPECT_EQ(aclrtMemcpy(b.data(), b.size(), t->dev, b.size(), ACL_MEMCPY_DEVICE_TO_HOST), ACL_SUCCESS);
    return decode(t->dtype, b);
  }
  aclopAttr *attr() {
    aclopAttr *a = aclopCreateAttr();
    attrs_.push_back(a);
    return a;
  }

  aclError run(Entry entry, const char *op, const std::vector<Tensor *> &in, const std::vector<Tensor *> &out,
               aclopAttr *a = nullptr) {
    std::vector<aclTensorDesc *> id, od;
    std::vector<aclDataBuffer *> ib, ob;
    for (Tensor *t : in) {
      id.push_back(t->desc);
      ib.push_back(t->buf);
    }
    for (Tensor *t : out) {
      od.push_back(t->desc);
      ob.push_back(t->buf);
    }
    int ni = (int)in.size(), no = (int)out.size();
    switch (entry) {
      case Entry::ExecuteV2: return aclopExecuteV2(op, ni, id.data(), ib.data(), no, od.data(), ob.data(), a, stream_);
      case Entry::CompileAndExecute:
        return aclopCompileAndExecute(op, ni, id.data(), ib.data(), no, od.data(), ob.data(), a, ACL_ENGINE_SYS,
                                      ACL_COMPILE_SYS, nullptr, stream_);
      case Entry::CompileAndExecuteV2:
        return aclopCompileAndExecuteV2(op, ni, id.data(), ib.data(), no, od.data(), ob.data(), a, ACL_ENGINE_SYS,
                                        ACL_COMPILE_SYS, nullptr, stream_);
    }
    return -1;
  }
  aclError sync() { return aclrtSynchronizeStream(stream_); }

  aclrtStream stream_ = nullptr;
  std::vector<Tensor *> tensors_;
  std::vector<aclopAttr *> attrs_;
};

class Aclop : public AclopBase, public ::testing::TestWithParam<Entry> {
 protected:
  void SetUp() override { init(); }
  void TearDown() override { cleanup(); }
  aclError run(const char *op, const std::vector<Tensor *> &in, const std::vector<Tensor *> &out,
               aclopAttr *a = nullptr) {
    return AclopBase::run(GetParam(), op, in, out, a);
  }
};

class AclopApi : public AclopBase, public ::testing::Test {
 protected:
  void SetUp() override { init(); }
  void TearDown() override { cleanup(); }
};

const aclDataType kFloats[] = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16};

// ---- ops vs reference ----

TEST_P(Aclop, BinaryOpsBroadcastInEveryDtype) {
  const std::pair<Dims, Dims> shapes[] = {{{2, 3}, {2, 3}}, {{2, 3}, {3}}, {{4, 1, 3}, {2, 1}}, {{1}, {5}}};
  const char *ops[] = {"Add", "Sub", "Mul"};
  for (const char *op : ops)
    for (aclDataType t : {ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_INT32})
      for (const auto &[sa, sb] : shapes) {
        SCOPED_TRACE(std::string(op) + " dtype " + std::to_string(t));
        Dims so(std::max(sa.size(), sb.size()));
        for (size_t d = 0; d < so.size(); ++d) {
          int64_t a = d + sa.size() >= so.size() ? sa[d + sa.size() - so.size()] : 1;
          int64_t b = d + sb.size() >= so.size() ? sb[d + sb.size() - so.size()] : 1;
          so[d] = std::max(a, b);
        }
        auto va = sample(t, count(sa), 11), vb = sample(t, count(sb), 12);
        Tensor *a = input(t, sa, va), *b = input(t, sb, vb), *y = output(t, so);
        ASSERT_EQ(run(op, {a, b}, {y}), ACL_SUCCESS) << aclGetRecentErrMsg();
        ASSERT_EQ(sync(), ACL_SUCCESS);
        auto got = read(y);
        for (int64_t i = 0; i < count(so); ++i) {
          Dims c = coords(i, so);
          double x1 = at_broadcast(va, sa, so, c), x2 = at_broadcast(vb, sb, so, c);
          double want = op[0] == 'A' ? x1 + x2 : op[0] == 'S' ? x1 - x2 : x1 * x2;
          ASSERT_NEAR(got[(size_t)i], want, tolerance(t, want)) << "index " << i;
        }
      }
}

TEST_P(Aclop, MatMulTransposesDtypesAndBias) {
  const int64_t M = 3, K = 5, N = 4;
  for (aclDataType t : kFloats)
    for (int t1 = 0; t1 < 2; ++t1)
      for (int t2 = 0; t2 < 2; ++t2)
        for (int with_bias = 0; with_bias < 2; ++with_bias) {
          SCOPED_TRACE("dtype " + std::to_string(t) + " t1=" + std::to_string(t1) + " t2=" + std::to_string(t2) +
                       " bias=" + std::to_string(with_bias));
          Dims s1 = t1 ? Dims{K, M} : Dims{M, K}, s2 = t2 ? Dims{N, K} : Dims{K, N};
          auto v1 = sample(t, M * K, 21), v2 = sample(t, K * N, 22), vb = sample(t, N, 23);
          Tensor *x1 = input(t, s1, v1), *x2 = input(t, s2, v2), *y = output(t, {M, N});
          std::vector<Tensor *> in = {x1, x2};
          if (with_bias) in.push_back(input(t, {N}, vb));
          aclopAttr *a = attr();
          ASSERT_EQ(aclopSetAttrBool(a, "transpose_x1", (uint8_t)t1), ACL_SUCCESS);
          ASSERT_EQ(aclopSetAttrBool(a, "transpose_x2", (uint8_t)t2), ACL_SUCCESS);
          ASSERT_EQ(run("MatMul", in, {y}, a), ACL_SUCCESS) << aclGetRecentErrMsg();
          ASSERT_EQ(sync(), ACL_SUCCESS);
          auto got = read(y);
          for (int64_t i = 0; i < M; ++i)
            for (int64_t j = 0; j < N; ++j) {
              double want = with_bias ? vb[(size_t)j] : 0.0;
              for (int64_t p = 0; p < K; ++p) {
                double A = t1 ? v1[(size_t)(p * M + i)] : v1[(size_t)(i * K + p)];
                double B = t2 ? v2[(size_t)(j * K + p)] : v2[(size_t)(p * N + j)];
                want += A * B;
              }
              ASSERT_NEAR(got[(size_t)(i * N + j)], want, tolerance(t, want)) << i << "," << j;
            }
        }
}

TEST_P(Aclop, MatMulHalfInputsFloatOutputAndUnusedOptionalInputs) {
  auto v1 = sample(ACL_FLOAT16, 6, 31), v2 = sample(ACL_FLOAT16, 6, 32);
  Tensor *x1 = input(ACL_FLOAT16, {2, 3}, v1), *x2 = input(ACL_FLOAT16, {3, 2}, v2), *y = output(ACL_FLOAT, {2, 2});
  // bias and offset_w unused: ACL_DT_UNDEFINED descs, one with a NULL buffer, one with a buffer over NULL.
  ASSERT_EQ(run("MatMul", {x1, x2, absent(true), absent(false)}, {y}), ACL_SUCCESS) << aclGetRecentErrMsg();
  ASSERT_EQ(sync(), ACL_SUCCESS);
  auto got = read(y);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      double want = 0;
      for (int p = 0; p < 3; ++p) want += v1[(size_t)(i * 3 + p)] * v2[(size_t)(p * 2 + j)];
      EXPECT_EQ(got[(size_t)(i * 2 + j)], want);  // products of quarter-multiples: exact in fp32
    }
}

TEST_P(Aclop, CastBetweenDtypes) {
  const std::vector<double> fvals = {-2.75, -0.5, 0.0, 1.25, 3.875, 100.5, -7.0, 0.1};
  struct Case {
    aclDataType from, to;
  };
  const Case cases[] = {{ACL_FLOAT, ACL_FLOAT16}, {ACL_FLOAT, ACL_BF16},    {ACL_FLOAT, ACL_INT32},
                        {ACL_INT32, ACL_FLOAT},   {ACL_FLOAT16, ACL_FLOAT}, {ACL_BF16, ACL_FLOAT16},
                        {ACL_INT32, ACL_BF16},    {ACL_FLOAT, ACL_INT64},   {ACL_FLOAT, ACL_BOOL}};
  for (const Case &c : cases) {
    SCOPED_TRACE(std::to_string(c.from) + " -> " + std::to_string(c.to));
    std::vector<double> in;
    for (double v : fvals) {
      double x = c.from == ACL_INT32 ? std::trunc(v) : v;
      if (c.from != ACL_FLOAT && x == 0.1) continue;  // 0.1 only where it is exactly an fp32 input
      in.push_back(c.from == ACL_FLOAT ? (double)(float)x : x);
    }
    Dims d = {(int64_t)in.size()};
    Tensor *x = input(c.from, d, in), *y = output(c.to, d);
    aclopAttr *a = attr();
    ASSERT_EQ(aclopSetAttrInt(a, "dst_type", c.to), ACL_SUCCESS);
    ASSERT_EQ(run("Cast", {x}, {y}, a), ACL_SUCCESS) << aclGetRecentErrMsg();
    ASSERT_EQ(sync(), ACL_SUCCESS);
    auto got = read(y);
    for (size_t i = 0; i < in.size(); ++i) {
      double want = in[i];
      if (c.to == ACL_INT32 || c.to == ACL_INT64) want = std::trunc(want);  // float -> int truncates
      if (c.to == ACL_BOOL) want = want != 0.0;
      ASSERT_NEAR(got[i], want, tolerance(c.to, want)) << "element " << i;
    }
  }
}

TEST_P(Aclop, ReduceSumDAxesAndKeepDims) {
  const Dims shape = {2, 3, 4};
  const std::vector<std::vector<int64_t>> axes_cases = {{1}, {0, 2}, {-1}, {}, {0, 1, 2}};
  for (aclDataType t : {ACL_FLOAT, ACL_FLOAT16, ACL_BF16, ACL_INT32})
    for (const auto &axes : axes_cases)
      for (int keep = 0; keep < 2; ++keep) {
        SCOPED_TRACE("dtype " + std::to_string(t) + " naxes " + std::to_string(axes.size()) + " keep " +
                     std::to_string(keep));
        std::vector<bool> reduced(3, axes.empty());
        for (int64_t a : axes) reduced[(size_t)((a + 3) % 3)] = true;
        Dims out_shape;
        for (size_t d = 0; d < 3; ++d)
          if (!reduced[d])
            out_shape.push_back(shape[d]);
          else if (keep)
            out_shape.push_back(1);
        auto v = sample(t, count(shape), 41);
        // Reference: accumulate every input element into the output cell its kept coordinates name.
        std::vector<double> want((size_t)count(out_shape), 0.0);
        for (int64_t i = 0; i < count(shape); ++i) {
          Dims c = coords(i, shape);
          int64_t o = 0;
          for (size_t d = 0; d < 3; ++d)
            if (!reduced[d]) o = o * shape[d] + c[d];
          want[(size_t)o] += v[(size_t)i];
        }
        Tensor *x = input(t, shape, v), *y = output(t, out_shape);
        aclopAttr *a = attr();
        ASSERT_EQ(aclopSetAttrListInt(a, "axes", (int)axes.size(), axes.data()), ACL_SUCCESS);
        ASSERT_EQ(aclopSetAttrBool(a, "keep_dims", (uint8_t)keep), ACL_SUCCESS);
        ASSERT_EQ(run("ReduceSumD", {x}, {y}, a), ACL_SUCCESS) << aclGetRecentErrMsg();
        ASSERT_EQ(sync(), ACL_SUCCESS);
        auto got = read(y);
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], tolerance(t, want[i])) << i;
      }
}

TEST_P(Aclop, MulsScalesByItsFloatAttr) {
  for (aclDataType t : kFloats) {
    SCOPED_TRACE("dtype " + std::to_string(t));
    auto v = sample(t, 6, 81);
    Tensor *x = input(t, {2, 3}, v), *y = output(t, {2, 3});
    aclopAttr *a = attr();
    ASSERT_EQ(aclopSetAttrFloat(a, "value", -0.75f), ACL_SUCCESS);
    ASSERT_EQ(run("Muls", {x}, {y}, a), ACL_SUCCESS) << aclGetRecentErrMsg();
    ASSERT_EQ(sync(), ACL_SUCCESS);
    auto got = read(y);
    for (size_t i = 0; i < 6; ++i) EXPECT_EQ(got[i], v[i] * -0.75) << i;  // quarter-multiples: exact
  }
  // Rules: value is required and a float; y keeps x's shape and dtype; no integral dtypes here.
  Tensor *x = input(ACL_FLOAT, {2, 3}, sample(ACL_FLOAT, 6, 82)), *y = output(ACL_FLOAT, {2, 3});
  EXPECT_EQ(run("Muls", {x}, {y}), ACL_ERROR_INVALID_PARAM);
  aclopAttr *as_int = attr();
  aclopSetAttrInt(as_int, "value", 2);
  EXPECT_EQ(run("Muls", {x}, {y}, as_int), ACL_ERROR_INVALID_PARAM);
  aclopAttr *a = attr();
  aclopSetAttrFloat(a, "value", 2.0f);
  EXPECT_EQ(run("Muls", {x}, {output(ACL_FLOAT, {3, 2})}, a), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(run("Muls", {x}, {output(ACL_FLOAT16, {2, 3})}, a), ACL_ERROR_INVALID_PARAM);
  Tensor *xi = input(ACL_INT32, {2, 3}, sample(ACL_INT32, 6, 83));
  EXPECT_EQ(run("Muls", {xi}, {output(ACL_INT32, {2, 3})}, a), ACL_ERROR_INVALID_PARAM);
}

TEST_P(Aclop, ReluGradPassesGradientsWherePositive) {
  for (aclDataType t : kFloats) {
    SCOPED_TRACE("dtype " + std::to_string(t));
    auto g = sample(t, 12, 91), f = sample(t, 12, 92);
    f[0] = 0.0;  // the boundary: Relu's slope at 0 is taken as 0
    Tensor *tg = input(t, {3, 4}, g), *tf = input(t, {3, 4}, f), *y = output(t, {3, 4});
    ASSERT_EQ(run("ReluGrad", {tg, tf}, {y}), ACL_SUCCESS) << aclGetRecentErrMsg();
    ASSERT_EQ(sync(), ACL_SUCCESS);
    auto got = read(y);
    for (size_t i = 0; i < 12; ++i) EXPECT_EQ(got[i], f[i] > 0 ? g[i] : 0.0) << i;
  }
  // Rules: gradients and features of one shape and dtype, backprops alike.
  Tensor *g = input(ACL_FLOAT, {3, 4}, sample(ACL_FLOAT, 12, 93)), *y = output(ACL_FLOAT, {3, 4});
  EXPECT_EQ(run("ReluGrad", {g, input(ACL_FLOAT, {4}, sample(ACL_FLOAT, 4, 94))}, {y}), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(run("ReluGrad", {g, input(ACL_FLOAT16, {3, 4}, sample(ACL_FLOAT16, 12, 95))}, {y}),
            ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(run("ReluGrad", {g, g}, {output(ACL_FLOAT16, {3, 4})}), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(run("ReluGrad", {g}, {y}), ACL_ERROR_INVALID_PARAM);
}

TEST_P(Aclop, DynamicOutputShapeIsReportedByTheV2EntryPoints) {
  auto va = sample(ACL_FLOAT, 6, 51), vb = sample(ACL_FLOAT, 3, 52);
  Tensor *a = input(ACL_FLOAT, {2, 3}, va), *b = input(ACL_FLOAT, {3}, vb);
  const Dims unknown_dims[] = {{-1, -1}, {-2}, {2, -1}};
  for (const Dims &dyn : unknown_dims) {
    Tensor *y = output(ACL_FLOAT, {2, 3});
    ASSERT_EQ(aclSetTensorShape(y->desc, (int)dyn.size(), dyn.data()), ACL_SUCCESS);
    ASSERT_EQ(run("Add", {a, b}, {y}), ACL_SUCCESS) << aclGetRecentErrMsg();
    ASSERT_EQ(sync(), ACL_SUCCESS);
    size_t nd = aclGetTensorDescNumDims(y->desc);
    if (GetParam() == Entry::CompileAndExecute) {
      EXPECT_EQ(nd, dyn == Dims{-2} ? ACL_UNKNOWN_RANK : dyn.size());  // const descs: left as given
    } else {
      ASSERT_EQ(nd, 2u);
      int64_t d0 = 0, d1 = 0;
      aclGetTensorDescDimV2(y->desc, 0, &d0);
      aclGetTensorDescDimV2(y->desc, 1, &d1);
      EXPECT_EQ(d0, 2);
      EXPECT_EQ(d1, 3);
    }
    auto got = read(y);
    for (int i = 0; i < 6; ++i) EXPECT_EQ(got[(size_t)i], (double)((float)va[(size_t)i] + (float)vb[(size_t)(i % 3)]));
  }
  // A dynamic desc still has to fit the op's result.
  Tensor *bad = output(ACL_FLOAT, {2, 3});
  const Dims wrong = {3, -1};
  ASSERT_EQ(aclSetTensorShape(bad->desc, 2, wrong.data()), ACL_SUCCESS);
  EXPECT_EQ(run("Add", {a, b}, {bad}), ACL_ERROR_INVALID_PARAM);
}

TEST_P(Aclop, ErrorCodes) {
  auto v6 = sample(ACL_FLOAT, 6, 61);
  Tensor *a = input(ACL_FLOAT, {2, 3}, v6), *b = input(ACL_FLOAT, {2, 3}, v6), *y = output(ACL_FLOAT, {2, 3});
  EXPECT_EQ(run("NoSuchOp", {a, b}, {y}), ACL_ERROR_OP_NOT_FOUND);
  EXPECT_EQ(run(nullptr, {a, b}, {y}), ACL_ERROR_INVALID_PARAM);
  // Shapes that do not broadcast, mixed dtypes, an output desc of the wrong shape or dtype.
  Tensor *c = input(ACL_FLOAT, {4}, sample(ACL_FLOAT, 4, 62));
  EXPECT_EQ(run("Add", {a, c}, {y}), ACL_ERROR_INVALID_PARAM);
  Tensor *h = input(ACL_FLOAT16, {2, 3}, v6);
  EXPECT_EQ(run("Add", {a, h}, {y}), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(run("Add", {a, b}, {output(ACL_FLOAT, {3, 2})}), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(run("Add", {a, b}, {output(ACL_FLOAT16, {2, 3})}), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(run("Add", {a}, {y}), ACL_ERROR_INVALID_PARAM);                // too few inputs
  EXPECT_EQ(run("Add", {a, b}, {}), ACL_ERROR_INVALID_PARAM);              // no output
  EXPECT_EQ(run("Add", {a, absent(true)}, {y}), ACL_ERROR_INVALID_PARAM);  // required input absent
  // Buffers smaller than their descs say, NULL buffers.
  Tensor *small_in = tensor(ACL_FLOAT, {2, 3}, 20), *small_out = tensor(ACL_FLOAT, {2, 3}, 20);
  EXPECT_EQ(run("Add", {a, small_in}, {y}), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(run("Add", {a, b}, {small_out}), ACL_ERROR_INVALID_PARAM);
  Tensor null_out = *y;
  null_out.buf = nullptr;
  EXPECT_EQ(run("Add", {a, b}, {&null_out}), ACL_ERROR_INVALID_PARAM);
  // Attributes: wrong type, missing required, out of range.
  Tensor *m1 = input(ACL_FLOAT, {2, 3}, v6), *m2 = input(ACL_FLOAT, {3, 2}, v6), *my = output(ACL_FLOAT, {2, 2});
  aclopAttr *wrong_type = attr();
  aclopSetAttrInt(wrong_type, "transpose_x1", 1);
  EXPECT_EQ(run("MatMul", {m1, m2}, {my}, wrong_type), ACL_ERROR_INVALID_PARAM);
  aclopAttr *transposed = attr();
  aclopSetAttrBool(transposed, "transpose_x2", 1);  // [2,3] x [2,3]^T = [2,2] but here x2 is [3,2]
  EXPECT_EQ(run("MatMul", {m1, m2}, {my}, transposed), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(run("Cast", {a}, {output(ACL_FLOAT16, {2, 3})}), ACL_ERROR_INVALID_PARAM);  // no dst_type
  aclopAttr *to_int = attr();
  aclopSetAttrInt(to_int, "dst_type", ACL_INT32);
  EXPECT_EQ(run("Cast", {a}, {output(ACL_FLOAT16, {2, 3})}, to_int), ACL_ERROR_INVALID_PARAM);  // y != dst_type
  aclopAttr *bad_axis = attr();
  const int64_t axis = 2;
  aclopSetAttrListInt(bad_axis, "axes", 1, &axis);
  EXPECT_EQ(run("ReduceSumD", {a}, {output(ACL_FLOAT, {2})}, bad_axis), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(run("ReduceSumD", {a}, {output(ACL_FLOAT, {2})}), ACL_ERROR_INVALID_PARAM);  // no axes
  // A destroyed attr.
  aclopAttr *gone = aclopCreateAttr();
  aclopDestroyAttr(gone);
  EXPECT_EQ(run("Add", {a, b}, {y}, gone), ACL_ERROR_INVALID_PARAM);
  // Nothing was launched by the refused calls.
  EXPECT_EQ(sync(), ACL_SUCCESS);
  EXPECT_EQ(read(y), std::vector<double>(6, 0.0));
}

TEST_P(Aclop, FreedDeviceBufferIsAnAicoreExceptionOnSync) {
  auto v = sample(ACL_FLOAT, 6, 71);
  Tensor *a = input(ACL_FLOAT, {2, 3}, v), *b = input(ACL_FLOAT, {2, 3}, v), *y = output(ACL_FLOAT, {2, 3});
  ASSERT_EQ(aclrtFree(b->dev), ACL_SUCCESS);
  // The buffer still claims 24 bytes at the freed address: the launch is accepted, the kernel faults.
  ASSERT_EQ(run("Add", {a, b}, {y}), ACL_SUCCESS);
  b->dev = nullptr;
  EXPECT_EQ(sync(), ACL_ERROR_RT_AICORE_EXCEPTION);
  ASSERT_EQ(run("Add", {a, a}, {y}), ACL_SUCCESS);  // the stream works on
  EXPECT_EQ(sync(), ACL_SUCCESS);
  auto got = read(y);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(got[(size_t)i], 2 * (double)(float)v[(size_t)i]);
}

INSTANTIATE_TEST_SUITE_P(Entries, Aclop,
                         ::testing::Values(Entry::ExecuteV2, Entry::CompileAndExecute, Entry::CompileAndExecuteV2),
                         entry_name);

// ---- the API around execution ----

TEST_F(AclopApi, AttributeSetters) {
  aclopAttr *a = attr();
  ASSERT_NE(a, nullptr);
  const int64_t ints[] = {1, -2, 3};
  const float floats[] = {0.5f, 1.5f};
  const uint8_t bools[] = {1, 0};
  EXPECT_EQ(aclopSetAttrBool(a, "b", 1), ACL_SUCCESS);
  EXPECT_EQ(aclopSetAttrInt(a, "i", -7), ACL_SUCCESS);
  EXPECT_EQ(aclopSetAttrFloat(a, "f", 0.25f), ACL_SUCCESS);
  EXPECT_EQ(aclopSetAttrString(a, "s", "text"), ACL_SUCCESS);
  EXPECT_EQ(aclopSetAttrDataType(a, "t", ACL_BF16), ACL_SUCCESS);
  EXPECT_EQ(aclopSetAttrListInt(a, "li", 3, ints), ACL_SUCCESS);
  EXPECT_EQ(aclopSetAttrListFloat(a, "lf", 2, floats), ACL_SUCCESS);
  EXPECT_EQ(aclopSetAttrListBool(a, "lb", 2, bools), ACL_SUCCESS);
  EXPECT_EQ(aclopSetAttrListInt(a, "empty", 0, nullptr), ACL_SUCCESS);
  EXPECT_EQ(aclopSetAttrInt(nullptr, "i", 1), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclopSetAttrInt(a, nullptr, 1), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclopSetAttrString(a, "s", nullptr), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclopSetAttrListInt(a, "li", -1, ints), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclopSetAttrListFloat(a, "lf", 2, nullptr), ACL_ERROR_INVALID_PARAM);
  aclopAttr *b = aclopCreateAttr();
  aclopDestroyAttr(b);
  EXPECT_EQ(aclopSetAttrBool(b, "b", 1), ACL_ERROR_INVALID_PARAM);  // destroyed
  aclopDestroyAttr(b);                                              // twice: ignored, no crash
  aclopDestroyAttr(nullptr);
  // The Cast attr may also be given as a data type.
  Tensor *x = input(ACL_INT32, {3}, {1, -2, 3}), *y = output(ACL_FLOAT16, {3});
  aclopAttr *c = attr();
  ASSERT_EQ(aclopSetAttrDataType(c, "dst_type", ACL_FLOAT16), ACL_SUCCESS);
  ASSERT_EQ(run(Entry::ExecuteV2, "Cast", {x}, {y}, c), ACL_SUCCESS);
  ASSERT_EQ(sync(), ACL_SUCCESS);
  EXPECT_EQ(read(y), (std::vector<double>{1, -2, 3}));
}

TEST_F(AclopApi, CompileChecksOpsWithoutRunningThem) {
  int64_t d[2] = {2, 3};
  aclTensorDesc *in[2] = {aclCreateTensorDesc(ACL_FLOAT, 2, d, ACL_FORMAT_ND),
                          aclCreateTensorDesc(ACL_FLOAT, 2, d, ACL_FORMAT_ND)};
  aclTensorDesc *out[1] = {aclCreateTensorDesc(ACL_FLOAT, 2, d, ACL_FORMAT_ND)};
  aclTensorDesc *nz[1] = {aclCreateTensorDesc(ACL_FLOAT, 2, d, ACL_FORMAT_FRACTAL_NZ)};
  EXPECT_EQ(aclopCompile("Add", 2, in, 1, out, nullptr, ACL_ENGINE_SYS, ACL_COMPILE_SYS, nullptr), ACL_SUCCESS);
  EXPECT_EQ(aclopCompile("Nope", 2, in, 1, out, nullptr, ACL_ENGINE_SYS, ACL_COMPILE_SYS, nullptr),
            ACL_ERROR_OP_NOT_FOUND);
  EXPECT_EQ(aclopCompile("MatMul", 2, in, 1, out, nullptr, ACL_ENGINE_AICORE, ACL_COMPILE_SYS, nullptr),
            ACL_ERROR_INVALID_PARAM);  // [2,3] x [2,3]
  EXPECT_EQ(aclopCompile("Add", 2, in, 1, nz, nullptr, ACL_ENGINE_SYS, ACL_COMPILE_SYS, nullptr),
            ACL_ERROR_INVALID_PARAM);  // fractal layouts are not row-major
  EXPECT_EQ(aclopCompile("Add", 2, in, 1, out, nullptr, (aclopEngineType)7, ACL_COMPILE_SYS, nullptr),
            ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclopCompile("Add", 2, in, 1, out, nullptr, ACL_ENGINE_SYS, (aclopCompileType)5, nullptr),
            ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclSetCompileopt(ACL_PRECISION_MODE, "allow_fp32_to_fp16"), ACL_SUCCESS);
  EXPECT_EQ(aclSetCompileopt(ACL_OP_JIT_COMPILE, "disable"), ACL_SUCCESS);
  EXPECT_EQ(aclSetCompileopt(ACL_PRECISION_MODE, nullptr), ACL_ERROR_INVALID_PARAM);
  EXPECT_EQ(aclSetCompileopt((aclCompileOpt)99, "x"), ACL_ERROR_INVALID_PARAM);
  for (aclTensorDesc *p : {in[0], in[1], out[0], nz[0]}) aclDestroyTensorDesc(p);
}

TEST_F(AclopApi, LaunchNeedsACurrentDevice) {
  Tensor *a = input(ACL_FLOAT, {2}, {1, 2}), *y = output(ACL_FLOAT, {2});
  aclError rc = -1;
  std::thread([&] { rc = run(Entry::CompileAndExecute, "Add", {a, a}, {y}); }).join();
  EXPECT_EQ(rc, ACL_ERROR_RT_CONTEXT_NULL);
}

// libacl_op_compiler must reach the engine through the internal API: a tool interposing
// aclopExecuteV2 would otherwise see a nested call that the real libraries never make.
TEST_F(AclopApi, OpCompilerDoesNotCallThePublicExecute) {
  const char *home = std::getenv("ASCEND_HOME_PATH");
  ASSERT_NE(home, nullptr);
  std::string path = std::string(home) + "/lib64/libacl_op_compiler.so";
  ASSERT_NE(elf_version(EV_CURRENT), EV_NONE);
  int fd = open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0) << path;
  Elf *elf = elf_begin(fd, ELF_C_READ, nullptr);
  ASSERT_NE(elf, nullptr);
  std::vector<std::string> undefined;
  for (Elf_Scn *scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    gelf_getshdr(scn, &sh);
    if (sh.sh_type != SHT_DYNSYM) continue;
    Elf_Data *data = elf_getdata(scn, nullptr);
    for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; ++i) {
      GElf_Sym sym;
      gelf_getsym(data, (int)i, &sym);
      if (sym.st_shndx == SHN_UNDEF && sym.st_name) undefined.push_back(elf_strptr(elf, sh.sh_link, sym.st_name));
    }
  }
  elf_end(elf);
  close(fd);
  bool uses_engine = false;
  for (const std::string &s : undefined) {
    EXPECT_NE(s, "aclopExecuteV2");
    EXPECT_NE(s, "aclopExecute");
    if (s.find("fakecann") != std::string::npos && s.find("execute") != std::string::npos) uses_engine = true;
  }
  EXPECT_TRUE(uses_engine);
}

// Registered by aclop_rt.cmake as fake_cann_aclop_async with FAKE_CANN_TASK_DELAY_US set.
TEST_F(AclopApi, AsyncResultsAreValidOnlyAfterSynchronize) {
  if (std::getenv("FAKE_CANN_TASK_DELAY_US") == nullptr) GTEST_SKIP() << "runs as fake_cann_aclop_async";
  Tensor *a = input(ACL_FLOAT, {4}, {1, 2, 3, 4}), *b = input(ACL_FLOAT, {4}, {10, 20, 30, 40});
  Tensor *y = output(ACL_FLOAT, {4});
  aclopAttr *unused = aclopCreateAttr();
  aclopSetAttrInt(unused, "ignored", 1);
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(run(Entry::CompileAndExecuteV2, "Add", {a, b}, {y}, unused), ACL_SUCCESS);
  // Did not wait (the task starts FAKE_CANN_TASK_DELAY_US = 20 ms, scaled, later).
  EXPECT_LT(std::chrono::steady_clock::now() - t0, msprobe::test::scaled(std::chrono::milliseconds(15)));
  // The host may drop its descs, buffers and attrs at once: the launch took what it needs.
  aclopDestroyAttr(unused);
  for (Tensor *t : {a, b, y}) {
    aclDestroyTensorDesc(t->desc);
    aclDestroyDataBuffer(t->buf);
    t->desc = nullptr;
    t->buf = nullptr;
  }
  EXPECT_EQ(read(y), std::vector<double>(4, 0.0));  // stale: the kernel has not run yet
  ASSERT_EQ(sync(), ACL_SUCCESS);
  EXPECT_EQ(read(y), (std::vector<double>{11, 22, 33, 44}));
}

}  // namespace
