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
__attribute__((visibility("default"))) HcclResult HcclBarrier(HcclComm comm, aclrtStream stream);
__attribute__((visibility("default"))) HcclResult HcclCommDestroy(HcclComm comm);
__attribute__((visibility("default"))) const char *HcclGetErrorString(HcclResult code);

#ifdef __cplusplus
}
#endif

#endif /* HCCL_H_ */
