// HCCL: the rank a global communicator is created with names the rank{R} folder when no environment variable
// (RANK_ID, RANK) gave one (spec §4), and the collectives and point-to-point transfers are kernels (OpType = the
// HCCL call) whose send buffer is the input and whose receive buffer is the output, typed from HcclDataType and the
// element count. The input is copied before the call, so in-place calls (send == recv) keep both sides.
//
// What joins the ranks (issue 30, docs/format.md "comm"): every HCCL kernel's entry gets a "comm" object with the
// communicator's name (HcclGetCommName, else a key every member derives the same way from what created it), this
// rank's place in it and its size, the global ranks of its members when they are known here (a rank table, or a
// sub-communicator split from a communicator whose members are known), a per-communicator sequence number of the
// collectives this process issued on it (from 0, counted whether or not the kernel is captured, never reset), and
// for HcclSend / HcclRecv the peer and a per (communicator, peer, direction) sequence number.
#include "hccl/hccl.h"

#include <cstring>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "acl/acl_base.h"
#include "format/comm_info.h"
#include "format/hccl_calls.h"
#include "format/naming.h"
#include "shim/base/hash.h"
#include "shim/capture/capture_call.h"
#include "shim/capture/communicators.h"
#include "shim/capture/session.h"
#include "shim/device/handles.h"
#include "shim/device/runtime_api.h"
#include "shim/hooks/hook.h"

using namespace msprobe::shim;
using msprobe::format::CommInfo;
namespace format = msprobe::format;
using msprobe::format::ValueArg;
using msprobe::shim::communicators::Issue;
namespace vt = msprobe::format::value_type;  // the dump's value types

// The hooks of this family, one a line (shim/hooks/hook.h).
#define MSPROBE_HCCL_HOOKS(X)   \
  X(HcclCommInitRootInfo)       \
  X(HcclCommInitRootInfoConfig) \
  X(HcclCommInitClusterInfo)    \
  X(HcclCommInitAll)            \
  X(HcclCreateSubCommConfig)    \
  X(HcclCommDestroy)            \
  X(HcclAllReduce)              \
  X(HcclBroadcast)              \
  X(HcclAllGather)              \
  X(HcclReduceScatter)          \
  X(HcclReduce)                 \
  X(HcclScatter)                \
  X(HcclBarrier)                \
  X(HcclAlltoAll)               \
  X(HcclAlltoAllV)              \
  X(HcclAlltoAllVC)             \
  X(HcclSend)                   \
  X(HcclRecv)
MSPROBE_HOOK_SLOTS(MSPROBE_HCCL_HOOKS)

namespace {

// aclDataType of an HcclDataType (reference/cann_abi.md §3, cann_source.md §3.7); -1 (described, not copied) for
// INT128 and values HCCL does not name.
int32_t acl_dtype_of(HcclDataType t) {
  switch ((int)t) {
    case 0: return ACL_INT8;
    case 1: return ACL_INT16;
    case 2: return ACL_INT32;
    case 3: return ACL_FLOAT16;
    case 4: return ACL_FLOAT;
    case 5: return ACL_INT64;
    case 6: return ACL_UINT64;
    case 7: return ACL_UINT8;
    case 8: return ACL_UINT16;
    case 9: return ACL_UINT32;
    case 10: return ACL_DOUBLE;
    case 11: return ACL_BF16;
    case 14: return ACL_HIFLOAT8;
    case 15: return ACL_FLOAT8_E4M3FN;
    case 16: return ACL_FLOAT8_E5M2;
    case 17: return ACL_FLOAT8_E8M0;
    default: return ACL_DT_UNDEFINED;
  }
}

// `count` elements of `type` at `data` as a one-dimensional tensor; nullopt when the count is unknown.
std::optional<TensorMeta> buffer(void *data, std::optional<uint64_t> count, HcclDataType type) {
  if (!count || *count > (uint64_t)INT64_MAX / 16) return std::nullopt;
  TensorMeta m;
  m.dtype = acl_dtype_of(type);
  m.format = ACL_FORMAT_ND;
  m.ndim = 1;
  m.shape[0] = (int64_t)*count;
  m.strides[0] = 1;
  m.data = data;
  return m;
}

std::optional<uint64_t> times_rank_size(uint64_t count, HcclComm comm) {
  std::optional<uint32_t> n = communicators::size_of(comm);
  if (!n || *n == 0 || count > UINT64_MAX / *n) return std::nullopt;
  return count * *n;
}

ValueArg reduce_op(HcclReduceOp op) {
  const char *names[] = {"sum", "prod", "max", "min"};
  std::string v = (unsigned)op < 4 ? names[(int)op] : "reduce_op_" + std::to_string((int)op);
  return ValueArg{vt::kStr, std::move(v), "op"};
}

// `n` uint64_t entries of a host array the caller passed (all-to-all counts and displacements); empty when absent.
std::vector<uint64_t> host_counts(const void *p, uint64_t n) {
  std::vector<uint64_t> v;
  if (p == nullptr || n == 0 || n > (1u << 24)) return v;
  v.resize(n);
  std::memcpy(v.data(), p, n * sizeof(uint64_t));
  return v;
}

// The elements a buffer of blocks spans: the end of its furthest block; nullopt when the arrays are unknown.
std::optional<uint64_t> blocks_extent(const std::vector<uint64_t> &counts, const std::vector<uint64_t> &displs) {
  if (counts.empty() || counts.size() != displs.size()) return std::nullopt;
  uint64_t end = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] > UINT64_MAX - displs[i]) return std::nullopt;
    if (counts[i] != 0) end = std::max(end, displs[i] + counts[i]);
  }
  return end;
}

ValueArg int_list(const std::vector<uint64_t> &v, const char *name) {
  std::vector<int64_t> ints(v.begin(), v.end());
  return ValueArg{vt::kListInt, std::move(ints), name};
}

// ---- Communicators ------------------------------------------------------------------------------------------------
std::string hex64(uint64_t v) {
  static const char digits[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[(size_t)i] = digits[v & 15];
  return s;
}

// hcclCommName of a configuration made by HcclCommConfigInit, "" when it names nothing.
std::string config_name(const HcclCommConfig *config) {
  if (config == nullptr) return {};
  const void *nul = std::memchr(config->hcclCommName, '\0', COMM_NAME_MAX_LENGTH);
  return nul ? std::string(config->hcclCommName, static_cast<const char *>(nul)) : std::string();
}

// Communicator creation and destruction are followed whenever the shim is on (not only past the gate: a communicator
// made inside another launch is still one).
bool following() { return !ReentryGuard::active() && capture_enabled(); }

// A communicator's creation (`args` forwarded untouched); `rank` is the rank hint for a global communicator.
template <typename Real, typename... Args>
HcclResult init_comm(Real real, std::optional<uint32_t> rank, HcclComm *comm, std::string key,
                     std::optional<std::vector<uint32_t>> ranks, Args... args) {
  if (!real) return HCCL_E_NOT_FOUND;
  HcclResult rc = real(args...);
  if (rc != HCCL_SUCCESS || !following()) return rc;
  guarded(Problem::CommunicatorNotKept, [&] {
    if (rank) session().set_rank_hint(*rank);
    if (comm != nullptr && *comm != nullptr) communicators::made(*comm, std::move(key), std::move(ranks));
  });
  return rc;
}

// ---- Kernels -------------------------------------------------------------------------------------------------------
// What one HCCL call reads and writes: `in` (and the values) before it runs, `out` after; a tensor that is nullopt is
// recorded as null (its size unknown). A receive has no input tensor and a send no output at all.
struct Sides {
  bool has_input = true;
  std::optional<TensorMeta> in;
  std::vector<ValueArg> values;
  bool has_output = true;
  std::optional<TensorMeta> out;
};

// Who a call's sequence number is counted with: the communicator's collectives, or one peer and direction.
struct Numbering {
  std::optional<uint32_t> peer;
  bool sends = false;
};

// One HCCL kernel: past the gate, the call takes its number in the communicator (every call the shim looks at, captured
// or not, so that every member numbers the same calls), `sides(issue)` says what it reads and writes, and it is
// captured as CaptureCall decides; a call HCCL refuses gives its number back.
template <typename MakeSides, typename Forward>
HcclResult hccl_kernel(std::string_view op_type, aclrtStream stream, HcclComm comm, Numbering numbering,
                       MakeSides sides, Forward forward) {
  Session *session = capture_gate();
  if (session == nullptr) return forward();
  Issue issue = communicators::take(comm, numbering.peer, numbering.sends);
  CaptureCall call(*session, op_type, stream);
  Sides io;
  call.inputs([&](KernelLaunch &k) {
    io = sides(issue);
    if (issue.info) k.set_comm(*issue.info);
    if (io.in)
      k.input_tensor(*io.in);
    else if (io.has_input)
      k.input_null();
    for (const ValueArg &v : io.values) k.input_value(v);
  });
  const HcclResult rc = forward();
  if (rc == HCCL_SUCCESS)
    call.outputs([&](KernelLaunch &k) {
      if (!io.has_output) return;
      if (io.out)
        k.output_tensor(*io.out);
      else
        k.output_null();
    });
  call.finish(rc == HCCL_SUCCESS);
  if (rc != HCCL_SUCCESS) communicators::give_back(issue);
  return rc;
}

// HcclSend / HcclRecv (the same parameters): a send's buffer is its input and it has no output, a receive's buffer
// is its output and its only input is the peer.
template <typename Real>
HcclResult transfer(std::string_view api, bool send, Real real, void *buf, uint64_t count, HcclDataType type,
                    uint32_t peer, HcclComm comm, aclrtStream stream) {
  if (!real) return HCCL_E_NOT_FOUND;
  return hccl_kernel(
      api, stream, comm, {peer, send},
      [&](const Issue &) {
        std::optional<TensorMeta> data = buffer(buf, count, type);
        return Sides{send,
                     send ? data : std::nullopt,
                     {ValueArg{vt::kInt, (int64_t)peer, send ? "destRank" : "srcRank"}},
                     !send,
                     send ? std::nullopt : data};
      },
      [&] { return real(buf, count, type, peer, comm, stream); });
}

}  // namespace

MSPROBE_HOOK HcclResult HcclCommInitRootInfo(uint32_t nRanks, const HcclRootInfo *rootInfo, uint32_t rank,
                                             HcclComm *comm) {
  // Every member was handed the same root info: its bytes are the key when HCCL names nothing.
  std::string key = rootInfo ? "rootinfo-" + hex64(fnv1a64(rootInfo->internal, HCCL_ROOT_INFO_BYTES)) : "";
  return init_comm(MSPROBE_REAL(HcclCommInitRootInfo), rank, comm, std::move(key), std::nullopt, nRanks, rootInfo, rank,
                   comm);
}

MSPROBE_HOOK HcclResult HcclCommInitRootInfoConfig(uint32_t nRanks, const HcclRootInfo *rootInfo, uint32_t rank,
                                                   const HcclCommConfig *config, HcclComm *comm) {
  std::string key = config_name(config);
  if (key.empty() && rootInfo) key = "rootinfo-" + hex64(fnv1a64(rootInfo->internal, HCCL_ROOT_INFO_BYTES));
  return init_comm(MSPROBE_REAL(HcclCommInitRootInfoConfig), rank, comm, std::move(key), std::nullopt, nRanks, rootInfo,
                   rank, config, comm);
}

MSPROBE_HOOK HcclResult HcclCommInitClusterInfo(const char *clusterInfo, uint32_t rank, HcclComm *comm) {
  // A rank table's rank_id is the global rank: the members are 0..n-1 in comm-rank order.
  auto real = MSPROBE_REAL(HcclCommInitClusterInfo);
  if (!real) return HCCL_E_NOT_FOUND;
  HcclResult rc = real(clusterInfo, rank, comm);
  if (rc != HCCL_SUCCESS || !following()) return rc;
  guarded(Problem::CommunicatorNotKept, [&] {
    session().set_rank_hint(rank);
    if (comm == nullptr || *comm == nullptr) return;
    std::vector<uint32_t> ranks(communicators::size_of(*comm).value_or(0));
    std::iota(ranks.begin(), ranks.end(), 0u);
    communicators::made(*comm, "hccl_world_group", ranks.empty() ? std::nullopt : std::optional(std::move(ranks)));
  });
  return rc;
}

// One communicator per device of the list, made by one call (CANN's HCCL samples with a thread per device): rank i
// is devices[i]'s, so each thread's kernels go to the folder of its device's rank (shim/capture/rank_map.h).
MSPROBE_HOOK HcclResult HcclCommInitAll(uint32_t ndev, int32_t *devices, HcclComm *comms) {
  auto real = MSPROBE_REAL(HcclCommInitAll);
  if (!real) return HCCL_E_NOT_FOUND;
  HcclResult rc = real(ndev, devices, comms);
  if (rc != HCCL_SUCCESS || !following() || devices == nullptr || comms == nullptr) return rc;
  guarded(Problem::CommunicatorNotKept, [&] {
    std::vector<uint32_t> ranks(ndev);
    std::iota(ranks.begin(), ranks.end(), 0u);
    std::string key = "commall";
    for (uint32_t i = 0; i < ndev; ++i) key += "-" + std::to_string(devices[i]);
    for (uint32_t i = 0; i < ndev; ++i) {
      session().set_rank_hint(i, devices[i]);
      communicators::made(comms[i], key, ranks);
    }
  });
  return rc;
}

MSPROBE_HOOK HcclResult HcclCreateSubCommConfig(HcclComm *comm, uint32_t rankNum, uint32_t *rankIds, uint64_t subCommId,
                                                uint32_t subCommRankId, HcclCommConfig *config, HcclComm *subComm) {
  auto real = MSPROBE_REAL(HcclCreateSubCommConfig);
  if (!real) return HCCL_E_NOT_FOUND;
  HcclResult rc = real(comm, rankNum, rankIds, subCommId, subCommRankId, config, subComm);
  if (rc != HCCL_SUCCESS || !following() || subComm == nullptr || *subComm == nullptr || comm == nullptr ||
      rankIds == nullptr)
    return rc;
  guarded(Problem::CommunicatorNotKept, [&] {
    // HCCL's rule for the name: the config's, else "{global communicator's}_sub_{subCommId}".
    std::string key = config_name(config);
    if (key.empty()) key = communicators::key_of(*comm) + "_sub_" + std::to_string(subCommId);
    // rankIds are ranks of the global communicator: global ranks when its members are known.
    std::optional<std::vector<uint32_t>> ranks;
    if (std::optional<std::vector<uint32_t>> outer = communicators::members(*comm)) {
      ranks.emplace();
      for (uint32_t i = 0; i < rankNum && ranks; ++i) {
        if (rankIds[i] < outer->size())
          ranks->push_back((*outer)[rankIds[i]]);
        else
          ranks.reset();
      }
    }
    communicators::made(*subComm, std::move(key), std::move(ranks));
  });
  return rc;
}

MSPROBE_HOOK HcclResult HcclCommDestroy(HcclComm comm) {
  auto real = MSPROBE_REAL(HcclCommDestroy);
  if (!real) return HCCL_E_NOT_FOUND;
  HcclResult rc = real(comm);
  if (rc == HCCL_SUCCESS)  // the address may be given to the next communicator
    communicators::destroyed(comm);
  return rc;
}

MSPROBE_HOOK HcclResult HcclAllReduce(void *sendBuf, void *recvBuf, uint64_t count, HcclDataType dataType,
                                      HcclReduceOp op, HcclComm comm, aclrtStream stream) {
  auto real = MSPROBE_REAL(HcclAllReduce);
  if (!real) return HCCL_E_NOT_FOUND;
  return hccl_kernel(
      format::kHcclAllReduce, stream, comm, {},
      [&](const Issue &) {
        return Sides{true, buffer(sendBuf, count, dataType), {reduce_op(op)}, true, buffer(recvBuf, count, dataType)};
      },
      [&] { return real(sendBuf, recvBuf, count, dataType, op, comm, stream); });
}

MSPROBE_HOOK HcclResult HcclBroadcast(void *buf, uint64_t count, HcclDataType dataType, uint32_t root, HcclComm comm,
                                      aclrtStream stream) {
  auto real = MSPROBE_REAL(HcclBroadcast);
  if (!real) return HCCL_E_NOT_FOUND;
  return hccl_kernel(
      format::kHcclBroadcast, stream, comm, {},
      [&](Issue &issue) {
        if (issue.info) issue.info->root = root;
        auto t = buffer(buf, count, dataType);
        return Sides{true, t, {ValueArg{vt::kInt, (int64_t)root, "root"}}, true, t};
      },
      [&] { return real(buf, count, dataType, root, comm, stream); });
}

MSPROBE_HOOK HcclResult HcclAllGather(void *sendBuf, void *recvBuf, uint64_t sendCount, HcclDataType dataType,
                                      HcclComm comm, aclrtStream stream) {
  auto real = MSPROBE_REAL(HcclAllGather);
  if (!real) return HCCL_E_NOT_FOUND;
  return hccl_kernel(
      format::kHcclAllGather, stream, comm, {},
      [&](const Issue &) {
        return Sides{true,
                     buffer(sendBuf, sendCount, dataType),
                     {},
                     true,
                     buffer(recvBuf, times_rank_size(sendCount, comm), dataType)};
      },
      [&] { return real(sendBuf, recvBuf, sendCount, dataType, comm, stream); });
}

MSPROBE_HOOK HcclResult HcclReduceScatter(void *sendBuf, void *recvBuf, uint64_t recvCount, HcclDataType dataType,
                                          HcclReduceOp op, HcclComm comm, aclrtStream stream) {
  auto real = MSPROBE_REAL(HcclReduceScatter);
  if (!real) return HCCL_E_NOT_FOUND;
  return hccl_kernel(
      format::kHcclReduceScatter, stream, comm, {},
      [&](const Issue &) {
        return Sides{true,
                     buffer(sendBuf, times_rank_size(recvCount, comm), dataType),
                     {reduce_op(op)},
                     true,
                     buffer(recvBuf, recvCount, dataType)};
      },
      [&] { return real(sendBuf, recvBuf, recvCount, dataType, op, comm, stream); });
}

// The reduction of every member's send buffer reaches the root's receive buffer: the output is null elsewhere.
MSPROBE_HOOK HcclResult HcclReduce(void *sendBuf, void *recvBuf, uint64_t count, HcclDataType dataType, HcclReduceOp op,
                                   uint32_t root, HcclComm comm, aclrtStream stream) {
  auto real = MSPROBE_REAL(HcclReduce);
  if (!real) return HCCL_E_NOT_FOUND;
  return hccl_kernel(
      format::kHcclReduce, stream, comm, {},
      [&](Issue &issue) {
        if (issue.info) issue.info->root = root;
        const bool at_root = communicators::rank_of(comm) == root;
        return Sides{true,
                     buffer(sendBuf, count, dataType),
                     {reduce_op(op), ValueArg{vt::kInt, (int64_t)root, "root"}},
                     true,
                     at_root ? buffer(recvBuf, count, dataType) : std::nullopt};
      },
      [&] { return real(sendBuf, recvBuf, count, dataType, op, root, comm, stream); });
}

// Block r of the root's send buffer reaches member r: the send buffer is read at the root only (null elsewhere).
MSPROBE_HOOK HcclResult HcclScatter(void *sendBuf, void *recvBuf, uint64_t recvCount, HcclDataType dataType,
                                    uint32_t root, HcclComm comm, aclrtStream stream) {
  auto real = MSPROBE_REAL(HcclScatter);
  if (!real) return HCCL_E_NOT_FOUND;
  return hccl_kernel(
      format::kHcclScatter, stream, comm, {},
      [&](Issue &issue) {
        if (issue.info) issue.info->root = root;
        const bool at_root = communicators::rank_of(comm) == root;
        return Sides{true,
                     at_root ? buffer(sendBuf, times_rank_size(recvCount, comm), dataType) : std::nullopt,
                     {ValueArg{vt::kInt, (int64_t)root, "root"}},
                     true,
                     buffer(recvBuf, recvCount, dataType)};
      },
      [&] { return real(sendBuf, recvBuf, recvCount, dataType, root, comm, stream); });
}

// No data: a kernel with no arguments, numbered with the communicator's collectives (it is one).
MSPROBE_HOOK HcclResult HcclBarrier(HcclComm comm, aclrtStream stream) {
  auto real = MSPROBE_REAL(HcclBarrier);
  if (!real) return HCCL_E_NOT_FOUND;
  return hccl_kernel(
      format::kHcclBarrier, stream, comm, {},
      [&](const Issue &) {
        return Sides{false, std::nullopt, {}, false, {}};
      },
      [&] { return real(comm, stream); });
}

// Block j of every member's send buffer (sendCount elements) reaches member j.
MSPROBE_HOOK HcclResult HcclAlltoAll(const void *sendBuf, uint64_t sendCount, HcclDataType sendType,
                                     const void *recvBuf, uint64_t recvCount, HcclDataType recvType, HcclComm comm,
                                     aclrtStream stream) {
  auto real = MSPROBE_REAL(HcclAlltoAll);
  if (!real) return HCCL_E_NOT_FOUND;
  return hccl_kernel(
      format::kHcclAlltoAll, stream, comm, {},
      [&](const Issue &) {
        return Sides{true,
                     buffer(const_cast<void *>(sendBuf), times_rank_size(sendCount, comm), sendType),
                     {},
                     true,
                     buffer(const_cast<void *>(recvBuf), times_rank_size(recvCount, comm), recvType)};
      },
      [&] { return real(sendBuf, sendCount, sendType, recvBuf, recvCount, recvType, comm, stream); });
}

// Counts and displacements per member (host arrays of rank-size entries, in elements): the buffers span their
// furthest block, and the four arrays are the kernel's arguments (what expert parallelism sent where).
MSPROBE_HOOK HcclResult HcclAlltoAllV(const void *sendBuf, const void *sendCounts, const void *sdispls,
                                      HcclDataType sendType, const void *recvBuf, const void *recvCounts,
                                      const void *rdispls, HcclDataType recvType, HcclComm comm, aclrtStream stream) {
  auto real = MSPROBE_REAL(HcclAlltoAllV);
  if (!real) return HCCL_E_NOT_FOUND;
  return hccl_kernel(
      format::kHcclAlltoAllV, stream, comm, {},
      [&](const Issue &) {
        const uint64_t n = communicators::size_of(comm).value_or(0);
        const std::vector<uint64_t> sc = host_counts(sendCounts, n), sd = host_counts(sdispls, n),
                                    rc = host_counts(recvCounts, n), rd = host_counts(rdispls, n);
        return Sides{
            true,
            buffer(const_cast<void *>(sendBuf), blocks_extent(sc, sd), sendType),
            {int_list(sc, "sendCounts"), int_list(sd, "sdispls"), int_list(rc, "recvCounts"), int_list(rd, "rdispls")},
            true,
            buffer(const_cast<void *>(recvBuf), blocks_extent(rc, rd), recvType)};
      },
      [&] {
        return real(sendBuf, sendCounts, sdispls, sendType, recvBuf, recvCounts, rdispls, recvType, comm, stream);
      });
}

// The rank-size x rank-size count matrix (row i: what member i sends to each), blocks packed: this member's row
// and column are its send and receive counts.
MSPROBE_HOOK HcclResult HcclAlltoAllVC(const void *sendBuf, const void *sendCountMatrix, HcclDataType sendType,
                                       const void *recvBuf, HcclDataType recvType, HcclComm comm, aclrtStream stream) {
  auto real = MSPROBE_REAL(HcclAlltoAllVC);
  if (!real) return HCCL_E_NOT_FOUND;
  return hccl_kernel(
      format::kHcclAlltoAllVC, stream, comm, {},
      [&](const Issue &) {
        const uint64_t n = communicators::size_of(comm).value_or(0);
        const std::optional<uint32_t> me = communicators::rank_of(comm);
        const std::vector<uint64_t> matrix = n <= 4096 ? host_counts(sendCountMatrix, n * n) : std::vector<uint64_t>{};
        std::vector<uint64_t> sends, receives;
        if (me && *me < n && !matrix.empty())
          for (uint64_t j = 0; j < n; ++j) {
            sends.push_back(matrix[*me * n + j]);
            receives.push_back(matrix[j * n + *me]);
          }
        auto total = [](const std::vector<uint64_t> &v) -> std::optional<uint64_t> {
          if (v.empty()) return std::nullopt;
          uint64_t t = 0;
          for (uint64_t c : v) {
            if (c > UINT64_MAX - t) return std::nullopt;
            t += c;
          }
          return t;
        };
        return Sides{true,
                     buffer(const_cast<void *>(sendBuf), total(sends), sendType),
                     {int_list(sends, "sendCounts"), int_list(receives, "recvCounts")},
                     true,
                     buffer(const_cast<void *>(recvBuf), total(receives), recvType)};
      },
      [&] { return real(sendBuf, sendCountMatrix, sendType, recvBuf, recvType, comm, stream); });
}

MSPROBE_HOOK HcclResult HcclSend(void *sendBuf, uint64_t count, HcclDataType dataType, uint32_t destRank, HcclComm comm,
                                 aclrtStream stream) {
  return transfer(format::kHcclSend, true, MSPROBE_REAL(HcclSend), sendBuf, count, dataType, destRank, comm, stream);
}

MSPROBE_HOOK HcclResult HcclRecv(void *recvBuf, uint64_t count, HcclDataType dataType, uint32_t srcRank, HcclComm comm,
                                 aclrtStream stream) {
  return transfer(format::kHcclRecv, false, MSPROBE_REAL(HcclRecv), recvBuf, count, dataType, srcRank, comm, stream);
}

MSPROBE_HOOK_FAMILY(MSPROBE_HCCL_HOOKS, Linked)
