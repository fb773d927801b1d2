// Stand-in only (not CANN): who made a runtime call, so that tests can tell the work of a tool preloaded
// into the process (LD_PRELOAD) from the host program's own. The entry points a program calls (aclrtMemcpy*,
// rtMemcpy*, aclnn phase 2) open a CallerScope with their return address; the outermost scope on a thread
// names the caller (ACL's own inner rt* calls do not). An object is "preloaded" when its file name is one of
// LD_PRELOAD's entries (compared by base name). A call is the tool's own when it comes from preloaded code
// that was itself called by preloaded code; a call from a tool's hook that the host called directly (the
// tool forwarding the host's call) stays the host's.
#pragma once
#include "fakecann/export.h"

namespace fakecann {

class FAKECANN_API CallerScope {
 public:
  explicit CallerScope(const void *return_address);
  ~CallerScope();
  CallerScope(const CallerScope &) = delete;
  CallerScope &operator=(const CallerScope &) = delete;
  // True when the outermost open scope on this thread was opened by a call from a preloaded object. Decided
  // only when FAKE_CANN_COPY_COUNTERS asks for the report (it walks the stack); false otherwise.
  static bool preloaded();

 private:
  bool outermost_;
};

FAKECANN_API bool address_in_preloaded_object(const void *address);
// Stand-in only: FAKE_CANN_LAUNCH_LOG=<file> appends the op name of every aclnn and aclop kernel launched
// (libnnopbase's phase 2, libascendcl's aclop execution), so that tests can count launches on the runtime's
// side independently of any tool. A preloaded tool's own kernels (the rule below, for `caller`, the return
// address of the op's entry point) go to <file>.preloaded instead, so the log keeps counting the host's.
FAKECANN_API void log_kernel_launch(const char *op, const void *caller);
// A kernel a model ran on the device (no host launch): one line "{op_type} {node name}" in $FAKE_CANN_LAUNCH_LOG.model,
// so that tests can count what a dump of graph kernels must hold.
FAKECANN_API void log_model_kernel(const char *op_type, const char *node_name);
// The rule above, for the return address of a runtime entry point.
FAKECANN_API bool call_from_preloaded_code(const void *return_address);

}  // namespace fakecann
