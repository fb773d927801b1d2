// Native stack walking for the capture hot path.
//
// libunwind's unw_backtrace (about 10 ns a frame) from libunwind.so.8 opened with dlopen(RTLD_LOCAL): never linked,
// because libunwind.so.8 also exports the C++ exception ABI (_Unwind_*) and a weak backtrace(), which would replace
// libgcc_s's for the whole host process (spec §3). When libunwind cannot be loaded, glibc's backtrace() (about 10x
// slower, but always there) is used instead.
#pragma once
#include <cstdint>

namespace msprobe::shim {

enum class NativeUnwinder : int {
  Auto,       // libunwind when libunwind.so.8 loads, else Backtrace
  Libunwind,  // libunwind's unw_backtrace (falls back to Backtrace if the library is missing)
  Backtrace,  // glibc backtrace()
  None,       // no native frames
};

// Selects the unwinder (tests and benchmarks; the product uses Auto). Thread-safe.
void set_native_unwinder(NativeUnwinder u) noexcept;
// The unwinder capture really uses (never Auto). The first call loads libunwind.
NativeUnwinder active_native_unwinder() noexcept;
const char *to_string(NativeUnwinder u) noexcept;

// The calling thread's return addresses, innermost first: out[0] is the address unwind_native returns to (a call
// site in its caller), out[1] where that caller returns to, and so on. The addresses are raw return addresses (the
// instruction after each call). Returns how many were written (0..max). Never throws, never takes the GIL; the
// first call on a thread may allocate (libunwind's per-thread cache).
int unwind_native(uintptr_t *out, int max) noexcept;

// libunwind caches unwind information per address; call after a library was unloaded (dlclose) so that a new one
// mapped at the same place is not unwound with stale rules.
void flush_native_unwind_cache() noexcept;

}  // namespace msprobe::shim
