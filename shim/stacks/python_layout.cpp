#include "shim/stacks/python_layout.h"

#include <cstdio>
#include <optional>

#include "shim/base/symbols.h"

namespace msprobe::shim::python_internal {

namespace {

using Layout = PyLayout;
// clang-format off
constexpr Layout kLayouts[] = {
  //  minor head  cf  tid  fobj   code back lasti trace lineno sc  instr own fo   first file name qual table trc adapt  ascii compact
    {8,   24, -1, 176, true,  32, 24, 104, 80, 108, 1,  0,  0,  0,   40, 104, 112, 0,   120, 0,   0,   48, 72},
    {9,   24, -1, 176, true,  32, 24, 104, 80, 108, 1,  0,  0,  0,   40, 104, 112, 0,   120, 0,   0,   48, 72},
    {10,  24, -1, 176, true,  32, 24, 96,  72, 100, 2,  0,  0,  0,   40, 104, 112, 0,   120, 0,   0,   48, 72},
    {11,  56, 8,  152, false, 32, 48, 0,   0,  0,   0,  56, 69, 40,  72, 112, 120, 128, 136, 168, 184, 48, 72},
    {12,  56, 0,  136, false, 0,  8,  0,   0,  0,   0,  56, 70, 48,  68, 112, 120, 128, 136, 176, 192, 40, 56},
};
// clang-format on

// ---- _Py_DebugOffsets (reference §10): CPython 3.13+ says where its structures keep each field -------------------
//
// The struct sits at the start of _PyRuntime: the cookie "xdebugpy", PY_VERSION_HEX, whether the build is
// free-threaded, then one group per structure, each {sizeof, offsets of fields...}, every member a uint64_t. The
// groups differ between minor versions (3.14 added fields inside and after the thread state's), so the reader knows
// the shape of each minor's table; the offsets themselves are read from the running interpreter, not written here.
using U64 = uint64_t;
struct RuntimeGroup {
  U64 size, finalizing, interpreters_head;
};
struct ThreadGroup {
  U64 size, prev, next, interp, current_frame, thread_id, native_thread_id, datastack_chunk, status;
};
struct ObjectGroup {
  U64 size, ob_type;
};
struct TypeGroup {
  U64 size, tp_name, tp_repr, tp_flags;
};
struct SequenceGroup {
  U64 size, ob_item, ob_size;
};
struct BytesGroup {
  U64 size, ob_size, ob_sval;
};
struct UnicodeGroup {
  U64 size, state, length, asciiobject_size;
};
struct DictGroup {
  U64 size, ma_keys, ma_values;
};
struct FloatGroup {
  U64 size, ob_fval;
};
struct LongGroup {
  U64 size, lv_tag, ob_digit;
};
struct GcGroup {
  U64 size, collecting;
};

// Include/internal/pycore_runtime.h of 3.13.
struct DebugOffsets313 {
  char cookie[8];
  U64 version, free_threaded;
  RuntimeGroup runtime_state;
  struct {
    U64 size, id, next, threads_head, gc, imports_modules, sysdict, builtins, ceval_gil, gil_runtime_state,
        gil_runtime_state_enabled, gil_runtime_state_locked, gil_runtime_state_holder;
  } interpreter_state;
  ThreadGroup thread_state;
  struct {
    U64 size, previous, executable, instr_ptr, localsplus, owner;
  } interpreter_frame;
  struct {
    U64 size, filename, name, qualname, linetable, firstlineno, argcount, localsplusnames, localspluskinds,
        co_code_adaptive;
  } code_object;
  ObjectGroup pyobject;
  TypeGroup type_object;
  SequenceGroup tuple_object, list_object;
  DictGroup dict_object;
  FloatGroup float_object;
  LongGroup long_object;
  BytesGroup bytes_object;
  UnicodeGroup unicode_object;
  GcGroup gc;
};
static_assert(sizeof(DebugOffsets313) == 584);  // reference §10.3

// Include/internal/pycore_debug_offsets.h of 3.14.
struct DebugOffsets314 {
  char cookie[8];
  U64 version, free_threaded;
  RuntimeGroup runtime_state;
  struct {
    U64 size, id, next, threads_head, threads_main, gc, imports_modules, sysdict, builtins, ceval_gil,
        gil_runtime_state, gil_runtime_state_enabled, gil_runtime_state_locked, gil_runtime_state_holder,
        code_object_generation, tlbc_generation;
  } interpreter_state;
  ThreadGroup thread_state;
  struct {
    U64 size, previous, executable, instr_ptr, localsplus, owner, stackpointer, tlbc_index;
  } interpreter_frame;
  struct {
    U64 size, filename, name, qualname, linetable, firstlineno, argcount, localsplusnames, localspluskinds,
        co_code_adaptive, co_tlbc;
  } code_object;
  ObjectGroup pyobject;
  TypeGroup type_object;
  SequenceGroup tuple_object, list_object;
  struct {
    U64 size, used, table, mask;
  } set_object;
  DictGroup dict_object;
  FloatGroup float_object;
  LongGroup long_object;
  BytesGroup bytes_object;
  UnicodeGroup unicode_object;
  GcGroup gc;
  struct {
    U64 size, gi_name, gi_iframe, gi_frame_state;
  } gen_object;
  struct {
    U64 next, prev;
  } llist_node;
  struct {
    U64 eval_breaker, remote_debugger_support, remote_debugging_enabled, debugger_pending_call, debugger_script_path,
        debugger_script_path_size;
  } debugger_support;
};
static_assert(sizeof(DebugOffsets314) == 760);

constexpr char kDebugCookie[8] = {'x', 'd', 'e', 'b', 'u', 'g', 'p', 'y'};

// The layout a table describes, or nullopt with *why when it says something the walk cannot use. The table's own
// claims are checked (each offset inside its structure, the structures' sizes plausible), as are the few facts the
// walk takes as given on 64-bit CPython: ob_type at 8, a bytes object's size at 16 and data at 32, a str's length at
// 16 and state at 32. Two fields the table does not give are derived from neighbours, unchanged from 3.11 to 3.14 in
// non-free-threaded builds: PyCodeObject._co_firsttraceable (an int, then co_extra, right before co_code_adaptive)
// and _PyInterpreterFrame.frame_obj (the pointer right before instr_ptr). The C API cross-check, where the GIL is
// held, then checks the whole walk.
template <class D>
std::optional<Layout> layout_from(const D &d, int minor, std::string *why) {
  const auto &ts = d.thread_state;
  const auto &fr = d.interpreter_frame;
  const auto &co = d.code_object;
  const auto &un = d.unicode_object;
  auto inside = [](U64 off, U64 size, U64 width) { return off + width <= size; };
  auto plausible = [](U64 size) { return size >= 16 && size <= (U64{1} << 20); };
  if (d.free_threaded != 0) {
    *why = "a free-threaded build";
  } else if (!plausible(ts.size) || !plausible(fr.size) || !plausible(co.size) || !plausible(un.size)) {
    *why = "a structure size out of range";
  } else if (!inside(ts.current_frame, ts.size, 8) || !inside(ts.thread_id, ts.size, 8) ||
             !inside(fr.previous, fr.size, 8) || !inside(fr.executable, fr.size, 8) ||
             !inside(fr.instr_ptr, fr.size, 8) || fr.instr_ptr < 8 || !inside(fr.owner, fr.size, 1) ||
             !inside(co.filename, co.size, 8) || !inside(co.name, co.size, 8) || !inside(co.qualname, co.size, 8) ||
             !inside(co.linetable, co.size, 8) || !inside(co.firstlineno, co.size, 4) || co.co_code_adaptive < 32 ||
             co.co_code_adaptive > co.size || !inside(un.state, un.size, 4) || !inside(un.length, un.size, 8) ||
             un.asciiobject_size > un.size) {
    *why = "an offset outside its structure";
  } else if (d.pyobject.size != 16 || d.pyobject.ob_type != kObType || d.bytes_object.ob_size != kVarSize ||
             d.bytes_object.ob_sval != kBytesData || un.length != kStrLength || un.state != kStrState) {
    *why = "object headers of another shape";
  } else {
    return Layout{.minor = minor,
                  .ts_head = ts.current_frame,
                  .cframe_current = -1,
                  .ts_thread_id = ts.thread_id,
                  .frame_objects = false,
                  .f_code = fr.executable,
                  .f_back = fr.previous,
                  .f_lasti = 0,  // the PyFrameObject chain's (3.8-3.10)
                  .f_trace = 0,
                  .f_lineno = 0,
                  .lasti_scale = 0,
                  .f_instr = fr.instr_ptr,
                  .f_owner = fr.owner,
                  .f_frame_obj = fr.instr_ptr - 8,
                  .co_firstlineno = co.firstlineno,
                  .co_filename = co.filename,
                  .co_name = co.name,
                  .co_qualname = co.qualname,
                  .co_table = co.linetable,
                  .co_firsttraceable = co.co_code_adaptive - 16,
                  .co_adaptive = co.co_code_adaptive,
                  .str_ascii_data = un.asciiobject_size,
                  .str_compact_data = un.asciiobject_size + 16};  // PyCompactUnicodeObject: utf8_length, utf8
  }
  return std::nullopt;
}

}  // namespace

// The running interpreter's version as 0xMMmm (0x030B), 0 when unknown.
int python_version(void *handle) {
  if (const auto *v = static_cast<const unsigned long *>(real_dlsym(handle, "Py_Version")))  // 3.11+
    return static_cast<int>(*v >> 16);
  // Before 3.11: "3.8.18 (default, ...)", a static buffer filled by snprintf (no Python, no GIL).
  auto get = reinterpret_cast<const char *(*)()>(real_dlsym(handle, "Py_GetVersion"));
  const char *s = get != nullptr ? get() : nullptr;
  if (s == nullptr) return 0;
  int major = 0, minor = 0;
  if (std::sscanf(s, "%d.%d", &major, &minor) != 2) return 0;
  return (major << 8) | minor;
}

const PyLayout *table_layout(int version) {
  for (const Layout &L : kLayouts)
    if (version == (0x0300 | L.minor)) return &L;
  return nullptr;
}

DebugOffsetsRead read_debug_offsets(void *handle, int version) {
  DebugOffsetsRead r;
  const auto rt = reinterpret_cast<uintptr_t>(real_dlsym(handle, "_PyRuntime"));
  if (rt == 0 || std::memcmp(reinterpret_cast<const void *>(rt), kDebugCookie, sizeof kDebugCookie) != 0) return r;
  const auto hex = load_at<uint64_t>(rt, 8);  // PY_VERSION_HEX: the cookie and version are where every minor has them
  r.table_version = static_cast<int>((hex >> 16) & 0xFFFF);
  if (r.table_version != version) {
    r.verdict = DebugOffsetsRead::OtherVersion;
    return r;
  }
  // Final releases only: the table changed shape before 3.13.0 (3.13.0rc2) and may have during any pre-release.
  const bool final_release = (hex & 0xFFFFu) >= 0x00F0u;
  std::optional<Layout> L;
  if (!final_release) {
    r.why = "a pre-release";
  } else if (version == 0x030D) {
    L = layout_from(load_at<DebugOffsets313>(rt, 0), 13, &r.why);
  } else if (version == 0x030E) {
    L = layout_from(load_at<DebugOffsets314>(rt, 0), 14, &r.why);
  } else {
    r.why = "a _Py_DebugOffsets of a shape this shim does not know (it reads 3.13's and 3.14's)";
  }
  r.verdict = L ? DebugOffsetsRead::Ok : DebugOffsetsRead::Unreadable;
  if (L) r.layout = *L;
  return r;
}

}  // namespace msprobe::shim::python_internal
