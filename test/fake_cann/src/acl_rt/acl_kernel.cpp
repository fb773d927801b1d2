// ACL runtime: kernels loaded and launched through the ACL (runtime src/acl/aclrt_impl/kernel.cpp,
// docs/zh/api_ref/14_Kernel_loading_and_execution.md), over the stand-in's device binaries (device_kernels/README.md):
// aclrtBinaryLoadFromFile / FromData take what rtRegisterAllKernel takes, aclrtBinaryGetFunction names a kernel by its
// symbol, and the launches run the same kernels with the same args blob:
// - aclrtLaunchKernel: argsData is device memory already (the runtime reads it there when the kernel runs: kernel.cpp
//   sets isNoNeedH2DCopy);
// - aclrtLaunchKernelWithHostArgs: host args copied at launch; each aclrtPlaceHolderInfo {addrOffset, dataOffset} has
//   the 8 bytes at addrOffset receive the device address of the args' bytes at dataOffset;
// - aclrtLaunchKernelWithConfig: args built with aclrtKernelArgs*: parameters in append order, a placeholder an 8-byte
//   slot that receives the device address of its buffer (aclrtKernelArgsGetPlaceHolderBuffer), those buffers placed
//   after the parameters, 8-byte aligned.
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "acl/acl.h"
#include "fakecann/rt_internal.h"
#include "fakecann/stream.h"

using namespace fakecann;

struct KernelArgs {
  struct Param {
    size_t offset = 0, size = 0;
    bool placeholder = false;
    std::vector<char> buffer;  // a placeholder's data, filled by the host
  };
  void *func = nullptr;
  std::vector<char> blob;
  std::vector<std::unique_ptr<Param>> params;
  bool finalized = false;
};

namespace {

std::mutex g_mu;
std::set<KernelArgs *> *g_args = new std::set<KernelArgs *>;

KernelArgs *live_args(aclrtArgsHandle h) {
  auto *a = static_cast<KernelArgs *>(h);
  return g_args->count(a) ? a : nullptr;
}

KernelArgs::Param *param_of(KernelArgs *a, aclrtParamHandle h) {
  for (auto &p : a->params)
    if (p.get() == h) return p.get();
  return nullptr;
}

// The magic of the options (ACL_RT_BINARY_LOAD_OPT_MAGIC), the AI Core ELF magic without one.
aclError load_magic(const aclrtBinaryLoadOptions *options, uint32_t *magic) {
  *magic = ACL_RT_BINARY_MAGIC_ELF_AICORE;
  if (options == nullptr) return ACL_SUCCESS;
  if (options->numOpt != 0 && options->options == nullptr) return ACL_ERROR_INVALID_PARAM;
  for (size_t i = 0; i < options->numOpt; ++i)
    if (options->options[i].type == ACL_RT_BINARY_LOAD_OPT_MAGIC) *magic = options->options[i].value.magic;
  return ACL_SUCCESS;
}

aclError check_cfg(const aclrtLaunchKernelCfg *cfg) {
  return cfg != nullptr && cfg->numAttrs != 0 && cfg->attrs == nullptr ? ACL_ERROR_INVALID_PARAM : ACL_SUCCESS;
}

}  // namespace

extern "C" {

aclError aclrtBinaryLoadFromData(const void *data, size_t length, const aclrtBinaryLoadOptions *options,
                                 aclrtBinHandle *binHandle) {
  if (data == nullptr || binHandle == nullptr || length == 0) return ACL_ERROR_INVALID_PARAM;
  uint32_t magic;
  if (aclError e = load_magic(options, &magic)) return e;
  return binary_load(data, length, magic, binHandle);
}

aclError aclrtBinaryLoadFromFile(const char *binPath, aclrtBinaryLoadOptions *options, aclrtBinHandle *binHandle) {
  if (binPath == nullptr || binHandle == nullptr) return ACL_ERROR_INVALID_PARAM;
  std::ifstream f(binPath, std::ios::binary);
  if (!f) {
    set_error_message(std::string("aclrtBinaryLoadFromFile: cannot read ") + binPath);
    return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  }
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (bytes.empty()) return rt_error(ACL_ERROR_RT_PARAM_INVALID);
  return aclrtBinaryLoadFromData(bytes.data(), bytes.size(), options, binHandle);
}

aclError aclrtBinaryUnLoad(aclrtBinHandle binHandle) {
  if (binHandle == nullptr) return ACL_ERROR_INVALID_PARAM;
  return binary_unload(binHandle);
}

aclError aclrtBinaryGetFunction(const aclrtBinHandle binHandle, const char *kernelName, aclrtFuncHandle *funcHandle) {
  if (binHandle == nullptr || kernelName == nullptr || funcHandle == nullptr) return ACL_ERROR_INVALID_PARAM;
  return binary_function(binHandle, kernelName, funcHandle);
}

aclError aclrtLaunchKernel(aclrtFuncHandle funcHandle, uint32_t numBlocks, const void *argsData, size_t argsSize,
                           aclrtStream stream) {
  if (funcHandle == nullptr || argsData == nullptr) return ACL_ERROR_INVALID_PARAM;
  rtArgsEx_t args{};
  args.args = const_cast<void *>(argsData);
  args.argsSize = (uint32_t)argsSize;
  args.isNoNeedH2DCopy = 1;
  return launch_function(funcHandle, numBlocks, args, stream, "aclrtLaunchKernel");
}

aclError aclrtLaunchKernelWithHostArgs(aclrtFuncHandle funcHandle, uint32_t numBlocks, aclrtStream stream,
                                       aclrtLaunchKernelCfg *cfg, void *hostArgs, size_t argsSize,
                                       aclrtPlaceHolderInfo *placeHolderArray, size_t placeHolderNum) {
  if (funcHandle == nullptr || hostArgs == nullptr) return ACL_ERROR_INVALID_PARAM;
  if (aclError e = check_cfg(cfg)) return e;
  if (placeHolderNum != 0 && placeHolderArray == nullptr) return ACL_ERROR_INVALID_PARAM;
  std::vector<rtHostInputInfo_t> patches(placeHolderNum);
  for (size_t i = 0; i < placeHolderNum; ++i)
    patches[i] = {placeHolderArray[i].addrOffset, placeHolderArray[i].dataOffset};
  rtArgsEx_t args{};
  args.args = hostArgs;
  args.argsSize = (uint32_t)argsSize;
  args.hostInputInfoPtr = patches.empty() ? nullptr : patches.data();
  args.hostInputInfoNum = (uint16_t)placeHolderNum;
  return launch_function(funcHandle, numBlocks, args, stream, "aclrtLaunchKernelWithHostArgs");
}

aclError aclrtKernelArgsInit(aclrtFuncHandle funcHandle, aclrtArgsHandle *argsHandle) {
  if (funcHandle == nullptr || argsHandle == nullptr) return ACL_ERROR_INVALID_PARAM;
  auto *a = new KernelArgs;
  a->func = funcHandle;
  std::lock_guard<std::mutex> lk(g_mu);
  g_args->insert(a);
  *argsHandle = a;
  return ACL_SUCCESS;
}

aclError aclrtKernelArgsAppend(aclrtArgsHandle argsHandle, void *param, size_t paramSize,
                               aclrtParamHandle *paramHandle) {
  if (param == nullptr || paramSize == 0 || paramHandle == nullptr) return ACL_ERROR_INVALID_PARAM;
  std::lock_guard<std::mutex> lk(g_mu);
  KernelArgs *a = live_args(argsHandle);
  if (a == nullptr || a->finalized) return ACL_ERROR_INVALID_PARAM;
  auto p = std::make_unique<KernelArgs::Param>();
  p->offset = a->blob.size();
  p->size = paramSize;
  a->blob.insert(a->blob.end(), static_cast<char *>(param), static_cast<char *>(param) + paramSize);
  *paramHandle = p.get();
  a->params.push_back(std::move(p));
  return ACL_SUCCESS;
}

aclError aclrtKernelArgsAppendPlaceHolder(aclrtArgsHandle argsHandle, aclrtParamHandle *paramHandle) {
  if (paramHandle == nullptr) return ACL_ERROR_INVALID_PARAM;
  std::lock_guard<std::mutex> lk(g_mu);
  KernelArgs *a = live_args(argsHandle);
  if (a == nullptr || a->finalized) return ACL_ERROR_INVALID_PARAM;
  auto p = std::make_unique<KernelArgs::Param>();
  p->offset = a->blob.size();
  p->size = sizeof(uint64_t);
  p->placeholder = true;
  a->blob.resize(a->blob.size() + sizeof(uint64_t), 0);
  *paramHandle = p.get();
  a->params.push_back(std::move(p));
  return ACL_SUCCESS;
}

aclError aclrtKernelArgsGetPlaceHolderBuffer(aclrtArgsHandle argsHandle, aclrtParamHandle paramHandle,
                                             size_t dataSize, void **bufferAddr) {
  if (dataSize == 0 || bufferAddr == nullptr) return ACL_ERROR_INVALID_PARAM;
  std::lock_guard<std::mutex> lk(g_mu);
  KernelArgs *a = live_args(argsHandle);
  KernelArgs::Param *p = a ? param_of(a, paramHandle) : nullptr;
  if (p == nullptr || !p->placeholder) return ACL_ERROR_INVALID_PARAM;
  p->buffer.assign(dataSize, 0);
  *bufferAddr = p->buffer.data();
  return ACL_SUCCESS;
}

aclError aclrtKernelArgsParaUpdate(aclrtArgsHandle argsHandle, aclrtParamHandle paramHandle, void *param,
                                   size_t paramSize) {
  if (param == nullptr) return ACL_ERROR_INVALID_PARAM;
  std::lock_guard<std::mutex> lk(g_mu);
  KernelArgs *a = live_args(argsHandle);
  KernelArgs::Param *p = a ? param_of(a, paramHandle) : nullptr;
  if (p == nullptr || p->placeholder || paramSize != p->size) return ACL_ERROR_INVALID_PARAM;
  std::memcpy(a->blob.data() + p->offset, param, paramSize);
  return ACL_SUCCESS;
}

aclError aclrtKernelArgsFinalize(aclrtArgsHandle argsHandle) {
  std::lock_guard<std::mutex> lk(g_mu);
  KernelArgs *a = live_args(argsHandle);
  if (a == nullptr) return ACL_ERROR_INVALID_PARAM;
  a->finalized = true;
  return ACL_SUCCESS;
}

aclError aclrtLaunchKernelWithConfig(aclrtFuncHandle funcHandle, uint32_t numBlocks, aclrtStream stream,
                                     aclrtLaunchKernelCfg *cfg, aclrtArgsHandle argsHandle, void * /*reserve*/) {
  if (funcHandle == nullptr) return ACL_ERROR_INVALID_PARAM;
  if (aclError e = check_cfg(cfg)) return e;
  std::vector<char> blob;
  std::vector<rtHostInputInfo_t> patches;
  {
    std::lock_guard<std::mutex> lk(g_mu);
    KernelArgs *a = live_args(argsHandle);
    if (a == nullptr || !a->finalized || a->func != funcHandle) return ACL_ERROR_INVALID_PARAM;
    blob = a->blob;
    for (const auto &p : a->params) {
      if (!p->placeholder) continue;
      blob.resize((blob.size() + 7) / 8 * 8, 0);
      patches.push_back({(uint32_t)p->offset, (uint32_t)blob.size()});
      blob.insert(blob.end(), p->buffer.begin(), p->buffer.end());
    }
  }
  rtArgsEx_t args{};
  args.args = blob.data();
  args.argsSize = (uint32_t)blob.size();
  args.hostInputInfoPtr = patches.empty() ? nullptr : patches.data();
  args.hostInputInfoNum = (uint16_t)patches.size();
  return launch_function(funcHandle, numBlocks, args, stream, "aclrtLaunchKernelWithConfig");
}

}  // extern "C"
