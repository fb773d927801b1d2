// How the capture lives and dies with its host process (docs/lifecycle.md):
// - exit() / return from main: the session's exit handler closes the dump (session.cpp);
// - _exit / _Exit (os._exit) and the fatal signals (TERM, INT, HUP, QUIT, ABRT, SEGV, BUS, FPE, ILL, when their
//   default action is about to kill the process): the dump is finished by the finisher thread while the dying
//   thread waits a bounded time, then the process dies exactly as it would have without the shim;
// - signals the host handles itself are passed to its handler untouched (sigaction/signal are virtualized for
//   the watched signals: the host sees and chains to its own handlers, the shim's stays first in line);
// - fork without exec: a child of a capturing parent never captures (its calls pass through), so it never
//   touches the parent's files and never waits for a writer thread it does not have;
// - several processes on one dump tree: the first to write a rank's folders owns them; another process with
//   the same rank (a fork+exec child that inherited LD_PRELOAD) is refused with one warning.
#pragma once
#include <signal.h>

#include <string>

#include "format/format.h"

namespace msprobe::shim::lifecycle {

// What lifecycle does to the dump, given by whoever made the session (plain functions: they run from signal
// handlers' helpers and fork handlers, where nothing may allocate).
struct Callbacks {
  void (*close_dump)() = nullptr;     // finish the dump for good (the session's shutdown)
  void (*flush_dump)() = nullptr;     // everything so far on disk, stack.json refreshed
  void (*in_fork_child)() = nullptr;  // a child of fork() without exec: capture off for good
};

// Once, when the session becomes active: records this process as the dump's owner, starts the finisher
// thread, installs the watched signals' handlers and the fork handlers.
void install(const Callbacks &callbacks);

// The process is about to end without exit handlers (_exit, a fatal signal): finish the dump, waiting at
// most a bounded time (never forever: a crashing thread may hold a lock the finisher needs). Async-signal-safe
// on the calling side; a no-op in a child process, on the finisher itself and once finished.
void finish_before_death() noexcept;

// True once finish_before_death() asked for the dump: the process ends without exit handlers, and a thread stopped in
// a signal handler may hold any lock (malloc's included), so nothing should wait for threads to end.
bool process_is_dying() noexcept;

// The name of the signal ("SIGTERM") whose default action is ending the process, while the dump is finished before
// it; nullptr otherwise (exit, _exit).
const char *ending_signal_name() noexcept;

// _exit/_Exit: finish_before_death(), then the next _exit in the process (looked up when the session started, so
// that a vfork child never takes the dynamic linker's lock), or the exit_group system call.
[[noreturn]] void end_process(int status) noexcept;

// The session's exit handler (exit(), return from main) runs `shutdown` through here: a terminating signal
// that arrives on this thread meanwhile is held until the dump is closed, then delivered.
void run_exit_shutdown(void (*shutdown)()) noexcept;

// sigaction() and signal() as the host sees them: for a watched signal the host's action is recorded and
// reported back, while the shim's handler stays installed in front of it.
int host_sigaction(int sig, const struct sigaction *act, struct sigaction *old) noexcept;
sighandler_t host_signal(int sig, sighandler_t handler) noexcept;

// One writer per rank folder of a dump tree: true when this process owns `rank_dir` (e.g. "rank0") under the
// dump root `root`, or has just claimed it (a lock held until its dump is closed). False, with one warning, when
// another live process owns it. A first claim in a root moves an earlier run's folders aside (run_marker.h).
bool claim_rank_output(const std::string &root, const std::string &rank_dir, format::Task task);

// The dump is closed: removes this process's rank lock files from the dump root (which then holds only the
// step folders) and lets go of the locks. A SIGKILLed run leaves its lock files behind, unheld; `msprobe-inspect
// repair` removes them, and every reader of ours ignores them.
// Lets go of one rank folder this process claimed in `root` (its kernels went to another rank: the rank adopted for a
// process on one device), as release_rank_outputs does for all.
void release_rank_output(const std::string &root, const std::string &rank_dir) noexcept;

// `as_crashed`: the dump could not be finished (a writer was stuck): the lock files stay, unheld, as after a SIGKILL,
// so that repair knows to complete the folders.
void release_rank_outputs(bool as_crashed = false) noexcept;

}  // namespace msprobe::shim::lifecycle
