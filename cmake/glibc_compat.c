// Definitions, private to the library linked with msprobe_glibc_compat(), of the glibc symbols that static
// libstdc++/libgcc (built against the build machine's glibc) or the product code reference and that glibc 2.28
// does not have. Each one is what glibc itself does, or a documented fallback.
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

// glibc >= 2.32: libstdc++ skips atomic reference counting while it is nonzero. 0 ("maybe several threads")
// is always correct, only slower; the shim runs threads of its own anyway.
char __libc_single_threaded = 0;

// glibc >= 2.33 exports stat/fstat/lstat (older ones had them as inline wrappers of __xstat in
// libc_nonshared.a). The kernel's struct stat is glibc's on x86_64 and aarch64.
int stat(const char *path, struct stat *buf) { return (int)syscall(SYS_newfstatat, AT_FDCWD, path, buf, 0); }
int lstat(const char *path, struct stat *buf) {
  return (int)syscall(SYS_newfstatat, AT_FDCWD, path, buf, AT_SYMLINK_NOFOLLOW);
}
int fstat(int fd, struct stat *buf) { return (int)syscall(SYS_fstat, fd, buf); }
int fstat64(int fd, struct stat64 *buf) { return (int)syscall(SYS_fstat, fd, buf); }

// glibc 2.36: std::random_device's default source. getrandom(2) (Linux 3.17), else /dev/urandom.
uint32_t arc4random(void) {
  uint32_t v = 0;
  unsigned char *p = (unsigned char *)&v;
  size_t got = 0;
  while (got < sizeof(v)) {
    long n = syscall(SYS_getrandom, p + got, sizeof(v) - got, 0);
    if (n > 0) {
      got += (size_t)n;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
      if (fd >= 0) {
        while (got < sizeof(v)) {
          ssize_t r = read(fd, p + got, sizeof(v) - got);
          if (r <= 0 && !(r < 0 && errno == EINTR)) break;
          if (r > 0) got += (size_t)r;
        }
        close(fd);
      }
      break;
    }
  }
  return v;
}

// glibc 2.30: condition_variable waits on the steady clock. As libstdc++ did before it used this call: the
// monotonic deadline is converted to the realtime clock.
static struct timespec realtime_deadline(clockid_t clock, const struct timespec *abstime) {
  struct timespec now_c, now_r;
  clock_gettime(clock, &now_c);
  clock_gettime(CLOCK_REALTIME, &now_r);
  long long ns = (long long)(abstime->tv_sec - now_c.tv_sec) * 1000000000LL + (abstime->tv_nsec - now_c.tv_nsec);
  if (ns < 0) ns = 0;
  long long total = (long long)now_r.tv_nsec + ns % 1000000000LL;
  struct timespec r = {now_r.tv_sec + (time_t)(ns / 1000000000LL) + (time_t)(total / 1000000000LL),
                       (long)(total % 1000000000LL)};
  return r;
}

int pthread_cond_clockwait(pthread_cond_t *cond, pthread_mutex_t *mutex, clockid_t clock,
                           const struct timespec *abstime) {
  if (clock == CLOCK_REALTIME) return pthread_cond_timedwait(cond, mutex, abstime);
  struct timespec r = realtime_deadline(clock, abstime);
  return pthread_cond_timedwait(cond, mutex, &r);
}

// glibc 2.30: std::timed_mutex's try_lock_for, on the steady clock: likewise over pthread_mutex_timedlock.
int pthread_mutex_clocklock(pthread_mutex_t *mutex, clockid_t clock, const struct timespec *abstime) {
  if (clock == CLOCK_REALTIME) return pthread_mutex_timedlock(mutex, abstime);
  struct timespec r = realtime_deadline(clock, abstime);
  return pthread_mutex_timedlock(mutex, &r);
}

// glibc 2.35: libgcc's unwinder finds the .eh_frame_hdr of the object holding a pc with it. As libgcc did
// before: dl_iterate_phdr, the object whose PT_LOAD segments contain pc, and its PT_GNU_EH_FRAME.
struct find_ctx {
  uintptr_t pc;
  struct dl_find_object *out;
  int found;
};

static int find_cb(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  struct find_ctx *c = (struct find_ctx *)data;
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  const ElfW(Phdr) *eh = NULL;
  int inside = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_LOAD) {
      uintptr_t b = info->dlpi_addr + ph->p_vaddr, e = b + ph->p_memsz;
      if (b < lo) lo = b;
      if (e > hi) hi = e;
      if (c->pc >= b && c->pc < e) inside = 1;
    } else if (ph->p_type == PT_GNU_EH_FRAME) {
      eh = ph;
    }
  }
  if (!inside) return 0;
  c->out->dlfo_flags = 0;
  c->out->dlfo_map_start = (void *)lo;
  c->out->dlfo_map_end = (void *)hi;
  c->out->dlfo_link_map = NULL;
  c->out->dlfo_eh_frame = eh != NULL ? (void *)(info->dlpi_addr + eh->p_vaddr) : NULL;
  c->found = 1;
  return 1;
}

int _dl_find_object(void *pc, struct dl_find_object *result) {
  struct find_ctx c = {(uintptr_t)pc, result, 0};
  dl_iterate_phdr(find_cb, &c);
  return c.found ? 0 : -1;
}
