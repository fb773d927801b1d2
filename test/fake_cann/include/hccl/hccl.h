/* CANN stand-in: hccl/hccl.h (cann_abi.md §4.8). */
#ifndef HCCL_H_
#define HCCL_H_

#include "acl/acl_base.h"
#include "hccl_types.h"

#ifdef __cplusplus
extern "C" {
#endif

__attribute__((visibility("default"))) HcclResult HcclGetRootInfo(HcclRootInfo *rootInfo);
__attribute__((visibility("default"))) HcclResult HcclCommInitRootInfo(uint32_t nRanks, const HcclRootInfo *rootInfo, uint32_t rank, HcclComm *comm);
__attribute__((visibility("default"))) HcclResult HcclCommInitClusterInfo(const char *clusterInfo, uint32_t rank, HcclComm *comm);
__attribute__((visibility("default"))) HcclResult HcclCommInitRootInfoConfig(uint32_t nRanks, const HcclRootInfo *rootInfo, uint32_t rank,
                         const HcclCommConfig *config, HcclComm *comm);
/* A sub-communicator of a global one: rankIds are ranks of `comm` in ascending order, the index of each is its rank
   in the sub-communicator; a rank not in it passes rankIds == NULL and subCommId == 0xFFFFFFFF. */
__attribute__((visibility("default"))) HcclResult HcclCreateSubCommConfig(HcclComm *comm, uint32_t rankNum, uint32_t *rankIds,
                         uint64_t subCommId, uint32_t subCommRankId, HcclCommConfig *config, HcclComm *subComm);
/* The communicator's name as every member sees it; commName holds at least COMM_NAME_MAX_LENGTH bytes. */
__attribute__((visibility("default"))) HcclResult HcclGetCommName(HcclComm comm, char *commName);
__attribute__((visibility("default"))) HcclResult HcclGetRankSize(HcclComm comm, uint32_t *rankSize);
__attribute__((visibility("default"))) HcclResult HcclGetRankId(HcclComm comm, uint32_t *rank);
__attribute__((visibility("default"))) HcclResult HcclAllReduce(void *sendBuf, void *recvBuf, uint64_t count, HcclDataType dataType, HcclReduceOp op,
                         HcclComm comm, aclrtStream stream);
__attribute__((visibility("default"))) HcclResult HcclBroadcast(void *buf, uint64_t count, HcclDataType dataType, uint32_t root, HcclComm comm,
                         aclrtStream stream);
__attribute__((visibility("default"))) HcclResult HcclAllGather(void *sendBuf, void *recvBuf, uint64_t sendCount, HcclDataType dataType, HcclComm comm,
                         aclrtStream stream);
__attribute__((visibility("default"))) HcclResult HcclReduceScatter(void *sendBuf, void *recvBuf, uint64_t recvCount, HcclDataType dataType,
                             HcclReduceOp op, HcclComm comm, aclrtStream stream);
__attribute__((visibility("default"))) HcclResult HcclSend(void *sendBuf, uint64_t count, HcclDataType dataType, uint32_t destRank,
                         HcclComm comm, aclrtStream stream);
__attribute__((visibility("default"))) HcclResult HcclRecv(void *recvBuf, uint64_t count, HcclDataType dataType, uint32_t srcRank,
                         HcclComm comm, aclrtStream stream);
/* All-to-all: every rank sends block j of its sendBuf to rank j. AlltoAll moves sendCount (== recvCount) elements per
   pair; AlltoAllV takes uint64_t arrays of rank-size entries (counts and displacements in elements); AlltoAllVC takes
   the rank-size x rank-size uint64_t matrix of counts (row i: what rank i sends to each rank), packed displacements. */
__attribute__((visibility("default"))) HcclResult HcclAlltoAllVC(const void *sendBuf, const void *sendCountMatrix, HcclDataType sendType,
                         const void *recvBuf, HcclDataType recvType, HcclComm comm, aclrtStream stream);
__attribute__((visibility("default"))) HcclResult HcclAlltoAllV(const void *sendBuf, const void *sendCounts, const void *sdispls, HcclDataType sendType,
                         const void *recvBuf, const void *recvCounts, const void *rdispls, HcclDataType recvType,
                         HcclComm comm, aclrtStream stream);
__attribute__((visibility("default"))) HcclResult HcclAlltoAll(const void *sendBuf, uint64_t sendCount, HcclDataType sendType, const void *recvBuf,
                         uint64_t recvCount, HcclDataType recvType, HcclComm comm, aclrtStream stream);
__attribute__((visibility("default"))) HcclResult HcclBarrier(HcclComm comm, aclrtStream stream);
__attribute__((visibility("default"))) HcclResult HcclCommDestroy(HcclComm comm);
__attribute__((visibility("default"))) const char *HcclGetErrorString(HcclResult code);

/* Real HCCL defines it inline in hccl.h: the reserved bytes say which layout the caller was built with. */
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
}

#ifdef __cplusplus
}
#endif

#endif /* HCCL_H_ */
