#include "shim/base/symbols.h"

#include <dlfcn.h>
#include <link.h>

#include <cstring>

#include "shim/base/reentry.h"

namespace msprobe::shim {
namespace {

using DlsymFn = void *(*)(void *, const char *);
using DlopenFn = void *(*)(const char *, int);
using DlcloseFn = int (*)(void *);

std::atomic<DlsymFn> g_dlsym{nullptr};

DlsymFn libc_dlsym() {
  DlsymFn f = g_dlsym.load(std::memory_order_acquire);
  if (f) return f;
  // glibc >= 2.34 carries dlsym@@GLIBC_2.34 in libc.so.6; older ones GLIBC_2.2.5 (x86-64) or GLIBC_2.17
  // (aarch64). dlvsym itself is not interposed by the shim.
  for (const char *v : {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"}) {
    f = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", v));
    if (f) break;
  }
  g_dlsym.store(f, std::memory_order_release);
  return f;
}

template <typename F>
F libc_function(std::atomic<F> &slot, const char *name) {
  F f = slot.load(std::memory_order_acquire);
  if (!f) {
    f = reinterpret_cast<F>(real_dlsym(RTLD_NEXT, name));
    slot.store(f, std::memory_order_release);
  }
  return f;
}

std::atomic<DlopenFn> g_dlopen{nullptr};
std::atomic<DlcloseFn> g_dlclose{nullptr};

char g_shim_anchor;  // an address inside the shim's own object

// A dlsym handle for a loaded object (reference dropped at once: the object stays loaded, we only look).
// Objects without a file name (the main program, the vDSO) are reached through RTLD_DEFAULT instead.
// dlopen, because an object loaded at start-up has no search list until it is opened (its link_map is no
// handle yet); the price is that dlopen runs the object's constructors if they have not run, so this must not
// be used during the sanitizer runtime's own initialisation (shim/hooks/dl.cpp).
void *handle_of(link_map *l) {
  if (l == nullptr || l->l_name == nullptr || l->l_name[0] == '\0') return nullptr;
  void *h = real_dlopen(l->l_name, RTLD_LAZY | RTLD_NOLOAD);
  if (h != nullptr) real_dlclose(h);
  return h;
}

void *definer_of(void *sym) {
  Dl_info info;
  void *lm = nullptr;
  if (sym && dladdr1(sym, &info, &lm, RTLD_DL_LINKMAP) != 0) return lm;
  return nullptr;
}

}  // namespace

void *real_dlsym(void *handle, const char *name) {
  DlsymFn f = libc_dlsym();
  return f ? f(handle, name) : nullptr;
}

void *real_dlopen(const char *file, int mode) {
  DlopenFn f = libc_function(g_dlopen, "dlopen");
  return f ? f(file, mode) : nullptr;
}

int real_dlclose(void *handle) {
  DlcloseFn f = libc_function(g_dlclose, "dlclose");
  return f ? f(handle) : -1;
}

void *object_containing(const void *addr) { return definer_of(const_cast<void *>(addr)); }

void *lookup_in_object_of(const void *addr, const char *name) {
  auto *l = static_cast<link_map *>(object_containing(addr));
  if (l == nullptr) return nullptr;
  // The main program's link_map is a handle from the start; another object's once it has been opened.
  void *h = l->l_name == nullptr || l->l_name[0] == '\0' ? l : handle_of(l);
  return h != nullptr ? real_dlsym(h, name) : nullptr;
}

bool inside_shim(const void *addr) {
  void *self = object_containing(&g_shim_anchor);
  return self != nullptr && object_containing(addr) == self;
}

bool loaded_before_shim(const void *addr) {
  auto *self = static_cast<link_map *>(object_containing(&g_shim_anchor));
  void *object = object_containing(addr);
  if (self == nullptr || object == nullptr) return false;
  for (link_map *l = self->l_prev; l != nullptr; l = l->l_prev)
    if (l == object) return true;
  return false;
}

void *next_definition(const void *caller_addr, const char *name) {
  auto *caller = static_cast<link_map *>(object_containing(caller_addr));
  if (caller == nullptr) return real_dlsym(RTLD_DEFAULT, name);
  for (link_map *l = caller->l_next; l != nullptr; l = l->l_next) {
    void *h = handle_of(l);
    void *s = h ? real_dlsym(h, name) : nullptr;
    if (s != nullptr && definer_of(s) == l) return s;
  }
  return nullptr;
}

void *find_original(const char *name) {
  void *self = object_containing(&g_shim_anchor);
  // The next definition after the shim first, as dlsym(RTLD_NEXT) from the shim would find it (plus libraries
  // opened RTLD_LOCAL, which come later in the chain): another interposer preloaded *before* the shim forwards
  // to it with dlsym(RTLD_NEXT), and taking the global scope's first definition would call that interposer
  // back, forever (test_shim_linkage.py, rtld_next_wrapper.c).
  if (void *s = next_definition(&g_shim_anchor, name)) return s;
  // Only a definition before the shim is left (the main program's own): the global scope, then every object.
  if (void *s = real_dlsym(RTLD_DEFAULT, name); s != nullptr && definer_of(s) != self) return s;
  auto *head = static_cast<link_map *>(self);
  if (head == nullptr) return nullptr;
  while (head->l_prev) head = head->l_prev;
  for (link_map *l = head; l != nullptr; l = l->l_next) {
    if (l == self) continue;
    void *h = handle_of(l);
    void *s = h ? real_dlsym(h, name) : nullptr;
    if (s != nullptr && definer_of(s) == l) return s;
  }
  return nullptr;
}

void *HookSlot::resolve_first() {
  void *p = find_original(name);
  if (p) {
    void *expected = nullptr;
    if (!original.compare_exchange_strong(expected, p)) p = expected;
  }
  return p;
}

thread_local int ReentryGuard::depth_ = 0;

}  // namespace msprobe::shim
