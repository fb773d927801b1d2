// Python frames of the calling thread, read from the interpreter's own structures, GIL held or not.
//
// Rules (spec §3, reference/interception_anchors.md §5, reference/python_frames.md):
// - libpython is never linked; its symbols are found with dlsym(RTLD_DEFAULT) (Debian's python3.11 exports them
//   from the executable), else in a libpython opened RTLD_LOCAL, and only used once Py_IsInitialized() is true.
// - The walk reads the CALLING thread's own frame chain (PyGILState_GetThisThreadState(): this thread's state
//   whether or not it holds the GIL; its thread_id must be pthread_self()). That thread is blocked in our hook, so
//   its frames and their code objects cannot change or go away; other threads may run Python meanwhile. Real
//   hosts release the GIL around native calls (torch's bindings, ctypes.CDLL). The GIL is never taken, no Python
//   runs and CPython's allocator is never used on this path.
// - The layout is chosen at run time from the version (Py_Version, else Py_GetVersion()), 64-bit: a table per
//   minor version for CPython 3.8 to 3.12; from 3.13 on, the offsets the interpreter publishes itself in
//   _Py_DebugOffsets at the start of _PyRuntime (cookie, version, not free-threaded, every offset inside its
//   structure; the table's shape is known for 3.13 and 3.14). Every pointer followed is type-checked (frame, code,
//   str, bytes objects). A layout that cannot be read (another version, a free-threaded build, a table of an unknown
//   shape): frames from the C API where the GIL is held (PyThreadState_GetFrame, PyFrame_GetBack,
//   PyFrame_GetLineNumber, the code object's co_filename and co_qualname), none where it is released, one warning.
//   A runtime whose _Py_DebugOffsets name another version than Py_Version: no Python frames at all, one warning.
// - A frame is captured as (code object, instruction byte offset, fingerprint of the code object). Code objects
//   are not pinned when the GIL is released (a reference count cannot be touched without it), so a freed code
//   object's address can come back as another one: the fingerprint (its filename, name, qualname and line table
//   objects, first line) makes such a frame a different key. Where the GIL happens to be held, code objects seen
//   are also kept alive for good (one strong reference), as before.
// - File, qualified name (co_qualname, co_name before 3.11) and line (the version's line table decoded here) are
//   resolved natively once per distinct (code, offset, fingerprint), so the OpName is the same GIL or not. Where
//   the GIL is held, each stack seen for the first time is also compared with the C API's frames (3.9+); the
//   first difference turns the direct walk off for good (then: no Python frames, the C API walk included).
#pragma once
#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace msprobe::shim {

namespace python_internal {
struct PyLayout;  // python_layout.h
}  // namespace python_internal

// A frame as captured. `lasti` is the byte offset of the instruction into the bytecode (-1 before the first), or,
// while a trace function set the frame's own line (PyFrame_GetLineNumber's rule), that line with kPyLineFlag set.
// `check` fingerprints the code object (see above).
struct PyFrameRef {  // trivial on purpose: capture() keeps an uninitialized array of them on the stack
  uintptr_t code;
  intptr_t lasti;
  uintptr_t check;
};
inline constexpr size_t kPyFrameWords = sizeof(PyFrameRef) / sizeof(uintptr_t);
inline constexpr intptr_t kPyLineFlag = intptr_t{1} << 62;
inline constexpr int kMaxVerifyFrames = 256;  // frames compared when checking the raw walk

// What a frame resolves to.
struct PyFrameInfo {
  std::string filename;     // co_filename, as tracebacks show it
  std::string source_path;  // the file the source line is read from; empty when there is none (<frozen ...>)
  int line = 0;
  std::string qualname;            // co_qualname (co_name before 3.11)
  bool hidden_in_op_name = false;  // standard library, the shim, private / special / synthetic functions
  // Frames that render the same text (same file, line and function: two calls on one line, two code objects
  // of one lambda) share the id of the first such frame, so that stacks can be grouped by what they show.
  uint32_t display = 0;
};

// Python's standard library, which the OpName leaves out: frozen modules (`<frozen runpy>`), and files under a
// `lib/pythonX.Y/` (or lib64, or pythonXY.zip) directory except its site-packages / dist-packages. Also any path
// with a `msprobe_shim` directory component (the shim's own Python code).
bool is_hidden_python_file(std::string_view filename);

// Functions the OpName leaves out by their qualname's last component: private ones (`_run`, `Module._call_impl`),
// special methods except `__init__` (`Module.__call__`, `Tensor.__add__`) and synthetic scopes (`<module>`,
// `<listcomp>`, `<lambda>`, `<genexpr>`). They are dispatch machinery or say nothing about where in the model
// a kernel comes from; the enclosing named functions and methods remain.
bool is_hidden_python_function(std::string_view qualname);

// `File {filename}, line {line}, in {func}, \n {source}` (msprobe's frame format; the source stripped of
// surrounding whitespace, empty when unknown).
std::string python_frame_text(std::string_view filename, int line, std::string_view func, std::string_view source);

// Reads line `line` (1-based) of text files, each file read once and cached. Empty when unavailable.
class SourceLines {
 public:
  std::string line(const std::string &path, int line);

 private:
  std::mutex mu_;
  std::unordered_map<std::string, std::vector<std::string>> files_;
};

class PythonStacks {
 public:
  static PythonStacks &global();  // created on first use, never destroyed

  // The calling thread's Python frames, innermost first (at most `max`); 0 when there is no initialized Python
  // runtime, the thread has no Python state, or the layout is unknown and the thread does not hold the GIL. Never
  // throws, never takes the GIL.
  int walk(PyFrameRef *out, int max) noexcept;
  // Frame ids for frames that walk() just returned on this thread: call it in the same native call, before
  // control goes back to Python (the frames still execute, so their code objects are alive). Resolves frames seen
  // for the first time. Returns false (ids untouched) if the Python runtime went away or, GIL held, the C API
  // disagreed with the walk.
  bool resolve(const PyFrameRef *frames, int n, uint32_t *ids) noexcept;
  // The frame behind an id from resolve(). The reference stays valid forever.
  const PyFrameInfo &info(uint32_t id) const;
  size_t frames_known() const;

  // An address inside the interpreter's code (its module is where Python frames sit among native ones), 0 when
  // no Python runtime was found.
  uintptr_t interpreter_address() const { return interpreter_addr_.load(std::memory_order_acquire); }
  // A libpython was loaded: look for a Python runtime again if none was found so far.
  void refresh() noexcept;
  // Whether walk() can read frames without the GIL (a known layout, not refused) and, for tests, a way to turn the
  // walk off (then no Python frames, the C API walk included) or on again.
  bool raw_walk_active() const noexcept { return raw_.load(std::memory_order_acquire) != nullptr; }
  void allow_raw_walk(bool allow) noexcept;

  // The CPython minor version whose layout walk() uses (8..14), 0 when none.
  int layout_minor() const noexcept;

  struct Api;
  using RawLayout = python_internal::PyLayout;

 private:
  using IsInitializedFn = int (*)();
  PythonStacks() = default;
  const Api *bind() noexcept;
  IsInitializedFn is_initialized_function() noexcept;
  bool choose_layout(void *handle, const Api &api) noexcept;
  void refuse(const char *why) noexcept;
  bool holds_gil(const Api *a, void *ts) const noexcept;
  int walk_api(const Api *a, void *ts, PyFrameRef *out, int max) noexcept;
  bool agrees_with_c_api(const Api *a, void *ts, const PyFrameRef *frames, int n) noexcept;
  uint32_t code_index(const PyFrameRef &f, bool pin);  // strings of a code object, resolved once

  struct CodeInfo {
    std::string filename, source_path, qualname;
    bool hidden = false;
    bool pinned = false;
  };
  struct Key {
    uintptr_t code, check;
    intptr_t lasti;
    bool operator==(const Key &) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key &k) const noexcept {
      return std::hash<uintptr_t>{}(
          (k.code * 0x9E3779B97F4A7C15ull ^ static_cast<uintptr_t>(k.lasti)) * 0xBF58476D1CE4E5B9ull ^ k.check);
    }
  };

  std::atomic<const Api *> api_{nullptr};
  std::atomic<const RawLayout *> raw_{nullptr};  // the layout walk() uses; null: no Python frames
  const RawLayout *layout_ = nullptr;            // this interpreter's layout, if known
  std::atomic<bool> raw_refused_{false};         // a check failed, or a test said no
  bool api_fallback_capable_ = false;            // layout unknown, C API complete: frames where the GIL is held
  std::atomic<bool> api_walk_{false};            // walk() reads the C API (capable, not refused)
  std::atomic<bool> absent_{false};              // no Python runtime in the process (until refresh())
  std::atomic<IsInitializedFn> is_initialized_{nullptr};
  std::mutex bind_mu_;
  std::atomic<uintptr_t> interpreter_addr_{0};

  mutable std::mutex mu_;
  std::unordered_map<Key, uint32_t, KeyHash> code_ids_;  // lasti 0
  std::deque<CodeInfo> codes_;
  std::unordered_map<Key, uint32_t, KeyHash> frame_ids_;
  std::deque<PyFrameInfo> frames_;
  std::unordered_map<std::string, uint32_t> display_ids_;  // file, source, line, function -> first frame id
};

}  // namespace msprobe::shim
