// One real aclnn function the shim handed a wrapper out for: what its calls need to be decoded and decided, fixed when
// it is wrapped (the configuration and the CANN headers do not change afterwards).
#pragma once
#include <string>
#include <vector>

#include "shim/aclnn/prototypes.h"
#include "shim/call/forwarder.h"
#include "shim/capture/session.h"

namespace msprobe::shim {

struct Binding {
  std::string op;  // "Add" for aclnnAdd and aclnnAddGetWorkspaceSize
  void *real = nullptr;
  bool phase1 = true;
  // The session's facts of the op type (null session when wrapped: may capture, not a marker).
  OpTypeFacts facts;
  const OpPrototype *proto = nullptr;  // phase 1 with a header
  std::vector<ArgLocation> locations;  // where each prototype parameter travels
  int stack_slots = kMaxStackSlots;    // exact when the prototype is known
  int executor_param = -1;             // the prototype's aclOpExecutor ** parameter
  // Phase 1 decodes the arguments itself, instead of phase 2: a C string argument (read while the host's buffer is
  // alive), more stack arguments than a RawCall holds, or no header (the header-less rule probes the host's memory).
  bool decode_at_phase1 = true;
};

}  // namespace msprobe::shim
