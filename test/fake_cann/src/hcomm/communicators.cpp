// Communicators (libhcomm.so of CANN 9.x; libhccl.so of 8.x): across the rank processes of one machine (one process per
// rank, as torch_npu and MindSpore run them) and across the threads of one process (one device and rank per thread, as
// CANN's HCCL samples run them: a rank's rendezvous and liveness lock are its own open file, whichever thread holds
// it). HcclCommInitAll makes one communicator per device of a list in one call. The collectives are hccl.cpp's: host
// calls check their arguments with HCCL's error codes and enqueue the collective on the caller's stream; it runs later
// on that stream's worker, so results are valid after a stream synchronization and failures are reported there.
//
// Rendezvous names (files in /dev/shm, present only while ranks are joining):
//   HcclCommInitRootInfo(Config): fakehccl-r<id>, <id> made by HcclGetRootInfo from pid, time and randomness
//   HcclCommInitClusterInfo:      fakehccl-c<16 hex digits: FNV-1a 64 of the rank table's realpath>
//   HcclCreateSubCommConfig:      <global's>.s<subCommId>, or <global's>.n<FNV-1a 64 of the config's name>
//   HcclSend / HcclRecv:          <communicator's>.p<src>-<dst>, one per direction, joined at the first transfer
// Communicator names (HcclGetCommName), as real HCCL gives them: the root info's identifier (<id>) or the config's
// hcclCommName; "hccl_world_group" for a rank table; "{global's name}_sub_{subCommId}" or the config's
// hcclCommName for a sub-communicator. Every member of a communicator gets the same name.
// Timeouts (whole seconds > 0, default 120): HCCL_CONNECT_TIMEOUT bounds the rendezvous,
// HCCL_EXEC_TIMEOUT bounds each wait for peers inside a collective. Read when a communicator is created.
// Stand-in knob: FAKE_HCCL_SLOT_BYTES sets the per-rank staging slot (data moves in chunks of it).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "api.h"
#include "comm.h"
#include "fakecann/rt_internal.h"
#include "fakecann/stream.h"
#include "hccl/hccl.h"
#include "rank_table.h"
#include "runtime/dev.h"
#include "segment.h"

using namespace fakecann;
using namespace fakecann::hccl;

namespace {

constexpr char kRootInfoMagic[] = "fakehccl-rootinfo-v1:";
constexpr int kDefaultTimeoutS = 120;

std::mutex g_mu;
// Leaked on purpose: stream tasks may still hold communicators while static destructors run.
auto *g_comms = new std::map<const void *, std::shared_ptr<Comm>>;

HcclResult fail(HcclResult r, const std::string &msg, bool log = false) {
  set_error_message(msg);
  if (log) std::fprintf(stderr, "[fake_cann] %s\n", msg.c_str());
  return r;
}

int timeout_from_env(const char *name) {
  const char *v = std::getenv(name);
  if (v == nullptr || *v == '\0') return kDefaultTimeoutS;
  char *end = nullptr;
  long s = std::strtol(v, &end, 10);
  // 0 would mean "wait forever" on some HCCL versions; the stand-in never hangs, so it keeps the default.
  if (end == v || *end != '\0' || s <= 0) return kDefaultTimeoutS;
  return (int)std::min<long>(s, INT_MAX / 1000);
}

// Real HCCL first asks the runtime for the current device and fails with HCCL_E_RUNTIME without one.
HcclResult require_device(const char *api) {
  if (current_device() < 0)
    return fail(HCCL_E_RUNTIME, std::string(api) + ": no current device (call aclrtSetDevice first)");
  return HCCL_SUCCESS;
}

std::shared_ptr<Comm> find_comm(HcclComm comm) {
  std::lock_guard<std::mutex> lk(g_mu);
  auto it = g_comms->find(comm);
  return it == g_comms->end() ? nullptr : it->second;
}

// A communicator named `ident` (HcclGetCommName) that meets its peers at the rendezvous `name`.
struct NewComm {
  std::string name, ident;
  uint32_t nranks = 0, rank = 0;
  bool from_cluster = false, is_sub = false;
};

HcclResult create_comm(const char *api, const NewComm &n, HcclComm *comm) {
  int32_t device = current_device();
  {
    std::lock_guard<std::mutex> lk(g_mu);
    for (auto &[h, c] : *g_comms) {
      if (n.from_cluster && c->from_cluster && c->device == device)  // real HCCL: one rank-table comm per device
        return fail(HCCL_E_UNAVAIL, std::string(api) + ": device " + std::to_string(device) +
                                        " already has a communicator from a rank table");
      if (c->device == device && c->ident == n.ident)  // names are unique in a device's context
        return fail(HCCL_E_PARA, std::string(api) + ": a communicator named '" + n.ident + "' already exists");
    }
  }
  auto c = std::make_shared<Comm>();
  c->name = n.name;
  c->ident = n.ident;
  c->is_sub = n.is_sub;
  c->device = device;
  c->from_cluster = n.from_cluster;
  c->exec_timeout_s = timeout_from_env("HCCL_EXEC_TIMEOUT");
  c->connect_timeout_s = timeout_from_env("HCCL_CONNECT_TIMEOUT");
  std::string err;
  HcclResult r = Segment::join(n.name, n.nranks, n.rank, c->connect_timeout_s, &c->seg, &err);
  if (r != HCCL_SUCCESS)
    return fail(r,
                std::string(api) + ": rank " + std::to_string(n.rank) + " of " + std::to_string(n.nranks) + ": " + err,
                r == HCCL_E_TIMEOUT || r == HCCL_E_SYSCALL || r == HCCL_E_MEMORY || r == HCCL_E_INTERNAL);
  std::lock_guard<std::mutex> lk(g_mu);
  (*g_comms)[c.get()] = c;
  *comm = c.get();
  return HCCL_SUCCESS;
}

// A configuration made by HcclCommConfigInit (its reserved bytes carry the magic word) with a name that fits;
// `*name` gets hcclCommName ("" when not set).
HcclResult check_config(const char *api, const HcclCommConfig *config, std::string *name) {
  if (config == nullptr) return fail(HCCL_E_PTR, std::string(api) + ": config is null");
  uint32_t magic = 0;
  std::memcpy(&magic, config->reserved + sizeof(size_t), sizeof(magic));
  if (magic != HCCL_COMM_CONFIG_MAGIC_WORD)
    return fail(HCCL_E_PARA, std::string(api) + ": config was not initialized by HcclCommConfigInit");
  const void *nul = std::memchr(config->hcclCommName, '\0', COMM_NAME_MAX_LENGTH);
  if (nul == nullptr)
    return fail(HCCL_E_PARA, std::string(api) + ": hcclCommName is longer than " +
                                 std::to_string(COMM_NAME_MAX_LENGTH - 1) + " characters");
  name->assign(config->hcclCommName, static_cast<const char *>(nul));
  return HCCL_SUCCESS;
}

bool parse_root_info(const HcclRootInfo *info, std::string *id) {
  const char *p = info->internal;
  size_t magic_len = sizeof(kRootInfoMagic) - 1;
  if (std::strncmp(p, kRootInfoMagic, magic_len) != 0) return false;
  const void *nul = std::memchr(p, '\0', HCCL_ROOT_INFO_BYTES);
  if (nul == nullptr) return false;
  id->assign(p + magic_len, static_cast<const char *>(nul));
  if (id->empty() || id->size() > 64) return false;
  for (char ch : *id)
    if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || ch == '-')) return false;
  return true;
}

uint64_t fnv1a64(const std::string &s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : s) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return h;
}

// HcclCommInitRootInfo(Config): `config` null for the first. Real HCCL names the communicator after the root info's
// identifier, which every member was handed, unless the config names it.
HcclResult init_root_info(const char *api, uint32_t nRanks, const HcclRootInfo *rootInfo, uint32_t rank,
                          const HcclCommConfig *config, HcclComm *comm) {
  if (HcclResult r = require_device(api)) return r;
  if (rootInfo == nullptr || comm == nullptr) return fail(HCCL_E_PTR, std::string(api) + ": rootInfo or comm is null");
  std::string name;
  if (config != nullptr)
    if (HcclResult r = check_config(api, config, &name)) return r;
  if (nRanks == 0 || nRanks > kMaxRanks)
    return fail(HCCL_E_PARA, std::string(api) + ": nRanks " + std::to_string(nRanks) + " is out of range");
  if (rank >= nRanks)
    return fail(HCCL_E_PARA,
                std::string(api) + ": rank " + std::to_string(rank) + " >= nRanks " + std::to_string(nRanks));
  std::string id;
  if (!parse_root_info(rootInfo, &id))
    return fail(HCCL_E_PARA, std::string(api) + ": rootInfo was not produced by HcclGetRootInfo");
  return create_comm(api, NewComm{"fakehccl-r" + id, name.empty() ? id : name, nRanks, rank}, comm);
}

}  // namespace

namespace fakecann::hccl {

HcclResult api_fail(HcclResult r, const std::string &msg) { return fail(r, msg); }

std::shared_ptr<Comm> api_find(HcclComm comm) { return find_comm(comm); }

std::shared_ptr<Comm> api_find_named(const std::string &ident, int32_t device) {
  std::lock_guard<std::mutex> lk(g_mu);
  for (auto &[h, c] : *g_comms)
    if (c->ident == ident && c->device == device) return c;
  return nullptr;
}

}  // namespace fakecann::hccl
extern "C" {

HcclResult HcclGetRootInfo(HcclRootInfo *rootInfo) {
  if (HcclResult r = require_device("HcclGetRootInfo")) return r;
  if (rootInfo == nullptr) return fail(HCCL_E_PTR, "HcclGetRootInfo: rootInfo is null");
  std::random_device rd;
  uint64_t rnd = ((uint64_t)rd() << 32) ^ rd();
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch());
  std::memset(rootInfo->internal, 0, HCCL_ROOT_INFO_BYTES);
  std::snprintf(rootInfo->internal, HCCL_ROOT_INFO_BYTES, "%s%x-%llx-%016llx", kRootInfoMagic, (unsigned)getpid(),
                (unsigned long long)ns.count(), (unsigned long long)rnd);
  return HCCL_SUCCESS;
}

HcclResult HcclCommInitRootInfo(uint32_t nRanks, const HcclRootInfo *rootInfo, uint32_t rank, HcclComm *comm) {
  return init_root_info("HcclCommInitRootInfo", nRanks, rootInfo, rank, nullptr, comm);
}

HcclResult HcclCommInitRootInfoConfig(uint32_t nRanks, const HcclRootInfo *rootInfo, uint32_t rank,
                                      const HcclCommConfig *config, HcclComm *comm) {
  if (config == nullptr) return fail(HCCL_E_PTR, "HcclCommInitRootInfoConfig: config is null");
  return init_root_info("HcclCommInitRootInfoConfig", nRanks, rootInfo, rank, config, comm);
}

HcclResult HcclCreateSubCommConfig(HcclComm *comm, uint32_t rankNum, uint32_t *rankIds, uint64_t subCommId,
                                   uint32_t subCommRankId, HcclCommConfig *config, HcclComm *subComm) {
  const char *api = "HcclCreateSubCommConfig";
  constexpr uint64_t kNotMember = 0xFFFFFFFFu;  // with rankIds == NULL: this rank is in no sub-communicator
  if (HcclResult r = require_device(api)) return r;
  if (comm == nullptr || *comm == nullptr || subComm == nullptr)
    return fail(HCCL_E_PTR, std::string(api) + ": comm or subComm is null");
  std::shared_ptr<Comm> parent = find_comm(*comm);
  if (parent == nullptr) return fail(HCCL_E_PARA, std::string(api) + ": comm is not a live communicator");
  if (rankIds == nullptr && subCommId == kNotMember) {
    *subComm = nullptr;
    return HCCL_SUCCESS;
  }
  if (rankIds == nullptr) return fail(HCCL_E_PTR, std::string(api) + ": rankIds is null");
  if (parent->is_sub)
    return fail(HCCL_E_NOT_SUPPORT, std::string(api) + ": '" + parent->ident +
                                        "' is a sub-communicator; only global communicators can be split");
  std::string name;
  if (HcclResult r = check_config(api, config, &name)) return r;
  const uint32_t n = parent->seg->nranks();
  if (rankNum == 0 || rankNum > n)
    return fail(HCCL_E_PARA,
                std::string(api) + ": rankNum " + std::to_string(rankNum) + " is not in 1.." + std::to_string(n));
  for (uint32_t i = 0; i < rankNum; ++i) {
    if (rankIds[i] >= n)
      return fail(HCCL_E_PARA, std::string(api) + ": rankIds[" + std::to_string(i) +
                                   "] = " + std::to_string(rankIds[i]) + " is not a rank of the global communicator");
    if (i > 0 && rankIds[i] <= rankIds[i - 1])
      return fail(HCCL_E_PARA, std::string(api) + ": rankIds must be in ascending order without repeats");
  }
  if (subCommRankId >= rankNum || rankIds[subCommRankId] != parent->seg->rank())
    return fail(HCCL_E_PARA, std::string(api) + ": subCommRankId " + std::to_string(subCommRankId) +
                                 " is not the index of this rank (" + std::to_string(parent->seg->rank()) +
                                 ") in rankIds");
  NewComm nc;
  nc.nranks = rankNum;
  nc.rank = subCommRankId;
  nc.is_sub = true;
  if (name.empty()) {  // real HCCL: "{global communicator's name}_sub_{subCommId}", subCommId unique in it
    std::lock_guard<std::mutex> lk(g_mu);
    if (parent->sub_ids.count(subCommId))
      return fail(HCCL_E_PARA, std::string(api) + ": subCommId " + std::to_string(subCommId) +
                                   " was already used on '" + parent->ident + "'");
    nc.ident = parent->ident + "_sub_" + std::to_string(subCommId);
    nc.name = parent->name + ".s" + std::to_string(subCommId);
  } else {
    char hex[24];
    std::snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)fnv1a64(name));
    nc.ident = name;
    nc.name = parent->name + ".n" + hex;
  }
  if (HcclResult r = create_comm(api, nc, subComm)) return r;
  if (name.empty()) {
    std::lock_guard<std::mutex> lk(g_mu);
    parent->sub_ids.insert(subCommId);
  }
  return HCCL_SUCCESS;
}

HcclResult HcclGetCommName(HcclComm comm, char *commName) {
  if (comm == nullptr || commName == nullptr) return fail(HCCL_E_PTR, "HcclGetCommName: comm or commName is null");
  auto c = find_comm(comm);
  if (c == nullptr) return fail(HCCL_E_PARA, "HcclGetCommName: not a live communicator");
  const size_t n = std::min<size_t>(c->ident.size(), COMM_NAME_MAX_LENGTH - 1);
  std::memcpy(commName, c->ident.data(), n);
  commName[n] = '\0';
  return HCCL_SUCCESS;
}

HcclResult HcclCommInitClusterInfo(const char *clusterInfo, uint32_t rank, HcclComm *comm) {
  const char *api = "HcclCommInitClusterInfo";
  if (HcclResult r = require_device(api)) return r;
  if (clusterInfo == nullptr || comm == nullptr)
    return fail(HCCL_E_PTR, std::string(api) + ": clusterInfo or comm is null");
  char *real = realpath(clusterInfo, nullptr);
  if (real == nullptr)  // real HCCL: a rank table that cannot be loaded is an internal error
    return fail(HCCL_E_INTERNAL, std::string(api) + ": cannot find the rank table '" + clusterInfo + "'");
  std::string path(real);
  std::free(real);
  RankTable table;
  std::string err;
  if (HcclResult r = load_rank_table(path, &table, &err))
    return fail(r == HCCL_E_OPEN_FILE_FAILURE ? HCCL_E_INTERNAL : HCCL_E_PARA, std::string(api) + ": " + err);
  uint32_t n = (uint32_t)table.ranks.size();
  if (n > kMaxRanks) return fail(HCCL_E_PARA, std::string(api) + ": too many ranks in the rank table");
  if (rank >= n)
    return fail(HCCL_E_PARA, std::string(api) + ": rank " + std::to_string(rank) + " is not in the rank table (" +
                                 std::to_string(n) + " ranks)");
  char name[40];
  std::snprintf(name, sizeof(name), "fakehccl-c%016llx", (unsigned long long)fnv1a64(path));
  // Real HCCL's name for the communicator of a rank table is HCCL_WORLD_GROUP.
  NewComm nc{name, "hccl_world_group", n, rank};
  nc.from_cluster = true;
  return create_comm(api, nc, comm);
}

HcclResult HcclGetRankSize(HcclComm comm, uint32_t *rankSize) {
  if (comm == nullptr || rankSize == nullptr) return fail(HCCL_E_PTR, "HcclGetRankSize: comm or rankSize is null");
  auto c = find_comm(comm);
  if (c == nullptr) return fail(HCCL_E_PARA, "HcclGetRankSize: not a live communicator");
  *rankSize = c->seg->nranks();
  return HCCL_SUCCESS;
}

HcclResult HcclGetRankId(HcclComm comm, uint32_t *rank) {
  if (comm == nullptr || rank == nullptr) return fail(HCCL_E_PTR, "HcclGetRankId: comm or rank is null");
  auto c = find_comm(comm);
  if (c == nullptr) return fail(HCCL_E_PARA, "HcclGetRankId: not a live communicator");
  *rank = c->seg->rank();
  return HCCL_SUCCESS;
}

// One process, one communicator per device (hcomm op_base HcclCommInitAll): ranks in the order of `devices`, each
// made on a thread of its own on its device, as ranks of one root info; any failure destroys the ones made.
HcclResult HcclCommInitAll(uint32_t ndev, int32_t *devices, HcclComm *comms) {
  const char *api = "HcclCommInitAll";
  if (HcclResult r = require_device(api)) return r;
  if (ndev == 0 || ndev > kMaxRanks) return fail(HCCL_E_PARA, std::string(api) + ": ndev is 0 or too large");
  if (comms == nullptr || devices == nullptr) return fail(HCCL_E_PTR, std::string(api) + ": comms or devices is null");
  std::set<int32_t> distinct(devices, devices + ndev);
  if (distinct.size() != ndev) return fail(HCCL_E_PARA, std::string(api) + ": a device is listed twice");
  HcclRootInfo root;
  if (HcclResult r = HcclGetRootInfo(&root)) return r;
  std::vector<HcclResult> results(ndev, HCCL_SUCCESS);
  std::vector<std::thread> threads;
  for (uint32_t i = 0; i < ndev; ++i) {
    comms[i] = nullptr;
    threads.emplace_back([&, i] {
      if (rtSetDevice(devices[i]) != 0) {
        results[i] = HCCL_E_RUNTIME;
        return;
      }
      results[i] = init_root_info(api, ndev, &root, i, nullptr, &comms[i]);
      rtDeviceReset(devices[i]);
    });
  }
  for (std::thread &t : threads) t.join();
  if (std::all_of(results.begin(), results.end(), [](HcclResult r) { return r == HCCL_SUCCESS; })) return HCCL_SUCCESS;
  for (uint32_t i = 0; i < ndev; ++i)
    if (comms[i] != nullptr) HcclCommDestroy(comms[i]), comms[i] = nullptr;
  return fail(HCCL_E_INTERNAL, std::string(api) + ": a communicator could not be made");
}

HcclResult HcclCommDestroy(HcclComm comm) {
  if (comm == nullptr) return fail(HCCL_E_PTR, "HcclCommDestroy: comm is null");
  std::shared_ptr<Comm> c;
  {
    std::lock_guard<std::mutex> lk(g_mu);
    auto it = g_comms->find(comm);
    if (it == g_comms->end()) return fail(HCCL_E_PARA, "HcclCommDestroy: not a live communicator");
    c = std::move(it->second);
    g_comms->erase(it);
  }
  // Let enqueued collectives finish first (each is bounded by HCCL_EXEC_TIMEOUT per wait); if they
  // still run after that, the last one releases the shared state.
  std::unique_lock<std::mutex> lk(c->inflight_mu);
  c->inflight_cv.wait_for(lk, std::chrono::seconds(c->exec_timeout_s + 5), [&] { return c->inflight == 0; });
  return HCCL_SUCCESS;
}

const char *HcclGetErrorString(HcclResult code) {
  // The texts of real HCCL (hccl_types.h comments), including its "unknow error".
  switch (code) {
    case HCCL_SUCCESS: return "no error";
    case HCCL_E_PARA: return "parameter error";
    case HCCL_E_PTR: return "empty pointer";
    case HCCL_E_MEMORY: return "memory error";
    case HCCL_E_INTERNAL: return "internal error";
    case HCCL_E_NOT_SUPPORT: return "not support feature";
    case HCCL_E_NOT_FOUND: return "not found specific resource";
    case HCCL_E_UNAVAIL: return "resource unavailable";
    case HCCL_E_SYSCALL: return "call system interface error";
    case HCCL_E_TIMEOUT: return "timeout";
    case HCCL_E_OPEN_FILE_FAILURE: return "open file fail";
    case HCCL_E_TCP_CONNECT: return "tcp connect fail";
    case HCCL_E_ROCE_CONNECT: return "roce connect fail";
    case HCCL_E_TCP_TRANSFER: return "tcp transfer fail";
    case HCCL_E_ROCE_TRANSFER: return "roce transfer fail";
    case HCCL_E_RUNTIME: return "call runtime api fail";
    case HCCL_E_DRV: return "call driver api fail";
    case HCCL_E_PROFILING: return "call profiling api fail";
    case HCCL_E_CCE: return "call cce api fail";
    case HCCL_E_NETWORK: return "call network api fail";
    case HCCL_E_AGAIN: return "try again";
    case HCCL_E_REMOTE: return "error cqe";
    case HCCL_E_SUSPENDING: return "error communicator suspending";
    case HCCL_E_OPRETRY_FAIL: return "retry constraint";
    case HCCL_E_OOM: return "out of memory";
    case HCCL_E_IN_STATUS: return "The error information is in the status.";
    default: return "unknow error";
  }
}

}  // extern "C"
