// The ACL's kernel API (runtime 14_Kernel_loading_and_execution, CANN 8.2+): binaries loaded with
// aclrtBinaryLoadFromFile / FromData, kernels named by aclrtBinaryGetFunction, and the launches real nnopbase and
// hand-written Ascend C hosts make now that rtKernelLaunch is deprecated. Each launch is one raw kernel whose OpType is
// the function's kernel name and whose arguments come from its blob, as rt launches' (shim/hooks/raw_kernel_args.h):
// - aclrtLaunchKernel: the blob is device memory already (the runtime reads it there): itself the one input;
// - aclrtLaunchKernelWithHostArgs: a host blob; each placeholder {addrOffset, dataOffset} has the runtime patch the
//   slot at addrOffset with the device address of the data at dataOffset, so the slots end at the first dataOffset;
// - aclrtLaunchKernelWithConfig: the blob of an args handle built with aclrtKernelArgs* (parameters in append order, a
//   placeholder an 8-byte slot whose buffer goes behind them): the handle is opaque, so the shim keeps its own copy of
//   the parameters, as the host appends and updates them. A handle never seen (built before capture began, or one of
//   the oldest when the host keeps more than kMaxArgsHandles) launches a kernel captured without arguments.
// A launch made inside another captured one (nnopbase's aclrtLaunchKernelWithHostArgs inside aclnn's phase 2) belongs
// to that one (capture_gate).
#include <algorithm>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "acl/acl.h"
#include "shim/capture/capture_call.h"
#include "shim/capture/session.h"
#include "shim/device/kernel_binaries.h"
#include "shim/hooks/hook.h"
#include "shim/hooks/raw_kernel_args.h"

using namespace msprobe::shim;

namespace {

bool registering() { return !ReentryGuard::active() && capture_enabled(); }
bool launched(aclError rc) { return rc == ACL_SUCCESS; }

// The parameters of the args handles the host builds (aclrtKernelArgsInit ... Finalize). CANN has no call that frees
// a handle, so the table keeps the newest kMaxArgsHandles. Made on first use and never destroyed.
class ArgsHandles {
 public:
  static constexpr size_t kMaxArgsHandles = 4096;

  void init(const void *args, const void *func) {
    std::lock_guard<std::mutex> lk(mu_);
    if (!handles_.count(args)) order_.push_back(args);
    handles_[args] = Handle{func, {}, {}};
    while (order_.size() > kMaxArgsHandles) {
      handles_.erase(order_.front());
      order_.pop_front();
    }
  }
  // A parameter appended (`bytes` null: a placeholder's 8-byte slot, which the runtime patches).
  void append(const void *args, const void *param, const void *bytes, size_t size) {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = handles_.find(args);
    if (it == handles_.end()) return;
    Handle &h = it->second;
    h.params[param] = Param{h.blob.size(), size};
    const auto *p = static_cast<const unsigned char *>(bytes);
    if (p != nullptr)
      h.blob.insert(h.blob.end(), p, p + size);
    else
      h.blob.resize(h.blob.size() + size, 0);
  }
  void update(const void *args, const void *param, const void *bytes, size_t size) {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = handles_.find(args);
    if (it == handles_.end()) return;
    auto p = it->second.params.find(param);
    if (p == it->second.params.end() || p->second.size != size) return;
    std::memcpy(it->second.blob.data() + p->second.offset, bytes, size);
  }
  // The handle's parameters as a blob, when known and made for `func`.
  std::optional<std::vector<unsigned char>> blob(const void *args, const void *func) const {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = handles_.find(args);
    if (it == handles_.end() || it->second.func != func) return std::nullopt;
    return it->second.blob;
  }

 private:
  struct Param {
    size_t offset = 0, size = 0;
  };
  struct Handle {
    const void *func = nullptr;
    std::vector<unsigned char> blob;
    std::unordered_map<const void *, Param> params;
  };
  mutable std::mutex mu_;
  std::unordered_map<const void *, Handle> handles_;
  std::deque<const void *> order_;
};

ArgsHandles &args_handles() {
  static auto *table = new ArgsHandles;
  return *table;
}

std::string function_op_type(const void *func) {
  std::string name(kUnknownRtKernel);
  guarded(Problem::DescriptorNotKept, [&] { name = kernel_binaries().stub_kernel(func).value_or(kUnknownRtKernel); });
  return name;
}

// The launches' shared body: `real` gets `args` untouched; a launch of the host's is captured as the kernel of `func`,
// with the arguments `blob()` gives (asked only when the launch is captured; nullopt: none known).
template <typename Real, typename BlobOf, typename... Args>
aclError launch(Real real, const void *func, BlobOf blob, aclrtStream stream, Args... args) {
  if (!real) return ACL_ERROR_INTERNAL_ERROR;
  std::optional<BlobArgs> described;
  return capture_call([&] { return function_op_type(func); }, stream,
                      [&](KernelLaunch &k) {
                        if (std::optional<Blob> b = blob()) described.emplace(*b).inputs(k);
                      },
                      [&] { return real(args...); },
                      [&](KernelLaunch &k) {
                        if (described) described->outputs(k);
                      },
                      launched);
}

}  // namespace

// The hooks of this family, one a line (shim/hooks/hook.h).
#define MSPROBE_ACL_KERNEL_HOOKS(X)   \
  X(aclrtBinaryLoadFromFile)          \
  X(aclrtBinaryLoadFromData)          \
  X(aclrtBinaryUnLoad)                \
  X(aclrtBinaryGetFunction)           \
  X(aclrtKernelArgsInit)              \
  X(aclrtKernelArgsAppend)            \
  X(aclrtKernelArgsAppendPlaceHolder) \
  X(aclrtKernelArgsParaUpdate)        \
  X(aclrtLaunchKernel)                \
  X(aclrtLaunchKernelWithConfig)      \
  X(aclrtLaunchKernelWithHostArgs)
MSPROBE_HOOK_SLOTS(MSPROBE_ACL_KERNEL_HOOKS)

// A binary read from a file keeps no symbols (the shim does not read the file on the host's thread): its kernels are
// named by aclrtBinaryGetFunction.
MSPROBE_HOOK aclError aclrtBinaryLoadFromFile(const char *binPath, aclrtBinaryLoadOptions *options,
                                              aclrtBinHandle *binHandle) {
  auto real = MSPROBE_REAL(aclrtBinaryLoadFromFile);
  if (!real) return ACL_ERROR_INTERNAL_ERROR;
  const aclError rc = real(binPath, options, binHandle);
  if (rc == ACL_SUCCESS && binHandle != nullptr && registering())
    guarded(Problem::DescriptorNotKept, [&] { kernel_binaries().register_binary(*binHandle, nullptr, 0); });
  return rc;
}

MSPROBE_HOOK aclError aclrtBinaryLoadFromData(const void *data, size_t length, const aclrtBinaryLoadOptions *options,
                                              aclrtBinHandle *binHandle) {
  auto real = MSPROBE_REAL(aclrtBinaryLoadFromData);
  if (!real) return ACL_ERROR_INTERNAL_ERROR;
  const aclError rc = real(data, length, options, binHandle);
  if (rc == ACL_SUCCESS && binHandle != nullptr && registering())
    guarded(Problem::DescriptorNotKept, [&] { kernel_binaries().register_binary(*binHandle, data, length); });
  return rc;
}

MSPROBE_HOOK aclError aclrtBinaryUnLoad(aclrtBinHandle binHandle) {
  auto real = MSPROBE_REAL(aclrtBinaryUnLoad);
  if (!real) return ACL_ERROR_INTERNAL_ERROR;
  // Forgotten first: a binary loaded by another thread right after may get the same handle.
  if (binHandle != nullptr && registering())
    guarded(Problem::DescriptorNotKept, [&] { kernel_binaries().unregister_binary(binHandle); });
  return real(binHandle);
}

// The function handle names its kernel as an rt stub does (the runtime accepted the name, so it is a readable string).
MSPROBE_HOOK aclError aclrtBinaryGetFunction(const aclrtBinHandle binHandle, const char *kernelName,
                                             aclrtFuncHandle *funcHandle) {
  auto real = MSPROBE_REAL(aclrtBinaryGetFunction);
  if (!real) return ACL_ERROR_INTERNAL_ERROR;
  const aclError rc = real(binHandle, kernelName, funcHandle);
  if (rc == ACL_SUCCESS && funcHandle != nullptr && registering())
    guarded(Problem::DescriptorNotKept,
            [&] { kernel_binaries().register_function(binHandle, *funcHandle, kernelName, kernelName); });
  return rc;
}

MSPROBE_HOOK aclError aclrtKernelArgsInit(aclrtFuncHandle funcHandle, aclrtArgsHandle *argsHandle) {
  auto real = MSPROBE_REAL(aclrtKernelArgsInit);
  if (!real) return ACL_ERROR_INTERNAL_ERROR;
  const aclError rc = real(funcHandle, argsHandle);
  if (rc == ACL_SUCCESS && argsHandle != nullptr && registering())
    guarded(Problem::DescriptorNotKept, [&] { args_handles().init(*argsHandle, funcHandle); });
  return rc;
}

MSPROBE_HOOK aclError aclrtKernelArgsAppend(aclrtArgsHandle argsHandle, void *param, size_t paramSize,
                                            aclrtParamHandle *paramHandle) {
  auto real = MSPROBE_REAL(aclrtKernelArgsAppend);
  if (!real) return ACL_ERROR_INTERNAL_ERROR;
  const aclError rc = real(argsHandle, param, paramSize, paramHandle);
  // The runtime accepted the parameter: `param` holds paramSize readable bytes.
  if (rc == ACL_SUCCESS && paramHandle != nullptr && registering())
    guarded(Problem::DescriptorNotKept, [&] { args_handles().append(argsHandle, *paramHandle, param, paramSize); });
  return rc;
}

MSPROBE_HOOK aclError aclrtKernelArgsAppendPlaceHolder(aclrtArgsHandle argsHandle, aclrtParamHandle *paramHandle) {
  auto real = MSPROBE_REAL(aclrtKernelArgsAppendPlaceHolder);
  if (!real) return ACL_ERROR_INTERNAL_ERROR;
  const aclError rc = real(argsHandle, paramHandle);
  if (rc == ACL_SUCCESS && paramHandle != nullptr && registering())
    guarded(Problem::DescriptorNotKept,
            [&] { args_handles().append(argsHandle, *paramHandle, nullptr, sizeof(uint64_t)); });
  return rc;
}

MSPROBE_HOOK aclError aclrtKernelArgsParaUpdate(aclrtArgsHandle argsHandle, aclrtParamHandle paramHandle, void *param,
                                                size_t paramSize) {
  auto real = MSPROBE_REAL(aclrtKernelArgsParaUpdate);
  if (!real) return ACL_ERROR_INTERNAL_ERROR;
  const aclError rc = real(argsHandle, paramHandle, param, paramSize);
  if (rc == ACL_SUCCESS && registering())
    guarded(Problem::DescriptorNotKept, [&] { args_handles().update(argsHandle, paramHandle, param, paramSize); });
  return rc;
}

MSPROBE_HOOK aclError aclrtLaunchKernel(aclrtFuncHandle funcHandle, uint32_t numBlocks, const void *argsData,
                                        size_t argsSize, aclrtStream stream) {
  auto blob = [&]() -> std::optional<Blob> { return Blob{argsData, (uint32_t)argsSize, (uint32_t)argsSize, true}; };
  return launch(MSPROBE_REAL(aclrtLaunchKernel), funcHandle, blob, stream, funcHandle, numBlocks, argsData, argsSize,
                stream);
}

MSPROBE_HOOK aclError aclrtLaunchKernelWithHostArgs(aclrtFuncHandle funcHandle, uint32_t numBlocks, aclrtStream stream,
                                                    aclrtLaunchKernelCfg *cfg, void *hostArgs, size_t argsSize,
                                                    aclrtPlaceHolderInfo *placeHolderArray, size_t placeHolderNum) {
  auto blob = [&]() -> std::optional<Blob> {
    if (hostArgs == nullptr) return std::nullopt;
    Blob b = plain_blob(hostArgs, (uint32_t)argsSize);
    if (placeHolderArray != nullptr)
      for (size_t i = 0; i < placeHolderNum; ++i) b.slot_bytes = std::min(b.slot_bytes, placeHolderArray[i].dataOffset);
    return b;
  };
  return launch(MSPROBE_REAL(aclrtLaunchKernelWithHostArgs), funcHandle, blob, stream, funcHandle, numBlocks, stream,
                cfg, hostArgs, argsSize, placeHolderArray, placeHolderNum);
}

MSPROBE_HOOK aclError aclrtLaunchKernelWithConfig(aclrtFuncHandle funcHandle, uint32_t numBlocks, aclrtStream stream,
                                                  aclrtLaunchKernelCfg *cfg, aclrtArgsHandle argsHandle,
                                                  void *reserve) {
  std::vector<unsigned char> params;  // the handle's parameters, copied: the host may update them at once
  auto blob = [&]() -> std::optional<Blob> {
    std::optional<std::vector<unsigned char>> b = args_handles().blob(argsHandle, funcHandle);
    if (!b) return std::nullopt;
    params = std::move(*b);
    return plain_blob(params.data(), (uint32_t)params.size());
  };
  return launch(MSPROBE_REAL(aclrtLaunchKernelWithConfig), funcHandle, blob, stream, funcHandle, numBlocks, stream, cfg,
                argsHandle, reserve);
}

MSPROBE_HOOK_FAMILY(MSPROBE_ACL_KERNEL_HOOKS, Linked)
