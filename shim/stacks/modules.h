// Which loaded object (executable, shared library, vDSO) an instruction address belongs to, over the life of the
// process: stacks are captured as raw addresses and symbolized later, possibly after the library was unloaded.
//
// The map is built from dl_iterate_phdr. A module is never forgotten: dlclose only ends its life at a generation,
// and a stack remembers the generation it was captured in, so an address is attributed to the module that was
// mapped there at capture time even if another one took its place later.
//
// Refreshing: refresh() re-reads the loader's list (call it after dlopen/dlclose); refresh_if_changed() first
// compares glibc's dlpi_adds/dlpi_subs counters, which costs one dl_iterate_phdr step. Never call either from
// inside a dl_iterate_phdr callback or while holding a lock that a dlopen'ed constructor may need.
#pragma once
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace msprobe::shim {

struct ModuleInfo {
  std::string path;    // as the loader names it; the main program's real path (/proc/self/exe); "linux-vdso.so.1"
  uintptr_t base = 0;  // load bias (dlpi_addr): file address = runtime - base
  std::vector<std::pair<uintptr_t, uintptr_t>> loads;  // runtime [begin, end) of each PT_LOAD segment
  uint32_t first_gen = 0;                              // generation in which it appeared
  uint32_t end_gen = UINT32_MAX;                       // generation in which it disappeared (UINT32_MAX: loaded)
  bool main_program = false;
  bool contains(uintptr_t addr) const;
  bool alive_at(uint32_t gen) const { return first_gen <= gen && gen < end_gen; }
};

// The last path component ("libfoo.so.1" for "/usr/lib/libfoo.so.1").
std::string module_basename(const std::string &path);

class ModuleMap {
 public:
  // The process-wide map (created on first use, never destroyed).
  static ModuleMap &global();

  // Re-reads the list of loaded objects; bumps the generation when something was added or removed.
  struct Changes {
    int added = 0, removed = 0;
  };
  Changes refresh();
  // refresh() only when glibc's load/unload counters moved since the last refresh.
  Changes refresh_if_changed();
  uint32_t generation() const;

  // The module that held `addr` in generation `gen`.
  std::optional<ModuleInfo> find(uintptr_t addr, uint32_t gen) const;
  // Every module ever seen (tests).
  std::vector<ModuleInfo> all() const;
  // Whether a module whose file name contains `needle` appeared in generation `gen`.
  bool appeared_in(uint32_t gen, const std::string &needle) const;

 private:
  ModuleMap() = default;
  std::mutex refresh_mu_;
  mutable std::mutex mu_;
  std::vector<ModuleInfo> modules_;  // in order of appearance
  uint32_t gen_ = 0;
  unsigned long long adds_ = 0, subs_ = 0;
  bool loaded_ = false;
};

}  // namespace msprobe::shim
