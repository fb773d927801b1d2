// The HCCL communicators the process made, and the numbers that join a collective across ranks (issue 30,
// docs/format.md "comm"): each kernel that runs on a communicator (HCCL's collectives and transfers, the fused MC2
// kernels naming it by its group) takes the next number of that communicator, or of one (peer, direction) for a
// send or receive, whether or not it is captured, so that every member numbers the same calls. A call that fails gives
// its number back.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "format/comm_info.h"

namespace msprobe::shim::communicators {

using Handle = void *;  // an HcclComm

// A communicator was made: forget what an earlier one at the same address was, learn this one (HCCL is asked its
// name, this rank's place and the size). `key`: what every member derives the same way from what created it, used
// when HCCL names none; `ranks`: the global ranks of its members in comm-rank order, when known here.
void made(Handle comm, std::string key, std::optional<std::vector<uint32_t>> ranks);
// HcclCommDestroy succeeded: the address may be given to the next communicator.
void destroyed(Handle comm) noexcept;
std::optional<std::vector<uint32_t>> members(Handle comm);
std::string key_of(Handle comm);  // "" when the communicator is unknown
// HCCL's answers (HcclGetRankSize, HcclGetRankId), nullopt when it gives none.
std::optional<uint32_t> size_of(Handle comm);
std::optional<uint32_t> rank_of(Handle comm);

// One call's place in its communicator.
struct Issue {
  Handle comm = nullptr;
  std::optional<format::CommInfo> info;  // nullopt: the communicator has neither a name nor a key, or nothing was taken
  std::optional<std::pair<uint32_t, bool>> pair;
  uint64_t taken = 0;
  // "comm{n}": the communicator's name (or key) is the n-th the process met, from 0, at creation or else at its first
  // call. HCCL's names carry the run (root info: an address, a process, a time), so two runs of one program name the
  // same communicator differently; this does not. Empty with `info`.
  std::string label;
};

// The next number of `comm`'s collectives, or with `peer` of its transfers to (sends) or from that peer. Never throws
// (an Issue without info then).
Issue take(Handle comm, std::optional<uint32_t> peer = std::nullopt, bool sends = false) noexcept;
// The next number of the communicator named `group` (an MC2 kernel's argument: HcclGetCommName's name, or a key the
// shim made); HCCL's HcomGetCommHandleByGroup finds one the shim did not see made.
Issue take_by_group(std::string_view group) noexcept;
// The call failed: nothing was issued, the number is given back unless a later call took one since.
void give_back(const Issue &issue) noexcept;

}  // namespace msprobe::shim::communicators
