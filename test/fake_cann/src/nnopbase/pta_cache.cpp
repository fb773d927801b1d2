// libnnopbase: the executor cache torch_npu uses to skip phase 1 (reference/cann_abi.md §6.4), with the
// helpers op-plugin's hit_cache/hit_cache_v2 dlsym: InitPTACacheThreadLocal, SetPTAHashKey /
// SetPTACacheHashKey, PTAGetExecCache / PTAFindExecCache, AddTensorAddrToCachedList, CanUsePTACache, and
// the huge-memory helpers around phase 1 (their one effect here: an executor made between InitHugeMemThreadLocal and
// UnInitHugeMemThreadLocal cannot be made repeatable, as in nnopbase).
//
// Protocol, as in nnopbase (opbase src/nnopbase/common/utils/op_cache.cpp):
// * CanUsePTACache(api) is false when the cache is disabled (DISABLE_L2_CACHE set); otherwise it records
//   `api` on the thread. InitPTACacheThreadLocal starts a lookup on the thread: keys and the reported
//   address list are reset.
// * The host reports the storage address of every tensor argument with AddTensorAddrToCachedList (torch_npu
//   does it while hashing the arguments, i.e. before the lookup): one per non-null tensor, in declaration
//   order, tensor lists member by member.
// * SetPTAHashKey(hash) / SetPTACacheHashKey(buf, len) set the key; PTAGetExecCache(hash) /
//   PTAFindExecCache(buf, len) look it up. A hit returns a NEW executor each time (nnopbase hands out a
//   per-hit wrapper of the cached one) that runs the cached kernel with the addresses reported on the
//   thread; its phase 2 frees it, like any one-shot executor. Neither phase 1 nor aclCreateTensor is
//   called on a hit.
// * A miss leaves the key set: the phase 1 that follows on the same thread stores its executor under it
//   (one executor per key). That executor is still freed by its own phase 2; the cache keeps its own copy,
//   usable once that first phase 2 has run (nnopbase records the launch in phase 2).
// * The cache is per thread (nnopbase's OpExecCacheManager is thread_local): torch_npu looks up, runs
//   phase 1 and stores on one thread. ACLNN_CACHE_LIMIT bounds each key space: a full hash-keyed cache
//   takes no more executors, a full byte-keyed one drops its least recently used entry.
//
// Addresses reported after a hit (before the next InitPTACacheThreadLocal / UnInitPTACacheThreadLocal)
// still reach that hit's executor: a host may report them either side of the lookup.
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "aclnn/acl_meta.h"
#include "fakecann/op_dump.h"
#include "fakecann/pta_cache.h"
#include "fakecann/stream.h"

#define FAKECANN_PTA_EXPORT extern "C" __attribute__((visibility("default")))

namespace fakecann::nn {

extern thread_local int t_huge_mem_depth;  // InitHugeMemThreadLocal scopes open on this thread

struct PtaEntry {
  ExecutorSpec spec;  // storages cleared: a hit runs at the addresses reported for it
  std::string api;    // the api the host named in CanUsePTACache when the entry was made
  std::atomic<bool> usable{false};
};

struct PtaAddresses {
  std::mutex mu;
  std::vector<void *> addrs;
};

struct PtaLink {
  std::shared_ptr<PtaEntry> entry;
  std::shared_ptr<PtaAddresses> hit;  // null for the phase-1 executor the entry was made from
};

namespace {

// nnopbase's default was not confirmed; big enough that a training loop never fills it.
constexpr size_t kDefaultLimit = 10000;

bool cache_disabled() {
  static const bool off = std::getenv("DISABLE_L2_CACHE") != nullptr;  // any value, read once as nnopbase does
  return off;
}

// nnopbase's CheckCacheable: no cache while DISABLE_L2_CACHE is set or any dump (data, overflow, exception) is
// in force (cann_dump.md §9): phase 1 then runs in full on every call, and nothing is stored or found.
bool cache_off() { return cache_disabled() || opdump::any_dump(); }

size_t cache_limit() {
  const char *s = std::getenv("ACLNN_CACHE_LIMIT");
  if (s == nullptr || *s == '\0') return kDefaultLimit;
  char *end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(s, &end, 10);
  if (errno != 0 || *end != '\0' || *s == '-') return kDefaultLimit;  // not a number: ignored
  return (size_t)v;
}

class ThreadCache {
 public:
  ThreadCache() : limit_(cache_limit()) {}

  std::shared_ptr<PtaEntry> find(uint64_t hash) {
    auto it = by_hash_.find(hash);
    return it == by_hash_.end() ? nullptr : it->second;
  }

  std::shared_ptr<PtaEntry> find(const std::string &key) {
    auto it = by_bytes_.find(key);
    if (it == by_bytes_.end()) return nullptr;
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->second;
  }

  // False when the entry went under neither key. An entry already stored and used stays; one whose
  // executor never reached phase 2 is replaced.
  bool store(uint64_t hash, const std::string *key, const std::shared_ptr<PtaEntry> &e) {
    bool stored = false;
    if (hash != 0) {
      auto it = by_hash_.find(hash);
      if (it != by_hash_.end() && !it->second->usable) {
        it->second = e;
        stored = true;
      } else if (it == by_hash_.end() && by_hash_.size() < limit_) {
        by_hash_.emplace(hash, e);
        stored = true;
      }
    }
    if (key != nullptr && limit_ > 0) {
      auto it = by_bytes_.find(*key);
      if (it != by_bytes_.end() && !it->second->second->usable) {
        it->second->second = e;
        lru_.splice(lru_.begin(), lru_, it->second);
        stored = true;
      } else if (it == by_bytes_.end()) {
        while (by_bytes_.size() >= limit_) {
          by_bytes_.erase(lru_.back().first);
          lru_.pop_back();
        }
        lru_.emplace_front(*key, e);
        by_bytes_.emplace(*key, lru_.begin());
        stored = true;
      }
    }
    return stored;
  }

 private:
  using Lru = std::list<std::pair<std::string, std::shared_ptr<PtaEntry>>>;
  size_t limit_;
  std::unordered_map<uint64_t, std::shared_ptr<PtaEntry>> by_hash_;
  Lru lru_;  // most recently used first
  std::unordered_map<std::string, Lru::iterator> by_bytes_;
};

struct ThreadState {
  bool in_lookup = false;  // between InitPTACacheThreadLocal and UnInitPTACacheThreadLocal
  uint64_t hash = 0;
  bool has_key = false;
  std::string key;
  std::string api;
  std::shared_ptr<PtaAddresses> addrs;  // reported since InitPTACacheThreadLocal (created on demand)
  std::shared_ptr<PtaLink> making;      // the link of the hit executor being created right now
  ThreadCache cache;

  PtaAddresses &addresses() {
    if (!addrs) addrs = std::make_shared<PtaAddresses>();
    return *addrs;
  }
  void reset_lookup() {
    hash = 0;
    has_key = false;
    key.clear();
    addrs.reset();  // a hit made before keeps its own list
  }
};

ThreadState &tls() {
  thread_local ThreadState s;
  return s;
}

aclOpExecutor *hit(const std::shared_ptr<PtaEntry> &e, uint64_t *workspaceSize) {
  ThreadState &t = tls();
  if (!e || !e->usable || e->api != t.api) return nullptr;  // another api under the same key: a collision
  t.addresses();
  t.making = std::make_shared<PtaLink>(PtaLink{e, t.addrs});
  aclOpExecutor *ex = nullptr;
  uint64_t size = 0;
  aclnnStatus rc = create_executor(e->spec, &size, &ex);
  t.making.reset();
  if (rc != ACLNN_SUCCESS) return nullptr;
  *workspaceSize = size;
  return ex;
}

}  // namespace

std::shared_ptr<PtaLink> pta_link_new_executor(const ExecutorSpec &spec) {
  try {
    ThreadState &t = tls();
    if (t.making) return std::exchange(t.making, nullptr);
    if (!t.in_lookup || cache_off() || (t.hash == 0 && !t.has_key)) return nullptr;
    auto e = std::make_shared<PtaEntry>();
    e->spec = spec;
    for (Slot &s : e->spec.slots) std::fill(s.storages.begin(), s.storages.end(), nullptr);
    e->api = t.api;
    bool stored = t.cache.store(t.hash, t.has_key ? &t.key : nullptr, e);
    t.hash = 0;  // the key names this executor now
    t.has_key = false;
    t.key.clear();
    return stored ? std::make_shared<PtaLink>(PtaLink{e, nullptr}) : nullptr;
  } catch (...) {
    return nullptr;  // not cached: the executor works as an ordinary one
  }
}

aclnnStatus pta_before_launch(PtaLink &link, std::vector<Slot> &slots, const char *op) {
  if (!link.hit) return ACLNN_SUCCESS;
  std::vector<void *> addrs;
  {
    std::lock_guard<std::mutex> lk(link.hit->mu);
    addrs = link.hit->addrs;
  }
  size_t need = 0;
  for (const Slot &s : slots)
    if (s.present) need += s.views.size();
  if (addrs.size() != need) {
    set_error_message(std::string("aclnn") + op + ": the cached executor has " + std::to_string(need) +
                      " tensors but " + std::to_string(addrs.size()) +
                      " addresses were reported with AddTensorAddrToCachedList");
    return ACLNN_ERR_PARAM_INVALID;
  }
  size_t k = 0;
  for (Slot &s : slots)
    if (s.present)
      for (TensorView &v : s.views) v.data = addrs[k++];
  return ACLNN_SUCCESS;
}

void pta_after_launch(PtaLink &link) {
  if (!link.hit && link.entry) link.entry->usable = true;
}

thread_local int t_huge_mem_depth = 0;

bool huge_mem_active() { return t_huge_mem_depth > 0; }

}  // namespace fakecann::nn

using fakecann::nn::tls;

FAKECANN_PTA_EXPORT int InitHugeMemThreadLocal(void * /*pool*/, bool /*flag*/) {
  ++fakecann::nn::t_huge_mem_depth;
  return 0;
}
FAKECANN_PTA_EXPORT void UnInitHugeMemThreadLocal(void * /*pool*/, bool /*flag*/) {
  if (fakecann::nn::t_huge_mem_depth > 0) --fakecann::nn::t_huge_mem_depth;
}
FAKECANN_PTA_EXPORT void ReleaseHugeMem(void * /*pool*/, bool /*flag*/) {}

FAKECANN_PTA_EXPORT bool CanUsePTACache(const char *api) {
  if (api == nullptr || fakecann::nn::cache_off()) return false;
  try {
    tls().api = api;
  } catch (...) {
    return false;
  }
  return true;
}

FAKECANN_PTA_EXPORT void InitPTACacheThreadLocal(void) {
  auto &t = tls();
  t.reset_lookup();
  t.in_lookup = true;
}

FAKECANN_PTA_EXPORT void UnInitPTACacheThreadLocal(void) {
  auto &t = tls();
  t.reset_lookup();
  t.in_lookup = false;
}

FAKECANN_PTA_EXPORT void SetPTAHashKey(uint64_t hash) { tls().hash = hash; }

FAKECANN_PTA_EXPORT void SetPTACacheHashKey(uint8_t *buf, size_t len) {
  auto &t = tls();
  try {
    t.has_key = buf != nullptr && len > 0;
    if (t.has_key) t.key.assign(reinterpret_cast<const char *>(buf), len);  // copied: the host reuses its buffer
  } catch (...) {
    t.has_key = false;
  }
}

FAKECANN_PTA_EXPORT void AddTensorAddrToCachedList(void *addr) {
  try {
    auto &a = tls().addresses();
    std::lock_guard<std::mutex> lk(a.mu);
    a.addrs.push_back(addr);
  } catch (...) {
  }
}

FAKECANN_PTA_EXPORT aclOpExecutor *PTAGetExecCache(uint64_t hash, uint64_t *workspaceSize) {
  if (workspaceSize == nullptr || hash == 0 || fakecann::nn::cache_off()) return nullptr;
  try {
    return fakecann::nn::hit(tls().cache.find(hash), workspaceSize);
  } catch (...) {
    return nullptr;
  }
}

FAKECANN_PTA_EXPORT aclOpExecutor *PTAFindExecCache(uint8_t *buf, size_t len, uint64_t *workspaceSize) {
  if (workspaceSize == nullptr || buf == nullptr || len == 0 || fakecann::nn::cache_off()) return nullptr;
  try {
    return fakecann::nn::hit(tls().cache.find(std::string(reinterpret_cast<const char *>(buf), len)), workspaceSize);
  } catch (...) {
    return nullptr;
  }
}
