#include "shim/stacks/stack_unwind.h"

#include <dlfcn.h>
#include <execinfo.h>

#include <algorithm>
#include <atomic>
#include <mutex>

#include "shim/base/log.h"
#include "shim/base/symbols.h"

namespace msprobe::shim {
namespace {

using UnwBacktraceFn = int (*)(void **, int);
using UnwSetCachingPolicyFn = int (*)(void *, int);
using UnwFlushCacheFn = void (*)(void *, uintptr_t, uintptr_t);

// libunwind's per-architecture symbol names (libunwind-common.h: UNW_OBJ / UNW_ARCH_OBJ macros).
#if defined(__x86_64__)
#define MSPROBE_UNW_ARCH "x86_64"
#elif defined(__aarch64__)
#define MSPROBE_UNW_ARCH "aarch64"
#else
#define MSPROBE_UNW_ARCH ""
#endif
constexpr int kUnwCachePerThread = 2;  // UNW_CACHE_PER_THREAD

constinit std::atomic<int> g_requested{static_cast<int>(NativeUnwinder::Auto)};
constinit std::atomic<int> g_active{-1};  // resolved unwinder, -1 until chosen
constinit std::atomic<UnwBacktraceFn> g_unw_backtrace{nullptr};
constinit std::atomic<UnwFlushCacheFn> g_unw_flush{nullptr};
constinit std::atomic<void *> g_unw_address_space{nullptr};
constinit std::atomic<bool> g_libunwind_tried{false};
std::mutex g_load_mu;  // trivially constructible in glibc: no global constructor runs

// Loads libunwind once (under g_load_mu). RTLD_LOCAL keeps its _Unwind_* and backtrace out of the global scope.
void load_libunwind_locked() {
  if (g_libunwind_tried.load(std::memory_order_acquire)) return;
  void *h = real_dlopen("libunwind.so.8", RTLD_LAZY | RTLD_LOCAL);
  if (h != nullptr) {
    auto bt = reinterpret_cast<UnwBacktraceFn>(real_dlsym(h, "unw_backtrace"));
    void **as = static_cast<void **>(real_dlsym(h, "_UL" MSPROBE_UNW_ARCH "_local_addr_space"));
    auto policy = reinterpret_cast<UnwSetCachingPolicyFn>(real_dlsym(h, "_UL" MSPROBE_UNW_ARCH "_set_caching_policy"));
    auto flush = reinterpret_cast<UnwFlushCacheFn>(real_dlsym(h, "_U" MSPROBE_UNW_ARCH "_flush_cache"));
    if (bt != nullptr) {
      // A per-thread cache avoids contention between the host's threads (heaptrack does the same).
      if (as != nullptr && policy != nullptr) policy(*as, kUnwCachePerThread);
      if (as != nullptr && flush != nullptr) {
        g_unw_address_space.store(*as, std::memory_order_relaxed);
        g_unw_flush.store(flush, std::memory_order_relaxed);
      }
      g_unw_backtrace.store(bt, std::memory_order_release);
    } else {
      log_warn("libunwind.so.8 has no unw_backtrace; native stacks use glibc backtrace()");
    }
  } else {
    log_info("libunwind.so.8 not found (%s); native stacks use glibc backtrace()", dlerror());
  }
  g_libunwind_tried.store(true, std::memory_order_release);
}

int resolve_active() {
  std::lock_guard<std::mutex> lock(g_load_mu);
  int active = g_active.load(std::memory_order_acquire);
  if (active >= 0) return active;
  auto req = static_cast<NativeUnwinder>(g_requested.load(std::memory_order_acquire));
  if (req == NativeUnwinder::Auto || req == NativeUnwinder::Libunwind) {
    load_libunwind_locked();
    req = g_unw_backtrace.load(std::memory_order_acquire) ? NativeUnwinder::Libunwind : NativeUnwinder::Backtrace;
  }
  if (req == NativeUnwinder::Backtrace) {
    // glibc's first backtrace() dlopens libgcc_s (and allocates): do it here, not in the middle of a capture.
    void *warm[4];
    (void)::backtrace(warm, 4);
  }
  active = static_cast<int>(req);
  g_active.store(active, std::memory_order_release);
  return active;
}

}  // namespace

void set_native_unwinder(NativeUnwinder u) noexcept {
  std::lock_guard<std::mutex> lock(g_load_mu);
  g_requested.store(static_cast<int>(u), std::memory_order_release);
  g_active.store(-1, std::memory_order_release);
}

NativeUnwinder active_native_unwinder() noexcept {
  int a = g_active.load(std::memory_order_acquire);
  if (a < 0) a = resolve_active();
  return static_cast<NativeUnwinder>(a);
}

const char *to_string(NativeUnwinder u) noexcept {
  switch (u) {
    case NativeUnwinder::Auto: return "auto";
    case NativeUnwinder::Libunwind: return "libunwind";
    case NativeUnwinder::Backtrace: return "backtrace";
    case NativeUnwinder::None: return "none";
  }
  return "?";
}

__attribute__((noinline)) int unwind_native(uintptr_t *out, int max) noexcept {
  if (max <= 0) return 0;
  constexpr int kOwnFramesMax = 8;  // frames of the unwinder itself that precede our caller's
  void *buf[kOwnFramesMax + 256];
  const int cap = std::min(max + kOwnFramesMax, static_cast<int>(sizeof(buf) / sizeof(buf[0])));
  int n = 0;
  switch (active_native_unwinder()) {
    case NativeUnwinder::Libunwind: n = g_unw_backtrace.load(std::memory_order_relaxed)(buf, cap); break;
    case NativeUnwinder::Backtrace: n = ::backtrace(buf, cap); break;
    default: return 0;
  }
  // Drop the unwinder's own frames: everything up to our return address, found by address (the count differs:
  // libunwind starts inside unw_backtrace or at its caller depending on version and architecture, backtrace() at
  // its caller). glibc's backtrace(), libunwind on x86-64 and libunwind's slow path (unw_step) report raw return
  // addresses; libunwind's fast trace on aarch64 (src/aarch64/Gtrace.c) reports each one minus one, and it falls
  // back to the slow path for a call whose frames it cannot trace yet, so one call site would give two different
  // lists. Both are turned into raw return addresses here.
  const auto ra = reinterpret_cast<uintptr_t>(__builtin_extract_return_addr(__builtin_return_address(0)));
  const int own_max = std::min(n, kOwnFramesMax);
  int first = -1;
  uintptr_t adjust = 0;
  for (int i = 0; i < own_max && first < 0; ++i)
    if (reinterpret_cast<uintptr_t>(buf[i]) == ra) first = i;
  for (int i = 0; i < own_max && first < 0; ++i) {
    if (reinterpret_cast<uintptr_t>(buf[i]) == ra - 1) {
      first = i;
      adjust = 1;
    }
  }
  if (first < 0) first = 0;  // our return address not seen (an unwinder we do not know): keep everything
  int k = 0;
  for (int i = first; i < n && k < max; ++i) {
    const auto ip = reinterpret_cast<uintptr_t>(buf[i]);
    if (ip == 0) break;  // some libunwind builds end with zero frames (heaptrack bug 379082)
    out[k++] = ip + adjust;
  }
  return k;
}

void flush_native_unwind_cache() noexcept {
  UnwFlushCacheFn flush = g_unw_flush.load(std::memory_order_acquire);
  void *as = g_unw_address_space.load(std::memory_order_acquire);
  if (flush != nullptr && as != nullptr) flush(as, 0, 0);  // (0, 0): the whole cache
}

}  // namespace msprobe::shim
