#define _GNU_SOURCE
/* build-aarch64/pyroot/python3 (scripts/test_aarch64.sh): runs the unpacked arm64 python3.11 beside it with
   the unpacked libraries on the loader's path. Static, so that an LD_PRELOAD meant for the workload (the shim)
   is not applied to the launcher itself. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
  (void)argc;
  char self[PATH_MAX], dir[PATH_MAX], exe[PATH_MAX + 32], libs[3 * PATH_MAX + 64];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return perror("python3 launcher: /proc/self/exe"), 127;
  self[n] = '\0';
  snprintf(dir, sizeof(dir), "%s", self);
  char *slash = strrchr(dir, '/');
  if (slash) *slash = '\0';
  snprintf(exe, sizeof(exe), "%s/usr/bin/python3.11", dir);
  const char *old = getenv("LD_LIBRARY_PATH");
  snprintf(libs, sizeof(libs), "%s/usr/lib/aarch64-linux-gnu:%s/lib/aarch64-linux-gnu%s%s", dir, dir,
           old && *old ? ":" : "", old && *old ? old : "");
  setenv("LD_LIBRARY_PATH", libs, 1);
  argv[0] = exe;
  execv(exe, argv);
  perror(exe);
  return 127;
}
