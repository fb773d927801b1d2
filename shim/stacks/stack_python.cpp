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
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "shim/base/log.h"
#include "shim/base/symbols.h"

namespace msprobe::shim {

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
  uintptr_t code_type = 0, unicode_type = 0, bytes_type = 0, frame_type = 0;  // &PyCode_Type...
};

// Where CPython keeps what the walk reads, per minor version, 64-bit (x86-64 and aarch64 alike): offsets from
// reference/python_frames.md §3-§8 (Include/cpython/pystate.h, internal/pycore_frame.h, cpython/code.h,
// cpython/unicodeobject.h of each release).
struct PythonStacks::RawLayout {
  int minor;
  size_t ts_head;         // PyThreadState.frame (3.8-3.10), .cframe (3.11, 3.12), .current_frame (3.13)
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

namespace {

using Layout = PythonStacks::RawLayout;
// clang-format off
constexpr Layout kLayouts[] = {
  //  minor head  cf  tid  fobj   code back lasti trace lineno sc  instr own fo   first file name qual table trc adapt  ascii compact
    {8,   24, -1, 176, true,  32, 24, 104, 80, 108, 1,  0,  0,  0,   40, 104, 112, 0,   120, 0,   0,   48, 72},
    {9,   24, -1, 176, true,  32, 24, 104, 80, 108, 1,  0,  0,  0,   40, 104, 112, 0,   120, 0,   0,   48, 72},
    {10,  24, -1, 176, true,  32, 24, 96,  72, 100, 2,  0,  0,  0,   40, 104, 112, 0,   120, 0,   0,   48, 72},
    {11,  56, 8,  152, false, 32, 48, 0,   0,  0,   0,  56, 69, 40,  72, 112, 120, 128, 136, 168, 184, 48, 72},
    {12,  56, 0,  136, false, 0,  8,  0,   0,  0,   0,  56, 70, 48,  68, 112, 120, 128, 136, 176, 192, 40, 56},
    {13,  72, -1, 152, false, 0,  8,  0,   0,  0,   0,  56, 70, 48,  68, 112, 120, 128, 136, 184, 200, 40, 56},
};
// clang-format on
constexpr size_t kObType = 8, kVarSize = 16, kBytesData = 32, kStrLength = 16, kStrState = 32;
constexpr size_t kFrameObjectLineno = 40;  // PyFrameObject.f_lineno, 3.11+
constexpr char kOwnedByGenerator = 1, kOwnedByCStack = 3;
constexpr int kMaxDepth = 4096;
constexpr int64_t kMaxString = 4096, kMaxTable = int64_t{64} << 20;

template <typename T>
T load_at(uintptr_t base, size_t off) {
  T v;
  std::memcpy(&v, reinterpret_cast<const void *>(base + off), sizeof(T));
  return v;
}

uintptr_t type_of(uintptr_t obj) { return load_at<uintptr_t>(obj, kObType); }

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  return h * 0xBF58476D1CE4E5B9ull;
}

// Up to 8 bytes at each end of `n` bytes at `p` (never past them: the bytes after an object are not its own).
uint64_t ends(uintptr_t p, size_t n) {
  uint64_t head = 0, tail = 0;
  const size_t k = std::min<size_t>(n, 8);
  std::memcpy(&head, reinterpret_cast<const void *>(p), k);
  std::memcpy(&tail, reinterpret_cast<const void *>(p + n - k), k);
  return mix(head, tail);
}

// A str's length and the bytes at both ends of its characters.
uint64_t str_sample(const Layout &L, uintptr_t s) {
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
      if (L.minor >= 12 && owner == kOwnedByCStack) {
        f = next;
        continue;
      }
      code = load_at<uintptr_t>(f, L.f_code);
      if (code == 0) return WalkResult::BadLayout;
      if (type_of(code) != A.code_type) {  // 3.13: None in entry frames (owner 3, skipped above); else unknown
        f = next;
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
        if (const int line = load_at<int>(fo, kFrameObjectLineno); line != 0) lasti = kPyLineFlag | line;
      }
    }
    out[(*n)++] = {code, lasti, fingerprint(L, code)};
    f = next;
  }
  return WalkResult::Ok;
}

// A str object's text as UTF-8 (compact strings only: code objects' names and filenames are).
bool read_str(const Layout &L, const PythonStacks::Api &A, uintptr_t s, std::string *out) {
  out->clear();
  if (s == 0 || type_of(s) != A.unicode_type) return false;
  const auto state = load_at<uint32_t>(s, kStrState);
  const unsigned kind = (state >> 2) & 7u;
  const bool compact = (state >> 5) & 1u, ascii = (state >> 6) & 1u;
  const auto length = std::min(load_at<int64_t>(s, kStrLength), kMaxString);
  if (!compact || length < 0) return false;
  if (ascii) {
    out->assign(reinterpret_cast<const char *>(s + L.str_ascii_data), static_cast<size_t>(length));
    return true;
  }
  if (kind != 1 && kind != 2 && kind != 4) return false;
  const uintptr_t data = s + L.str_compact_data;
  for (int64_t i = 0; i < length; ++i) {
    const uint32_t c = kind == 1   ? load_at<uint8_t>(data, static_cast<size_t>(i))
                       : kind == 2 ? load_at<uint16_t>(data, static_cast<size_t>(i) * 2)
                                   : load_at<uint32_t>(data, static_cast<size_t>(i) * 4);
    if (c < 0x80) {
      out->push_back(static_cast<char>(c));
    } else if (c < 0x800) {
      out->push_back(static_cast<char>(0xC0 | (c >> 6)));
      out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
      out->push_back(static_cast<char>(0xE0 | (c >> 12)));
      out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else {
      out->push_back(static_cast<char>(0xF0 | (c >> 18)));
      out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
  }
  return true;
}

// The line of the instruction at byte offset `q`, from the code object's own table (reference §7), as
// PyCode_Addr2Line computes it; -1 for an instruction without a line.
int decode_line(const Layout &L, const PythonStacks::Api &A, uintptr_t code, intptr_t q) {
  const int first = load_at<int>(code, L.co_firstlineno);
  if (q < 0) return first;
  const auto table = load_at<uintptr_t>(code, L.co_table);
  if (table == 0 || type_of(table) != A.bytes_type) return -1;
  const int64_t size = load_at<int64_t>(table, kVarSize);
  if (size < 0 || size > kMaxTable) return -1;
  const auto *p = reinterpret_cast<const uint8_t *>(table + kBytesData);
  const uint8_t *end = p + size;
  if (L.minor <= 9) {  // co_lnotab: (address increment, signed line increment) pairs
    int line = first;
    intptr_t addr = 0;
    for (; p + 1 < end; p += 2) {
      addr += p[0];
      if (addr > q) break;
      line += static_cast<int8_t>(p[1]);
    }
    return line;
  }
  if (L.minor == 10) {  // co_linetable: (range length, signed line delta or -128 = no line) pairs
    int line = first;
    intptr_t range_end = 0;
    for (; p + 1 < end; p += 2) {
      const intptr_t start = range_end;
      range_end += p[0];
      const auto delta = static_cast<int8_t>(p[1]);
      int here = -1;
      if (delta != -128) here = line += delta;
      if (start != range_end && start <= q && q < range_end) return here;
    }
    return -1;
  }
  // 3.11+ location table (Objects/locations.md)
  auto varint = [&p, end]() {
    if (p >= end) return uint32_t{0};
    uint32_t b = *p++, v = b & 63u, shift = 0;
    while ((b & 64u) != 0 && p < end && shift < 28) {
      b = *p++;
      shift += 6;
      v |= (b & 63u) << shift;
    }
    return v;
  };
  auto svarint = [&varint]() {
    const uint32_t u = varint();
    return (u & 1u) != 0 ? -static_cast<int>(u >> 1) : static_cast<int>(u >> 1);
  };
  int line = first;
  intptr_t addr = 0;
  while (p < end) {
    const uint8_t head = *p++;
    if ((head & 0x80u) == 0) return -1;  // not at an entry: a table we do not understand
    const int kind = (head >> 3) & 15, length = (head & 7) + 1;
    int delta = 0;
    if (kind == 15) {
    } else if (kind == 14) {
      delta = svarint();
      varint();
      varint();
      varint();
    } else if (kind == 13) {
      delta = svarint();
    } else if (kind >= 10) {
      delta = kind - 10;
      p += 2;
    } else {
      p += 1;
    }
    line += delta;
    const intptr_t next = addr + 2 * intptr_t{length};
    if (addr <= q && q < next) return kind == 15 ? -1 : line;
    addr = next;
  }
  return -1;
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

namespace {

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

// 3.13 publishes its own offsets at the start of _PyRuntime (_Py_DebugOffsets, reference §10): the table above
// must agree with them.
bool debug_offsets_agree(void *handle, const Layout &L) {
  const auto rt = reinterpret_cast<uintptr_t>(real_dlsym(handle, "_PyRuntime"));
  if (rt == 0 || std::memcmp(reinterpret_cast<const void *>(rt), "xdebugpy", 8) != 0) return false;
  if ((load_at<uint64_t>(rt, 8) >> 16) != 0x030D || load_at<uint64_t>(rt, 16) != 0) return false;  // not free-threaded
  auto at = [rt](size_t off) { return load_at<uint64_t>(rt, off); };
  return at(152 + 32) == L.ts_head && at(152 + 40) == L.ts_thread_id && at(224 + 8) == L.f_back &&
         at(224 + 16) == L.f_code && at(224 + 24) == L.f_instr && at(224 + 40) == L.f_owner &&
         at(272 + 8) == L.co_filename && at(272 + 16) == L.co_name && at(272 + 24) == L.co_qualname &&
         at(272 + 32) == L.co_table && at(272 + 40) == L.co_firstlineno && at(272 + 72) == L.co_adaptive &&
         at(352 + 8) == kObType && at(512 + 16) == kBytesData && at(536 + 8) == kStrState &&
         at(536 + 16) == kStrLength && at(536 + 24) == L.str_ascii_data;
}

}  // namespace

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
  auto type = [handle](const char *name) { return reinterpret_cast<uintptr_t>(real_dlsym(handle, name)); };
  api->code_type = type("PyCode_Type");
  api->unicode_type = type("PyUnicode_Type");
  api->bytes_type = type("PyBytes_Type");
  api->frame_type = type("PyFrame_Type");
  const bool ok = lookup(handle, "PyGILState_GetThisThreadState", api->GILState_GetThisThreadState) &&
                  api->code_type != 0 && api->unicode_type != 0 && api->bytes_type != 0 && api->frame_type != 0;
  if (!ok) {  // not CPython
    log_warn("the Python runtime is not a CPython this shim knows: kernels get no Python frames");
    delete api;
    absent_.store(true, std::memory_order_release);
    return nullptr;
  }
  lookup(handle, "PyGILState_Check", api->GILState_Check);
  lookup(handle, "PyThreadState_GetFrame", api->ThreadState_GetFrame);
  lookup(handle, "PyFrame_GetBack", api->Frame_GetBack);
  lookup(handle, "PyFrame_GetCode", api->Frame_GetCode);
  lookup(handle, "PyFrame_GetLineNumber", api->Frame_GetLineNumber);
  lookup(handle, "Py_IncRef", api->IncRef);
  lookup(handle, "Py_DecRef", api->DecRef);
  lookup(handle, "PyErr_Fetch", api->Err_Fetch);
  lookup(handle, "PyErr_Restore", api->Err_Restore);
  if (!lookup(handle, "PyThreadState_GetUnchecked", api->ThreadState_UncheckedGet))
    lookup(handle, "_PyThreadState_UncheckedGet", api->ThreadState_UncheckedGet);
  if (!lookup(handle, "Py_IsFinalizing", api->IsFinalizing)) lookup(handle, "_Py_IsFinalizing", api->IsFinalizing);
  interpreter_addr_.store(reinterpret_cast<uintptr_t>(api->GILState_GetThisThreadState), std::memory_order_release);

  const int version = python_version(handle);
  for (const Layout &L : kLayouts)
    if (version == (0x0300 | L.minor)) layout_ = &L;
  if (layout_ != nullptr && layout_->minor == 13 && !debug_offsets_agree(handle, *layout_)) {
    log_warn(
        "Python frames: CPython 3.13's _Py_DebugOffsets differ from the layout known (a free-threaded or "
        "changed build): kernels get no Python frames");
    layout_ = nullptr;
  } else if (layout_ == nullptr) {
    log_warn("Python frames: CPython %d.%d is not supported (3.8 to 3.13 are): kernels get no Python frames",
             version >> 8, version & 0xFF);
  }
  if (layout_ != nullptr && !raw_refused_.load(std::memory_order_acquire))
    raw_.store(layout_, std::memory_order_release);
  api_.store(api, std::memory_order_release);
  return api;
}

int PythonStacks::layout_minor() const noexcept {
  const RawLayout *L = raw_.load(std::memory_order_acquire);
  return L != nullptr ? L->minor : 0;
}

void PythonStacks::refuse(const char *why) noexcept {
  raw_.store(nullptr, std::memory_order_release);
  if (!raw_refused_.exchange(true)) log_warn("Python frames: %s; kernels get no Python frames from now on", why);
}

int PythonStacks::walk(PyFrameRef *out, int max) noexcept {
  const Api *a = bind();
  if (a == nullptr || max <= 0) return 0;
  const RawLayout *L = raw_.load(std::memory_order_acquire);
  if (L == nullptr || a->IsInitialized() == 0) return 0;
  if (a->IsFinalizing != nullptr && a->IsFinalizing() != 0) return 0;
  // This thread's own state, GIL held or not (never the "current" one: with the GIL released that can be another
  // thread's, reference §2).
  const auto ts = reinterpret_cast<uintptr_t>(a->GILState_GetThisThreadState());
  if (ts == 0) return 0;
  int n = 0;
  if (walk_frames(*L, *a, ts, out, max, &n) == WalkResult::BadLayout) {
    refuse("the interpreter's frames do not have the layout expected");
    return 0;
  }
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
    const int ours =
        (r.lasti & kPyLineFlag) != 0 ? static_cast<int>(r.lasti & ~kPyLineFlag) : decode_line(L, *a, r.code, r.lasti);
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
  const RawLayout &L = *layout_;
  CodeInfo ci;
  if (!read_str(L, *a, load_at<uintptr_t>(f.code, L.co_filename), &ci.filename)) ci.filename = "?";
  if (!read_str(L, *a, load_at<uintptr_t>(f.code, L.co_qualname != 0 ? L.co_qualname : L.co_name), &ci.qualname))
    ci.qualname = "?";
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
  if (a == nullptr || L == nullptr || a->IsInitialized() == 0) return false;
  try {
    void *ts = a->GILState_GetThisThreadState();
    const bool gil = ts != nullptr && holds_gil(a, ts);
    // GIL held, first sight of this stack: check the walk against the C API once more (its cost is small next to
    // resolving). A difference turns the walk off for good and this stack keeps no Python frames.
    if (gil && n > 0 && !agrees_with_c_api(a, ts, frames, n)) {
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
      const int line = (key.lasti & kPyLineFlag) != 0 ? static_cast<int>(key.lasti & ~kPyLineFlag)
                                                      : decode_line(*L, *a, key.code, key.lasti);
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
