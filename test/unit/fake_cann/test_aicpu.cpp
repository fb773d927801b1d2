// AI CPU kernels of libruntime (rtCpuKernelLaunchWithFlag): the args blob MindSpore's AicpuOpKernelMod builds (the
// packed parameter head, the io addresses, the NodeDef protobuf), written here from the layout alone; GatherV2's
// results against a plain loop; the ext info's shapes; launch-time and run-time errors.
#include <gtest/gtest.h>

#include <climits>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "acl/acl_base.h"
#include "rt_buffers.h"
#include "runtime/rt.h"

namespace {

// ---- a protobuf writer (wire format only) ----
struct Proto {
  std::string bytes;
  Proto &varint(uint64_t v) {
    do {
      uint8_t b = v & 0x7f;
      v >>= 7;
      bytes.push_back((char)(b | (v ? 0x80 : 0)));
    } while (v);
    return *this;
  }
  Proto &key(uint32_t field, uint32_t type) { return varint((uint64_t)field << 3 | type); }
  Proto &integer(uint32_t field, uint64_t v) { return key(field, 0).varint(v); }
  Proto &blob(uint32_t field, const std::string &b) {
    key(field, 2).varint(b.size());
    bytes += b;
    return *this;
  }
};

// aicpuops.Tensor {tensor_shape = 1 {dim = 2 {size = 1}}, tensor_type = 2, mem_device = 3}
std::string tensor(const std::vector<int64_t> &shape, int32_t dtype) {
  Proto s;
  for (int64_t d : shape) s.blob(2, Proto().integer(1, (uint64_t)d).bytes);
  return Proto().blob(1, s.bytes).integer(2, (uint64_t)(uint32_t)dtype).blob(3, "HBM").bytes;
}

struct Desc {
  std::vector<int64_t> shape;
  int32_t dtype;
  void *addr;
};

// The head, the io addresses, then NodeDef {op = 2, inputs = 4, outputs = 5} behind its u32 length.
std::vector<char> aicpu_args(const std::string &op, const std::vector<Desc> &in, const std::vector<Desc> &out,
                             uint64_t ext_addr = 0, uint32_t ext_len = 0) {
  Proto nd;
  nd.blob(2, op);
  for (const Desc &d : in) nd.blob(4, tensor(d.shape, d.dtype));
  for (const Desc &d : out) nd.blob(5, tensor(d.shape, d.dtype));
  const uint32_t io = (uint32_t)(in.size() + out.size()), nd_len = (uint32_t)nd.bytes.size();
  const uint32_t length = 20 + 8 * io + 4 + nd_len;
  std::vector<char> a(length);
  std::memcpy(a.data(), &length, 4);
  std::memcpy(a.data() + 4, &io, 4);
  std::memcpy(a.data() + 8, &ext_len, 4);
  std::memcpy(a.data() + 12, &ext_addr, 8);
  size_t at = 20;
  for (const auto *side : {&in, &out})
    for (const Desc &d : *side) {
      auto p = reinterpret_cast<uint64_t>(d.addr);
      std::memcpy(a.data() + at, &p, 8);
      at += 8;
    }
  std::memcpy(a.data() + at, &nd_len, 4);
  std::memcpy(a.data() + at + 4, nd.bytes.data(), nd_len);
  return a;
}

// {i32 type, u32 len, ShapeAndType {i32 type, i64 dims[8]}...}, packed.
void ext_shapes(std::vector<char> *ext, int32_t type, const std::vector<Desc> &ds) {
  uint32_t len = (uint32_t)ds.size() * 68;
  const size_t at = ext->size();
  ext->resize(at + 8 + len);
  std::memcpy(ext->data() + at, &type, 4);
  std::memcpy(ext->data() + at + 4, &len, 4);
  for (size_t i = 0; i < ds.size(); ++i) {
    char *st = ext->data() + at + 8 + i * 68;
    std::memcpy(st, &ds[i].dtype, 4);
    for (size_t d = 0; d < 8; ++d) {
      int64_t v = d < ds[i].shape.size() ? ds[i].shape[d] : (d == ds[i].shape.size() ? LLONG_MIN : 0);
      std::memcpy(st + 4 + 8 * d, &v, 8);
    }
  }
}

class Aicpu : public ::testing::Test, protected RtBuffers {
 protected:
  void SetUp() override {
    ASSERT_EQ(rtSetDevice(0), RT_ERROR_NONE);
    ASSERT_EQ(rtStreamCreate(&stream_, 0), RT_ERROR_NONE);
  }
  void TearDown() override {
    rtStreamSynchronize(stream_);
    free_all();
    rtStreamDestroy(stream_);
  }
  rtError_t launch(std::vector<char> &args, const char *so = "libcpu_kernels.so", const char *kernel = "RunCpuKernel",
                   uint32_t flags = RT_KERNEL_DEFAULT) {
    rtArgsEx_t info{};
    info.args = args.data();
    info.argsSize = (uint32_t)args.size();
    return rtCpuKernelLaunchWithFlag(so, kernel, 1, &info, nullptr, stream_, flags);
  }
  rtStream_t stream_ = nullptr;
};

TEST_F(Aicpu, GatherV2RowsOfAMatrixArgsCopiedAtLaunch) {
  std::vector<float> params(5 * 3);
  for (size_t i = 0; i < params.size(); ++i) params[i] = 0.5f * (float)i - 3.0f;
  std::vector<int32_t> idx = {4, 0, 4, 2};
  std::vector<int32_t> axis = {0};
  void *p = upload(params), *ix = upload(idx), *ax = upload(axis), *out = alloc(4 * 3 * 4);
  auto args = aicpu_args("GatherV2", {{{5, 3}, ACL_FLOAT, p}, {{4}, ACL_INT32, ix}, {{}, ACL_INT32, ax}},
                         {{{4, 3}, ACL_FLOAT, out}});
  ASSERT_EQ(launch(args), RT_ERROR_NONE);
  std::memset(args.data(), 0xff, args.size());  // the runtime copied the blob at launch
  ASSERT_EQ(rtStreamSynchronize(stream_), RT_ERROR_NONE);
  std::vector<float> got = download<float>(out, 12), want;
  for (int32_t r : idx)
    for (int c = 0; c < 3; ++c) want.push_back(params[(size_t)r * 3 + c]);
  EXPECT_EQ(got, want);
}

TEST_F(Aicpu, GatherV2OnAnInnerAxisWithInt64IndicesAndTheOpsOwnEntry) {
  std::vector<int64_t> params = {1, 2, 3, 4, 5, 6, 7, 8};  // [2, 4]
  std::vector<int64_t> idx = {3, 1, 1};
  std::vector<int64_t> axis = {-1};
  void *p = upload(params), *ix = upload(idx), *ax = upload(axis), *out = alloc(2 * 3 * 8);
  auto args = aicpu_args("GatherV2", {{{2, 4}, ACL_INT64, p}, {{3}, ACL_INT64, ix}, {{1}, ACL_INT64, ax}},
                         {{{2, 3}, ACL_INT64, out}});
  ASSERT_EQ(launch(args, "libaicpu_kernels.so", "GatherV2"), RT_ERROR_NONE);
  ASSERT_EQ(rtStreamSynchronize(stream_), RT_ERROR_NONE);
  EXPECT_EQ(download<int64_t>(out, 6), (std::vector<int64_t>{4, 2, 2, 8, 6, 6}));
}

TEST_F(Aicpu, ExtInfoShapesOverrideTheNodeDefs) {
  // A dynamic-shape kernel: the NodeDef was made with -1 dims; the ext info has this launch's shapes.
  std::vector<float> params = {1, 2, 3, 4, 5, 6};  // [3, 2]
  std::vector<int32_t> idx = {2, 1}, axis = {0};
  void *p = upload(params), *ix = upload(idx), *ax = upload(axis), *out = alloc(2 * 2 * 4);
  std::vector<Desc> in = {{{3, 2}, ACL_FLOAT, p}, {{2}, ACL_INT32, ix}, {{}, ACL_INT32, ax}},
                    outs = {{{2, 2}, ACL_FLOAT, out}};
  std::vector<char> ext;
  int32_t shape_type_entry = 0, shape_type = 1;  // FWK_ADPT_EXT_SHAPE_TYPE: 4 bytes, skipped by the kernel
  uint32_t four = 4;
  ext.resize(12);
  std::memcpy(ext.data(), &shape_type_entry, 4);
  std::memcpy(ext.data() + 4, &four, 4);
  std::memcpy(ext.data() + 8, &shape_type, 4);
  ext_shapes(&ext, 1, in);
  ext_shapes(&ext, 2, outs);
  void *ext_dev = upload(ext);
  auto args = aicpu_args("GatherV2", {{{-1, 2}, ACL_FLOAT, p}, {{-1}, ACL_INT32, ix}, {{}, ACL_INT32, ax}},
                         {{{-1, 2}, ACL_FLOAT, out}}, reinterpret_cast<uint64_t>(ext_dev), (uint32_t)ext.size());
  ASSERT_EQ(launch(args), RT_ERROR_NONE);
  ASSERT_EQ(rtStreamSynchronize(stream_), RT_ERROR_NONE);
  EXPECT_EQ(download<float>(out, 4), (std::vector<float>{5, 6, 3, 4}));
}

TEST_F(Aicpu, LaunchArgumentErrors) {
  std::vector<char> args = aicpu_args("GatherV2", {}, {});
  rtArgsEx_t info{};
  info.args = args.data();
  info.argsSize = (uint32_t)args.size();
  EXPECT_EQ(rtCpuKernelLaunchWithFlag(nullptr, "RunCpuKernel", 1, &info, nullptr, stream_, 0),
            ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(rtCpuKernelLaunchWithFlag("libcpu_kernels.so", nullptr, 1, &info, nullptr, stream_, 0),
            ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(rtCpuKernelLaunchWithFlag("libcpu_kernels.so", "RunCpuKernel", 1, nullptr, nullptr, stream_, 0),
            ACL_ERROR_RT_PARAM_INVALID);
  EXPECT_EQ(rtCpuKernelLaunchWithFlag("libcpu_kernels.so", "RunCpuKernel", 0, &info, nullptr, stream_, 0),
            ACL_ERROR_RT_PARAM_INVALID);
  info.argsSize = 10;  // no room for the head
  EXPECT_EQ(rtCpuKernelLaunchWithFlag("libcpu_kernels.so", "RunCpuKernel", 1, &info, nullptr, stream_, 0),
            ACL_ERROR_RT_PARAM_INVALID);
}

// Errors the AI CPU finds when the task runs: the stream reports them at the next synchronization.
TEST_F(Aicpu, RunTimeErrorsSurfaceAtSynchronize) {
  std::vector<float> params(6, 1.0f);
  std::vector<int32_t> bad = {7}, axis = {0};
  void *p = upload(params), *ix = upload(bad), *ax = upload(axis), *out = alloc(2 * 4);
  auto gather = [&] {
    return aicpu_args("GatherV2", {{{3, 2}, ACL_FLOAT, p}, {{1}, ACL_INT32, ix}, {{}, ACL_INT32, ax}},
                      {{{1, 2}, ACL_FLOAT, out}});
  };
  auto expect_fails = [&](std::vector<char> args, const char *so, const char *kernel, uint32_t flags) {
    ASSERT_EQ(launch(args, so, kernel, flags), RT_ERROR_NONE);
    EXPECT_EQ(rtStreamSynchronize(stream_), ACL_ERROR_RT_AICORE_EXCEPTION) << so << " " << kernel;
  };
  expect_fails(gather(), "libcpu_kernels.so", "RunCpuKernel", 0);  // index 7 of 3 rows
  bad[0] = 1;
  ASSERT_EQ(rtMemcpy(ix, 4, bad.data(), 4, RT_MEMCPY_HOST_TO_DEVICE), 0);
  expect_fails(gather(), "libnot_there.so", "RunCpuKernel", 0);  // no such library
  expect_fails(gather(), "libcpu_kernels.so", "GatherV2", 0);    // not an entry of libcpu_kernels
  expect_fails(gather(), "libcpu_kernels.so", "RunCpuKernel", RT_KERNEL_CUSTOM_AICPU);  // custom: not loaded
  expect_fails(aicpu_args("NoSuchOp", {}, {}), "libcpu_kernels.so", "RunCpuKernel", 0);
  auto broken = gather();
  broken.resize(broken.size() - 3);  // the NodeDef's length now runs past the args
  expect_fails(broken, "libcpu_kernels.so", "RunCpuKernel", 0);
  // And a good launch afterwards works: the error was reported once.
  auto args = gather();
  ASSERT_EQ(launch(args), RT_ERROR_NONE);
  ASSERT_EQ(rtStreamSynchronize(stream_), RT_ERROR_NONE);
  EXPECT_EQ(download<float>(out, 2), (std::vector<float>{1.0f, 1.0f}));
}

}  // namespace
