#include "shim/hooks/hook_table.h"

#include <string>
#include <unordered_map>

// The families' tables (MSPROBE_HOOK_FAMILY, shim/hooks/hook.h): the linker gathers the section msprobe_hooks of
// every hooks file and defines these bounds (local to the shim: exports.map). Their sections are kept by the
// reference to the bounds even under --gc-sections; the sanitizers leave globals in named sections unpadded.
extern "C" __attribute__((visibility("hidden"))) const msprobe::shim::HookFamily *const __start_msprobe_hooks[];
extern "C" __attribute__((visibility("hidden"))) const msprobe::shim::HookFamily *const __stop_msprobe_hooks[];

namespace msprobe::shim {
namespace {

const std::unordered_map<std::string, HookedName> &hook_table() {
  static const auto *table = [] {
    auto *t = new std::unordered_map<std::string, HookedName>;
    for (const HookFamily *const *f = __start_msprobe_hooks; f != __stop_msprobe_hooks; ++f)
      for (size_t i = 0; i < (*f)->count; ++i) (*t)[(*f)->entries[i].name] = HookedName{&(*f)->entries[i], (*f)->reach};
    return t;
  }();
  return *table;
}

}  // namespace

const HookedName *find_hook(const char *name) {
  if (name == nullptr) return nullptr;
  auto &table = hook_table();
  auto it = table.find(name);
  return it == table.end() ? nullptr : &it->second;
}

const HookFamily *const *hook_families_begin() { return __start_msprobe_hooks; }
const HookFamily *const *hook_families_end() { return __stop_msprobe_hooks; }

}  // namespace msprobe::shim

// For tests and diagnostics (test/integration/edges/test_shim_dladdr.py): the `index`-th CANN function the shim
// hooks (families Linked and LookedUp), nullptr past the last. A host built against a list of them checks it with this.
MSPROBE_EXPORT const char *msprobe_shim_hooked_function(unsigned index) {
  using namespace msprobe::shim;
  for (const HookFamily *const *f = hook_families_begin(); f != hook_families_end(); ++f) {
    if ((*f)->reach == HookReach::Exported || (*f)->reach == HookReach::Framework) continue;
    if (index < (*f)->count) return (*f)->entries[index].name;
    index -= static_cast<unsigned>((*f)->count);
  }
  return nullptr;
}
