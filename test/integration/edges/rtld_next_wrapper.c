/* Another interposer, as a profiler or a framework's own hook library would be: it defines aclCreateTensor
 * and forwards with dlsym(RTLD_NEXT, "aclCreateTensor"). Preloaded before or after libmsprobe_shim.so, each
 * host call must pass through this wrapper exactly once and reach the real function (no recursion: the shim
 * hooks dlsym and must answer RTLD_NEXT relative to *this* object, not to itself).
 * At exit it prints "rtld_next_wrapper: N calls" on stderr. A re-entry on one thread (the call came back to
 * the wrapper) is reported and ends the process with status 97 instead of overflowing the stack. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

typedef void *(*create_tensor_fn)(const int64_t *, uint64_t, int, const int64_t *, int64_t, int, const int64_t *,
                                  uint64_t, void *);

static int g_calls;
static __thread int t_depth;

__attribute__((visibility("default"))) void *aclCreateTensor(const int64_t *viewDims, uint64_t viewDimsNum,
                                                             int dataType, const int64_t *stride, int64_t offset,
                                                             int format, const int64_t *storageDims,
                                                             uint64_t storageDimsNum, void *tensorData) {
  static create_tensor_fn next;
  if (t_depth > 0) {
    static const char msg[] = "rtld_next_wrapper: aclCreateTensor re-entered: the call came back to the wrapper\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(97);
  }
  if (next == NULL) {
    next = (create_tensor_fn)dlsym(RTLD_NEXT, "aclCreateTensor");
    /* Compared by object, not by address: &aclCreateTensor here would go through the GOT and give the first
     * definition in the process, which need not be this one. */
    Dl_info self, found;
    if (next == NULL || (dladdr((void *)&g_calls, &self) && dladdr((void *)next, &found) &&
                         self.dli_fbase == found.dli_fbase)) {
      fprintf(stderr, "rtld_next_wrapper: dlsym(RTLD_NEXT) gave %s\n", next == NULL ? "NULL" : "the wrapper itself");
      _exit(98);
    }
  }
  __atomic_add_fetch(&g_calls, 1, __ATOMIC_RELAXED);
  ++t_depth;
  void *t = next(viewDims, viewDimsNum, dataType, stride, offset, format, storageDims, storageDimsNum, tensorData);
  --t_depth;
  return t;
}

__attribute__((destructor)) static void report(void) {
  fprintf(stderr, "rtld_next_wrapper: %d calls\n", __atomic_load_n(&g_calls, __ATOMIC_RELAXED));
}
