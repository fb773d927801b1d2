// libruntime.so: AI CPU kernels (rtCpuKernelLaunchWithFlag), as MindSpore's AicpuOpKernelMod and GE's AI CPU tasks
// launch them (reference/mindspore_runtime.md §1.1; MindSpore ops/kernel/ascend/aicpu/aicpu_kernel_mod.cc).
//
// The host names a kernel library of the device's AI CPU and an entry in it: libcpu_kernels.so with the entry
// RunCpuKernel (the op type is then the NodeDef's), or libaicpu_kernels.so with the op's own name. Custom libraries
// (RT_KERNEL_CUSTOM_AICPU) are never loaded here. The args blob, copied to device memory at launch as every launch's
// is, is what the AI CPU reads when the task runs:
//
//   AicpuParamHead {u32 length; u32 ioAddrNum; u32 extInfoLength; u64 extInfoAddr}   packed, 20 bytes
//   u64 ioAddrs[ioAddrNum]                                                             inputs, then outputs
//   u32 nodeDefLen; u8 nodeDef[nodeDefLen]                                             aicpuops.NodeDef, protobuf
//
// NodeDef (MindSpore cpu_proto/proto/cpu_node_def.proto): op = 2, attrs = 3, inputs = 4, outputs = 5 (Tensor:
// tensor_shape = 1 {dim = 2 {size = 1}}, tensor_type = 2 in CANN's DataType numbering, which equals aclDataType's for
// every type used here). The ext info, in device memory (the host copies it there with aclrtMemcpyAsync before the
// launch), is a sequence of {i32 type; u32 len; u8 msg[len]}; types 1 and 2 hold the inputs' and outputs'
// ShapeAndType {i32 type; i64 dims[8]} (packed, a shorter shape ends with INT64_MIN) and, when present, override the
// NodeDef's shapes (dynamic shapes are known only there).
//
// Kernels: GatherV2 (params, indices int32/int64, axis: a 0-d or 1-element int32/int64 tensor). Everything else is an
// AI CPU exception when the task runs, as a missing kernel is on the device.
#include <climits>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "acl/acl_base.h"
#include "fakecann/caller.h"
#include "fakecann/device.h"
#include "fakecann/dtype.h"
#include "fakecann/rt_internal.h"
#include "fakecann/stream.h"
#include "fakecann/tensor_io.h"
#include "runtime/rt.h"

namespace fakecann {
namespace {

constexpr uint32_t kHeadBytes = 20;  // sizeof(AicpuParamHead), packed
constexpr uint32_t kMaxShapeDims = 8;
constexpr uint32_t kShapeAndTypeBytes = 4 + 8 * kMaxShapeDims;
constexpr int32_t kExtInputShape = 1, kExtOutputShape = 2;
constexpr const char *kCpuKernelsSo = "libcpu_kernels.so";
constexpr const char *kAicpuKernelsSo = "libaicpu_kernels.so";
constexpr const char *kRunCpuKernel = "RunCpuKernel";

struct AicpuTensor {
  aclDataType dtype = ACL_DT_UNDEFINED;
  std::vector<int64_t> shape;
  uint64_t addr = 0;
};

struct NodeDef {
  std::string op;
  std::vector<AicpuTensor> inputs, outputs;
};

// ---- protobuf wire format (bounds-checked) ----
struct Wire {
  const uint8_t *p, *end;
  bool varint(uint64_t *v) {
    *v = 0;
    for (int shift = 0; shift < 64 && p < end; shift += 7) {
      uint8_t b = *p++;
      *v |= (uint64_t)(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return true;
    }
    return false;
  }
  // One field: its number and wire type; for length-delimited ones the bytes, for varints the value.
  bool field(uint32_t *number, uint32_t *type, uint64_t *value, Wire *bytes) {
    uint64_t key;
    if (!varint(&key)) return false;
    *number = (uint32_t)(key >> 3);
    *type = (uint32_t)(key & 7);
    switch (*type) {
      case 0: return varint(value);
      case 1:
        if (end - p < 8) return false;
        p += 8;
        return true;
      case 5:
        if (end - p < 4) return false;
        p += 4;
        return true;
      case 2: {
        uint64_t n;
        if (!varint(&n) || n > (uint64_t)(end - p)) return false;
        *bytes = Wire{p, p + n};
        p += n;
        return true;
      }
      default: return false;
    }
  }
};

bool parse_shape(Wire w, std::vector<int64_t> *shape) {
  uint32_t num, type;
  uint64_t v;
  Wire b{nullptr, nullptr};
  while (w.p < w.end) {
    if (!w.field(&num, &type, &v, &b)) return false;
    if (num == 2 && type == 2) {  // Dim
      int64_t size = 0;
      while (b.p < b.end) {
        uint32_t dn, dt;
        uint64_t dv;
        Wire db{nullptr, nullptr};
        if (!b.field(&dn, &dt, &dv, &db)) return false;
        if (dn == 1 && dt == 0) size = (int64_t)dv;
      }
      shape->push_back(size);
    }
  }
  return true;
}

bool parse_tensor(Wire w, AicpuTensor *t) {
  uint32_t num, type;
  uint64_t v;
  Wire b{nullptr, nullptr};
  while (w.p < w.end) {
    if (!w.field(&num, &type, &v, &b)) return false;
    if (num == 1 && type == 2 && !parse_shape(b, &t->shape)) return false;
    if (num == 2 && type == 0) t->dtype = (aclDataType)(int32_t)v;
  }
  return true;
}

bool parse_node_def(const uint8_t *data, size_t n, NodeDef *out) {
  Wire w{data, data + n};
  uint32_t num, type;
  uint64_t v;
  Wire b{nullptr, nullptr};
  while (w.p < w.end) {
    if (!w.field(&num, &type, &v, &b)) return false;
    if (type != 2) continue;
    if (num == 2) {
      out->op.assign(reinterpret_cast<const char *>(b.p), b.end - b.p);
    } else if (num == 4 || num == 5) {
      AicpuTensor t;
      if (!parse_tensor(b, &t)) return false;
      (num == 4 ? out->inputs : out->outputs).push_back(std::move(t));
    }
  }
  return true;
}

uint32_t u32_at(const uint8_t *p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t u64_at(const uint8_t *p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// The op type a launch names: the NodeDef's for RunCpuKernel, else the entry's own name. Empty when the blob holds no
// readable NodeDef (for the launch log only; the device decides for real).
std::string op_of(const std::string &kernel, const uint8_t *blob, uint32_t size) {
  if (kernel != kRunCpuKernel) return kernel;
  if (size < kHeadBytes) return {};
  uint64_t io = u32_at(blob + 4);
  uint64_t at = kHeadBytes + 8 * io;
  if (at + 4 > size) return {};
  uint32_t len = u32_at(blob + at);
  NodeDef nd;
  if (at + 4 + len > size || !parse_node_def(blob + at + 4, len, &nd)) return {};
  return nd.op;
}

// ---- kernels ----
struct Ctx {
  std::string op;
  std::vector<AicpuTensor> inputs, outputs;
  [[noreturn]] void fail(const std::string &why) const { throw KernelError("AI CPU kernel " + op + ": " + why); }
  TensorView view(const AicpuTensor &t) const {
    return contiguous_view(t.dtype, t.shape, reinterpret_cast<void *>(t.addr));
  }
};

int64_t numel(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

void gather_v2(const Ctx &c) {
  if (c.inputs.size() != 3 || c.outputs.size() != 1) c.fail("takes 3 inputs (params, indices, axis) and 1 output");
  const AicpuTensor &params = c.inputs[0], &indices = c.inputs[1], &axis_t = c.inputs[2], &out = c.outputs[0];
  if (indices.dtype != ACL_INT32 && indices.dtype != ACL_INT64) c.fail("indices must be int32 or int64");
  if ((axis_t.dtype != ACL_INT32 && axis_t.dtype != ACL_INT64) || numel(axis_t.shape) != 1)
    c.fail("axis must be one int32 or int64 value");
  if (!dtype_is_numeric(params.dtype) || out.dtype != params.dtype) c.fail("params and output must share a dtype");
  const int64_t rank = (int64_t)params.shape.size();
  int64_t axis = (int64_t)gather(c.view(axis_t))[0];
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) c.fail("axis out of range");
  std::vector<int64_t> expect(params.shape.begin(), params.shape.begin() + axis);
  expect.insert(expect.end(), indices.shape.begin(), indices.shape.end());
  expect.insert(expect.end(), params.shape.begin() + axis + 1, params.shape.end());
  if (out.shape != expect) c.fail("output shape does not match params and indices");
  int64_t outer = numel(std::vector<int64_t>(params.shape.begin(), params.shape.begin() + axis));
  int64_t inner = numel(std::vector<int64_t>(params.shape.begin() + axis + 1, params.shape.end()));
  int64_t limit = params.shape[axis];
  std::vector<double> src = gather(c.view(params)), idx = gather(c.view(indices));
  std::vector<double> dst((size_t)numel(out.shape));
  size_t k = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (double iv : idx) {
      auto i = (int64_t)iv;
      if (i < 0 || i >= limit)
        c.fail("index " + std::to_string(i) + " out of range [0, " + std::to_string(limit) + ")");
      for (int64_t e = 0; e < inner; ++e) dst[k++] = src[(size_t)((o * limit + i) * inner + e)];
    }
  scatter(c.view(out), dst);
}

const std::map<std::string, std::function<void(const Ctx &)>> &kernels() {
  static const auto *k = new std::map<std::string, std::function<void(const Ctx &)>>{{"GatherV2", gather_v2}};
  return *k;
}

// The ext info's shapes, over the NodeDef's.
void apply_ext_info(Ctx &c, uint64_t addr, uint32_t len) {
  if (len == 0) return;
  const auto *p = static_cast<const uint8_t *>(device_bytes(reinterpret_cast<const void *>(addr), len));
  for (uint32_t at = 0; at + 8 <= len;) {
    int32_t type;
    std::memcpy(&type, p + at, 4);
    uint32_t n = u32_at(p + at + 4);
    at += 8;
    if (n > len - at) c.fail("ext info entry runs past its length");
    std::vector<AicpuTensor> *side = type == kExtInputShape    ? &c.inputs
                                     : type == kExtOutputShape ? &c.outputs
                                                               : nullptr;
    if (side != nullptr) {
      if (n != side->size() * kShapeAndTypeBytes) c.fail("ext info shapes do not match the NodeDef's tensors");
      for (size_t i = 0; i < side->size(); ++i) {
        const uint8_t *st = p + at + i * kShapeAndTypeBytes;
        int32_t dt;
        std::memcpy(&dt, st, 4);
        if ((aclDataType)dt != (*side)[i].dtype) c.fail("ext info dtype differs from the NodeDef's");
        std::vector<int64_t> shape;
        for (uint32_t d = 0; d < kMaxShapeDims; ++d) {
          int64_t v = (int64_t)u64_at(st + 4 + 8 * d);
          if (v == LLONG_MIN) break;
          shape.push_back(v);
        }
        (*side)[i].shape = std::move(shape);
      }
    }
    at += n;
  }
}

// On the stream worker: what the AI CPU does with the task.
void run_aicpu(const std::string &so, const std::string &kernel, uint32_t flags, const void *dev_args, uint32_t size) {
  const auto *a = static_cast<const uint8_t *>(device_bytes(dev_args, size));
  Ctx c;
  c.op = kernel;
  const uint32_t length = u32_at(a), io = u32_at(a + 4), ext_len = u32_at(a + 8);
  const uint64_t ext_addr = u64_at(a + 12);
  const uint64_t nd_at = kHeadBytes + 8ull * io;
  if (length > size || nd_at + 4 > size) c.fail("parameter head does not fit the args");
  const uint32_t nd_len = u32_at(a + nd_at);
  if (nd_at + 4 + nd_len > size) c.fail("NodeDef runs past the args");
  NodeDef nd;
  if (!parse_node_def(a + nd_at + 4, nd_len, &nd)) c.fail("NodeDef is not a valid protobuf");
  if (kernel == kRunCpuKernel) c.op = nd.op;
  if (nd.inputs.size() + nd.outputs.size() != io)
    c.fail("NodeDef has " + std::to_string(nd.inputs.size() + nd.outputs.size()) + " tensors for " +
           std::to_string(io) + " io addresses");
  c.inputs = std::move(nd.inputs);
  c.outputs = std::move(nd.outputs);
  for (uint32_t i = 0; i < io; ++i) {
    AicpuTensor &t = i < c.inputs.size() ? c.inputs[i] : c.outputs[i - c.inputs.size()];
    t.addr = u64_at(a + kHeadBytes + 8ull * i);
  }
  if (ext_len != 0) apply_ext_info(c, ext_addr, ext_len);
  if (flags & RT_KERNEL_CUSTOM_AICPU) c.fail("custom AI CPU library " + so + " is not loaded on this device");
  const bool cpu_kernels = so == kCpuKernelsSo, aicpu_kernels = so == kAicpuKernelsSo;
  if (!cpu_kernels && !aicpu_kernels) c.fail("unknown AI CPU kernel library " + so);
  if (cpu_kernels && kernel != kRunCpuKernel) c.fail(so + " has no entry " + kernel);
  auto k = kernels().find(c.op);
  if (k == kernels().end()) c.fail("no such AI CPU kernel");
  for (const auto &side : {&c.inputs, &c.outputs})
    for (const AicpuTensor &t : *side)
      if (dtype_size(t.dtype) == 0) c.fail("tensor of unsupported dtype " + std::to_string((int)t.dtype));
  k->second(c);
}

int invalid(const std::string &why) {
  set_error_message(why);
  return rt_error(ACL_ERROR_RT_PARAM_INVALID);
}

}  // namespace
}  // namespace fakecann

using namespace fakecann;

extern "C" rtError_t rtCpuKernelLaunchWithFlag(const void *soName, const void *kernelName, uint32_t blockDim,
                                               const rtArgsEx_t *argsInfo, rtSmDesc_t * /*smDesc*/, rtStream_t stm,
                                               uint32_t flags) {
  const void *caller = __builtin_return_address(0);
  if (soName == nullptr || kernelName == nullptr) return invalid("AI CPU launch without a kernel library or name");
  if (argsInfo == nullptr) return invalid("NULL argsInfo");
  if (blockDim == 0) return invalid("blockDim must be at least 1");
  const uint32_t size = argsInfo->argsSize;
  if (argsInfo->args == nullptr || size < kHeadBytes + 4) return invalid("AI CPU args hold no parameter head");
  if (argsInfo->isNoNeedH2DCopy) return invalid("AI CPU args are copied by the runtime (isNoNeedH2DCopy unsupported)");
  if (in_device_range(argsInfo->args)) return invalid("args point to device memory");
  if (int e = require_context()) return e;
  Stream *s;
  if (int e = resolve_stream(stm, &s)) return e;
  std::string so(static_cast<const char *>(soName)), kernel(static_cast<const char *>(kernelName));
  void *dev_args = device_alloc_high(size);  // the runtime's args pool
  if (dev_args == nullptr) return rt_error(ACL_ERROR_RT_MEMORY_ALLOCATION);
  std::memcpy(device_bytes(dev_args, size), argsInfo->args, size);
  std::string op = op_of(kernel, static_cast<const uint8_t *>(argsInfo->args), size);
  log_kernel_launch(op.empty() ? kernel.c_str() : op.c_str(), caller);
  return stream_enqueue(
      s, [so, kernel, flags, dev_args, size] { run_aicpu(so, kernel, flags, dev_args, size); },
      "rtCpuKernelLaunchWithFlag", [dev_args] { device_free(dev_args); });
}
