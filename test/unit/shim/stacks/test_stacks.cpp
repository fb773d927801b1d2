// Call stacks (shim/stacks/stacks.h): capture and dedupe, the shim-frame skip, the module map across dlopen/dlclose,
// ELF symbolization (checked against nm), debug files, the unwinder fallback, and C++ exceptions in a host while
// libunwind is loaded RTLD_LOCAL (in this process and in a separate host program with a preloaded prober).
// The Python side is tested by test_stacks_python.py.
#include <dlfcn.h>
#include <elf.h>
#include <gtest/gtest.h>
#include <link.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "shim/stacks/modules.h"
#include "shim/stacks/symbolize.h"
#include "shim/stacks/stack_python.h"
#include "shim/stacks/stack_unwind.h"
#include "shim/stacks/stacks.h"

using namespace msprobe::shim;

namespace fs = std::filesystem;

namespace {

volatile int g_sink;  // written after calls so that none is a tail call
// Loop bounds the compiler cannot see: a short loop unrolled would turn one call site into several.
volatile int g_zero = 0, g_two = 2, g_three = 3;

__attribute__((noinline)) StackId capture_site_a(StackTable &t) {
  const StackId id = t.capture();
  g_sink = 1;
  return id;
}

__attribute__((noinline)) StackId capture_site_b(StackTable &t) {
  const StackId id = t.capture();
  g_sink = 2;
  return id;
}

__attribute__((noinline)) StackId via_first(StackTable &t) {
  const StackId id = capture_site_a(t);
  g_sink = 3;
  return id;
}

__attribute__((noinline)) StackId via_second(StackTable &t) {
  const StackId id = capture_site_a(t);
  g_sink = 4;
  return id;
}

// 2^depth distinct stacks: each bit of `bits` picks one of two functions at one level.
__attribute__((noinline)) StackId rec_one(StackTable &t, unsigned bits, int depth);
__attribute__((noinline)) StackId rec_zero(StackTable &t, unsigned bits, int depth);
StackId rec(StackTable &t, unsigned bits, int depth) {
  if (depth == 0) return t.capture();
  return (bits & 1) ? rec_one(t, bits >> 1, depth - 1) : rec_zero(t, bits >> 1, depth - 1);
}
StackId rec_one(StackTable &t, unsigned bits, int depth) {
  const StackId id = rec(t, bits, depth);
  g_sink = 5;
  return id;
}
StackId rec_zero(StackTable &t, unsigned bits, int depth) {
  const StackId id = rec(t, bits, depth);
  g_sink = 6;
  return id;
}

struct Command {
  int status = -1;
  std::string out, err;
};

// Runs `cmd` through the shell; stdout and stderr captured separately.
Command run(const std::string &cmd) {
  Command r;
  char err_path[] = "/tmp/msprobe_stacks_errXXXXXX";
  const int fd = mkstemp(err_path);
  if (fd < 0) return r;
  close(fd);
  FILE *p = popen((cmd + " 2>" + err_path).c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  r.status = pclose(p);
  std::ifstream e(err_path);
  r.err.assign(std::istreambuf_iterator<char>(e), std::istreambuf_iterator<char>());
  unlink(err_path);
  return r;
}

std::vector<std::string> lines_with(const std::string &text, const std::string &prefix) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    if (l.rfind(prefix, 0) == 0) out.push_back(l.substr(prefix.size()));
  return out;
}

// nm's view of a file's function symbols: demangled name -> [start, end).
std::map<std::string, std::pair<uint64_t, uint64_t>> nm_functions(const std::string &path) {
  std::map<std::string, std::pair<uint64_t, uint64_t>> out;
  const Command c = run("nm -C -S --defined-only '" + path + "'");
  std::istringstream in(c.out);
  for (std::string l; std::getline(in, l);) {
    // "0000000000001139 000000000000001c t fixture_static_leaf(int)"
    std::istringstream ls(l);
    std::string addr, size, type;
    if (!(ls >> addr >> size >> type)) continue;
    if (type != "t" && type != "T" && type != "W" && type != "w") continue;
    std::string name;
    std::getline(ls, name);
    if (!name.empty() && name[0] == ' ') name.erase(0, 1);
    const uint64_t a = std::stoull(addr, nullptr, 16), s = std::stoull(size, nullptr, 16);
    out[name] = {a, a + s};
  }
  return out;
}

// "{symbol} ({module}+0x{offset})" -> symbol, module, offset.
struct Parsed {
  std::string symbol, module;
  uint64_t offset = 0;
  bool ok = false;
};
Parsed parse_native(const std::string &frame) {
  static const std::regex re(R"(^(.*) \(([^()]+)\+0x([0-9a-f]+)\)$)");
  std::smatch m;
  Parsed p;
  if (std::regex_match(frame, m, re)) {
    p.symbol = m[1];
    p.module = m[2];
    p.offset = std::stoull(m[3], nullptr, 16);
    p.ok = true;
  }
  return p;
}

std::string self_exe() { return fs::read_symlink("/proc/self/exe").string(); }

bool loaded(const std::string &basename) {
  struct Ctx {
    std::string name;
    bool found;
  } ctx{basename, false};
  dl_iterate_phdr(
      [](dl_phdr_info *info, size_t, void *data) {
        auto *c = static_cast<Ctx *>(data);
        if (info->dlpi_name && std::string(info->dlpi_name).find(c->name) != std::string::npos) c->found = true;
        return 0;
      },
      &ctx);
  return ctx.found;
}

// ---- Dedupe ---------------------------------------------------------------------------------------------------

TEST(StackTable, SameCallSiteSameIdDifferentSitesDifferentIds) {
  StackTable t;
  // Plain arrays, not vector::push_back: GCC (aarch64) duplicates the second call into both paths of the first
  // push_back (in place, reallocation), which would make two call sites of capture_site_b.
  StackId a[50] = {}, b[50] = {};
  for (int i = 0; i < 50; ++i) {
    a[i] = capture_site_a(t);
    b[i] = capture_site_b(t);
  }
  EXPECT_NE(a[0], kEmptyStack);
  EXPECT_NE(a[0], b[0]);
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(a[i], a[0]);
    EXPECT_EQ(b[i], b[0]);
  }
  EXPECT_EQ(t.size(), 3u);  // kEmptyStack + two stacks

  // The same function reached through two callers: two stacks, differing from the second frame on.
  const StackId x = via_first(t), y = via_second(t);
  EXPECT_NE(x, y);
  const auto nx = t.native_addresses(x), ny = t.native_addresses(y);
  ASSERT_GE(nx.size(), 3u);
  ASSERT_GE(ny.size(), 3u);
  EXPECT_EQ(nx[0], ny[0]);  // the same call site inside capture_site_a
  EXPECT_NE(nx[1], ny[1]);  // called from via_first vs via_second
}

TEST(StackTable, FirstFrameIsTheCallerOfCapture) {
  StackTable t;
  const StackId id = capture_site_a(t);
  const auto frames = t.frames(id, StackMode::Native);
  ASSERT_GE(frames.size(), 3u);
  EXPECT_EQ(parse_native(frames[0]).symbol, "(anonymous namespace)::capture_site_a(msprobe::shim::StackTable&)")
      << frames[0];
  EXPECT_NE(frames[1].find("FirstFrameIsTheCallerOfCapture_Test::TestBody()"), std::string::npos) << frames[1];
  for (const std::string &f : frames) EXPECT_EQ(f.find("StackTable::capture"), std::string::npos) << f;
}

TEST(StackTable, ManyDistinctStacksGetStableIds) {
  StackTable t;
  constexpr int kDepth = 11;  // 2048 stacks: the slot table grows several times
  std::vector<StackId> pass[2];
  for (int p = 0; p < g_two; ++p)  // one call site for both passes
    for (unsigned bits = 0; bits < (1u << kDepth); ++bits) pass[p].push_back(rec(t, bits, kDepth));
  std::set<StackId> distinct(pass[0].begin(), pass[0].end());
  EXPECT_EQ(distinct.size(), pass[0].size());
  EXPECT_EQ(distinct.count(kEmptyStack), 0u);
  EXPECT_EQ(pass[1], pass[0]);
  EXPECT_EQ(t.size(), pass[0].size() + 1);
}

TEST(StackTable, ConcurrentCapturesAgree) {
  StackTable t;
  constexpr int kThreads = 8, kRounds = 2000;
  std::vector<std::vector<StackId>> got(kThreads);
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      while (!go.load()) std::this_thread::yield();
      for (int r = 0; r < kRounds; ++r) {
        got[i].push_back(capture_site_a(t));
        got[i].push_back(rec(t, static_cast<unsigned>(r % 64), 6));
      }
    });
  }
  go = true;
  for (auto &th : threads) th.join();
  // Every thread runs the same code from the same thread entry: identical stacks, identical ids.
  for (int i = 1; i < kThreads; ++i) EXPECT_EQ(got[i], got[0]);
  std::set<StackId> distinct(got[0].begin(), got[0].end());
  EXPECT_EQ(distinct.size(), 65u);
  EXPECT_EQ(t.size(), 66u);
}

TEST(StackTable, CapacityLimit) {
  StackTable t;
  t.set_capacity(3);  // kEmptyStack and two more
  StackId a = kEmptyStack;
  for (int pass = 0; pass < g_two; ++pass) {
    const StackId x = capture_site_a(t);
    if (pass == g_zero) {  // not `pass == 0`: the compiler would peel the first iteration (a second call site)
      a = x;
      EXPECT_NE(a, kEmptyStack);
      EXPECT_NE(capture_site_b(t), kEmptyStack);
      EXPECT_EQ(via_first(t), kEmptyStack);  // a third distinct stack does not fit
    } else {
      EXPECT_EQ(x, a);  // known stacks still resolve
    }
  }
  EXPECT_EQ(t.size(), 3u);
}

TEST(StackTable, NothingRecordedGivesTheEmptyStack) {
  StackTable t;
  StackCaptureOptions none;
  none.native = none.python = false;
  EXPECT_EQ(t.capture(none), kEmptyStack);
  EXPECT_TRUE(t.frames(kEmptyStack, StackMode::Mixed).empty());
  EXPECT_EQ(t.op_name(kEmptyStack), "");
  EXPECT_EQ(t.group(kEmptyStack, StackMode::Native), kEmptyStack);
  EXPECT_TRUE(t.frames(12345, StackMode::Mixed).empty());  // unknown ids are harmless
  EXPECT_EQ(t.op_name(12345), "");
}

TEST(StackTable, ModesAndGroupsWithoutPython) {
  StackTable t;
  const StackId id = capture_site_a(t);
  EXPECT_EQ(t.op_name(id), "");  // no Python runtime in this process: the caller names the scope "Default"
  EXPECT_TRUE(t.python_frame_ids(id).empty());
  EXPECT_TRUE(t.frames(id, StackMode::Python).empty());
  EXPECT_TRUE(t.frames(id, StackMode::Off).empty());
  EXPECT_EQ(t.frames(id, StackMode::Mixed), t.frames(id, StackMode::Native));
  EXPECT_EQ(t.group(id, StackMode::Mixed), id);
  EXPECT_EQ(t.group(id, StackMode::Off), kEmptyStack);
  EXPECT_EQ(t.group(id, StackMode::Python), kEmptyStack);
  EXPECT_EQ(t.group(id, StackMode::Native), id);

  const StackCaptureOptions off = StackTable::options_for(StackMode::Off);
  EXPECT_FALSE(off.native);
  EXPECT_TRUE(off.python);
  EXPECT_TRUE(StackTable::options_for(StackMode::Mixed).native);
  EXPECT_FALSE(StackTable::options_for(StackMode::Python).native);
}

// ---- Symbolization --------------------------------------------------------------------------------------------

TEST(Symbolization, OffsetsAgreeWithNm) {
  StackTable t;
  const StackId id = via_first(t);
  const auto frames = t.frames(id, StackMode::Native);
  ASSERT_GE(frames.size(), 3u);
  const auto nm = nm_functions(self_exe());
  const std::string exe = fs::path(self_exe()).filename().string();
  const std::vector<std::string> expect = {"(anonymous namespace)::capture_site_a(msprobe::shim::StackTable&)",
                                           "(anonymous namespace)::via_first(msprobe::shim::StackTable&)"};
  for (size_t i = 0; i < expect.size(); ++i) {
    const Parsed p = parse_native(frames[i]);
    ASSERT_TRUE(p.ok) << frames[i];
    EXPECT_EQ(p.symbol, expect[i]);
    EXPECT_EQ(p.module, exe);
    ASSERT_TRUE(nm.count(expect[i])) << expect[i];
    const auto [lo, hi] = nm.at(expect[i]);
    EXPECT_GE(p.offset, lo) << frames[i];
    EXPECT_LT(p.offset, hi) << frames[i];
  }
  // Outer frames reach libc (its exported or .symtab names, or at least module+offset).
  bool libc = false;
  for (const std::string &f : frames) libc |= f.find("libc.so.6+0x") != std::string::npos;
  EXPECT_TRUE(libc);
}

TEST(Symbolization, DemangleAndFormats) {
  EXPECT_EQ(demangle("_ZN3foo3barEi"), "foo::bar(int)");
  EXPECT_EQ(demangle("plain_c_function"), "plain_c_function");
  EXPECT_EQ(demangle("_Znot valid"), "_Znot valid");

  ModuleInfo m;
  m.path = "/nonexistent/dir/libghost.so";
  m.base = 0x7f0000000000;
  Symbolizer s;
  EXPECT_EQ(s.describe(0x7f0000001234, &m), "libghost.so+0x1234");
  EXPECT_EQ(s.describe(0x1234, nullptr), "0x1234");
  ModuleInfo vdso;
  vdso.path = "linux-vdso.so.1";
  vdso.base = 0x1000;
  EXPECT_EQ(s.describe(0x1010, &vdso), "linux-vdso.so.1+0x10");
}

TEST(Symbolization, PieFixtureNamesStaticAndHiddenFunctions) {
  const std::string exe = STACK_FIXTURE_PIE;
  {  // really a PIE: ET_DYN
    std::ifstream f(exe, std::ios::binary);
    Elf64_Ehdr eh{};
    f.read(reinterpret_cast<char *>(&eh), sizeof(eh));
    ASSERT_TRUE(f);
    EXPECT_EQ(eh.e_type, ET_DYN);
  }
  const Command c = run("'" + exe + "'");
  ASSERT_EQ(c.status, 0) << c.err;
  const auto ids = lines_with(c.out, "ID ");
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(ids[0], ids[1]);                                                 // the same call site twice
  EXPECT_EQ(lines_with(c.out, "EXPORTED "), std::vector<std::string>{"0"});  // only .symtab knows it

  const auto frames = lines_with(c.out, "FRAME ");
  ASSERT_GE(frames.size(), 5u) << c.out;
  const auto nm = nm_functions(exe);
  const std::vector<std::string> expect = {"fixture_static_leaf(int)", "fixture_hidden_level",
                                           "msprobe_fixture::Widget::method(int)", "main"};
  for (size_t i = 0; i < expect.size(); ++i) {
    const Parsed p = parse_native(frames[i]);
    ASSERT_TRUE(p.ok) << frames[i];
    EXPECT_EQ(p.symbol, expect[i]) << frames[i];
    EXPECT_EQ(p.module, "stack_fixture_pie");
    ASSERT_TRUE(nm.count(expect[i])) << expect[i];
    EXPECT_GE(p.offset, nm.at(expect[i]).first) << frames[i];
    EXPECT_LT(p.offset, nm.at(expect[i]).second) << frames[i];
  }
}

TEST(Symbolization, StrippedFileUsesDebugFileByBuildId) {
  const std::string exe = STACK_FIXTURE_PIE;
  const Command id = run("readelf -n '" + exe + "'");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(id.out, m, std::regex("Build ID: ([0-9a-f]+)"))) << id.out;
  const std::string build_id = m[1];

  const fs::path dir = fs::temp_directory_path() / ("msprobe_stacks_dbg_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "debug" / ".build-id" / build_id.substr(0, 2));
  const fs::path stripped = dir / "stripped_fixture";
  const fs::path debug = dir / "debug" / ".build-id" / build_id.substr(0, 2) / (build_id.substr(2) + ".debug");
  ASSERT_EQ(run("objcopy --only-keep-debug '" + exe + "' '" + debug.string() + "'").status, 0);
  ASSERT_EQ(run("strip --strip-all -o '" + stripped.string() + "' '" + exe + "'").status, 0);

  const auto nm = nm_functions(exe);
  ASSERT_TRUE(nm.count("fixture_static_leaf(int)"));
  const uint64_t inside = nm.at("fixture_static_leaf(int)").first + 4;

  Symbolizer s;
  s.set_debug_dirs({(dir / "no-such-dir").string()});
  EXPECT_EQ(s.function_at(stripped.string(), inside), std::nullopt);  // stripped: .dynsym has no static functions
  EXPECT_EQ(s.function_at(exe, inside), "fixture_static_leaf(int)");
  s.set_debug_dirs({(dir / "debug").string()});
  EXPECT_EQ(s.function_at(stripped.string(), inside), "fixture_static_leaf(int)");
  const auto table = ElfSymbolTable::load(stripped.string(), {(dir / "debug").string()});
  EXPECT_EQ(table->debug_file(), debug.string());
  fs::remove_all(dir);
}

// ---- Module map -----------------------------------------------------------------------------------------------

uint32_t capture_from_plugin(void *arg) { return static_cast<StackTable *>(arg)->capture(); }

TEST(ModuleMap, LibrariesLoadedAndUnloadedLater) {
  StackTable t;
  (void)capture_site_a(t);  // the module map exists before the plugin is loaded
  using CallFn = uint32_t (*)(uint32_t(*)(void *), void *);
  const std::string plugin = STACK_PLUGIN;

  void *h = dlopen(plugin.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  auto call = reinterpret_cast<CallFn>(dlsym(h, "stack_plugin_call"));
  ASSERT_NE(call, nullptr);
  // No modules_changed() here: a new stack notices the loader's counters moved.
  const StackId id = call(&capture_from_plugin, &t);
  const auto frames = t.frames(id, StackMode::Native);
  ASSERT_GE(frames.size(), 4u);
  EXPECT_EQ(parse_native(frames[1]).symbol, "plugin_static_call(unsigned int (*)(void*), void*)") << frames[1];
  EXPECT_EQ(parse_native(frames[1]).module, "libstack_plugin.so");
  EXPECT_EQ(parse_native(frames[2]).symbol, "stack_plugin_call") << frames[2];

  ASSERT_EQ(dlclose(h), 0);
  StackTable::modules_changed();
  ASSERT_EQ(dlopen(plugin.c_str(), RTLD_NOW | RTLD_NOLOAD), nullptr);  // really unmapped
  EXPECT_EQ(t.frames(id, StackMode::Native), frames);                  // still rendered from the module's history

  bool ended = false;
  for (const ModuleInfo &mod : ModuleMap::global().all())
    if (module_basename(mod.path) == "libstack_plugin.so" && mod.end_gen != UINT32_MAX) ended = true;
  EXPECT_TRUE(ended);

  // Loaded again (maybe elsewhere): a new stack, named again.
  h = dlopen(plugin.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr);
  call = reinterpret_cast<CallFn>(dlsym(h, "stack_plugin_call"));
  const StackId again = call(&capture_from_plugin, &t);
  const auto frames2 = t.frames(again, StackMode::Native);
  ASSERT_GE(frames2.size(), 3u);
  EXPECT_EQ(parse_native(frames2[2]).symbol, "stack_plugin_call") << frames2[2];
  dlclose(h);
}

// ---- Unwinders and exceptions ---------------------------------------------------------------------------------

TEST(Unwinder, LibunwindIsLoadedLocally) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "under ASan the global scope's _Unwind_RaiseException and backtrace are the runtime's interceptors";
#endif
  StackTable t;
  (void)capture_site_a(t);
  ASSERT_EQ(active_native_unwinder(), NativeUnwinder::Libunwind);
  EXPECT_TRUE(loaded("libunwind.so.8"));
  // Out of the global scope: the process's _Unwind_* and backtrace() are still libgcc_s's and glibc's.
  EXPECT_EQ(dlsym(RTLD_DEFAULT, "unw_backtrace"), nullptr);
  void *raise = dlsym(RTLD_DEFAULT, "_Unwind_RaiseException");
  ASSERT_NE(raise, nullptr);
  Dl_info info{};
  ASSERT_NE(dladdr(raise, &info), 0);
  EXPECT_NE(std::string(info.dli_fname).find("libgcc_s"), std::string::npos) << info.dli_fname;
  void *bt = dlsym(RTLD_DEFAULT, "backtrace");
  ASSERT_NE(dladdr(bt, &info), 0);
  EXPECT_NE(std::string(info.dli_fname).find("libc.so"), std::string::npos) << info.dli_fname;
}

TEST(Unwinder, BacktraceFallbackSeesTheSameFrames) {
  const NativeUnwinder kinds[] = {NativeUnwinder::Auto, NativeUnwinder::Backtrace, NativeUnwinder::None};
  StackTable tables[3];
  StackId ids[3];
  NativeUnwinder active[3];
  for (int i = 0; i < g_three; ++i) {  // one call site for every unwinder
    set_native_unwinder(kinds[i]);
    ids[i] = via_first(tables[i]);
    active[i] = active_native_unwinder();
  }
  set_native_unwinder(NativeUnwinder::Auto);
  EXPECT_EQ(active[0], NativeUnwinder::Libunwind);
  EXPECT_EQ(active[1], NativeUnwinder::Backtrace);
  EXPECT_EQ(active[2], NativeUnwinder::None);
  EXPECT_EQ(active_native_unwinder(), NativeUnwinder::Libunwind);

  const auto x = tables[0].native_addresses(ids[0]), y = tables[1].native_addresses(ids[1]);
  ASSERT_GE(x.size(), 4u);
  ASSERT_GE(y.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(x[i], y[i]) << i;  // capture_site_a, via_first, the test, gtest
  EXPECT_EQ(ids[2], kEmptyStack);                             // no native frames and no Python: nothing recorded
}

int g_unwind_captures = 0;
StackTable *g_exc_table = nullptr;

struct CaptureOnDestroy {
  ~CaptureOnDestroy() {
    if (g_exc_table->capture() != kEmptyStack) ++g_unwind_captures;  // runs while the exception propagates
  }
};

__attribute__((noinline)) void throw_from(int depth) {
  CaptureOnDestroy guard;
  if (depth == 0) throw std::runtime_error("deep");
  throw_from(depth - 1);
  g_sink = depth;
}

TEST(Unwinder, HostExceptionsWorkWithLibunwindLoaded) {
  StackTable t;
  g_exc_table = &t;
  (void)capture_site_a(t);
  ASSERT_EQ(active_native_unwinder(), NativeUnwinder::Libunwind);
  for (int round = 0; round < 3; ++round) {
    g_unwind_captures = 0;
    try {
      throw_from(10);
      FAIL() << "no exception";
    } catch (const std::runtime_error &e) {
      EXPECT_STREQ(e.what(), "deep");
      EXPECT_NE(t.capture(), kEmptyStack);  // inside a catch block
    }
    EXPECT_EQ(g_unwind_captures, 11);
  }
  std::exception_ptr ep;
  std::thread th([&] {
    try {
      throw_from(3);
    } catch (...) {
      ep = std::current_exception();
    }
  });
  th.join();
  EXPECT_THROW(std::rethrow_exception(ep), std::runtime_error);
  g_exc_table = nullptr;
}

TEST(Unwinder, ExceptionHostRunsIdenticallyWithAPreloadedProber) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "under ASan the instrumented prober preloaded alone comes before the ASan runtime, which refuses to "
                  "start";
#endif
  const std::string host = STACK_EXCEPTION_HOST;
  const Command plain = run("'" + host + "'");
  ASSERT_EQ(plain.status, 0) << plain.err;
  ASSERT_NE(plain.out.find("from thread range"), std::string::npos) << plain.out;
  const Command probed = run("LD_PRELOAD='" + std::string(STACK_PROBE_PRELOAD) + "' '" + host + "'");
  ASSERT_EQ(probed.status, 0) << probed.err;
  EXPECT_EQ(probed.out, plain.out);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      probed.err, m, std::regex(R"(probe: captures=(\d+) nonempty=(\d+) unwinder=(\w+) global_libunwind=(\d))")))
      << probed.err;
  EXPECT_GE(std::stoi(m[1]), 40);  // destructors during unwinding, catch blocks, the thread
  EXPECT_EQ(m[1], m[2]);           // every probe got a stack
  EXPECT_EQ(m[3], "libunwind");
  EXPECT_EQ(m[4], "0");
}

// ---- Python helpers (pure functions; the interpreter itself: test_stacks_python.py) ---------------------------

TEST(PythonHelpers, HiddenFiles) {
  EXPECT_TRUE(is_hidden_python_file("<frozen runpy>"));
  EXPECT_TRUE(is_hidden_python_file("/usr/lib/python3.11/threading.py"));
  EXPECT_TRUE(is_hidden_python_file("/usr/lib/python3.11/concurrent/futures/thread.py"));
  EXPECT_TRUE(is_hidden_python_file("/root/.pyenv/versions/3.11.7/lib/python3.11/runpy.py"));
  EXPECT_TRUE(is_hidden_python_file("/opt/conda/lib64/python3.9/threading.py"));
  EXPECT_TRUE(is_hidden_python_file("/usr/lib/python311.zip/threading.py"));
  EXPECT_TRUE(is_hidden_python_file("/opt/x/msprobe_shim/launcher.py"));
  EXPECT_FALSE(is_hidden_python_file("/usr/lib/python3/dist-packages/numpy/core/numeric.py"));
  EXPECT_FALSE(is_hidden_python_file("/venv/lib/python3.11/site-packages/torch/nn/modules/module.py"));
  EXPECT_FALSE(is_hidden_python_file("/work/main/examples/train.py"));
  EXPECT_FALSE(is_hidden_python_file("train.py"));
  EXPECT_FALSE(is_hidden_python_file("<string>"));
  EXPECT_FALSE(is_hidden_python_file("/home/me/lib/python3.11-notes/x.py"));  // not an interpreter lib dir
}

TEST(PythonHelpers, HiddenFunctions) {
  for (const char *q : {"<module>", "f.<locals>.<lambda>", "Model.forward.<locals>.<listcomp>", "<genexpr>", "_run",
                        "Module._call_impl", "Module.__call__", "Tensor.__add__", "f.<locals>._helper"})
    EXPECT_TRUE(is_hidden_python_function(q)) << q;
  for (const char *q :
       {"main", "Linear.forward", "AdamW.__init__", "__init__", "_Layer.forward", "f.<locals>.g", "MLP.forward_", ""})
    EXPECT_FALSE(is_hidden_python_function(q)) << q;
}

TEST(PythonHelpers, FrameTextAndSourceLines) {
  EXPECT_EQ(python_frame_text("/a/train.py", 42, "Model.forward", "    y = self.fc(x)  \n"),
            "File /a/train.py, line 42, in Model.forward, \n y = self.fc(x)");
  EXPECT_EQ(python_frame_text("<frozen runpy>", 88, "_run_code", ""),
            "File <frozen runpy>, line 88, in _run_code, \n ");

  const fs::path p = fs::temp_directory_path() / ("msprobe_stacks_src_" + std::to_string(getpid()) + ".py");
  {
    std::ofstream f(p);
    f << "def f():\n\t  return 1  \r\n\nx = f()";  // CRLF, tabs, no final newline
  }
  SourceLines s;
  EXPECT_EQ(s.line(p.string(), 1), "def f():");
  EXPECT_EQ(s.line(p.string(), 2), "return 1");
  EXPECT_EQ(s.line(p.string(), 3), "");
  EXPECT_EQ(s.line(p.string(), 4), "x = f()");
  EXPECT_EQ(s.line(p.string(), 5), "");
  EXPECT_EQ(s.line(p.string(), 0), "");
  EXPECT_EQ(s.line("/nonexistent/file.py", 1), "");
  fs::remove(p);
  EXPECT_EQ(s.line(p.string(), 4), "x = f()");  // read once, cached
}

TEST(PythonFrames, EmbedderWithLibpythonOpenedLocally) {
  // Debian's libpython3.11 (python3.11-dev / libpython3.11 package) of this program's architecture (a cross build
  // run under qemu must not pick the host's); any libpython3.x works.
#if defined(__aarch64__)
  const char *const candidate = "/usr/lib/aarch64-linux-gnu/libpython3.11.so.1.0";
#else
  const char *const candidate = "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0";
#endif
  std::string lib;
  if (fs::exists(candidate)) lib = candidate;
  if (lib.empty()) GTEST_SKIP() << "no libpython3.11 shared library";
  const Command c = run("'" + std::string(STACK_EMBED_LOCAL) + "' '" + lib + "'");
  ASSERT_EQ(c.status, 0) << c.out << c.err;
  const auto frames = lines_with(c.out, "FRAME ");
  ASSERT_EQ(frames.size(), 3u) << c.out;
  EXPECT_EQ(frames[0], "File <string>, line 3, in Model.forward, \\n ");
  EXPECT_EQ(frames[1], "File <string>, line 5, in main, \\n ");
  EXPECT_EQ(frames[2], "File <string>, line 6, in <module>, \\n ");
  EXPECT_EQ(lines_with(c.out, "OPNAME "), std::vector<std::string>{"main/Model.forward"});
}

TEST(PythonHelpers, NoInterpreterInThisProcess) {
  PyFrameRef refs[4];
  EXPECT_EQ(PythonStacks::global().walk(refs, 4), 0);
  EXPECT_EQ(PythonStacks::global().interpreter_address(), 0u);
}

}  // namespace
