// Python frames of the calling thread, read through the CPython C API of whatever interpreter the host runs.
//
// Rules (spec §3, reference/interception_anchors.md §5):
// - libpython is never linked; the API is found with dlsym(RTLD_DEFAULT) (Debian's python3.11 exports it from the
//   executable), else in a libpython opened RTLD_LOCAL, and only used once Py_IsInitialized() returns true.
// - Frames are read only on a thread that holds the GIL (PyGILState_Check(), cross-checked against the thread
//   state the runtime says is current); the GIL is never taken. A thread without it (ctypes.CDLL calls, C++
//   worker threads, torch ops that released it) gets no Python frames.
// - Capture records (code object, instruction offset) per frame. Through the C API (PyThreadState_GetFrame,
//   PyFrame_GetBack/GetCode/GetLasti) that costs ~25 ns a frame, and 3.11 allocates a frame object for every
//   frame that has none yet. On CPython 3.11 the same pairs are read straight from the interpreter's frame
//   chain (tstate->cframe->current_frame, _PyInterpreterFrame.previous/f_code/prev_instr: a few ns a frame, no
//   allocation), still only under the GIL and only on the calling thread's own frames. That layout is private
//   to CPython, so the raw walk is switched on only after it gave exactly the C API's frames on a live stack,
//   is compared with the C API again for every stack seen for the first time, and is switched off for good at
//   the first difference. Other versions use the C API only.
// - File, line, function and
//   source are resolved once per distinct (code, offset), on first sight, while the GIL is still held; code
//   objects seen are kept alive forever (one strong reference each), so their addresses are never reused and
//   (code, offset) identifies a frame for the life of the process.
// - Pending Python exceptions are saved and restored around every use of the API.
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

// A frame as captured. `lasti` is PyFrame_GetLasti() (a byte offset into the bytecode), or, on Pythons before
// 3.11, the line number with kPyLineFlag set.
struct PyFrameRef {  // trivial on purpose: capture() keeps an uninitialized array of them on the stack
  uintptr_t code;
  intptr_t lasti;
};
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
  // runtime or this thread does not hold the GIL. Never throws, never takes the GIL.
  int walk(PyFrameRef *out, int max) noexcept;
  // Frame ids for frames that walk() just returned on this thread: call it in the same native call, before
  // control goes back to Python (the GIL is still held and the frames still execute). Resolves frames seen for
  // the first time. Returns false (ids untouched) if the Python runtime went away.
  bool resolve(const PyFrameRef *frames, int n, uint32_t *ids) noexcept;
  // The frame behind an id from resolve(). The reference stays valid forever.
  const PyFrameInfo &info(uint32_t id) const;
  size_t frames_known() const;

  // An address inside the interpreter's code (its module is where Python frames sit among native ones), 0 when
  // no Python runtime was found.
  uintptr_t interpreter_address() const { return interpreter_addr_.load(std::memory_order_acquire); }
  // A libpython was loaded: look for a Python runtime again if none was found so far.
  void refresh() noexcept;
  // Whether walk() reads the interpreter's frames directly (CPython 3.11, verified) and, for tests, a way to
  // turn that off (then walk() uses the C API only) or on again (pending verification).
  bool raw_walk_active() const noexcept { return raw_.load(std::memory_order_acquire) != nullptr; }
  void allow_raw_walk(bool allow) noexcept;

  struct Api;
  struct RawLayout;

 private:
  PythonStacks() = default;
  const Api *bind() noexcept;
  int walk_api(const Api *a, void *ts, PyFrameRef *out, int max) noexcept;
  void verify_raw(const Api *a, void *ts, const PyFrameRef *api_frames, int n) noexcept;
  uint32_t code_index(uintptr_t code);  // GIL held; strings of a code object, resolved once

  struct CodeInfo {
    std::string filename, source_path, qualname;
    bool hidden = false;
  };
  struct PairHash {
    size_t operator()(const std::pair<uintptr_t, intptr_t> &k) const noexcept {
      return std::hash<uintptr_t>{}(k.first * 0x9E3779B97F4A7C15ull ^ static_cast<uintptr_t>(k.second));
    }
  };

  std::atomic<const Api *> api_{nullptr};
  const RawLayout *raw_candidate_ = nullptr;     // the layout of this interpreter's version, if known
  std::atomic<const RawLayout *> raw_{nullptr};  // set once the candidate matched the C API
  std::atomic<bool> raw_refused_{false};         // a mismatch was seen, or a test said no
  std::atomic<bool> absent_{false};              // no Python runtime in the process (until refresh())
  std::atomic<int (*)()> is_initialized_{nullptr};
  std::mutex bind_mu_;
  std::atomic<uintptr_t> interpreter_addr_{0};

  mutable std::mutex mu_;
  std::unordered_map<uintptr_t, uint32_t> code_ids_;
  std::deque<CodeInfo> codes_;
  std::unordered_map<std::pair<uintptr_t, intptr_t>, uint32_t, PairHash> frame_ids_;
  std::deque<PyFrameInfo> frames_;
  std::unordered_map<std::string, uint32_t> display_ids_;  // file, source, line, function -> first frame id
};

}  // namespace msprobe::shim
