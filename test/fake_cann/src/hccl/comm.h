// A communicator as one rank process sees it, and the collectives that run on its stream workers.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "hccl/hccl_types.h"
#include "segment.h"

namespace fakecann::hccl {

struct Comm {
  std::unique_ptr<Segment> seg;
  std::string name;           // rendezvous name, for messages
  int32_t device = -1;        // the device current when the communicator was created
  bool from_cluster = false;  // made by HcclCommInitClusterInfo (one per device at a time)
  int exec_timeout_s = 120;   // HCCL_EXEC_TIMEOUT when the communicator was created

  // Collectives of this communicator run one at a time even if issued on several streams, in the
  // order they start; ranks must issue them in the same order (as with real HCCL).
  std::mutex exec_mu;
  uint64_t seq = 0;  // collectives run so far, under exec_mu; all ranks must agree on it

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

// Runs `op` on the calling stream worker. Throws KernelError; any failure breaks the communicator for
// every rank, as a failed collective leaves the real one unusable.
void execute(Comm &c, const Collective &op);

}  // namespace fakecann::hccl
