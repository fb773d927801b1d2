// How libopapi's MC2 ops (a matmul fused with a collective, one kernel) reach libhccl, as real CANN's do: libnnopbase
// dlopens libhccl.so and finds the communicator of the op's `group` name with HcomGetCommHandleByGroup at phase 1.
// The stand-in's kernel then runs its collective through fakehccl_run_fused (dlsym as well): synchronously, on the
// calling stream worker, over device buffers, in the communicator's order of collectives (ranks must issue the same
// sequence, as with any collective). Both are exported by libhccl and in no public header.
#pragma once
#include <cstdint>

#include "fakecann/export.h"
#include "hccl/hccl_types.h"

namespace fakecann::hccl {

// The values of the communicator's CollKind (src/hccl/segment.h) for these three.
enum class FusedKind : uint32_t { AllReduce = 1, AllGather = 3, ReduceScatter = 4 };

struct FusedCollective {
  const char *api = "";  // the op, for messages ("MatmulAllReduce")
  FusedKind kind = FusedKind::AllReduce;
  HcclDataType dtype = HCCL_DATA_TYPE_FP16;
  HcclReduceOp op = HCCL_REDUCE_SUM;
  uint64_t count = 0;  // per rank, as the HCCL call of that kind counts
  const void *send = nullptr;
  void *recv = nullptr;
};

// fakehccl_run_fused: throws KernelError (the op's kernel fails, the communicator breaks for every rank).
using RunFused = void (*)(HcclComm comm, const FusedCollective &op);

}  // namespace fakecann::hccl

extern "C" {
// hcom.h of real HCCL: the communicator named `group` (HcclGetCommName) on the calling thread's device.
FAKECANN_API HcclResult HcomGetCommHandleByGroup(const char *group, HcclComm *commHandle);
FAKECANN_API void fakehccl_run_fused(HcclComm comm, const fakecann::hccl::FusedCollective &op);
}
