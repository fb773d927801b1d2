// libhccl's side of the MC2 ops (fakecann/hccl_fused.h): the communicator of a group name, and the collective a
// fused kernel runs from inside libopapi's kernel on the stream worker.
#include <string>

#include "api.h"
#include "fakecann/hccl_fused.h"
#include "fakecann/stream.h"

using namespace fakecann;
using namespace fakecann::hccl;

static_assert((uint32_t)FusedKind::AllReduce == (uint32_t)CollKind::AllReduce &&
              (uint32_t)FusedKind::AllGather == (uint32_t)CollKind::AllGather &&
              (uint32_t)FusedKind::ReduceScatter == (uint32_t)CollKind::ReduceScatter);

extern "C" {

// Real HCCL looks the name up among the communicators of the current device (names are unique there).
HcclResult HcomGetCommHandleByGroup(const char *group, HcclComm *commHandle) {
  if (group == nullptr || commHandle == nullptr)
    return api_fail(HCCL_E_PTR, "HcomGetCommHandleByGroup: group or commHandle is null");
  std::shared_ptr<Comm> c = api_find_named(group, current_device());
  if (c == nullptr)
    return api_fail(HCCL_E_NOT_FOUND, std::string("HcomGetCommHandleByGroup: no communicator named '") + group +
                                          "' on device " + std::to_string(current_device()));
  *commHandle = c.get();
  return HCCL_SUCCESS;
}

void fakehccl_run_fused(HcclComm comm, const FusedCollective &op) {
  std::shared_ptr<Comm> c = api_find(comm);
  if (c == nullptr) throw KernelError(std::string(op.api) + ": the communicator was destroyed before the kernel ran");
  execute(*c, Collective{op.api, (CollKind)op.kind, op.dtype, op.op, 0, op.count, op.send, op.recv});
}

}  // extern "C"
