// The ways a process ends that skip exit handlers, and the calls that change signal dispositions
// (shim/capture/lifecycle.h): _exit/_Exit (Python's os._exit) finish the dump first; sigaction/signal keep the shim's
// handler of the fatal signals in front of the host's, which the host still sees as its own.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "shim/hooks/hook.h"
#include "shim/capture/lifecycle.h"

using namespace msprobe::shim;

// For dlsym dispatch only: the real _exit is called through lifecycle, which looked it up in advance.
MSPROBE_HOOK_SLOT(_exit);
MSPROBE_HOOK_SLOT(_Exit);

MSPROBE_EXPORT void _exit(int status) { lifecycle::end_process(status); }
MSPROBE_EXPORT void _Exit(int status) { lifecycle::end_process(status); }

MSPROBE_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
  return lifecycle::host_sigaction(sig, act, old);
}

MSPROBE_EXPORT sighandler_t signal(int sig, sighandler_t handler) { return lifecycle::host_signal(sig, handler); }

namespace msprobe::shim {

HookFamily process_hooks() {
  static const HookEntry entries[] = {MSPROBE_HOOK_ENTRY(_exit), MSPROBE_HOOK_ENTRY(_Exit)};
  return {entries, sizeof entries / sizeof entries[0]};
}

}  // namespace msprobe::shim
