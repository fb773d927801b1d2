/* CANN stand-in: acl_dump.h — the data-dump callback and path of adump (cann_dump.md §1.2, §1.6; runtime
 * include/external/acl/acl_dump.h). Exported by libascendcl, the library that delivers the chunks in the stand-in (CANN
 * 9.x: libascend_dump). */
#ifndef INC_EXTERNAL_ACL_ACL_DUMP_H_
#define INC_EXTERNAL_ACL_ACL_DUMP_H_

#include <stdint.h>

#include "acl_base.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ACL_DUMP_MAX_FILE_PATH_LENGTH 4096

/* sizeof == 4120 (LP64); the payload starts at byte 4116, inside the tail padding. The zero-length array is
 * CANN's own spelling (a GNU extension in C++). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
typedef struct acldumpChunk {
  char fileName[ACL_DUMP_MAX_FILE_PATH_LENGTH]; /* path of the dump file this chunk belongs to */
  uint32_t bufLen;                              /* bytes in dataBuf */
  uint32_t isLastChunk;                         /* 1: last chunk of this file */
  int64_t offset;                               /* write offset in the file, -1: append */
  int32_t flag;                                 /* reserved, 0 */
  uint8_t dataBuf[0];                           /* payload */
} acldumpChunk;
#pragma GCC diagnostic pop

typedef enum acldumpType {
  AIC_ERR_BRIEF_DUMP = 1,
  AIC_ERR_NORM_DUMP = 2,
  AIC_ERR_DETAIL_DUMP = 3,
  DATA_DUMP = 4,
  OVERFLOW_DUMP = 5
} acldumpType;

/* The callback gets len = sizeof(acldumpChunk) + bufLen and returns 0 on success. */
ACL_FUNC_VISIBILITY aclError acldumpRegCallback(int32_t (*const messageCallback)(const acldumpChunk *, int32_t),
                                                int32_t flag);
ACL_FUNC_VISIBILITY void acldumpUnregCallback(void);

/* The operators' argument records (adump dump_manager.cpp StartDumpArgs): on and off, with CANN's checks; the
 * stand-in's operators write no records. */
#define ACL_OP_DUMP_OP_AICORE_ARGS 0x00000001U
ACL_FUNC_VISIBILITY aclError aclopStartDumpArgs(uint32_t dumpType, const char *path);
ACL_FUNC_VISIBILITY aclError aclopStopDumpArgs(uint32_t dumpType);

/* The data dump's directory, "{dump_path}/{YYYYMMDDhhmmss}", for DATA_DUMP and OVERFLOW_DUMP; NULL before a dump was
 * configured, and for the exception dumps (not emulated). */
ACL_FUNC_VISIBILITY const char *acldumpGetPath(acldumpType dumpType);

#ifdef __cplusplus
}
#endif

#endif /* INC_EXTERNAL_ACL_ACL_DUMP_H_ */
