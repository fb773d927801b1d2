// libms_hook_runner.so: the part of MindSpore's GE backend (O2, graph sink) that calls a hook tool around each
// graph run (shared/reference/cann_dump.md §5), for examples/graph_train.py, which calls it through ctypes:
//
//   runner = ms_hook_runner_create(device_id, kernel_names, count)   one per graph (its run counter)
//   ms_hook_runner_step_begin(runner)     before the graph's inputs are built and it is executed
//   ms_hook_runner_step_end(runner)       after it returned: sync all streams, MS_DbgOnStepEnd, sync again
//
// As MindSpore: active only with MS_HOOK_ENABLE=on; the library named by HOOK_TOOL_PATH is validated (realpath
// resolves, a regular file, the text after the last '.' is "so") and loaded once per process, lazily on the first
// step-begin with step 0, with dlopen(RTLD_LAZY | RTLD_LOCAL); both MS_DbgOnStepBegin and MS_DbgOnStepEnd must be
// found, else it is closed again and hooks stay off (a warning, training goes on). The hooks are called through
// pointers of MindSpore's types, the std::map by value; exts of step-begin: {0: std::vector<std::string>* of the
// graph's kernel names (fullname_with_scope), 1: bool* is_kbyk = false}; step-end gets an empty map.
//
// ABI (§5.5): this library is built with libstdc++'s default (C++11) ABI, so key 0 points to a C++11
// std::vector<std::string>. msprobe builds its hook with _GLIBCXX_USE_CXX11_ABI=0, stating that MindSpore uses the
// old ABI (not confirmed for current wheels); a hook built that way would misread key 0 from this runner. The
// std::map itself is the same under both ABIs.
#include <dlfcn.h>
#include <sys/stat.h>

#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "acl/acl.h"

namespace {

using HookBeginPtr = void (*)(uint32_t device_id, int step_count_num, std::map<uint32_t, void *> ext_args);
using HookEndPtr = void (*)(std::map<uint32_t, void *> ext_args);

constexpr uint32_t kAllKernelNames = 0;
constexpr uint32_t kIsKbyK = 1;

void warn(const std::string &what) { std::fprintf(stderr, "[WARNING] ms_hook_runner: %s\n", what.c_str()); }

bool hook_enabled() {
  const char *e = std::getenv("MS_HOOK_ENABLE");
  return e != nullptr && std::string(e) == "on";
}

// HOOK_TOOL_PATH's real path when it names a regular file ending in ".so" (after the last '.'), else "".
std::string valid_tool_path() {
  const char *env = std::getenv("HOOK_TOOL_PATH");
  if (env == nullptr || *env == '\0') {
    warn("MS_HOOK_ENABLE is on but HOOK_TOOL_PATH is not set; hooks are off");
    return "";
  }
  char real[PATH_MAX];
  struct stat st {};
  if (realpath(env, real) == nullptr || stat(real, &st) != 0 || !S_ISREG(st.st_mode)) {
    warn(std::string("HOOK_TOOL_PATH ") + env + " is not an existing regular file; hooks are off");
    return "";
  }
  std::string path = real;
  size_t dot = path.rfind('.');
  if (dot == std::string::npos || path.substr(dot + 1) != "so") {
    warn(std::string("HOOK_TOOL_PATH ") + env + " does not end in .so; hooks are off");
    return "";
  }
  return path;
}

// The hook tool of this process: loaded at most once (MindSpore's adapter is a singleton).
struct Hooks {
  std::once_flag once;
  HookBeginPtr begin = nullptr;
  HookEndPtr end = nullptr;

  void load() {
    std::string path = valid_tool_path();
    if (path.empty()) return;
    void *handle = dlopen(path.c_str(), RTLD_LAZY | RTLD_LOCAL);
    if (handle == nullptr) {
      const char *err = dlerror();
      warn("dlopen of " + path + " failed: " + (err ? err : "?") + "; hooks are off");
      return;
    }
    auto *b = reinterpret_cast<HookBeginPtr>(dlsym(handle, "MS_DbgOnStepBegin"));
    auto *e = reinterpret_cast<HookEndPtr>(dlsym(handle, "MS_DbgOnStepEnd"));
    if (b == nullptr || e == nullptr) {
      warn(path + " lacks MS_DbgOnStepBegin or MS_DbgOnStepEnd; hooks are off");
      dlclose(handle);
      return;
    }
    begin = b;
    end = e;
  }
};

Hooks &hooks() {
  static Hooks *h = new Hooks;  // never destroyed: a hook may still run while the process exits
  return *h;
}

struct Runner {
  uint32_t device_id;
  std::vector<std::string> kernel_names;
  int run_count = 0;  // MindSpore's graph_run_iter_: 0-based, incremented after each run
  bool began = false;
};

}  // namespace

extern "C" {

__attribute__((visibility("default"))) void *ms_hook_runner_create(uint32_t device_id,
                                                                   const char *const *kernel_names, size_t count) {
  auto *r = new Runner{device_id, {}};
  for (size_t i = 0; i < count; ++i) r->kernel_names.emplace_back(kernel_names[i]);
  return r;
}

__attribute__((visibility("default"))) void ms_hook_runner_destroy(void *runner) { delete static_cast<Runner *>(runner); }

// Returns 1 when MS_DbgOnStepBegin was called, 0 when hooks are off.
__attribute__((visibility("default"))) int ms_hook_runner_step_begin(void *runner) {
  auto *r = static_cast<Runner *>(runner);
  r->began = hook_enabled();
  if (!r->began) return 0;
  Hooks &h = hooks();
  if (r->run_count == 0) std::call_once(h.once, [&h] { h.load(); });
  if (h.begin == nullptr) return 0;
  bool is_kbyk = false;
  std::map<uint32_t, void *> exts{{kAllKernelNames, &r->kernel_names}, {kIsKbyK, &is_kbyk}};
  h.begin(r->device_id, r->run_count, exts);
  return 1;
}

// After the graph ran: sync, MS_DbgOnStepEnd, sync (GEBackend::RunGraph). Returns the first sync error, else 0.
__attribute__((visibility("default"))) int ms_hook_runner_step_end(void *runner) {
  auto *r = static_cast<Runner *>(runner);
  int rc = aclrtSynchronizeDevice();
  Hooks &h = hooks();
  if (r->began && h.end != nullptr) {
    h.end(std::map<uint32_t, void *>{});
    int again = aclrtSynchronizeDevice();
    if (rc == 0) rc = again;
  }
  r->began = false;
  ++r->run_count;
  return rc;
}

}  // extern "C"
