/* CANN stand-in: hccl/hccl_comm.h — communicator management (hcomm include/hccl/hccl_comm.h, libhcomm in CANN 9.x,
 * libhccl in CANN 8.x). Like CANN's it includes acl/acl.h: HCCL programs call aclrt* without including it. */
#ifndef HCCL_COMM_H_
#define HCCL_COMM_H_

#include <stddef.h>

#include "acl/acl.h"
#include "hccl/hccl_types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HCCL_API __attribute__((visibility("default")))
/* Declared weak, as CANN's are (cann_source.md §1): CANN 9.x keeps these in libhcomm, which libhccl needs, so that a
   program linked against libhccl alone (CANN's own HCCL samples: -lhccl -lascendcl) links, and they bind at load. */
#define HCCL_COMM_API HCCL_API __attribute__((weak))

HCCL_COMM_API HcclResult HcclCommInitClusterInfo(const char *clusterInfo, uint32_t rank, HcclComm *comm);
/* A sub-communicator of a global one: rankIds are ranks of `comm` in ascending order, the index of each is its rank
   in the sub-communicator; a rank not in it passes rankIds == NULL and subCommId == 0xFFFFFFFF. */
HCCL_COMM_API HcclResult HcclCreateSubCommConfig(HcclComm *comm, uint32_t rankNum, uint32_t *rankIds,
                                                 uint64_t subCommId, uint32_t subCommRankId, HcclCommConfig *config,
                                                 HcclComm *subComm);
HCCL_COMM_API HcclResult HcclGetRootInfo(HcclRootInfo *rootInfo);
HCCL_COMM_API HcclResult HcclCommInitRootInfo(uint32_t nRanks, const HcclRootInfo *rootInfo, uint32_t rank,
                                              HcclComm *comm);
HCCL_COMM_API HcclResult HcclCommInitRootInfoConfig(uint32_t nRanks, const HcclRootInfo *rootInfo, uint32_t rank,
                                                    const HcclCommConfig *config, HcclComm *comm);
/* The communicator's name as every member sees it; commName holds at least COMM_NAME_MAX_LENGTH bytes. */
HCCL_COMM_API HcclResult HcclGetCommName(HcclComm comm, char *commName);
HCCL_COMM_API HcclResult HcclGetRankSize(HcclComm comm, uint32_t *rankSize);
HCCL_COMM_API HcclResult HcclGetRankId(HcclComm comm, uint32_t *rank);
HCCL_COMM_API HcclResult HcclBarrier(HcclComm comm, aclrtStream stream);
/* One process, one communicator per device of `devices` (rank i on devices[i]); comms gets ndev handles. */
HCCL_COMM_API HcclResult HcclCommInitAll(uint32_t ndev, int32_t *devices, HcclComm *comms);
HCCL_COMM_API HcclResult HcclCommDestroy(HcclComm comm);
HCCL_COMM_API const char *HcclGetErrorString(HcclResult code);

/* Defined inline, as CANN's is: the reserved bytes say which layout the caller was built with. */
static inline void HcclCommConfigInit(HcclCommConfig *config) {
  typedef struct {
    size_t size;
    uint32_t magicWord;
    uint32_t version;
    uint64_t reserved;
  } configInfo_t;
  configInfo_t *info;
  if (config == NULL) return;
  info = (configInfo_t *)config;
  info->size = sizeof(HcclCommConfig);
  info->magicWord = HCCL_COMM_CONFIG_MAGIC_WORD;
  info->version = HCCL_COMM_CONFIG_VERSION;
  info->reserved = 0;
  config->hcclBufferSize = HCCL_COMM_BUFFSIZE_CONFIG_NOT_SET;
  config->hcclDeterministic = HCCL_COMM_DETERMINISTIC_CONFIG_NOT_SET;
  config->hcclCommName[0] = '\0';
  config->hcclUdi[0] = '\0';
  config->hcclOpExpansionMode = HCCL_COMM_DEFAULT_OP_EXPANSION_MODE;
  config->hcclRdmaTrafficClass = HCCL_COMM_TRAFFIC_CLASS_CONFIG_NOT_SET;
  config->hcclRdmaServiceLevel = HCCL_COMM_SERVICE_LEVEL_CONFIG_NOT_SET;
  config->hcclWorldRankID = 0;
  config->hcclJobID = 0;
  config->aclGraphZeroCopyEnable = 0;
  config->hcclExecTimeOut = HCCL_COMM_EXECTIMEOUT_CONFIG_NOT_SET;
  config->hcclAlgo[0] = '\0';
  config->hcclRetryEnable[0] = '\0';
  config->hcclRetryParams[0] = '\0';
  config->hcclBufferName[0] = '\0';
  config->hcclQos = HCCL_COMM_QOS_CONFIG_NOT_SET;
  config->hcclSymWinMaxMemSizePerRank = HCCL_DEFAULT_SYMMETRIC_MEMORY_STRIDE;
}

#ifdef __cplusplus
}
#endif

#endif /* HCCL_COMM_H_ */
