// torch_npu's executor cache (reference/cann_abi.md §6.4): on a hit torch_npu calls neither phase 1 nor
// aclCreateTensor, only phase 2 with an executor that libnnopbase hands out for that hit and that runs the
// cached kernel on the tensor addresses the host reported. These hooks follow that protocol per thread, as
// the runtime does: the keys set before phase 1 (the phase 1 that follows is kept under them), the
// addresses reported since InitPTACacheThreadLocal, and the executor of a hit, recorded as the kept call
// bound to those addresses. Addresses reported after the hit (until the next Init/UnInit) are its too.
//
// torch_npu finds these helpers with dlsym on its libopapi handle, so they are answered through the dlsym
// hook only: they are not exported, and a runtime without them keeps looking as if it had none.
#include <pthread.h>

#include <mutex>
#include <new>
#include <vector>

#include "aclnn/acl_meta.h"
#include "shim/aclnn/aclnn_capture.h"
#include "shim/capture/session.h"
#include "shim/hooks/hook.h"

using namespace msprobe::shim;

namespace {

// What the host reported on this thread since InitPTACacheThreadLocal (the runtime's list of the thread).
struct ThreadState {
  std::vector<void *> addrs;
  const void *hit = nullptr;  // the executor a lookup returned since; later addresses belong to it
};

thread_local ThreadState *t_state __attribute__((tls_model("initial-exec"))) = nullptr;

pthread_key_t g_cleanup;
std::once_flag g_cleanup_once;
bool g_cleanup_ok = false;

// The thread's state, made on first use and freed when the thread ends; null if it cannot be made.
ThreadState *thread_state() {
  if (t_state != nullptr) return t_state;
  std::call_once(g_cleanup_once, [] {
    g_cleanup_ok = pthread_key_create(&g_cleanup, [](void *p) {
                     t_state = nullptr;
                     delete static_cast<ThreadState *>(p);
                   }) == 0;
  });
  if (!g_cleanup_ok) return nullptr;
  auto *s = new (std::nothrow) ThreadState;
  if (s == nullptr) return nullptr;
  if (pthread_setspecific(g_cleanup, s) != 0) {
    delete s;
    return nullptr;
  }
  return t_state = s;
}

// Init and UnInit both start over: a new lookup, no keys, no hit.
void start_over() {
  aclnn_capture().clear_cache_keys();
  if (ThreadState *s = thread_state()) {
    s->addrs.clear();
    s->hit = nullptr;
  }
}

void on_lookup(aclOpExecutor *executor, const ExecCacheKey &key) {
  if (executor == nullptr) return;  // a miss: phase 1 follows, under the keys the host set
  ThreadState *s = thread_state();
  if (s == nullptr) return;
  aclnn_capture().on_cache_hit(executor, key, s->addrs.data(), s->addrs.size());
  s->hit = executor;
}

// InitPTACacheThreadLocal and UnInitPTACacheThreadLocal.
template <typename Real>
void forward_and_start_over(Real real) {
  if (real) real();
  try {
    if (capture_enabled()) start_over();
  } catch (...) {
  }
}

// PTAGetExecCache and PTAFindExecCache: the lookup under the key `key_of()` makes (only when capturing).
template <typename Real, typename KeyOf, typename... Args>
aclOpExecutor *look_up(Real real, KeyOf key_of, Args... args) {
  if (!real) return nullptr;
  aclOpExecutor *ex = real(args...);
  try {
    if (capture_enabled()) on_lookup(ex, key_of());
  } catch (...) {
  }
  return ex;
}

}  // namespace

// The hooks of this family, one a line (shim/hooks/hook.h).
#define MSPROBE_PTA_CACHE_HOOKS(X) \
  X(InitPTACacheThreadLocal)       \
  X(UnInitPTACacheThreadLocal)     \
  X(SetPTAHashKey)                 \
  X(SetPTACacheHashKey)            \
  X(AddTensorAddrToCachedList)     \
  X(PTAGetExecCache)               \
  X(PTAFindExecCache)
MSPROBE_HOOK_SLOTS(MSPROBE_PTA_CACHE_HOOKS)

MSPROBE_HOOK void InitPTACacheThreadLocal(void) { forward_and_start_over(MSPROBE_REAL(InitPTACacheThreadLocal)); }

MSPROBE_HOOK void UnInitPTACacheThreadLocal(void) { forward_and_start_over(MSPROBE_REAL(UnInitPTACacheThreadLocal)); }

MSPROBE_HOOK void SetPTAHashKey(uint64_t hash) {
  auto real = MSPROBE_REAL(SetPTAHashKey);
  if (real) real(hash);
  if (capture_enabled()) aclnn_capture().set_cache_key(ExecCacheKey::Hash, ExecCacheKey::of_hash(hash));
}

MSPROBE_HOOK void SetPTACacheHashKey(uint8_t *buf, size_t len) {
  auto real = MSPROBE_REAL(SetPTACacheHashKey);
  if (real) real(buf, len);
  if (capture_enabled()) aclnn_capture().set_cache_key(ExecCacheKey::Bytes, ExecCacheKey::of_bytes(buf, len));
}

MSPROBE_HOOK void AddTensorAddrToCachedList(void *addr) {
  auto real = MSPROBE_REAL(AddTensorAddrToCachedList);
  if (real) real(addr);
  try {
    if (!capture_enabled()) return;
    ThreadState *s = thread_state();
    if (s == nullptr) return;
    s->addrs.push_back(addr);
    if (s->hit != nullptr) aclnn_capture().on_cached_address(s->hit, s->addrs.size() - 1, addr);
  } catch (...) {
  }
}

MSPROBE_HOOK aclOpExecutor *PTAGetExecCache(uint64_t hash, uint64_t *workspaceSize) {
  return look_up(
      MSPROBE_REAL(PTAGetExecCache), [&] { return ExecCacheKey::of_hash(hash); }, hash, workspaceSize);
}

MSPROBE_HOOK aclOpExecutor *PTAFindExecCache(uint8_t *buf, size_t len, uint64_t *workspaceSize) {
  return look_up(
      MSPROBE_REAL(PTAFindExecCache), [&] { return ExecCacheKey::of_bytes(buf, len); }, buf, len, workspaceSize);
}

MSPROBE_HOOK_FAMILY(MSPROBE_PTA_CACHE_HOOKS, LookedUp)
