/* CANN stand-in: runtime/dev.h (cann_abi.md §4.7). */
#ifndef CCE_RUNTIME_DEV_H
#define CCE_RUNTIME_DEV_H

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

RTS_API rtError_t rtSetDevice(int32_t devId);
RTS_API rtError_t rtGetDevice(int32_t *devId);
RTS_API rtError_t rtGetDeviceCount(int32_t *cnt);
RTS_API rtError_t rtDeviceReset(int32_t devId);
RTS_API rtError_t rtDeviceSynchronize(void);

#ifdef __cplusplus
}
#endif

#endif /* CCE_RUNTIME_DEV_H */
