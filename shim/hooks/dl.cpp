// dlsym / dlopen: how torch_npu and MindSpore reach every aclnn function (dlopen + dlsym on the
// library handle), which plain symbol interposition never sees.
//
// dlsym: the real lookup runs first (with dlsym(RTLD_NEXT) semantics computed for the *caller*, since
// glibc would otherwise search after the shim); then a name the shim interposes is answered with the
// shim's function, and an aclnn launch symbol with its capture wrapper. Missing symbols stay missing:
// torch_npu falls back to other paths when an aclnn symbol does not exist.
//
// dlopen: a bare library name is searched in the caller's own paths (its RPATH/RUNPATH and
// LD_LIBRARY_PATH, as the dynamic linker would for the caller, not for the shim); then direct (PLT) calls
// to aclnn functions from the newly loaded objects are redirected.
#include <dlfcn.h>
#include <link.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "shim/aclnn_capture.h"
#include "shim/hooks/hook.h"
#include "shim/plt_redirect.h"
#include "shim/session.h"
#include "shim/stacks.h"

namespace msprobe::shim {

HookFamily aclnn_meta_hooks();
HookFamily runtime_hooks();
HookFamily hccl_hooks();
HookFamily aclop_hooks();
HookFamily memory_hooks();
HookFamily rt_kernel_hooks();
HookFamily pta_cache_hooks();
HookFamily process_hooks();

namespace {

const std::unordered_map<std::string, const HookEntry *> &hook_table() {
  static const auto *table = [] {
    auto *t = new std::unordered_map<std::string, const HookEntry *>;
    for (HookFamily f : {aclnn_meta_hooks(), runtime_hooks(), hccl_hooks(), aclop_hooks(), memory_hooks(),
                         rt_kernel_hooks(), pta_cache_hooks(), process_hooks()})
      for (size_t i = 0; i < f.count; ++i) (*t)[f.entries[i].name] = &f.entries[i];
    return t;
  }();
  return *table;
}

// The caller's library search path for a bare name, in the dynamic linker's order; empty if unknown.
std::vector<std::string> search_path_of(const void *caller) {
  std::vector<std::string> dirs;
  void *lm = object_containing(caller);
  if (lm == nullptr) return dirs;
  Dl_serinfo size_info;
  if (dlinfo(lm, RTLD_DI_SERINFOSIZE, &size_info) != 0 || size_info.dls_size == 0) return dirs;
  auto *info = static_cast<Dl_serinfo *>(std::malloc(size_info.dls_size));
  if (info == nullptr) return dirs;
  std::memcpy(info, &size_info, sizeof size_info);
  if (dlinfo(lm, RTLD_DI_SERINFO, info) == 0)
    for (unsigned i = 0; i < info->dls_cnt; ++i) dirs.emplace_back(info->dls_serpath[i].dls_name);
  std::free(info);
  return dirs;
}

// Kept out of dlsym: glibc declares dlsym's `name` nonnull, and -Werror rejects a NULL test on it there.
bool is_hooked_name(const char *name) { return name != nullptr && hook_table().count(name) != 0; }

}  // namespace

void *intercept_lookup(const char *name, void *real) {
  if (real == nullptr || name == nullptr) return real;
  if (inside_shim(real)) {
    // A host that looks up the step marker marks its own steps (spec §4).
    if (std::strcmp(name, "msprobe_shim_step") == 0 && capture_enabled()) session().host_marks_steps();
    return real;
  }
  if (!capture_enabled()) return real;
  auto &table = hook_table();
  if (auto it = table.find(name); it != table.end()) {
    void *expected = nullptr;
    it->second->slot->original.compare_exchange_strong(expected, real);
    return it->second->wrapper;
  }
  if (std::strncmp(name, "aclnn", 5) == 0) return aclnn_capture().wrap_symbol(name, real);
  return real;
}

}  // namespace msprobe::shim

using namespace msprobe::shim;

MSPROBE_EXPORT void *dlsym(void *handle, const char *name) {
  void *caller = __builtin_return_address(0);
  void *real = handle == RTLD_NEXT ? next_definition(caller, name) : real_dlsym(handle, name);
  if (ReentryGuard::active()) return real;  // the shim's own lookups
  // Another interposer forwarding down the chain: the next definition after it is the answer, whoever defines
  // it. Before the shim, that is the shim's own function; after it, the call already went through the shim,
  // and handing out the shim's hook again would bring the call back to that interposer, forever.
  if (handle == RTLD_NEXT && is_hooked_name(name)) return real;
  ReentryGuard guard;
  return intercept_lookup(name, real);
}

MSPROBE_EXPORT void *dlopen(const char *file, int mode) {
  void *handle = nullptr;
  if (file != nullptr && std::strchr(file, '/') == nullptr && !ReentryGuard::active()) {
    // Already loaded under that name: the search does not matter.
    handle = real_dlopen(file, mode | RTLD_NOLOAD);
    if (handle == nullptr) {
      for (const std::string &dir : search_path_of(__builtin_return_address(0))) {
        std::string path = dir + "/" + file;
        struct stat st;
        if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
          handle = real_dlopen(path.c_str(), mode);
          if (handle) break;
        }
      }
    } else if ((mode & RTLD_NOLOAD) == 0) {
      // Take the reference (and any promotion to RTLD_GLOBAL / RTLD_NODELETE) the host asked for.
      real_dlclose(handle);
      handle = real_dlopen(file, mode);
    }
  }
  if (handle == nullptr) handle = real_dlopen(file, mode);
  if (handle != nullptr && !ReentryGuard::active()) {
    ReentryGuard guard;
    // MSPROBE_ENABLE=0 (or a configuration error): no wrapper is installed anywhere, calls cost nothing.
    if (capture_enabled()) redirect_plt_calls();
    StackTable::modules_changed();
  }
  return handle;
}

// Unloading moves code away from addresses old stacks point at: the stack table refreshes its module map.
MSPROBE_EXPORT int dlclose(void *handle) {
  int rc = real_dlclose(handle);
  if (rc == 0) StackTable::modules_changed();
  return rc;
}
