// What the shim keeps of an aclnn phase-1 call until its launch: the decoded parameters (or the argument registers
// still to decode), by executor (CallTable), and the calls torch_npu's executor cache keeps under its keys (KeptCalls).
// Both are process-wide and thread-safe: phase 1 records on one thread (torch_npu's Python thread), phase 2 reads and
// forgets on another (its task queue).
#pragma once
#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "format/model.h"
#include "shim/aclnn/exec_cache_key.h"
#include "shim/aclnn/prototypes.h"
#include "shim/call/forwarder.h"
#include "shim/device/handles.h"
#include "shim/stacks/stacks.h"

namespace msprobe::shim {

struct Binding;

// One parameter of a recorded phase-1 call.
struct CallParam {
  ParamKind kind = ParamKind::OtherPointer;
  Direction dir = Direction::None;
  bool present = false;                   // false: NULL (an absent optional tensor)
  std::vector<TensorMeta> tensors;        // Tensor: one; TensorList: its members
  std::vector<const void *> handles;      // the aclTensor of each of `tensors` (null: not known)
  std::optional<format::ValueArg> value;  // everything that is not a tensor
};

inline bool is_tensor_kind(ParamKind k) { return k == ParamKind::Tensor || k == ParamKind::TensorList; }

// A phase-1 call as it arrived, decoded on the thread of phase 2 (issue 29): the Python thread, where torch_npu runs
// phase 1, only copies the argument registers; the argument objects are read where phase 2 runs, before it (torch_npu
// destroys them in the queued call, after phase 2).
struct RawCall {
  static constexpr int kStackSlots = 16;  // a prototype with more is decoded at phase 1
  const Binding *binding = nullptr;
  uint64_t gpr[kGprArgs];
  uint64_t fpr[kFprArgs];
  uint64_t stack[kStackSlots];
  int stack_slots = 0;
};

struct OpCall {
  // Copies and move assignments in op_call.cpp, with the table that makes them.
  OpCall() = default;
  OpCall(const OpCall &);
  OpCall(OpCall &&) noexcept = default;
  OpCall &operator=(const OpCall &);
  OpCall &operator=(OpCall &&) noexcept;
  ~OpCall() = default;

  std::vector<CallParam> params;
  bool repeatable = false;
  uint64_t serial = 0;          // set by CallTable::put: tells this call from a later one at the same executor address
  StackId stack = kEmptyStack;  // taken at phase 1, the call the user's code made; travels to the launch
  // A fused compute+communication (MC2) op's communicator, its `group` argument: the kernel is numbered with the
  // communicator's collectives and carries its "comm" as HCCL's kernels do. Empty for every other op.
  std::string comm_group;
  int comm_group_param = -1;  // its index in `params`
  // Not decoded yet (params empty): the phase-1 call as it arrived, and the executor-cache keys it goes under.
  std::optional<RawCall> raw;
  ExecCacheKey keys[2];
  // Not decoded yet either: a hit of the executor cache, the call kept under `hit` with these tensor addresses
  // (null: the kept call's own).
  std::optional<ExecCacheKey> hit;
  std::vector<void *> hit_addrs;
  bool decoded() const { return !raw && !hit; }
};

// Recorded phase-1 calls by executor.
class CallTable {
 public:
  void put(const void *ex, OpCall call);
  // Phase 2's fast path asks this for every launch: with nothing recorded (the usual state when kernels are
  // filtered out) it is one atomic load. A record put by another thread is ordered by the host's own
  // hand-over of the executor from phase 1 to phase 2.
  bool contains(const void *ex);
  std::optional<OpCall> get(const void *ex);
  void erase(const void *ex);
  // Forgets the call recorded as `serial` only. Phase 2 frees a one-shot executor inside the real call, so
  // by the time its post-hook runs another thread's phase 1 may have got the same address for a new op.
  void erase_if(const void *ex, uint64_t serial);
  template <typename F>
  void update(const void *ex, F &&f) {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = calls_.find(ex);
    if (it != calls_.end()) f(it->second);
  }
  // The call recorded as `decoded.serial`, decoded on the thread of phase 2 (nothing if another took its place).
  // What changed meanwhile stays: the repeatable mark.
  void replace_undecoded(const void *ex, const OpCall &decoded);

 private:
  using Map = std::unordered_map<const void *, OpCall>;
  void drop(Map::iterator it);
  // Nodes of calls forgotten, for the next put: phase 1 records on one thread (torch_npu's Python thread) and phase 2
  // forgets on another (its task queue), where a node made on one and freed on the other costs the allocator's slow
  // path every time.
  static constexpr size_t kSpareNodes = 64;
  std::mutex mu_;
  Map calls_;
  std::vector<Map::node_type> spare_;
  std::atomic<size_t> size_{0};
  uint64_t serial_ = 0;
};

struct ExecCacheKeyHash {
  size_t operator()(const ExecCacheKey &k) const { return k.a ^ (k.b * 0x9e3779b97f4a7c15ull) ^ k.kind; }
};

// Calls recorded for phase-1 executors the runtime cached, by cache key. Bounded: past the limit the
// table starts over, and hits on forgotten keys are launches without arguments.
class KeptCalls {
 public:
  void put(const ExecCacheKey &key, const OpCall &call);
  std::optional<OpCall> get(const ExecCacheKey &key);

 private:
  static constexpr size_t kLimit = 1 << 16;
  std::mutex mu_;
  std::unordered_map<ExecCacheKey, OpCall, ExecCacheKeyHash> calls_;
};

// Tensor `index` of a call in the executor cache's order (present tensors in declaration order, list
// members one by one) now lives at `addr`.
void bind_cached_tensor(OpCall &c, size_t index, void *addr);

}  // namespace msprobe::shim
