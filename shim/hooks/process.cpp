// The ways a process ends that skip exit handlers, and the calls that change signal dispositions
// (shim/capture/lifecycle.h): _exit/_Exit (Python's os._exit) finish the dump first; sigaction/signal keep the shim's
// handler of the fatal signals in front of the host's, which the host still sees as its own.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "shim/capture/lifecycle.h"
#include "shim/hooks/hook.h"

using namespace msprobe::shim;

// For dlsym dispatch only: the real _exit is called through lifecycle, which looked it up in advance.
// The hooks of this family, one a line (shim/hooks/hook.h).
#define MSPROBE_PROCESS_HOOKS(X) \
  X(_exit)                       \
  X(_Exit)
MSPROBE_HOOK_SLOTS(MSPROBE_PROCESS_HOOKS)

MSPROBE_EXPORT void _exit(int status) { lifecycle::end_process(status); }
MSPROBE_EXPORT void _Exit(int status) { lifecycle::end_process(status); }

MSPROBE_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
  return lifecycle::host_sigaction(sig, act, old);
}

MSPROBE_EXPORT sighandler_t signal(int sig, sighandler_t handler) { return lifecycle::host_signal(sig, handler); }

MSPROBE_HOOK_FAMILY(MSPROBE_PROCESS_HOOKS, Exported)
