// libelf (elfutils' libelf.so.1), opened at run time instead of linked: the preloaded shim must load on hosts
// that have no libelf (docs/portability.md). Without it, native frames are not symbolized and raw kernels
// registered from device binaries keep no names; nothing else changes.
#pragma once
#include <gelf.h>
#include <libelf.h>

namespace msprobe::shim {

struct LibElf {
  decltype(&::elf_version) version;
  decltype(&::elf_memory) memory;
  decltype(&::elf_end) end;
  decltype(&::elf_kind) kind;
  decltype(&::elf_getshdrstrndx) getshdrstrndx;
  decltype(&::elf_nextscn) nextscn;
  decltype(&::elf_getdata) getdata;
  decltype(&::elf_strptr) strptr;
  decltype(&::gelf_getshdr) getshdr;
  decltype(&::gelf_getsym) getsym;
  decltype(&::gelf_getnote) getnote;
};

using DlopenFn = void *(*)(const char *, int);
using DlsymFn = void *(*)(void *, const char *);

// The shim passes its real dlopen/dlsym (its own are interposed); the default is the process's. Call before
// the first libelf().
void set_libelf_loader(DlopenFn open, DlsymFn sym) noexcept;

// libelf.so.1 loaded once (RTLD_LOCAL) and initialised with elf_version(EV_CURRENT); null when it is missing or
// incomplete. Thread safe.
const LibElf *libelf() noexcept;

}  // namespace msprobe::shim
