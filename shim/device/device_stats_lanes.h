// The executor cache of device statistics (device_stats.h): the reductions' executors, made repeatable once per tensor
// layout and place in a kernel and kept with their argument objects, in lanes. A lane is a device block for one
// launch's results and the executors that write into it at fixed places, as a tree: a node per tensor place, its
// children the places after it, so a path from the root stands for a kernel's tensors in order. Lanes are checked
// out for one launch on one stream at a time. Internal to shim/device/device_stats*.cpp.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "shim/device/device_stats_ops.h"
#include "shim/device/handles.h"

namespace msprobe::shim::device_stats_internal {

// A lane keeps at most this many nodes (tensor places with their executors); past it, it starts over.
constexpr size_t kMaxNodesPerLane = 4096;

// Where one tensor's results go in the kernel's block: max and min in the tensor's dtype, mean and norm in the
// result dtype (not for extremes only), each naturally aligned; `end`: the first byte after them.
struct ResultSlots {
  uint64_t stats[4] = {};
  uint64_t end;
};

// What a tensor's executors depend on besides its address: its layout, its results' place and dtypes, which
// reductions, and which side of the kernel it is on (a node's place in a lane's tree stands for the places before it).
struct NodeKey {
  int32_t dtype = 0, format = 0, mean_dtype = 0;
  bool extremes = false;  // its extremes only (StatsWanted::Extremes): no mean, no norm
  uint8_t ndim = 0, storage_ndim = 0, side = 0;
  bool extremes_only() const { return extremes; }
  int64_t offset = 0;
  std::array<int64_t, kMaxDims> shape{}, strides{}, storage{};
  bool operator==(const NodeKey &) const = default;
};

// An executor made repeatable, with its workspace size. Destroyed by its owner.
struct Exec {
  Op *op = nullptr;
  void *ex = nullptr;
  uint64_t ws = 0;
};

// Makes `op`'s executor for `args` repeatable. False (nothing kept) when phase 1 or the runtime refuses.
template <typename... A>
bool make_repeatable(Exec &e, Op &op, A... args) {
  e.op = &op;
  e.ex = make(op, &e.ws, args...);
  if (e.ex == nullptr) return false;
  if (runtime::aclSetAclOpExecutorRepeatable.get()(e.ex) != 0) {
    // Not repeatable: phase 2 would free it; unused, it is the caller's to destroy.
    runtime::aclDestroyAclOpExecutor.get()(e.ex);
    e.ex = nullptr;
    return false;
  }
  return true;
}

void destroy(Exec &e);
// Points an executor's input 0 at `addr` (its view `tensor` gets it too).
bool rebind(const Exec &e, void *tensor, void *addr);

// The norms of the tensors of one dtype on one side of a kernel, in one aclnnForeachNorm.
struct NormGroup {
  std::vector<size_t> members;      // indices into the side's tensors
  std::vector<const void *> nodes;  // ... and their nodes (a side that reaches the same end through them)
  std::vector<void *> bound;        // the address each member's view holds now
  void *list = nullptr;             // x: views of the members' tensors
  Exec exec;
  Args args;  // destroyed after the executor
};

// One tensor's place in a lane: the executors of its reductions, their argument objects and results' places. Its
// children are the places after it; a node ending a side keeps that side's norm groups.
struct Node {
  NodeKey key;
  Args args;              // destroyed after the executors (members below are destroyed first: see ~Node)
  void *view = nullptr;   // the host's tensor as described; its storage address is the last one bound
  void *bound = nullptr;  // the address the executors below hold (the norm's: norm_bound, set when it runs)
  void *norm_bound = nullptr;
  Exec aminmax, mean, norm;  // mean and norm: not for extremes only
  ResultSlots slots{};
  std::vector<std::unique_ptr<Node>> children;
  // Norm groups of the side that ends here (made at the first end_side() here); empty with `groups_made`: each
  // member's own norm serves.
  std::vector<std::unique_ptr<NormGroup>> groups;
  bool groups_made = false;

  ~Node();
};

// A results block and the executors that write into it, for one launch at a time on one stream.
struct Lane {
  void *stream = nullptr;
  void *block = nullptr;  // kBlockBytes of device memory
  Scratch scratch;
  Node root;
  size_t nodes = 0;

  ~Lane();
};

// One side of a kernel as its tensors were added: each one's node and index in the kernel's results.
using Side = std::vector<std::pair<Node *, size_t>>;

// The node of `m` after `parent`, made (its executors with it) on first sight; null when the runtime refuses one of
// its executors (made or repeatable: the caller then reduces the tensor the old way, or sends it to the host path).
Node *node_for(Lane &lane, Node &parent, const NodeKey &key, const TensorMeta &m, const ResultSlots &slots,
               bool *refused);
// The norm groups of a side ending at `end` (into end.groups; none when each tensor's own norm serves).
void make_norm_groups(Lane &lane, Node &end, const Side &side);

// A lane not in use on `stream`, or a new one; null when device memory is short.
Lane *check_out(void *stream);
// The launch is over: the lane waits for the stream's next one.
void check_in(Lane *lane);
// Every lane not in use is let go (its executors destroyed, its block freed).
void release_idle_lanes();

}  // namespace msprobe::shim::device_stats_internal
