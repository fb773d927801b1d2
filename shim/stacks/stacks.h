// Call stacks of kernel launches (issue 5).
//
// The journey of a stack, heaptrack style (reference/interception_anchors.md §1, §6):
//   capture (hook thread, hot path)   raw native return addresses (libunwind, shim frames skipped) + Python
//                                     (code object, instruction offset) pairs; hashed and looked up in the
//                                     StackTable: a stack seen before costs no allocation and no lock.
//   intern (first sight only)         Python frames resolved natively (file, line, qualname), GIL held or not,
//                                     module map refreshed if the loader's counters moved, OpName computed; the
//                                     stack gets the next small integer id.
//   render (writer side, late)        native frames symbolized from the modules' ELF files, Python source lines
//                                     read from disk; msprobe's frame strings for a MSPROBE_STACK mode.
//
// Typical use by a hook (the lead's wiring):
//     StackTable &st = StackTable::global();
//     StackId id = st.capture(StackTable::options_for(config.stack));   // directly in the hook, phase 1
//     std::string_view scope = st.op_name(id);                          // OpName (empty: use "Default")
//     ... the id travels with the launch record ...
//     writer: groups kernels by st.group(id, mode) and writes st.frames(group, mode) once per group.
//     dlopen / dlclose hooks, after the real call: StackTable::modules_changed();
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "shim/config/config.h"

namespace msprobe::shim {

using StackId = uint32_t;
// The stack with no frames: MSPROBE_STACK=off, nothing readable, or the table is full.
inline constexpr StackId kEmptyStack = 0;

struct StackCaptureOptions {
  bool native = true;    // native return addresses
  bool python = true;    // Python frames (the calling thread's own, GIL held or not)
  int max_native = 64;   // innermost frames kept (at most kMaxNativeFrames)
  int max_python = 128;  // innermost frames kept (at most kMaxPythonFrames)
};
inline constexpr int kMaxNativeFrames = 128;
inline constexpr int kMaxPythonFrames = 128;

// Which leading native frames capture() drops as the shim's own.
enum class OwnFrames {
  Auto,      // the capture call itself, plus every leading frame in the object that holds this code when that
             // object is a shared library (libmsprobe_shim.so: hooks, forwarders) or inside libffi's closure
             // entry code (the forwarders are libffi closures; libffi is the system's library)
  CallOnly,  // only the capture call itself (unit tests, where the code is linked into the test program)
};

class StackTable {
 public:
  // The process-wide table (created on first use, never destroyed: stacks may be rendered by exit handlers).
  static StackTable &global() {  // inline: every captured launch asks
    static StackTable *t = new StackTable();
    return *t;
  }
  StackTable();
  ~StackTable();
  StackTable(const StackTable &) = delete;
  StackTable &operator=(const StackTable &) = delete;

  // What capture() should record under a MSPROBE_STACK mode: Python frames always (the OpName is built from
  // them, and names must not depend on the stack mode), native frames for `native` and `mixed` only.
  static StackCaptureOptions options_for(StackMode mode);

  // Captures the calling thread's stack and returns its id; the same stack always gets the same id. Call it
  // from the hook itself, on the thread of the call the user's code made (aclnn: phase 1). The first native
  // frame is the caller of capture() (or the first frame outside the shim, see OwnFrames). Never throws;
  // kEmptyStack when nothing could be recorded. Thread-safe; lock-free for a stack seen before.
  StackId capture(const StackCaptureOptions &what = {}) noexcept;

  // The OpName scope of a stack (spec §5): the qualnames of its Python frames, outermost first, joined by '/',
  // leaving out Python's standard library (frozen modules, lib/pythonX.Y/ outside site-packages: runpy,
  // threading, importlib...), the shim's own Python code, and private, special and synthetic functions
  // (is_hidden_python_function: `_run`, `Module.__call__`, `<module>`; `__init__` stays). Empty without such
  // frames (the caller uses "Default"). Not sanitized (the collector's naming does that). Valid forever;
  // lock-free.
  std::string_view op_name(StackId id) const noexcept;

  // The frames of a stack as msprobe strings, innermost first (writer side; symbolizes and reads source
  // files, slow the first time per module/file):
  //   Python frames  `File {path}, line {n}, in {qualname}, \n {source line stripped}`
  //   native frames  `{symbol} ({module}+0x{offset})`, `{module}+0x{offset}` without a symbol
  //   Off: none; Native / Python: that kind only; Mixed: the native frames up to the first one inside the
  //   Python interpreter (the host library, ctypes/libffi), then the Python frames, then the remaining native
  //   frames (interpreter, main, libc) — innermost first throughout. Without a Python runtime, native only.
  // Not made csv-safe (the collector's stack_json() does that).
  std::vector<std::string> frames(StackId id, StackMode mode) const;

  // The representative of the stacks whose frames(…, mode) equal those of `id`: two stacks that differ only in
  // a part the mode does not show (Python frames under `native`, native ones under `python`), or Python frames
  // that render alike (two calls on one source line), share a group, so stack.json holds each distinct frame
  // list once. The first id asked about becomes the representative (so asking in launch order is deterministic)
  // and stays it. Off, or nothing to show: kEmptyStack.
  StackId group(StackId id, StackMode mode) const;

  // Number of distinct stacks, kEmptyStack included.
  size_t size() const noexcept;
  // The raw content of a stack (tests, diagnostics): native addresses (return addresses minus one) and
  // Python frame ids (PythonStacks::info()).
  std::vector<uintptr_t> native_addresses(StackId id) const;
  std::vector<uint32_t> python_frame_ids(StackId id) const;

  void set_own_frames(OwnFrames policy) noexcept { own_frames_.store(policy, std::memory_order_relaxed); }
  // At most this many distinct stacks (default 1,000,000); beyond, capture() says so once and returns
  // kEmptyStack.
  void set_capacity(size_t max_stacks) noexcept { capacity_.store(max_stacks, std::memory_order_relaxed); }

  // Call after dlopen / dlclose (the hooks): refreshes the module map, flushes libunwind's cache after an
  // unload, and, when a libpython appeared, lets the Python support look again for an interpreter loaded late.
  // New stacks also detect loader changes by themselves (glibc's dlpi_adds / dlpi_subs), so for the map this
  // is about promptness. Costs one dl_iterate_phdr pass.
  static void modules_changed() noexcept;

  struct Entry;

 private:
  struct Slots;
  StackId intern(uint64_t hash, const uintptr_t *words, int n_native, int n_python, const void *py_refs) noexcept;
  const Entry *find(const Slots *slots, uint64_t hash, const uintptr_t *words, int n_native, int n_python) const;
  const Entry *entry(StackId id) const noexcept;
  void insert_locked(Entry *e);

  static constexpr int kChunkBits = 12;
  static constexpr size_t kChunks = 1024;  // up to 4M ids

  std::atomic<Slots *> slots_{nullptr};
  std::atomic<std::atomic<Entry *> *> chunks_[kChunks] = {};
  std::atomic<uint32_t> count_{0};
  std::atomic<OwnFrames> own_frames_{OwnFrames::Auto};
  std::atomic<size_t> capacity_{1000000};
  std::atomic<bool> full_reported_{false};
  std::mutex mu_;                                    // inserts
  std::vector<std::unique_ptr<Slots>> slots_owned_;  // current and retired (readers may still probe old ones)

  struct Groups;
  std::unique_ptr<Groups> groups_;  // group(): rendered-part keys -> first id
};

}  // namespace msprobe::shim
