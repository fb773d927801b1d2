// GOT patching on a real program: this test executable is linked against libgot_target.so (and
// libgot_caller.so, which calls it through its own GOT), once with lazy binding and once with -z now and full
// RELRO (GOT_BIND_NOW). Entries are redirected to Forwarder wrappers; calls through the PLT must reach the
// wrappers and still return what the library computes.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "got_target.h"
#include "shim/call/forwarder.h"
#include "shim/base/got_patch.h"

using namespace msprobe::shim;

namespace {

// ---- Wrappers: one Forwarder per symbol, counting calls and checking arguments where known ----

struct Wrap {
  std::string name;
  Forwarder* fw = nullptr;
  std::atomic<int> calls{0};
  std::atomic<int> arg_errors{0};
};

std::mutex g_mu;
std::map<std::string, Wrap*> g_wraps;                         // by symbol
std::map<std::string, std::vector<void*>> g_offered_current;  // what the callback was given, by symbol

ReturnKind return_kind_of(const std::string& name) {
  if (name == "got_scale") return ReturnKind::Float64;
  if (name.rfind("got_lazy", 0) == 0) return ReturnKind::Int64;
  return ReturnKind::Int32;
}

void wrap_pre(void* user, const RawArgs& raw) {
  auto* w = static_cast<Wrap*>(user);
  w->calls.fetch_add(1);
  if (w->name == "got_scale") {  // (2.5, 4.0f, -3, 1e12, 1, 2, 3, 4, -7): the last one on the stack on x86-64
    using C = ArgClass;
    const auto loc = locate_args(
        {C::Float64, C::Float32, C::Integer, C::Integer, C::Integer, C::Integer, C::Integer, C::Integer, C::Integer});
    const bool ok = read_f64(raw, loc[0]) == 2.5 && read_f32(raw, loc[1]) == 4.0f &&
                    read_int(raw, loc[2], 8, true) == -3 && read_int(raw, loc[3], 64, true) == 1000000000000 &&
                    read_int(raw, loc[4], 32, true) == 1 && read_int(raw, loc[7], 32, true) == 4 &&
                    read_int(raw, loc[8], 8, true) == -7;
    if (!ok) w->arg_errors.fetch_add(1);
  }
}

void* wrapper_for(const char* name, void* real) {
  std::lock_guard<std::mutex> lock(g_mu);
  Wrap*& w = g_wraps[name];
  if (!w) {
    w = new Wrap;
    w->name = name;
    w->fw = Forwarder::create(real, return_kind_of(name), wrap_pre, nullptr, w);
  }
  if (real == w->fw->entry()) return real;  // already redirected (by another patcher)
  EXPECT_EQ(w->fw->real(), real) << name;
  return w->fw->entry();
}

Wrap& wrap(const std::string& name) {
  std::lock_guard<std::mutex> lock(g_mu);
  Wrap*& w = g_wraps[name];
  if (!w) {
    w = new Wrap;
    w->name = name;
  }
  return *w;
}

std::vector<void*> offered(const std::string& name) {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_offered_current[name];
}

// Redirects the named symbols to their wrappers; records what the callback was offered.
ReplacementFor wrap_names(std::set<std::string> names) {
  return [names](const char* name, void* current) -> void* {
    if (!names.count(name)) return nullptr;
    {
      std::lock_guard<std::mutex> lock(g_mu);
      g_offered_current[name].push_back(current);
    }
    if (current == nullptr) return nullptr;
    return wrapper_for(name, current);
  };
}

PatchOptions options_patching_this_program() {
  PatchOptions o;
  o.skip_self = false;  // the shim core is linked into this executable
  o.resolve = [](const char* name) { return dlsym(RTLD_DEFAULT, name); };
  return o;
}

void* real_of(const char* name) { return dlsym(RTLD_DEFAULT, name); }

const GotSlot* find_slot(const std::vector<GotSlot>& v, const std::string& object_part, const std::string& symbol) {
  for (const GotSlot& s : v)
    if (s.symbol == symbol &&
        (object_part.empty() ? s.object.empty() : s.object.find(object_part) != std::string::npos))
      return &s;
  return nullptr;
}

// Permissions ("r--p", "rw-p", ...) of the mapping containing addr, from /proc/self/maps.
std::string protection_of(const void* addr) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  const auto a = reinterpret_cast<uintptr_t>(addr);
  while (std::getline(maps, line)) {
    uintptr_t lo = 0, hi = 0;
    char perms[8] = {};
    if (std::sscanf(line.c_str(), "%" SCNxPTR "-%" SCNxPTR " %7s", &lo, &hi, perms) == 3 && a >= lo && a < hi)
      return perms;
  }
  return "?";
}

bool bind_now() { return GOT_BIND_NOW || (std::getenv("LD_BIND_NOW") && *std::getenv("LD_BIND_NOW")); }

// Kept out of line so that the GOT entry is read at each call, after patching.
__attribute__((noinline)) int32_t (*address_of_mul())(int32_t, int32_t) {
  int32_t (*volatile p)(int32_t, int32_t) = &got_mul;
  return p;
}

}  // namespace

TEST(GotPatch, ListsTheProgramsEntriesWithTheirKindAndProtection) {
  (void)got_add(1, 1);  // bound from here on, whatever the binding mode
  const std::vector<GotSlot> slots = list_got_slots(options_patching_this_program());
  const GotSlot* add = find_slot(slots, "", "got_add");
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(add->kind, GotSlotKind::JumpSlot);
  EXPECT_EQ(add->target, real_of("got_add"));
  EXPECT_TRUE(add->bound);
  EXPECT_EQ(add->relro, GOT_BIND_NOW == 1);  // full RELRO covers .got.plt too; partial RELRO does not
  EXPECT_EQ(protection_of(add->slot).substr(0, 2), GOT_BIND_NOW ? "r-" : "rw");

  const GotSlot* mul = find_slot(slots, "", "got_mul");  // address taken
  ASSERT_NE(mul, nullptr);
  EXPECT_EQ(mul->kind, GotSlotKind::GlobDat);
  EXPECT_TRUE(mul->relro);
  EXPECT_EQ(protection_of(mul->slot).substr(0, 2), "r-");

  const GotSlot* probe = find_slot(slots, "", "got_lazy_probe");  // never called yet
  ASSERT_NE(probe, nullptr);
  EXPECT_EQ(probe->bound, bind_now());
  if (!bind_now()) {
    EXPECT_NE(probe->target, real_of("got_lazy_probe"));  // the PLT stub
  }

  EXPECT_NE(find_slot(slots, "libgot_caller", "got_sub"), nullptr);
  for (const GotSlot& s : slots) EXPECT_NE(s.symbol, "got_data_object") << "a data symbol was listed";
}

TEST(GotPatch, DefaultSkipsTheShimItselfTheLoaderAndTheVdso) {
  // With the defaults, the object containing patch_got (here: this executable) is not visited.
  for (const GotSlot& s : list_got_slots()) {
    EXPECT_FALSE(s.object.empty()) << "the shim's own object was listed: " << s.symbol;
    EXPECT_EQ(s.object.find("ld-linux"), std::string::npos) << s.object;
    EXPECT_EQ(s.object.find("vdso"), std::string::npos) << s.object;
  }
  // ld.so has JUMP_SLOT entries of its own (_dl_catch_exception, ...): they stay out even without self skip.
  for (const GotSlot& s : list_got_slots(options_patching_this_program()))
    EXPECT_EQ(s.object.find("ld-linux"), std::string::npos) << s.object << " " << s.symbol;
  EXPECT_NE(find_slot(list_got_slots(options_patching_this_program()), "", "got_add"), nullptr);
}

TEST(GotPatch, PltCallsReachTheWrapperAndReturnTheRealResults) {
  const double want_scale = got_scale(2.5, 4.0f, -3, 1000000000000, 1, 2, 3, 4, -7);
  EXPECT_EQ(want_scale, 2.5 * 4.0 - 3 + 1e12 + 1 + 2 + 3 + 4 - 7);

  GotPatcher patcher;
  std::vector<GotSlot> report;
  PatchOptions opts = options_patching_this_program();
  opts.patched = &report;
  opts.skip = [](const char* path) { return std::strstr(path, "libgot_caller") != nullptr; };
  const int n = patcher.patch(wrap_names({"got_add", "got_scale"}), opts);
  EXPECT_EQ(n, 2);
  ASSERT_EQ(report.size(), 2u);
  const GotSlot* add = find_slot(report, "", "got_add");
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(add->kind, GotSlotKind::JumpSlot);
  EXPECT_EQ(add->target, real_of("got_add"));  // the value before the write
  EXPECT_EQ(*add->slot, wrap("got_add").fw->entry());
  // A RELRO page is read-only again after the write.
  EXPECT_EQ(protection_of(add->slot).substr(0, 2), add->relro ? "r-" : "rw");

  const int before = wrap("got_add").calls.load();
  EXPECT_EQ(got_add(20, 22), 42);
  EXPECT_EQ(got_add(-5, 2), -3);
  EXPECT_EQ(wrap("got_add").calls.load(), before + 2);

  EXPECT_EQ(got_scale(2.5, 4.0f, -3, 1000000000000, 1, 2, 3, 4, -7), want_scale);
  EXPECT_EQ(wrap("got_scale").calls.load(), 1);
  EXPECT_EQ(wrap("got_scale").arg_errors.load(), 0);

  // libgot_caller was skipped: its own call to got_add still goes straight to the library.
  const int through_caller = wrap("got_add").calls.load();
  EXPECT_EQ(caller_add(1, 2), 3);
  EXPECT_EQ(wrap("got_add").calls.load(), through_caller);
}

TEST(GotPatch, GlobDatEntryChangesTheAddressTheProgramSees) {
  ASSERT_EQ(reinterpret_cast<void*>(address_of_mul()), real_of("got_mul"));
  GotPatcher patcher;
  std::vector<GotSlot> report;
  PatchOptions opts = options_patching_this_program();
  opts.patched = &report;
  ASSERT_EQ(patcher.patch(wrap_names({"got_mul"}), opts), 1);
  ASSERT_EQ(report.size(), 1u);
  EXPECT_EQ(report[0].kind, GotSlotKind::GlobDat);
  EXPECT_TRUE(report[0].relro);
  EXPECT_EQ(protection_of(report[0].slot).substr(0, 2), "r-");

  auto fp = address_of_mul();
  EXPECT_EQ(reinterpret_cast<void*>(fp), wrap("got_mul").fw->entry());
  EXPECT_EQ(fp(6, 7), 42);
  EXPECT_EQ(wrap("got_mul").calls.load(), 1);
}

// The shim's policy for hooked CANN functions (shim/hooks/linked_calls.h): calls redirected, `&fn` left as it is.
TEST(GotPatch, JumpSlotsOnlyLeavesTheAddressTheProgramSeesAndObservesBothKinds) {
  (void)got_add(1, 2);  // bound
  const auto mul_before = address_of_mul();  // another test may have redirected it already: it must not change here
  std::map<std::string, std::set<GotSlotKind>> observed;
  PatchOptions opts = options_patching_this_program();
  opts.jump_slots_only = true;
  opts.wants = [](const char* name) { return std::strcmp(name, "got_mul") == 0 || std::strcmp(name, "got_add") == 0; };
  opts.observe = [&observed](const GotSlot& s) { observed[s.object + ":" + s.symbol].insert(s.kind); };
  std::vector<std::string> asked;
  GotPatcher patcher;
  patcher.patch(
      [&asked](const char* name, void*) -> void* {
        asked.emplace_back(name);
        return nullptr;
      },
      opts);
  EXPECT_EQ(std::count(asked.begin(), asked.end(), "got_mul"), 0) << "a GLOB_DAT entry was offered";
  EXPECT_GE(std::count(asked.begin(), asked.end(), "got_add"), 1);  // the program's, libgot_caller's
  EXPECT_EQ(observed[":got_mul"], std::set<GotSlotKind>{GotSlotKind::GlobDat});
  EXPECT_EQ(observed[":got_add"], std::set<GotSlotKind>{GotSlotKind::JumpSlot});
  EXPECT_EQ(address_of_mul(), mul_before);

  // list_got_slots applies `wants` too.
  for (const GotSlot& s : list_got_slots(opts)) EXPECT_TRUE(s.symbol == "got_mul" || s.symbol == "got_add") << s.symbol;
  EXPECT_NE(find_slot(list_got_slots(opts), "", "got_mul"), nullptr);
}

TEST(GotPatch, LazyEntriesAreResolvedNeverHandedOverAsStubs) {
  GotPatcher patcher;
  ASSERT_EQ(patcher.patch(wrap_names({"got_lazy_probe"}), options_patching_this_program()), 1);
  ASSERT_EQ(offered("got_lazy_probe").size(), 1u);
  EXPECT_EQ(offered("got_lazy_probe")[0], real_of("got_lazy_probe"));  // resolved, in both binding modes
  EXPECT_EQ(got_lazy_probe(7, 2.9, -1), 7 * 10 + 2 - 1);
  EXPECT_EQ(wrap("got_lazy_probe").calls.load(), 1);

  // Without a resolver the callback learns that the target is unknown, and the entry stays as it is.
  GotPatcher other;
  PatchOptions no_resolver = options_patching_this_program();
  no_resolver.resolve = nullptr;
  EXPECT_EQ(other.patch(wrap_names({"got_lazy_unresolved"}), no_resolver), bind_now() ? 1 : 0);
  ASSERT_EQ(offered("got_lazy_unresolved").size(), 1u);
  EXPECT_EQ(offered("got_lazy_unresolved")[0], bind_now() ? real_of("got_lazy_unresolved") : nullptr);
  EXPECT_EQ(got_lazy_unresolved(5), 1005);
  EXPECT_EQ(wrap("got_lazy_unresolved").calls.load(), bind_now() ? 1 : 0);
}

TEST(GotPatch, OnlyWantedNamesAreResolvedAndALazyEntryHandedBackStaysLazy) {
  std::vector<std::string> resolved, offered_names;
  PatchOptions opts = options_patching_this_program();
  opts.wants = [](const char* name) { return std::strcmp(name, "got_lazy_untouched") == 0; };
  opts.resolve = [&resolved](const char* name) {
    resolved.emplace_back(name);
    return dlsym(RTLD_DEFAULT, name);
  };
  GotPatcher patcher;
  const int n = patcher.patch(
      [&offered_names](const char* name, void* current) {
        offered_names.emplace_back(name);
        return current;  // "leave it"
      },
      opts);
  EXPECT_EQ(n, 0);
  for (const std::string& r : resolved) EXPECT_EQ(r, "got_lazy_untouched");
  EXPECT_EQ(resolved.size(), bind_now() ? 0u : 1u);  // only the program calls it, lazily unless bound now
  ASSERT_EQ(offered_names.size(), 1u);
  EXPECT_EQ(offered_names[0], "got_lazy_untouched");

  const std::vector<GotSlot> slots = list_got_slots(options_patching_this_program());
  const GotSlot* entry = find_slot(slots, "", "got_lazy_untouched");
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry->bound, bind_now());  // still the PLT stub in the lazy program: nothing was written
  EXPECT_EQ(got_lazy_untouched(1), -999);
}

TEST(GotPatch, RepatchingIsIdempotentAndPicksUpNewlyLoadedObjects) {
  EXPECT_EQ(got_plugin_target(1), 4);
  GotPatcher patcher;
  std::vector<GotSlot> report;
  PatchOptions opts = options_patching_this_program();
  opts.patched = &report;
  auto cb = wrap_names({"got_plugin_target"});
  ASSERT_EQ(patcher.patch(cb, opts), 1);
  EXPECT_EQ(report.size(), 1u);

  // Again: nothing new, and objects already visited are not even offered again.
  const size_t offers = offered("got_plugin_target").size();
  EXPECT_EQ(patcher.patch(cb, opts), 0);
  EXPECT_EQ(offered("got_plugin_target").size(), offers);
  // A full rescan looks at every object again but leaves the entry it wrote alone.
  opts.rescan = true;
  EXPECT_EQ(patcher.patch(cb, opts), 0);
  EXPECT_EQ(offered("got_plugin_target").size(), offers);
  opts.rescan = false;
  EXPECT_EQ(report.size(), 1u);

  // A library opened now has an entry of its own: only that one is written.
  void* plugin = dlopen(GOT_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(plugin, nullptr) << dlerror();
  auto plugin_call = reinterpret_cast<int32_t (*)(int32_t)>(dlsym(plugin, "plugin_call"));
  ASSERT_NE(plugin_call, nullptr);
  const int calls = wrap("got_plugin_target").calls.load();
  EXPECT_EQ(plugin_call(2), 7);
  EXPECT_EQ(wrap("got_plugin_target").calls.load(), calls);  // not patched yet
  ASSERT_EQ(patcher.patch(cb, opts), 1);
  ASSERT_EQ(report.size(), 2u);
  EXPECT_NE(report[1].object.find("libgot_plugin"), std::string::npos) << report[1].object;
  EXPECT_EQ(plugin_call(2), 7);
  EXPECT_EQ(got_plugin_target(2), 7);
  EXPECT_EQ(wrap("got_plugin_target").calls.load(), calls + 2);
  EXPECT_EQ(patcher.patch(cb, opts), 0);
  dlclose(plugin);
}

TEST(GotPatch, SkippedObjectsAreUntouched) {
  // libgot_caller.so's entry for got_sub (still lazy there: libgot_caller was linked without -z now).
  const std::vector<GotSlot> before = list_got_slots(options_patching_this_program());
  const GotSlot* caller_entry = find_slot(before, "libgot_caller", "got_sub");
  ASSERT_NE(caller_entry, nullptr);
  void** const caller_slot = caller_entry->slot;
  void* const caller_value = caller_entry->target;

  GotPatcher patcher;
  std::vector<GotSlot> report;
  PatchOptions opts = options_patching_this_program();
  opts.patched = &report;
  std::vector<std::string> asked;
  opts.skip = [&asked](const char* path) {
    asked.emplace_back(path);
    return std::strstr(path, "libgot_caller") != nullptr;
  };
  ASSERT_EQ(patcher.patch(wrap_names({"got_sub"}), opts), 1);
  EXPECT_NE(std::find(asked.begin(), asked.end(), std::string()), asked.end()) << "main program not offered to skip";
  for (const GotSlot& s : report) EXPECT_EQ(s.object.find("libgot_caller"), std::string::npos);
  EXPECT_EQ(*caller_slot, caller_value);

  EXPECT_EQ(got_sub(10, 3), 7);
  EXPECT_EQ(wrap("got_sub").calls.load(), 1);
  EXPECT_EQ(caller_sub(10, 3), 7);
  EXPECT_EQ(wrap("got_sub").calls.load(), 1);

  // Without the skip, a new patcher redirects the caller's entry as well.
  GotPatcher all;
  EXPECT_EQ(all.patch(wrap_names({"got_sub"}), options_patching_this_program()), 1);  // the program's is done
  EXPECT_EQ(caller_sub(10, 3), 7);
  EXPECT_EQ(wrap("got_sub").calls.load(), 2);
}

TEST(GotPatch, DataSymbolsAndDeclinedEntriesStayAsTheyAre) {
  std::set<std::string> names;
  GotPatcher patcher;
  const int n = patcher.patch(
      [&names](const char* name, void*) -> void* {
        names.insert(name);
        return nullptr;
      },
      options_patching_this_program());
  EXPECT_EQ(n, 0);
  EXPECT_TRUE(names.count("got_declined"));
  EXPECT_TRUE(names.count("caller_read_data"));
  EXPECT_FALSE(names.count("got_data_object"));  // libgot_caller's GLOB_DAT for a variable
  EXPECT_EQ(caller_read_data(), 5);
  EXPECT_EQ(got_declined(3), -3);

  // A throwing callback is treated as "leave it alone".
  GotPatcher throwing;
  EXPECT_EQ(throwing.patch([](const char*, void*) -> void* { throw std::runtime_error("no"); },
                           options_patching_this_program()),
            0);
  EXPECT_EQ(got_declined(4), -4);
}

TEST(GotPatch, ProcessWidePatcherWhileOtherThreadsCall) {
  constexpr int kThreads = 4;
  std::atomic<bool> stop{false};
  std::atomic<int> ready{0};
  std::atomic<int64_t> wrong{0}, calls{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      bool first = true;
      for (int32_t i = t; !stop.load(std::memory_order_relaxed); i += kThreads) {
        if (got_concurrent(i) != (i ^ 0x5a5a)) wrong.fetch_add(1);
        calls.fetch_add(1, std::memory_order_relaxed);
        if (first) ready.fetch_add(1);  // bound now: patching does not race the lazy resolver
        first = false;
      }
    });
  while (ready.load() < kThreads) std::this_thread::yield();

  std::vector<GotSlot> report;
  PatchOptions opts = options_patching_this_program();
  opts.patched = &report;
  EXPECT_EQ(patch_got(wrap_names({"got_concurrent"}), opts), 1);
  EXPECT_EQ(patch_got(wrap_names({"got_concurrent"}), opts), 0);
  // Let the threads run through the wrapper for a while.
  const int64_t at_patch = calls.load();
  while (calls.load() < at_patch + 20000) std::this_thread::yield();
  stop = true;
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GE(wrap("got_concurrent").calls.load(), 10000);
}
