// Preloaded into stack_exception_host by the stack tests: defines msprobe_test_probe(), which captures a stack
// the way the shim does (libunwind opened RTLD_LOCAL on first use), including from destructors that run while an
// exception propagates. At exit it reports on stderr how many stacks it took and with which unwinder.
#include <dlfcn.h>

#include <atomic>
#include <cstdio>

#include "shim/stacks/stack_unwind.h"
#include "shim/stacks/stacks.h"

namespace {
std::atomic<int> g_captures{0};
std::atomic<int> g_nonempty{0};

__attribute__((destructor)) void report() {
  // libunwind must not have joined the global scope: the host's _Unwind_* stay libgcc_s's.
  const bool global_unw = dlsym(RTLD_DEFAULT, "unw_backtrace") != nullptr;
  std::fprintf(stderr, "probe: captures=%d nonempty=%d unwinder=%s global_libunwind=%d stacks=%zu\n", g_captures.load(),
               g_nonempty.load(), msprobe::shim::to_string(msprobe::shim::active_native_unwinder()), global_unw ? 1 : 0,
               msprobe::shim::StackTable::global().size());
}
}  // namespace

extern "C" __attribute__((visibility("default"))) void msprobe_test_probe(const char *) {
  const msprobe::shim::StackId id = msprobe::shim::StackTable::global().capture();
  g_captures.fetch_add(1);
  if (id != msprobe::shim::kEmptyStack) g_nonempty.fetch_add(1);
}
