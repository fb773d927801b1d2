// Raw runtime kernels (runtime/kernel.h): AKG, custom and hand-written Ascend C kernels that bypass
// aclnn and aclop. Registration calls name them (shim/device/kernel_binaries.h); each launch is one kernel whose
// OpType is that name and whose arguments come from the opaque blob (shim/hooks/raw_kernel_args.h). The ACL's own
// kernel API (aclrtBinaryLoad*, aclrtLaunchKernel*) is shim/hooks/acl_kernels.cpp.
//
// The runtime copies the blob at launch, so it is read before forwarding. A launch made while another
// one is being captured on the thread (the aclnn, aclop or HCCL library launching its own kernel) belongs
// to that one, and the shim's own runtime calls (ReentryGuard) are not the host's: both pass through.
//
// AI CPU kernels (rtCpuKernelLaunchWithFlag, MindSpore's AicpuOpKernelMod) say more: their blob holds the op's NodeDef
// (shim/graph/aicpu_task.h), so each is the kernel of its op type (GatherV2) with typed tensors: the NodeDef's dtype
// and shape over each io address, inputs before the launch and outputs after it (docs/capture.md).
#include <algorithm>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "acl/acl_base.h"
#include "format/naming.h"
#include "runtime/kernel.h"
#include "shim/capture/capture_call.h"
#include "shim/capture/session.h"
#include "shim/device/device_allocations.h"
#include "shim/device/handles.h"
#include "shim/device/kernel_binaries.h"
#include "shim/graph/aicpu_task.h"
#include "shim/hooks/hook.h"
#include "shim/hooks/raw_kernel_args.h"

using namespace msprobe::shim;

namespace {

constexpr int32_t kAclFormatNd = 2;

bool registering() { return !ReentryGuard::active() && capture_enabled(); }

bool launched(rtError_t rc) { return rc == RT_ERROR_NONE; }

std::string stub_op_type(const void *stub) {
  std::string name(kUnknownRtKernel);
  guarded(Problem::DescriptorNotKept, [&] { name = kernel_binaries().stub_kernel(stub).value_or(kUnknownRtKernel); });
  return name;
}

std::string handle_op_type(const void *handle, uint64_t tiling_key) {
  std::string name(kUnknownRtKernel);
  guarded(Problem::DescriptorNotKept,
          [&] { name = kernel_binaries().handle_kernel(handle, tiling_key).value_or(kUnknownRtKernel); });
  return name;
}

void registered(const rtDevBinary_t *bin, void **hdl) {
  if (bin == nullptr || hdl == nullptr || *hdl == nullptr) return;
  guarded(Problem::DescriptorNotKept, [&] { kernel_binaries().register_binary(*hdl, bin->data, bin->length); });
}

// rtDevBinaryRegister and rtRegisterAllKernel: a binary the runtime accepted is recorded.
template <typename Real>
rtError_t register_binary(Real real, const rtDevBinary_t *bin, void **hdl) {
  if (!real) return ACL_ERROR_RT_INTERNAL_ERROR;
  rtError_t rc = real(bin, hdl);
  if (rc == RT_ERROR_NONE && registering()) registered(bin, hdl);
  return rc;
}

// How a launch names its kernel: by the stub registered with rtFunctionRegister, or by binary handle and tiling key.
struct ByStub {
  const void *stub;
  std::string op_type() const { return stub_op_type(stub); }
};
struct ByHandle {
  const void *handle;
  uint64_t tiling_key;
  std::string op_type() const { return handle_op_type(handle, tiling_key); }
};

// The launch variants' shared body: `real` gets `args` untouched; a launch of the host's is captured as the kernel
// `kernel` names, with the arguments `blob` (a Blob, or the rtArgsEx_t read only then) describes.
template <typename Real, typename Kernel, typename BlobSource, typename... Args>
rtError_t launch(Real real, const Kernel &kernel, const BlobSource &blob, rtStream_t stm, Args... args) {
  if (!real) return ACL_ERROR_RT_INTERNAL_ERROR;
  std::optional<BlobArgs> described;
  return capture_call([&] { return kernel.op_type(); }, stm,
                      [&](KernelLaunch &k) { described.emplace(blob_of(blob)).inputs(k); },
                      [&] { return real(args...); }, [&](KernelLaunch &k) { described->outputs(k); }, launched);
}

// ---- AI CPU kernels ----

constexpr std::string_view kRunCpuKernel = "RunCpuKernel";

// An AI CPU tensor as the dump describes it: the NodeDef's dtype and (static) shape, row-major, over its io address;
// nullopt when the NodeDef's shape is dynamic (a -1 dim, known only from the ext info in device memory) or too deep.
std::optional<TensorMeta> aicpu_tensor(const msprobe::shim::graph::AicpuTensor &t) {
  if (t.dtype < 0 || t.shape.size() > (size_t)kMaxDims) return std::nullopt;
  TensorMeta m;
  m.dtype = t.dtype;
  m.format = kAclFormatNd;
  m.ndim = (uint8_t)t.shape.size();
  int64_t stride = 1;
  for (size_t i = t.shape.size(); i-- > 0;) {
    if (t.shape[i] < 0) return std::nullopt;
    m.shape[i] = t.shape[i];
    m.strides[i] = stride;
    stride *= t.shape[i];
  }
  m.data = reinterpret_cast<void *>(t.addr);
  return m;
}

// One io address the NodeDef cannot type: the device bytes from it to its allocation's end, as raw kernels' are.
void aicpu_raw(KernelLaunch &k, uint64_t addr, bool input) {
  if (auto r = device_allocations().find(addr)) {
    if (input)
      k.input_tensor(raw_bytes(addr, r->end() - addr));
    else
      k.output_tensor(raw_bytes(addr, r->end() - addr));
  } else if (input) {
    k.input_value(raw_address_value(addr));
  }
}

// An AI CPU launch's arguments: typed from its NodeDef when the args parse (the op type is then the NodeDef's for
// RunCpuKernel), else as a raw kernel's.
class AicpuArgs {
 public:
  AicpuArgs(const char *kernel, const rtArgsEx_t *info) : kernel_(kernel), info_(info) {
    if (info->isNoNeedH2DCopy || info->args == nullptr) return;
    guarded(Problem::DescriptorNotKept, [&] {
      task_ = msprobe::shim::graph::parse_aicpu_args(
          std::span<const unsigned char>(static_cast<const unsigned char *>(info->args), info->argsSize));
    });
  }
  std::string op_type() const { return kernel_ == kRunCpuKernel && task_ && !task_->op.empty() ? task_->op : kernel_; }
  void describe(KernelLaunch &k, bool input) {
    if (!task_) {
      if (input)
        raw_.emplace(blob_of(info_)).inputs(k);
      else if (raw_)
        raw_->outputs(k);
      return;
    }
    if (!task_->described) {
      k.accesses_unknown();  // io addresses without the NodeDef's inputs and outputs
      for (uint64_t a : task_->io_addrs) aicpu_raw(k, a, input);
      return;
    }
    for (const auto &t : input ? task_->inputs : task_->outputs) {
      if (auto m = aicpu_tensor(t))
        input ? k.input_tensor(*m) : k.output_tensor(*m);
      else
        aicpu_raw(k, t.addr, input);
    }
  }

 private:
  std::string kernel_;
  const rtArgsEx_t *info_;
  std::optional<msprobe::shim::graph::AicpuTask> task_;
  std::optional<BlobArgs> raw_;
};

}  // namespace

// The hooks of this family, one a line (shim/hooks/hook.h).
#define MSPROBE_RT_KERNEL_HOOKS(X) \
  X(rtDevBinaryRegister)           \
  X(rtRegisterAllKernel)           \
  X(rtDevBinaryUnRegister)         \
  X(rtFunctionRegister)            \
  X(rtKernelLaunch)                \
  X(rtKernelLaunchWithFlag)        \
  X(rtKernelLaunchWithFlagV2)      \
  X(rtKernelLaunchWithHandle)      \
  X(rtKernelLaunchWithHandleV2)    \
  X(rtCpuKernelLaunchWithFlag)
MSPROBE_HOOK_SLOTS(MSPROBE_RT_KERNEL_HOOKS)

MSPROBE_HOOK rtError_t rtDevBinaryRegister(const rtDevBinary_t *bin, void **hdl) {
  return register_binary(MSPROBE_REAL(rtDevBinaryRegister), bin, hdl);
}

MSPROBE_HOOK rtError_t rtRegisterAllKernel(const rtDevBinary_t *bin, void **hdl) {
  return register_binary(MSPROBE_REAL(rtRegisterAllKernel), bin, hdl);
}

MSPROBE_HOOK rtError_t rtDevBinaryUnRegister(void *hdl) {
  auto real = MSPROBE_REAL(rtDevBinaryUnRegister);
  if (!real) return ACL_ERROR_RT_INTERNAL_ERROR;
  // Forgotten first: a binary registered by another thread right after may get the same handle.
  if (hdl != nullptr && registering())
    guarded(Problem::DescriptorNotKept, [&] { kernel_binaries().unregister_binary(hdl); });
  return real(hdl);
}

MSPROBE_HOOK rtError_t rtFunctionRegister(void *binHandle, const void *stubFunc, const char_t *stubName,
                                          const void *kernelInfoExt, uint32_t funcMode) {
  auto real = MSPROBE_REAL(rtFunctionRegister);
  if (!real) return ACL_ERROR_RT_INTERNAL_ERROR;
  rtError_t rc = real(binHandle, stubFunc, stubName, kernelInfoExt, funcMode);
  // The runtime accepted the strings, so they are readable names.
  if (rc == RT_ERROR_NONE && registering())
    guarded(Problem::DescriptorNotKept,
            [&] { kernel_binaries().register_function(binHandle, stubFunc, stubName, kernelInfoExt); });
  return rc;
}

MSPROBE_HOOK rtError_t rtKernelLaunch(const void *stubFunc, uint32_t blockDim, void *args, uint32_t argsSize,
                                      rtSmDesc_t *smDesc, rtStream_t stm) {
  return launch(MSPROBE_REAL(rtKernelLaunch), ByStub{stubFunc}, plain_blob(args, argsSize), stm, stubFunc, blockDim,
                args, argsSize, smDesc, stm);
}

MSPROBE_HOOK rtError_t rtKernelLaunchWithFlag(const void *stubFunc, uint32_t blockDim, rtArgsEx_t *argsInfo,
                                              rtSmDesc_t *smDesc, rtStream_t stm, uint32_t flags) {
  return launch(MSPROBE_REAL(rtKernelLaunchWithFlag), ByStub{stubFunc}, argsInfo, stm, stubFunc, blockDim, argsInfo,
                smDesc, stm, flags);
}

MSPROBE_HOOK rtError_t rtKernelLaunchWithFlagV2(const void *stubFunc, uint32_t blockDim, rtArgsEx_t *argsInfo,
                                                rtSmDesc_t *smDesc, rtStream_t stm, uint32_t flags,
                                                const rtTaskCfgInfo_t *cfgInfo) {
  return launch(MSPROBE_REAL(rtKernelLaunchWithFlagV2), ByStub{stubFunc}, argsInfo, stm, stubFunc, blockDim, argsInfo,
                smDesc, stm, flags, cfgInfo);
}

MSPROBE_HOOK rtError_t rtKernelLaunchWithHandle(void *hdl, const uint64_t tilingKey, uint32_t blockDim,
                                                rtArgsEx_t *argsInfo, rtSmDesc_t *smDesc, rtStream_t stm,
                                                const void *kernelInfo) {
  return launch(MSPROBE_REAL(rtKernelLaunchWithHandle), ByHandle{hdl, tilingKey}, argsInfo, stm, hdl, tilingKey,
                blockDim, argsInfo, smDesc, stm, kernelInfo);
}

MSPROBE_HOOK rtError_t rtKernelLaunchWithHandleV2(void *hdl, const uint64_t tilingKey, uint32_t blockDim,
                                                  rtArgsEx_t *argsInfo, rtSmDesc_t *smDesc, rtStream_t stm,
                                                  const rtTaskCfgInfo_t *cfgInfo) {
  return launch(MSPROBE_REAL(rtKernelLaunchWithHandleV2), ByHandle{hdl, tilingKey}, argsInfo, stm, hdl, tilingKey,
                blockDim, argsInfo, smDesc, stm, cfgInfo);
}

MSPROBE_HOOK rtError_t rtCpuKernelLaunchWithFlag(const void *soName, const void *kernelName, uint32_t blockDim,
                                                 const rtArgsEx_t *argsInfo, rtSmDesc_t *smDesc, rtStream_t stm,
                                                 uint32_t flags) {
  auto real = MSPROBE_REAL(rtCpuKernelLaunchWithFlag);
  if (!real) return ACL_ERROR_RT_INTERNAL_ERROR;
  auto forward = [&] { return real(soName, kernelName, blockDim, argsInfo, smDesc, stm, flags); };
  if (soName == nullptr || kernelName == nullptr || argsInfo == nullptr) return forward();
  std::optional<AicpuArgs> args;
  return capture_call([&] { return args.emplace(static_cast<const char *>(kernelName), argsInfo).op_type(); }, stm,
                      [&](KernelLaunch &k) { args->describe(k, true); }, forward,
                      [&](KernelLaunch &k) { args->describe(k, false); }, launched);
}

MSPROBE_HOOK_FAMILY(MSPROBE_RT_KERNEL_HOOKS, Linked)
