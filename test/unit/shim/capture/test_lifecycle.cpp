// How the capture ends with its process (shim/capture/lifecycle.h): install() with callbacks, then
// finish_before_death() (what _exit and the fatal signals do) runs close_dump exactly once; a child made by fork()
// gets in_fork_child and never closes its parent's dump; a fatal signal closes the dump, then kills the process as
// it would have without the shim. install() takes over signal handlers and starts a thread for good, so each case
// runs in a forked child whose exit status and callback trace (a pipe) the test checks.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "shim/capture/lifecycle.h"

namespace lifecycle = msprobe::shim::lifecycle;

namespace {

int g_trace = -1;  // write end of the pipe the callbacks report to (async-signal-safe writes)

void trace(char c) {
  ssize_t n = ::write(g_trace, &c, 1);
  (void)n;
}
void on_close() { trace('C'); }
void on_flush() { trace('F'); }
void on_fork_child() { trace('K'); }

lifecycle::Callbacks callbacks() {
  lifecycle::Callbacks c;
  c.close_dump = &on_close;
  c.flush_dump = &on_flush;
  c.in_fork_child = &on_fork_child;
  return c;
}

struct ChildResult {
  int status = 0;
  std::string trace;
};

// Runs `body` in a child process; returns its wait status and everything the callbacks traced.
template <typename F>
ChildResult in_child(F body) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    g_trace = fds[1];
    body();
    _exit(0);
  }
  close(fds[1]);
  ChildResult r;
  char buf[64];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) r.trace.append(buf, (size_t)n);
  close(fds[0]);
  EXPECT_EQ(waitpid(pid, &r.status, 0), pid);
  return r;
}

TEST(Lifecycle, FinishBeforeDeathClosesTheDumpOnce) {
  const ChildResult r = in_child([] {
    lifecycle::install(callbacks());
    lifecycle::finish_before_death();
    lifecycle::finish_before_death();  // finished already: a no-op
    _exit(7);
  });
  ASSERT_TRUE(WIFEXITED(r.status));
  EXPECT_EQ(WEXITSTATUS(r.status), 7);
  EXPECT_EQ(r.trace, "C");
}

TEST(Lifecycle, NothingHappensBeforeInstall) {
  const ChildResult r = in_child([] {
    lifecycle::finish_before_death();  // no session installed: nothing to finish
    _exit(3);
  });
  ASSERT_TRUE(WIFEXITED(r.status));
  EXPECT_EQ(WEXITSTATUS(r.status), 3);
  EXPECT_EQ(r.trace, "");
}

TEST(Lifecycle, AForkChildNeverClosesItsParentsDump) {
  const ChildResult r = in_child([] {
    lifecycle::install(callbacks());
    const pid_t grandchild = fork();
    if (grandchild == 0) {
      lifecycle::finish_before_death();  // not its dump
      _exit(0);
    }
    int st = 0;
    waitpid(grandchild, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) _exit(1);
    trace('|');
    lifecycle::finish_before_death();
    _exit(0);
  });
  ASSERT_TRUE(WIFEXITED(r.status));
  EXPECT_EQ(WEXITSTATUS(r.status), 0);
  EXPECT_EQ(r.trace, "K|C") << "the child is told it is one, and only the owner closes the dump";
}

TEST(Lifecycle, AFatalSignalClosesTheDumpThenKills) {
  const ChildResult r = in_child([] {
    lifecycle::install(callbacks());
    raise(SIGTERM);
    _exit(0);  // not reached: SIGTERM's default action ends the process
  });
  ASSERT_TRUE(WIFSIGNALED(r.status)) << "status " << r.status;
  EXPECT_EQ(WTERMSIG(r.status), SIGTERM);
  EXPECT_EQ(r.trace, "C");
}

TEST(Lifecycle, AHandledSignalGoesToTheHostsHandlerAndClosesNothing) {
  static volatile sig_atomic_t handled = 0;
  const ChildResult r = in_child([] {
    lifecycle::install(callbacks());
    struct sigaction sa {};
    sa.sa_handler = [](int) { handled = 1; };
    lifecycle::host_sigaction(SIGINT, &sa, nullptr);
    raise(SIGINT);
    if (handled) trace('H');
    struct sigaction seen {};
    lifecycle::host_sigaction(SIGINT, nullptr, &seen);
    if (seen.sa_handler == sa.sa_handler) trace('S');  // the host sees its own handler
    _exit(0);
  });
  ASSERT_TRUE(WIFEXITED(r.status));
  EXPECT_EQ(r.trace, "HS");
}

}  // namespace
