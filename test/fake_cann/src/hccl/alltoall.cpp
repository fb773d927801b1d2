// HcclAlltoAll, HcclAlltoAllV and HcclAlltoAllVC (hccl repository src/ops/all_to_all_v/all_to_all_v_op.cc): all three
// become one all-to-all-v, as in real HCCL, and run on the stream worker through the ranks' staging slots.
//
// On the worker: every rank first stages its row of the count matrix (what it sends to each rank) and all meet, so
// that each rank can check that what it expects from a peer is what that peer sends and all agree on the number of
// rounds. Then, per round, rank i puts the next piece of its block for rank j at sub-slot j of its own slot, all meet,
// rank j reads sub-slot j of every rank's slot into its receive buffer, and all meet again.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "api.h"
#include "fakecann/stream.h"
#include "fakecann/tensor_io.h"
#include "hccl/hccl.h"
#include "reduce.h"

using namespace fakecann;
using namespace fakecann::hccl;

namespace {

// The descriptor's kind for an all-to-all (CollKind holds the others; a peer running one of them disagrees).
constexpr uint32_t kAllToAllKind = 16;

// One rank's side of an all-to-all-v: counts and displacements in elements, one entry per rank.
struct AllToAllV {
  const char *api = "";
  HcclDataType dtype = HCCL_DATA_TYPE_INT8;
  std::vector<uint64_t> send_counts, sdispls, recv_counts, rdispls;
  const void *send = nullptr;
  void *recv = nullptr;
};

// Host alias of a device range (nothing for an empty one).
char *dev(const void *base, uint64_t byte_off, uint64_t bytes) {
  if (bytes == 0) return nullptr;
  return static_cast<char *>(device_bytes(static_cast<const char *>(base) + byte_off, bytes));
}

void check_descriptors(Segment &s, const CollDesc &mine, const std::string &what) {
  for (uint32_t r = 0; r < s.nranks(); ++r) {
    const CollDesc &theirs = s.desc(r);
    if (theirs == mine) continue;
    s.mark_broken(Broken::Mismatch);
    const bool same_kind = theirs.kind == mine.kind && theirs.seq == mine.seq;
    throw KernelError(what + ": ranks issued different collectives: rank " + std::to_string(s.rank()) +
                      " runs all-to-all #" + std::to_string(mine.seq) + " of " + dtype_name((HcclDataType)mine.dtype) +
                      ", rank " + std::to_string(r) + " runs " +
                      (same_kind
                           ? std::string("all-to-all of ") + dtype_name((HcclDataType)theirs.dtype)
                           : "collective kind " + std::to_string(theirs.kind) + " #" + std::to_string(theirs.seq)));
  }
}

// Exchanges the count matrix (row r: what rank r sends to each rank); checks this rank's receive counts against it.
std::vector<uint64_t> exchange_counts(Comm &c, const AllToAllV &op, const CollDesc &mine, const std::string &what) {
  Segment &s = *c.seg;
  const uint32_t n = s.nranks(), me = s.rank();
  std::memcpy(s.slot(me), op.send_counts.data(), n * sizeof(uint64_t));
  s.desc(me) = mine;
  s.barrier(c.exec_timeout_s, what);
  check_descriptors(s, mine, what);
  std::vector<uint64_t> matrix((size_t)n * n);
  for (uint32_t r = 0; r < n; ++r) std::memcpy(&matrix[(size_t)r * n], s.slot(r), n * sizeof(uint64_t));
  s.barrier(c.exec_timeout_s, what);  // the slots may be reused
  for (uint32_t q = 0; q < n; ++q) {
    if (matrix[(size_t)q * n + me] == op.recv_counts[q]) continue;
    s.mark_broken(Broken::Mismatch);
    throw KernelError(what + ": rank " + std::to_string(me) + " expects " + std::to_string(op.recv_counts[q]) +
                      " elements from rank " + std::to_string(q) + ", which sends " +
                      std::to_string(matrix[(size_t)q * n + me]));
  }
  return matrix;
}

void run_alltoallv(Comm &c, const AllToAllV &op) {
  const std::string what = op.api;
  Segment &s = *c.seg;
  std::lock_guard<std::mutex> lk(c.exec_mu);
  s.check_usable(what);
  const uint32_t n = s.nranks(), me = s.rank();
  const CollDesc mine{kAllToAllKind, (uint32_t)op.dtype, 0, 0, 0, ++c.seq};
  const uint64_t es = dtype_bytes(op.dtype);
  const uint64_t sub = s.slot_bytes() / n / es;  // elements per pair and round (the slot holds >= 16 bytes per rank)
  try {
    std::vector<uint64_t> matrix = exchange_counts(c, op, mine, what);
    const uint64_t most = *std::max_element(matrix.begin(), matrix.end());
    for (uint64_t off = 0; off < most; off += sub) {
      for (uint32_t j = 0; j < n; ++j) {
        const uint64_t len = op.send_counts[j] > off ? std::min(sub, op.send_counts[j] - off) : 0;
        if (len != 0)
          std::memcpy(s.slot(me) + j * sub * es, dev(op.send, (op.sdispls[j] + off) * es, len * es), len * es);
      }
      s.barrier(c.exec_timeout_s, what);
      for (uint32_t q = 0; q < n; ++q) {
        const uint64_t len = op.recv_counts[q] > off ? std::min(sub, op.recv_counts[q] - off) : 0;
        if (len != 0)
          std::memcpy(dev(op.recv, (op.rdispls[q] + off) * es, len * es), s.slot(q) + me * sub * es, len * es);
      }
      s.barrier(c.exec_timeout_s, what);
    }
  } catch (const KernelError &) {
    s.mark_broken(Broken::LocalFault);  // keeps an earlier reason; wakes peers waiting for us
    throw;
  }
}

// Packed displacements for `counts`.
std::vector<uint64_t> packed(const std::vector<uint64_t> &counts) {
  std::vector<uint64_t> d(counts.size());
  uint64_t at = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    d[i] = at;
    at += counts[i];
  }
  return d;
}

// The checks HCCL makes of every all-to-all once its counts are known (CheckBufNullptr, CheckDataType), then the
// launch. Block ends must be addressable: displacement + count elements may not overflow 64 bits of bytes.
HcclResult launch(std::shared_ptr<Comm> c, aclrtStream stream, AllToAllV op) {
  const std::string api = op.api;
  auto any = [](const std::vector<uint64_t> &v) {
    return std::any_of(v.begin(), v.end(), [](uint64_t x) { return x; });
  };
  if (any(op.send_counts) && op.send == nullptr) return api_fail(HCCL_E_PTR, api + ": sendBuf is null");
  if (any(op.recv_counts) && op.recv == nullptr) return api_fail(HCCL_E_PTR, api + ": recvBuf is null");
  if (HcclResult r = api_check_dtype(op.api, op.dtype)) return r;
  const uint64_t es = dtype_bytes(op.dtype), limit = UINT64_MAX / es;
  for (size_t i = 0; i < op.send_counts.size(); ++i) {
    if (op.send_counts[i] > limit - std::min(op.sdispls[i], limit) ||
        op.recv_counts[i] > limit - std::min(op.rdispls[i], limit))
      return api_fail(HCCL_E_PARA, api + ": the block of rank " + std::to_string(i) + " overflows the address space");
  }
  return api_enqueue(std::move(c), stream, WorkerTask{op.api, [op](Comm &comm) { run_alltoallv(comm, op); }});
}

std::vector<uint64_t> host_array(const void *p, uint32_t n) {
  std::vector<uint64_t> v(n);
  std::memcpy(v.data(), p, n * sizeof(uint64_t));
  return v;
}

}  // namespace

extern "C" {

// Real HCCL: both counts 0 is a success before any other check; the counts and the types must be equal; sendBuf and
// recvBuf may not be the same buffer.
HcclResult HcclAlltoAll(const void *sendBuf, uint64_t sendCount, HcclDataType sendType, const void *recvBuf,
                        uint64_t recvCount, HcclDataType recvType, HcclComm comm, aclrtStream stream) {
  const char *api = "HcclAlltoAll";
  if (sendCount == 0 && recvCount == 0) return HCCL_SUCCESS;
  if (comm == nullptr) return api_fail(HCCL_E_PTR, std::string(api) + ": comm is null");
  if (sendBuf == nullptr || recvBuf == nullptr) return api_fail(HCCL_E_PTR, std::string(api) + ": buffer is null");
  if (sendCount != recvCount)
    return api_fail(HCCL_E_PARA, std::string(api) + ": sendCount " + std::to_string(sendCount) + " and recvCount " +
                                     std::to_string(recvCount) + " differ");
  if (sendType != recvType) return api_fail(HCCL_E_PARA, std::string(api) + ": sendType and recvType differ");
  if (sendBuf == recvBuf) return api_fail(HCCL_E_PARA, std::string(api) + ": sendBuf and recvBuf are the same");
  std::shared_ptr<Comm> c;
  if (HcclResult r = api_check_call(api, comm, stream, &c)) return r;
  const uint32_t n = c->seg->nranks();
  AllToAllV op{api, recvType, std::vector<uint64_t>(n, recvCount), {}, std::vector<uint64_t>(n, recvCount),
               {},  sendBuf,  const_cast<void *>(recvBuf)};
  op.sdispls = packed(op.send_counts);
  op.rdispls = packed(op.recv_counts);
  return launch(std::move(c), stream, std::move(op));
}

// Real HCCL moves recvType's elements (sendType is not looked at) and refuses an in-place call.
HcclResult HcclAlltoAllV(const void *sendBuf, const void *sendCounts, const void *sdispls, HcclDataType sendType,
                         const void *recvBuf, const void *recvCounts, const void *rdispls, HcclDataType recvType,
                         HcclComm comm, aclrtStream stream) {
  const char *api = "HcclAlltoAllV";
  (void)sendType;
  if (comm == nullptr || sendCounts == nullptr || sdispls == nullptr || recvCounts == nullptr || rdispls == nullptr)
    return api_fail(HCCL_E_PTR, std::string(api) + ": comm, a count or a displacement array is null");
  if (sendBuf != nullptr && sendBuf == recvBuf)
    return api_fail(HCCL_E_PARA, std::string(api) + ": sendBuf and recvBuf are the same (no in-place all-to-all)");
  std::shared_ptr<Comm> c;
  if (HcclResult r = api_check_call(api, comm, stream, &c)) return r;
  const uint32_t n = c->seg->nranks();
  AllToAllV op{api,
               recvType,
               host_array(sendCounts, n),
               host_array(sdispls, n),
               host_array(recvCounts, n),
               host_array(rdispls, n),
               sendBuf,
               const_cast<void *>(recvBuf)};
  return launch(std::move(c), stream, std::move(op));
}

// sendCountMatrix[i * rankSize + j]: what rank i sends to rank j; blocks are packed in both buffers.
HcclResult HcclAlltoAllVC(const void *sendBuf, const void *sendCountMatrix, HcclDataType sendType, const void *recvBuf,
                          HcclDataType recvType, HcclComm comm, aclrtStream stream) {
  const char *api = "HcclAlltoAllVC";
  (void)sendType;
  if (comm == nullptr || sendCountMatrix == nullptr)
    return api_fail(HCCL_E_PTR, std::string(api) + ": comm or sendCountMatrix is null");
  if (sendBuf != nullptr && sendBuf == recvBuf)
    return api_fail(HCCL_E_PARA, std::string(api) + ": sendBuf and recvBuf are the same (no in-place all-to-all)");
  std::shared_ptr<Comm> c;
  if (HcclResult r = api_check_call(api, comm, stream, &c)) return r;
  const uint32_t n = c->seg->nranks(), me = c->seg->rank();
  std::vector<uint64_t> matrix = host_array(sendCountMatrix, n * n);
  AllToAllV op{api, recvType, {}, {}, {}, {}, sendBuf, const_cast<void *>(recvBuf)};
  for (uint32_t j = 0; j < n; ++j) {
    op.send_counts.push_back(matrix[(size_t)me * n + j]);
    op.recv_counts.push_back(matrix[(size_t)j * n + me]);
  }
  op.sdispls = packed(op.send_counts);
  op.rdispls = packed(op.recv_counts);
  return launch(std::move(c), stream, std::move(op));
}

}  // extern "C"
