#include "shim/base/safe_read.h"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

namespace msprobe::shim {
namespace {

// safe_read_pair() through a pipe: write() reports EFAULT for bytes the process cannot read, instead of faulting.
// One pipe per process (a fork child makes its own, so that it never reads its parent's bytes), one probe at a time.
bool read_through_pipe(const void *addr, void *out) {
  static std::mutex mu;
  static int fds[2] = {-1, -1};
  static pid_t owner = 0;
  std::lock_guard<std::mutex> lock(mu);
  if (owner != getpid()) {
    if (fds[0] >= 0) {
      ::close(fds[0]);
      ::close(fds[1]);
    }
    fds[0] = fds[1] = -1;
    owner = 0;
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return false;
    owner = getpid();
  }
  const ssize_t n = ::write(fds[1], addr, 8);
  if (n <= 0) return false;
  unsigned char bytes[8];
  const ssize_t got = ::read(fds[0], bytes, static_cast<size_t>(n));  // drains a short write too
  if (n != 8 || got != 8) return false;
  std::memcpy(out, bytes, 8);
  return true;
}

}  // namespace

// The kernel copies the bytes, so an unreadable address is an error, not a fault. One process_vm_readv for both (the
// call stops at the first unreadable one); where that call is refused (container seccomp profiles without
// CAP_SYS_PTRACE: EPERM; qemu-user: ENOSYS), a pipe.
bool safe_read_pair(pid_t self, const void *a, const void *b, uint64_t *out_a, uint64_t *out_b) {
  static std::atomic<bool> no_process_vm_readv{false};
  const int saved_errno = errno;
  bool ok = false;
  if (!no_process_vm_readv.load(std::memory_order_relaxed)) {
    iovec local[2] = {{out_a, 8}, {out_b, 8}};
    iovec remote[2] = {{const_cast<void *>(a), 8}, {const_cast<void *>(b), 8}};
    const ssize_t n = process_vm_readv(self, local, 2, remote, 2, 0);
    ok = n == 16;
    if (n < 0 && (errno == ENOSYS || errno == EPERM)) no_process_vm_readv.store(true, std::memory_order_relaxed);
  }
  if (!ok && no_process_vm_readv.load(std::memory_order_relaxed))
    ok = read_through_pipe(a, out_a) && read_through_pipe(b, out_b);
  errno = saved_errno;
  return ok;
}

}  // namespace msprobe::shim
