#include "shim/base/libelf_api.h"

#include <dlfcn.h>

#include <atomic>
#include <mutex>

namespace msprobe::shim {
namespace {

constinit std::atomic<DlopenFn> g_open{nullptr};
constinit std::atomic<DlsymFn> g_sym{nullptr};
std::once_flag g_once;
LibElf g_api{};
bool g_ok = false;

template <typename F>
bool resolve(void *h, DlsymFn sym, const char *name, F &out) {
  out = reinterpret_cast<F>(sym(h, name));
  return out != nullptr;
}

void load() {
  DlopenFn open = g_open.load();
  DlsymFn sym = g_sym.load();
  if (open == nullptr) open = &::dlopen;
  if (sym == nullptr) sym = &::dlsym;
  void *h = open("libelf.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (h == nullptr) return;
  LibElf a{};
  const bool all = resolve(h, sym, "elf_version", a.version) && resolve(h, sym, "elf_memory", a.memory) &&
                   resolve(h, sym, "elf_end", a.end) && resolve(h, sym, "elf_kind", a.kind) &&
                   resolve(h, sym, "elf_getshdrstrndx", a.getshdrstrndx) && resolve(h, sym, "elf_nextscn", a.nextscn) &&
                   resolve(h, sym, "elf_getdata", a.getdata) && resolve(h, sym, "elf_strptr", a.strptr) &&
                   resolve(h, sym, "gelf_getshdr", a.getshdr) && resolve(h, sym, "gelf_getsym", a.getsym) &&
                   resolve(h, sym, "gelf_getnote", a.getnote);
  if (!all || a.version(EV_CURRENT) == EV_NONE) return;  // the handle stays open: harmless
  g_api = a;
  g_ok = true;
}

}  // namespace

void set_libelf_loader(DlopenFn open, DlsymFn sym) noexcept {
  g_open.store(open);
  g_sym.store(sym);
}

const LibElf *libelf() noexcept {
  std::call_once(g_once, load);
  return g_ok ? &g_api : nullptr;
}

}  // namespace msprobe::shim
