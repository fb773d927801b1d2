// Forwarder: every argument reaches the real function bit for bit (registers, stack slots, NaN payloads,
// garbage above narrow integers), the hooks see each parameter where locate_args says it is, returns come
// back unchanged, and all of it holds across threads and reentrant calls.
//
// Built twice (forwarder.cmake): shim_forwarder calls libffi closures directly; shim_forwarder_gated puts every
// forwarder behind a gate trampoline (shim/call/trampoline.h) whose gate lets the hooks run, so each test also covers
// trampoline -> closure. Both builds check closed gates (the real function called straight from the trampoline)
// and the trampolines themselves: prepend entries, struct returns, exceptions and stack walks through them.
#include <gtest/gtest.h>
#include <pthread.h>
#include <unwind.h>

#include <atomic>
#include <bit>
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "shim/call/forwarder.h"
#include "shim/call/trampoline.h"

using namespace msprobe::shim;

#ifndef FORWARDER_GATED
#define FORWARDER_GATED 0
#endif

// Real functions the optimizer must treat as opaque (no constant propagation into or out of them).
#if defined(__clang__)
#define NOIPA __attribute__((noinline, optnone))
#else
#define NOIPA __attribute__((noipa))
#endif

namespace {

// ---- What a parameter is and what the callee must see ----

struct Param {
  ArgClass cls;
  int bits;        // integer width; 32/64 for floating point
  bool is_signed;  // integers only
  uint64_t value;  // the parameter's own bits, zero-extended from `bits`
};

uint64_t low_bits(uint64_t v, int bits) { return bits >= 64 ? v : v & ((uint64_t{1} << bits) - 1); }
int64_t sign_extend(uint64_t v, int bits) {
  return bits >= 64 ? static_cast<int64_t>(v) : static_cast<int64_t>(v << (64 - bits)) >> (64 - bits);
}

template <class T>
Param param_of(T v) {
  if constexpr (std::is_same_v<T, double>) {
    return {ArgClass::Float64, 64, false, std::bit_cast<uint64_t>(v)};
  } else if constexpr (std::is_same_v<T, float>) {
    return {ArgClass::Float32, 32, false, std::bit_cast<uint32_t>(v)};
  } else if constexpr (std::is_pointer_v<T>) {
    return {ArgClass::Integer, 64, false, reinterpret_cast<uintptr_t>(v)};
  } else if constexpr (std::is_same_v<T, bool>) {
    return {ArgClass::Integer, 8, false, v ? 1u : 0u};
  } else {
    static_assert(std::is_integral_v<T>);
    return {ArgClass::Integer, static_cast<int>(sizeof(T) * 8), std::is_signed_v<T>,
            low_bits(static_cast<uint64_t>(v), static_cast<int>(sizeof(T) * 8))};
  }
}

// What the callee saw, one entry per parameter (same encoding as Param::value).
thread_local std::vector<uint64_t> t_seen;

uint64_t fold(const std::vector<uint64_t>& seen) {  // FNV-1a over the seen bits
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint64_t v : seen)
    for (int i = 0; i < 8; ++i) h = (h ^ ((v >> (8 * i)) & 0xff)) * 0x100000001b3ull;
  return h;
}

std::vector<uint64_t> expected_seen(const std::vector<Param>& params) {
  std::vector<uint64_t> out;
  for (const Param& p : params) out.push_back(p.value);
  return out;
}

// Real functions of any signature: a template instantiated with a fixed parameter list is an ordinary
// (non-variadic) function as far as the calling convention goes.
template <class... T>
NOIPA int32_t callee(T... v) {
  t_seen.clear();
  (t_seen.push_back(param_of(v).value), ...);
  return static_cast<int32_t>(fold(t_seen));
}

template <class R, class... T>
NOIPA R callee_ret(T... v) {
  t_seen.clear();
  (t_seen.push_back(param_of(v).value), ...);
  const uint64_t h = fold(t_seen);
  if constexpr (std::is_same_v<R, void>) {
    return;
  } else if constexpr (std::is_same_v<R, double>) {
    return std::bit_cast<double>(0x7ff0000000000000ull | (h & 0x000fffffffffffffull) | 1);  // a NaN with payload
  } else if constexpr (std::is_same_v<R, float>) {
    return std::bit_cast<float>(0xff800000u | static_cast<uint32_t>(h & 0x003fffffu) | 1);  // signalling NaN
  } else if constexpr (std::is_pointer_v<R>) {
    return reinterpret_cast<R>(static_cast<uintptr_t>(h));
  } else {
    return static_cast<R>(h);
  }
}

// ---- Hooks that check every parameter at the location locate_args gives ----

struct Probe {
  explicit Probe(std::vector<Param> p) : params(std::move(p)) {}
  std::vector<Param> params;
  bool gate_open = true;
  int gate_calls = 0;
  int pre_calls = 0;
  int post_calls = 0;
  uint64_t ret = 0;
  std::vector<std::string> mismatches;
};

void check_params(Probe& probe, const RawArgs& raw, const char* when) {
  std::vector<ArgClass> classes;
  for (const Param& p : probe.params) classes.push_back(p.cls);
  const std::vector<ArgLocation> locs = locate_args(classes);
  for (size_t i = 0; i < probe.params.size(); ++i) {
    const Param& p = probe.params[i];
    uint64_t got = 0, want = 0;
    switch (p.cls) {
      case ArgClass::Integer:
        got = static_cast<uint64_t>(read_int(raw, locs[i], p.bits, p.is_signed));
        want = p.is_signed ? static_cast<uint64_t>(sign_extend(p.value, p.bits)) : p.value;
        break;
      case ArgClass::Float32:
        got = std::bit_cast<uint32_t>(read_f32(raw, locs[i]));
        want = p.value;
        break;
      case ArgClass::Float64:
        got = std::bit_cast<uint64_t>(read_f64(raw, locs[i]));
        want = p.value;
        break;
    }
    if (got != want) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "%s: param %zu (loc %d/%d) got %#" PRIx64 " want %#" PRIx64, when, i,
                    static_cast<int>(locs[i].where), locs[i].index, got, want);
      probe.mismatches.emplace_back(buf);
    }
  }
}

void probe_pre(void* user, const RawArgs& raw) {
  auto* probe = static_cast<Probe*>(user);
  ++probe->pre_calls;
  check_params(*probe, raw, "pre");
}

void probe_post(void* user, const RawArgs& raw, uint64_t ret) {
  auto* probe = static_cast<Probe*>(user);
  ++probe->post_calls;
  probe->ret = ret;
  check_params(*probe, raw, "post");
}

// A gate that checks the integer registers it is shown against the parameters that travel in them.
bool probe_gate(void* user, const uint64_t* gpr) {
  auto* probe = static_cast<Probe*>(user);
  ++probe->gate_calls;
  RawArgs raw{};
  for (int i = 0; i < kGprArgs; ++i) raw.gpr[i] = gpr[i];
  std::vector<ArgClass> classes;
  for (const Param& p : probe->params) classes.push_back(p.cls);
  const std::vector<ArgLocation> locs = locate_args(classes);
  for (size_t i = 0; i < probe->params.size(); ++i) {
    const Param& p = probe->params[i];
    if (locs[i].where != ArgLocation::Gpr) continue;
    const auto got = static_cast<uint64_t>(read_int(raw, locs[i], p.bits, p.is_signed));
    const uint64_t want = p.is_signed ? static_cast<uint64_t>(sign_extend(p.value, p.bits)) : p.value;
    if (got != want) probe->mismatches.push_back("gate: param " + std::to_string(i));
  }
  return probe->gate_open;
}

// Every forwarder the tests make: in the gated build behind a trampoline whose gate always lets the hooks run.
std::atomic<int64_t> g_open_gate_calls{0};
bool open_gate(void*, const uint64_t*) {
  g_open_gate_calls.fetch_add(1, std::memory_order_relaxed);
  return true;
}
Forwarder* make_fw(void* real, ReturnKind kind, PreHook pre, PostHook post, void* user, int slots = kMaxStackSlots) {
  Forwarder* f = Forwarder::create(real, kind, pre, post, user, slots, FORWARDER_GATED ? &open_gate : nullptr);
  if (f != nullptr) {
    EXPECT_EQ(f->gated(), FORWARDER_GATED != 0);
  }
  return f;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& m : v) s += m + "\n";
  return s;
}

// Calls callee<T...> directly and through a fresh forwarder (maximal and exact stack capture) and checks
// arguments inside the callee, in both hooks, and the return value.
template <class... T>
void check_forwarding(T... v) {
  const std::vector<Param> params{param_of(v)...};
  std::vector<ArgClass> classes;
  for (const Param& p : params) classes.push_back(p.cls);
  const std::vector<uint64_t> want_seen = expected_seen(params);
  const auto want_ret = static_cast<int32_t>(fold(want_seen));

  const int direct = callee<T...>(v...);
  ASSERT_EQ(t_seen, want_seen) << "direct call (test harness broken)";
  ASSERT_EQ(direct, want_ret);

  // Gate modes: 0 none (the build's default), 1 gate open (trampoline -> closure -> hooks), 2 gate closed
  // (trampoline -> real function, no hooks).
  for (int slots : {kMaxStackSlots, stack_slots_needed(classes)})
    for (int gate : {0, 1, 2}) {
      SCOPED_TRACE("stack_slots=" + std::to_string(slots) + " gate=" + std::to_string(gate));
      Probe probe{params};
      probe.gate_open = gate == 1;
      Forwarder* fw = gate == 0 ? make_fw(reinterpret_cast<void*>(&callee<T...>), ReturnKind::Int32, probe_pre,
                                          probe_post, &probe, slots)
                                : Forwarder::create(reinterpret_cast<void*>(&callee<T...>), ReturnKind::Int32,
                                                    probe_pre, probe_post, &probe, slots, probe_gate);
      ASSERT_NE(fw, nullptr);
      if (gate != 0) {
        ASSERT_TRUE(fw->gated());
      }
      EXPECT_EQ(fw->real(), reinterpret_cast<void*>(&callee<T...>));
      EXPECT_EQ(fw->stack_slots(), slots);
      auto fn = reinterpret_cast<int32_t (*)(T...)>(fw->entry());
      t_seen.clear();
      const int32_t got = fn(v...);
      EXPECT_EQ(t_seen, want_seen);
      EXPECT_EQ(got, want_ret);
      EXPECT_EQ(probe.gate_calls, gate == 0 ? 0 : 1);
      EXPECT_EQ(probe.pre_calls, gate == 2 ? 0 : 1);
      EXPECT_EQ(probe.post_calls, gate == 2 ? 0 : 1);
      if (gate != 2) {
        EXPECT_EQ(probe.ret, static_cast<uint64_t>(static_cast<int64_t>(want_ret)));
      }
      EXPECT_TRUE(probe.mismatches.empty()) << joined(probe.mismatches);
    }
}

double f64(uint64_t bits) { return std::bit_cast<double>(bits); }
float f32(uint32_t bits) { return std::bit_cast<float>(bits); }

// Special values, passed as bits so that nothing on the way can quiet or flush them.
const uint64_t kSNaN64 = 0x7ff0000000000001ull, kQNaNPayload64 = 0x7ff8deadbeef1234ull,
               kNegNaN64 = 0xfff4000000000abcull, kNegZero64 = 0x8000000000000000ull, kDenormMin64 = 1,
               kDenormMax64 = 0x000fffffffffffffull, kInf64 = 0x7ff0000000000000ull;
const uint32_t kSNaN32 = 0x7f800001u, kQNaNPayload32 = 0x7fc12345u, kNegZero32 = 0x80000000u, kDenormMin32 = 1,
               kNegDenormMax32 = 0x807fffffu;

}  // namespace

// ---- locate_args: the ABI tables themselves ----

TEST(ForwarderLocate, SysVIntegersAndFloatsFillTheirOwnRegistersThenInterleaveOnTheStack) {
  using C = ArgClass;
  using L = ArgLocation;
  // (int, double x9, int x7, float): 6 ints in rdi..r9, 8 doubles in xmm0-7, the rest in parameter order.
  std::vector<C> p{C::Integer};
  for (int i = 0; i < 9; ++i) p.push_back(C::Float64);
  for (int i = 0; i < 7; ++i) p.push_back(C::Integer);
  p.push_back(C::Float32);
  const auto locs = locate_args(p, CallAbi::SysV_x86_64);
  ASSERT_EQ(locs.size(), p.size());
  EXPECT_EQ(locs[0], (L{L::Gpr, 0}));
  for (int i = 0; i < 8; ++i) EXPECT_EQ(locs[1 + i], (L{L::Fpr, i}));
  EXPECT_EQ(locs[9], (L{L::Stack, 0}));  // 9th double
  for (int i = 0; i < 5; ++i) EXPECT_EQ(locs[10 + i], (L{L::Gpr, 1 + i}));
  EXPECT_EQ(locs[15], (L{L::Stack, 1}));  // 7th int
  EXPECT_EQ(locs[16], (L{L::Stack, 2}));  // 8th int
  EXPECT_EQ(locs[17], (L{L::Stack, 3}));  // the float: FP registers are full
  EXPECT_EQ(stack_slots_needed(p, CallAbi::SysV_x86_64), 4);

  // Same prototype on AAPCS64: 8 integer registers, so two more ints stay in registers.
  const auto a = locate_args(p, CallAbi::Aapcs64);
  EXPECT_EQ(a[9], (L{L::Stack, 0}));
  for (int i = 0; i < 7; ++i) EXPECT_EQ(a[10 + i], (L{L::Gpr, 1 + i}));
  EXPECT_EQ(a[17], (L{L::Stack, 1}));
  EXPECT_EQ(stack_slots_needed(p, CallAbi::Aapcs64), 2);
}

TEST(ForwarderLocate, LargestKnownAclnnPrototypeFitsTheDefaultCapture) {
  // aclnnFusedInferAttentionScoreV4GetWorkspaceSize: 29 pointers, double scaleValue, 17 more integers.
  std::vector<ArgClass> p(29, ArgClass::Integer);
  p.push_back(ArgClass::Float64);
  p.insert(p.end(), 17, ArgClass::Integer);
  EXPECT_EQ(stack_slots_needed(p, CallAbi::SysV_x86_64), 40);
  EXPECT_EQ(stack_slots_needed(p, CallAbi::Aapcs64), 38);
  EXPECT_LE(stack_slots_needed(p), kMaxStackSlots);
  EXPECT_EQ(locate_args(p)[29], (ArgLocation{ArgLocation::Fpr, 0}));
  EXPECT_EQ(stack_slots_needed({}), 0);
}

TEST(ForwarderLocate, ReadIntUsesOnlyTheParameterBits) {
  RawArgs raw{};
  raw.gpr[0] = 0xdeadbeefcafe0085ull;  // int8 -123 / uint8 133 under garbage
  raw.gpr[1] = 0x1234567880000000ull;  // int32 INT_MIN
  raw.stack[0] = 0xffffffff00007fffull;
  raw.stack_slots = 1;
  const ArgLocation g0{ArgLocation::Gpr, 0}, g1{ArgLocation::Gpr, 1}, s0{ArgLocation::Stack, 0};
  EXPECT_EQ(read_int(raw, g0, 8, true), -123);
  EXPECT_EQ(read_int(raw, g0, 8, false), 133);
  EXPECT_EQ(read_int(raw, g0, 16, false), 0x0085);
  EXPECT_EQ(read_int(raw, g1, 32, true), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(read_int(raw, g1, 32, false), 0x80000000ll);
  EXPECT_EQ(read_int(raw, g1, 64, true), 0x1234567880000000ll);
  EXPECT_EQ(read_int(raw, s0, 16, true), 0x7fff);
  EXPECT_EQ(read_int(raw, s0, 32, true), 0x7fff);
  // A slot that was not captured reads as 0 rather than out of bounds.
  EXPECT_EQ(read_bits(raw, ArgLocation{ArgLocation::Stack, 1}), 0u);
  EXPECT_EQ(read_bits(raw, ArgLocation{ArgLocation::Gpr, 99}), 0u);
  raw.fpr[2] = 0xffffffff7f800001ull;  // a float in the low half of a register image
  EXPECT_EQ(std::bit_cast<uint32_t>(read_f32(raw, ArgLocation{ArgLocation::Fpr, 2})), 0x7f800001u);
  EXPECT_EQ(std::bit_cast<uint64_t>(read_f64(raw, ArgLocation{ArgLocation::Fpr, 2})), 0xffffffff7f800001ull);
}

// ---- Forwarding exactness ----

TEST(Forwarder, RejectsInvalidArguments) {
  EXPECT_EQ(Forwarder::create(nullptr, ReturnKind::Int32, nullptr, nullptr, nullptr), nullptr);
  void* fn = reinterpret_cast<void*>(&callee<>);
  EXPECT_EQ(Forwarder::create(fn, ReturnKind::Int32, nullptr, nullptr, nullptr, kMaxStackSlots + 1), nullptr);
  EXPECT_EQ(Forwarder::create(fn, ReturnKind::Int32, nullptr, nullptr, nullptr, -1), nullptr);
}

TEST(Forwarder, MixedScalarsIncludingNarrowIntegers) {
  int local = 0;
  check_forwarding(int8_t{-5}, 3.25, 1.5f, int64_t{-9000000000000}, static_cast<void*>(&local));
  check_forwarding(int8_t{127}, f64(kNegZero64), f32(kNegZero32), std::numeric_limits<int64_t>::min(),
                   static_cast<void*>(nullptr));
  check_forwarding(true, uint8_t{250}, int16_t{-32768}, uint16_t{65535}, int32_t{-1}, uint32_t{4000000000u},
                   int8_t{-128}, false, uint64_t{~0ull});
  check_forwarding();  // no parameters at all
}

TEST(Forwarder, NaNPayloadsSignedZerosAndDenormalsPassAsBits) {
  check_forwarding(f64(kSNaN64), f32(kSNaN32), f64(kQNaNPayload64), f32(kQNaNPayload32), f64(kNegNaN64),
                   f32(kNegZero32), f64(kDenormMin64), f32(kDenormMin32), f64(kDenormMax64), f32(kNegDenormMax32),
                   f64(kInf64), f64(kNegZero64));
}

TEST(Forwarder, TenIntsTenDoublesAndFloatsSpillingToTheStack) {
  // Interleaved: ints 7-10 and doubles 9-10 go to the stack, then everything after them.
  check_forwarding(int64_t{1}, f64(kSNaN64), int64_t{-2}, 2.5, int64_t{3}, f64(kNegZero64), int64_t{4},
                   f64(kDenormMin64), int64_t{5}, 5.5, int64_t{6}, 6.5, int64_t{-7}, 7.5, int64_t{8}, 8.5,
                   int64_t{0x7fffffffffffffff}, f64(kQNaNPayload64), int64_t{10}, f64(kNegNaN64), f32(kSNaN32),
                   f32(kNegDenormMax32), int8_t{-100}, f32(kQNaNPayload32), int16_t{-2}, uint8_t{0xff}, true,
                   f32(kNegZero32), int32_t{-123456789});
  // All floating point first, then all integers: the stack holds doubles, then ints.
  check_forwarding(1.0, 2.0f, 3.0, 4.0f, 5.0, 6.0f, 7.0, 8.0f, 9.0, f32(kSNaN32), f64(kDenormMax64), int8_t{-1},
                   int16_t{-1}, int32_t{-1}, int64_t{-1}, uint8_t{1}, uint16_t{2}, uint32_t{3}, uint64_t{4});
}

namespace {
void* fake_ptr(size_t i) { return reinterpret_cast<void*>(static_cast<uintptr_t>(0x7f0000001000ull + 0x40 * i)); }
int64_t fake_int(size_t i) { return static_cast<int64_t>(0x0101010101010101ull * (i + 1)) ^ (int64_t{-1} << 60); }
template <size_t... P, size_t... T>
void check_wide_aclnn_like(std::index_sequence<P...>, std::index_sequence<T...>) {
  // The shape of aclnnFusedInferAttentionScoreV4GetWorkspaceSize (29 pointers, double scaleValue, 17
  // integers, of which a bool) plus a few more.
  check_forwarding(fake_ptr(P)..., 0.08838834764831845, fake_int(T)..., true, int8_t{-3}, int64_t{17}, fake_ptr(99));
}
template <size_t... I>
void check_max_ints(std::index_sequence<I...>) {
  check_forwarding(static_cast<int64_t>(0x9e3779b97f4a7c15ull * (I + 1))...);
}
}  // namespace

TEST(Forwarder, WideAclnnShapedPrototype) {
  check_wide_aclnn_like(std::make_index_sequence<29>(), std::make_index_sequence<16>());
}

TEST(Forwarder, EveryCapturedStackSlotIsForwarded) {
  // kGprArgs + kMaxStackSlots integers: the last parameter lands in the last captured slot.
  check_max_ints(std::make_index_sequence<kGprArgs + kMaxStackSlots>());
}

TEST(Forwarder, GarbageAboveNarrowIntegersIsIgnoredByTheReaders) {
  // A caller may leave anything above a narrow parameter. Call a function of narrow parameters through a
  // pointer of 64-bit parameters to put garbage there on purpose (12 parameters: some on the stack on both
  // ABIs); the callee, compiled by gcc, looks only at the declared bits, and so must the hooks.
#if defined(__clang__)
  GTEST_SKIP() << "clang-compiled callees rely on callers extending narrow integers to 32 bits";
#endif
  using Real =
      int32_t (*)(bool, uint8_t, int16_t, uint16_t, int32_t, uint32_t, int8_t, int8_t, int16_t, bool, int32_t, uint8_t);
  Real real =
      &callee<bool, uint8_t, int16_t, uint16_t, int32_t, uint32_t, int8_t, int8_t, int16_t, bool, int32_t, uint8_t>;
  const std::vector<Param> params{param_of(true),
                                  param_of(uint8_t{0xfe}),
                                  param_of(int16_t{-32767}),
                                  param_of(uint16_t{0xffff}),
                                  param_of(INT32_MIN),
                                  param_of(uint32_t{0xfffffffe}),
                                  param_of(int8_t{-123}),
                                  param_of(int8_t{5}),
                                  param_of(int16_t{-2}),
                                  param_of(false),
                                  param_of(int32_t{77}),
                                  param_of(uint8_t{0x80})};
  Probe probe{params};
  Forwarder* fw = make_fw(reinterpret_cast<void*>(real), ReturnKind::Int32, probe_pre, probe_post, &probe);
  ASSERT_NE(fw, nullptr);
  using Dirty = int32_t (*)(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t,
                            uint64_t, uint64_t, uint64_t);
  auto dirty = reinterpret_cast<Dirty>(fw->entry());
  const int32_t got = dirty(0xabcdef0123456701ull, 0x55555555555555feull, 0x1111111111118001ull, 0x222222222222ffffull,
                            0x3333333380000000ull, 0x44444444fffffffeull, 0xdeadbeefcafe0085ull, 0xffffffffffffff05ull,
                            0x000000000001fffeull, 0xffffffffffffff00ull, 0x800000000000004dull, 0x7777777777777780ull);
  EXPECT_EQ(t_seen, expected_seen(params));
  EXPECT_EQ(got, static_cast<int32_t>(fold(expected_seen(params))));
  EXPECT_TRUE(probe.mismatches.empty()) << joined(probe.mismatches);
}

namespace {
NOIPA int32_t variadic_callee(int32_t n, ...) {
  va_list ap;
  va_start(ap, n);
  t_seen.clear();
  for (int i = 0; i < n; ++i) {
    t_seen.push_back(static_cast<uint64_t>(va_arg(ap, int64_t)));
    t_seen.push_back(std::bit_cast<uint64_t>(va_arg(ap, double)));
  }
  va_end(ap);
  return static_cast<int32_t>(fold(t_seen));
}
}  // namespace

TEST(Forwarder, VariadicCalleeGetsRegistersAndStackUnchanged) {
  // x86-64 variadic callees read %al (an upper bound of the vector registers used); ffi_call sets it.
  Forwarder* fw = make_fw(reinterpret_cast<void*>(&variadic_callee), ReturnKind::Int32, nullptr, nullptr, nullptr);
  ASSERT_NE(fw, nullptr);
  auto fn = reinterpret_cast<int32_t (*)(int32_t, ...)>(fw->entry());
  const int32_t direct = variadic_callee(10, int64_t{1}, f64(kSNaN64), int64_t{-2}, 2.0, int64_t{3}, 3.0, int64_t{4},
                                         4.0, int64_t{5}, 5.0, int64_t{6}, 6.0, int64_t{7}, 7.0, int64_t{8}, 8.0,
                                         int64_t{9}, f64(kNegZero64), int64_t{10}, f64(kDenormMin64));
  const std::vector<uint64_t> direct_seen = t_seen;
  t_seen.clear();
  const int32_t forwarded =
      fn(10, int64_t{1}, f64(kSNaN64), int64_t{-2}, 2.0, int64_t{3}, 3.0, int64_t{4}, 4.0, int64_t{5}, 5.0, int64_t{6},
         6.0, int64_t{7}, 7.0, int64_t{8}, 8.0, int64_t{9}, f64(kNegZero64), int64_t{10}, f64(kDenormMin64));
  EXPECT_EQ(t_seen, direct_seen);
  EXPECT_EQ(forwarded, direct);
  ASSERT_EQ(t_seen.size(), 20u);
  EXPECT_EQ(t_seen[1], kSNaN64);
  EXPECT_EQ(t_seen[19], kDenormMin64);
}

// ---- Return kinds ----

namespace {
template <class R>
void check_return(ReturnKind kind, uint64_t (*bits_of)(R)) {
  Probe probe{{param_of(int64_t{42}), param_of(f64(kSNaN64)), param_of(int8_t{-1})}};
  auto* real = &callee_ret<R, int64_t, double, int8_t>;
  Forwarder* fw = make_fw(reinterpret_cast<void*>(real), kind, probe_pre, probe_post, &probe);
  ASSERT_NE(fw, nullptr);
  EXPECT_EQ(fw->return_kind(), kind);
  const R direct = real(42, f64(kSNaN64), -1);
  const R got = reinterpret_cast<decltype(real)>(fw->entry())(42, f64(kSNaN64), -1);
  EXPECT_EQ(bits_of(got), bits_of(direct));
  EXPECT_EQ(probe.ret, bits_of(direct));
  EXPECT_TRUE(probe.mismatches.empty()) << joined(probe.mismatches);
}
}  // namespace

TEST(Forwarder, ReturnKinds) {
  check_return<int32_t>(ReturnKind::Int32, [](int32_t v) { return static_cast<uint64_t>(static_cast<int64_t>(v)); });
  check_return<int64_t>(ReturnKind::Int64, [](int64_t v) { return static_cast<uint64_t>(v); });
  check_return<void*>(ReturnKind::Pointer,
                      [](void* v) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(v)); });
  check_return<double>(ReturnKind::Float64, [](double v) { return std::bit_cast<uint64_t>(v); });
  check_return<float>(ReturnKind::Float32, [](float v) { return uint64_t{std::bit_cast<uint32_t>(v)}; });

  // Int32 is sign-extended for the post hook; the value with bit 31 set must stay negative.
  Probe probe{{param_of(int32_t{-7})}};
  auto* neg = +[](int32_t v) -> int32_t { return v * 1000000; };
  Forwarder* fw = make_fw(reinterpret_cast<void*>(neg), ReturnKind::Int32, nullptr, probe_post, &probe);
  ASSERT_NE(fw, nullptr);
  EXPECT_EQ(reinterpret_cast<int32_t (*)(int32_t)>(fw->entry())(-7), -7000000);
  EXPECT_EQ(static_cast<int64_t>(probe.ret), -7000000);

  // Void: the callee runs, the post hook gets 0.
  Probe vprobe{{param_of(int16_t{-9}), param_of(2.0f)}};
  auto* vreal = &callee_ret<void, int16_t, float>;
  Forwarder* vf = make_fw(reinterpret_cast<void*>(vreal), ReturnKind::Void, probe_pre, probe_post, &vprobe);
  ASSERT_NE(vf, nullptr);
  vprobe.ret = 123;
  t_seen.clear();
  reinterpret_cast<decltype(vreal)>(vf->entry())(-9, 2.0f);
  EXPECT_EQ(t_seen, expected_seen(vprobe.params));
  EXPECT_EQ(vprobe.ret, 0u);
  EXPECT_EQ(vprobe.post_calls, 1);
}

// ---- Hooks: exceptions, reentrancy, recursion ----

namespace {
void throwing_pre(void*, const RawArgs&) { throw std::runtime_error("hook failure"); }
void throwing_post(void*, const RawArgs&, uint64_t) { throw 42; }

Forwarder* g_inner = nullptr;
std::atomic<int> g_inner_results{0};
void nesting_pre(void* user, const RawArgs& raw) {
  // A hook that itself calls a forwarded function (as a hook calling a hooked ACL API would).
  auto inner = reinterpret_cast<int32_t (*)(int64_t, double)>(g_inner->entry());
  const int32_t r = inner(read_int(raw, {ArgLocation::Gpr, 0}, 64, true), read_f64(raw, {ArgLocation::Fpr, 0}));
  if (r ==
      callee<int64_t, double>(read_int(raw, {ArgLocation::Gpr, 0}, 64, true), read_f64(raw, {ArgLocation::Fpr, 0})))
    g_inner_results.fetch_add(1);
  probe_pre(user, raw);
}

Forwarder* g_recursive = nullptr;
std::atomic<int> g_recursion_pre{0};
NOIPA int32_t recursive_real(int32_t depth, double acc) {
  if (depth == 0) return static_cast<int32_t>(acc);
  return reinterpret_cast<int32_t (*)(int32_t, double)>(g_recursive->entry())(depth - 1, acc + depth);
}
void count_pre(void*, const RawArgs&) { g_recursion_pre.fetch_add(1); }
}  // namespace

TEST(Forwarder, ThrowingHooksDoNotChangeTheCall) {
  auto* real = &callee<int32_t, double>;
  Forwarder* fw = make_fw(reinterpret_cast<void*>(real), ReturnKind::Int32, throwing_pre, throwing_post, nullptr);
  ASSERT_NE(fw, nullptr);
  const int32_t want = real(5, 0.5);
  EXPECT_EQ(reinterpret_cast<decltype(real)>(fw->entry())(5, 0.5), want);
  EXPECT_EQ(reinterpret_cast<decltype(real)>(fw->entry())(5, 0.5), want);
}

TEST(Forwarder, HooksMayCallForwardedFunctions) {
  g_inner = make_fw(reinterpret_cast<void*>(&callee<int64_t, double>), ReturnKind::Int32, count_pre, nullptr, nullptr);
  ASSERT_NE(g_inner, nullptr);
  Probe probe{{param_of(int64_t{-77}), param_of(f64(kQNaNPayload64)), param_of(int8_t{3})}};
  auto* outer_real = &callee<int64_t, double, int8_t>;
  Forwarder* outer = make_fw(reinterpret_cast<void*>(outer_real), ReturnKind::Int32, nesting_pre, probe_post, &probe);
  ASSERT_NE(outer, nullptr);
  const int32_t want = outer_real(-77, f64(kQNaNPayload64), 3);
  EXPECT_EQ(reinterpret_cast<decltype(outer_real)>(outer->entry())(-77, f64(kQNaNPayload64), 3), want);
  EXPECT_EQ(g_inner_results.load(), 1);
  EXPECT_EQ(probe.pre_calls, 1);
  EXPECT_TRUE(probe.mismatches.empty()) << joined(probe.mismatches);

  // A real function that recurses through its own forwarder.
  g_recursive = make_fw(reinterpret_cast<void*>(&recursive_real), ReturnKind::Int32, count_pre, nullptr, nullptr);
  ASSERT_NE(g_recursive, nullptr);
  g_recursion_pre = 0;
  EXPECT_EQ(reinterpret_cast<int32_t (*)(int32_t, double)>(g_recursive->entry())(100, 0.0), 5050);
  EXPECT_EQ(g_recursion_pre.load(), 101);
}

namespace {
void* call_from_thread_entry(void* fw) {
  // Called straight from a thread's start routine on a minimal stack: the maximal capture reads slots
  // above this frame, which must be mapped.
  auto fn = reinterpret_cast<int32_t (*)()>(static_cast<Forwarder*>(fw)->entry());
  return reinterpret_cast<void*>(static_cast<intptr_t>(fn()));
}
}  // namespace

TEST(Forwarder, FewerArgumentsThanCapturedOnASmallThreadStack) {
  Forwarder* fw =
      make_fw(reinterpret_cast<void*>(&callee<>), ReturnKind::Int32, count_pre, nullptr, nullptr, kMaxStackSlots);
  ASSERT_NE(fw, nullptr);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, PTHREAD_STACK_MIN);
  pthread_t t;
  ASSERT_EQ(pthread_create(&t, &attr, call_from_thread_entry, fw), 0);
  void* result = nullptr;
  pthread_join(t, &result);
  pthread_attr_destroy(&attr);
  EXPECT_EQ(static_cast<int32_t>(reinterpret_cast<intptr_t>(result)), callee<>());
}

// ---- Threads ----

namespace {
using MtFn = int32_t (*)(int64_t, double, float, int8_t, int64_t, int64_t, int64_t, int64_t, int64_t, double, uint16_t);
constexpr MtFn kMtReal =
    &callee<int64_t, double, float, int8_t, int64_t, int64_t, int64_t, int64_t, int64_t, double, uint16_t>;
thread_local const std::vector<Param>* t_expected = nullptr;
std::atomic<int64_t> g_mt_pre{0}, g_mt_post{0}, g_mt_errors{0};

void mt_pre(void*, const RawArgs& raw) {
  Probe probe{*t_expected};
  check_params(probe, raw, "mt");
  g_mt_pre.fetch_add(1, std::memory_order_relaxed);
  if (!probe.mismatches.empty()) g_mt_errors.fetch_add(1, std::memory_order_relaxed);
}
void mt_post(void*, const RawArgs&, uint64_t ret) {
  g_mt_post.fetch_add(1, std::memory_order_relaxed);
  if (static_cast<int32_t>(ret) != static_cast<int32_t>(fold(expected_seen(*t_expected))))
    g_mt_errors.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

TEST(Forwarder, EightThreadsHundredThousandCallsEach) {
  Forwarder* fw = make_fw(reinterpret_cast<void*>(kMtReal), ReturnKind::Int32, mt_pre, mt_post, nullptr);
  ASSERT_NE(fw, nullptr);
  auto fn = reinterpret_cast<MtFn>(fw->entry());
  constexpr int kThreads = 8, kCalls = 100000;
  std::atomic<int64_t> wrong_returns{0}, wrong_seen{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<Param> expected;
      t_expected = &expected;
      for (int i = 0; i < kCalls; ++i) {
        const int64_t a = (int64_t{t} << 40) + i;
        const double b = f64(0x7ff0000000000000ull | static_cast<uint64_t>(t * kCalls + i + 1));  // NaN payloads
        const float c = f32(0x00000001u + static_cast<uint32_t>(i));                              // denormals
        const auto d = static_cast<int8_t>(i - t);
        const double j = -static_cast<double>(i) * 0.5;
        const auto k = static_cast<uint16_t>(t * 1000 + i);
        expected = {param_of(a),     param_of(b),     param_of(c),     param_of(d), param_of(a + 1), param_of(a + 2),
                    param_of(a + 3), param_of(a + 4), param_of(a + 5), param_of(j), param_of(k)};
        const int32_t r = fn(a, b, c, d, a + 1, a + 2, a + 3, a + 4, a + 5, j, k);
        if (r != static_cast<int32_t>(fold(expected_seen(expected)))) wrong_returns.fetch_add(1);
        if (t_seen != expected_seen(expected)) wrong_seen.fetch_add(1);
      }
      t_expected = nullptr;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong_returns.load(), 0);
  EXPECT_EQ(wrong_seen.load(), 0);
  EXPECT_EQ(g_mt_errors.load(), 0);
  EXPECT_EQ(g_mt_pre.load(), int64_t{kThreads} * kCalls);
  EXPECT_EQ(g_mt_post.load(), int64_t{kThreads} * kCalls);
}

// ---- Trampolines: prepend entries, struct returns, exceptions and stack walks ----

namespace {
struct PrependSeen {
  void* user;
  int64_t a, b, c, d;
  uint64_t x, y;  // FP arguments, as bits: they stay in their registers
};
thread_local PrependSeen t_prepend;
NOIPA int64_t prepend_target(void* user, int64_t a, int64_t b, double x, int64_t c, float y, int64_t d) {
  t_prepend = {user, a, b, c, d, std::bit_cast<uint64_t>(x), std::bit_cast<uint32_t>(y)};
  return a ^ b ^ c ^ d;
}

// Returned through a hidden pointer (x86-64: rdi; aarch64: x8), with arguments on the stack too.
struct Big {
  int64_t v[6];
  double d;
};
NOIPA Big big_callee(int64_t a, double x, int64_t b, int64_t c, int64_t e, int64_t f, int64_t g, int64_t h, int64_t i,
                     int64_t j, float y) {
  Big r{};
  const int64_t in[] = {a, b, c, e, f, g, h, i, j};
  for (int k = 0; k < 9; ++k) r.v[k % 6] = r.v[k % 6] * 31 + in[k];
  r.d = x * 2 + static_cast<double>(y);
  return r;
}

std::atomic<int> g_decide_calls{0};
void* decide_real(void* real, const uint64_t*) {
  g_decide_calls.fetch_add(1, std::memory_order_relaxed);
  return real;
}

struct Thrown {
  int64_t a;
  double x;
};
NOIPA int32_t throwing_real(int64_t a, double x, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t b) {
  if (a != 0) throw Thrown{a + b, x};
  return 7;
}
NOIPA int32_t throwing_phase2(void* user, void* ws, uint64_t size, void* ex, void* stream) {
  if (size != 0) throw Thrown{static_cast<int64_t>(size), 0.0};
  return static_cast<int32_t>(reinterpret_cast<uintptr_t>(user) + reinterpret_cast<uintptr_t>(ws) +
                              reinterpret_cast<uintptr_t>(ex) + reinterpret_cast<uintptr_t>(stream));
}

// What the gate sees of the stack: the unwinder must walk from the gate, through the trampoline's frame, up to
// the function that made the call (call_through below), and beyond.
std::vector<uintptr_t> g_walk;
_Unwind_Reason_Code collect(_Unwind_Context* ctx, void*) {
  g_walk.push_back(_Unwind_GetIP(ctx));
  return g_walk.size() < 64 ? _URC_NO_REASON : _URC_END_OF_STACK;
}
bool walking_gate(void*, const uint64_t*) {
  g_walk.clear();
  _Unwind_Backtrace(&collect, nullptr);
  return false;
}
uintptr_t g_return_into_caller = 0;
NOIPA int32_t call_through(int32_t (*fn)(int64_t, double)) {
  const int32_t r = fn(5, 0.25);
  g_return_into_caller = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  return r + 1;
}
}  // namespace

TEST(Trampoline, PrependShiftsIntegerArgumentsAndLeavesFloatingPointAlone) {
  int user_obj = 0;
  void* t = make_prepend_trampoline(reinterpret_cast<void*>(&prepend_target), &user_obj);
  ASSERT_NE(t, nullptr);
  auto fn = reinterpret_cast<int64_t (*)(int64_t, int64_t, double, int64_t, float, int64_t)>(t);
  const int64_t r =
      fn(-1, 0x123456789abcdefll, f64(kSNaN64), 42, f32(kNegDenormMax32), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(r, -1 ^ 0x123456789abcdefll ^ 42 ^ std::numeric_limits<int64_t>::min());
  EXPECT_EQ(t_prepend.user, &user_obj);
  EXPECT_EQ(t_prepend.a, -1);
  EXPECT_EQ(t_prepend.b, 0x123456789abcdefll);
  EXPECT_EQ(t_prepend.c, 42);
  EXPECT_EQ(t_prepend.d, std::numeric_limits<int64_t>::min());
  EXPECT_EQ(t_prepend.x, kSNaN64);
  EXPECT_EQ(t_prepend.y, kNegDenormMax32);
}

TEST(Trampoline, StructReturnedThroughHiddenPointerWithStackArguments) {
  void* t = make_gate_trampoline(&decide_real, reinterpret_cast<void*>(&big_callee));
  ASSERT_NE(t, nullptr);
  auto fn = reinterpret_cast<decltype(&big_callee)>(t);
  const int before = g_decide_calls.load();
  const Big want = big_callee(1, 0.5, -2, 3, -4, 5, -6, 7, -8, 9, 1.5f);
  const Big got = fn(1, 0.5, -2, 3, -4, 5, -6, 7, -8, 9, 1.5f);
  EXPECT_EQ(g_decide_calls.load(), before + 1);
  for (int k = 0; k < 6; ++k) EXPECT_EQ(got.v[k], want.v[k]) << k;
  EXPECT_EQ(std::bit_cast<uint64_t>(got.d), std::bit_cast<uint64_t>(want.d));
}

TEST(Trampoline, ExceptionsFromTheRealFunctionReachTheCaller) {
  using Fn = int32_t (*)(int64_t, double, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t);
  for (int gate : {0, 1, 2}) {  // closure only, gate open (-> closure), gate closed (-> real)
    SCOPED_TRACE("gate=" + std::to_string(gate));
    Probe probe{{}};
    probe.gate_open = gate == 1;
    Forwarder* fw = Forwarder::create(
        reinterpret_cast<void*>(&throwing_real), ReturnKind::Int32, count_pre, nullptr, &probe, 1,
        gate == 0 ? nullptr : +[](void* u, const uint64_t*) { return static_cast<Probe*>(u)->gate_open; });
    ASSERT_NE(fw, nullptr);
    auto fn = reinterpret_cast<Fn>(fw->entry());
    EXPECT_EQ(fn(0, 1.0, 0, 0, 0, 0, 0, 0), 7);
    bool caught = false;
    try {
      fn(40, 2.5, 0, 0, 0, 0, 0, 2);  // 7 integers: the last one on the stack on x86-64
    } catch (const Thrown& e) {
      caught = true;
      EXPECT_EQ(e.a, 42);
      EXPECT_EQ(e.x, 2.5);
    }
    EXPECT_TRUE(caught);
    EXPECT_EQ(fn(0, 1.0, 0, 0, 0, 0, 0, 0), 7);  // and the next call still works
  }
  void* t = make_prepend_trampoline(reinterpret_cast<void*>(&throwing_phase2), nullptr);
  ASSERT_NE(t, nullptr);
  auto p2 = reinterpret_cast<int32_t (*)(void*, uint64_t, void*, void*)>(t);
  EXPECT_EQ(p2(reinterpret_cast<void*>(1), 0, reinterpret_cast<void*>(2), reinterpret_cast<void*>(4)), 7);
  EXPECT_THROW(p2(nullptr, 9, nullptr, nullptr), Thrown);
}

TEST(Trampoline, TheUnwinderWalksFromTheGateThroughTheTrampolineToTheCaller) {
  Forwarder* fw = Forwarder::create(reinterpret_cast<void*>(&callee<int64_t, double>), ReturnKind::Int32, nullptr,
                                    nullptr, nullptr, 0, walking_gate);
  ASSERT_NE(fw, nullptr);
  ASSERT_TRUE(fw->gated());
  const int32_t r = call_through(reinterpret_cast<int32_t (*)(int64_t, double)>(fw->entry()));
  const int32_t want = callee<int64_t, double>(5, 0.25) + 1;
  EXPECT_EQ(r, want);
  // The walk passed through call_through (its frame's IPs lie between its entry and where it returns to, which
  // is in this test) and went on to the test body that called it.
  const auto begin = reinterpret_cast<uintptr_t>(&call_through);
  bool in_caller = false, beyond = false;
  for (size_t i = 0; i < g_walk.size(); ++i) {
    if (g_walk[i] > begin && g_walk[i] < begin + 512) {
      in_caller = true;
      beyond = i + 1 < g_walk.size();
    }
  }
  EXPECT_TRUE(in_caller) << g_walk.size() << " frames";
  EXPECT_TRUE(beyond);
  EXPECT_NE(g_return_into_caller, 0u);
}

TEST(Trampoline, ThreadsThroughClosedAndOpenGates) {
  // Half of the calls go through the hooks, half straight to the real function, from 4 threads at once.
  using Fn = int32_t (*)(int64_t, double, float, int8_t, int64_t, int64_t, int64_t, int64_t, int64_t, double, uint16_t);
  static std::atomic<int64_t> hooked{0};
  Forwarder* fw = Forwarder::create(
      reinterpret_cast<void*>(kMtReal), ReturnKind::Int32,
      +[](void*, const RawArgs&) { hooked.fetch_add(1, std::memory_order_relaxed); }, nullptr, nullptr, kMaxStackSlots,
      +[](void*, const uint64_t* gpr) { return (gpr[0] & 1) != 0; });
  ASSERT_NE(fw, nullptr);
  auto fn = reinterpret_cast<Fn>(fw->entry());
  std::atomic<int64_t> wrong{0};
  std::vector<std::thread> threads;
  constexpr int kCalls = 20000;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) {
        const int64_t a = (int64_t{t} << 32) + i;
        const double b = f64(0x7ff0000000000000ull | static_cast<uint64_t>(i + 1));
        const int32_t want = kMtReal(a, b, 1.5f, -3, a, -a, 7, 8, 9, -0.0, 65535);
        if (fn(a, b, 1.5f, -3, a, -a, 7, 8, 9, -0.0, 65535) != want) wrong.fetch_add(1);
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(hooked.load(), 4 * kCalls / 2);
}

// ---- Around trampolines: a gate and a post hook alone, every argument in registers ----

namespace {
NOIPA int32_t around_throwing(int64_t a, double x) {
  if (a < 0) throw Thrown{a, x};
  return static_cast<int32_t>(a) + 1;
}
bool open(void*, const uint64_t*) { return true; }
void walking_post(void*, const RawArgs&, uint64_t) {
  g_walk.clear();
  _Unwind_Backtrace(&collect, nullptr);
}
}  // namespace

TEST(Trampoline, AroundCallsTheRealFunctionThenThePostHookWithTheCallersArguments) {
  // Six integers and eight floating-point values: every argument register of x86-64, none on the stack.
  auto* real = &callee<int64_t, double, int8_t, float, uint16_t, double, void*, float, int32_t, double, bool, double,
                       float, double>;
  const int64_t a = std::numeric_limits<int64_t>::min() + 3;
  void* p = reinterpret_cast<void*>(uintptr_t{0xdeadbeefcafe});
  const std::vector<Param> params{param_of(a),           param_of(f64(kSNaN64)),  param_of(int8_t{-5}),
                                  param_of(f32(kNegDenormMax32)), param_of(uint16_t{65535}), param_of(-0.0),
                                  param_of(p),           param_of(1.5f),          param_of(int32_t{-1}),
                                  param_of(f64(kQNaNPayload64)), param_of(true), param_of(2.5),
                                  param_of(-3.0f),       param_of(1e300)};
  std::vector<ArgClass> classes;
  for (const Param& q : params) classes.push_back(q.cls);
  ASSERT_EQ(stack_slots_needed(classes), 0);
  const int32_t want = static_cast<int32_t>(fold(expected_seen(params)));
  for (bool gate_open : {true, false}) {
    SCOPED_TRACE(gate_open ? "gate open" : "gate closed");
    Probe probe{params};
    probe.gate_open = gate_open;
    Forwarder* fw = Forwarder::create(reinterpret_cast<void*>(real), ReturnKind::Int32, nullptr, probe_post, &probe, 0,
                                      probe_gate);
    ASSERT_NE(fw, nullptr);
    EXPECT_TRUE(fw->gated());
    EXPECT_NE(fw->entry(), fw->closure());  // the around trampoline, not libffi
    auto fn = reinterpret_cast<decltype(real)>(fw->entry());
    t_seen.clear();
    const int32_t got = fn(a, f64(kSNaN64), -5, f32(kNegDenormMax32), 65535, -0.0, p, 1.5f, -1, f64(kQNaNPayload64),
                           true, 2.5, -3.0f, 1e300);
    EXPECT_EQ(got, want);
    EXPECT_EQ(t_seen, expected_seen(params));
    EXPECT_EQ(probe.gate_calls, 1);
    EXPECT_EQ(probe.post_calls, gate_open ? 1 : 0);
    if (gate_open) {
      EXPECT_EQ(static_cast<int32_t>(probe.ret), want);
    }
    EXPECT_TRUE(probe.mismatches.empty()) << joined(probe.mismatches);
  }
}

TEST(Trampoline, AroundReturnsPointersAndInt64WholeAndLetsExceptionsThrough) {
  Probe probe{{param_of(int64_t{9})}};
  auto* preal = &callee_ret<void*, int64_t>;
  Forwarder* pf = Forwarder::create(reinterpret_cast<void*>(preal), ReturnKind::Pointer, nullptr, probe_post, &probe, 0,
                                    open);
  ASSERT_NE(pf, nullptr);
  EXPECT_EQ(reinterpret_cast<decltype(preal)>(pf->entry())(9), preal(9));
  EXPECT_EQ(probe.ret, reinterpret_cast<uintptr_t>(preal(9)));
  Forwarder* tf = Forwarder::create(reinterpret_cast<void*>(&around_throwing), ReturnKind::Int32, nullptr, probe_post,
                                    &probe, 0, open);
  ASSERT_NE(tf, nullptr);
  auto fn = reinterpret_cast<decltype(&around_throwing)>(tf->entry());
  const int before = probe.post_calls;
  bool caught = false;
  try {
    fn(-4, 0.5);
  } catch (const Thrown& e) {
    caught = e.a == -4 && e.x == 0.5;
  }
  EXPECT_TRUE(caught);
  EXPECT_EQ(probe.post_calls, before);  // the call never returned
  EXPECT_EQ(fn(6, 0.5), 7);             // and the next one works
  EXPECT_EQ(probe.post_calls, before + 1);
}

TEST(Trampoline, TheUnwinderWalksFromTheAroundPostHookThroughTheTrampolineToTheCaller) {
  Forwarder* fw = Forwarder::create(reinterpret_cast<void*>(&callee<int64_t, double>), ReturnKind::Int32, nullptr,
                                    walking_post, nullptr, 0, open);
  ASSERT_NE(fw, nullptr);
  ASSERT_NE(fw->entry(), fw->closure());
  const int32_t r = call_through(reinterpret_cast<int32_t (*)(int64_t, double)>(fw->entry()));
  const int32_t want = callee<int64_t, double>(5, 0.25) + 1;
  EXPECT_EQ(r, want);
  const auto begin = reinterpret_cast<uintptr_t>(&call_through);
  bool in_caller = false, beyond = false;
  for (size_t i = 0; i < g_walk.size(); ++i)
    if (g_walk[i] > begin && g_walk[i] < begin + 512) {
      in_caller = true;
      beyond = i + 1 < g_walk.size();
    }
  EXPECT_TRUE(in_caller) << g_walk.size() << " frames";
  EXPECT_TRUE(beyond);
}

// ---- Cost (printed, not asserted: the machine is shared) ----

namespace {
NOIPA int32_t bench_real(void* a, void* b, double c, void* d) {
  return static_cast<int32_t>(reinterpret_cast<uintptr_t>(a) + reinterpret_cast<uintptr_t>(b) +
                              reinterpret_cast<uintptr_t>(d)) +
         static_cast<int32_t>(c);
}
std::atomic<uint64_t> g_bench_sink{0};
void bench_pre(void*, const RawArgs& raw) { g_bench_sink.fetch_add(raw.gpr[0], std::memory_order_relaxed); }
void bench_post(void*, const RawArgs&, uint64_t ret) { g_bench_sink.fetch_add(ret, std::memory_order_relaxed); }

double ns_per_call(int32_t (*fn)(void*, void*, double, void*)) {
  constexpr int kIters = 200000;
  int64_t sum = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kIters; ++i) sum += fn(reinterpret_cast<void*>(static_cast<uintptr_t>(i)), nullptr, 1.0, nullptr);
  const auto t1 = std::chrono::steady_clock::now();
  g_bench_sink.fetch_add(static_cast<uint64_t>(sum), std::memory_order_relaxed);
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / kIters;
}
}  // namespace

TEST(ForwarderCost, NanosecondsPerCall) {
  using Fn = int32_t (*)(void*, void*, double, void*);
  auto make = [](PreHook pre, PostHook post, int slots) {
    Forwarder* f = make_fw(reinterpret_cast<void*>(&bench_real), ReturnKind::Int32, pre, post, nullptr, slots);
    EXPECT_NE(f, nullptr);
    return reinterpret_cast<Fn>(f->entry());
  };
  const double direct = ns_per_call(&bench_real);
  const double bare_max = ns_per_call(make(nullptr, nullptr, kMaxStackSlots));
  const double bare_exact = ns_per_call(make(nullptr, nullptr, 0));
  const double hooked_max = ns_per_call(make(bench_pre, bench_post, kMaxStackSlots));
  const double hooked_exact = ns_per_call(make(bench_pre, bench_post, 0));
  Forwarder* closed = Forwarder::create(
      reinterpret_cast<void*>(&bench_real), ReturnKind::Int32, bench_pre, bench_post, nullptr, 0,
      +[](void*, const uint64_t*) { return false; });
  ASSERT_NE(closed, nullptr);
  const double gate_closed = ns_per_call(reinterpret_cast<Fn>(closed->entry()));
  std::printf(
      "[ cost ] direct %.1f ns/call; forwarded, no hooks: %.1f ns (%d stack slots), %.1f ns (0 slots); "
      "with hooks: %.1f ns (%d slots), %.1f ns (0 slots); gate trampoline, gate closed: %.1f ns\n",
      direct, bare_max, kMaxStackSlots, bare_exact, hooked_max, kMaxStackSlots, hooked_exact, gate_closed);
}
