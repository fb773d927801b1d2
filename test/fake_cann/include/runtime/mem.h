/* CANN stand-in: runtime/mem.h (cann_abi.md §3 runtime enums, §4.7). */
#ifndef CCE_RUNTIME_MEM_H
#define CCE_RUNTIME_MEM_H

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tagRtMemcpyKind {
  RT_MEMCPY_HOST_TO_HOST = 0,
  RT_MEMCPY_HOST_TO_DEVICE = 1,
  RT_MEMCPY_DEVICE_TO_HOST = 2,
  RT_MEMCPY_DEVICE_TO_DEVICE = 3,
  RT_MEMCPY_MANAGED = 4,
  RT_MEMCPY_ADDR_DEVICE_TO_DEVICE = 5,
  RT_MEMCPY_HOST_TO_DEVICE_EX = 6,
  RT_MEMCPY_DEVICE_TO_HOST_EX = 7,
  RT_MEMCPY_DEFAULT = 8,
  RT_MEMCPY_RESERVED = 9
} rtMemcpyKind_t;

typedef uint32_t rtMemType_t;
#define RT_MEMORY_DEFAULT ((uint32_t)0x0)
#define RT_MEMORY_HBM ((uint32_t)0x2)
#define RT_MEMORY_DDR ((uint32_t)0x4)

RTS_API rtError_t rtMalloc(void **devPtr, uint64_t size, rtMemType_t type, const uint16_t moduleId);
RTS_API rtError_t rtFree(void *devPtr);
RTS_API rtError_t rtMallocHost(void **hostPtr, uint64_t size, const uint16_t moduleId);
RTS_API rtError_t rtFreeHost(void *hostPtr);
RTS_API rtError_t rtMemcpy(void *dst, uint64_t destMax, const void *src, uint64_t cnt, rtMemcpyKind_t kind);
RTS_API rtError_t rtMemcpyAsync(void *dst, uint64_t destMax, const void *src, uint64_t cnt, rtMemcpyKind_t kind,
                                rtStream_t stm);
RTS_API rtError_t rtMemset(void *devPtr, uint64_t destMax, uint32_t val, uint64_t cnt);
RTS_API rtError_t rtMemsetAsync(void *ptr, uint64_t destMax, uint32_t val, uint64_t cnt, rtStream_t stm);

#ifdef __cplusplus
}
#endif

#endif /* CCE_RUNTIME_MEM_H */
