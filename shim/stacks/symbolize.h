// Late symbolization of native frames (writer side, never on the capture path): the function symbols of each
// module's ELF file read with libelf from .symtab and .dynsym, so that static and non-exported functions and PIE
// executables get names; a stripped file's .symtab is looked for in a separate debug file (build-id, then
// .gnu_debuglink, under /usr/lib/debug). C++ names are demangled.
//
// A frame is written `{symbol} ({module basename}+0x{offset})`, or `{module basename}+0x{offset}` when no function
// symbol covers the address, or `0x{address}` outside every known module. The offset is the file address
// (address - load bias), what addr2line and objdump expect.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "shim/stacks/modules.h"

namespace msprobe::shim {

// The function symbols of one ELF file (plus its debug file, if any), sorted by address.
class ElfSymbolTable {
 public:
  struct Symbol {
    uint64_t addr = 0, size = 0;  // file addresses [addr, addr + size)
    const char *name = nullptr;   // mangled, NUL-terminated, inside an image this table keeps mapped
  };
  // Reads `path`; debug files are looked for under `debug_dirs`. An unreadable file gives an empty table.
  static std::unique_ptr<ElfSymbolTable> load(const std::string &path, const std::vector<std::string> &debug_dirs);
  ~ElfSymbolTable();
  ElfSymbolTable(const ElfSymbolTable &) = delete;
  ElfSymbolTable &operator=(const ElfSymbolTable &) = delete;

  // The symbol whose [addr, addr + size) holds `vaddr` (the innermost when several do), or nullptr.
  const Symbol *find(uint64_t vaddr) const;
  size_t size() const { return symbols_.size(); }
  bool readable() const { return readable_; }
  const std::string &debug_file() const { return debug_file_; }  // the separate debug file used, if any

 private:
  ElfSymbolTable() = default;
  struct Image {
    void *addr = nullptr;
    size_t size = 0;
  };
  int add_file(const std::string &path, bool symtab_only, std::string *build_id, std::string *debuglink);
  std::vector<Symbol> symbols_;
  std::vector<Image> images_;                    // mmap'ed files the names point into
  std::vector<std::unique_ptr<char[]>> copies_;  // names libelf did not return from the image itself
  std::string debug_file_;
  bool readable_ = false;
};

// C++ demangling (abi::__cxa_demangle); the name itself when it is not a mangled C++ name.
std::string demangle(const char *name);

class Symbolizer {
 public:
  static Symbolizer &global();  // created on first use, never destroyed
  Symbolizer();

  // The frame text for an address of a module (nullptr: no module held the address).
  std::string describe(uintptr_t addr, const ModuleInfo *module);
  // The demangled name of the function covering file address `vaddr` of the ELF file `path`.
  std::optional<std::string> function_at(const std::string &path, uint64_t vaddr);
  // Where separate debug files are looked for (default: /usr/lib/debug). Clears the cache.
  void set_debug_dirs(std::vector<std::string> dirs);
  // Forgets every loaded table (tests).
  void clear();

 private:
  // The table of `path`, loaded on first use; null for pseudo-modules (vDSO) and unreadable files.
  const ElfSymbolTable *table(const std::string &path);
  std::mutex mu_;
  std::vector<std::string> debug_dirs_;
  std::map<std::string, std::unique_ptr<ElfSymbolTable>> tables_;
  std::map<const char *, std::string> demangled_;  // by mangled name pointer (names outlive the cache)
};

}  // namespace msprobe::shim
