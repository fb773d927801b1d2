// libms_kbk.so: a MindSpore-shaped kernel-by-kernel runtime (jit_level O0/O1 on ms_backend), as
// shared/reference/mindspore_runtime.md §1.1-1.3 describes MindSpore 2.5-2.7. examples/ms_kbk_train.py drives it.
//
// What it does as MindSpore does:
// - Entry points: every aclnn, aclrt, aclop and aclmdlRI function is found with dlopen + dlsym (libnnopbase then
//   libopapi, libascendcl, libacl_op_compiler: op_api_exec.cc:178-222, symbol_utils.cc:33-44); the one link-time CANN
//   call is the AI CPU launch, rtCpuKernelLaunchWithFlag (aicpu_kernel_mod.cc:400-408), with libruntime in DT_NEEDED.
// - Build (Resize, once per kernel): aclnnXxxGetWorkspaceSize then aclSetAclOpExecutorRepeatable (GEN_EXECUTOR_FOR_
//   RESIZE); the executor is kept. Launch (every step): aclSetTensorAddr / aclSetDynamicTensorAddr for every tensor
//   (UPDATE_TENSOR_FOR_LAUNCH) then aclnnXxx on the stream (RUN_OP_API_ASYNC). Activations and gradients come from a
//   memory pool whose addresses change from step to step, so the executors are rebound every step.
// - aclop (AclKernelMod, AclRunner::Run with is_sync): stream synchronize, then aclopCompileAndExecuteV2 wrapped in a
//   KernelLaunchInner record. AI CPU (AicpuOpKernelMod): the ext info copied with aclrtMemcpyAsync, then the args
//   (parameter head, io addresses, NodeDef) launched with rtCpuKernelLaunchWithFlag("libcpu_kernels.so",
//   "RunCpuKernel").
// - Threads: the Python thread builds the graph and waits in kbk_step(); every kernel is launched by the actor thread,
//   named ActorThread_0 (actor_threadpool.cc:35). Each step the actor checks the high-performance mode
//   (IsHighPerfModeAtExec: off while the runtime profiler is on): HP launches kernels bare (LaunchKernelHP), otherwise
//   each launch is wrapped in PROFILER_START/END(kKernel, kKernelLaunch, fullname_with_scope) as
//   GeKernelExecutor::LaunchKernel does, after a PreLaunch and a MemoryAlloc record of the actor.
// - Capture (kbk_init capture=1, as set_kernel_launch_capture(True), graph_capture_manager.cc): the first step
//   captures each range of capturable kernels into a model runtime instance (aclmdlRICaptureBegin RELAXED ...
//   aclmdlRICaptureEnd) and runs it with aclmdlRIExecuteAsync; the aclop kernel, which synchronizes the stream, splits
//   the ranges and is launched normally. Later steps replay the graphs around it. Addresses are fixed in this mode.
//
// The network: a 2-layer MLP trained with MSE and AdamW under a static loss scale (TrainOneStepWithLossScaleCell):
//   x, t = GatherV2(X, idx), GatherV2(T, idx)                     AI CPU
//   y = relu(x @ w1 + b1) @ w2 + b2; loss = mse(y, t)             aclnn Matmul, Add, Relu, MseLoss
//   backward from sens = loss_scale                               aclnn MseLossBackward, Matmul, ReduceSum; aclop
//   ReluGrad g = grads * (1 / loss_scale); step += 1; AdamW(params, g)     aclnn ForeachMulScalarList, Adds,
//   ApplyAdamWV2
// Built with _GLIBCXX_USE_CXX11_ABI=0, as MindSpore is (the ProfilerData it hands libmindspore_profiler.so).
#include <dlfcn.h>
#include <pthread.h>
#include <time.h>

#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "acl/acl.h"
#include "acl/acl_op_compiler.h"
#include "aclnn/acl_meta.h"
#include "profiler.h"
#include "runtime/rt.h"

namespace {

using mindspore::runtime::ProfilerAnalyzer;
using mindspore::runtime::ProfilerData;
using mindspore::runtime::ProfilerEvent;
using mindspore::runtime::ProfilerModule;

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string g_error;

// ---- entry points, by dlopen + dlsym --------------------------------------------------------------------------------
struct Libs {
  void *ascendcl = nullptr, *op_compiler = nullptr, *nnopbase = nullptr, *opapi = nullptr;
  std::string home;

  void open(const std::string &ascend_home) {
    home = ascend_home;
    auto lib = [&](const char *name) {
      std::string path = home + "/lib64/" + name;
      void *h = dlopen(path.c_str(), RTLD_LAZY | RTLD_LOCAL);
      if (h == nullptr) throw Error(std::string("dlopen ") + path + ": " + dlerror());
      return h;
    };
    ascendcl = lib("libascendcl.so");
    op_compiler = lib("libacl_op_compiler.so");
    nnopbase = lib("libnnopbase.so");
    opapi = lib("libopapi.so");
  }
  template <typename F>
  F sym(void *handle, const char *name) const {
    void *p = dlsym(handle, name);
    if (p == nullptr) throw Error(std::string("dlsym ") + name);
    return reinterpret_cast<F>(p);
  }
  // GetOpApiFunc: libnnopbase, then libopapi.
  template <typename F>
  F op_api(const std::string &name) const {
    for (void *h : {nnopbase, opapi})
      if (void *p = dlsym(h, name.c_str())) return reinterpret_cast<F>(p);
    throw Error("no op API function " + name);
  }
};

#define KBK_ACL_FUNCTIONS(X)                                                                            \
  X(aclInit, aclError (*)(const char *))                                                                \
  X(aclrtSetDevice, aclError (*)(int32_t))                                                              \
  X(aclrtResetDevice, aclError (*)(int32_t))                                                            \
  X(aclrtCreateStream, aclError (*)(aclrtStream *))                                                     \
  X(aclrtDestroyStream, aclError (*)(aclrtStream))                                                      \
  X(aclrtSynchronizeStream, aclError (*)(aclrtStream))                                                  \
  X(aclrtSynchronizeStreamWithTimeout, aclError (*)(aclrtStream, int32_t))                              \
  X(aclrtMalloc, aclError (*)(void **, size_t, aclrtMemMallocPolicy))                                   \
  X(aclrtFree, aclError (*)(void *))                                                                    \
  X(aclrtMemcpy, aclError (*)(void *, size_t, const void *, size_t, aclrtMemcpyKind))                   \
  X(aclrtMemcpyAsync, aclError (*)(void *, size_t, const void *, size_t, aclrtMemcpyKind, aclrtStream)) \
  X(aclGetRecentErrMsg, const char *(*)())                                                              \
  X(aclCreateTensorDesc, aclTensorDesc *(*)(aclDataType, int, const int64_t *, aclFormat))              \
  X(aclDestroyTensorDesc, void (*)(const aclTensorDesc *))                                              \
  X(aclCreateDataBuffer, aclDataBuffer *(*)(void *, size_t))                                            \
  X(aclDestroyDataBuffer, aclError (*)(const aclDataBuffer *))                                          \
  X(aclopCreateAttr, aclopAttr *(*)())                                                                  \
  X(aclopDestroyAttr, void (*)(const aclopAttr *))                                                      \
  X(aclmdlRICaptureBegin, aclError (*)(aclrtStream, aclmdlRICaptureMode))                               \
  X(aclmdlRICaptureGetInfo, aclError (*)(aclrtStream, aclmdlRICaptureStatus *, aclmdlRI *))             \
  X(aclmdlRICaptureEnd, aclError (*)(aclrtStream, aclmdlRI *))                                          \
  X(aclmdlRIExecuteAsync, aclError (*)(aclmdlRI, aclrtStream))                                          \
  X(aclmdlRIDestroy, aclError (*)(aclmdlRI))

#define KBK_META_FUNCTIONS(X)                                                                                    \
  X(aclnnInit, aclnnStatus (*)(const char *))                                                                    \
  X(aclCreateTensor, aclTensor *(*)(const int64_t *, uint64_t, aclDataType, const int64_t *, int64_t, aclFormat, \
                                    const int64_t *, uint64_t, void *))                                          \
  X(aclCreateScalar, aclScalar *(*)(void *, aclDataType))                                                        \
  X(aclCreateIntArray, aclIntArray *(*)(const int64_t *, uint64_t))                                              \
  X(aclCreateTensorList, aclTensorList *(*)(const aclTensor *const *, uint64_t))                                 \
  X(aclCreateScalarList, aclScalarList *(*)(const aclScalar *const *, uint64_t))                                 \
  X(aclDestroyTensor, aclnnStatus (*)(const aclTensor *))                                                        \
  X(aclDestroyScalar, aclnnStatus (*)(const aclScalar *))                                                        \
  X(aclDestroyIntArray, aclnnStatus (*)(const aclIntArray *))                                                    \
  X(aclDestroyTensorList, aclnnStatus (*)(const aclTensorList *))                                                \
  X(aclDestroyScalarList, aclnnStatus (*)(const aclScalarList *))                                                \
  X(aclSetAclOpExecutorRepeatable, aclnnStatus (*)(aclOpExecutor *))                                             \
  X(aclDestroyAclOpExecutor, aclnnStatus (*)(aclOpExecutor *))                                                   \
  X(aclSetTensorAddr, aclnnStatus (*)(aclOpExecutor *, const size_t, aclTensor *, void *))                       \
  X(aclSetDynamicTensorAddr, aclnnStatus (*)(aclOpExecutor *, size_t, const size_t, aclTensorList *, void *))

struct Api {
#define KBK_MEMBER(name, type) std::type_identity_t<type> name = nullptr;
  KBK_ACL_FUNCTIONS(KBK_MEMBER)
  KBK_META_FUNCTIONS(KBK_MEMBER)
#undef KBK_MEMBER
  using CompileAndExecuteV2 = aclError (*)(const char *, int, aclTensorDesc *[], aclDataBuffer *[], int,
                                           aclTensorDesc *[], aclDataBuffer *[], aclopAttr *, aclopEngineType,
                                           aclopCompileType, const char *, aclrtStream);
  CompileAndExecuteV2 aclopCompileAndExecuteV2 = nullptr;

  void load(const Libs &l) {
#define KBK_ACL(name, type) name = l.sym<type>(l.ascendcl, #name);
#define KBK_META(name, type) name = l.op_api<type>(#name);
    KBK_ACL_FUNCTIONS(KBK_ACL)
    KBK_META_FUNCTIONS(KBK_META)
#undef KBK_ACL
#undef KBK_META
    aclopCompileAndExecuteV2 = l.sym<CompileAndExecuteV2>(l.op_compiler, "aclopCompileAndExecuteV2");
  }
};

Libs g_libs;
Api g_api;

void check(int rc, const std::string &what) {
  if (rc == 0) return;
  const char *msg = g_api.aclGetRecentErrMsg ? g_api.aclGetRecentErrMsg() : nullptr;
  throw Error(what + " failed with " + std::to_string(rc) + (msg && *msg ? std::string(": ") + msg : ""));
}

// ---- device tensors ---------------------------------------------------------------------------------------------
struct DeviceTensor {
  std::vector<int64_t> shape;
  aclDataType dtype = ACL_FLOAT;
  void *addr = nullptr;  // set by the memory manager: fixed for parameters, per step for activations
  bool per_step = false;
  uint64_t bytes() const {
    uint64_t n = 4;  // float32 / int32 here
    for (int64_t d : shape) n *= (uint64_t)d;
    return n;
  }
};

// A view of a device tensor as a kernel takes it (a transpose is strides over the same storage).
struct View {
  DeviceTensor *t = nullptr;
  std::vector<int64_t> shape, strides;
};

std::vector<int64_t> row_major(const std::vector<int64_t> &shape) {
  std::vector<int64_t> s(shape.size());
  int64_t k = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = k;
    k *= shape[i];
  }
  return s;
}

View whole(DeviceTensor *t) { return View{t, t->shape, row_major(t->shape)}; }
View transposed(DeviceTensor *t) {  // 2-D
  return View{t, {t->shape[1], t->shape[0]}, {1, t->shape[1]}};
}

aclFormat ms_format(size_t ndim) {  // op_api_convert.h: NCL / NCHW / NCDHW by rank, else ND
  return ndim == 3 ? ACL_FORMAT_NCL : ndim == 4 ? ACL_FORMAT_NCHW : ndim == 5 ? ACL_FORMAT_NCDHW : ACL_FORMAT_ND;
}

aclTensor *make_tensor(const View &v) {
  // MindSpore: views use their strides, storage dims = the storage's shape, tensorData = the device address.
  return g_api.aclCreateTensor(v.shape.data(), v.shape.size(), v.t->dtype, v.strides.data(), 0,
                               ms_format(v.shape.size()), v.t->shape.data(), v.t->shape.size(), v.t->addr);
}

// ---- kernels --------------------------------------------------------------------------------------------------------
struct Kernel {
  std::string fullname;    // fullname_with_scope
  bool capturable = true;  // false: it synchronizes the stream (an ACL graph range ends before it)
  virtual ~Kernel() = default;
  virtual void Resize() {}
  virtual void Launch(aclrtStream stream) = 0;
};

// AclnnKernelMod: phase 1 once (Resize), address updates and phase 2 every launch.
struct AclnnKernel : Kernel {
  struct Slot {
    std::vector<View> views;  // one (a tensor) or several (a tensor list)
    bool list = false;
    std::vector<aclTensor *> handles;
    aclTensorList *list_handle = nullptr;
  };
  std::string op;
  std::vector<Slot> slots;  // the op's tensor parameters, in declaration order
  // Calls aclnn<op>GetWorkspaceSize with the slots' handles (in order) and the op's other arguments.
  std::function<aclnnStatus(const std::vector<void *> &, uint64_t *, aclOpExecutor **)> phase1;
  using Phase2 = aclnnStatus (*)(void *, uint64_t, aclOpExecutor *, aclrtStream);
  Phase2 phase2 = nullptr;
  aclOpExecutor *executor = nullptr;
  uint64_t ws_size = 0;
  void *ws = nullptr;

  void Resize() override {
    std::vector<void *> args;
    for (Slot &s : slots) {
      for (const View &v : s.views) s.handles.push_back(make_tensor(v));
      if (s.views.empty()) {  // an absent optional tensor
        args.push_back(nullptr);
      } else if (s.list) {
        s.list_handle = g_api.aclCreateTensorList(s.handles.data(), s.handles.size());
        args.push_back(s.list_handle);
      } else {
        args.push_back(s.handles[0]);
      }
    }
    check(phase1(args, &ws_size, &executor), "aclnn" + op + "GetWorkspaceSize");
    check(g_api.aclSetAclOpExecutorRepeatable(executor), "aclSetAclOpExecutorRepeatable(" + op + ")");
    if (ws_size) check(g_api.aclrtMalloc(&ws, ws_size, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc(workspace)");
    phase2 = g_libs.op_api<Phase2>("aclnn" + op);
  }

  void Launch(aclrtStream stream) override {
    for (size_t i = 0; i < slots.size(); ++i) {  // the index counts absent optional tensors too
      Slot &s = slots[i];
      if (s.views.empty()) continue;
      if (s.list) {
        for (size_t m = 0; m < s.views.size(); ++m)
          check(g_api.aclSetDynamicTensorAddr(executor, i, m, s.list_handle, s.views[m].t->addr),
                "aclSetDynamicTensorAddr(" + op + ")");
      } else {
        check(g_api.aclSetTensorAddr(executor, i, s.handles[0], s.views[0].t->addr), "aclSetTensorAddr(" + op + ")");
      }
    }
    check(phase2(ws, ws_size, executor, stream), "aclnn" + op);
  }

  ~AclnnKernel() override {
    if (executor) g_api.aclDestroyAclOpExecutor(executor);
    for (Slot &s : slots) {
      if (s.list_handle)
        g_api.aclDestroyTensorList(s.list_handle);  // destroys its members
      else
        for (aclTensor *h : s.handles) g_api.aclDestroyTensor(h);
    }
    if (ws) g_api.aclrtFree(ws);
  }
};

AclnnKernel::Slot one(const View &v) { return AclnnKernel::Slot{{v}, false, {}, nullptr}; }

// AclKernelMod over AclRunner::Run(stream, is_sync = true): descriptors and buffers with this launch's addresses.
struct AclopKernel : Kernel {
  std::string op_type;
  std::vector<DeviceTensor *> inputs, outputs;

  void Launch(aclrtStream stream) override {
    std::vector<aclTensorDesc *> in_desc, out_desc;
    std::vector<aclDataBuffer *> in_buf, out_buf;
    for (DeviceTensor *t : inputs) {
      in_desc.push_back(g_api.aclCreateTensorDesc(t->dtype, (int)t->shape.size(), t->shape.data(), ACL_FORMAT_ND));
      in_buf.push_back(g_api.aclCreateDataBuffer(t->addr, t->bytes()));
    }
    for (DeviceTensor *t : outputs) {
      out_desc.push_back(g_api.aclCreateTensorDesc(t->dtype, (int)t->shape.size(), t->shape.data(), ACL_FORMAT_ND));
      out_buf.push_back(g_api.aclCreateDataBuffer(t->addr, t->bytes()));
    }
    aclopAttr *attr = g_api.aclopCreateAttr();
    int rc = g_api.aclrtSynchronizeStreamWithTimeout(stream, -1);
    if (rc == 0) {
      uint64_t start = 0;
      PROFILER_START(start);
      rc = g_api.aclopCompileAndExecuteV2(op_type.c_str(), (int)inputs.size(), in_desc.data(), in_buf.data(),
                                          (int)outputs.size(), out_desc.data(), out_buf.data(), attr, ACL_ENGINE_SYS,
                                          ACL_COMPILE_SYS, nullptr, stream);
      PROFILER_END(start, ProfilerModule::kKernel, ProfilerEvent::kKernelLaunchInner,
                   std::string("aclopCompileAndExecuteV2"), true);
    }
    g_api.aclopDestroyAttr(attr);
    for (auto *d : in_desc) g_api.aclDestroyTensorDesc(d);
    for (auto *d : out_desc) g_api.aclDestroyTensorDesc(d);
    for (auto *b : in_buf) g_api.aclDestroyDataBuffer(b);
    for (auto *b : out_buf) g_api.aclDestroyDataBuffer(b);
    check(rc, "aclopCompileAndExecuteV2(" + op_type + ")");
  }
};

// AicpuOpKernelMod: NodeDef and ext info made at Resize, args with this launch's addresses at Launch.
struct AicpuKernel : Kernel {
  std::string node_name;  // the op type the AI CPU runs
  std::vector<DeviceTensor *> inputs, outputs;
  std::string node_def, ext_info;
  void *ext_dev = nullptr;
  std::string args;

  static void varint(std::string &b, uint64_t v) {
    do {
      uint8_t c = v & 0x7f;
      v >>= 7;
      b.push_back((char)(c | (v ? 0x80 : 0)));
    } while (v);
  }
  static void field(std::string &b, uint32_t number, const std::string &bytes) {
    varint(b, (uint64_t)number << 3 | 2);
    varint(b, bytes.size());
    b += bytes;
  }
  static std::string tensor_proto(const DeviceTensor &t) {  // aicpuops.Tensor
    std::string shape, out;
    for (int64_t d : t.shape) {
      std::string dim;
      varint(dim, 1 << 3);
      varint(dim, (uint64_t)d);
      field(shape, 2, dim);
    }
    field(out, 1, shape);
    varint(out, 2 << 3);
    varint(out, (uint64_t)t.dtype);  // CANN's DataType numbering: ACL_FLOAT = DT_FLOAT = 0, ACL_INT32 = DT_INT32 = 3
    field(out, 3, "HBM");
    return out;
  }
  // {i32 type; u32 len; ShapeAndType {i32 type; i64 dims[8]}...} for inputs (1) and outputs (2).
  static void ext_shapes(std::string &b, int32_t type, const std::vector<DeviceTensor *> &ts) {
    uint32_t len = (uint32_t)ts.size() * 68;
    b.append(reinterpret_cast<const char *>(&type), 4).append(reinterpret_cast<const char *>(&len), 4);
    for (const DeviceTensor *t : ts) {
      int32_t dt = t->dtype;
      b.append(reinterpret_cast<const char *>(&dt), 4);
      for (size_t d = 0; d < 8; ++d) {
        int64_t v = d < t->shape.size() ? t->shape[d] : (d == t->shape.size() ? INT64_MIN : 0);
        b.append(reinterpret_cast<const char *>(&v), 8);
      }
    }
  }

  void Resize() override {
    node_def.clear();
    field(node_def, 2, node_name);
    for (DeviceTensor *t : inputs) field(node_def, 4, tensor_proto(*t));
    for (DeviceTensor *t : outputs) field(node_def, 5, tensor_proto(*t));
    ext_info.clear();
    int32_t shape_type_entry = 0, depend_in_shape = 1;
    uint32_t four = 4;
    ext_info.append(reinterpret_cast<const char *>(&shape_type_entry), 4)
        .append(reinterpret_cast<const char *>(&four), 4)
        .append(reinterpret_cast<const char *>(&depend_in_shape), 4);
    ext_shapes(ext_info, 1, inputs);
    ext_shapes(ext_info, 2, outputs);
    check(g_api.aclrtMalloc(&ext_dev, ext_info.size(), ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc(ext info)");
  }

  void Launch(aclrtStream stream) override {
    check(g_api.aclrtMemcpyAsync(ext_dev, ext_info.size(), ext_info.data(), ext_info.size(), ACL_MEMCPY_HOST_TO_DEVICE,
                                 stream),
          "aclrtMemcpyAsync(ext info)");
    const uint32_t io = (uint32_t)(inputs.size() + outputs.size()), nd_len = (uint32_t)node_def.size();
    const uint32_t length = 20 + 8 * io + 4 + nd_len, ext_len = (uint32_t)ext_info.size();
    const uint64_t ext_addr = reinterpret_cast<uint64_t>(ext_dev);
    args.clear();
    args.append(reinterpret_cast<const char *>(&length), 4)
        .append(reinterpret_cast<const char *>(&io), 4)
        .append(reinterpret_cast<const char *>(&ext_len), 4)
        .append(reinterpret_cast<const char *>(&ext_addr), 8);
    for (const auto *side : {&inputs, &outputs})
      for (DeviceTensor *t : *side) {
        uint64_t a = reinterpret_cast<uint64_t>(t->addr);
        args.append(reinterpret_cast<const char *>(&a), 8);
      }
    args.append(reinterpret_cast<const char *>(&nd_len), 4).append(node_def);
    rtArgsEx_t info{};
    info.args = args.data();
    info.argsSize = (uint32_t)args.size();
    check(rtCpuKernelLaunchWithFlag("libcpu_kernels.so", "RunCpuKernel", 1, &info, nullptr, stream, RT_KERNEL_DEFAULT),
          "rtCpuKernelLaunchWithFlag(" + node_name + ")");
  }

  ~AicpuKernel() override {
    if (ext_dev) g_api.aclrtFree(ext_dev);
  }
};

// ---- the graph ------------------------------------------------------------------------------------------------------
struct Config {
  int64_t n, d_in, hidden, d_out, batch;
  float lr, beta1, beta2, weight_decay, eps, loss_scale;
};

struct Graph {
  Config cfg{};
  std::vector<std::unique_ptr<DeviceTensor>> tensors;
  std::vector<std::unique_ptr<Kernel>> kernels;
  // Scalars and arrays the executors were made with (the host's, destroyed at the end).
  std::vector<aclScalar *> scalars;
  std::vector<aclScalarList *> scalar_lists;
  std::vector<aclIntArray *> int_arrays;
  DeviceTensor *params[4] = {}, *loss = nullptr, *indices = nullptr;
  // The memory pool: two arenas for the per-step tensors, used in turn (fixed: arena 0 only).
  void *arena[2] = {};
  uint64_t arena_bytes = 0;
  bool fixed_addresses = false;

  DeviceTensor *tensor(std::vector<int64_t> shape, aclDataType dtype, bool per_step) {
    auto t = std::make_unique<DeviceTensor>();
    t->shape = std::move(shape);
    t->dtype = dtype;
    t->per_step = per_step;
    if (!per_step) check(g_api.aclrtMalloc(&t->addr, t->bytes(), ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc(param)");
    tensors.push_back(std::move(t));
    return tensors.back().get();
  }
  DeviceTensor *activation(std::vector<int64_t> shape, aclDataType dtype = ACL_FLOAT) {
    return tensor(std::move(shape), dtype, true);
  }
  DeviceTensor *parameter(std::vector<int64_t> shape, const void *host, aclDataType dtype = ACL_FLOAT) {
    DeviceTensor *t = tensor(std::move(shape), dtype, false);
    if (host) check(g_api.aclrtMemcpy(t->addr, t->bytes(), host, t->bytes(), ACL_MEMCPY_HOST_TO_DEVICE), "aclrtMemcpy");
    return t;
  }

  // Gives every per-step tensor its address in this step's arena.
  void allocate(uint64_t step) {
    if (arena_bytes == 0) {
      for (auto &t : tensors)
        if (t->per_step) arena_bytes += (t->bytes() + 511) / 512 * 512;
      for (void *&a : arena) check(g_api.aclrtMalloc(&a, arena_bytes, ACL_MEM_MALLOC_HUGE_FIRST), "aclrtMalloc(pool)");
    }
    char *p = static_cast<char *>(arena[fixed_addresses ? 0 : step % 2]);
    for (auto &t : tensors)
      if (t->per_step) {
        t->addr = p;
        p += (t->bytes() + 511) / 512 * 512;
      }
  }

  aclScalar *scalar(float v) {
    aclScalar *s = g_api.aclCreateScalar(&v, ACL_FLOAT);
    scalars.push_back(s);
    return s;
  }

  template <typename F>
  AclnnKernel *aclnn(const std::string &fullname, const std::string &op, std::vector<AclnnKernel::Slot> slots, F call) {
    auto k = std::make_unique<AclnnKernel>();
    k->fullname = fullname;
    k->op = op;
    k->slots = std::move(slots);
    k->phase1 = [call, op](const std::vector<void *> &h, uint64_t *ws, aclOpExecutor **ex) {
      return call(g_libs.op_api<void *>("aclnn" + op + "GetWorkspaceSize"), h, ws, ex);
    };
    AclnnKernel *raw = k.get();
    kernels.push_back(std::move(k));
    return raw;
  }

  void build(const Config &c, const float *x_all, const float *t_all, const float *w[4]);

  ~Graph() {
    kernels.clear();
    for (aclScalarList *l : scalar_lists) g_api.aclDestroyScalarList(l);  // destroys its members
    for (aclScalar *s : scalars) g_api.aclDestroyScalar(s);
    for (aclIntArray *a : int_arrays) g_api.aclDestroyIntArray(a);
    for (auto &t : tensors)
      if (!t->per_step && t->addr) g_api.aclrtFree(t->addr);
    for (void *a : arena)
      if (a) g_api.aclrtFree(a);
  }
};

using T = aclTensor *;
template <typename... A>
using Ws = aclnnStatus (*)(A..., uint64_t *, aclOpExecutor **);

void Graph::build(const Config &c, const float *x_all, const float *t_all, const float *w[4]) {
  cfg = c;
  const std::string net = "Default/network-WithLossCell/_backbone-MLP/";
  const std::string grad = "Gradients/Default/network-WithLossCell/_backbone-MLP/";
  const std::string opt = "Default/optimizer-AdamWeightDecay/";
  // Parameters and constants (fixed addresses).
  DeviceTensor *X = parameter({c.n, c.d_in}, x_all), *Tt = parameter({c.n, c.d_out}, t_all);
  int32_t zero = 0;
  DeviceTensor *axis = parameter({}, &zero, ACL_INT32);
  DeviceTensor *w1 = parameter({c.d_in, c.hidden}, w[0]), *b1 = parameter({c.hidden}, w[1]);
  DeviceTensor *w2 = parameter({c.hidden, c.d_out}, w[2]), *b2 = parameter({c.d_out}, w[3]);
  params[0] = w1, params[1] = b1, params[2] = w2, params[3] = b2;
  DeviceTensor *sens = parameter({}, &c.loss_scale);
  float zero_f = 0.0f;
  DeviceTensor *step_count = parameter({1}, &zero_f);
  DeviceTensor *m[4], *v[4];
  for (int i = 0; i < 4; ++i) {
    std::vector<float> zeros((size_t)(params[i]->bytes() / 4), 0.0f);
    m[i] = parameter(params[i]->shape, zeros.data());
    v[i] = parameter(params[i]->shape, zeros.data());
  }
  // Per-step tensors (the pool).
  indices = activation({c.batch}, ACL_INT32);
  DeviceTensor *x = activation({c.batch, c.d_in}), *t = activation({c.batch, c.d_out});
  DeviceTensor *h0 = activation({c.batch, c.hidden}), *h = activation({c.batch, c.hidden});
  DeviceTensor *a = activation({c.batch, c.hidden});
  DeviceTensor *y0 = activation({c.batch, c.d_out}), *y = activation({c.batch, c.d_out});
  loss = activation({});
  DeviceTensor *dy = activation({c.batch, c.d_out}), *dw2 = activation({c.hidden, c.d_out});
  DeviceTensor *db2 = activation({c.d_out}), *da = activation({c.batch, c.hidden});
  DeviceTensor *dh = activation({c.batch, c.hidden}), *dw1 = activation({c.d_in, c.hidden});
  DeviceTensor *db1 = activation({c.hidden});
  DeviceTensor *g[4] = {activation(w1->shape), activation(b1->shape), activation(w2->shape), activation(b2->shape)};
  allocate(0);  // the build's addresses: the executors are made with these

  auto gather = [&](const std::string &name, DeviceTensor *src, DeviceTensor *dst) {
    auto k = std::make_unique<AicpuKernel>();
    k->fullname = name;
    k->node_name = "GatherV2";
    k->inputs = {src, indices, axis};
    k->outputs = {dst};
    kernels.push_back(std::move(k));
  };
  auto matmul = [&](const std::string &name, const View &p, const View &q, DeviceTensor *out) {
    aclnn(name, "Matmul", {one(p), one(q), one(whole(out))},
          [](void *f, const std::vector<void *> &h, uint64_t *ws, aclOpExecutor **ex) {
            return reinterpret_cast<Ws<const aclTensor *, const aclTensor *, aclTensor *, int8_t>>(f)(
                (T)h[0], (T)h[1], (T)h[2], 0 /* KEEP_DTYPE */, ws, ex);
          });
  };
  auto add = [&](const std::string &name, DeviceTensor *p, DeviceTensor *q, DeviceTensor *out) {
    aclScalar *alpha = scalar(1.0f);
    aclnn(name, "Add", {one(whole(p)), one(whole(q)), one(whole(out))},
          [alpha](void *f, const std::vector<void *> &h, uint64_t *ws, aclOpExecutor **ex) {
            return reinterpret_cast<Ws<const aclTensor *, const aclTensor *, const aclScalar *, aclTensor *>>(f)(
                (T)h[0], (T)h[1], alpha, (T)h[2], ws, ex);
          });
  };
  auto reduce_rows = [&](const std::string &name, DeviceTensor *p, DeviceTensor *out) {
    int64_t dims[1] = {0};
    aclIntArray *d = g_api.aclCreateIntArray(dims, 1);
    int_arrays.push_back(d);
    aclnn(name, "ReduceSum", {one(whole(p)), one(whole(out))},
          [d](void *f, const std::vector<void *> &h, uint64_t *ws, aclOpExecutor **ex) {
            return reinterpret_cast<Ws<const aclTensor *, const aclIntArray *, bool, aclDataType, aclTensor *>>(f)(
                (T)h[0], d, false, ACL_FLOAT, (T)h[1], ws, ex);
          });
  };

  // Forward.
  gather("Default/GatherV2-op0", X, x);
  gather("Default/GatherV2-op1", Tt, t);
  matmul(net + "fc1-Dense/MatMul-op0", whole(x), whole(w1), h0);
  add(net + "fc1-Dense/BiasAdd-op0", h0, b1, h);
  aclnn(net + "relu-ReLU/ReLU-op0", "Relu", {one(whole(h)), one(whole(a))},
        [](void *f, const std::vector<void *> &hs, uint64_t *ws, aclOpExecutor **ex) {
          return reinterpret_cast<Ws<const aclTensor *, const aclTensor *>>(f)((T)hs[0], (T)hs[1], ws, ex);
        });
  matmul(net + "fc2-Dense/MatMul-op0", whole(a), whole(w2), y0);
  add(net + "fc2-Dense/BiasAdd-op0", y0, b2, y);
  aclnn("Default/network-WithLossCell/_loss_fn-MSELoss/MSELoss-op0", "MseLoss",
        {one(whole(y)), one(whole(t)), one(whole(loss))},
        [](void *f, const std::vector<void *> &h, uint64_t *ws, aclOpExecutor **ex) {
          return reinterpret_cast<Ws<const aclTensor *, const aclTensor *, int64_t, aclTensor *>>(f)(
              (T)h[0], (T)h[1], 1 /* mean */, (T)h[2], ws, ex);
        });
  // Backward, from sens = loss_scale.
  aclnn("Gradients/Default/network-WithLossCell/_loss_fn-MSELoss/gradMSELoss/MSELossGrad-op0", "MseLossBackward",
        {one(whole(sens)), one(whole(y)), one(whole(t)), one(whole(dy))},
        [](void *f, const std::vector<void *> &h, uint64_t *ws, aclOpExecutor **ex) {
          return reinterpret_cast<Ws<const aclTensor *, const aclTensor *, const aclTensor *, int64_t, aclTensor *>>(f)(
              (T)h[0], (T)h[1], (T)h[2], 1, (T)h[3], ws, ex);
        });
  matmul(grad + "fc2-Dense/gradMatMul/MatMul-op0", transposed(a), whole(dy), dw2);
  reduce_rows(grad + "fc2-Dense/gradBiasAdd/BiasAddGrad-op0", dy, db2);
  matmul(grad + "fc2-Dense/gradMatMul/MatMul-op1", whole(dy), transposed(w2), da);
  {
    auto k = std::make_unique<AclopKernel>();
    k->fullname = grad + "relu-ReLU/gradReLU/ReluGrad-op0";
    k->op_type = "ReluGrad";
    k->inputs = {da, a};
    k->outputs = {dh};
    k->capturable = false;  // AclRunner::Run(is_sync) synchronizes the stream
    kernels.push_back(std::move(k));
  }
  matmul(grad + "fc1-Dense/gradMatMul/MatMul-op0", transposed(x), whole(dh), dw1);
  reduce_rows(grad + "fc1-Dense/gradBiasAdd/BiasAddGrad-op0", dh, db1);
  // Unscale the gradients: one kernel over the four, a tensor list in and out.
  {
    aclScalar *inv[4];
    for (aclScalar *&s : inv) {
      float r = 1.0f / c.loss_scale;
      s = g_api.aclCreateScalar(&r, ACL_FLOAT);
    }
    aclScalarList *list = g_api.aclCreateScalarList(inv, 4);
    scalar_lists.push_back(list);
    AclnnKernel::Slot grads{{whole(dw1), whole(db1), whole(dw2), whole(db2)}, true, {}, nullptr};
    AclnnKernel::Slot outs{{whole(g[0]), whole(g[1]), whole(g[2]), whole(g[3])}, true, {}, nullptr};
    aclnn("Default/network-TrainOneStepWithLossScaleCell/grad_scale/ForeachMulScalarList-op0", "ForeachMulScalarList",
          {grads, outs}, [list](void *f, const std::vector<void *> &h, uint64_t *ws, aclOpExecutor **ex) {
            return reinterpret_cast<Ws<const aclTensorList *, const aclScalarList *, const aclTensorList *>>(f)(
                (aclTensorList *)h[0], list, (aclTensorList *)h[1], ws, ex);
          });
  }
  // AdamW.
  {
    aclScalar *one_s = scalar(1.0f);
    aclnn(opt + "Adds-op0", "Adds", {one(whole(step_count)), one(whole(step_count))},
          [one_s](void *f, const std::vector<void *> &h, uint64_t *ws, aclOpExecutor **ex) {
            return reinterpret_cast<Ws<const aclTensor *, const aclScalar *, const aclScalar *, aclTensor *>>(f)(
                (T)h[0], one_s, one_s, (T)h[1], ws, ex);
          });
  }
  for (int i = 0; i < 4; ++i) {
    const Config cc = c;
    aclnn(opt + "ApplyAdamW-op" + std::to_string(i), "ApplyAdamWV2",
          {one(whole(params[i])), one(whole(m[i])), one(whole(v[i])), AclnnKernel::Slot{}, one(whole(g[i])),
           one(whole(step_count))},
          [cc](void *f, const std::vector<void *> &h, uint64_t *ws, aclOpExecutor **ex) {
            return reinterpret_cast<Ws<aclTensor *, aclTensor *, aclTensor *, aclTensor *, const aclTensor *,
                                       const aclTensor *, float, float, float, float, float, bool, bool>>(f)(
                (T)h[0], (T)h[1], (T)h[2], nullptr, (T)h[4], (T)h[5], cc.lr, cc.beta1, cc.beta2, cc.weight_decay,
                cc.eps, false, false, ws, ex);
          });
  }
  // Resize: phase 1 of every kernel, once, on this (the caller's) thread.
  for (auto &k : kernels) {
    uint64_t start = 0;
    PROFILER_START(start);
    k->Resize();
    PROFILER_END(start, ProfilerModule::kKernel, ProfilerEvent::kKernelResize, k->fullname, false);
  }
}

// ---- the actor thread -----------------------------------------------------------------------------------------------
struct Runtime {
  int32_t device = 0;
  aclrtStream stream = nullptr;
  bool capture = false;
  std::unique_ptr<Graph> graph;
  std::vector<aclmdlRI> captured;  // one per range of capturable kernels
  uint64_t step = 0;

  std::thread actor;
  std::mutex mu;
  std::condition_variable cv;
  std::function<void()> job;
  bool stop = false, done = false;
  std::string job_error;

  void start_actor() {
    actor = std::thread([this] {
      pthread_setname_np(pthread_self(), "ActorThread_0");
      int rc = g_api.aclrtSetDevice(device);  // the actor binds the device to itself (BindDeviceToCurrentThread)
      std::unique_lock<std::mutex> lk(mu);
      for (;;) {
        cv.wait(lk, [&] { return stop || job; });
        if (!job) return;
        auto j = std::move(job);
        job = nullptr;
        lk.unlock();
        std::string err;
        try {
          if (rc != 0) check(rc, "aclrtSetDevice on the actor thread");
          j();
        } catch (const std::exception &e) {
          err = e.what();
        }
        lk.lock();
        job_error = err;
        done = true;
        cv.notify_all();
      }
    });
  }

  // Runs `j` on the actor thread; the caller waits (the Python thread waits in the graph run).
  void run_on_actor(std::function<void()> j) {
    std::unique_lock<std::mutex> lk(mu);
    job = std::move(j);
    done = false;
    cv.notify_all();
    cv.wait(lk, [&] { return done; });
    if (!job_error.empty()) throw Error(job_error);
  }

  void launch(Kernel &k, bool hp) {
    if (hp) {  // LaunchKernelHP: no profiler record
      k.Launch(stream);
      return;
    }
    uint64_t start = 0;
    PROFILER_START(start);
    k.Launch(stream);
    PROFILER_END(start, ProfilerModule::kKernel, ProfilerEvent::kKernelLaunch, k.fullname, false);
  }

  // SuperKernelActor: memory, then every kernel in execution order (LaunchAllKernels), or with capture / replay.
  void launch_all() {
    auto &prof = ProfilerAnalyzer::GetInstance();
    const bool hp = !prof.profiler_enable();  // IsHighPerfModeAtExec
    uint64_t start = 0;
    PROFILER_START(start);
    graph->allocate(step);
    PROFILER_END(start, ProfilerModule::kRuntime, ProfilerEvent::kMemoryAlloc, std::string("SuperKernelActor"), false);
    PROFILER_START(start);
    PROFILER_END(start, ProfilerModule::kRuntime, ProfilerEvent::kPreLaunch, std::string("SuperKernelActor"), false);
    if (!capture) {
      for (auto &k : graph->kernels) launch(*k, hp);
      return;
    }
    // ACL graph capture: ranges of capturable kernels, split by the others.
    size_t range = 0;
    auto &ks = graph->kernels;
    for (size_t i = 0; i < ks.size();) {
      if (!ks[i]->capturable) {
        launch(*ks[i++], hp);
        continue;
      }
      size_t end = i;
      while (end < ks.size() && ks[end]->capturable) ++end;
      if (range == captured.size()) {  // the capture step (CaptureBegin ... CaptureEnd, then run it)
        check(g_api.aclmdlRICaptureBegin(stream, ACL_MODEL_RI_CAPTURE_MODE_RELAXED), "aclmdlRICaptureBegin");
        aclmdlRICaptureStatus status;
        aclmdlRI ri = nullptr;
        check(g_api.aclmdlRICaptureGetInfo(stream, &status, &ri), "aclmdlRICaptureGetInfo");
        if (status != ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE) throw Error("the stream is not capturing");
        for (size_t j = i; j < end; ++j) launch(*ks[j], hp);
        check(g_api.aclmdlRICaptureEnd(stream, &ri), "aclmdlRICaptureEnd");
        captured.push_back(ri);
      }
      check(g_api.aclmdlRIExecuteAsync(captured[range], stream), "aclmdlRIExecuteAsync");
      ++range;
      i = end;
    }
  }
};

Runtime *g_rt = nullptr;

template <typename F>
int guard(F f) {
  try {
    f();
    return 0;
  } catch (const std::exception &e) {
    g_error = e.what();
    return 1;
  }
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) const char *kbk_last_error(void) { return g_error.c_str(); }

// dlopen + dlsym of the CANN libraries under `ascend_home`, ACL on `device`, one stream, the actor thread.
// capture != 0: ACL graph capture (the first step captures, later steps replay).
__attribute__((visibility("default"))) int kbk_init(const char *ascend_home, int32_t device, int32_t capture) {
  return guard([&] {
    g_libs.open(ascend_home);
    g_api.load(g_libs);
    int rc = g_api.aclInit(nullptr);
    if (rc != 0 && rc != ACL_ERROR_REPEAT_INITIALIZE) check(rc, "aclInit");
    check(g_api.aclnnInit(nullptr), "aclnnInit");
    g_rt = new Runtime;
    g_rt->device = device;
    g_rt->capture = capture != 0;
    check(g_api.aclrtSetDevice(device), "aclrtSetDevice");
    check(g_api.aclrtCreateStream(&g_rt->stream), "aclrtCreateStream");
    g_rt->start_actor();
  });
}

// Graph compile: memory and Resize (phase 1) of every kernel. w = {w1, b1, w2, b2}; hyper = {lr, beta1, beta2,
// weight_decay, eps, loss_scale}; dims = {n, d_in, hidden, d_out, batch}.
__attribute__((visibility("default"))) int kbk_build(const int64_t *dims, const float *hyper, const float *x_all,
                                                     const float *t_all, const float *w1, const float *b1,
                                                     const float *w2, const float *b2) {
  return guard([&] {
    Config c{dims[0], dims[1], dims[2], dims[3], dims[4], hyper[0], hyper[1], hyper[2], hyper[3], hyper[4], hyper[5]};
    g_rt->graph = std::make_unique<Graph>();
    g_rt->graph->fixed_addresses = g_rt->capture;
    const float *w[4] = {w1, b1, w2, b2};
    g_rt->graph->build(c, x_all, t_all, w);
  });
}

// One training step (after kbk_feed): the actor launches the graph. Returns when every kernel is launched (not run:
// kbk_loss waits for the device).
__attribute__((visibility("default"))) int kbk_step(void) {
  return guard([&] {
    Runtime &rt = *g_rt;
    rt.run_on_actor([&] { rt.launch_all(); });
    ++rt.step;
  });
}

// The next step's input, the `batch` row indices of the rows it trains on: copied into that step's pool buffer by the
// caller's thread (MindSpore's data prepare), after the device is done with the buffer.
__attribute__((visibility("default"))) int kbk_feed(const int32_t *indices) {
  return guard([&] {
    Runtime &rt = *g_rt;
    Graph &g = *rt.graph;
    g.allocate(rt.step);  // this step's pool addresses, so that the input lands where the kernels will read it
    check(g_api.aclrtSynchronizeStream(rt.stream), "aclrtSynchronizeStream");
    check(
        g_api.aclrtMemcpy(g.indices->addr, g.indices->bytes(), indices, g.indices->bytes(), ACL_MEMCPY_HOST_TO_DEVICE),
        "aclrtMemcpy(indices)");
  });
}

__attribute__((visibility("default"))) int kbk_loss(float *loss) {
  return guard([&] {
    check(g_api.aclrtSynchronizeStream(g_rt->stream), "aclrtSynchronizeStream");
    check(g_api.aclrtMemcpy(loss, 4, g_rt->graph->loss->addr, 4, ACL_MEMCPY_DEVICE_TO_HOST), "aclrtMemcpy(loss)");
  });
}

// Parameter `which` (0 w1, 1 b1, 2 w2, 3 b2) into `out` (n floats).
__attribute__((visibility("default"))) int kbk_read(int32_t which, float *out, uint64_t n) {
  return guard([&] {
    DeviceTensor *t = g_rt->graph->params[which];
    if (n * 4 != t->bytes()) throw Error("kbk_read: wrong size");
    check(g_api.aclrtSynchronizeStream(g_rt->stream), "aclrtSynchronizeStream");
    check(g_api.aclrtMemcpy(out, n * 4, t->addr, n * 4, ACL_MEMCPY_DEVICE_TO_HOST), "aclrtMemcpy(param)");
  });
}

// CPU time the actor thread has used (ns), and the graph's kernel count: per-kernel launch cost for benchmarks.
__attribute__((visibility("default"))) uint64_t kbk_actor_cpu_ns(void) {
  clockid_t clock;
  timespec ts;
  if (g_rt == nullptr || pthread_getcpuclockid(g_rt->actor.native_handle(), &clock) != 0 ||
      clock_gettime(clock, &ts) != 0)
    return 0;
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

__attribute__((visibility("default"))) uint64_t kbk_kernels(void) {
  return g_rt && g_rt->graph ? g_rt->graph->kernels.size() : 0;
}

__attribute__((visibility("default"))) int kbk_finalize(void) {
  return guard([&] {
    if (g_rt == nullptr) return;
    Runtime &rt = *g_rt;
    check(g_api.aclrtSynchronizeStream(rt.stream), "aclrtSynchronizeStream");
    for (aclmdlRI ri : rt.captured) check(g_api.aclmdlRIDestroy(ri), "aclmdlRIDestroy");
    rt.captured.clear();
    {
      std::lock_guard<std::mutex> lk(rt.mu);
      rt.stop = true;
    }
    rt.cv.notify_all();
    rt.actor.join();
    rt.graph.reset();
    g_api.aclrtDestroyStream(rt.stream);
    g_api.aclrtResetDevice(rt.device);
    delete g_rt;
    g_rt = nullptr;
  });
}

}  // extern "C"
