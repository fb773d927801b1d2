// dlsym / dlopen: how torch_npu and MindSpore reach every aclnn function (dlopen + dlsym on the
// library handle), which plain symbol interposition never sees.
//
// dlsym: the real lookup runs first (with dlsym(RTLD_NEXT) semantics computed for the *caller*, since
// glibc would otherwise search after the shim); then a name the shim hooks is answered with the
// shim's function, and an aclnn launch symbol with its capture wrapper. Missing symbols stay missing:
// torch_npu falls back to other paths when an aclnn symbol does not exist.
//
// dlopen: a bare library name is searched in the caller's own paths (its RPATH/RUNPATH and
// LD_LIBRARY_PATH, as the dynamic linker would for the caller, not for the shim); then direct (PLT) calls
// from the newly loaded objects to hooked CANN functions and aclnn functions are redirected
// (shim/hooks/linked_calls.h).
//
// Sanitizer builds (ASan, TSan): the entry points are the shim's first code to run in a process, earlier than
// the sanitizer runtime is ready. libasan sets up its interceptors with dlsym(RTLD_NEXT, "mmap") and friends from
// inside its own initialisation, and the dynamic linker binds that call to the shim's dlsym: instrumented code
// there (a stack frame with redzones, a checked load) writes shadow memory that is not mapped yet and the host
// dies before main. So the entry points themselves are never instrumented (MSPROBE_NO_SANITIZE), and until the
// shim's constructor below has run (after the shim's own sanitizer module constructor, which initialises the
// runtime) they only forward, through the uninstrumented shim/base/symbols.cpp (compiled without sanitizers,
// shim/CMakeLists.txt). In other builds the entry points intercept from the very first call, as before.
#include <dlfcn.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "shim/aclnn/aclnn_capture.h"
#include "shim/capture/session.h"
#include "shim/hooks/hook.h"
#include "shim/hooks/linked_calls.h"
#include "shim/hooks/mindspore_profiler.h"
#include "shim/stacks/stacks.h"

// Never instrumented (see above): the sanitizers named here are the ones the tree is built with.
#define MSPROBE_NO_SANITIZE __attribute__((no_sanitize("address", "thread", "undefined")))

namespace msprobe::shim {

namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MSPROBE_SHADOW_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define MSPROBE_SHADOW_SANITIZER 1
#endif
#endif

#ifdef MSPROBE_SHADOW_SANITIZER
bool g_instrumented_code_ready = false;
// Priority 101 (the first one not reserved): after the sanitizer module constructors of the shim's objects
// (gcc: 99, clang: 1), which initialise the runtime if nothing did before.
__attribute__((constructor(101))) void instrumented_code_is_ready() {
  __atomic_store_n(&g_instrumented_code_ready, true, __ATOMIC_RELEASE);
}
#endif

// Whether the entry points may leave uninstrumented code (always, outside sanitizer builds).
MSPROBE_NO_SANITIZE inline bool instrumented_code_ready() {
#ifdef MSPROBE_SHADOW_SANITIZER
  return __atomic_load_n(&g_instrumented_code_ready, __ATOMIC_ACQUIRE);
#else
  return true;
#endif
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

}  // namespace

void *intercept_lookup(const char *name, void *real) {
  if (real == nullptr || name == nullptr) return real;
  if (inside_shim(real)) {
    // A host that looks up the step marker marks its own steps (spec §4).
    if (std::strcmp(name, "msprobe_shim_step") == 0 && capture_enabled()) session().host_marks_steps();
    return real;
  }
  if (!capture_enabled()) return real;
  if (const HookedName *h = find_hook(name)) {
    void *expected = nullptr;
    h->entry->slot->original.compare_exchange_strong(expected, real);
    return h->entry->wrapper();
  }
  if (std::strncmp(name, "aclnn", 5) == 0) return aclnn_capture().wrap_symbol(name, real);
  return real;
}

}  // namespace msprobe::shim

using namespace msprobe::shim;

namespace {

// The entry points' work once instrumented code may run. noinline: never merged into the uninstrumented callers.
__attribute__((noinline)) void *hooked_dlsym(void *handle, const char *name, void *real, const void *caller) {
  if (ReentryGuard::active()) return real;  // the shim's own lookups
  // Another interposer forwarding down the chain. One after the shim: the call already went through the shim,
  // and handing out the shim's hook again would bring the call back to that interposer, forever. One before it:
  // the next definition is the shim's own function where the shim exports the name (libc's), and the shim's hook
  // for a linked CANN name, which the shim does not export but whose calls it takes all the same (linked_calls.h).
  if (handle == RTLD_NEXT) {
    const HookedName *h = find_hook(name);
    if (h != nullptr && (!redirected_in_got(h->reach) || !loaded_before_shim(caller))) return real;
  }
  ReentryGuard guard;
  return intercept_lookup(name, real);
}

__attribute__((noinline)) void *hooked_dlopen(const char *file, int mode, const void *caller) {
  void *handle = nullptr;
  if (file != nullptr && std::strchr(file, '/') == nullptr && !ReentryGuard::active()) {
    // Already loaded under that name: the search does not matter.
    handle = real_dlopen(file, mode | RTLD_NOLOAD);
    if (handle == nullptr) {
      for (const std::string &dir : search_path_of(caller)) {
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
    if (capture_enabled()) {
      redirect_linked_calls();
      mindspore_libraries_loaded();
    }
    StackTable::modules_changed();
  }
  return handle;
}

__attribute__((noinline)) int hooked_dlclose(void *handle) {
  int rc = real_dlclose(handle);
  if (rc == 0) StackTable::modules_changed();
  return rc;
}

}  // namespace

namespace {

MSPROBE_NO_SANITIZE bool same_name(const char *a, const char *b) {
  while (*a != '\0' && *a == *b) ++a, ++b;
  return *a == *b;
}

// dlsym(RTLD_NEXT, name) for `caller` before instrumented code may run: the sanitizer runtime, preloaded just
// before the shim, setting up its interceptors. next_definition() cannot be used then: it opens each object
// with dlopen(RTLD_NOLOAD), which runs the constructors of objects not yet initialised (the runtime's own
// among them, re-entering its initialisation). For a caller before the shim the next definition is the
// shim's own function if the shim defines the name (the libc names it exports), else the next one after the
// shim (objects between the caller and the shim are not searched: none in the sanitizer runtime's case).
MSPROBE_NO_SANITIZE void *early_next_definition(const void *caller, const char *name) {
  static const struct {
    const char *name;
    void *own;
  } kOwnLibcNames[] = {
      {"dlsym", reinterpret_cast<void *>(&dlsym)},     {"dlopen", reinterpret_cast<void *>(&dlopen)},
      {"dlclose", reinterpret_cast<void *>(&dlclose)}, {"_exit", reinterpret_cast<void *>(&_exit)},
      {"_Exit", reinterpret_cast<void *>(&_Exit)},     {"sigaction", reinterpret_cast<void *>(&sigaction)},
      {"signal", reinterpret_cast<void *>(&signal)},
  };
  if (!loaded_before_shim(caller)) return next_definition(caller, name);
  for (const auto &own : kOwnLibcNames)
    if (same_name(name, own.name)) return own.own;
  return real_dlsym(RTLD_NEXT, name);
}

}  // namespace

MSPROBE_EXPORT MSPROBE_NO_SANITIZE void *dlsym(void *handle, const char *name) {
  void *caller = __builtin_return_address(0);
  if (!instrumented_code_ready())
    return handle == RTLD_NEXT ? early_next_definition(caller, name) : real_dlsym(handle, name);
  void *real = handle == RTLD_NEXT ? next_definition(caller, name) : real_dlsym(handle, name);
  return hooked_dlsym(handle, name, real, caller);
}

MSPROBE_EXPORT MSPROBE_NO_SANITIZE void *dlopen(const char *file, int mode) {
  if (!instrumented_code_ready()) return real_dlopen(file, mode);
  return hooked_dlopen(file, mode, __builtin_return_address(0));
}

// Unloading moves code away from addresses old stacks point at: the stack table refreshes its module map.
MSPROBE_EXPORT MSPROBE_NO_SANITIZE int dlclose(void *handle) {
  if (!instrumented_code_ready()) return real_dlclose(handle);
  return hooked_dlclose(handle);
}
