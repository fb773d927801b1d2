#include "shim/call/trampoline.h"

#include <atomic>

#include "shim/base/log.h"

// The pool's code lives in trampoline_<arch>.S; each entry reads its row of this table. Hidden: the assembly
// reaches it PC-relative, and nothing outside the shim may see it.
struct MsprobeTrampolineSlot {
  void *fn;  // Gate: the decide function; Prepend: the target. Written last (release), read first.
  void *user;
  uint64_t mode;  // 0 gate, 1 prepend, 2 around
  void *after;    // around: after()
};
static_assert(sizeof(MsprobeTrampolineSlot) == 32, "trampoline_*.S indexes the table with a shift by 5");

#if defined(__x86_64__) || defined(__aarch64__)
extern "C" {
__attribute__((visibility("hidden"))) MsprobeTrampolineSlot msprobe_trampoline_slots[msprobe::shim::kTrampolines];
__attribute__((visibility("hidden"))) extern char msprobe_trampoline_entries[];  // kTrampolines entries
}
#endif

namespace msprobe::shim {
namespace {

#if defined(__x86_64__)
constexpr int kEntryBytes = 16;
#elif defined(__aarch64__)
constexpr int kEntryBytes = 8;
#endif

std::atomic<int> g_used{0};

void *make(void *fn, void *user, uint64_t mode, void *after = nullptr) noexcept {
#if defined(__x86_64__) || defined(__aarch64__)
  if (fn == nullptr) return nullptr;
  int i = g_used.fetch_add(1, std::memory_order_relaxed);
  if (i >= kTrampolines) {
    g_used.store(kTrampolines, std::memory_order_relaxed);
    static std::atomic<bool> said{false};
    if (!said.exchange(true)) log_info("all %d trampolines in use; further wrappers use libffi closures", kTrampolines);
    return nullptr;
  }
  MsprobeTrampolineSlot &s = msprobe_trampoline_slots[i];
  s.user = user;
  s.mode = mode;
  s.after = after;
  // The entry's address reaches other threads through a GOT slot or a dlsym answer, with no ordering of its
  // own: fn is published with release, and the aarch64 entry reads it with acquire (x86-64 keeps store order).
  __atomic_store_n(&s.fn, fn, __ATOMIC_RELEASE);
  return msprobe_trampoline_entries + static_cast<long>(i) * kEntryBytes;
#else
  (void)fn;
  (void)user;
  (void)mode;
  (void)after;
  return nullptr;
#endif
}

}  // namespace

void *make_gate_trampoline(TrampolineDecide decide, void *user) noexcept {
  return make(reinterpret_cast<void *>(decide), user, 0);
}

void *make_prepend_trampoline(void *target, void *user) noexcept { return make(target, user, 1); }

void *make_around_trampoline(TrampolineDecide decide, TrampolineAfter after, void *user) noexcept {
  if (after == nullptr) return nullptr;
  return make(reinterpret_cast<void *>(decide), user, 2, reinterpret_cast<void *>(after));
}

int trampolines_used() noexcept { return g_used.load(std::memory_order_relaxed); }

}  // namespace msprobe::shim
