// Hand-written entry trampolines (shim/call/trampoline_{x86_64,aarch64}.S): the fast path of a wrapped function.
//
// A trampoline is a code address that stands in for a real function. It comes in two kinds:
//
// - Gate: on entry it saves every argument register (x86-64: rdi rsi rdx rcx r8 r9, rax (the vector count of a
//   variadic call), xmm0-7 in full; aarch64: x0-x7, x8 (indirect result), q0-q7), calls decide(user, gpr) with a
//   pointer to the saved integer argument registers, restores everything, removes its frame and jumps to the
//   address decide returned. The target therefore sees the caller's registers, stack and return address exactly
//   as if the caller had called it directly, whatever the signature (ints, pointers, floats/doubles/vectors in FP
//   registers, stack-passed arguments, a struct returned through a hidden pointer, variadic calls), and returns
//   straight to the caller: the trampoline is not on the stack while the target runs, so exceptions and stack
//   walks go from the target to the caller. Not preserved: the upper halves of ymm/zmm registers (__m256/__m512
//   by-value arguments; no C API of CANN has them) and the scratch registers r10/r11 (x86-64) / x16/x17 (aarch64),
//   which no ABI defines at a call through a PLT anyway.
//
// - Prepend: for a function of at most kPrependMaxArgs integer/pointer arguments, all in registers: jumps to
//   target(user, args...), the integer arguments shifted by one register and FP registers untouched. Used where
//   the prototype is known (aclnn phase 2: (workspace, size, executor, stream)) so that an ordinary C++ function
//   can take the call, knowing which wrapped function it stands for.
//
// Trampolines come from a fixed pool compiled into the shim (no code is generated at run time, no writable and
// executable memory): kTrampolines entries, never freed. When the pool is used up, or on another architecture,
// make_* returns null and callers fall back to a libffi closure (shim/call/forwarder.h).
#pragma once
#include <cstdint>

namespace msprobe::shim {

#if defined(__x86_64__) || defined(__aarch64__)
inline constexpr bool kHaveTrampolines = true;
#else
inline constexpr bool kHaveTrampolines = false;
#endif

inline constexpr int kTrampolines = 4096;  // CANN has ~1,000 aclnn ops, two phases each
#if defined(__aarch64__)
inline constexpr int kPrependMaxArgs = 7;  // x0-x7, one taken by `user`
#else
inline constexpr int kPrependMaxArgs = 5;  // rdi rsi rdx rcx r8 r9, one taken by `user`
#endif

// Called on the trampoline's own small frame with the argument registers saved; returns the address to jump to.
// gpr points to the saved integer argument registers (x86-64: 6, aarch64: 8). Must not throw, and must return a
// function that accepts the call exactly as it was made (the real function, or another stand-in of the same
// signature such as a libffi closure around it).
using TrampolineDecide = void *(*)(void *user, const uint64_t *gpr);

// Null when the pool is exhausted or trampolines are not supported. Thread-safe.
void *make_gate_trampoline(TrampolineDecide decide, void *user) noexcept;
void *make_prepend_trampoline(void *target, void *user) noexcept;

// How many pool entries are in use (tests, diagnostics).
int trampolines_used() noexcept;

}  // namespace msprobe::shim
