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
// - Around: a gate whose decide may also ask (gpr[kAroundFlag] = 1) for the target to be *called* from the
//   trampoline's frame, with the caller's registers, and then after(user, saved, result) with the argument
//   registers as the caller passed them and the target's integer result, which the trampoline returns. Only for
//   a function none of whose arguments is on the stack (the target would see the trampoline's frame there) and
//   whose result is an integer or a pointer. It is what a libffi closure with a post-call hook does, without
//   libffi's per-call argument classification (shim/call/forwarder.h uses it where it applies).
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

// Around: `saved` is the save area decide got as gpr; the FP argument registers follow it (kAroundFprWord: the
// word of fpr i's low 64 bits is saved[kAroundFprWord + 2 * i]). Must not throw.
using TrampolineAfter = void (*)(void *user, const uint64_t *saved, uint64_t result);
#if defined(__aarch64__)
inline constexpr int kAroundFlag = 9;      // the word after x8
inline constexpr int kAroundFprWord = 10;  // q0 at saved + 80 bytes
#else
inline constexpr int kAroundFlag = 7;      // the word after the saved rax
inline constexpr int kAroundFprWord = 8;   // xmm0 at saved + 64 bytes
#endif

// Null when the pool is exhausted or trampolines are not supported. Thread-safe.
void *make_gate_trampoline(TrampolineDecide decide, void *user) noexcept;
void *make_prepend_trampoline(void *target, void *user) noexcept;
void *make_around_trampoline(TrampolineDecide decide, TrampolineAfter after, void *user) noexcept;

// How many pool entries are in use (tests, diagnostics).
int trampolines_used() noexcept;

}  // namespace msprobe::shim
