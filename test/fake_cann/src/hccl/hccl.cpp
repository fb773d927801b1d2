// The collectives (libhccl.so in both layouts): each host call checks its arguments with HCCL's error codes, in real
// HCCL's order, and enqueues the collective on the caller's stream; it runs later on that stream's worker
// (collectives.cpp), so results are valid after a stream synchronization and failures are reported there. The
// communicators they run on are communicators.cpp's (libhcomm.so of CANN 9.x).
#include "hccl/hccl.h"

#include <climits>
#include <string>

#include "api.h"
#include "comm.h"
#include "fakecann/rt_internal.h"
#include "fakecann/stream.h"
#include "reduce.h"
#include "segment.h"

using namespace fakecann;
using namespace fakecann::hccl;

namespace {

HcclResult fail(HcclResult r, const std::string &msg) { return api_fail(r, msg); }

std::shared_ptr<Comm> find_comm(HcclComm comm) { return api_find(comm); }

// Checks shared by every collective, in real HCCL's order: pointers, then the communicator, then types.
HcclResult check_call(const char *api, HcclComm comm, aclrtStream stream, std::shared_ptr<Comm> *out) {
  if (comm == nullptr) return fail(HCCL_E_PTR, std::string(api) + ": comm is null");
  if (stream == nullptr) return fail(HCCL_E_PTR, std::string(api) + ": stream is null");
  *out = find_comm(comm);
  if (*out == nullptr) return fail(HCCL_E_PARA, std::string(api) + ": not a live communicator");
  return HCCL_SUCCESS;
}

HcclResult check_dtype(const char *api, HcclDataType t) {
  if (!dtype_defined(t)) return fail(HCCL_E_PARA, std::string(api) + ": invalid data type " + std::to_string((int)t));
  if (dtype_bytes(t) == 0)
    return fail(HCCL_E_NOT_SUPPORT, std::string(api) + ": data type " + dtype_name(t) + " is not supported");
  return HCCL_SUCCESS;
}

// A reduction's op, and its type (the 8-bit floating types are only moved: HCCL_E_NOT_SUPPORT).
HcclResult check_op(const char *api, HcclReduceOp op, HcclDataType t) {
  if (!op_defined(op)) return fail(HCCL_E_PARA, std::string(api) + ": invalid reduce op " + std::to_string((int)op));
  if (!dtype_reducible(t))
    return fail(HCCL_E_NOT_SUPPORT, std::string(api) + ": data type " + dtype_name(t) + " cannot be reduced");
  return HCCL_SUCCESS;
}

HcclResult check_size(const char *api, uint64_t count, HcclDataType t, uint32_t factor) {
  if (count > UINT64_MAX / dtype_bytes(t) / factor) return fail(HCCL_E_PARA, std::string(api) + ": count overflows");
  return HCCL_SUCCESS;
}

void finish_one(Comm &c) {
  std::lock_guard<std::mutex> lk(c.inflight_mu);
  if (--c.inflight == 0) c.inflight_cv.notify_all();
}

struct InflightGuard {
  Comm &c;
  ~InflightGuard() { finish_one(c); }
};

// `Op` is a Collective or a PointToPoint.
template <typename Op>
HcclResult enqueue(std::shared_ptr<Comm> c, aclrtStream stream, const Op &op) {
  {
    std::lock_guard<std::mutex> lk(c->inflight_mu);
    ++c->inflight;
  }
  // The task owns a reference: the communicator outlives HcclCommDestroy until its last task ran. Real HCCL's
  // collective tasks are not rtKernelLaunch kernels, so this stays on the runtime's private path (rt_internal.h).
  int e = launch_task(
      stream,
      [c, op] {
        InflightGuard guard{*c};
        execute(*c, op);
      },
      op.api);
  if (e != 0) {
    finish_one(*c);
    return fail(HCCL_E_RUNTIME,
                std::string(op.api) + ": cannot launch on the stream (runtime error " + std::to_string(e) + ")");
  }
  return HCCL_SUCCESS;
}

HcclResult point_to_point(const char *api, bool send, void *buf, uint64_t count, HcclDataType dataType, uint32_t peer,
                          HcclComm comm, aclrtStream stream) {
  if (buf == nullptr) return fail(HCCL_E_PTR, std::string(api) + (send ? ": sendBuf" : ": recvBuf") + " is null");
  std::shared_ptr<Comm> c;
  if (HcclResult r = check_call(api, comm, stream, &c)) return r;
  if (HcclResult r = check_dtype(api, dataType)) return r;
  const char *role = send ? "destRank " : "srcRank ";
  if (peer >= c->seg->nranks())
    return fail(HCCL_E_PARA, std::string(api) + ": " + role + std::to_string(peer) + " >= rank size " +
                                 std::to_string(c->seg->nranks()));
  if (peer == c->seg->rank())
    return fail(HCCL_E_PARA, std::string(api) + ": " + role + std::to_string(peer) + " is this rank");
  if (HcclResult r = check_size(api, count, dataType, 1)) return r;
  if (count == 0) return HCCL_SUCCESS;
  return enqueue(c, stream, PointToPoint{api, send, dataType, peer, count, buf});
}

}  // namespace

namespace fakecann::hccl {

HcclResult api_check_call(const char *api, HcclComm comm, aclrtStream stream, std::shared_ptr<Comm> *out) {
  return check_call(api, comm, stream, out);
}

HcclResult api_check_dtype(const char *api, HcclDataType t) { return check_dtype(api, t); }

HcclResult api_enqueue(std::shared_ptr<Comm> c, aclrtStream stream, WorkerTask task) {
  return enqueue(std::move(c), stream, task);
}

}  // namespace fakecann::hccl

extern "C" {

HcclResult HcclAllReduce(void *sendBuf, void *recvBuf, uint64_t count, HcclDataType dataType, HcclReduceOp op,
                         HcclComm comm, aclrtStream stream) {
  const char *api = "HcclAllReduce";
  if (sendBuf == nullptr || recvBuf == nullptr) return fail(HCCL_E_PTR, std::string(api) + ": buffer is null");
  std::shared_ptr<Comm> c;
  if (HcclResult r = check_call(api, comm, stream, &c)) return r;
  if (HcclResult r = check_dtype(api, dataType)) return r;
  if (HcclResult r = check_op(api, op, dataType)) return r;
  if (HcclResult r = check_size(api, count, dataType, 1)) return r;
  if (count == 0) return HCCL_SUCCESS;  // as real HCCL: nothing is launched
  return enqueue(c, stream, Collective{api, CollKind::AllReduce, dataType, op, 0, count, sendBuf, recvBuf});
}

HcclResult HcclBroadcast(void *buf, uint64_t count, HcclDataType dataType, uint32_t root, HcclComm comm,
                         aclrtStream stream) {
  const char *api = "HcclBroadcast";
  if (buf == nullptr) return fail(HCCL_E_PTR, std::string(api) + ": buf is null");
  std::shared_ptr<Comm> c;
  if (HcclResult r = check_call(api, comm, stream, &c)) return r;
  if (HcclResult r = check_dtype(api, dataType)) return r;
  if (root >= c->seg->nranks())
    return fail(HCCL_E_PARA, std::string(api) + ": root " + std::to_string(root) + " >= rank size");
  if (HcclResult r = check_size(api, count, dataType, 1)) return r;
  if (count == 0) return HCCL_SUCCESS;
  return enqueue(c, stream, Collective{api, CollKind::Broadcast, dataType, HCCL_REDUCE_SUM, root, count, buf, buf});
}

HcclResult HcclAllGather(void *sendBuf, void *recvBuf, uint64_t sendCount, HcclDataType dataType, HcclComm comm,
                         aclrtStream stream) {
  const char *api = "HcclAllGather";
  if (sendBuf == nullptr || recvBuf == nullptr) return fail(HCCL_E_PTR, std::string(api) + ": buffer is null");
  std::shared_ptr<Comm> c;
  if (HcclResult r = check_call(api, comm, stream, &c)) return r;
  if (HcclResult r = check_dtype(api, dataType)) return r;
  if (HcclResult r = check_size(api, sendCount, dataType, c->seg->nranks())) return r;
  if (sendCount == 0) return HCCL_SUCCESS;
  return enqueue(c, stream,
                 Collective{api, CollKind::AllGather, dataType, HCCL_REDUCE_SUM, 0, sendCount, sendBuf, recvBuf});
}

HcclResult HcclReduceScatter(void *sendBuf, void *recvBuf, uint64_t recvCount, HcclDataType dataType, HcclReduceOp op,
                             HcclComm comm, aclrtStream stream) {
  const char *api = "HcclReduceScatter";
  if (sendBuf == nullptr || recvBuf == nullptr) return fail(HCCL_E_PTR, std::string(api) + ": buffer is null");
  std::shared_ptr<Comm> c;
  if (HcclResult r = check_call(api, comm, stream, &c)) return r;
  if (HcclResult r = check_dtype(api, dataType)) return r;
  if (HcclResult r = check_op(api, op, dataType)) return r;
  if (HcclResult r = check_size(api, recvCount, dataType, c->seg->nranks())) return r;
  if (recvCount == 0) return HCCL_SUCCESS;
  return enqueue(c, stream, Collective{api, CollKind::ReduceScatter, dataType, op, 0, recvCount, sendBuf, recvBuf});
}

HcclResult HcclSend(void *sendBuf, uint64_t count, HcclDataType dataType, uint32_t destRank, HcclComm comm,
                    aclrtStream stream) {
  return point_to_point("HcclSend", true, sendBuf, count, dataType, destRank, comm, stream);
}

HcclResult HcclRecv(void *recvBuf, uint64_t count, HcclDataType dataType, uint32_t srcRank, HcclComm comm,
                    aclrtStream stream) {
  return point_to_point("HcclRecv", false, recvBuf, count, dataType, srcRank, comm, stream);
}

// The reduction reaches root's recvBuf (hccl src/ops/reduce/reduce_op.cc: every rank passes both buffers).
HcclResult HcclReduce(void *sendBuf, void *recvBuf, uint64_t count, HcclDataType dataType, HcclReduceOp op,
                      uint32_t root, HcclComm comm, aclrtStream stream) {
  const char *api = "HcclReduce";
  if (sendBuf == nullptr || recvBuf == nullptr) return fail(HCCL_E_PTR, std::string(api) + ": buffer is null");
  std::shared_ptr<Comm> c;
  if (HcclResult r = check_call(api, comm, stream, &c)) return r;
  if (HcclResult r = check_dtype(api, dataType)) return r;
  if (HcclResult r = check_op(api, op, dataType)) return r;
  if (root >= c->seg->nranks())
    return fail(HCCL_E_PARA, std::string(api) + ": root " + std::to_string(root) + " >= rank size");
  if (HcclResult r = check_size(api, count, dataType, 1)) return r;
  if (count == 0) return HCCL_SUCCESS;
  return enqueue(c, stream, Collective{api, CollKind::Reduce, dataType, op, root, count, sendBuf, recvBuf});
}

// Block r of root's sendBuf (recvCount elements each) reaches rank r's recvBuf; sendBuf matters at the root only
// (hccl src/ops/scatter/scatter_op.cc).
HcclResult HcclScatter(void *sendBuf, void *recvBuf, uint64_t recvCount, HcclDataType dataType, uint32_t root,
                       HcclComm comm, aclrtStream stream) {
  const char *api = "HcclScatter";
  if (recvCount == 0) return HCCL_SUCCESS;  // checked first by real HCCL
  if (recvBuf == nullptr) return fail(HCCL_E_PTR, std::string(api) + ": recvBuf is null");
  std::shared_ptr<Comm> c;
  if (HcclResult r = check_call(api, comm, stream, &c)) return r;
  if (c->seg->rank() == root && sendBuf == nullptr)
    return fail(HCCL_E_PTR, std::string(api) + ": sendBuf is null at the root");
  if (root >= c->seg->nranks())
    return fail(HCCL_E_PARA, std::string(api) + ": root " + std::to_string(root) + " >= rank size");
  if (HcclResult r = check_dtype(api, dataType)) return r;
  if (HcclResult r = check_size(api, recvCount, dataType, c->seg->nranks())) return r;
  return enqueue(c, stream,
                 Collective{api, CollKind::Scatter, dataType, HCCL_REDUCE_SUM, root, recvCount, sendBuf, recvBuf});
}

// Every transfer of the list at once (src/ops/batch_send_recv/batch_send_recv_op.cc): itemNum 0 does nothing.
HcclResult HcclBatchSendRecv(HcclSendRecvItem *sendRecvInfo, uint32_t itemNum, HcclComm comm, aclrtStream stream) {
  const char *api = "HcclBatchSendRecv";
  if (itemNum == 0) return HCCL_SUCCESS;
  if (sendRecvInfo == nullptr) return fail(HCCL_E_PTR, std::string(api) + ": sendRecvInfo is null");
  std::shared_ptr<Comm> c;
  if (HcclResult r = check_call(api, comm, stream, &c)) return r;
  Batch batch;
  for (uint32_t i = 0; i < itemNum; ++i) {
    const HcclSendRecvItem &it = sendRecvInfo[i];
    const std::string at = std::string(api) + ": item " + std::to_string(i);
    if (it.sendRecvType != HCCL_SEND && it.sendRecvType != HCCL_RECV) return fail(HCCL_E_PARA, at + ": bad type");
    if (HcclResult r = check_dtype(api, it.dataType)) return r;
    if (it.remoteRank >= c->seg->nranks() || it.remoteRank == c->seg->rank())
      return fail(HCCL_E_PARA, at + ": remoteRank " + std::to_string(it.remoteRank) + " is no other rank");
    if (HcclResult r = check_size(api, it.count, it.dataType, 1)) return r;
    if (it.count == 0) continue;
    if (it.buf == nullptr) return fail(HCCL_E_PTR, at + ": buf is null");
    batch.items.push_back(PointToPoint{it.sendRecvType == HCCL_SEND ? "HcclSend" : "HcclRecv",
                                       it.sendRecvType == HCCL_SEND, it.dataType, it.remoteRank, it.count, it.buf});
  }
  if (batch.items.empty()) return HCCL_SUCCESS;
  return enqueue(c, stream, batch);
}

HcclResult HcclBarrier(HcclComm comm, aclrtStream stream) {
  std::shared_ptr<Comm> c;
  if (HcclResult r = check_call("HcclBarrier", comm, stream, &c)) return r;
  return enqueue(c, stream, Collective{"HcclBarrier", CollKind::Barrier});
}

}  // extern "C"
