/* CANN stand-in: runtime/base.h — runtime basic types (cann_abi.md §2, §3). */
#ifndef CCE_RUNTIME_BASE_H
#define CCE_RUNTIME_BASE_H

#include <stdint.h>
#ifndef __cplusplus
#include <stdbool.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define RTS_API __attribute__((visibility("default")))

typedef int32_t rtError_t;
typedef char char_t;
typedef void *rtStream_t;
typedef void *rtEvent_t;

#define RT_ERROR_NONE 0
#define RT_STREAM_PRIORITY_DEFAULT 0

#ifdef __cplusplus
}
#endif

#endif /* CCE_RUNTIME_BASE_H */
