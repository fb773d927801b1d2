#include "shim/capture/communicators.h"

#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>

#include "shim/base/reentry.h"
#include "shim/capture/capture_call.h"
#include "shim/device/runtime_api.h"

namespace msprobe::shim::communicators {
namespace {

constexpr int32_t kHcclSuccess = 0;
constexpr size_t kCommNameMax = 128;  // COMM_NAME_MAX_LENGTH (hccl_types.h)

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

std::mutex g_mu;
// Leaked on purpose: hooks may run while static destructors do.
auto *g_comms = new std::unordered_map<Handle, CommState>;
// Name (or key) -> its place in the order the process met them (Issue::label); members made in one process (a thread
// per device) share their communicator's name and so its number. Under g_mu.
auto *g_name_order = new std::unordered_map<std::string, uint64_t>;

uint64_t name_order(const std::string &name) {
  return g_name_order->try_emplace(name, g_name_order->size()).first->second;
}

// One of the communicator queries, nullopt when it is missing or fails.
std::optional<uint32_t> query(runtime::Function<int32_t (*)(void *, uint32_t *)> &fn, Handle comm) {
  auto get = fn.get();
  if (get == nullptr || comm == nullptr) return std::nullopt;
  uint32_t v = 0;
  ReentryGuard guard;
  if (get(comm, &v) != kHcclSuccess) return std::nullopt;
  return v;
}

// Asks HCCL (outside the lock: these calls may take it) and fills in what it answers.
void describe(Handle comm, CommState &s) {
  s.described = true;
  s.rank = rank_of(comm);
  s.size = size_of(comm);
  auto get_name = runtime::HcclGetCommName.get();
  if (get_name != nullptr) {
    char name[kCommNameMax + 1] = {};
    ReentryGuard guard;
    if (get_name(comm, name) == kHcclSuccess && name[0] != '\0') s.name = std::string(name);
  }
}

Issue take_number(Handle comm, std::optional<uint32_t> peer, bool sends) {
  Issue is;
  is.comm = comm;
  if (comm == nullptr) return is;  // HCCL refuses the call
  bool need_describe = false;
  {
    std::lock_guard<std::mutex> lk(g_mu);
    auto it = g_comms->find(comm);
    need_describe = it == g_comms->end() || !it->second.described;
  }
  CommState fresh;
  if (need_describe) describe(comm, fresh);  // a handle the shim did not see made
  std::lock_guard<std::mutex> lk(g_mu);
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
  is.label = "comm" + std::to_string(name_order(name));
  format::CommInfo c;
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

// The handle of the communicator named `group`: one the shim knows by its name or key, else HCCL's answer.
Handle handle_of(std::string_view group) {
  {
    std::lock_guard<std::mutex> lk(g_mu);
    for (const auto &[comm, s] : *g_comms)
      if ((s.name && *s.name == group) || (!s.name && s.key == group)) return comm;
  }
  auto by_group = runtime::HcomGetCommHandleByGroup.get();
  if (by_group == nullptr) return nullptr;
  const std::string name(group);
  void *comm = nullptr;
  ReentryGuard guard;
  return by_group(name.c_str(), &comm) == kHcclSuccess ? comm : nullptr;
}

}  // namespace

std::optional<uint32_t> size_of(Handle comm) { return query(runtime::HcclGetRankSize, comm); }
std::optional<uint32_t> rank_of(Handle comm) { return query(runtime::HcclGetRankId, comm); }

void made(Handle comm, std::string key, std::optional<std::vector<uint32_t>> ranks) {
  CommState s;
  s.key = std::move(key);
  s.ranks = std::move(ranks);
  describe(comm, s);
  std::lock_guard<std::mutex> lk(g_mu);
  const std::string &name = s.name ? *s.name : s.key;
  if (!name.empty()) name_order(name);
  (*g_comms)[comm] = std::move(s);
}

void destroyed(Handle comm) noexcept {
  guarded(Problem::CommunicatorNotKept, [&] {
    std::lock_guard<std::mutex> lk(g_mu);
    g_comms->erase(comm);
  });
}

std::optional<std::vector<uint32_t>> members(Handle comm) {
  std::lock_guard<std::mutex> lk(g_mu);
  auto it = g_comms->find(comm);
  return it == g_comms->end() ? std::nullopt : it->second.ranks;
}

std::string key_of(Handle comm) {
  std::lock_guard<std::mutex> lk(g_mu);
  auto it = g_comms->find(comm);
  return it == g_comms->end() ? std::string() : it->second.key;
}

Issue take(Handle comm, std::optional<uint32_t> peer, bool sends) noexcept {
  Issue is;
  guarded(Problem::CommunicatorNotKept, [&] { is = take_number(comm, peer, sends); });
  return is;
}

Issue take_by_group(std::string_view group) noexcept {
  Issue is;
  guarded(Problem::CommunicatorNotKept, [&] {
    if (Handle comm = handle_of(group)) is = take_number(comm, std::nullopt, false);
  });
  return is;
}

void give_back(const Issue &is) noexcept {
  if (is.comm == nullptr) return;
  guarded(Problem::CommunicatorNotKept, [&] {
    std::lock_guard<std::mutex> lk(g_mu);
    auto it = g_comms->find(is.comm);
    if (it == g_comms->end()) return;
    uint64_t &next = is.pair ? it->second.next_pair_seq[*is.pair] : it->second.next_seq;
    if (next == is.taken + 1) next = is.taken;  // no later call took a number since
  });
}

}  // namespace msprobe::shim::communicators
