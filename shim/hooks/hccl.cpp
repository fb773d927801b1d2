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
#include "format/naming.h"
#include "shim/base/hash.h"
#include "shim/capture/capture_call.h"
#include "shim/capture/session.h"
#include "shim/device/handles.h"
#include "shim/device/runtime_api.h"
#include "shim/hooks/hook.h"

using namespace msprobe::shim;
using msprobe::format::CommInfo;
using msprobe::format::ValueArg;
namespace vt = msprobe::format::value_type;  // the dump's value types

// The hooks of this family, one a line (shim/hooks/hook.h).
#define MSPROBE_HCCL_HOOKS(X)   \
  X(HcclCommInitRootInfo)       \
  X(HcclCommInitRootInfoConfig) \
  X(HcclCommInitClusterInfo)    \
  X(HcclCreateSubCommConfig)    \
  X(HcclCommDestroy)            \
  X(HcclAllReduce)              \
  X(HcclBroadcast)              \
  X(HcclAllGather)              \
  X(HcclReduceScatter)          \
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

// One of the communicator queries (HcclGetRankSize, HcclGetRankId), nullopt when it is missing or fails.
std::optional<uint32_t> query(runtime::Function<int32_t (*)(void *, uint32_t *)> &fn, HcclComm comm) {
  auto get = fn.get();
  if (get == nullptr) return std::nullopt;
  uint32_t v = 0;
  ReentryGuard guard;
  if (get(comm, &v) != HCCL_SUCCESS) return std::nullopt;
  return v;
}

std::optional<uint64_t> times_rank_size(uint64_t count, HcclComm comm) {
  std::optional<uint32_t> n = query(runtime::HcclGetRankSize, comm);
  if (!n || *n == 0 || count > UINT64_MAX / *n) return std::nullopt;
  return count * *n;
}

ValueArg reduce_op(HcclReduceOp op) {
  const char *names[] = {"sum", "prod", "max", "min"};
  std::string v = (unsigned)op < 4 ? names[(int)op] : "reduce_op_" + std::to_string((int)op);
  return ValueArg{vt::kStr, std::move(v), "op"};
}

// ---- Communicators ------------------------------------------------------------------------------------------------
// What the shim knows of a live communicator handle.
struct CommState {
  std::string key;  // what creation gave: every member derives the same one (used when HCCL names none)
  std::optional<std::string> name;
  std::optional<uint32_t> rank, size;
  std::optional<std::vector<uint32_t>> ranks;  // global ranks of the members, in comm-rank order
  bool described = false;                      // HCCL was asked for name, rank and size
  uint64_t next_seq = 0;
  std::map<std::pair<uint32_t, bool>, uint64_t> next_pair_seq;  // (peer, this rank sends) -> next
};

std::mutex g_comms_mu;
// Leaked on purpose: hooks may run while static destructors do.
auto *g_comms = new std::unordered_map<HcclComm, CommState>;

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

// Asks HCCL (outside the lock: these calls may take it) and fills in what it answers.
void describe(HcclComm comm, CommState &s) {
  s.described = true;
  s.rank = query(runtime::HcclGetRankId, comm);
  s.size = query(runtime::HcclGetRankSize, comm);
  auto get_name = runtime::HcclGetCommName.get();
  if (get_name != nullptr) {
    char name[COMM_NAME_MAX_LENGTH + 1] = {};
    ReentryGuard guard;
    if (get_name(comm, name) == HCCL_SUCCESS && name[0] != '\0') s.name = std::string(name);
  }
}

// A communicator was created: forget what an earlier one at the same address was, learn this one.
void register_comm(HcclComm comm, std::string key, std::optional<std::vector<uint32_t>> ranks) {
  CommState s;
  s.key = std::move(key);
  s.ranks = std::move(ranks);
  describe(comm, s);
  std::lock_guard<std::mutex> lk(g_comms_mu);
  (*g_comms)[comm] = std::move(s);
}

std::optional<std::vector<uint32_t>> known_ranks(HcclComm comm) {
  std::lock_guard<std::mutex> lk(g_comms_mu);
  auto it = g_comms->find(comm);
  return it == g_comms->end() ? std::nullopt : it->second.ranks;
}

std::string key_of(HcclComm comm) {
  std::lock_guard<std::mutex> lk(g_comms_mu);
  auto it = g_comms->find(comm);
  return it == g_comms->end() ? std::string() : it->second.key;
}

// This call's place in the communicator. The sequence number is taken now and given back by release() when the call
// fails (nothing was issued), so that every member numbers the same calls.
struct Issue {
  HcclComm comm = nullptr;
  std::optional<CommInfo> info;  // nullopt: the communicator has neither a name nor a key
  std::optional<std::pair<uint32_t, bool>> pair;
  uint64_t taken = 0;
};

Issue take_number(HcclComm comm, std::optional<uint32_t> peer, bool sends) {
  Issue is;
  is.comm = comm;
  if (comm == nullptr) return is;  // HCCL refuses the call
  bool need_describe = false;
  {
    std::lock_guard<std::mutex> lk(g_comms_mu);
    need_describe = !g_comms->count(comm) || !(*g_comms)[comm].described;
  }
  CommState fresh;
  if (need_describe) describe(comm, fresh);  // a handle the shim did not see created
  std::lock_guard<std::mutex> lk(g_comms_mu);
  CommState &s = (*g_comms)[comm];
  if (!s.described) {
    s.name = fresh.name;
    s.rank = fresh.rank;
    s.size = fresh.size;
    s.described = true;
  }
  if (peer) {
    is.pair = std::make_pair(*peer, sends);
    is.taken = s.next_pair_seq[*is.pair]++;
  } else {
    is.taken = s.next_seq++;
  }
  const std::string &name = s.name ? *s.name : s.key;
  if (name.empty() || !s.rank || !s.size) return is;
  CommInfo c;
  c.name = name;
  c.rank = *s.rank;
  c.size = *s.size;
  if (s.ranks && s.ranks->size() == *s.size) c.ranks = s.ranks;
  if (peer) {
    c.peer = *peer;
    c.pair_seq = is.taken;
  } else {
    c.seq = is.taken;
  }
  is.info = std::move(c);
  return is;
}

// The bookkeeping never throws into the host (shim/capture/capture_call.h's policy): an Issue without a number then.
Issue take(HcclComm comm, std::optional<uint32_t> peer = std::nullopt, bool sends = false) noexcept {
  Issue is;
  guarded(Problem::CommunicatorNotKept, [&] { is = take_number(comm, peer, sends); });
  return is;
}

void release(const Issue &is) {
  if (is.comm == nullptr) return;
  std::lock_guard<std::mutex> lk(g_comms_mu);
  auto it = g_comms->find(is.comm);
  if (it == g_comms->end()) return;
  uint64_t &next = is.pair ? it->second.next_pair_seq[*is.pair] : it->second.next_seq;
  if (next == is.taken + 1) next = is.taken;  // no later call took a number since
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
    if (comm != nullptr && *comm != nullptr) register_comm(*comm, std::move(key), std::move(ranks));
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
HcclResult hccl_kernel(const char *op_type, aclrtStream stream, HcclComm comm, Numbering numbering, MakeSides sides,
                       Forward forward) {
  Session *session = capture_gate();
  if (session == nullptr) return forward();
  Issue issue = take(comm, numbering.peer, numbering.sends);
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
  if (rc != HCCL_SUCCESS) guarded(Problem::CommunicatorNotKept, [&] { release(issue); });
  return rc;
}

// HcclSend / HcclRecv (the same parameters): a send's buffer is its input and it has no output, a receive's buffer
// is its output and its only input is the peer.
template <typename Real>
HcclResult transfer(const char *api, bool send, Real real, void *buf, uint64_t count, HcclDataType type, uint32_t peer,
                    HcclComm comm, aclrtStream stream) {
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
    std::vector<uint32_t> ranks(query(runtime::HcclGetRankSize, *comm).value_or(0));
    std::iota(ranks.begin(), ranks.end(), 0u);
    register_comm(*comm, "hccl_world_group", ranks.empty() ? std::nullopt : std::optional(std::move(ranks)));
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
    if (key.empty()) key = key_of(*comm) + "_sub_" + std::to_string(subCommId);
    // rankIds are ranks of the global communicator: global ranks when its members are known.
    std::optional<std::vector<uint32_t>> ranks;
    if (std::optional<std::vector<uint32_t>> outer = known_ranks(*comm)) {
      ranks.emplace();
      for (uint32_t i = 0; i < rankNum && ranks; ++i) {
        if (rankIds[i] < outer->size())
          ranks->push_back((*outer)[rankIds[i]]);
        else
          ranks.reset();
      }
    }
    register_comm(*subComm, std::move(key), std::move(ranks));
  });
  return rc;
}

MSPROBE_HOOK HcclResult HcclCommDestroy(HcclComm comm) {
  auto real = MSPROBE_REAL(HcclCommDestroy);
  if (!real) return HCCL_E_NOT_FOUND;
  HcclResult rc = real(comm);
  if (rc == HCCL_SUCCESS)  // the address may be given to the next communicator
    guarded(Problem::CommunicatorNotKept, [&] {
      std::lock_guard<std::mutex> lk(g_comms_mu);
      g_comms->erase(comm);
    });
  return rc;
}

MSPROBE_HOOK HcclResult HcclAllReduce(void *sendBuf, void *recvBuf, uint64_t count, HcclDataType dataType,
                                      HcclReduceOp op, HcclComm comm, aclrtStream stream) {
  auto real = MSPROBE_REAL(HcclAllReduce);
  if (!real) return HCCL_E_NOT_FOUND;
  return hccl_kernel(
      "HcclAllReduce", stream, comm, {},
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
      "HcclBroadcast", stream, comm, {},
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
      "HcclAllGather", stream, comm, {},
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
      "HcclReduceScatter", stream, comm, {},
      [&](const Issue &) {
        return Sides{true,
                     buffer(sendBuf, times_rank_size(recvCount, comm), dataType),
                     {reduce_op(op)},
                     true,
                     buffer(recvBuf, recvCount, dataType)};
      },
      [&] { return real(sendBuf, recvBuf, recvCount, dataType, op, comm, stream); });
}

MSPROBE_HOOK HcclResult HcclSend(void *sendBuf, uint64_t count, HcclDataType dataType, uint32_t destRank, HcclComm comm,
                                 aclrtStream stream) {
  return transfer("HcclSend", true, MSPROBE_REAL(HcclSend), sendBuf, count, dataType, destRank, comm, stream);
}

MSPROBE_HOOK HcclResult HcclRecv(void *recvBuf, uint64_t count, HcclDataType dataType, uint32_t srcRank, HcclComm comm,
                                 aclrtStream stream) {
  return transfer("HcclRecv", false, MSPROBE_REAL(HcclRecv), recvBuf, count, dataType, srcRank, comm, stream);
}

MSPROBE_HOOK_FAMILY(MSPROBE_HCCL_HOOKS, Linked)
