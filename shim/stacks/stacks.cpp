#include "shim/stacks/stacks.h"

#include <ffi.h>
#include <link.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>

#include "shim/base/log.h"
#include "shim/stacks/modules.h"
#include "shim/stacks/stack_python.h"
#include "shim/stacks/stack_unwind.h"
#include "shim/stacks/symbolize.h"

namespace msprobe::shim {

// The module map and the symbolizer know nothing of ACL: they live in the collector (spec §2).

struct StackTable::Entry {
  uint64_t hash = 0;
  StackId id = kEmptyStack;
  uint32_t n_native = 0, n_python = 0;
  uint32_t gen = 0;              // module map generation at first sight
  std::vector<uintptr_t> words;  // the key: native addresses, then (code, lasti) per Python frame
  std::vector<uint32_t> py_ids;  // PythonStacks frame ids, innermost first
  std::string op_name;
};

// Open addressing with linear probing; slots only go from null to an entry, so readers need no lock. A grown
// table replaces the old one, which stays allocated (readers may still be probing it) until the StackTable dies.
struct StackTable::Slots {
  explicit Slots(size_t capacity) : mask(capacity - 1), slot(new std::atomic<Entry *>[capacity]()) {}
  size_t mask;
  std::unique_ptr<std::atomic<Entry *>[]> slot;
};

struct StackTable::Groups {
  std::mutex mu;
  std::map<std::vector<uintptr_t>, StackId> by_mode[3];  // native, python, mixed: shown part -> first id
  std::vector<StackId> of[3];                            // per mode, id -> its group + 1 (0: not asked yet)
};

namespace {

// Four independent multiply lanes (a 70-word key is ~18 dependent multiplies, not 70) and a final avalanche.
// The hash only picks a slot and rejects most mismatches; equality is always checked on the whole key.
[[gnu::always_inline]] inline uint64_t hash_words(const uintptr_t *w, size_t n, uint64_t seed) {
  constexpr uint64_t k1 = 0x9E3779B97F4A7C15ull, k2 = 0xff51afd7ed558ccdull, k3 = 0xc4ceb9fe1a85ec53ull,
                     k4 = 0xd6e8feb86659fd93ull;
  uint64_t a = seed ^ k1, b = (seed + n) ^ k2, c = k3, d = k4;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    a = (a ^ w[i]) * k1;
    b = (b ^ w[i + 1]) * k2;
    c = (c ^ w[i + 2]) * k3;
    d = (d ^ w[i + 3]) * k4;
  }
  for (; i < n; ++i) a = (a ^ w[i]) * k2;
  uint64_t h = (a ^ (b >> 21) ^ (c >> 13) ^ (d >> 37)) + (b ^ (c << 7) ^ (d << 17));
  h = (h ^ (h >> 33)) * k2;
  h = (h ^ (h >> 29)) * k3;
  return h ^ (h >> 32);
}

[[gnu::always_inline]] inline uint64_t stack_hash(const uintptr_t *words, int n_native, int n_python) {
  const uint64_t seed = (static_cast<uint64_t>(n_native) << 32) | static_cast<uint32_t>(n_python);
  return hash_words(words, static_cast<size_t>(n_native) + kPyFrameWords * static_cast<size_t>(n_python), seed);
}

// The object (executable or shared library) that holds this code.
struct OwnModule {
  std::vector<std::pair<uintptr_t, uintptr_t>> loads;
  bool shared_library = false;
  bool contains(uintptr_t a) const {
    for (const auto &[b, e] : loads)
      if (a >= b && a < e) return true;
    return false;
  }
};

const OwnModule &own_module() {
  static const OwnModule *m = [] {
    auto *own = new OwnModule();
    struct Ctx {
      uintptr_t anchor;
      OwnModule *own;
      int index;
    } ctx{reinterpret_cast<uintptr_t>(&own_module), own, 0};
    dl_iterate_phdr(
        [](struct dl_phdr_info *info, size_t, void *data) -> int {
          auto *c = static_cast<Ctx *>(data);
          const int index = c->index++;
          std::vector<std::pair<uintptr_t, uintptr_t>> loads;
          bool mine = false;
          for (int i = 0; i < info->dlpi_phnum; ++i) {
            const ElfW(Phdr) &ph = info->dlpi_phdr[i];
            if (ph.p_type != PT_LOAD) continue;
            const uintptr_t b = info->dlpi_addr + ph.p_vaddr, e = b + ph.p_memsz;
            loads.emplace_back(b, e);
            mine |= c->anchor >= b && c->anchor < e;
          }
          if (!mine) return 0;
          c->own->loads = std::move(loads);
          c->own->shared_library = !(index == 0 && (info->dlpi_name == nullptr || info->dlpi_name[0] == '\0'));
          return 1;
        },
        &ctx);
    return own;
  }();
  return *m;
}

// Return addresses inside libffi's closure entry code (ffi_closure_unix64 -> ffi_closure_unix64_inner on x86-64,
// ffi_closure_SYSV -> ffi_closure_SYSV_inner on aarch64). The shim's forwarders are libffi closures, so these
// frames sit between the shim's hook frames and the host's call site; libffi is the system's shared library,
// outside the shim, and stripped of those (hidden) names. They are learned once by calling closures of our own,
// with and without floating-point arguments (libffi has an entry point per case), and skipped by exact address.
struct ClosureFrames {
  uintptr_t ip[8] = {};
  int n = 0;
  bool contains(uintptr_t a) const {
    for (int i = 0; i < n; ++i)
      if (ip[i] == a) return true;
    return false;
  }
};

struct ClosureProbe {
  uintptr_t frames[16];
  int n = 0;
};

void closure_probe(ffi_cif *, void *, void **, void *user) {
  auto *p = static_cast<ClosureProbe *>(user);
  p->n = unwind_native(p->frames, 16);  // frames[0]: inside this function; frames[1]: inside libffi
}

__attribute__((noinline)) void call_closure(void *code, bool with_double) {
  if (with_double) {
    reinterpret_cast<void (*)(int64_t, double)>(code)(1, 2.0);
  } else {
    reinterpret_cast<void (*)(int64_t)>(code)(1);
  }
  asm volatile("" ::: "memory");  // not a tail call: the frame above the closure's is this one
}

const ClosureFrames &closure_frames(const OwnModule &own) {
  static const ClosureFrames *cf = [&own] {
    auto *r = new ClosureFrames();
    for (bool with_double : {false, true}) {
      ffi_cif cif;
      ffi_type *args[2] = {&ffi_type_sint64, &ffi_type_double};
      void *code = nullptr;
      auto *closure = static_cast<ffi_closure *>(ffi_closure_alloc(sizeof(ffi_closure), &code));
      if (closure == nullptr) continue;
      ClosureProbe probe;
      if (ffi_prep_cif(&cif, FFI_DEFAULT_ABI, with_double ? 2 : 1, &ffi_type_void, args) == FFI_OK &&
          ffi_prep_closure_loc(closure, &cif, &closure_probe, &probe, code) == FFI_OK) {
        call_closure(code, with_double);
        // Everything before call_closure's frame (in our own object) is libffi's closure code.
        for (int i = 1; i < probe.n && !own.contains(probe.frames[i]); ++i)
          if (!r->contains(probe.frames[i]) && r->n < 8) r->ip[r->n++] = probe.frames[i];
      }
      ffi_closure_free(closure);
    }
    return r;
  }();
  return *cf;
}

SourceLines &source_lines() {
  static SourceLines *s = new SourceLines();
  return *s;
}

std::string make_op_name(const std::vector<uint32_t> &py_ids) {
  PythonStacks &py = PythonStacks::global();
  std::string name;
  for (auto it = py_ids.rbegin(); it != py_ids.rend(); ++it) {  // outermost first
    const PyFrameInfo &f = py.info(*it);
    if (f.hidden_in_op_name) continue;
    if (!name.empty()) name += '/';
    name += f.qualname;
  }
  return name;
}

}  // namespace

StackTable::StackTable() : groups_(std::make_unique<Groups>()) {
  auto *chunk = new std::atomic<Entry *>[size_t{1} << kChunkBits]();
  chunk[0].store(new Entry(), std::memory_order_relaxed);  // kEmptyStack
  chunks_[0].store(chunk, std::memory_order_release);
  count_.store(1, std::memory_order_release);
  slots_owned_.push_back(std::make_unique<Slots>(1024));
  slots_.store(slots_owned_.back().get(), std::memory_order_release);
}

StackTable::~StackTable() {
  const uint32_t n = count_.load(std::memory_order_acquire);
  for (uint32_t id = 0; id < n; ++id) delete entry(id);
  for (auto &c : chunks_) delete[] c.load(std::memory_order_acquire);
}

StackCaptureOptions StackTable::options_for(StackMode mode) {
  StackCaptureOptions o;
  o.native = mode == StackMode::Native || mode == StackMode::Mixed;
  o.python = true;
  return o;
}

__attribute__((noinline)) StackId StackTable::capture(const StackCaptureOptions &what) noexcept {
  constexpr int kOwnSlack = 24;  // room for the shim's own frames, dropped below
  uintptr_t words[kMaxNativeFrames + kOwnSlack + kPyFrameWords * kMaxPythonFrames];
  int nn = 0;
  if (what.native && what.max_native > 0) {
    const int want = std::min(what.max_native, kMaxNativeFrames);
    const int n = unwind_native(words, want + kOwnSlack);
    // Drop this function's own frame by address: everything before our return address (the caller's frame).
    // Normally that is words[0] alone (where unwind_native returns to, inside this function); by address, it
    // does not depend on how the compiler laid out the calls (inlining, a tail call into unwind_native).
    const auto ra = reinterpret_cast<uintptr_t>(__builtin_extract_return_addr(__builtin_return_address(0)));
    int skip = n > 0 ? 1 : 0;  // our return address not among the first frames: assume words[0] alone
    for (int i = 0; i < n && i < 4; ++i) {
      if (words[i] == ra) {
        skip = i;
        break;
      }
    }
    if (own_frames_.load(std::memory_order_relaxed) == OwnFrames::Auto) {
      const OwnModule &own = own_module();
      if (own.shared_library) {
        const ClosureFrames &closure = closure_frames(own);
        while (skip < n && (own.contains(words[skip]) || closure.contains(words[skip]))) ++skip;
      }
    }
    // Return addresses minus one: the call instruction, so symbols and lines are those of the call (heaptrack
    // bug 439897; a noreturn call can be the last instruction of a function).
    for (int i = skip; i < n && nn < want; ++i) words[nn++] = words[i] - 1;
  }
  PyFrameRef py[kMaxPythonFrames];
  int np = 0;
  if (what.python && what.max_python > 0) {
    np = PythonStacks::global().walk(py, std::min(what.max_python, kMaxPythonFrames));
    if (np > 0) std::memcpy(&words[nn], py, sizeof(PyFrameRef) * static_cast<size_t>(np));
  }
  if (nn == 0 && np == 0) return kEmptyStack;
  const uint64_t h = stack_hash(words, nn, np);
  if (const Entry *e = find(slots_.load(std::memory_order_acquire), h, words, nn, np)) return e->id;
  return intern(h, words, nn, np, py);
}

const StackTable::Entry *StackTable::find(const Slots *s, uint64_t hash, const uintptr_t *words, int n_native,
                                          int n_python) const {
  const size_t n_words = static_cast<size_t>(n_native) + kPyFrameWords * static_cast<size_t>(n_python);
  for (size_t i = hash & s->mask;; i = (i + 1) & s->mask) {
    const Entry *e = s->slot[i].load(std::memory_order_acquire);
    if (e == nullptr) return nullptr;
    if (e->hash == hash && e->n_native == static_cast<uint32_t>(n_native) &&
        e->n_python == static_cast<uint32_t>(n_python) &&
        std::memcmp(e->words.data(), words, n_words * sizeof(uintptr_t)) == 0)
      return e;
  }
}

__attribute__((noinline)) StackId StackTable::intern(uint64_t h, const uintptr_t *words, int nn, int np,
                                                     const void *py_refs) noexcept {
  try {
    auto e = std::make_unique<Entry>();
    // Python frames first, without any lock of ours (with the GIL held, the C API cross-check may run the
    // garbage collector, whose finalizers may launch kernels and come back here).
    e->py_ids.resize(static_cast<size_t>(np));
    if (np > 0 && !PythonStacks::global().resolve(static_cast<const PyFrameRef *>(py_refs), np, e->py_ids.data())) {
      np = 0;
      e->py_ids.clear();
      if (nn == 0) return kEmptyStack;
      h = stack_hash(words, nn, 0);
      if (const Entry *found = find(slots_.load(std::memory_order_acquire), h, words, nn, 0)) return found->id;
    }
    ModuleMap &modules = ModuleMap::global();
    if (nn > 0 && modules.refresh_if_changed().removed > 0) flush_native_unwind_cache();
    e->gen = modules.generation();
    e->hash = h;
    e->n_native = static_cast<uint32_t>(nn);
    e->n_python = static_cast<uint32_t>(np);
    e->words.assign(words, words + nn + kPyFrameWords * static_cast<size_t>(np));
    e->op_name = make_op_name(e->py_ids);

    std::lock_guard<std::mutex> lock(mu_);
    if (const Entry *found = find(slots_.load(std::memory_order_relaxed), h, words, nn, np)) return found->id;
    const uint32_t id = count_.load(std::memory_order_relaxed);
    if (id >= capacity_.load(std::memory_order_relaxed) || id >= (kChunks << kChunkBits)) {
      if (!full_reported_.exchange(true))
        log_warn("more than %u distinct call stacks: later new stacks are not recorded", id);
      return kEmptyStack;
    }
    std::atomic<Entry *> *chunk = chunks_[id >> kChunkBits].load(std::memory_order_relaxed);
    if (chunk == nullptr) {
      chunk = new std::atomic<Entry *>[size_t{1} << kChunkBits]();
      chunks_[id >> kChunkBits].store(chunk, std::memory_order_release);
    }
    e->id = id;
    Entry *raw = e.release();
    chunk[id & ((1u << kChunkBits) - 1)].store(raw, std::memory_order_release);
    count_.store(id + 1, std::memory_order_release);
    insert_locked(raw);
    return id;
  } catch (...) {  // allocation failure: this launch goes without a stack
    return kEmptyStack;
  }
}

void StackTable::insert_locked(Entry *e) {
  auto place = [](Slots *s, Entry *x) {
    size_t i = x->hash & s->mask;
    while (s->slot[i].load(std::memory_order_relaxed) != nullptr) i = (i + 1) & s->mask;
    s->slot[i].store(x, std::memory_order_release);
  };
  Slots *s = slots_.load(std::memory_order_relaxed);
  const size_t n = count_.load(std::memory_order_relaxed);  // includes e and kEmptyStack (never in the slots)
  if (n * 2 > s->mask + 1) {                                // keep the load under 1/2: probes stay short
    size_t cap = (s->mask + 1) * 2;
    while (n * 2 > cap) cap *= 2;
    auto grown = std::make_unique<Slots>(cap);
    for (uint32_t id = 1; id < n; ++id)
      if (Entry *x = const_cast<Entry *>(entry(id)); x != nullptr && x != e) place(grown.get(), x);
    s = grown.get();
    slots_owned_.push_back(std::move(grown));
    place(s, e);
    slots_.store(s, std::memory_order_release);
    return;
  }
  place(s, e);
}

const StackTable::Entry *StackTable::entry(StackId id) const noexcept {
  if (id >= count_.load(std::memory_order_acquire)) return nullptr;
  const std::atomic<Entry *> *chunk = chunks_[id >> kChunkBits].load(std::memory_order_acquire);
  return chunk != nullptr ? chunk[id & ((1u << kChunkBits) - 1)].load(std::memory_order_acquire) : nullptr;
}

std::string_view StackTable::op_name(StackId id) const noexcept {
  const Entry *e = entry(id);
  return e != nullptr ? std::string_view(e->op_name) : std::string_view();
}

size_t StackTable::size() const noexcept { return count_.load(std::memory_order_acquire); }

std::vector<uintptr_t> StackTable::native_addresses(StackId id) const {
  const Entry *e = entry(id);
  return e != nullptr ? std::vector<uintptr_t>(e->words.begin(), e->words.begin() + e->n_native)
                      : std::vector<uintptr_t>();
}

std::vector<uint32_t> StackTable::python_frame_ids(StackId id) const {
  const Entry *e = entry(id);
  return e != nullptr ? e->py_ids : std::vector<uint32_t>();
}

std::vector<std::string> StackTable::frames(StackId id, StackMode mode) const {
  std::vector<std::string> out;
  const Entry *e = entry(id);
  if (e == nullptr || mode == StackMode::Off) return out;
  const bool want_native = mode == StackMode::Native || mode == StackMode::Mixed;
  const bool want_python = mode == StackMode::Python || mode == StackMode::Mixed;

  std::vector<std::string> python;
  if (want_python) {
    PythonStacks &py = PythonStacks::global();
    for (uint32_t pid : e->py_ids) {
      const PyFrameInfo &f = py.info(pid);
      python.push_back(python_frame_text(f.filename, f.line, f.qualname, source_lines().line(f.source_path, f.line)));
    }
  }
  if (!want_native) return python;

  ModuleMap &modules = ModuleMap::global();
  Symbolizer &sym = Symbolizer::global();
  std::optional<ModuleInfo> interpreter;
  if (!python.empty())
    if (const uintptr_t a = PythonStacks::global().interpreter_address(); a != 0) interpreter = modules.find(a, e->gen);
  size_t split = e->n_native;  // where the Python frames go: before the first frame inside the interpreter
  std::optional<ModuleInfo> m;
  for (uint32_t i = 0; i < e->n_native; ++i) {
    const uintptr_t a = e->words[i];
    if (!m || !m->alive_at(e->gen) || !m->contains(a)) m = modules.find(a, e->gen);
    out.push_back(sym.describe(a, m ? &*m : nullptr));
    if (split == e->n_native && interpreter && m && m->base == interpreter->base && m->path == interpreter->path)
      split = i;
  }
  out.insert(out.begin() + static_cast<std::ptrdiff_t>(split), python.begin(), python.end());
  return out;
}

StackId StackTable::group(StackId id, StackMode mode) const {
  if (mode == StackMode::Off) return kEmptyStack;
  const Entry *e = entry(id);
  if (e == nullptr) return kEmptyStack;
  const int which = mode == StackMode::Native ? 0 : mode == StackMode::Python ? 1 : 2;
  std::lock_guard<std::mutex> lock(groups_->mu);
  std::vector<StackId> &known = groups_->of[which];  // the writer asks once per kernel: answer from here
  if (id < known.size() && known[id] != 0) return known[id] - 1;
  const bool native = mode != StackMode::Python, python = mode != StackMode::Native;
  // The key is what frames() shows: native addresses, and Python frames by their display id (two instruction
  // offsets on one line are two frame ids but one rendered frame). The native count keeps the parts apart.
  std::vector<uintptr_t> key;
  if (native && e->n_native > 0) {
    key.push_back(e->n_native);
    key.insert(key.end(), e->words.begin(), e->words.begin() + e->n_native);
  }
  if (python && !e->py_ids.empty()) {
    PythonStacks &py = PythonStacks::global();
    if (key.empty()) key.push_back(0);
    for (uint32_t pid : e->py_ids) key.push_back(py.info(pid).display);
  }
  // The first id asked about keeps the group.
  const StackId g = key.empty() ? kEmptyStack : groups_->by_mode[which].emplace(std::move(key), id).first->second;
  if (id >= known.size()) known.resize(std::max<size_t>(id + 1, known.size() * 2));
  known[id] = g + 1;
  return g;
}

void StackTable::modules_changed() noexcept {
  try {
    ModuleMap &modules = ModuleMap::global();
    const ModuleMap::Changes ch = modules.refresh();
    if (ch.removed > 0) flush_native_unwind_cache();
    // An embedder that loads libpython late: look for the interpreter again (only then: the search visits
    // every loaded object).
    if (ch.added > 0 && modules.appeared_in(modules.generation(), "libpython")) PythonStacks::global().refresh();
  } catch (...) {
  }
}

}  // namespace msprobe::shim
