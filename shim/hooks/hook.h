// Shared plumbing of the interposed entry points (shim/hooks/*.cpp).
//
// An API family is one file that lists its hooked C functions once, in an X-macro, and defines them:
//
//   #define MSPROBE_MEMORY_HOOKS(X) X(aclrtMalloc) X(aclrtFree)
//   MSPROBE_HOOK_SLOTS(MSPROBE_MEMORY_HOOKS)            // before the definitions: one slot per name
//   MSPROBE_HOOK aclError aclrtMalloc(...) { auto real = MSPROBE_REAL(aclrtMalloc); ... }
//   MSPROBE_HOOK_FAMILY(MSPROBE_MEMORY_HOOKS, Linked)   // after them: the family's table and how hosts reach it
//
// A slot finds the real function lazily (first call, or the handle the host looked it up in). The family's
// table lands in the linker section msprobe_hooks, which shim/hooks/hook_table.cpp reads whole: no list of families
// to keep, and nothing there runs a constructor (the dlsym hook runs before any, shim/hooks/dl.cpp). Hooks must
// never throw, abort or change the host's arguments or results; ReentryGuard lets calls the shim itself makes
// into the runtime (copies, events) pass straight through the shim's own hooks.
//
// How a hook is put in the host's way depends on the family's HookReach (hook_table.h): a CANN function is never
// exported by the shim, so that the address a linked program takes of it (`&aclrtMalloc`) stays CANN's (MindSpore finds
// its CANN install with dladdr on it, reference/mindspore_runtime.md §1.1); calls reach the hook through dlsym's answer
// and through the redirected GOT entries of direct calls (shim/hooks/linked_calls.h).
#pragma once
#include <cstddef>
#include <iterator>

#include "shim/base/reentry.h"
#include "shim/base/symbols.h"
#include "shim/hooks/activation.h"
#include "shim/hooks/hook_table.h"

namespace msprobe::shim {

template <auto Fn>
void *address_of() {
  return reinterpret_cast<void *>(Fn);
}

template <typename F>
inline F original_of(HookSlot &slot) {
  return reinterpret_cast<F>(slot.resolve());
}

}  // namespace msprobe::shim

// The slot of function `fn`: a hooked one (through MSPROBE_HOOK_SLOTS), or one the shim only calls.
#define MSPROBE_HOOK_SLOT(fn) \
  constinit ::msprobe::shim::HookSlot slot_##fn { #fn }
// The real function behind `fn`, typed like it.
#define MSPROBE_REAL(fn) ::msprobe::shim::original_of<decltype(&fn)>(slot_##fn)

#define MSPROBE_HOOK_SLOT_ROW_(fn) MSPROBE_HOOK_SLOT(fn);
#define MSPROBE_HOOK_ENTRY_ROW_(fn) ::msprobe::shim::HookEntry{#fn, &::msprobe::shim::address_of<&fn>, &slot_##fn},
// The slots of the hooks a family's X-macro `list` names (`list(X)` expands X(name) for each).
#define MSPROBE_HOOK_SLOTS(list) list(MSPROBE_HOOK_SLOT_ROW_)
// The family's table, registered by a pointer to it in the section msprobe_hooks (pointers: the section stays an
// array, where a compiler may align larger objects further). One per file, after its hooks' definitions; `reach` is
// one of HookReach's names (Linked, LookedUp, Exported). test/integration/edges/dladdr/gen_hooked_names.py reads this
// line.
#define MSPROBE_HOOK_FAMILY(list, reach)                                                                               \
  namespace {                                                                                                          \
  constinit const ::msprobe::shim::HookEntry msprobe_family_entries[] = {list(MSPROBE_HOOK_ENTRY_ROW_)};               \
  constinit const ::msprobe::shim::HookFamily msprobe_family{                                                          \
      msprobe_family_entries, std::size(msprobe_family_entries), ::msprobe::shim::HookReach::reach};                   \
  [[gnu::used, gnu::section("msprobe_hooks")]] constinit const ::msprobe::shim::HookFamily *const msprobe_family_ref = \
      &msprobe_family;                                                                                                 \
  }
