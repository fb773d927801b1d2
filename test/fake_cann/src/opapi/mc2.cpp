// MC2, a matmul and a collective fused in one kernel (ops-transformer mc2/*/docs): the three torch_npu launches on
// Atlas A2 (npu_mm_all_reduce_base, npu_all_gather_base_mm, npu_mm_reduce_scatter_base):
//   MatmulAllReduce      output    = allreduce(x1 @ x2 + bias)                     x1 [m, k] or [b, s, k]
//   AllGatherMatmul      gatherOut = allgather(x1), output = gatherOut @ x2 + bias   output [m * ranks, n]
//   MatmulReduceScatter  output    = reducescatter(x1 @ x2 + bias)                 output [m / ranks, n]
// in FLOAT16 and BFLOAT16, x2 possibly transposed, x1 not. `group` is the communicator's name (HcclGetCommName): at
// phase 1 the op finds the communicator as libnnopbase does, through libhccl's HcomGetCommHandleByGroup (an unknown
// name is ACLNN_ERR_RUNTIME_ERROR), and takes the rank count from it. The kernel computes its matmul in double,
// rounds it to the dtype into a device buffer (HCCL's own buffer on a device) and runs the collective there through
// libhccl, inside the kernel: no HCCL call is made that a tool could see, as on a device.
#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "fakecann/device.h"
#include "fakecann/hccl_fused.h"
#include "fakecann/stream.h"
#include "op_common.h"

using namespace fakecann;
using namespace fakecann::ops;
using fakecann::hccl::FusedCollective;
using fakecann::hccl::FusedKind;

namespace {

constexpr DtypeSet kMc2Types = dtypes({ACL_FLOAT16, ACL_BF16});
constexpr int64_t kStopOnFailure = 1;          // streamMode: ACL_STOP_ON_FAILURE, the only one accepted
constexpr int64_t kMinK = 256, kMaxK = 65535;  // AllGatherMatmul and MatmulReduceScatter: k in [256, 65535)

// libhccl.so beside this library, as libnnopbase loads it (dlopen; the process has it loaded already when it made a
// communicator).
struct Hccl {
  HcclResult (*by_group)(const char *, HcclComm *) = nullptr;
  HcclResult (*rank_size)(HcclComm, uint32_t *) = nullptr;
  hccl::RunFused run = nullptr;
  std::string error;
};

const Hccl &hccl_library() {
  static const Hccl h = [] {
    Hccl out;
    static const char anchor = 0;
    Dl_info info;
    std::string path = "libhccl.so";
    if (dladdr(&anchor, &info) != 0 && info.dli_fname != nullptr && std::strrchr(info.dli_fname, '/') != nullptr)
      path = std::string(info.dli_fname, std::strrchr(info.dli_fname, '/') + 1) + path;
    void *lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      out.error = "cannot load " + path + ": " + dlerror();
      return out;
    }
    out.by_group = reinterpret_cast<decltype(out.by_group)>(dlsym(lib, "HcomGetCommHandleByGroup"));
    out.rank_size = reinterpret_cast<decltype(out.rank_size)>(dlsym(lib, "HcclGetRankSize"));
    out.run = reinterpret_cast<hccl::RunFused>(dlsym(lib, "fakehccl_run_fused"));
    if (out.by_group == nullptr || out.rank_size == nullptr || out.run == nullptr)
      out.error = path + " lacks MC2 support";
    return out;
  }();
  return h;
}

struct Group {
  HcclComm comm = nullptr;
  uint32_t ranks = 0;
  hccl::RunFused run = nullptr;
};

Group resolve(const char *group) {
  if (group == nullptr) throw ParamError{ACLNN_ERR_PARAM_NULLPTR, "group is NULL"};
  if (*group == '\0') fail("group is empty");
  const Hccl &h = hccl_library();
  if (!h.error.empty()) throw ParamError{ACLNN_ERR_RUNTIME_ERROR, h.error};
  Group g{nullptr, 0, h.run};
  if (h.by_group(group, &g.comm) != HCCL_SUCCESS || h.rank_size(g.comm, &g.ranks) != HCCL_SUCCESS)
    throw ParamError{ACLNN_ERR_RUNTIME_ERROR, std::string("no communicator named '") + group + "' on this device"};
  return g;
}

// CANN's test of a transposed operand: the last two dims laid out column-major.
bool transposed(const TensorView &v) {
  const size_t r = v.shape.size();
  return r >= 2 && v.shape[r - 2] > 1 && v.shape[r - 1] > 1 && v.strides[r - 2] == 1 &&
         v.strides[r - 1] == v.shape[r - 2];
}

// The checks every MC2 op makes of its operands and attributes (dtypes, streamMode, the layouts).
void check_common(const TensorView &a, const TensorView &b, const TensorView *bias, const TensorView &out,
                  int64_t stream_mode) {
  if (a.dtype != b.dtype || a.dtype != out.dtype || (bias != nullptr && bias->dtype != a.dtype))
    fail("x1, x2, bias and output must have one dtype");
  if (stream_mode != kStopOnFailure) fail("streamMode " + std::to_string(stream_mode) + " is not 1");
  if (b.shape.size() != 2) fail("x2 " + show(b.shape) + " must be 2-D");
  if (transposed(a)) fail("x1 may not be transposed");
  if (a.shape.empty() || a.shape.back() != b.shape[0])
    fail("x1 " + show(a.shape) + " and x2 " + show(b.shape) + " differ in k");
  if (bias != nullptr) require_shape(*bias, {b.shape[1]}, "bias");
}

void check_reduce_op(const char *reduce_op) {
  if (reduce_op == nullptr) throw ParamError{ACLNN_ERR_PARAM_NULLPTR, "reduceOp is NULL"};
  if (std::strcmp(reduce_op, "sum") != 0) fail(std::string("reduceOp '") + reduce_op + "' is not \"sum\"");
}

HcclDataType hccl_type(aclDataType t) { return t == ACL_BF16 ? HCCL_DATA_TYPE_BFP16 : HCCL_DATA_TYPE_FP16; }

// Device memory of the kernel's collective, freed when the kernel is done with it.
struct Staging {
  void *p = nullptr;
  explicit Staging(uint64_t bytes) : p(device_alloc_high(std::max<uint64_t>(bytes, 1))) {
    if (p == nullptr) throw KernelError("out of device memory for the collective's buffer");
  }
  ~Staging() { device_free(p); }
  Staging(const Staging &) = delete;
  Staging &operator=(const Staging &) = delete;
};

// a [m, k] @ b [k, n] + bias, in double.
Values matmul(const Values &a, const Values &b, const Values &bias, int64_t m, int64_t k, int64_t n) {
  Values r((size_t)(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) r[(size_t)(i * n + j)] = bias.empty() ? 0.0 : bias[(size_t)j];
    for (int64_t q = 0; q < k; ++q)
      for (int64_t j = 0; j < n; ++j) r[(size_t)(i * n + j)] += a[(size_t)(i * k + q)] * b[(size_t)(q * n + j)];
  }
  return r;
}

struct Fused {
  Group group;
  FusedKind kind = FusedKind::AllReduce;
  const char *api = "";
  int64_t m = 0, k = 0, n = 0;  // of this rank's x1 (rows flattened) and x2
};

// Slots: x1, x2, bias, output, and AllGatherMatmul's gatherOut.
void run_fused(const Fused &f, const Slots &s) {
  const bool gather_x1 = f.kind == FusedKind::AllGather;
  // Empty operands: CANN launches nothing and no rank communicates (AllGatherMatmul still gathers for an empty x2).
  if (f.m == 0 || (!gather_x1 && f.n == 0)) return;
  const TensorView &out = view(s, 3);
  const aclDataType dt = out.dtype;
  const Values bias = s[2].present ? gather(view(s, 2)) : Values();
  const int64_t ranks = f.group.ranks;
  // What this rank sends (x1, or its matmul rounded to the dtype) and what it receives.
  const Shape sent = gather_x1 ? Shape{f.m, f.k} : Shape{f.m, f.n};
  const Shape got = gather_x1                            ? Shape{f.m * ranks, f.k}
                    : f.kind == FusedKind::ReduceScatter ? Shape{f.m / ranks, f.n}
                                                         : Shape{f.m, f.n};
  Staging send(dtype_size(dt) * (uint64_t)numel(sent)), recv(dtype_size(dt) * (uint64_t)numel(got));
  scatter(contiguous_view(dt, sent, send.p),
          gather_x1 ? gather(view(s, 0)) : matmul(gather(view(s, 0)), gather(view(s, 1)), bias, f.m, f.k, f.n));
  // HCCL's counts: what each rank sends (AllReduce, AllGather), what each receives (ReduceScatter).
  const uint64_t count = (uint64_t)numel(f.kind == FusedKind::ReduceScatter ? got : sent);
  f.group.run(f.group.comm, FusedCollective{f.api, f.kind, hccl_type(dt), HCCL_REDUCE_SUM, count, send.p, recv.p});
  Values result = gather(contiguous_view(dt, got, recv.p));
  if (gather_x1) {
    if (s[4].present && view(s, 4).numel() > 0) scatter(view(s, 4), result);
    result = matmul(result, gather(view(s, 1)), bias, got[0], f.k, f.n);
  }
  scatter(out, result);
}

ExecutorSpec fused_spec(const Fused &f, Slots slots, int64_t out_elements) {
  return ExecutorSpec{"", std::move(slots), workspace_for(out_elements), [f](const Slots &s) { run_fused(f, s); }};
}

}  // namespace

extern "C" {

aclnnStatus aclnnMatmulAllReduceGetWorkspaceSize(const aclTensor *x1, const aclTensor *x2, const aclTensor *bias,
                                                 const char *group, const char *reduceOp, int64_t commTurn,
                                                 int64_t streamMode, const aclTensor *output, uint64_t *workspaceSize,
                                                 aclOpExecutor **executor) {
  (void)commTurn;  // the docs allow only 0; CANN's aclnn layer does not check it
  return phase1("MatmulAllReduce", workspaceSize, executor, [&] {
    const TensorView &a = tensor(x1, "x1", kMc2Types), &b = tensor(x2, "x2", kMc2Types);
    const TensorView &o = tensor(output, "output", kMc2Types);
    const TensorView *bv = optional_tensor(bias, "bias", kMc2Types);
    check_common(a, b, bv, o, streamMode);
    check_reduce_op(reduceOp);
    if (a.shape.size() < 2 || a.shape.size() > 3) fail("x1 " + show(a.shape) + " must be 2-D or 3-D");
    Shape want = a.shape;
    want.back() = b.shape[1];
    require_shape(o, want, "output");
    Fused f{resolve(group), FusedKind::AllReduce, "MatmulAllReduce", numel(a.shape) / a.shape.back(), a.shape.back(),
            b.shape[1]};
    return fused_spec(
        f, {nn::slot(x1, Io::Input), nn::slot(x2, Io::Input), nn::slot(bias, Io::Input), nn::slot(output, Io::Output)},
        o.numel());
  });
}

aclnnStatus aclnnAllGatherMatmulGetWorkspaceSize(const aclTensor *x1, const aclTensor *x2, const aclTensor *bias,
                                                 const char *group, int64_t gatherIndex, int64_t commTurn,
                                                 int64_t streamMode, const aclTensor *output,
                                                 const aclTensor *gatherOut, uint64_t *workspaceSize,
                                                 aclOpExecutor **executor) {
  (void)commTurn;
  return phase1("AllGatherMatmul", workspaceSize, executor, [&] {
    const TensorView &a = tensor(x1, "x1", kMc2Types), &b = tensor(x2, "x2", kMc2Types);
    const TensorView &o = tensor(output, "output", kMc2Types);
    const TensorView *bv = optional_tensor(bias, "bias", kMc2Types);
    const TensorView *g = optional_tensor(gatherOut, "gatherOut", dtypes({a.dtype}));
    check_common(a, b, bv, o, streamMode);
    if (a.shape.size() != 2 || a.shape[1] < kMinK || a.shape[1] >= kMaxK)
      fail("x1 " + show(a.shape) + " must be 2-D with k in [256, 65535)");
    if (gatherIndex != 0) fail("gatherIndex " + std::to_string(gatherIndex) + " is not 0 (x1 is what is gathered)");
    Fused f{resolve(group), FusedKind::AllGather, "AllGatherMatmul", a.shape[0], a.shape[1], b.shape[1]};
    require_shape(o, {f.m * f.group.ranks, f.n}, "output");
    if (g != nullptr && g->numel() > 0) require_shape(*g, {f.m * f.group.ranks, f.k}, "gatherOut");
    return fused_spec(f,
                      {nn::slot(x1, Io::Input), nn::slot(x2, Io::Input), nn::slot(bias, Io::Input),
                       nn::slot(output, Io::Output), nn::slot(gatherOut, Io::Output)},
                      o.numel());
  });
}

aclnnStatus aclnnMatmulReduceScatterGetWorkspaceSize(const aclTensor *x1, const aclTensor *x2, const aclTensor *bias,
                                                     const char *group, const char *reduceOp, int64_t commTurn,
                                                     int64_t streamMode, const aclTensor *output,
                                                     uint64_t *workspaceSize, aclOpExecutor **executor) {
  (void)commTurn;
  return phase1("MatmulReduceScatter", workspaceSize, executor, [&] {
    const TensorView &a = tensor(x1, "x1", kMc2Types), &b = tensor(x2, "x2", kMc2Types);
    const TensorView &o = tensor(output, "output", kMc2Types);
    const TensorView *bv = optional_tensor(bias, "bias", kMc2Types);
    check_common(a, b, bv, o, streamMode);
    check_reduce_op(reduceOp);
    if (a.shape.size() != 2 || a.shape[1] < kMinK || a.shape[1] >= kMaxK)
      fail("x1 " + show(a.shape) + " must be 2-D with k in [256, 65535)");
    Fused f{resolve(group), FusedKind::ReduceScatter, "MatmulReduceScatter", a.shape[0], a.shape[1], b.shape[1]};
    if (f.m % f.group.ranks != 0)
      fail("x1's m " + std::to_string(f.m) + " is not a multiple of the " + std::to_string(f.group.ranks) + " ranks");
    require_shape(o, {f.m / f.group.ranks, f.n}, "output");
    return fused_spec(
        f, {nn::slot(x1, Io::Input), nn::slot(x2, Io::Input), nn::slot(bias, Io::Input), nn::slot(output, Io::Output)},
        o.numel());
  });
}

}  // extern "C"
