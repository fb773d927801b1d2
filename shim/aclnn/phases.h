// The bodies the aclnn wrappers run (shim/aclnn/aclnn_capture.h says what happens when): phase 1 keeps the call,
// phase 2 captures the launch through the one capture body (shim/capture/capture_call.h). The wrappers are made in
// aclnn_capture.cpp; these are what they call.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "shim/aclnn/binding.h"
#include "shim/aclnn/op_call.h"

namespace msprobe::shim {

// The wrappers' process-wide state (immortal: wrappers are called until the process ends).
struct AclnnState {
  std::mutex mu;
  std::unordered_map<void *, void *> wrappers;  // real function -> wrapper entry
  std::unique_ptr<PrototypeIndex> index;        // the CANN headers' prototypes, read when first asked
  CallTable calls;
  KeptCalls kept;
  PrototypeIndex &prototypes();
};
inline AclnnState &aclnn_state() {
  static auto *state = new AclnnState;  // immortal: wrappers are called until the process ends
  return *state;
}

// The executor-cache keys the host set on this thread (by kind - 1), for the next phase 1 here.
ExecCacheKey *thread_cache_keys();

// Phase 1 through a forwarder: the gate in front of it (false: straight to the real function) and its post-call hook.
bool phase1_gate(void *user, const uint64_t *gpr);
void phase1_post(void *user, const RawArgs &a, uint64_t ret);

// Phase 2 (workspace, size, executor, stream) through a prepend trampoline: the whole launch in one frame.
int32_t phase2_entry(Binding *b, void *workspace, uint64_t size, void *executor, void *stream);
// Phase 2 through a forwarder (the trampoline pool used up): the same launch, split around the real call.
void phase2_pre(void *user, const RawArgs &a);
void phase2_post(void *user, const RawArgs &a, uint64_t ret);

}  // namespace msprobe::shim
