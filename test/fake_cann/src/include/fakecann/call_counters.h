// Stand-in only (not CANN): how many calls of each kind the process made into the runtime, so that a benchmark can
// count what a tool costs in host calls (bench/compare_shims.py): the same workload with and without the tool, or
// the counters read before and after a loop. Counted at the runtime's entry points (one count per call the process
// made, not per inner call of ACL into the runtime), whoever called, always on (a relaxed atomic add each).
//
// Read from outside with fakeCannGetCallCounters(counts, n) / fakeCannCallCounterName(i) (libruntime, C ABI), or at
// exit: FAKE_CANN_CALL_COUNTERS=<file> ("%p" becomes the process id) gets {"phase1": n, ...} as JSON.
#pragma once
#include <cstdint>

#include "fakecann/export.h"

namespace fakecann {

enum class CallKind : uint32_t {
  Phase1,              // aclnnXGetWorkspaceSize that reached the op (whatever it returned)
  Phase2,              // aclnnX
  ArgumentCreated,     // aclCreateTensor, Scalar, IntArray, FloatArray, BoolArray, TensorList, ScalarList
  ArgumentDestroyed,   // their aclDestroy* (a list's members are not counted again)
  ExecutorAddress,     // aclSetTensorAddr, aclSetInputTensorAddr, ... (and the Dynamic ones)
  ExecutorRepeatable,  // aclSetAclOpExecutorRepeatable
  ExecutorDestroyed,   // aclDestroyAclOpExecutor
  Copy,                // rtMemcpy / rtMemcpyAsync (aclrtMemcpy*, and any copy the runtime was asked for)
  EventRecord,         // rtEventRecord (aclrtRecordEvent)
  EventWait,           // rtEventSynchronize, rtStreamWaitEvent
  KernelLaunch,        // rtKernelLaunch* (an aclnn phase 2 launches one: counted in both)
  Count
};

FAKECANN_API void count_call(CallKind kind);
FAKECANN_API const char *call_kind_name(CallKind kind);

}  // namespace fakecann
