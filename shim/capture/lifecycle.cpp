#include "shim/capture/lifecycle.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "format/format.h"
#include "shim/base/libelf_api.h"
#include "shim/base/log.h"
#include "shim/base/symbols.h"
#include "shim/capture/run_marker.h"

namespace msprobe::shim::lifecycle {
namespace {

using SigactionFn = int (*)(int, const struct sigaction *, struct sigaction *);

// Signals whose default action ends the process. Others (SIGKILL cannot be caught; SIGUSR1, SIGPIPE... are the
// host's business) are never touched.
constexpr int kWatched[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL};
constexpr int kMaxSignal = 65;
// How long a dying thread waits for the dump to be finished. Bounded: the finisher may need a lock the dying
// thread holds, or a device event that will never complete; the journals are then left for `msprobe-inspect
// repair`.
constexpr long kFinishTimeoutMs = 10000;
// stack.json is refreshed this often at most (dump.json and construct.json are journals and always current),
// so that a SIGKILL leaves a stack.json behind that lacks at most the last moments.
constexpr long kRefreshMinMs = 1000;

struct Watch {
  bool watched = false;
  bool ours = false;         // the real disposition is on_signal()
  struct sigaction host {};  // what the host installed (and sees)
};

Watch g_watch[kMaxSignal];
std::atomic_flag g_watch_lock = ATOMIC_FLAG_INIT;
std::atomic<SigactionFn> g_real_sigaction{nullptr};
std::atomic<void (*)(int)> g_real_exit{nullptr};
std::atomic<bool> g_installed{false};
Callbacks g_callbacks;  // set once by install(), before the finisher thread and the handlers exist
std::atomic<pid_t> g_owner{0};

sem_t g_request;
enum : int { kIdle, kFinishing, kFinished };
std::atomic<int> g_finish{kIdle};
std::atomic<int> g_deferred_signal{0};
// The signal whose default action is ending the process (ending_signal_name).
std::atomic<int> g_ending_signal{0};
// finish_before_death() asked for the dump (process_is_dying).
std::atomic<bool> g_dying{false};
thread_local bool t_finisher __attribute__((tls_model("initial-exec"))) = false;
thread_local bool t_exit_shutdown __attribute__((tls_model("initial-exec"))) = false;

SigactionFn real_sigaction() {
  SigactionFn f = g_real_sigaction.load(std::memory_order_acquire);
  if (f == nullptr) {
    f = reinterpret_cast<SigactionFn>(real_dlsym(RTLD_NEXT, "sigaction"));
    g_real_sigaction.store(f, std::memory_order_release);
  }
  return f;
}

// Guards g_watch. Signals are blocked while it is held, so a handler on the same thread can never spin on it.
class WatchLock {
 public:
  WatchLock() {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old_);
    while (g_watch_lock.test_and_set(std::memory_order_acquire)) sched_yield();
  }
  ~WatchLock() {
    g_watch_lock.clear(std::memory_order_release);
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  WatchLock(const WatchLock &) = delete;
  WatchLock &operator=(const WatchLock &) = delete;

 private:
  sigset_t old_;
};

bool is_function(const struct sigaction &a) { return a.sa_handler != SIG_DFL && a.sa_handler != SIG_IGN; }

bool is_fault(int sig) { return sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL; }

long now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

void sleep_ms(long ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

void on_signal(int sig, siginfo_t *info, void *uc);

// The real action that puts on_signal in front of `host`: the host's mask and the flags that change how the
// host's code behaves around the signal (restarting system calls, the alternate stack, nesting) are kept.
struct sigaction action_in_front_of(const struct sigaction &host) {
  struct sigaction ours {};
  ours.sa_sigaction = on_signal;
  if (is_function(host)) {
    ours.sa_mask = host.sa_mask;
    ours.sa_flags = SA_SIGINFO | (host.sa_flags & (SA_ONSTACK | SA_RESTART | SA_NODEFER));
  } else {
    sigemptyset(&ours.sa_mask);
    ours.sa_flags = SA_SIGINFO | SA_ONSTACK;
  }
  return ours;
}

// Caller holds WatchLock. The host's new action for a watched signal: ignored signals are really ignored (so that
// SIG_IGN survives exec as it would), everything else goes behind on_signal.
int set_host_action(int sig, const struct sigaction &act) {
  SigactionFn real = real_sigaction();
  if (real == nullptr) return -1;
  Watch &w = g_watch[sig];
  int rc;
  if (act.sa_handler == SIG_IGN) {
    rc = real(sig, &act, nullptr);
    if (rc == 0) w.ours = false;
  } else {
    struct sigaction ours = action_in_front_of(act);
    rc = real(sig, &ours, nullptr);
    if (rc == 0) w.ours = true;
  }
  if (rc == 0) w.host = act;
  return rc;
}

// Back to the default action, for good: the process is about to die of `sig`.
void restore_default(int sig) {
  WatchLock lock;
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  if (SigactionFn real = real_sigaction()) real(sig, &dfl, nullptr);
  g_watch[sig].ours = false;
  g_watch[sig].host = dfl;
}

// Runs the dump's shutdown once, on whichever thread gets here first; a second caller waits (bounded) for the
// first. False when it is not finished in time.
bool finish_once(long timeout_ms) noexcept {
  int expected = kIdle;
  if (g_finish.compare_exchange_strong(expected, kFinishing)) {
    try {
      g_callbacks.close_dump();
    } catch (...) {  // never into the host; the journals stay repairable
    }
    g_finish.store(kFinished);
    return true;
  }
  const long deadline = now_ms() + timeout_ms;
  while (g_finish.load() != kFinished && now_ms() < deadline) sleep_ms(2);
  return g_finish.load() == kFinished;
}

// The finisher: finishes the dump when asked (from a signal handler or _exit, where the dying thread cannot do
// it itself), and meanwhile refreshes stack.json now and then.
void finisher_main() {
  t_finisher = true;
  long interval = kRefreshMinMs;
  for (;;) {
    timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += interval / 1000;
    deadline.tv_nsec += (interval % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
      deadline.tv_sec += 1;
      deadline.tv_nsec -= 1000000000L;
    }
    if (sem_timedwait(&g_request, &deadline) == 0) {
      finish_once(kFinishTimeoutMs);
      continue;  // later requests find the dump finished
    }
    if (errno != ETIMEDOUT || g_finish.load() != kIdle) continue;
    const long t0 = now_ms();
    try {
      g_callbacks.flush_dump();
    } catch (...) {
    }
    // A large stack.json is not rewritten more than ~5% of the time.
    const long spent = now_ms() - t0;
    interval = spent * 20 > kRefreshMinMs ? spent * 20 : kRefreshMinMs;
  }
}

void close_inherited_rank_locks() noexcept;

void in_fork_child() {
  // The writer and the finisher did not come along, locks may be held by threads that no longer exist, and the
  // files are the parent's: the child passes every call through and leaves all of it alone.
  close_inherited_rank_locks();
  g_callbacks.in_fork_child();
}

void on_signal(int sig, siginfo_t *info, void *uc) {
  const int saved_errno = errno;
  struct sigaction host {};
  {
    WatchLock lock;
    host = g_watch[sig].host;
    if (is_function(host) && (host.sa_flags & SA_RESETHAND)) {
      // SA_RESETHAND, emulated: the next one gets the default action (and the dump is finished then).
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      sigemptyset(&dfl.sa_mask);
      set_host_action(sig, dfl);
    }
  }
  if (is_function(host)) {
    // The host handles it: exactly as without the shim. If the host's handler ends the process it does so
    // through exit/_exit/abort or by re-raising with the default action, and each of those finishes the dump.
    errno = saved_errno;
    if (host.sa_flags & SA_SIGINFO)
      host.sa_sigaction(sig, info, uc);
    else
      host.sa_handler(sig);
    return;
  }
  if (host.sa_handler == SIG_IGN) return;  // (not installed for ignored signals; a race with sigaction)
  // The default action is about to end the process.
  const bool asynchronous = info == nullptr || info->si_code <= 0 || !is_fault(sig);
  if (t_exit_shutdown && asynchronous && sig != SIGABRT) {
    // Arrived while this thread closes the dump at exit: held until it is closed (run_exit_shutdown).
    g_deferred_signal.store(sig);
    errno = saved_errno;
    return;
  }
  g_ending_signal.store(sig);
  finish_before_death();
  restore_default(sig);
  errno = saved_errno;
  // A fault re-executes the faulting instruction on return and dies of it with the default action; anything
  // else is raised again (it is blocked here, so it is delivered on return, unless SA_NODEFER delivers it now).
  if (asynchronous) raise(sig);
}

std::string owner_of(int fd) {
  char buf[64] = {};
  ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return "another process";
  buf[n] = '\0';
  if (char *nl = std::strchr(buf, '\n')) *nl = '\0';
  return std::string("process ") + buf;
}

// mkdir -p with msprobe's directory mode.
void make_dirs(const std::string &path) {
  std::string partial;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    partial = path.substr(0, pos);
    if (!partial.empty()) ::mkdir(partial.c_str(), 0750);
  }
}

// Looked up at load time, before any thread or vfork child can need them from a state where the dynamic
// linker's lock may be held (also when capture never starts: _exit and sigaction still pass through).
__attribute__((constructor)) void resolve_libc_functions() {
  real_sigaction();
  g_real_exit.store(reinterpret_cast<void (*)(int)>(real_dlsym(RTLD_NEXT, "_exit")));
}

}  // namespace

void install(const Callbacks &callbacks) {
  if (g_installed.load()) return;
  g_callbacks = callbacks;
  g_owner.store(getpid());
  resolve_libc_functions();
  // libelf.so.1 is optional (docs/portability.md): say once, at the start, what its absence turns off.
  set_libelf_loader(&real_dlopen, &real_dlsym);
  if (libelf() == nullptr)
    log_warn(
        "libelf.so.1 not found: degraded: native stack frames are not symbolized and raw kernels "
        "(rtFunctionRegister) are named by address (install elfutils' libelf1)");
  sem_init(&g_request, 0, 0);
  {
    WatchLock lock;
    SigactionFn real = real_sigaction();
    for (int sig : kWatched) {
      Watch &w = g_watch[sig];
      struct sigaction current {};
      if (real == nullptr || real(sig, nullptr, &current) != 0) continue;
      w.watched = true;
      w.host = current;
      if (current.sa_handler != SIG_IGN) {  // an ignored signal never ends the process
        struct sigaction ours = action_in_front_of(current);
        w.ours = real(sig, &ours, nullptr) == 0;
      }
    }
  }
  pthread_atfork(nullptr, nullptr, in_fork_child);
  // The finisher must never take the host's signals.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  try {
    std::thread(finisher_main).detach();
  } catch (...) {
    log_warn(
        "cannot start the finisher thread: a fatal signal or _exit may leave the dump for 'msprobe-inspect repair'");
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  g_installed.store(true);
}

bool process_is_dying() noexcept { return g_dying.load(); }

const char *ending_signal_name() noexcept {
  switch (g_ending_signal.load()) {
    case 0: return nullptr;
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGHUP: return "SIGHUP";
    case SIGQUIT: return "SIGQUIT";
    case SIGABRT: return "SIGABRT";
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    default: return "a signal";
  }
}

void finish_before_death() noexcept {
  if (!g_installed.load() || getpid() != g_owner.load()) return;  // a fork or vfork child: not its dump
  if (g_finish.load() == kFinished || t_finisher) return;
  if (t_exit_shutdown) return;  // this thread is closing the dump already and cannot wait for itself
  g_dying.store(true);
  sem_post(&g_request);
  const long deadline = now_ms() + kFinishTimeoutMs;
  while (g_finish.load() != kFinished && now_ms() < deadline) sleep_ms(2);
  if (g_finish.load() != kFinished) {
    static const char msg[] =
        "msprobe-shim: the dump could not be finished in time before the process ended; run 'msprobe-inspect "
        "repair' on it\n";
    ssize_t n = ::write(2, msg, sizeof msg - 1);
    (void)n;
  }
}

void end_process(int status) noexcept {
  finish_before_death();
  if (auto real = g_real_exit.load()) real(status);
  for (;;) syscall(SYS_exit_group, status);
}

void run_exit_shutdown(void (*shutdown)()) noexcept {
  if (getpid() != g_owner.load() && g_installed.load()) return;
  if (!g_installed.load()) {
    shutdown();
    return;
  }
  t_exit_shutdown = true;
  int expected = kIdle;
  if (g_finish.compare_exchange_strong(expected, kFinishing)) {
    try {
      shutdown();
    } catch (...) {
    }
    g_finish.store(kFinished);
  } else {
    finish_once(kFinishTimeoutMs);  // the finisher is at it (a signal elsewhere): wait for it
  }
  t_exit_shutdown = false;
  if (int sig = g_deferred_signal.exchange(0)) {
    restore_default(sig);
    raise(sig);
  }
}

int host_sigaction(int sig, const struct sigaction *act, struct sigaction *old) noexcept {
  SigactionFn real = real_sigaction();
  if (real == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  if (sig <= 0 || sig >= kMaxSignal || !g_installed.load()) return real(sig, act, old);
  WatchLock lock;
  Watch &w = g_watch[sig];
  if (!w.watched) return real(sig, act, old);
  struct sigaction previous = w.host;
  if (!w.ours && real(sig, nullptr, &previous) != 0) return -1;
  if (act != nullptr) {
    struct sigaction copy = *act;  // act may alias old
    if (set_host_action(sig, copy) != 0) return -1;
  }
  if (old != nullptr) *old = previous;
  return 0;
}

sighandler_t host_signal(int sig, sighandler_t handler) noexcept {
  // glibc's signal(): BSD semantics (the handler stays, system calls restart, the signal is blocked inside).
  struct sigaction act {
  }, old{};
  act.sa_handler = handler;
  sigemptyset(&act.sa_mask);
  if (sig > 0 && sig < kMaxSignal) sigaddset(&act.sa_mask, sig);
  act.sa_flags = SA_RESTART;
  if (host_sigaction(sig, &act, &old) != 0) return SIG_ERR;
  return old.sa_handler;
}

namespace {
// The rank locks this process holds: released (unlinked, then closed) when its dump is closed.
struct HeldLock {
  std::string path;
  int fd;
  pid_t pid;      // the process that took it
  int fork_slot;  // its entry in g_lock_fds, -1: none
};
std::mutex g_claim_mu;
auto *g_claims = new std::map<std::string, bool>;  // root + rank folder -> owned; immortal: used during exit
auto *g_held = new std::vector<HeldLock>;

// The descriptors of g_held, readable without g_claim_mu: a fork child (where the mutex may be held by a thread that
// did not come along) closes its copies. An flock lock belongs to the open file, which the child shares: a child
// that outlives its parent (a data-loader worker, after the OOM killer took the trainer) would otherwise keep the
// rank "being written" and turn away a restarted run, and repair would leave the lock. Closing the child's copy
// leaves the parent's lock alone. Locks past the table's size stay inherited (one per rank folder a process writes).
// An entry is published before the descriptor is locked (a child closing an unlocked copy does no harm), so no
// fork can slip between the lock and its entry. The file's identity goes with it: the child closes a descriptor only
// if it still names that file, never one the host reused the number for.
struct ForkClosedLock {
  std::atomic<int> fd_plus_one{0};  // 0: free
  std::atomic<uint64_t> dev{0}, ino{0};
};
constexpr int kForkClosedLocks = 16;
constinit ForkClosedLock g_lock_fds[kForkClosedLocks] = {};

int publish_lock_fd(int fd, const struct stat &st) {
  for (int i = 0; i < kForkClosedLocks; ++i) {
    int expected = 0;
    if (g_lock_fds[i].fd_plus_one.compare_exchange_strong(expected, -1)) {  // -1: being filled in, not closed
      g_lock_fds[i].dev.store(st.st_dev, std::memory_order_relaxed);
      g_lock_fds[i].ino.store(st.st_ino, std::memory_order_relaxed);
      g_lock_fds[i].fd_plus_one.store(fd + 1, std::memory_order_release);
      return i;
    }
  }
  return -1;
}

void unpublish_lock_fd(int slot) {
  if (slot >= 0) g_lock_fds[slot].fd_plus_one.store(0, std::memory_order_release);
}

// Opens and locks `path`. A lock file is unlinked by its owner before the owner lets go of it, so a lock won
// on a file that is no longer at `path` (opened just before the unlink) is no lock: open it anew.
enum class Claim { Mine, Taken, NoLock };
Claim lock_file(const std::string &path, int *out_fd, int *fork_slot) {
  for (int attempt = 0; attempt < 16; ++attempt) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0640);
    if (fd < 0) return Claim::NoLock;
    struct stat held {
    }, named{};
    const bool known = fstat(fd, &held) == 0;
    const int slot = known ? publish_lock_fd(fd, held) : -1;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      unpublish_lock_fd(slot);
      *out_fd = fd;
      return Claim::Taken;
    }
    if (known && ::stat(path.c_str(), &named) == 0 && held.st_dev == named.st_dev && held.st_ino == named.st_ino) {
      *out_fd = fd;
      *fork_slot = slot;
      return Claim::Mine;
    }
    unpublish_lock_fd(slot);
    ::close(fd);
  }
  return Claim::NoLock;
}
}  // namespace

bool claim_rank_output(const std::string &root, const std::string &rank_dir, format::Task task) {
  std::lock_guard<std::mutex> lk(g_claim_mu);
  const std::string claim_key = root + '\0' + rank_dir;
  if (auto it = g_claims->find(claim_key); it != g_claims->end()) return it->second;
  make_dirs(root);
  const std::string path = root + "/" + format::rank_lock_name(rank_dir);
  int fd = -1, fork_slot = -1;
  bool mine = true;  // a lock that cannot be made does not stop the capture (the writer reports the folder)
  switch (lock_file(path, &fd, &fork_slot)) {
    case Claim::Mine: {
      // Held until the dump is closed; the pid names the owner to others.
      char pid[32];
      int n = std::snprintf(pid, sizeof pid, "%d\n", (int)getpid());
      if (ftruncate(fd, 0) == 0 && pwrite(fd, pid, (size_t)n, 0) < 0) {
      }
      g_held->push_back(HeldLock{path, fd, getpid(), fork_slot});
      run_marker::claimed(root, rank_dir, task);  // one run per root: an earlier run's folders are moved aside
      break;
    }
    case Claim::Taken:
      mine = false;
      log_warn(
          "the %s folders of %s are being written by %s; this process (pid %d) does not record its kernels there "
          "(give each process its own MSPROBE_DUMP_PATH or RANK_ID)",
          rank_dir.c_str(), root.c_str(), owner_of(fd).c_str(), (int)getpid());
      ::close(fd);
      break;
    case Claim::NoLock: break;
  }
  (*g_claims)[claim_key] = mine;
  return mine;
}

void release_rank_outputs(bool as_crashed) noexcept {
  // try_lock: a thread that died inside claim_rank_output (a fatal signal) holds the mutex for good; then the
  // files stay behind, unheld, as after a SIGKILL.
  std::unique_lock<std::mutex> lk(g_claim_mu, std::try_to_lock);
  if (!lk.owns_lock()) return;
  for (const HeldLock &h : *g_held) {
    // A forked child shares the parent's lock descriptions: only the process that took a lock removes it.
    if (h.pid != getpid()) continue;
    if (!as_crashed) ::unlink(h.path.c_str());  // first, so that nobody can win the lock on a file about to vanish
    unpublish_lock_fd(h.fork_slot);
    ::close(h.fd);
  }
  std::erase_if(*g_held, [](const HeldLock &h) { return h.pid == getpid(); });
}

void release_rank_output(const std::string &root, const std::string &rank_dir) noexcept {
  std::unique_lock<std::mutex> lk(g_claim_mu, std::try_to_lock);
  if (!lk.owns_lock()) return;
  const std::string path = root + "/" + format::rank_lock_name(rank_dir);
  for (const HeldLock &h : *g_held) {
    if (h.pid != getpid() || h.path != path) continue;
    ::unlink(h.path.c_str());
    unpublish_lock_fd(h.fork_slot);
    ::close(h.fd);
  }
  std::erase_if(*g_held, [&](const HeldLock &h) { return h.pid == getpid() && h.path == path; });
  g_claims->erase(root + '\0' + rank_dir);
}

namespace {
// Right after fork(), in the child: fstat and close only (async-signal-safe).
void close_inherited_rank_locks() noexcept {
  for (ForkClosedLock &l : g_lock_fds) {
    const int fd = l.fd_plus_one.exchange(0, std::memory_order_acquire) - 1;
    if (fd < 0) continue;  // free, or being filled in when the parent forked
    struct stat st {};
    if (fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_dev) == l.dev.load(std::memory_order_relaxed) &&
        static_cast<uint64_t>(st.st_ino) == l.ino.load(std::memory_order_relaxed))
      ::close(fd);
  }
}
}  // namespace

}  // namespace msprobe::shim::lifecycle
