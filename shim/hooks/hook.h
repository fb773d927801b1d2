// Shared plumbing of the interposed entry points (shim/hooks/*.cpp).
//
// Every hooked C function is defined with MSPROBE_HOOK_SLOT(name) next to it: the slot finds the
// real function lazily (first call, or the handle the host looked it up in). Hooks must never throw,
// abort or change the host's arguments or results; ReentryGuard lets calls the shim itself makes into
// the runtime (copies, events) pass straight through the shim's own hooks.
#pragma once
#include <cstddef>

#include "shim/base/reentry.h"
#include "shim/base/symbols.h"
#include "shim/hooks/activation.h"

#define MSPROBE_EXPORT extern "C" __attribute__((visibility("default")))

namespace msprobe::shim {

struct HookEntry {
  const char *name;
  void *wrapper;   // the shim's exported function
  HookSlot *slot;  // where its original lives
};

// Each API family lists its hooks (defined in its own file) for dlsym dispatch.
struct HookFamily {
  const HookEntry *entries;
  size_t count;
};

template <typename F>
inline F original_of(HookSlot &slot) {
  return reinterpret_cast<F>(slot.resolve());
}

}  // namespace msprobe::shim

// Declares the slot of hooked function `fn` and an `entry_<fn>` row for its family's table.
#define MSPROBE_HOOK_SLOT(fn) ::msprobe::shim::HookSlot slot_##fn{#fn}
#define MSPROBE_HOOK_ENTRY(fn) ::msprobe::shim::HookEntry{#fn, reinterpret_cast<void *>(&fn), &slot_##fn}
// The real function behind hooked function `fn`, typed like it.
#define MSPROBE_REAL(fn) ::msprobe::shim::original_of<decltype(&fn)>(slot_##fn)
