// GOT patching: redirects calls that programs and libraries make through their PLT/GOT (they were linked
// against a library, e.g. a C++ program calling aclnnAdd directly) by rewriting the calling object's GOT
// entries. LD_PRELOAD interposition only catches names the shim exports, and changes what `&fn` means in every
// object; this catches any name, including aclnn ops the shim has never heard of, object by object.
//
// Every loaded object is visited with dl_iterate_phdr, except the shim itself, ld.so, the vDSO and objects
// the caller's skip predicate names (the CANN libraries: their internal calls must not be caught a second
// time). In each, the R_X86_64_JUMP_SLOT / R_X86_64_GLOB_DAT (aarch64: R_AARCH64_JUMP_SLOT / GLOB_DAT)
// relocations of function symbols found through DT_JMPREL and DT_RELA are offered to a callback, which returns
// the replacement target or nullptr to leave the entry alone. RELRO pages are made writable for the write and
// read-only again after. GLOB_DAT entries hold the address a program gets for `&fn`, so patching them also
// changes function-pointer identity: `&aclnnAdd` in the program then compares unequal to the library's, and
// dladdr on it names the replacement's object. PatchOptions::jump_slots_only leaves them alone (and with them the
// calls made through them: -fno-plt code, and x86-64 ld's .plt.got stubs of a function whose address the same
// object also takes).
//
// Locking. The loader has two locks: dl_load_lock, held by dlopen/dlclose for the whole operation
// (including library constructors) and by dlsym; and dl_load_write_lock, held by dl_iterate_phdr and briefly
// by dlopen/dlclose while they change the object list. heaptrack's injector deadlocked (commit 88e66a6)
// because its own mutex and the loader's lock were taken in both orders by different threads. Here:
//   - the patching mutex (one for the process) is taken before dl_iterate_phdr and never the other way round,
//     and nothing under it or inside a dl_iterate_phdr callback calls dlopen, dlsym or any caller code;
//   - the callbacks (skip, wants, resolve, replacement_for) run with no lock of ours or the loader's held, so they
//     may call dlsym/dlopen freely; patching may be started from a dlopen hook, even one running inside a
//     library constructor (dl_load_lock held): that thread then waits for our mutex, whose holder only ever
//     waits for dl_load_write_lock, which constructors do not hold.
// Never call patch_got from inside a dl_iterate_phdr callback. Objects are re-identified (base, program
// headers, name) after the callbacks ran, so one unloaded in between is simply not written to.
//
// Lazy binding. An entry not yet bound holds the address of the object's own PLT stub, which would jump
// right back through the patched entry; it is never handed to the callback. patch_got detects such entries
// (the target lies inside the object itself and is not the symbol's own definition there) and resolves
// them with PatchOptions::resolve (only for names PatchOptions::wants accepts), passing the callback nullptr
// if that is not set or finds nothing. A thread that is inside the lazy resolver for the same entry at the
// moment of patching can overwrite the replacement with the real target; PatchOptions::rescan repairs that
// (programs started with LD_BIND_NOW=1 or linked -z now have no such window).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace msprobe::shim {

enum class GotSlotKind : uint8_t { JumpSlot, GlobDat };

struct GotSlot {
  std::string object;  // the object's path as the loader knows it (dlpi_name); "" for the main program
  std::string symbol;
  void **slot = nullptr;   // the GOT entry
  void *target = nullptr;  // what it held when listed (before the write, for PatchOptions::patched)
  GotSlotKind kind = GotSlotKind::JumpSlot;
  bool relro = false;  // on a page the loader made read-only after relocation
  bool bound = true;   // false: lazy entry not yet resolved; `target` is the object's own PLT stub
};

// Returns the new target for `symbol_name`, or nullptr to leave the entry alone. current_target is the
// function the entry calls now, or nullptr when that is unknown (a lazy entry that PatchOptions::resolve did
// not resolve). Returning current_target leaves the entry alone too (a lazy entry stays lazy).
using ReplacementFor = std::function<void *(const char *symbol_name, void *current_target)>;

struct PatchOptions {
  // Objects to leave alone, by path (dlpi_name; "" for the main program). Runs with no lock held.
  std::function<bool(const char *object_path)> skip;
  // Names worth looking at; others are neither resolved nor offered. Set it whenever resolve is not cheap:
  // in a lazily bound process nearly every entry is unbound at start-up. Runs with no lock held.
  std::function<bool(const char *symbol_name)> wants;
  // Finds the real function behind a lazy entry that is not bound yet. The shim passes a lookup that does
  // not go through its own dlsym hook (find_original); tests may pass dlsym(RTLD_DEFAULT, name).
  std::function<void *(const char *symbol_name)> resolve;
  // The object containing this address is never patched: by default the one containing patch_got (the
  // shim), so that the shim's own calls to the real functions stay direct. Unit tests that link the shim's
  // code into the executable they patch set skip_self = false.
  const void *self_address = nullptr;
  bool skip_self = true;
  // Also re-examine objects that an earlier call of the same patcher has already visited (normally only
  // objects loaded since are). Entries that still hold the value this patcher wrote are left alone.
  bool rescan = false;
  // If set, receives one GotSlot per entry written (target = the value it held before).
  std::vector<GotSlot> *patched = nullptr;
  // Only JUMP_SLOT entries (the PLT's) are offered to the callback; GLOB_DAT entries keep the address the object
  // takes of the function (see above).
  bool jump_slots_only = false;
  // If set, called (no lock held) once for every entry `wants` accepts in each object this call visits, of either
  // kind and whether or not it is then written: what an object reaches, for diagnostics.
  std::function<void(const GotSlot &)> observe;
};

// Remembers which objects it visited and what it wrote, so that calling it again (after each dlopen)
// patches only new objects and never an entry twice. What it visited is remembered whatever the callback
// and options were, so use one patcher per redirection policy. Thread-safe; never throws.
class GotPatcher {
 public:
  GotPatcher();
  ~GotPatcher();
  GotPatcher(const GotPatcher &) = delete;
  GotPatcher &operator=(const GotPatcher &) = delete;

  // Returns how many entries were written.
  int patch(const ReplacementFor &replacement_for, const PatchOptions &options = {}) noexcept;

 private:
  struct State;
  State *state_;
};

// The process-wide patcher (immortal: patching may happen during exit).
int patch_got(const ReplacementFor &replacement_for, const PatchOptions &options = {}) noexcept;

// Every function GOT entry of the objects patch_got would visit (skip, wants, self_address and skip_self apply;
// nothing is written). For diagnostics, tests, and to ask whether a process references some names at all.
std::vector<GotSlot> list_got_slots(const PatchOptions &options = {}) noexcept;

}  // namespace msprobe::shim
