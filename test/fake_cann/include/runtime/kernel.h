/* CANN stand-in: runtime/kernel.h — device binaries and kernel launches (cann_abi.md §3, §4.7). */
#ifndef CCE_RUNTIME_KERNEL_H
#define CCE_RUNTIME_KERNEL_H

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tagRtDevBinary {
  uint32_t magic;
  uint32_t version;
  const void *data;
  uint64_t length;
} rtDevBinary_t;

#define RT_DEV_BINARY_MAGIC_PLAIN 0xabceed50U
#define RT_DEV_BINARY_MAGIC_PLAIN_AICPU 0xabceed51U
#define RT_DEV_BINARY_MAGIC_PLAIN_AIVEC 0xabceed52U
#define RT_DEV_BINARY_MAGIC_ELF 0x43554245U
#define RT_DEV_BINARY_MAGIC_ELF_AICPU 0x41415243U
#define RT_DEV_BINARY_MAGIC_ELF_AIVEC 0x41415246U
#define RT_DEV_BINARY_MAGIC_ELF_AICUBE 0x41494343U

typedef struct rtHostInputInfo {
  uint32_t addrOffset;
  uint32_t dataOffset;
} rtHostInputInfo_t;

typedef struct tagRtArgsEx {
  void *args;
  rtHostInputInfo_t *hostInputInfoPtr;
  uint32_t argsSize;
  uint32_t tilingAddrOffset;
  uint32_t tilingDataOffset;
  uint16_t hostInputInfoNum;
  uint8_t hasTiling;
  uint8_t isNoNeedH2DCopy;
  uint8_t reserved[4];
} rtArgsEx_t;

typedef struct tagRtTaskCfgInfo {
  uint8_t qos;
  uint8_t partId;
  uint8_t schemMode;
  bool d2dCrossFlag;
  uint32_t blockDimOffset;
  uint8_t dumpflag;
  uint8_t rev[3];
  uint32_t localMemorySize;
} rtTaskCfgInfo_t;

typedef struct tagRtSmDesc rtSmDesc_t;

#define FUNC_MODE_NORMAL 0U
#define RT_KERNEL_DEFAULT 0x0U
#define RT_KERNEL_CONVERT 0x1U
#define RT_KERNEL_DUMPFLAG 0x2U
#define RT_FUSION_KERNEL_DUMPFLAG 0x4U
#define RT_KERNEL_CUSTOM_AICPU 0x8U

RTS_API rtError_t rtDevBinaryRegister(const rtDevBinary_t *bin, void **hdl);
RTS_API rtError_t rtRegisterAllKernel(const rtDevBinary_t *bin, void **hdl);
RTS_API rtError_t rtDevBinaryUnRegister(void *hdl);
RTS_API rtError_t rtFunctionRegister(void *binHandle, const void *stubFunc, const char_t *stubName,
                                     const void *kernelInfoExt, uint32_t funcMode);
RTS_API rtError_t rtKernelLaunch(const void *stubFunc, uint32_t blockDim, void *args, uint32_t argsSize,
                                 rtSmDesc_t *smDesc, rtStream_t stm);
RTS_API rtError_t rtKernelLaunchWithFlag(const void *stubFunc, uint32_t blockDim, rtArgsEx_t *argsInfo,
                                         rtSmDesc_t *smDesc, rtStream_t stm, uint32_t flags);
RTS_API rtError_t rtKernelLaunchWithFlagV2(const void *stubFunc, uint32_t blockDim, rtArgsEx_t *argsInfo,
                                           rtSmDesc_t *smDesc, rtStream_t stm, uint32_t flags,
                                           const rtTaskCfgInfo_t *cfgInfo);
RTS_API rtError_t rtKernelLaunchWithHandle(void *hdl, const uint64_t tilingKey, uint32_t blockDim,
                                           rtArgsEx_t *argsInfo, rtSmDesc_t *smDesc, rtStream_t stm,
                                           const void *kernelInfo);
RTS_API rtError_t rtKernelLaunchWithHandleV2(void *hdl, const uint64_t tilingKey, uint32_t blockDim,
                                             rtArgsEx_t *argsInfo, rtSmDesc_t *smDesc, rtStream_t stm,
                                             const rtTaskCfgInfo_t *cfgInfo);
/* An AI CPU kernel: `soName` is the kernel library on the device's AI CPU (libcpu_kernels.so, libaicpu_kernels.so, a
   custom one with RT_KERNEL_CUSTOM_AICPU), `kernelName` its entry (RunCpuKernel, or the op's own name). The args blob
   (copied at launch, like any launch's) starts with the AI CPU parameter head {u32 length, u32 ioAddrNum,
   u32 extInfoLength, u64 extInfoAddr} (packed), then ioAddrNum device addresses (inputs, then outputs), then the
   u32 length and the bytes of the op's serialized NodeDef. blockDim is reserved (1). */
RTS_API rtError_t rtCpuKernelLaunchWithFlag(const void *soName, const void *kernelName, uint32_t blockDim,
                                            const rtArgsEx_t *argsInfo, rtSmDesc_t *smDesc, rtStream_t stm,
                                            uint32_t flags);

#ifdef __cplusplus
}
#endif

#endif /* CCE_RUNTIME_KERNEL_H */
