// Which rank folder a kernel goes to (spec §4; issues 39 and 40), decided under the session's lock as it counts each
// launch:
//   1. RANK_ID, then RANK, when set: the process's rank, for every kernel;
//   2. else the rank a communicator gave the launching thread's device (HcclCommInitRootInfo and friends on that
//      thread, HcclCommInitAll for each of its devices): a process that drives several devices, a thread per device as
//      CANN's HCCL samples run, writes one folder per rank;
//   3. else, once the process has set more than one device, the device's own number;
//   4. else none yet ("rank"): a process on one device, before its communicator exists. When the communicator comes,
//      its rank is adopted for what was recorded so far (the session renames those folders), so that one process on
//      one device writes one rank folder, its kernels before HCCL's initialisation included.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <set>

namespace msprobe::shim {

class RankMap {
 public:
  // The calling thread set `device` as its current one (aclrtSetDevice, a context's device).
  void thread_device(int32_t device);
  // The rank of a launch made now on the calling thread; records that a launch went without one.
  std::optional<uint32_t> of_launch() {
    // Inline for the common process (one device, or ranks from the environment): no thread's device to look up.
    if (!environment_read_ || !device_rank_.empty() || devices_.size() > 1) return of_thread_launch();
    return without_thread_device();
  }
  // A communicator gave the calling thread's device `rank` (device -1: the calling thread's). True when kernels were
  // recorded without a rank before and this rank is to be adopted for them (once, in a process on one device).
  bool communicator_rank(uint32_t rank, int32_t device = -1);
  // The rank every kernel of the process has (RANK_ID / RANK, or a process on one device once it has one): what the
  // MSPROBE_RANK filter is decided on ahead of the launches. nullopt when not known, or when it differs by thread.
  std::optional<uint32_t> process_rank() const {
    if (env_rank_) return env_rank_;
    return devices_.size() > 1 ? std::nullopt : single_rank_;
  }
  // The rank adopted for the kernels recorded without one (see communicator_rank).
  std::optional<uint32_t> adopted() const { return adopted_; }

 private:
  void resolve_environment();
  std::optional<uint32_t> of_thread_launch();  // of_launch() by the calling thread's device
  // The rank when no thread's device decides it (rules 1 and 4); records a launch that has none.
  std::optional<uint32_t> without_thread_device() {
    if (env_rank_) return env_rank_;
    if (single_rank_) return single_rank_;
    unranked_launches_ = true;
    return std::nullopt;
  }
  bool environment_read_ = false;
  std::optional<uint32_t> env_rank_;
  std::set<int32_t> devices_;
  std::map<int32_t, uint32_t> device_rank_;
  std::optional<uint32_t> single_rank_;  // a process on one device: its communicator's rank
  std::optional<uint32_t> adopted_;
  bool unranked_launches_ = false;
};

// The rank given in RANK_ID, then RANK (a bad value is said once and ignored).
std::optional<uint32_t> rank_from_environment();

}  // namespace msprobe::shim
