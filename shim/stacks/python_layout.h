// Where CPython keeps what the Python frame walk (stack_python.h) reads, 64-bit (x86-64 and aarch64 alike): for 3.8 to
// 3.12 a row per minor version, written here; from 3.13 on, the offsets the running interpreter publishes itself in
// _Py_DebugOffsets, read and checked. Also the running interpreter's version. Nothing here runs Python or takes the
// GIL. Internal to shim/stacks/ (stack_python.cpp, python_code.cpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace msprobe::shim::python_internal {

// 3.8 to 3.12: offsets from reference/python_frames.md §3-§8 (Include/cpython/pystate.h, internal/pycore_frame.h,
// cpython/code.h, cpython/unicodeobject.h of each release). 3.13 on: built at run time from _Py_DebugOffsets.
struct PyLayout {
  int minor;
  size_t ts_head;         // PyThreadState.frame (3.8-3.10), .cframe (3.11, 3.12), .current_frame (3.13+)
  int cframe_current;     // _PyCFrame.current_frame; -1: no _PyCFrame indirection
  size_t ts_thread_id;    // PyThreadState.thread_id
  bool frame_objects;     // 3.8-3.10: a chain of PyFrameObject; else _PyInterpreterFrame
  size_t f_code, f_back;  // code object / code-or-None, and the caller's frame
  // PyFrameObject (3.8-3.10)
  size_t f_lasti, f_trace, f_lineno;
  int lasti_scale;  // f_lasti in bytes (1) or 2-byte code units (2, 3.10)
  // _PyInterpreterFrame (3.11+)
  size_t f_instr, f_owner, f_frame_obj;
  // PyCodeObject
  size_t co_firstlineno, co_filename, co_name, co_qualname /* 0: none */, co_table, co_firsttraceable, co_adaptive;
  // PyASCIIObject / PyCompactUnicodeObject: where the characters start
  size_t str_ascii_data, str_compact_data;
};

// Object headers every 64-bit CPython the walk reads shares (_Py_DebugOffsets, where it gives them, must agree):
// ob_type, a var-size object's ob_size, a bytes object's data, a str's length and state.
constexpr size_t kObType = 8, kVarSize = 16, kBytesData = 32, kStrLength = 16, kStrState = 32;

template <typename T>
T load_at(uintptr_t base, size_t off) {
  T v;
  std::memcpy(&v, reinterpret_cast<const void *>(base + off), sizeof(T));
  return v;
}

inline uintptr_t type_of(uintptr_t obj) { return load_at<uintptr_t>(obj, kObType); }

// The running interpreter's version as 0xMMmm (0x030B), 0 when unknown.
int python_version(void *handle);

// The layout of a version before 3.13 (0xMMmm), from the table; null for a version it has no row for.
const PyLayout *table_layout(int version);

// What the interpreter's _PyRuntime says of itself (3.13 on).
struct DebugOffsetsRead {
  enum { Absent, OtherVersion, Unreadable, Ok } verdict = Absent;
  int table_version = 0;  // 0xMMmm the table names
  std::string why;        // Unreadable
  PyLayout layout{};      // Ok
};

// The _Py_DebugOffsets at the start of _PyRuntime in the object `handle`, for a runtime that says it is `version`.
DebugOffsetsRead read_debug_offsets(void *handle, int version);

}  // namespace msprobe::shim::python_internal
