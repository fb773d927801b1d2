// The hook families' tables (MSPROBE_HOOK_FAMILY, shim/hooks/hook.h), as the rest of the shim reads them: which names
// are hooked, by which function, and how hosts reach them (dlsym dispatch in shim/hooks/dl.cpp, GOT redirection in
// shim/hooks/linked_calls.cpp). Apart from hook.h so that those can read the tables without the hooks' own includes.
#pragma once
#include <cstddef>

#include "shim/base/symbols.h"

// A hook's definition: a C function of the API's own name and type. Default visibility, but what the shim really
// exports is decided by shim/exports.map: the libc functions it interposes, dlsym/dlopen/dlclose, msprobe_* and
// MindSpore's hook-tool interface; a CANN hook stays local to the shim.
#define MSPROBE_HOOK extern "C" __attribute__((visibility("default")))
// A function the shim exports under its own name (exports.map must list it): msprobe_*, MS_DbgOnStep*, libc's.
#define MSPROBE_EXPORT extern "C" __attribute__((visibility("default")))

namespace msprobe::shim {

struct HookEntry {
  const char *name;
  void *(*wrapper)();  // the shim's function (a function, so that the table is a constant)
  HookSlot *slot;      // where its original lives
};

// How hosts reach a family's functions, and so how the shim's hooks get in their way.
enum class HookReach : unsigned char {
  // CANN entry points programs and libraries link against (acl*, rt*, Hccl*): not exported; direct calls from every
  // loaded object (the CANN libraries' calls to each other included) are redirected in its GOT's JUMP_SLOT entries
  // (shim/hooks/linked_calls.cpp), and dlsym answers with the hook.
  Linked,
  // CANN functions that hosts only look up with dlsym (torch_npu's PTA cache): dlsym answers with the hook.
  LookedUp,
  // libc functions (_exit, _Exit): exported, so that the dynamic linker binds every call to the shim (exports.map).
  Exported,
  // Functions of the host framework's own libraries (MindSpore's exported runtime profiler, shim/hooks/mindspore.cpp):
  // reached as Linked ones are (JUMP_SLOT redirection, dlsym), but not CANN's.
  Framework,
};

// Linked or Framework: calls through the PLT are redirected to the hook.
constexpr bool redirected_in_got(HookReach r) { return r == HookReach::Linked || r == HookReach::Framework; }

// One API family's hooks, defined in its own file, for dlsym dispatch and GOT redirection.
struct HookFamily {
  const HookEntry *entries;
  size_t count;
  HookReach reach;
};

// A hooked name: its entry, and how hosts reach it (its family's reach).
struct HookedName {
  const HookEntry *entry;
  HookReach reach;
};

// The hook of `name` (any family), or nullptr when the shim does not hook it. Safe before constructors.
const HookedName *find_hook(const char *name);
// The families' tables, in link order (the linker section msprobe_hooks).
const HookFamily *const *hook_families_begin();
const HookFamily *const *hook_families_end();

}  // namespace msprobe::shim
