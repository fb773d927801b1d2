// The HCCL calls a dump can hold as kernels: the OpType of `{OpType}.{OpName}.{n}.forward` (spec §5), and what each is
// in causal terms. One table for the hooks that write them (shim/hooks/hccl.cpp) and the tools that join ranks by them
// (first-nan, first-diff, the report), so that a call added to one is known to the other.
#pragma once
#include <optional>
#include <string_view>

namespace msprobe::format {

// How an HCCL call moves data between ranks. Every kind but Send / Recv is joined across ranks by (communicator, seq);
// the MC2 kernels (MatmulAllReduce, AllGatherMatmul, MatmulReduceScatter: aclnn ops with a "comm") are Collective.
enum class HcclShape : unsigned char {
  Collective,  // every member's output may hold every member's input (all-reduce, all-gather, reduce-scatter,
               // the all-to-alls, the barrier)
  FromRoot,    // the root's input alone reaches the members (broadcast; scatter: block r to member r)
  ToRoot,      // every member's input reaches the root's output alone (reduce: the others write nothing)
  Send,        // point to point, this rank's side sends; joined by (communicator, sender, receiver, pair_seq)
  Recv,        // point to point, this rank's side receives
};

struct HcclCall {
  std::string_view op_type;  // "HcclAllReduce", the kernel's OpType
  HcclShape shape;
  constexpr bool point_to_point() const { return shape == HcclShape::Send || shape == HcclShape::Recv; }
};

// The OpTypes, one a line, and every HCCL call the shim records a kernel for (shim/hooks/hccl.cpp).
inline constexpr std::string_view kHcclAllReduce = "HcclAllReduce";
inline constexpr std::string_view kHcclBroadcast = "HcclBroadcast";
inline constexpr std::string_view kHcclAllGather = "HcclAllGather";
inline constexpr std::string_view kHcclReduceScatter = "HcclReduceScatter";
inline constexpr std::string_view kHcclReduce = "HcclReduce";
inline constexpr std::string_view kHcclScatter = "HcclScatter";
inline constexpr std::string_view kHcclBarrier = "HcclBarrier";
inline constexpr std::string_view kHcclAlltoAll = "HcclAlltoAll";
inline constexpr std::string_view kHcclAlltoAllV = "HcclAlltoAllV";
inline constexpr std::string_view kHcclAlltoAllVC = "HcclAlltoAllVC";
inline constexpr std::string_view kHcclSend = "HcclSend";
inline constexpr std::string_view kHcclRecv = "HcclRecv";
inline constexpr HcclCall kHcclCalls[] = {
    {kHcclAllReduce, HcclShape::Collective},
    {kHcclBroadcast, HcclShape::FromRoot},
    {kHcclAllGather, HcclShape::Collective},
    {kHcclReduceScatter, HcclShape::Collective},
    {kHcclReduce, HcclShape::ToRoot},
    {kHcclScatter, HcclShape::FromRoot},
    {kHcclBarrier, HcclShape::Collective},
    {kHcclAlltoAll, HcclShape::Collective},
    {kHcclAlltoAllV, HcclShape::Collective},
    {kHcclAlltoAllVC, HcclShape::Collective},
    {kHcclSend, HcclShape::Send},
    {kHcclRecv, HcclShape::Recv},
};

// The call a kernel's OpType names; nullopt for a kernel that is not an HCCL call.
constexpr std::optional<HcclCall> hccl_call(std::string_view op_type) {
  for (const HcclCall &c : kHcclCalls)
    if (c.op_type == op_type) return c;
  return std::nullopt;
}

}  // namespace msprobe::format
