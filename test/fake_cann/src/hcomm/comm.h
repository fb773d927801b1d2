// A communicator as one rank process sees it, and the collectives that run on its stream workers.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "hccl/hccl_types.h"
#include "segment.h"

namespace fakecann::hccl {

struct Comm {
  std::unique_ptr<Segment> seg;
  std::string name;           // rendezvous name, for messages (and the prefix of its sub-communicators' and pairs')
  std::string ident;          // the communicator's name (HcclGetCommName), the same on every member
  bool is_sub = false;        // made by HcclCreateSubCommConfig (real HCCL splits only global communicators)
  int32_t device = -1;        // the device current when the communicator was created
  bool from_cluster = false;  // made by HcclCommInitClusterInfo (one per device at a time)
  int exec_timeout_s = 120;   // HCCL_EXEC_TIMEOUT when the communicator was created

  // Collectives of this communicator run one at a time even if issued on several streams, in the
  // order they start; ranks must issue them in the same order (as with real HCCL).
  std::mutex exec_mu;
  uint64_t seq = 0;  // collectives run so far, under exec_mu; all ranks must agree on it

  // HcclCreateSubCommConfig: the subCommIds already used on this (global) communicator, under g_mu of hccl.cpp.
  std::set<uint64_t> sub_ids;

  // Point-to-point: one two-rank segment per direction (sender is its rank 0, receiver its rank 1), joined by both
  // sides at their first HcclSend / HcclRecv between them, on the stream worker. Sends and receives of one direction
  // run one at a time, in the order issued, and must agree on count and type.
  struct Pair {
    std::mutex mu;  // held while joining and while an operation runs
    std::unique_ptr<Segment> seg;
    uint64_t seq = 0;
  };
  std::mutex pairs_mu;
  std::map<std::pair<uint32_t, uint32_t>, std::shared_ptr<Pair>> pairs;  // (src, dst) -> pair
  int connect_timeout_s = 120;                                           // HCCL_CONNECT_TIMEOUT at creation

  // Collectives enqueued but not finished, so that HcclCommDestroy can wait for them.
  std::mutex inflight_mu;
  std::condition_variable inflight_cv;
  int inflight = 0;
};

struct Collective {
  const char *api = "";  // "HcclAllReduce", for messages
  CollKind kind = CollKind::Barrier;
  HcclDataType dtype = HCCL_DATA_TYPE_INT8;
  HcclReduceOp op = HCCL_REDUCE_SUM;
  uint32_t root = 0;
  uint64_t count = 0;          // per-rank element count: the API's count / sendCount / recvCount
  const void *send = nullptr;  // device addresses (Broadcast: buf in both)
  void *recv = nullptr;
};

// A point-to-point transfer (HcclSend / HcclRecv): `peer` is the other side's rank in the communicator.
struct PointToPoint {
  const char *api = "";  // "HcclSend" / "HcclRecv"
  bool send = true;
  HcclDataType dtype = HCCL_DATA_TYPE_INT8;
  uint32_t peer = 0;
  uint64_t count = 0;
  void *buf = nullptr;  // device address: read by a send, written by a receive
};

// HcclBatchSendRecv: its transfers run at once (a ring of sends and receives needs them to), those to or from one peer
// in one direction one after the other, in the order given.
struct Batch {
  const char *api = "HcclBatchSendRecv";
  std::vector<PointToPoint> items;
};

// Runs `op` on the calling stream worker. Throws KernelError; a failure breaks the pair's segment for both sides.
void execute(Comm &c, const PointToPoint &op);
void execute(Comm &c, const Batch &op);

// Runs `op` on the calling stream worker. Throws KernelError; any failure breaks the communicator for
// every rank, as a failed collective leaves the real one unusable.
void execute(Comm &c, const Collective &op);

}  // namespace fakecann::hccl
