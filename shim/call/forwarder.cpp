#include "shim/call/forwarder.h"

#include <cxxabi.h>
#include <ffi.h>

#include <array>
#include <atomic>
#include <cstring>
#include <mutex>
#include <new>

#include "shim/base/log.h"
#include "shim/call/trampoline.h"

namespace msprobe::shim {
namespace {

constexpr int kRegisterArgs = kGprArgs + kFprArgs;
constexpr int kReturnKinds = static_cast<int>(ReturnKind::Float64) + 1;

// Argument types of the maximal signature. A cif with s stack slots uses the first kRegisterArgs + s entries,
// so one array serves every slot count. libffi keeps the pointer, hence static storage.
ffi_type **maximal_arg_types() {
  static std::array<ffi_type *, kRegisterArgs + kMaxStackSlots> types = [] {
    std::array<ffi_type *, kRegisterArgs + kMaxStackSlots> t{};
    for (int i = 0; i < kGprArgs; ++i) t[i] = &ffi_type_sint64;
    for (int i = kGprArgs; i < kRegisterArgs; ++i) t[i] = &ffi_type_double;
    for (int i = kRegisterArgs; i < kRegisterArgs + kMaxStackSlots; ++i) t[i] = &ffi_type_sint64;
    return t;
  }();
  return types.data();
}

ffi_type *return_type(ReturnKind kind) {
  switch (kind) {
    case ReturnKind::Void: return &ffi_type_void;
    case ReturnKind::Int32: return &ffi_type_sint32;
    case ReturnKind::Int64: return &ffi_type_sint64;
    case ReturnKind::Pointer: return &ffi_type_pointer;
    case ReturnKind::Float32: return &ffi_type_float;
    case ReturnKind::Float64: return &ffi_type_double;
  }
  return nullptr;
}

// One immutable cif per (return kind, stack slots), shared by every forwarder of that shape and never freed
// (closures refer to it for the rest of the process).
ffi_cif *shared_cif(ReturnKind kind, int stack_slots) {
  static std::array<std::atomic<ffi_cif *>, kReturnKinds *(kMaxStackSlots + 1)> cache{};
  static std::mutex mutex;
  auto &entry = cache[static_cast<int>(kind) * (kMaxStackSlots + 1) + stack_slots];
  if (ffi_cif *cif = entry.load(std::memory_order_acquire)) return cif;
  std::lock_guard<std::mutex> lock(mutex);
  if (ffi_cif *cif = entry.load(std::memory_order_relaxed)) return cif;
  auto *cif = new (std::nothrow) ffi_cif;
  if (!cif) return nullptr;
  if (ffi_prep_cif(cif, FFI_DEFAULT_ABI, static_cast<unsigned>(kRegisterArgs + stack_slots), return_type(kind),
                   maximal_arg_types()) != FFI_OK) {
    delete cif;
    return nullptr;
  }
  entry.store(cif, std::memory_order_release);
  return cif;
}

void report_hook_exception() {
  static std::atomic<bool> reported{false};
  if (!reported.exchange(true, std::memory_order_relaxed))
    log_warn("a forwarder hook threw an exception; ignored (reported once)");
}

// Hooks may be C++ code that throws; an exception must not reach the host's C caller. Thread cancellation
// (abi::__forced_unwind) is let through: it has to unwind to the thread's start, and libffi's trampolines
// carry unwind information.
template <class F>
void run_hook(F &&call) {
  try {
    call();
  } catch (abi::__forced_unwind &) {
    throw;
  } catch (...) {
    report_hook_exception();
  }
}

uint64_t return_bits(ReturnKind kind, const void *ret) {
  switch (kind) {
    case ReturnKind::Void: return 0;
    case ReturnKind::Int32:
      // libffi widens integral returns narrower than a register to a full ffi_arg.
      return static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(*static_cast<const ffi_sarg *>(ret))));
    case ReturnKind::Float32: {
      uint32_t bits;
      std::memcpy(&bits, ret, sizeof bits);
      return bits;
    }
    case ReturnKind::Int64:
    case ReturnKind::Pointer:
    case ReturnKind::Float64: {
      uint64_t bits;
      std::memcpy(&bits, ret, sizeof bits);
      return bits;
    }
  }
  return 0;
}

// One slot of the caller's outgoing argument area. Slots past the arguments the caller really passed lie in the
// caller's own frame (its locals, and ASan's redzones around them): they are copied as raw bits and forwarded,
// never interpreted (forwarder.h), so this read is exempt from ASan.
__attribute__((no_sanitize("address"))) uint64_t caller_slot(const void *slot) {
  uint64_t bits;
  __builtin_memcpy(&bits, slot, sizeof bits);
  return bits;
}

}  // namespace

struct ForwarderAccess {
  // The closure body. libffi hands over pointers to the argument values it saved from the registers and the
  // caller's stack, and the same cif describes the real call, so `args` is forwarded as is: the hooks see a
  // copy and cannot change what the real function receives.
  static void dispatch(ffi_cif *cif, void *ret, void **args, void *self) {
    const auto *f = static_cast<const Forwarder *>(self);
    RawArgs raw;
    // The real call gets the register values as libffi saved them and the stack slots from `raw`: libffi's
    // memcpy of a slot in the caller's frame would be a read past the caller's arguments (caller_slot()).
    void *forwarded[kRegisterArgs + kMaxStackSlots];
    for (int i = 0; i < kRegisterArgs; ++i) forwarded[i] = args[i];
    for (int i = 0; i < f->stack_slots_; ++i) {
      raw.stack[i] = caller_slot(args[kRegisterArgs + i]);
      forwarded[kRegisterArgs + i] = &raw.stack[i];
    }
    if (!f->pre_ && !f->post_) {
      ffi_call(cif, FFI_FN(f->real_), ret, forwarded);
      return;
    }
    for (int i = 0; i < kGprArgs; ++i) std::memcpy(&raw.gpr[i], args[i], sizeof(uint64_t));
    for (int i = 0; i < kFprArgs; ++i) std::memcpy(&raw.fpr[i], args[kGprArgs + i], sizeof(uint64_t));
    for (int i = f->stack_slots_; i < kMaxStackSlots; ++i) raw.stack[i] = 0;
    raw.stack_slots = f->stack_slots_;

    if (f->pre_) run_hook([&] { f->pre_(f->user_, raw); });
    ffi_call(cif, FFI_FN(f->real_), ret, forwarded);
    if (f->post_) {
      const uint64_t bits = return_bits(f->ret_, ret);
      run_hook([&] { f->post_(f->user_, raw, bits); });
    }
  }

  // The around trampoline's decision: always the real function, called from the trampoline with the post hook
  // after it when the gate lets the hooks run (gpr[kAroundFlag]), jumped to otherwise.
  static void *decide_around(void *self, const uint64_t *gpr) {
    const auto *f = static_cast<const Forwarder *>(self);
    bool hooks = false;
    try {
      hooks = f->gate_(f->user_, gpr);
    } catch (abi::__forced_unwind &) {
      throw;
    } catch (...) {
      report_hook_exception();
    }
    if (hooks) const_cast<uint64_t *>(gpr)[kAroundFlag] = 1;  // the trampoline's own word, not an argument
    return f->real_;
  }

  // After the real function, on the around trampoline's frame: the post hook with the registers the caller passed.
  static void after_around(void *self, const uint64_t *saved, uint64_t result) {
    const auto *f = static_cast<const Forwarder *>(self);
    RawArgs raw;
    for (int i = 0; i < kGprArgs; ++i) raw.gpr[i] = saved[i];
    for (int i = 0; i < kFprArgs; ++i) raw.fpr[i] = saved[kAroundFprWord + 2 * i];
    raw.stack_slots = 0;
    const uint64_t bits = f->ret_ == ReturnKind::Int32
                              ? static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(result)))
                              : result;
    run_hook([&] { f->post_(f->user_, raw, bits); });
  }

  // The gate trampoline's decision: the closure (hooks) or the real function (no hooks).
  static void *decide(void *self, const uint64_t *gpr) {
    const auto *f = static_cast<const Forwarder *>(self);
    bool hooks = false;
    try {
      hooks = f->gate_(f->user_, gpr);
    } catch (abi::__forced_unwind &) {
      throw;  // thread cancellation: the trampoline's frame has unwind information
    } catch (...) {
      report_hook_exception();
    }
    return hooks ? f->closure_ : f->real_;
  }

  static Forwarder *make(void *real_fn, ReturnKind ret, PreHook pre, PostHook post, void *user, int stack_slots,
                         Gate gate) {
    if (!real_fn || stack_slots < 0 || stack_slots > kMaxStackSlots || !return_type(ret)) {
      log_error("Forwarder::create: invalid arguments");
      return nullptr;
    }
    ffi_cif *cif = shared_cif(ret, stack_slots);
    if (!cif) {
      log_error("Forwarder::create: ffi_prep_cif failed");
      return nullptr;
    }
    void *code = nullptr;
    auto *closure = static_cast<ffi_closure *>(ffi_closure_alloc(sizeof(ffi_closure), &code));
    if (!closure || !code) {
      log_error("Forwarder::create: cannot allocate an executable closure");
      return nullptr;
    }
    auto *f = new (std::nothrow) Forwarder();
    if (!f) {
      ffi_closure_free(closure);
      return nullptr;
    }
    f->real_ = real_fn;
    f->user_ = user;
    f->pre_ = pre;
    f->post_ = post;
    f->ret_ = ret;
    f->stack_slots_ = stack_slots;
    if (ffi_prep_closure_loc(closure, cif, &ForwarderAccess::dispatch, f, code) != FFI_OK) {
      log_error("Forwarder::create: ffi_prep_closure_loc failed");
      ffi_closure_free(closure);
      delete f;
      return nullptr;
    }
    f->closure_ = f->entry_ = code;
    f->gate_ = gate;
    // A gate and a post hook alone, no argument on the stack, an integer result: the around trampoline calls the
    // real function itself (no libffi on the way); the closure stays for when the pool is used up.
    const bool integer = ret == ReturnKind::Int32 || ret == ReturnKind::Int64 || ret == ReturnKind::Pointer;
    if (gate && !pre && post && stack_slots == 0 && integer)
      if (void *t = make_around_trampoline(&ForwarderAccess::decide_around, &ForwarderAccess::after_around, f)) {
        f->entry_ = t;
        return f;
      }
    if (gate)
      if (void *t = make_gate_trampoline(&ForwarderAccess::decide, f)) f->entry_ = t;
    return f;
  }
};

Forwarder *Forwarder::create(void *real_fn, ReturnKind ret, PreHook pre, PostHook post, void *user, int stack_slots,
                             Gate gate) noexcept {
  try {
    return ForwarderAccess::make(real_fn, ret, pre, post, user, stack_slots, gate);
  } catch (...) {
    return nullptr;
  }
}

// ---- Argument locations ----

std::vector<ArgLocation> locate_args(const std::vector<ArgClass> &params, CallAbi abi) {
  const int gpr_count = abi == CallAbi::SysV_x86_64 ? 6 : 8;
  const int fpr_count = 8;
  std::vector<ArgLocation> out;
  out.reserve(params.size());
  int gpr = 0, fpr = 0, slot = 0;
  for (ArgClass c : params) {
    if (c == ArgClass::Integer) {
      out.push_back(gpr < gpr_count ? ArgLocation{ArgLocation::Gpr, gpr++} : ArgLocation{ArgLocation::Stack, slot++});
    } else {
      out.push_back(fpr < fpr_count ? ArgLocation{ArgLocation::Fpr, fpr++} : ArgLocation{ArgLocation::Stack, slot++});
    }
  }
  return out;
}

int stack_slots_needed(const std::vector<ArgClass> &params, CallAbi abi) {
  int slots = 0;
  for (const ArgLocation &loc : locate_args(params, abi))
    if (loc.where == ArgLocation::Stack) slots = loc.index + 1;
  return slots;
}

uint64_t read_bits(const RawArgs &args, ArgLocation loc) noexcept {
  if (loc.index < 0) return 0;
  switch (loc.where) {
    case ArgLocation::Gpr: return loc.index < kGprArgs ? args.gpr[loc.index] : 0;
    case ArgLocation::Fpr: return loc.index < kFprArgs ? args.fpr[loc.index] : 0;
    case ArgLocation::Stack:
      return loc.index < args.stack_slots && loc.index < kMaxStackSlots ? args.stack[loc.index] : 0;
  }
  return 0;
}

int64_t read_int(const RawArgs &args, ArgLocation loc, int bits, bool is_signed) noexcept {
  if (bits <= 0) return 0;
  const uint64_t raw = read_bits(args, loc);
  if (bits >= 64) return static_cast<int64_t>(raw);
  const int unused = 64 - bits;
  if (is_signed) return static_cast<int64_t>(raw << unused) >> unused;  // arithmetic shift (C++20)
  return static_cast<int64_t>(raw & ((uint64_t{1} << bits) - 1));
}

void *read_ptr(const RawArgs &args, ArgLocation loc) noexcept {
  return reinterpret_cast<void *>(static_cast<uintptr_t>(read_bits(args, loc)));
}

double read_f64(const RawArgs &args, ArgLocation loc) noexcept {
  const uint64_t raw = read_bits(args, loc);
  double v;
  std::memcpy(&v, &raw, sizeof v);
  return v;
}

float read_f32(const RawArgs &args, ArgLocation loc) noexcept {
  const auto raw = static_cast<uint32_t>(read_bits(args, loc));
  float v;
  std::memcpy(&v, &raw, sizeof v);
  return v;
}

}  // namespace msprobe::shim
