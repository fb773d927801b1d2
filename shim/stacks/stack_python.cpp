#include "shim/stacks/stack_python.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstddef>
#include <fstream>
#include <string>

#include "shim/base/log.h"
#include "shim/base/symbols.h"
#include "shim/stacks/python_code.h"
#include "shim/stacks/python_layout.h"

namespace msprobe::shim {

using namespace python_internal;

// The C API functions used, with their C signatures (PyObject * and PyThreadState * as void *). Only the thread
// state lookup, the version and the type objects are needed by the walk; the rest serve the check against the C
// API and pinning code objects, where the GIL happens to be held.
struct PythonStacks::Api {
  int (*IsInitialized)() = nullptr;
  int (*IsFinalizing)() = nullptr;  // optional: Py_IsFinalizing (3.13) or _Py_IsFinalizing
  void *(*GILState_GetThisThreadState)() = nullptr;
  int (*GILState_Check)() = nullptr;
  void *(*ThreadState_UncheckedGet)() = nullptr;    // optional: PyThreadState_GetUnchecked (3.13) or underscored
  void *(*ThreadState_GetFrame)(void *) = nullptr;  // 3.9+, new reference; optional
  void *(*Frame_GetBack)(void *) = nullptr;         // 3.9+, new reference; optional
  void *(*Frame_GetCode)(void *) = nullptr;         // 3.9+, new reference; optional
  int (*Frame_GetLineNumber)(void *) = nullptr;
  void (*IncRef)(void *) = nullptr;
  void (*DecRef)(void *) = nullptr;
  void (*Err_Fetch)(void **, void **, void **) = nullptr;
  void (*Err_Restore)(void *, void *, void *) = nullptr;
  void *(*Object_GetAttrString)(void *, const char *) = nullptr;              // the C API walk's strings
  const char *(*Unicode_AsUTF8AndSize)(void *, ptrdiff_t *) = nullptr;        // likewise
  uintptr_t code_type = 0, unicode_type = 0, bytes_type = 0, frame_type = 0;  // &PyCode_Type...
  // Everything the C API walk (GIL held, layout unknown) calls is there (3.9+).
  bool frame_api() const {
    return GILState_Check != nullptr && ThreadState_UncheckedGet != nullptr && ThreadState_GetFrame != nullptr &&
           Frame_GetBack != nullptr && Frame_GetCode != nullptr && Frame_GetLineNumber != nullptr &&
           IncRef != nullptr && DecRef != nullptr && Err_Fetch != nullptr && Err_Restore != nullptr &&
           Object_GetAttrString != nullptr && Unicode_AsUTF8AndSize != nullptr;
  }
};

namespace {

using Layout = PythonStacks::RawLayout;
constexpr size_t kFrameObjectLineno = 40;  // PyFrameObject.f_lineno, 3.11+
// _PyInterpreterFrame.owner: 1 is a generator's frame in every version; from 3 up, frames that are not Python code
// (3.12, 3.13: 3 = C-stack entry frame; 3.14: 3 = the interpreter's entry frame, 4 = C stack).
constexpr char kOwnedByGenerator = 1, kFirstNonCodeOwner = 3;
// 3.14 frames hold their code object as a _PyStackRef: the low bit is a reference-count tag, 0b11 a tagged int
// (Include/internal/pycore_stackref.h). Earlier versions hold a plain pointer, whose low bits are 0.
constexpr uintptr_t kStackRefTagBits = 3;
constexpr intptr_t kApiFrameCheck = 1;  // the C API walk's frames: their code objects are pinned (GIL held)
constexpr int kMaxDepth = 4096;

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  return h * 0xBF58476D1CE4E5B9ull;
}

// Up to 8 bytes at each end of `n` bytes at `p` (never past them: the bytes after an object are not its own).
// Fixed-size loads and a byte loop, not a variable-size memcpy: this runs for every Python frame of every capture
// (three times per frame), and a library call here cost more than the walk itself.
inline uint64_t ends(uintptr_t p, size_t n) {
  if (n >= 8) return mix(load_at<uint64_t>(p, 0), load_at<uint64_t>(p, n - 8));
  const auto *b = reinterpret_cast<const uint8_t *>(p);
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v = (v << 8) | b[i];
  return mix(v, v);
}

// A str's length and the bytes at both ends of its characters.
inline uint64_t str_sample(const Layout &L, uintptr_t s) {
  const auto state = load_at<uint32_t>(s, kStrState);
  const int64_t length = load_at<int64_t>(s, kStrLength);
  if (((state >> 5) & 1u) == 0 || length <= 0) return static_cast<uint64_t>(length);  // not compact: length only
  const bool ascii = ((state >> 6) & 1u) != 0;
  const unsigned kind = ascii ? 1u : (state >> 2) & 7u;
  const uintptr_t data = s + (ascii ? L.str_ascii_data : L.str_compact_data);
  return mix(static_cast<uint64_t>(length), ends(data, static_cast<size_t>(length) * kind));
}

// What tells a code object from another one later allocated at the same address (nothing pins it without the GIL):
// its filename, name and line-table objects, their sizes and the bytes at both ends of each, and its first line.
// Two code objects that agree on all of it show the same file and function, and almost surely the same lines.
uintptr_t fingerprint(const Layout &L, uintptr_t code) {
  const auto file = load_at<uintptr_t>(code, L.co_filename);
  const auto name = load_at<uintptr_t>(code, L.co_qualname != 0 ? L.co_qualname : L.co_name);
  const auto table = load_at<uintptr_t>(code, L.co_table);
  uint64_t h = mix(file, name);
  h = mix(h, table);
  h = mix(h, static_cast<uint64_t>(load_at<int>(code, L.co_firstlineno)));
  h = mix(h, str_sample(L, name));
  h = mix(h, str_sample(L, file));
  const int64_t size = load_at<int64_t>(table, kVarSize);
  h = mix(h, static_cast<uint64_t>(size));
  if (size > 0) h = mix(h, ends(table + kBytesData, static_cast<size_t>(size)));
  return h | 1;  // never 0
}

enum class WalkResult { Ok, NoState, BadLayout };

// The calling thread's frames, innermost first, by PyFrame_GetBack's rules: C-stack entry frames (3.12+) and
// incomplete frames (3.11+: still before their first traceable instruction, not a generator's) are skipped; the
// line of a frame whose trace function set it is kept as is (PyFrame_GetLineNumber's rule).
WalkResult walk_frames(const Layout &L, const PythonStacks::Api &A, uintptr_t ts, PyFrameRef *out, int max, int *n) {
  *n = 0;
  if (load_at<unsigned long>(ts, L.ts_thread_id) != static_cast<unsigned long>(pthread_self()))
    return WalkResult::NoState;  // a state created on this thread for another one
  uintptr_t f = load_at<uintptr_t>(ts, L.ts_head);
  if (L.cframe_current >= 0 && f != 0) f = load_at<uintptr_t>(f, static_cast<size_t>(L.cframe_current));
  for (int depth = 0; f != 0 && *n < max; ++depth) {
    if (depth >= kMaxDepth) return WalkResult::BadLayout;
    const auto next = load_at<uintptr_t>(f, L.f_back);
    if (next == f) return WalkResult::BadLayout;
    intptr_t lasti = 0;
    uintptr_t code = 0;
    if (L.frame_objects) {
      if (type_of(f) != A.frame_type) return WalkResult::BadLayout;
      code = load_at<uintptr_t>(f, L.f_code);
      if (code == 0 || type_of(code) != A.code_type) return WalkResult::BadLayout;
      const int raw = load_at<int>(f, L.f_lasti);
      lasti = raw < 0 ? -1 : intptr_t{raw} * L.lasti_scale;
      const int line = load_at<int>(f, L.f_lineno);
      const bool traced = L.minor >= 10 ? line != 0 : load_at<uintptr_t>(f, L.f_trace) != 0;
      if (traced) lasti = kPyLineFlag | line;
    } else {
      const auto owner = static_cast<char>(load_at<uint8_t>(f, L.f_owner));
      if (L.minor >= 12 && owner >= kFirstNonCodeOwner) {
        f = next;
        continue;
      }
      const auto executable = load_at<uintptr_t>(f, L.f_code);
      code = executable & ~kStackRefTagBits;
      if (code == 0) return WalkResult::BadLayout;
      if ((executable & kStackRefTagBits) == kStackRefTagBits || type_of(code) != A.code_type) {
        f = next;  // 3.13: None in entry frames (owner 3, skipped above); else not a code object
        continue;
      }
      const auto instr = static_cast<intptr_t>(load_at<uintptr_t>(f, L.f_instr));
      const intptr_t units = (instr - static_cast<intptr_t>(code + L.co_adaptive)) / 2;
      if (owner != kOwnedByGenerator && units < load_at<int>(code, L.co_firsttraceable)) {
        f = next;
        continue;
      }
      lasti = units < 0 ? -1 : units * 2;
      if (const auto fo = load_at<uintptr_t>(f, L.f_frame_obj); fo != 0) {
        if (type_of(fo) != A.frame_type) return WalkResult::BadLayout;
        // PyFrame_GetLineNumber: a positive f_lineno is the line (0: none set; 3.13+: -1, not computed yet).
        if (const int line = load_at<int>(fo, kFrameObjectLineno); line > 0) lasti = kPyLineFlag | line;
      }
    }
    out[(*n)++] = {code, lasti, fingerprint(L, code)};
    f = next;
  }
  return WalkResult::Ok;
}

// The interpreter's lib directory component: "python3.11" (also "python3.11d", "python3.13t"), or "python311.zip".
bool is_python_lib_dir(std::string_view c) {
  if (c.substr(0, 6) != "python") return false;
  c.remove_prefix(6);
  auto digits = [&c] {
    size_t n = 0;
    while (n < c.size() && std::isdigit(static_cast<unsigned char>(c[n]))) ++n;
    c.remove_prefix(n);
    return n;
  };
  if (digits() == 0) return false;
  if (c == ".zip") return true;
  if (c.empty() || c[0] != '.') return false;
  c.remove_prefix(1);
  if (digits() == 0) return false;
  return c.empty() || c == "d" || c == "t" || c == "m" || c == "td";  // debug / free-threaded / pymalloc ABI tags
}

// Saves the caller's pending exception, if any, and restores it on scope exit: whatever our calls raise is
// discarded, whatever the host had set survives.
class ErrorGuard {
 public:
  explicit ErrorGuard(const PythonStacks::Api *a) : a_(a) { a_->Err_Fetch(&type_, &value_, &tb_); }
  ~ErrorGuard() { a_->Err_Restore(type_, value_, tb_); }
  ErrorGuard(const ErrorGuard &) = delete;
  ErrorGuard &operator=(const ErrorGuard &) = delete;

 private:
  const PythonStacks::Api *a_;
  void *type_ = nullptr, *value_ = nullptr, *tb_ = nullptr;
};

bool file_exists(const std::string &p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string_view strip(std::string_view s) {
  auto ws = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; };
  while (!s.empty() && ws(s.front())) s.remove_prefix(1);
  while (!s.empty() && ws(s.back())) s.remove_suffix(1);
  return s;
}

template <typename F>
bool lookup(void *handle, const char *name, F &slot) {
  slot = reinterpret_cast<F>(real_dlsym(handle, name));
  return slot != nullptr;
}

// A str attribute of an object through the C API (GIL held): the C API walk's strings.
bool attr_string(const PythonStacks::Api &a, void *obj, const char *name, std::string *out) {
  out->clear();
  void *v = a.Object_GetAttrString(obj, name);
  if (v == nullptr) return false;
  ptrdiff_t n = 0;
  const char *s = a.Unicode_AsUTF8AndSize(v, &n);
  const bool ok = s != nullptr && n >= 0;
  if (ok) out->assign(s, static_cast<size_t>(std::min<ptrdiff_t>(n, kMaxString)));
  a.DecRef(v);
  return ok;
}

// The object that defines Py_IsInitialized as `init`, into *handle: RTLD_DEFAULT (a null handle) when the global
// scope finds it, else the libpython an embedder opened RTLD_LOCAL, kept loaded for as long as we hold pointers into
// it. False when that one is gone.
bool runtime_handle(int (*init)(), void **handle) {
  *handle = RTLD_DEFAULT;
  if (real_dlsym(RTLD_DEFAULT, "Py_IsInitialized") == reinterpret_cast<void *>(init)) return true;
  auto *lm = static_cast<link_map *>(object_containing(reinterpret_cast<void *>(init)));
  *handle = lm != nullptr && lm->l_name != nullptr ? real_dlopen(lm->l_name, RTLD_LAZY | RTLD_NOLOAD) : nullptr;
  return *handle != nullptr;
}

// The C API functions and type objects in `handle`. False when what the walk needs is missing (not CPython).
bool find_api(void *handle, PythonStacks::Api *api) {
  auto type = [handle](const char *name) { return reinterpret_cast<uintptr_t>(real_dlsym(handle, name)); };
  api->code_type = type("PyCode_Type");
  api->unicode_type = type("PyUnicode_Type");
  api->bytes_type = type("PyBytes_Type");
  api->frame_type = type("PyFrame_Type");
  const bool ok = lookup(handle, "PyGILState_GetThisThreadState", api->GILState_GetThisThreadState) &&
                  api->code_type != 0 && api->unicode_type != 0 && api->bytes_type != 0 && api->frame_type != 0;
  if (!ok) return false;
  lookup(handle, "PyGILState_Check", api->GILState_Check);
  lookup(handle, "PyThreadState_GetFrame", api->ThreadState_GetFrame);
  lookup(handle, "PyFrame_GetBack", api->Frame_GetBack);
  lookup(handle, "PyFrame_GetCode", api->Frame_GetCode);
  lookup(handle, "PyFrame_GetLineNumber", api->Frame_GetLineNumber);
  lookup(handle, "Py_IncRef", api->IncRef);
  lookup(handle, "Py_DecRef", api->DecRef);
  lookup(handle, "PyErr_Fetch", api->Err_Fetch);
  lookup(handle, "PyErr_Restore", api->Err_Restore);
  lookup(handle, "PyObject_GetAttrString", api->Object_GetAttrString);
  lookup(handle, "PyUnicode_AsUTF8AndSize", api->Unicode_AsUTF8AndSize);
  if (!lookup(handle, "PyThreadState_GetUnchecked", api->ThreadState_UncheckedGet))
    lookup(handle, "_PyThreadState_UncheckedGet", api->ThreadState_UncheckedGet);
  if (!lookup(handle, "Py_IsFinalizing", api->IsFinalizing)) lookup(handle, "_Py_IsFinalizing", api->IsFinalizing);
  return true;
}

}  // namespace

bool is_hidden_python_file(std::string_view f) {
  if (f.substr(0, 8) == "<frozen ") return true;
  std::vector<std::string_view> parts;
  for (size_t i = 0; i <= f.size();) {
    size_t j = f.find('/', i);
    if (j == std::string_view::npos) j = f.size();
    parts.push_back(f.substr(i, j - i));
    i = j + 1;
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i] == "msprobe_shim" && i + 1 < parts.size()) return true;
  }
  for (size_t i = 1; i + 1 < parts.size(); ++i) {
    if ((parts[i - 1] == "lib" || parts[i - 1] == "lib64") && is_python_lib_dir(parts[i])) {
      const std::string_view next = parts[i + 1];
      return next != "site-packages" && next != "dist-packages";
    }
  }
  return false;
}

bool is_hidden_python_function(std::string_view q) {
  const size_t dot = q.rfind('.');
  const std::string_view last = dot == std::string_view::npos ? q : q.substr(dot + 1);
  if (last.empty()) return false;
  if (last.front() == '<') return true;  // <module>, <listcomp>, <lambda>, <genexpr>...
  return last.front() == '_' && last != "__init__";
}

std::string python_frame_text(std::string_view filename, int line, std::string_view func, std::string_view source) {
  std::string s;
  s.reserve(filename.size() + func.size() + source.size() + 32);
  s.append("File ").append(filename).append(", line ").append(std::to_string(line)).append(", in ");
  s.append(func).append(", \n ").append(strip(source));
  return s;
}

std::string SourceLines::line(const std::string &path, int line) {
  if (path.empty() || line <= 0) return {};
  std::lock_guard<std::mutex> lock(mu_);
  auto it = files_.find(path);
  if (it == files_.end()) {
    std::vector<std::string> lines;
    std::ifstream in(path, std::ios::binary);
    constexpr std::streamoff kMaxSource = 64 << 20;  // not a source file
    if (in) {
      in.seekg(0, std::ios::end);
      const std::streamoff size = in.tellg();
      in.seekg(0, std::ios::beg);
      if (size >= 0 && size <= kMaxSource) {
        std::string l;
        while (std::getline(in, l)) lines.push_back(std::move(l));
      }
    }
    it = files_.emplace(path, std::move(lines)).first;
  }
  const auto &lines = it->second;
  return static_cast<size_t>(line) <= lines.size() ? std::string(strip(lines[static_cast<size_t>(line) - 1])) : "";
}

PythonStacks &PythonStacks::global() {
  static PythonStacks *p = new PythonStacks();  // leaked: code objects it pins live as long as the process
  return *p;
}

void PythonStacks::refresh() noexcept {
  if (absent_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(bind_mu_);
    is_initialized_.store(nullptr, std::memory_order_release);
    absent_.store(false, std::memory_order_release);
  }
}
// Py_IsInitialized, found once (null, and the runtime absent, when no object defines it).
PythonStacks::IsInitializedFn PythonStacks::is_initialized_function() noexcept {
  IsInitializedFn init = is_initialized_.load(std::memory_order_acquire);
  if (init != nullptr) return init;
  std::lock_guard<std::mutex> lock(bind_mu_);
  lookup(RTLD_DEFAULT, "Py_IsInitialized", init);
  if (init == nullptr) {
    // An embedder may have opened libpython RTLD_LOCAL, out of the global scope's reach.
    init = reinterpret_cast<IsInitializedFn>(find_original("Py_IsInitialized"));
  }
  if (init == nullptr) {
    absent_.store(true, std::memory_order_release);
    return nullptr;
  }
  is_initialized_.store(init, std::memory_order_release);
  return init;
}

// This interpreter's frame layout (layout_) or, when it has none that can be read, whether the C API walk serves
// where the GIL is held (api_fallback_capable_); each case says so once. False when the runtime contradicts itself
// (the symbols found may not be this interpreter's own): nothing is trusted then, the C API included.
bool PythonStacks::choose_layout(void *handle, const Api &api) noexcept {
  const int version = python_version(handle);
  const int major = version >> 8, minor = version & 0xFF;
  // Why the layout is unknown, when it is: frames then come from the C API where the GIL is held.
  std::string unknown;
  if (version >= 0x030D) {  // 3.13 on: the layout the interpreter publishes (reference §10)
    const DebugOffsetsRead d = read_debug_offsets(handle, version);
    if (d.verdict == DebugOffsetsRead::OtherVersion) {
      log_warn(
          "Python frames: the runtime says CPython %d.%d (Py_Version) but its _Py_DebugOffsets say %d.%d: "
          "kernels get no Python frames",
          major, minor, d.table_version >> 8, d.table_version & 0xFF);
      return false;
    }
    if (d.verdict == DebugOffsetsRead::Ok) {
      layout_ = new (std::nothrow) Layout(d.layout);  // kept for the life of the process, as the Api
      if (layout_ == nullptr) unknown = "out of memory";
    } else {
      unknown = d.verdict == DebugOffsetsRead::Absent ? "no _Py_DebugOffsets at the start of _PyRuntime" : d.why;
    }
  } else {
    layout_ = table_layout(version);
    if (layout_ == nullptr)
      unknown = "not a version with a known layout (3.8 to 3.12 here, 3.13 on from _Py_DebugOffsets)";
  }
  if (layout_ == nullptr) {
    api_fallback_capable_ = api.frame_api();
    if (api_fallback_capable_) {
      log_warn(
          "Python frames: CPython %d.%d's frame layout cannot be read (%s): Python frames only where the GIL is "
          "held (C API)",
          major, minor, unknown.c_str());
    } else {
      log_warn(
          "Python frames: CPython %d.%d's frame layout cannot be read (%s) and its C API lacks the frame "
          "functions: kernels get no Python frames",
          major, minor, unknown.c_str());
    }
  }
  return true;
}

const PythonStacks::Api *PythonStacks::bind() noexcept {
  const Api *a = api_.load(std::memory_order_acquire);
  if (a != nullptr) return a;
  if (absent_.load(std::memory_order_acquire)) return nullptr;
  const IsInitializedFn init = is_initialized_function();
  if (init == nullptr || init() == 0) return nullptr;  // not yet: look again at the next capture

  std::lock_guard<std::mutex> lock(bind_mu_);
  if ((a = api_.load(std::memory_order_acquire)) != nullptr) return a;
  void *handle = nullptr;
  if (!runtime_handle(init, &handle)) {
    absent_.store(true, std::memory_order_release);
    return nullptr;
  }
  auto *api = new (std::nothrow) Api();
  if (api == nullptr) return nullptr;
  api->IsInitialized = init;
  if (!find_api(handle, api)) {  // not CPython
    log_warn("the Python runtime is not a CPython this shim knows: kernels get no Python frames");
    delete api;
    absent_.store(true, std::memory_order_release);
    return nullptr;
  }
  interpreter_addr_.store(reinterpret_cast<uintptr_t>(api->GILState_GetThisThreadState), std::memory_order_release);
  if (choose_layout(handle, *api) && !raw_refused_.load(std::memory_order_acquire)) {
    if (layout_ != nullptr) raw_.store(layout_, std::memory_order_release);
    api_walk_.store(api_fallback_capable_, std::memory_order_release);
  }
  api_.store(api, std::memory_order_release);
  return api;
}

int PythonStacks::layout_minor() const noexcept {
  const RawLayout *L = raw_.load(std::memory_order_acquire);
  return L != nullptr ? L->minor : 0;
}

void PythonStacks::refuse(const char *why) noexcept {
  raw_.store(nullptr, std::memory_order_release);
  api_walk_.store(false, std::memory_order_release);
  if (!raw_refused_.exchange(true)) log_warn("Python frames: %s; kernels get no Python frames from now on", why);
}

int PythonStacks::walk(PyFrameRef *out, int max) noexcept {
  const Api *a = bind();
  if (a == nullptr || max <= 0) return 0;
  const RawLayout *L = raw_.load(std::memory_order_acquire);
  const bool api_walk = L == nullptr && api_walk_.load(std::memory_order_acquire);
  if ((L == nullptr && !api_walk) || a->IsInitialized() == 0) return 0;
  if (a->IsFinalizing != nullptr && a->IsFinalizing() != 0) return 0;
  // This thread's own state, GIL held or not (never the "current" one: with the GIL released that can be another
  // thread's, reference §2).
  const auto ts = reinterpret_cast<uintptr_t>(a->GILState_GetThisThreadState());
  if (ts == 0) return 0;
  if (api_walk)
    return holds_gil(a, reinterpret_cast<void *>(ts)) ? walk_api(a, reinterpret_cast<void *>(ts), out, max) : 0;
  int n = 0;
  if (walk_frames(*L, *a, ts, out, max, &n) == WalkResult::BadLayout) {
    refuse("the interpreter's frames do not have the layout expected");
    return 0;
  }
  return n;
}

// GIL held, layout unknown: the frames as the C API gives them (PyThreadState_GetFrame, PyFrame_GetBack), each with
// its line (PyFrame_GetLineNumber) in place of an instruction offset. Their code objects are pinned by resolve().
int PythonStacks::walk_api(const Api *a, void *ts, PyFrameRef *out, int max) noexcept {
  ErrorGuard keep(a);  // creating frame objects (3.11+) can fail with MemoryError: never leave it to the host
  int n = 0;
  void *f = a->ThreadState_GetFrame(ts);
  for (int depth = 0; f != nullptr && n < max && depth < kMaxDepth; ++depth) {
    void *code = a->Frame_GetCode(f);
    const int line = a->Frame_GetLineNumber(f);
    // The frame keeps its code alive while it executes, which it does until the hook returns.
    if (code != nullptr) {
      out[n++] = {reinterpret_cast<uintptr_t>(code), kPyLineFlag | static_cast<intptr_t>(static_cast<uint32_t>(line)),
                  static_cast<uintptr_t>(kApiFrameCheck)};
      a->DecRef(code);
    }
    void *back = a->Frame_GetBack(f);
    a->DecRef(f);
    f = back;
  }
  if (f != nullptr) a->DecRef(f);
  return n;
}

bool PythonStacks::holds_gil(const Api *a, void *ts) const noexcept {
  // PyGILState_Check() says yes unconditionally once sub-interpreters were used: also require that the thread
  // state holding the GIL is this thread's own.
  return a->GILState_Check != nullptr && a->ThreadState_UncheckedGet != nullptr && a->GILState_Check() != 0 &&
         a->ThreadState_UncheckedGet() == ts;
}

// GIL held: the C API's frames (PyThreadState_GetFrame, PyFrame_GetBack) have the same code objects and lines.
bool PythonStacks::agrees_with_c_api(const Api *a, void *ts, const PyFrameRef *frames, int n) noexcept {
  if (a->ThreadState_GetFrame == nullptr || a->Frame_GetBack == nullptr || a->Frame_GetCode == nullptr ||
      a->Frame_GetLineNumber == nullptr || a->DecRef == nullptr || a->Err_Fetch == nullptr || a->Err_Restore == nullptr)
    return true;  // 3.8: no such API; the type checks stand alone
  const RawLayout &L = *raw_.load(std::memory_order_acquire);
  ErrorGuard keep(a);  // creating frame objects (3.11+) can fail with MemoryError: never leave it to the host
  const int m = std::min(n, kMaxVerifyFrames);
  int i = 0;
  bool same = true;
  void *f = a->ThreadState_GetFrame(ts);
  while (f != nullptr && i < m && same) {
    void *code = a->Frame_GetCode(f);
    const int line = a->Frame_GetLineNumber(f);
    const PyFrameRef &r = frames[i++];
    const int ours = (r.lasti & kPyLineFlag) != 0 ? static_cast<int>(r.lasti & ~kPyLineFlag)
                                                  : decode_line(L, a->bytes_type, r.code, r.lasti);
    same = reinterpret_cast<uintptr_t>(code) == r.code && line == ours;
    a->DecRef(code);
    void *back = a->Frame_GetBack(f);
    a->DecRef(f);
    f = back;
  }
  if (f != nullptr) a->DecRef(f);
  return same && i == m;
}

void PythonStacks::allow_raw_walk(bool allow) noexcept {
  raw_refused_.store(!allow, std::memory_order_release);
  raw_.store(allow ? layout_ : nullptr, std::memory_order_release);
  api_walk_.store(allow && api_fallback_capable_, std::memory_order_release);
}

uint32_t PythonStacks::code_index(const PyFrameRef &f, bool pin) {
  const Key key{f.code, f.check, 0};
  const Api *a = api_.load(std::memory_order_acquire);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = code_ids_.find(key); it != code_ids_.end()) {
      CodeInfo &c = codes_[it->second];
      if (pin && !c.pinned) {
        a->IncRef(reinterpret_cast<void *>(f.code));  // GIL held: its address stays its own from now on
        c.pinned = true;
      }
      return it->second;
    }
  }
  CodeInfo ci;
  if (const RawLayout *L = layout_) {
    if (!read_str(*L, a->unicode_type, load_at<uintptr_t>(f.code, L->co_filename), &ci.filename)) ci.filename = "?";
    if (!read_str(*L, a->unicode_type, load_at<uintptr_t>(f.code, L->co_qualname != 0 ? L->co_qualname : L->co_name),
                  &ci.qualname))
      ci.qualname = "?";
  } else {  // the C API walk: the GIL is held
    ErrorGuard keep(a);
    void *code = reinterpret_cast<void *>(f.code);
    if (!attr_string(*a, code, "co_filename", &ci.filename)) ci.filename = "?";
    if (!attr_string(*a, code, "co_qualname", &ci.qualname) && !attr_string(*a, code, "co_name", &ci.qualname))
      ci.qualname = "?";
  }
  ci.hidden = is_hidden_python_file(ci.filename) || is_hidden_python_function(ci.qualname);
  if (!ci.filename.empty() && ci.filename[0] == '/') {
    ci.source_path = ci.filename;
  } else if (!ci.filename.empty() && ci.filename[0] != '<') {
    // Relative to the working directory at the time (what linecache tries first); it may change later.
    char cwd[PATH_MAX];
    if (::getcwd(cwd, sizeof(cwd)) != nullptr) {
      std::string p = std::string(cwd) + "/" + ci.filename;
      if (file_exists(p)) ci.source_path = std::move(p);
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, inserted] = code_ids_.emplace(key, static_cast<uint32_t>(codes_.size()));
  if (inserted) codes_.push_back(std::move(ci));
  CodeInfo &c = codes_[it->second];
  if (pin && !c.pinned) {
    a->IncRef(reinterpret_cast<void *>(f.code));
    c.pinned = true;
  }
  return it->second;
}

bool PythonStacks::resolve(const PyFrameRef *frames, int n, uint32_t *ids) noexcept {
  const Api *a = api_.load(std::memory_order_acquire);
  const RawLayout *L = raw_.load(std::memory_order_acquire);
  const bool api_walk = L == nullptr && api_walk_.load(std::memory_order_acquire);
  if (a == nullptr || (L == nullptr && !api_walk) || a->IsInitialized() == 0) return false;
  try {
    void *ts = a->GILState_GetThisThreadState();
    const bool gil = ts != nullptr && holds_gil(a, ts);
    if (api_walk && !gil) return false;  // the C API's frames are only read, and pinned, with the GIL
    // GIL held, first sight of this stack: check the walk against the C API once more (its cost is small next to
    // resolving). A difference turns the walk off for good and this stack keeps no Python frames.
    if (!api_walk && gil && n > 0 && !agrees_with_c_api(a, ts, frames, n)) {
      refuse("the direct frame walk disagreed with the C API");
      return false;
    }
    const bool pin = gil && a->IncRef != nullptr;
    for (int i = 0; i < n; ++i) {
      const Key key{frames[i].code, frames[i].check, frames[i].lasti};
      bool known = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (auto it = frame_ids_.find(key); it != frame_ids_.end()) {
          ids[i] = it->second;
          known = true;
        }
      }
      if (known) {
        if (pin) code_index(frames[i], true);  // first seen without the GIL: pin it now
        continue;
      }
      const uint32_t ci = code_index(frames[i], pin);
      // The code object is alive (its frame executes): decode its line table now.
      const int line = (key.lasti & kPyLineFlag) != 0 ? static_cast<int>(static_cast<uint32_t>(key.lasti))
                       : L != nullptr                 ? decode_line(*L, a->bytes_type, key.code, key.lasti)
                                                      : -1;
      std::lock_guard<std::mutex> lock(mu_);
      auto [it, inserted] = frame_ids_.emplace(key, static_cast<uint32_t>(frames_.size()));
      if (inserted) {
        const CodeInfo &c = codes_[ci];
        const uint32_t id = it->second;
        std::string shown = c.filename;
        shown.append(1, '\0').append(c.source_path).append(1, '\0').append(std::to_string(line));
        shown.append(1, '\0').append(c.qualname);
        const uint32_t display = display_ids_.emplace(std::move(shown), id).first->second;
        frames_.push_back(PyFrameInfo{c.filename, c.source_path, line, c.qualname, c.hidden, display});
      }
      ids[i] = it->second;
    }
    return true;
  } catch (...) {  // allocation failure: this stack goes without Python frames
    return false;
  }
}

const PyFrameInfo &PythonStacks::info(uint32_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return frames_.at(id);
}

size_t PythonStacks::frames_known() const {
  std::lock_guard<std::mutex> lock(mu_);
  return frames_.size();
}

}  // namespace msprobe::shim
