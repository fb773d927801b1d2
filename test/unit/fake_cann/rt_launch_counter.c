/* An LD_PRELOAD interposer on libruntime's exported kernel API, as a tool would be: it counts
 * rtRegisterAllKernel and rtKernelLaunchWithHandleV2, keeps a copy of the last launch's args, can refuse the
 * next launch, and forwards everything else with dlsym(RTLD_NEXT). test_op_launch_path.cpp reads it through
 * rtCounterSnapshot (found with dlsym: absent unless preloaded). */
#define _GNU_SOURCE
#include "rt_launch_counter.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "runtime/kernel.h"

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct RtCounter g_counter;
static int g_fail_next;

__attribute__((visibility("default"))) void rtCounterSnapshot(struct RtCounter *out) {
  pthread_mutex_lock(&g_mu);
  *out = g_counter;
  pthread_mutex_unlock(&g_mu);
}

/* The next rtKernelLaunchWithHandleV2 returns `code` without reaching the runtime. */
__attribute__((visibility("default"))) void rtCounterFailNext(int code) {
  pthread_mutex_lock(&g_mu);
  g_fail_next = code;
  pthread_mutex_unlock(&g_mu);
}

rtError_t rtRegisterAllKernel(const rtDevBinary_t *bin, void **hdl) {
  rtError_t (*real)(const rtDevBinary_t *, void **) =
      (rtError_t(*)(const rtDevBinary_t *, void **))dlsym(RTLD_NEXT, "rtRegisterAllKernel");
  pthread_mutex_lock(&g_mu);
  ++g_counter.register_all_kernel;
  pthread_mutex_unlock(&g_mu);
  return real(bin, hdl);
}

rtError_t rtKernelLaunchWithHandleV2(void *hdl, const uint64_t tilingKey, uint32_t blockDim, rtArgsEx_t *argsInfo,
                                     rtSmDesc_t *smDesc, rtStream_t stm, const rtTaskCfgInfo_t *cfgInfo) {
  typedef rtError_t (*Fn)(void *, const uint64_t, uint32_t, rtArgsEx_t *, rtSmDesc_t *, rtStream_t,
                          const rtTaskCfgInfo_t *);
  Fn real = (Fn)dlsym(RTLD_NEXT, "rtKernelLaunchWithHandleV2");
  int fail;
  pthread_mutex_lock(&g_mu);
  ++g_counter.launch_with_handle_v2;
  g_counter.tiling_key = tilingKey;
  g_counter.handle = hdl;
  memset(g_counter.words, 0, sizeof g_counter.words);
  if (argsInfo != NULL) {
    uint32_t n = argsInfo->argsSize < sizeof g_counter.words ? argsInfo->argsSize : sizeof g_counter.words;
    g_counter.args_size = argsInfo->argsSize;
    g_counter.has_tiling = argsInfo->hasTiling;
    g_counter.tiling_addr_offset = argsInfo->tilingAddrOffset;
    g_counter.tiling_data_offset = argsInfo->tilingDataOffset;
    if (argsInfo->args != NULL && !argsInfo->isNoNeedH2DCopy) memcpy(g_counter.words, argsInfo->args, n);
  }
  fail = g_fail_next;
  g_fail_next = 0;
  pthread_mutex_unlock(&g_mu);
  if (fail != 0) return fail;
  return real(hdl, tilingKey, blockDim, argsInfo, smDesc, stm, cfgInfo);
}

static void count_other(void) {
  pthread_mutex_lock(&g_mu);
  ++g_counter.launch_other;
  pthread_mutex_unlock(&g_mu);
}

rtError_t rtKernelLaunch(const void *stubFunc, uint32_t blockDim, void *args, uint32_t argsSize, rtSmDesc_t *smDesc,
                         rtStream_t stm) {
  rtError_t (*real)(const void *, uint32_t, void *, uint32_t, rtSmDesc_t *, rtStream_t) = (rtError_t(*)(
      const void *, uint32_t, void *, uint32_t, rtSmDesc_t *, rtStream_t))dlsym(RTLD_NEXT, "rtKernelLaunch");
  count_other();
  return real(stubFunc, blockDim, args, argsSize, smDesc, stm);
}

rtError_t rtKernelLaunchWithHandle(void *hdl, const uint64_t tilingKey, uint32_t blockDim, rtArgsEx_t *argsInfo,
                                   rtSmDesc_t *smDesc, rtStream_t stm, const void *kernelInfo) {
  rtError_t (*real)(void *, const uint64_t, uint32_t, rtArgsEx_t *, rtSmDesc_t *, rtStream_t, const void *) =
      (rtError_t(*)(void *, const uint64_t, uint32_t, rtArgsEx_t *, rtSmDesc_t *, rtStream_t, const void *))dlsym(
          RTLD_NEXT, "rtKernelLaunchWithHandle");
  count_other();
  return real(hdl, tilingKey, blockDim, argsInfo, smDesc, stm, kernelInfo);
}
