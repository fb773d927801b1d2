// Decoding an aclnn phase-1 call: every argument read from where the ABI put it (a prototype from the CANN headers),
// or found by the header-less rule (docs/prototypes.md), from what the argument objects' creation hooks recorded
// (shim/device/handles.h; the runtime's getters for an object made before capture started).
#pragma once
#include <optional>
#include <utility>

#include "shim/aclnn/binding.h"
#include "shim/aclnn/op_call.h"

namespace msprobe::shim {

// The executor phase 1 wrote through its out-pointer: read at phase 1 (the real call succeeded, so the host's
// out-pointer is valid then, and only then).
const void *executor_of(const Binding &b, const RawArgs &a);
// A phase-1 call with a prototype. `executor`: the executor phase 1 returned (executor_of(), read at phase 1); the
// call is decoded at phase 1 or, from its registers, at phase 2. Nullopt without an executor.
std::optional<std::pair<const void *, OpCall>> call_from_prototype(const Binding &b, const RawArgs &a,
                                                                   const void *executor);
// Phase 1 without a header: the argument slots scanned for objects the shim saw created, the executor found after them.
std::optional<std::pair<const void *, OpCall>> call_from_slots(const Binding &b, const RawArgs &a);
// The registers of a call kept at phase 1, as the forwarder gave them.
RawArgs raw_args(const RawCall &r);
// The storage address the aclTensor `handle` has now (aclSetRawTensorAddr and the executor setters change it): what a
// kernel launched now reads. Null when the handle is not known.
void *current_address(const void *handle);

}  // namespace msprobe::shim
