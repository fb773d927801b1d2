// Executables linked with msprobe_glibc_compat() (cmake/glibc_compat.cmake) only. The crt1.o of glibc >= 2.34
// passes no init function to __libc_start_main and leaves the program's constructors to it; glibc < 2.34 runs
// only the init function it is given (formerly __libc_csu_init from libc_nonshared.a). So _start reaches this
// private __libc_start_main, which passes csu_init: every glibc runs a given init instead of its own.
#include <stddef.h>

typedef void (*init_fn)(int, char **, char **);
extern init_fn __preinit_array_start[] __attribute__((visibility("hidden")));
extern init_fn __preinit_array_end[] __attribute__((visibility("hidden")));
extern init_fn __init_array_start[] __attribute__((visibility("hidden")));
extern init_fn __init_array_end[] __attribute__((visibility("hidden")));
extern void _init(void);

static void csu_init(int argc, char **argv, char **envp) {
  for (init_fn *f = __preinit_array_start; f < __preinit_array_end; ++f) (*f)(argc, argv, envp);
  _init();
  for (init_fn *f = __init_array_start; f < __init_array_end; ++f) (*f)(argc, argv, envp);
}

#if defined(__x86_64__)
#define MSPROBE_LSM_VERSION "GLIBC_2.2.5"
#elif defined(__aarch64__)
#define MSPROBE_LSM_VERSION "GLIBC_2.17"
#else
#error "glibc_compat_exe.c: add the base glibc version of this architecture"
#endif

typedef int (*main_fn)(int, char **, char **);
int real_libc_start_main(main_fn main, int argc, char **argv, init_fn init, void (*fini)(void), void (*rtld_fini)(void),
                         void *stack_end);
__asm__(".symver real_libc_start_main, __libc_start_main@" MSPROBE_LSM_VERSION);

int __libc_start_main(main_fn main, int argc, char **argv, init_fn init, void (*fini)(void), void (*rtld_fini)(void),
                      void *stack_end) {
  (void)init;  // null from a glibc >= 2.34 crt1.o
  return real_libc_start_main(main, argc, argv, csu_init, fini, rtld_fini, stack_end);
}
