// Test-only library for test_stacks_python.py, loaded through ctypes: ctypes.PyDLL keeps the GIL held during a
// call (Python frames are read), ctypes.CDLL releases it (native frames only). The capture code is linked into
// this library, so its own frames (the exported functions below) are the "shim frames" capture() skips.
#include <ffi.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "shim/stacks/stack_python.h"
#include "shim/stacks/stack_unwind.h"
#include "shim/stacks/stacks.h"

using namespace msprobe::shim;

#define STACKS_EXPORT extern "C" __attribute__((visibility("default")))

namespace {
int64_t copy_out(const std::string &s, char *buf, size_t len) {
  if (buf != nullptr && len > 0) {
    const size_t n = std::min(len - 1, s.size());
    std::memcpy(buf, s.data(), n);
    buf[n] = '\0';
  }
  return static_cast<int64_t>(s.size());
}
}  // namespace

// mode: 0 off, 1 native, 2 python, 3 mixed (StackMode's order).
STACKS_EXPORT uint32_t stacks_capture(int native, int python) {
  StackCaptureOptions o;
  o.native = native != 0;
  o.python = python != 0;
  return StackTable::global().capture(o);
}

// The same capture, reached through a libffi closure the way the shim's forwarders are: the closure's frames
// (libffi's closure entry code) must be skipped like the library's own, so the stack equals stacks_capture's.
namespace {
void via_closure_fn(ffi_cif *, void *ret, void **args, void *) {
  *static_cast<ffi_arg *>(ret) = stacks_capture(*static_cast<int *>(args[0]), *static_cast<int *>(args[1]));
}
}  // namespace

STACKS_EXPORT uint32_t stacks_capture_via_closure(int native, int python) {
  static ffi_cif cif;
  static ffi_type *types[2] = {&ffi_type_sint, &ffi_type_sint};
  static void *code = nullptr;
  if (code == nullptr) {
    auto *closure = static_cast<ffi_closure *>(ffi_closure_alloc(sizeof(ffi_closure), &code));
    if (closure == nullptr || ffi_prep_cif(&cif, FFI_DEFAULT_ABI, 2, &ffi_type_uint32, types) != FFI_OK ||
        ffi_prep_closure_loc(closure, &cif, &via_closure_fn, nullptr, code) != FFI_OK)
      return 0;
  }
  const uint32_t id = reinterpret_cast<uint32_t (*)(int, int)>(code)(native, python);
  asm volatile("" ::: "memory");
  return id;
}

// The frames joined by '\x1e'; returns the full length (call again with a bigger buffer if it did not fit).
STACKS_EXPORT int64_t stacks_render(uint32_t id, int mode, char *buf, size_t len) {
  std::string joined;
  for (const std::string &f : StackTable::global().frames(id, static_cast<StackMode>(mode))) {
    if (!joined.empty()) joined += '\x1e';
    joined += f;
  }
  return copy_out(joined, buf, len);
}

STACKS_EXPORT int64_t stacks_op_name(uint32_t id, char *buf, size_t len) {
  return copy_out(std::string(StackTable::global().op_name(id)), buf, len);
}

STACKS_EXPORT uint32_t stacks_group(uint32_t id, int mode) {
  return StackTable::global().group(id, static_cast<StackMode>(mode));
}

STACKS_EXPORT int stacks_python_frames(uint32_t id) {
  return static_cast<int>(StackTable::global().python_frame_ids(id).size());
}

STACKS_EXPORT int stacks_native_frames(uint32_t id) {
  return static_cast<int>(StackTable::global().native_addresses(id).size());
}

STACKS_EXPORT uint64_t stacks_count() { return StackTable::global().size(); }

// The direct CPython 3.11 frame walk: whether it is on; allow(0) turns it off (C API only), allow(1) lets the
// next capture verify and turn it on again.
STACKS_EXPORT int stacks_raw_walk_active() { return PythonStacks::global().raw_walk_active() ? 1 : 0; }
STACKS_EXPORT void stacks_allow_raw_walk(int allow) { PythonStacks::global().allow_raw_walk(allow != 0); }

STACKS_EXPORT const char *stacks_unwinder() { return to_string(active_native_unwinder()); }
