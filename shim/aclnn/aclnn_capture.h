// Capture of aclnn two-phase ops.
//
// Phase 1 (aclnn<Op>GetWorkspaceSize) is wrapped by a generic forwarder built from the op's prototype
// (read from the CANN headers, or, without a header, guessed by the rule in docs/prototypes.md): after
// the real call succeeds, the call is recorded under the executor it returned, with the stack of the thread
// that made it. Only that happens there (torch_npu runs phase 1 on the Python thread): the argument registers
// are kept as they came, and decoded where phase 2 runs, before it, while the argument objects still live
// (torch_npu destroys them after phase 2), from what their creation hooks recorded (the runtime's getters for
// a tensor created before capture started). Phase 2
// (aclnn<Op>(workspace, size, executor, stream)) looks the executor up: inputs are copied before the
// real launch (an in-place op overwrites them), outputs after it, all in stream order. Executors freed
// by phase 2 are forgotten; repeatable ones keep their record. Each launch records the addresses its kernel reads then,
// as CANN's executors read each tensor's storage address at launch: the tensors' handles are kept with the call and
// asked again (aclSetRawTensorAddr and the aclSet*TensorAddr setters change them; CANN ignores the setters' index for
// built-in ops, and so does the shim). Files: op_call.h (what is kept), arg_decode.h (decoding), phases.h (the
// bodies the wrappers run).
//
// torch_npu's executor cache (reference/cann_abi.md §6.4) skips phase 1 on a hit: the call recorded for
// the phase 1 that ran under a cache key is also kept under that key, and each hit's (new) executor gets a
// copy of it with the tensor addresses the host reported for that hit (shim/hooks/pta_cache.cpp).
#pragma once
#include <cstddef>
#include <cstdint>

#include "shim/aclnn/exec_cache_key.h"

namespace msprobe::shim {

class AclnnCapture {
 public:
  // The function pointer to hand out for aclnn symbol `name`, whose real definition is `real`: a wrapper
  // for phase-1 and phase-2 symbols, `real` itself for anything else (aclnnInit, GetMaxWorkspaceSize...).
  void *wrap_symbol(const char *name, void *real);
  void on_repeatable(const void *executor);
  void on_destroyed(const void *executor);

  // The executor cache, per thread as in the runtime. The key of `kind` the host set (None: cleared); the
  // next phase 1 that succeeds on this thread is kept under the keys set, and clears them.
  void set_cache_key(ExecCacheKey::Kind kind, const ExecCacheKey &key);
  void clear_cache_keys();
  // A lookup of `key` returned `executor`: recorded as the call kept under the key, its tensors (present
  // ones in declaration order, list members one by one) bound to the first `n` of `addrs`.
  void on_cache_hit(const void *executor, const ExecCacheKey &key, void *const *addrs, size_t n);
  // An address reported after the hit: tensor `index` of that order.
  void on_cached_address(const void *executor, size_t index, void *addr);
};

AclnnCapture &aclnn_capture();

}  // namespace msprobe::shim
