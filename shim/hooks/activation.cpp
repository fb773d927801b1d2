#include "shim/hooks/activation.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "shim/base/log.h"
#include "shim/capture/capture_call.h"
#include "shim/capture/graph_capture.h"
#include "shim/capture/lifecycle.h"
#include "shim/capture/scope_names.h"
#include "shim/config/config.h"
#include "shim/hooks/linked_calls.h"
#include "shim/hooks/mindspore_profiler.h"

namespace msprobe::shim {
namespace {

// Unknown -> Deciding -> Ready (configured to capture) -> Starting -> Active, or -> Disabled. Deciding reads the
// configuration and checks the dump root; starting builds the session and installs the lifecycle. A program linked
// against CANN decides at load, to know whether to redirect its calls (start_with_a_linked_program); it starts at the
// first call a hook sees, as every process does, so that a child it forks before that starts its own capture.
enum class State : int { Unknown, Deciding, Ready, Starting, Active, Disabled };
// Constant-initialized: hooks may run before any constructor.
constinit std::atomic<int> g_state{(int)State::Unknown};
Config *g_config = nullptr;  // what Deciding found, for Starting (published by the release store of Ready)

// The dump root must be (or be creatable as) a directory we can write. Checked at start-up, without
// creating anything (a process that never launches a kernel leaves no trace), so that a bad path is one
// clear error now instead of a failure at the first kernel.

// Graph kernels' files still queued in CANN are delivered first (not when dying: see GraphCapture::finish).
void close_dump() {
  if (GraphCapture *g = active_graph_capture()) g->finish(!lifecycle::process_is_dying());
  session().shutdown();
  const scope_names::Counts names = scope_names::counts();
  if (names.named + names.fallback > 0)
    log_info("%llu kernels named from MindSpore's runtime profiler, %llu by their Python scope (no record named them)",
             (unsigned long long)names.named, (unsigned long long)names.fallback);
}

void exit_handler() {
  if (g_state.load() == (int)State::Active) lifecycle::run_exit_shutdown(close_dump);
}

// MindSpore loads the library HOOK_TOOL_PATH names when MS_HOOK_ENABLE=on and calls its step hooks around each graph
// run (reference/cann_dump.md §5): the shim becomes that tool unless the user named another one. MindSpore reads them
// at its first step, long after this.
void offer_mindspore_step_hook() {
  const char *tool = std::getenv("HOOK_TOOL_PATH");
  Dl_info self{};
  if (dladdr(reinterpret_cast<void *>(&offer_mindspore_step_hook), &self) == 0 || self.dli_fname == nullptr) return;
  if (tool != nullptr && *tool != '\0') {
    std::error_code ec;
    if (!std::filesystem::equivalent(tool, self.dli_fname, ec))
      log_info("HOOK_TOOL_PATH names another tool (%s): graph steps are counted from model executions", tool);
    return;
  }
  const char *enable = std::getenv("MS_HOOK_ENABLE");
  if (enable != nullptr && std::strcmp(enable, "on") != 0) return;  // the user turned MindSpore's hook off
  ::setenv("HOOK_TOOL_PATH", self.dli_fname, 1);
  ::setenv("MS_HOOK_ENABLE", "on", 1);
}

// SHIM_TEST_DESCRIBE_THROWS=inputs|outputs|launch[:n] (shim/capture/capture_call.h).
void set_describe_fault_from(const char *text) {
  const std::string_view v(text);
  const std::string_view where = v.substr(0, v.find(':'));
  const DescribeFault fault = where == "inputs"    ? DescribeFault::Inputs
                              : where == "outputs" ? DescribeFault::Outputs
                              : where == "launch"  ? DescribeFault::Launch
                                                   : DescribeFault::None;
  const uint64_t times =
      v.find(':') == std::string_view::npos ? UINT64_MAX : std::strtoull(text + v.find(':') + 1, nullptr, 10);
  set_describe_fault(fault, times);
}

void decide() {
  int expected = (int)State::Unknown;
  if (!g_state.compare_exchange_strong(expected, (int)State::Deciding)) return;
  ConfigLoad load = load_config_from_environment();
  report_config(load);
  if (!load.config.enabled || !load.errors.empty()) {
    g_state.store((int)State::Disabled);
    return;
  }
  set_log_level(load.config.log_level);
  if (std::string why; !check_dump_root(load.config.dump_path, &why)) {
    log_error("%s: dump path \"%s\" cannot be used: %s; the shim is disabled and passes every call through",
              load.config.source_of(Field::DumpPath).c_str(), load.config.dump_path.c_str(), why.c_str());
    g_state.store((int)State::Disabled);
    return;
  }
  // Test seam (test/integration/crash/kill_stress.py): widens the moment between a kernel's two journal appends.
  if (const char *gap = std::getenv("SHIM_TEST_JOURNAL_GAP_US"))
    load.config.test_journal_gap_us = std::strtol(gap, nullptr, 10);
  // Test seam (test/integration/shim/test_shim_graph.py): a shorter bound on the graph dump's drain.
  if (const char *ms = std::getenv("SHIM_TEST_DRAIN_TIMEOUT_MS"))
    load.config.graph_drain_timeout_ms = std::strtol(ms, nullptr, 10);
  // Test seam (test/integration/edges/test_shim_describe_faults.py): describe steps of one side throw.
  if (const char *fault = std::getenv("SHIM_TEST_DESCRIBE_THROWS")) set_describe_fault_from(fault);
  // The host's task queue (torch_npu's TASK_QUEUE_ENABLE, tiny_npu's likewise): where aclnn phase 1 runs.
  if (const char *level = std::getenv("TASK_QUEUE_ENABLE"); level && *level)
    load.config.host_task_queue = (int)std::strtol(level, nullptr, 10);
  g_config = new Config(std::move(load.config));
  g_state.store((int)State::Ready, std::memory_order_release);
}

void start() {
  int expected = (int)State::Ready;
  if (!g_state.compare_exchange_strong(expected, (int)State::Starting)) return;
  auto *s = new Session(std::move(*g_config));   // immortal: hooks may run during and after exit handlers
  activate_graph_capture(new GraphCapture(*s));  // likewise (CANN's record thread may call into it at any time)
  s->set_before_flush([] { scope_names::resolve_all(); });
  activate_session(s);
  offer_mindspore_step_hook();
  offer_mindspore_profiler();
  std::atexit(exit_handler);
  g_state.store((int)State::Active);
  lifecycle::Callbacks callbacks;
  callbacks.close_dump = close_dump;
  callbacks.flush_dump = [] { session().flush(); };
  // In a child made by fork() without exec: capture is off for good, every call passes through.
  callbacks.in_fork_child = [] {
    g_state.store((int)State::Disabled);
    activate_graph_capture(nullptr);
    activate_session(nullptr);
  };
  lifecycle::install(callbacks);  // fatal signals, _exit, fork
  redirect_linked_calls();
  mindspore_libraries_loaded();
}

// A program started linked against CANN reaches the hooks only through GOT entries the shim redirects (it exports no
// CANN function: shim/hooks/linked_calls.h), and no hook call would come to do it: the configuration is read here, at
// load, and when it says capture, the calls into the hooked CANN functions are redirected. The session starts at the
// first of those calls, as before. A process that references no CANN function at start-up (a Python interpreter, a
// shell a host spawns with LD_PRELOAD inherited) is left alone until it opens CANN (dlopen) or looks a hook up
// (dlsym). The program's own libraries' constructors ran already (glibc initialises them before a preloaded library):
// a CANN call one of them makes is not captured (docs/lifecycle.md). Default priority: after the sanitizer runtime is
// ready (shim/hooks/dl.cpp).
__attribute__((constructor)) void start_with_a_linked_program() {
  if (!process_links_cann()) return;
  int s = g_state.load(std::memory_order_acquire);
  if (s == (int)State::Unknown) {
    decide();
    s = g_state.load(std::memory_order_acquire);
  }
  if (s == (int)State::Ready) redirect_calls_to_hooks();  // Active: a hook already started capture, and redirected
}

}  // namespace

bool capture_enabled() {
  int s = g_state.load(std::memory_order_acquire);
  if (s == (int)State::Active) return true;
  if (s == (int)State::Unknown) {
    decide();
    s = g_state.load(std::memory_order_acquire);
  }
  if (s == (int)State::Ready) {
    start();
    s = g_state.load(std::memory_order_acquire);
  }
  return s == (int)State::Active;  // still Deciding or Starting: a call made by the initialization itself
}

Session *start_session() noexcept {
  try {
    return capture_enabled() ? active_session() : nullptr;
  } catch (...) {
    return nullptr;  // capture_enabled() disables the shim on any failure of its own; this is for the impossible rest
  }
}

bool check_dump_root(const std::string &path, std::string *why) {
  // A dump root that is a symbolic link into another user's directory (planted in a shared /tmp, say) is refused:
  // the shim, often run as root, would create folders and files among that user's. A user's own link is fine.
  std::string link = path;
  while (link.size() > 1 && link.back() == '/') link.pop_back();
  struct stat lst {
  }, st{};
  if (::lstat(link.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode) && ::stat(link.c_str(), &st) == 0 &&
      st.st_uid != ::geteuid()) {
    *why = "it is a symbolic link to a directory of another user (uid " + std::to_string(st.st_uid) + ")";
    return false;
  }
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(path, ec);
  if (ec) {
    *why = ec.message();
    return false;
  }
  // The nearest existing ancestor decides: it must be a writable directory.
  while (!std::filesystem::exists(p, ec)) {
    if (!p.has_parent_path() || p.parent_path() == p) break;
    p = p.parent_path();
  }
  if (!std::filesystem::is_directory(p, ec)) {
    *why = "\"" + p.string() + "\" is not a directory";
    return false;
  }
  if (::access(p.c_str(), W_OK | X_OK) != 0) {
    *why = "\"" + p.string() + "\" is not writable (" + std::strerror(errno) + ")";
    return false;
  }
  // access() says yes to root everywhere, also where no folder can be made (/proc, an NFS export with
  // root_squash): make one and remove it again. Uniquely named, so that ranks starting together never
  // remove a folder another rank is using.
  std::string probe = (p / ".msprobe_shim_probe_XXXXXX").string();
  if (::mkdtemp(probe.data()) == nullptr) {
    *why = "no folder can be created in \"" + p.string() + "\" (" + std::strerror(errno) + ")";
    return false;
  }
  ::rmdir(probe.c_str());
  return true;
}

}  // namespace msprobe::shim
