// The compat build's CANN stand-in (MSPROBE_GLIBC_COMPAT_CANN, top-level CMakeLists.txt) opens libelf.so.1 at run
// time instead of linking it, through these hidden forwarders: the compat stage's run with no libelf on the system
// (scripts/test_compat.sh) then proves that the *shim* copes without it, rather than failing in the stand-in's
// own load. Without any libelf, the stand-in's kernels fail (elf_memory returns null).
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <gelf.h>
#include <libelf.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>

static void *g_handle;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
// MSPROBE_COMPAT_CANN_LIBELF: the stand-in's private copy, loaded into a link-map namespace of its own (dlmopen):
// like a toolkit that ships its own libraries, and invisible to the shim's dlopen("libelf.so.1"), which must then
// find the system without libelf.
static void open_libelf(void) {
  const char *private_copy = getenv("MSPROBE_COMPAT_CANN_LIBELF");
  if (private_copy != NULL && *private_copy != '\0')
    g_handle = dlmopen(LM_ID_NEWLM, private_copy, RTLD_LAZY | RTLD_LOCAL);
  if (g_handle == NULL) g_handle = dlopen("libelf.so.1", RTLD_LAZY | RTLD_LOCAL);
}

static void *sym(const char *name) {
  pthread_once(&g_once, open_libelf);
  return g_handle != NULL ? dlsym(g_handle, name) : NULL;
}

#define FORWARD(ret, name, params, args, fallback) \
  ret name params {                                \
    ret(*f) params = (ret(*) params)sym(#name);    \
    return f != NULL ? f args : fallback;          \
  }

FORWARD(unsigned, elf_version, (unsigned v), (v), EV_NONE)
FORWARD(Elf *, elf_memory, (char *image, size_t size), (image, size), NULL)
FORWARD(const char *, elf_errmsg, (int e), (e), "libelf.so.1 not found")
FORWARD(int, elf_end, (Elf * e), (e), 0)
FORWARD(Elf_Kind, elf_kind, (Elf * e), (e), ELF_K_NONE)
FORWARD(int, elf_getshdrstrndx, (Elf * e, size_t *n), (e, n), -1)
FORWARD(Elf_Scn *, elf_nextscn, (Elf * e, Elf_Scn *s), (e, s), NULL)
FORWARD(GElf_Shdr *, gelf_getshdr, (Elf_Scn * s, GElf_Shdr *d), (s, d), NULL)
FORWARD(char *, elf_strptr, (Elf * e, size_t i, size_t o), (e, i, o), NULL)
FORWARD(size_t, elf_ndxscn, (Elf_Scn * s), (s), 0)
FORWARD(Elf_Data *, elf_getdata, (Elf_Scn * s, Elf_Data *d), (s, d), NULL)
FORWARD(GElf_Sym *, gelf_getsym, (Elf_Data * d, int i, GElf_Sym *s), (d, i, s), NULL)
