#include "shim/hooks/linked_calls.h"

#include <dlfcn.h>

#include <cstring>
#include <map>
#include <new>
#include <set>
#include <string>

#include "shim/aclnn/plt_redirect.h"
#include "shim/base/got_patch.h"
#include "shim/base/log.h"
#include "shim/base/symbols.h"
#include "shim/hooks/hook_table.h"

namespace msprobe::shim {
namespace {

bool is_linked_hook(const char *name) {
  const HookedName *h = find_hook(name);
  return h != nullptr && redirected_in_got(h->reach);
}

// What the dynamic linker binds a lazy entry to at its first call: the global scope's definition, or (an object
// opened RTLD_LOCAL, its dependencies with it) the first one outside the shim.
void *binding_of(const char *name) {
  if (void *s = real_dlsym(RTLD_DEFAULT, name)) return s;
  return find_original(name);
}

// The hook for an entry that calls `current`. An entry bound to a definition ahead of the shim in the loader's order
// (the main program's own, another interposer preloaded before the shim) keeps it: when the shim exported its hooks,
// symbol lookup found those definitions first, too.
void *hook_for(const char *name, void *current) {
  if (current == nullptr || inside_shim(current) || loaded_before_shim(current)) return nullptr;
  const HookedName *h = find_hook(name);
  return h != nullptr && redirected_in_got(h->reach) ? h->entry->wrapper() : nullptr;
}

// Per object visited: hooked names it calls through the PLT, and those it reaches through a GLOB_DAT entry only.
struct References {
  std::set<std::string> jump_slots;
  std::set<std::string> glob_dats;
};

// Once per object: the hooked functions it reaches only by address. MindSpore's GetAscendPath takes &aclrtMalloc and
// never calls through it, so this is no warning; it says why a call an object makes through such an entry is missing.
void report_address_only(const std::map<std::string, References> &seen) {
  for (const auto &[object, refs] : seen) {
    std::string names;
    size_t count = 0;
    for (const std::string &n : refs.glob_dats) {
      if (refs.jump_slots.count(n) != 0) continue;
      if (count++ < 8) names += (names.empty() ? "" : ", ") + n;
    }
    if (count == 0) continue;
    log_info(
        "%s reaches %zu hooked CANN function(s) only by address (%s%s): calls through those addresses "
        "(-fno-plt, or x86-64 .plt.got when it also takes the address) are not captured",
        object.empty() ? "the main program" : object.c_str(), count, names.c_str(), count > 8 ? ", ..." : "");
  }
}

}  // namespace

void redirect_calls_to_hooks() {
  static GotPatcher *patcher = new (std::nothrow) GotPatcher;  // immortal: dlopen hooks run during exit
  if (patcher == nullptr) return;
  std::map<std::string, References> seen;
  PatchOptions options;
  options.jump_slots_only = true;  // never GLOB_DAT: `&aclrtMalloc` stays CANN's
  options.wants = is_linked_hook;
  options.resolve = binding_of;
  if (log_enabled(LogLevel::Info))
    options.observe = [&seen](const GotSlot &s) {
      References &r = seen[s.object];
      (s.kind == GotSlotKind::JumpSlot ? r.jump_slots : r.glob_dats).insert(s.symbol);
    };
  patcher->patch(hook_for, options);
  report_address_only(seen);
}

void redirect_linked_calls() {
  redirect_calls_to_hooks();
  redirect_plt_calls();
}

bool process_links_cann() {
  PatchOptions options;
  options.wants = [](const char *name) { return std::strncmp(name, "aclnn", 5) == 0 || is_linked_hook(name); };
  return !list_got_slots(options).empty();
}

}  // namespace msprobe::shim
