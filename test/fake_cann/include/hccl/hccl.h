/* CANN stand-in: hccl/hccl.h — the collectives (hccl include/hccl.h); communicator management is in hccl_comm.h. */
#ifndef HCCL_H_
#define HCCL_H_

#include "acl/acl.h"
#include "hccl/hccl_comm.h"
#include "hccl/hccl_types.h"

#ifdef __cplusplus
extern "C" {
#endif

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
/* The reduction of every rank's sendBuf reaches root's recvBuf. */
__attribute__((visibility("default"))) HcclResult HcclReduce(void *sendBuf, void *recvBuf, uint64_t count,
                                                             HcclDataType dataType, HcclReduceOp op, uint32_t root,
                                                             HcclComm comm, aclrtStream stream);
/* Block r (recvCount elements) of root's sendBuf reaches rank r's recvBuf; sendBuf is read at the root only. */
__attribute__((visibility("default"))) HcclResult HcclScatter(void *sendBuf, void *recvBuf, uint64_t recvCount,
                                                              HcclDataType dataType, uint32_t root, HcclComm comm,
                                                              aclrtStream stream);
/* Every send and receive of the list at once (a ring of them does not deadlock). */
__attribute__((visibility("default"))) HcclResult HcclBatchSendRecv(HcclSendRecvItem *sendRecvInfo, uint32_t itemNum,
                                                                    HcclComm comm, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* HCCL_H_ */
