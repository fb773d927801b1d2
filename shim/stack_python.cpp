#include "shim/stack_python.h"

#include <dlfcn.h>
#include <link.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstring>
#include <fstream>
#include <sstream>

#include "shim/log.h"
#include "shim/symbols.h"

namespace msprobe::shim {

// The C API functions used, with their C signatures (PyObject * and PyThreadState * as void *).
struct PythonStacks::Api {
  int (*IsInitialized)() = nullptr;
  int (*IsFinalizing)() = nullptr;  // optional: Py_IsFinalizing (3.13) or _Py_IsFinalizing
  int (*GILState_Check)() = nullptr;
  void *(*GILState_GetThisThreadState)() = nullptr;
  void *(*ThreadState_UncheckedGet)() = nullptr;    // optional: PyThreadState_GetUnchecked (3.13) or underscored
  void *(*ThreadState_GetFrame)(void *) = nullptr;  // 3.9: new reference
  void *(*Frame_GetBack)(void *) = nullptr;         // 3.9: new reference
  void *(*Frame_GetCode)(void *) = nullptr;         // 3.9: new reference
  int (*Frame_GetLasti)(void *) = nullptr;          // 3.11; else Frame_GetLineNumber
  int (*Frame_GetLineNumber)(void *) = nullptr;
  int (*Code_Addr2Line)(void *, int) = nullptr;
  void *(*Object_GetAttrString)(void *, const char *) = nullptr;
  const char *(*Unicode_AsUTF8AndSize)(void *, ssize_t *) = nullptr;
  void (*IncRef)(void *) = nullptr;
  void (*DecRef)(void *) = nullptr;
  void (*Err_Fetch)(void **, void **, void **) = nullptr;
  void (*Err_Restore)(void *, void *, void *) = nullptr;
};

// Where CPython keeps what the raw walk reads (3.11: Include/cpython/pystate.h, Include/internal/pycore_frame.h,
// Include/cpython/code.h; the same on x86-64 and aarch64). The chain is tstate->cframe->current_frame, then
// frame->previous; a frame's instruction offset is (prev_instr - co_code_adaptive), in 2-byte code units.
struct PythonStacks::RawLayout {
  size_t tstate_cframe;         // PyThreadState.cframe
  size_t cframe_current;        // _PyCFrame.current_frame
  size_t frame_code;            // _PyInterpreterFrame.f_code
  size_t frame_previous;        // _PyInterpreterFrame.previous
  size_t frame_prev_instr;      // _PyInterpreterFrame.prev_instr
  size_t frame_owner;           // _PyInterpreterFrame.owner (char)
  size_t code_adaptive;         // PyCodeObject.co_code_adaptive (the bytecode)
  size_t code_first_traceable;  // PyCodeObject._co_firsttraceable (int)
  char owned_by_generator;      // FRAME_OWNED_BY_GENERATOR
};

namespace {

constexpr PythonStacks::RawLayout kCPython311{56, 8, 32, 48, 56, 69, 184, 168, 1};

template <typename T>
T load_at(uintptr_t base, size_t off) {
  T v;
  std::memcpy(&v, reinterpret_cast<const void *>(base + off), sizeof(T));
  return v;
}

// The calling thread's frames read from the interpreter's own structures, with PyThreadState_GetFrame's and
// PyFrame_GetBack's rules: frames that have not started yet ("incomplete": prev_instr before the first traceable
// instruction, not a generator's) are skipped; lasti as PyFrame_GetLasti gives it (bytes, -1 before the first
// instruction). Only valid while this thread holds the GIL: the frames are this thread's and do not move.
int walk_raw(const PythonStacks::RawLayout &L, void *tstate, PyFrameRef *out, int max) {
  const auto cframe = load_at<uintptr_t>(reinterpret_cast<uintptr_t>(tstate), L.tstate_cframe);
  if (cframe == 0) return 0;
  auto f = load_at<uintptr_t>(cframe, L.cframe_current);
  int n = 0;
  while (f != 0 && n < max) {
    const auto code = load_at<uintptr_t>(f, L.frame_code);
    const auto prev_instr = load_at<uintptr_t>(f, L.frame_prev_instr);
    const uintptr_t first = code + L.code_adaptive;
    const bool generator = load_at<char>(f, L.frame_owner) == L.owned_by_generator;
    const auto traceable = static_cast<intptr_t>(load_at<int>(code, L.code_first_traceable));
    const intptr_t units = (static_cast<intptr_t>(prev_instr) - static_cast<intptr_t>(first)) / 2;
    if (generator || units >= traceable) out[n++] = {code, units < 0 ? -1 : units * 2};
    f = load_at<uintptr_t>(f, L.frame_previous);
  }
  return n;
}

bool same_frames(const PyFrameRef *a, const PyFrameRef *b, int n) {
  for (int i = 0; i < n; ++i)
    if (a[i].code != b[i].code || a[i].lasti != b[i].lasti) return false;
  return true;
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

std::string attr_string(const PythonStacks::Api *a, void *obj, const char *name, bool *ok) {
  void *v = a->Object_GetAttrString(obj, name);
  if (v == nullptr) {
    *ok = false;
    return {};
  }
  ssize_t n = 0;
  const char *s = a->Unicode_AsUTF8AndSize(v, &n);
  std::string out = s != nullptr && n >= 0 ? std::string(s, static_cast<size_t>(n)) : std::string();
  *ok = s != nullptr;
  a->DecRef(v);
  return out;
}

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

const PythonStacks::Api *PythonStacks::bind() noexcept {
  const Api *a = api_.load(std::memory_order_acquire);
  if (a != nullptr) return a;
  if (absent_.load(std::memory_order_acquire)) return nullptr;
  int (*init)() = is_initialized_.load(std::memory_order_acquire);
  void *handle = RTLD_DEFAULT;
  if (init == nullptr) {
    std::lock_guard<std::mutex> lock(bind_mu_);
    lookup(RTLD_DEFAULT, "Py_IsInitialized", init);
    if (init == nullptr) {
      // An embedder may have opened libpython RTLD_LOCAL, out of the global scope's reach.
      init = reinterpret_cast<int (*)()>(find_original("Py_IsInitialized"));
    }
    if (init == nullptr) {
      absent_.store(true, std::memory_order_release);
      return nullptr;
    }
    is_initialized_.store(init, std::memory_order_release);
  }
  if (init() == 0) return nullptr;  // not yet: look again at the next capture

  std::lock_guard<std::mutex> lock(bind_mu_);
  if ((a = api_.load(std::memory_order_acquire)) != nullptr) return a;
  if (real_dlsym(RTLD_DEFAULT, "Py_IsInitialized") != reinterpret_cast<void *>(init)) {
    auto *lm = static_cast<link_map *>(object_containing(reinterpret_cast<void *>(init)));
    // Keeps libpython loaded for as long as we hold pointers into it.
    handle = lm != nullptr && lm->l_name != nullptr ? real_dlopen(lm->l_name, RTLD_LAZY | RTLD_NOLOAD) : nullptr;
    if (handle == nullptr) {
      absent_.store(true, std::memory_order_release);
      return nullptr;
    }
  }
  auto *api = new (std::nothrow) Api();
  if (api == nullptr) return nullptr;
  api->IsInitialized = init;
  bool ok = lookup(handle, "PyGILState_Check", api->GILState_Check) &&
            lookup(handle, "PyGILState_GetThisThreadState", api->GILState_GetThisThreadState) &&
            lookup(handle, "PyThreadState_GetFrame", api->ThreadState_GetFrame) &&
            lookup(handle, "PyFrame_GetBack", api->Frame_GetBack) &&
            lookup(handle, "PyFrame_GetCode", api->Frame_GetCode) &&
            lookup(handle, "PyFrame_GetLineNumber", api->Frame_GetLineNumber) &&
            lookup(handle, "PyCode_Addr2Line", api->Code_Addr2Line) &&
            lookup(handle, "PyObject_GetAttrString", api->Object_GetAttrString) &&
            lookup(handle, "PyUnicode_AsUTF8AndSize", api->Unicode_AsUTF8AndSize) &&
            lookup(handle, "Py_IncRef", api->IncRef) && lookup(handle, "Py_DecRef", api->DecRef) &&
            lookup(handle, "PyErr_Fetch", api->Err_Fetch) && lookup(handle, "PyErr_Restore", api->Err_Restore);
  if (!ok) {  // before 3.9 (no PyFrame_GetCode...) or not CPython
    log_info("the Python runtime lacks the frame API of CPython >= 3.9: kernels get native stacks only");
    delete api;
    absent_.store(true, std::memory_order_release);
    return nullptr;
  }
  lookup(handle, "PyFrame_GetLasti", api->Frame_GetLasti);
  if (!lookup(handle, "PyThreadState_GetUnchecked", api->ThreadState_UncheckedGet))
    lookup(handle, "_PyThreadState_UncheckedGet", api->ThreadState_UncheckedGet);
  if (!lookup(handle, "Py_IsFinalizing", api->IsFinalizing)) lookup(handle, "_Py_IsFinalizing", api->IsFinalizing);
  interpreter_addr_.store(reinterpret_cast<uintptr_t>(api->Frame_GetBack), std::memory_order_release);
  // Py_Version (3.11+): the raw walk knows 3.11's layout only. A 3.11 built with another object layout
  // (Py_TRACE_REFS adds two pointers to every object) fails the verification and keeps the C API.
  const auto *version = static_cast<const unsigned long *>(real_dlsym(handle, "Py_Version"));
  if (version != nullptr && (*version >> 16) == 0x030B && api->Frame_GetLasti != nullptr) raw_candidate_ = &kCPython311;
  api_.store(api, std::memory_order_release);
  return api;
}

int PythonStacks::walk(PyFrameRef *out, int max) noexcept {
  const Api *a = bind();
  if (a == nullptr || max <= 0 || a->IsInitialized() == 0) return 0;
  if (a->IsFinalizing != nullptr && a->IsFinalizing() != 0) return 0;
  if (a->GILState_Check() == 0) return 0;
  // PyGILState_Check() says yes unconditionally once sub-interpreters were used: also require that the thread
  // state holding the GIL is this thread's own.
  void *ts = a->GILState_GetThisThreadState();
  if (ts == nullptr) return 0;
  if (a->ThreadState_UncheckedGet != nullptr && a->ThreadState_UncheckedGet() != ts) return 0;

  if (const RawLayout *raw = raw_.load(std::memory_order_acquire)) return walk_raw(*raw, ts, out, max);
  ErrorGuard keep(a);  // creating frame objects (3.11) can fail with MemoryError: never leave it to the host
  const int n = walk_api(a, ts, out, max);
  if (n > 0 && raw_candidate_ != nullptr && !raw_refused_.load(std::memory_order_acquire)) verify_raw(a, ts, out, n);
  return n;
}

int PythonStacks::walk_api(const Api *a, void *ts, PyFrameRef *out, int max) noexcept {
  int n = 0;
  void *f = a->ThreadState_GetFrame(ts);
  while (f != nullptr && n < max) {
    void *code = a->Frame_GetCode(f);
    const intptr_t lasti =
        a->Frame_GetLasti != nullptr ? a->Frame_GetLasti(f) : (kPyLineFlag | a->Frame_GetLineNumber(f));
    // The frame keeps its code alive while it executes, which it does until we return: drop our reference now.
    out[n++] = {reinterpret_cast<uintptr_t>(code), lasti};
    a->DecRef(code);
    void *back = a->Frame_GetBack(f);
    a->DecRef(f);
    f = back;
  }
  if (f != nullptr) a->DecRef(f);
  return n;
}

// Switches the raw walk on when it reproduces the C API's frames of this live stack exactly.
void PythonStacks::verify_raw(const Api *, void *ts, const PyFrameRef *api_frames, int n) noexcept {
  PyFrameRef raw[kMaxVerifyFrames];
  const int m = std::min(n, kMaxVerifyFrames);
  const int got = walk_raw(*raw_candidate_, ts, raw, m);
  if (got == m && same_frames(raw, api_frames, m)) {
    raw_.store(raw_candidate_, std::memory_order_release);
  } else if (!raw_refused_.exchange(true)) {
    log_info("Python frames: the interpreter's frame layout is not the one expected; using the C API only");
  }
}

void PythonStacks::allow_raw_walk(bool allow) noexcept {
  raw_refused_.store(!allow, std::memory_order_release);
  if (!allow) raw_.store(nullptr, std::memory_order_release);
}

uint32_t PythonStacks::code_index(uintptr_t code) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = code_ids_.find(code); it != code_ids_.end()) return it->second;
  }
  const Api *a = api_.load(std::memory_order_acquire);
  void *obj = reinterpret_cast<void *>(code);
  CodeInfo ci;
  bool ok = true;
  ci.filename = attr_string(a, obj, "co_filename", &ok);
  if (!ok) ci.filename = "?";
  ci.qualname = attr_string(a, obj, "co_qualname", &ok);
  if (!ok) ci.qualname = attr_string(a, obj, "co_name", &ok);  // before 3.11
  if (!ok) ci.qualname = "?";
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
  a->IncRef(obj);  // pinned for the life of the process: its address is its identity
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, inserted] = code_ids_.emplace(code, static_cast<uint32_t>(codes_.size()));
  if (inserted) {
    codes_.push_back(std::move(ci));
  } else {
    a->DecRef(obj);  // another thread pinned it first; it still holds a reference, so this never frees it
  }
  return it->second;
}

bool PythonStacks::resolve(const PyFrameRef *frames, int n, uint32_t *ids) noexcept {
  const Api *a = api_.load(std::memory_order_acquire);
  if (a == nullptr || a->IsInitialized() == 0) return false;
  try {
    ErrorGuard keep(a);
    if (raw_.load(std::memory_order_acquire) != nullptr && n > 0) {
      // First sight of this stack: check the raw walk against the C API once more (its cost is small next to
      // resolving). A difference turns the raw walk off for good and this stack keeps no Python frames.
      void *ts = a->GILState_GetThisThreadState();
      PyFrameRef check[kMaxVerifyFrames];
      const int m = std::min(n, kMaxVerifyFrames);
      if (ts == nullptr || walk_api(a, ts, check, m) != m || !same_frames(check, frames, m)) {
        allow_raw_walk(false);
        log_warn("Python frames: the direct frame walk disagreed with the C API; using the C API only");
        return false;
      }
    }
    for (int i = 0; i < n; ++i) {
      const std::pair<uintptr_t, intptr_t> key{frames[i].code, frames[i].lasti};
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (auto it = frame_ids_.find(key); it != frame_ids_.end()) {
          ids[i] = it->second;
          continue;
        }
      }
      const uint32_t ci = code_index(key.first);
      const int line = (key.second & kPyLineFlag) != 0
                           ? static_cast<int>(key.second & ~kPyLineFlag)
                           : a->Code_Addr2Line(reinterpret_cast<void *>(key.first), static_cast<int>(key.second));
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
