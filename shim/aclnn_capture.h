// Capture of aclnn two-phase ops.
//
// Phase 1 (aclnn<Op>GetWorkspaceSize) is wrapped by a generic forwarder built from the op's prototype
// (read from the CANN headers, or, without a header, guessed by the rule in docs/prototypes.md): after
// the real call succeeds, the op's arguments are recorded under the executor it returned. Phase 2
// (aclnn<Op>(workspace, size, executor, stream)) looks the executor up: inputs are copied before the
// real launch (an in-place op overwrites them), outputs after it, all in stream order. Executors freed
// by phase 2 are forgotten; repeatable ones keep their record, and the aclSet*TensorAddr calls rebind
// its addresses so every launch sees the addresses bound at that launch.
#pragma once
#include <cstddef>

namespace msprobe::shim {

enum class IndexSpace { All, Inputs, Outputs };

class AclnnCapture {
 public:
  // The function pointer to hand out for aclnn symbol `name`, whose real definition is `real`: a wrapper
  // for phase-1 and phase-2 symbols, `real` itself for anything else (aclnnInit, GetMaxWorkspaceSize...).
  void *wrap_symbol(const char *name, void *real);
  void on_repeatable(const void *executor);
  void on_destroyed(const void *executor);
  void on_rebind(const void *executor, IndexSpace space, size_t index, size_t relative, void *addr);

  struct Impl;

 private:
  Impl *impl();
};

AclnnCapture &aclnn_capture();

}  // namespace msprobe::shim
