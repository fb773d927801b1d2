// Generic call forwarder: a function pointer made at run time (a libffi closure) that stands in for a real C
// function whose signature is unknown or only partly known. The stand-in sees the raw argument registers and
// stack slots, calls a pre-hook, forwards the call to the real function with every register and slot
// unchanged, then calls a post-hook with the return value.
//
// How it stays exact without knowing the signature: the closure is declared with a "maximal" signature,
// (int64 x kGprArgs, double x kFprArgs, int64 x stack_slots). Scalar arguments of the C calling conventions
// on x86-64 SysV and AAPCS64 (Linux) are assigned to integer registers, FP/SIMD registers and 8-byte stack
// slots independently of each other, so this declaration captures every integer register, the low 64 bits of
// every FP argument register and the first stack_slots slots of the caller's outgoing argument area, and
// ffi_call puts them back exactly where the caller put them. A float travels inside the low 32 bits of a
// "double" register image; nothing is ever converted, so NaN payloads, -0.0 and denormals pass through as
// bits. Not carried: arguments beyond the captured stack slots, aggregates returned in registers (struct
// returns), the aarch64 indirect-result register x8, and x87 long double returns. None occur in the
// CANN C APIs (status / handle / pointer returns, scalar or pointer parameters).
#pragma once
#include <cstdint>
#include <vector>

namespace msprobe::shim {

#if defined(__x86_64__)
inline constexpr int kGprArgs = 6;  // rdi rsi rdx rcx r8 r9
inline constexpr int kFprArgs = 8;  // xmm0-xmm7
#elif defined(__aarch64__)
inline constexpr int kGprArgs = 8;  // x0-x7
inline constexpr int kFprArgs = 8;  // v0-v7 (low 64 bits: d0-d7)
#else
#error "msprobe-shim forwards calls on x86-64 and aarch64 only"
#endif

// Stack slots a forwarder captures by default. The largest CANN prototypes seen
// (aclnnFusedInferAttentionScoreV4GetWorkspaceSize: 46 integer-class parameters and one double) need 40 slots
// on x86-64; 64 leaves room for newer ops. Reading slots the caller did not write is harmless (see
// Forwarder::create), so erring on the large side costs only a few hundred bytes of copying per call.
inline constexpr int kMaxStackSlots = 64;

// The argument registers and stack slots of one call, as the caller left them. Integer registers and stack
// slots hold 64 bits of which a narrow parameter (int8_t, bool, int32_t, float on the stack) defines only the
// low bits: read them with read_int / read_f32, which mask and extend.
struct RawArgs {
  uint64_t gpr[kGprArgs];
  uint64_t fpr[kFprArgs];  // low 64 bits of each FP argument register
  uint64_t stack[kMaxStackSlots];
  int stack_slots;  // slots captured and forwarded; stack[stack_slots..] are zero
};

// What the real function returns, which decides the closure's return register.
enum class ReturnKind : uint8_t {
  Void,
  Int32,    // aclnnStatus, aclError, int
  Int64,    // int64_t, uint64_t, size_t
  Pointer,  // any pointer or handle (same register as Int64)
  Float32,
  Float64,
};

// Hooks are plain functions so that they are cheap and cannot capture state by accident; `user` is the
// pointer given to Forwarder::create. They run on the calling thread, may call other forwarded functions
// (forwarders are reentrant) and must not throw: an exception is caught, reported once on stderr and
// otherwise ignored, and the call is forwarded regardless. The arguments are const: what is forwarded is
// always exactly what the caller passed, whatever a hook does.
using PreHook = void (*)(void *user, const RawArgs &args);
// ret: Int32 sign-extended to 64 bits; Int64/Pointer as is; Float64 its bits; Float32 its bits in the low 32
// bits; Void 0.
using PostHook = void (*)(void *user, const RawArgs &args, uint64_t ret);
// Decides per call whether the hooks run at all. gpr: the integer argument registers as the caller set them
// (kGprArgs values). false sends the call to the real function through a trampoline (shim/call/trampoline.h): no
// libffi, no hooks, a few nanoseconds. true takes the libffi path with the hooks. Must not throw (an exception counts
// as false). A gate is only a shortcut: when no trampoline is available the hooks run for every call, so they must make
// the same decision themselves.
using Gate = bool (*)(void *user, const uint64_t *gpr);

class Forwarder {
 public:
  // Makes a stand-in for real_fn. Either hook may be null. stack_slots (0..kMaxStackSlots) is how many
  // caller stack slots are captured and forwarded: pass stack_slots_needed(params) when the prototype is
  // known, kMaxStackSlots when it is not. Returns null (and says why on stderr) if libffi cannot allocate
  // executable memory or the arguments are invalid. Thread-safe.
  //
  // Never freed: a caller may still be inside the closure, or hold its address (a GOT slot, a dlsym result)
  // for the rest of the process's life.
  //
  // Fewer arguments than the maximum: the closure always reads kGprArgs + kFprArgs registers and stack_slots
  // slots. Extra registers just hold whatever the caller left there. Extra stack slots lie above the return
  // address, i.e. in the caller's own frame and those of its callers: mapped stack memory for any call made
  // from a normal call chain, because glibc puts more than 512 bytes above the first frame of every thread
  // (argv/envp/auxv for the main thread, the thread descriptor for the others, plus libc's start frames).
  // The only way to read past the stack's end would be a coroutine calling a forwarded function straight
  // from its entry function on a hand-made stack; pass the exact stack_slots when the prototype is known.
  // Passing the extra values on is harmless: the real function is called with them in ffi_call's own
  // outgoing area and never reads beyond its declared parameters.
  //
  // Cost: libffi classifies every declared argument on the way in and again on the way out, so a call costs
  // roughly 35 ns per captured register/slot on the 2-core CI VM: ~0.5 us with 0 stack slots, ~3 us with
  // kMaxStackSlots (test ForwarderCost prints the numbers). Another reason to pass the exact stack_slots.
  //
  // With a gate, entry() is a trampoline in front of the closure (unless the trampoline pool is used up: then the
  // closure itself), and a call the gate turns away costs a few nanoseconds instead. With a gate, a post hook alone,
  // no stack slot and an integer or pointer result (aclnn phase 1 with every argument in registers), entry() is an
  // around trampoline (shim/call/trampoline.h): the real function is called without libffi, then the post hook
  // when the gate let it run.
  static Forwarder *create(void *real_fn, ReturnKind ret, PreHook pre, PostHook post, void *user,
                           int stack_slots = kMaxStackSlots, Gate gate = nullptr) noexcept;

  void *entry() const noexcept { return entry_; }             // the stand-in: call it exactly like real()
  void *closure() const noexcept { return closure_; }         // the libffi stand-in (hooks always run)
  bool gated() const noexcept { return entry_ != closure_; }  // entry() is a gate or an around trampoline
  void *real() const noexcept { return real_; }
  void *user() const noexcept { return user_; }
  ReturnKind return_kind() const noexcept { return ret_; }
  int stack_slots() const noexcept { return stack_slots_; }

 private:
  friend struct ForwarderAccess;
  Forwarder() = default;
  void *real_ = nullptr;
  void *entry_ = nullptr;
  void *closure_ = nullptr;
  void *user_ = nullptr;
  Gate gate_ = nullptr;
  PreHook pre_ = nullptr;
  PostHook post_ = nullptr;
  ReturnKind ret_ = ReturnKind::Void;
  int stack_slots_ = 0;
};

// ---- Reading parameters out of RawArgs when (part of) the prototype is known ----

// Parameter classes as the calling convention sees them. Integer: any integer type, bool, enum, pointer.
enum class ArgClass : uint8_t { Integer, Float32, Float64 };

struct ArgLocation {
  enum Where : uint8_t { Gpr, Fpr, Stack } where;
  int index;  // register number within its class, or stack slot number
  bool operator==(const ArgLocation &) const = default;
};

enum class CallAbi : uint8_t { SysV_x86_64, Aapcs64 };
#if defined(__x86_64__)
inline constexpr CallAbi kNativeAbi = CallAbi::SysV_x86_64;
#else
inline constexpr CallAbi kNativeAbi = CallAbi::Aapcs64;
#endif

// Where each parameter of a (non-variadic) prototype travels: integers fill the integer registers in order
// (x86-64: 6, aarch64: 8), floating-point parameters fill the FP registers (8) independently, and whatever
// does not fit goes to consecutive 8-byte stack slots in parameter order, integers and FP interleaved.
// Both ABIs give every scalar a full 8-byte stack slot (Linux AAPCS64, unlike Apple's, does not pack).
std::vector<ArgLocation> locate_args(const std::vector<ArgClass> &params, CallAbi abi = kNativeAbi);
// Stack slots a prototype uses (0 when everything fits in registers). More than kMaxStackSlots: the call
// cannot be forwarded exactly and must not be wrapped.
int stack_slots_needed(const std::vector<ArgClass> &params, CallAbi abi = kNativeAbi);

// The 64 bits of a location (0 for a stack slot that was not captured).
uint64_t read_bits(const RawArgs &args, ArgLocation loc) noexcept;
// An integer parameter of `bits` width (8, 16, 32 or 64). Neither ABI defines the bits above a narrow
// parameter: callers may leave anything there (a narrow value moved with a narrow instruction, a stack slot
// written with a narrow store). So only the low `bits` are used, sign-extended if is_signed, zero-extended if
// not. bool is read as read_int(args, loc, 8, false) != 0.
int64_t read_int(const RawArgs &args, ArgLocation loc, int bits, bool is_signed) noexcept;
void *read_ptr(const RawArgs &args, ArgLocation loc) noexcept;
// Floating-point parameters: the register image or stack slot, reinterpreted without conversion (a float is
// the low 32 bits).
double read_f64(const RawArgs &args, ArgLocation loc) noexcept;
float read_f32(const RawArgs &args, ArgLocation loc) noexcept;

}  // namespace msprobe::shim
