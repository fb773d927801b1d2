// HCCL: the rank a communicator is created with names the rank{R} folder when no environment variable
// (RANK_ID, RANK) gave one (spec §4), and the collectives are kernels (OpType = the HCCL call) whose send
// buffer is the input and whose receive buffer is the output, typed from HcclDataType and the element
// count. The input is copied before the collective, so in-place calls (send == recv) keep both sides.
#include "hccl/hccl.h"

#include <initializer_list>
#include <optional>
#include <string>

#include "acl/acl_base.h"
#include "format/naming.h"
#include "shim/capture/capture_call.h"
#include "shim/capture/session.h"
#include "shim/device/handles.h"
#include "shim/hooks/hook.h"

using namespace msprobe::shim;
using msprobe::format::ValueArg;
namespace vt = msprobe::format::value_type;  // the dump's value types

// The hooks of this family, one a line (shim/hooks/hook.h).
#define MSPROBE_HCCL_HOOKS(X) \
  X(HcclCommInitRootInfo)     \
  X(HcclCommInitClusterInfo)  \
  X(HcclAllReduce)            \
  X(HcclBroadcast)            \
  X(HcclAllGather)            \
  X(HcclReduceScatter)
MSPROBE_HOOK_SLOTS(MSPROBE_HCCL_HOOKS)

namespace {

// Called, not interposed: the rank count of AllGather / ReduceScatter's larger side.
HookSlot slot_rank_size{"HcclGetRankSize"};

bool capturing() { return !ReentryGuard::active() && !KernelLaunch::open_on_this_thread() && capture_enabled(); }

// aclDataType of an HcclDataType (reference/cann_abi.md §3); -1 (described, not copied) for INT128 and
// values HCCL does not name.
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
  auto get = reinterpret_cast<HcclResult (*)(HcclComm, uint32_t *)>(slot_rank_size.resolve());
  if (get == nullptr) return std::nullopt;
  uint32_t n = 0;
  ReentryGuard guard;
  if (get(comm, &n) != HCCL_SUCCESS || n == 0 || count > UINT64_MAX / n) return std::nullopt;
  return count * n;
}

ValueArg reduce_op(HcclReduceOp op) {
  const char *names[] = {"sum", "prod", "max", "min"};
  std::string v = (unsigned)op < 4 ? names[(int)op] : "reduce_op_" + std::to_string((int)op);
  return ValueArg{vt::kStr, std::move(v), "op"};
}

// A communicator's creation (`args` forwarded untouched): the rank it was created with is the rank hint.
template <typename Real, typename... Args>
HcclResult init_comm(Real real, uint32_t rank, Args... args) {
  if (!real) return HCCL_E_NOT_FOUND;
  HcclResult rc = real(args...);
  if (rc == HCCL_SUCCESS && capture_enabled()) guarded([&] { session().set_rank_hint(rank); });
  return rc;
}

// One collective: `in` (and the values) read before `forward` runs it, `out` after.
template <typename Forward>
HcclResult capture_collective(const char *op_type, aclrtStream stream, const std::optional<TensorMeta> &in,
                              std::initializer_list<ValueArg> values, const std::optional<TensorMeta> &out,
                              Forward forward) {
  return capture_call(
      session(), op_type, stream,
      [&](KernelLaunch &k) {
        if (in)
          k.input_tensor(*in);
        else
          k.input_null();
        for (const ValueArg &v : values) k.input_value(v);
      },
      forward,
      [&](KernelLaunch &k) {
        if (out)
          k.output_tensor(*out);
        else
          k.output_null();
      },
      [](HcclResult rc) { return rc == HCCL_SUCCESS; });
}

}  // namespace

MSPROBE_HOOK HcclResult HcclCommInitRootInfo(uint32_t nRanks, const HcclRootInfo *rootInfo, uint32_t rank,
                                             HcclComm *comm) {
  return init_comm(MSPROBE_REAL(HcclCommInitRootInfo), rank, nRanks, rootInfo, rank, comm);
}

MSPROBE_HOOK HcclResult HcclCommInitClusterInfo(const char *clusterInfo, uint32_t rank, HcclComm *comm) {
  return init_comm(MSPROBE_REAL(HcclCommInitClusterInfo), rank, clusterInfo, rank, comm);
}

MSPROBE_HOOK HcclResult HcclAllReduce(void *sendBuf, void *recvBuf, uint64_t count, HcclDataType dataType,
                                      HcclReduceOp op, HcclComm comm, aclrtStream stream) {
  auto real = MSPROBE_REAL(HcclAllReduce);
  if (!real) return HCCL_E_NOT_FOUND;
  auto forward = [&] { return real(sendBuf, recvBuf, count, dataType, op, comm, stream); };
  if (!capturing()) return forward();
  return capture_collective("HcclAllReduce", stream, buffer(sendBuf, count, dataType), {reduce_op(op)},
                            buffer(recvBuf, count, dataType), forward);
}

MSPROBE_HOOK HcclResult HcclBroadcast(void *buf, uint64_t count, HcclDataType dataType, uint32_t root, HcclComm comm,
                                      aclrtStream stream) {
  auto real = MSPROBE_REAL(HcclBroadcast);
  if (!real) return HCCL_E_NOT_FOUND;
  auto forward = [&] { return real(buf, count, dataType, root, comm, stream); };
  if (!capturing()) return forward();
  auto t = buffer(buf, count, dataType);
  return capture_collective("HcclBroadcast", stream, t, {ValueArg{vt::kInt, (int64_t)root, "root"}}, t, forward);
}

MSPROBE_HOOK HcclResult HcclAllGather(void *sendBuf, void *recvBuf, uint64_t sendCount, HcclDataType dataType,
                                      HcclComm comm, aclrtStream stream) {
  auto real = MSPROBE_REAL(HcclAllGather);
  if (!real) return HCCL_E_NOT_FOUND;
  auto forward = [&] { return real(sendBuf, recvBuf, sendCount, dataType, comm, stream); };
  if (!capturing()) return forward();
  return capture_collective("HcclAllGather", stream, buffer(sendBuf, sendCount, dataType), {},
                            buffer(recvBuf, times_rank_size(sendCount, comm), dataType), forward);
}

MSPROBE_HOOK HcclResult HcclReduceScatter(void *sendBuf, void *recvBuf, uint64_t recvCount, HcclDataType dataType,
                                          HcclReduceOp op, HcclComm comm, aclrtStream stream) {
  auto real = MSPROBE_REAL(HcclReduceScatter);
  if (!real) return HCCL_E_NOT_FOUND;
  auto forward = [&] { return real(sendBuf, recvBuf, recvCount, dataType, op, comm, stream); };
  if (!capturing()) return forward();
  return capture_collective("HcclReduceScatter", stream, buffer(sendBuf, times_rank_size(recvCount, comm), dataType),
                            {reduce_op(op)}, buffer(recvBuf, recvCount, dataType), forward);
}

MSPROBE_HOOK_FAMILY(MSPROBE_HCCL_HOOKS, Linked)
