// A library the stack tests dlopen after the module map was built, and dlclose again: its frames must be
// symbolized (a static function, from .symtab) both while it is loaded and after it was unloaded.
#include <cstdint>

volatile uint32_t g_plugin_sink;

static __attribute__((noinline)) uint32_t plugin_static_call(uint32_t (*cb)(void *), void *arg) {
  const uint32_t r = cb(arg);
  g_plugin_sink = r;  // not a tail call
  return r;
}

extern "C" __attribute__((visibility("default"))) uint32_t stack_plugin_call(uint32_t (*cb)(void *), void *arg) {
  const uint32_t r = plugin_static_call(cb, arg);
  g_plugin_sink = r + 1;
  return r;
}
