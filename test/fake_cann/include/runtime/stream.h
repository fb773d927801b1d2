/* CANN stand-in: runtime/stream.h and event calls (cann_abi.md §4.7). */
#ifndef CCE_RUNTIME_STREAM_H
#define CCE_RUNTIME_STREAM_H

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

RTS_API rtError_t rtStreamCreate(rtStream_t *stm, int32_t priority);
RTS_API rtError_t rtStreamDestroy(rtStream_t stm);
RTS_API rtError_t rtStreamSynchronize(rtStream_t stm);
RTS_API rtError_t rtGetStreamId(rtStream_t stm, int32_t *streamId);
RTS_API rtError_t rtEventCreate(rtEvent_t *evt);
RTS_API rtError_t rtEventRecord(rtEvent_t evt, rtStream_t stm);
RTS_API rtError_t rtEventSynchronize(rtEvent_t evt);
RTS_API rtError_t rtEventDestroy(rtEvent_t evt);
RTS_API rtError_t rtStreamWaitEvent(rtStream_t stm, rtEvent_t evt);

#ifdef __cplusplus
}
#endif

#endif /* CCE_RUNTIME_STREAM_H */
