// HCCL: the rank a communicator is created with names the rank{R} folder when no environment variable
// (RANK_ID, RANK) gave one (spec §4). Collective capture builds on these hooks.
#include "hccl/hccl.h"
#include "shim/hooks/hook.h"
#include "shim/session.h"

using namespace msprobe::shim;

MSPROBE_HOOK_SLOT(HcclCommInitRootInfo);
MSPROBE_HOOK_SLOT(HcclCommInitClusterInfo);

MSPROBE_EXPORT HcclResult HcclCommInitRootInfo(uint32_t nRanks, const HcclRootInfo *rootInfo, uint32_t rank,
                                               HcclComm *comm) {
  auto real = MSPROBE_REAL(HcclCommInitRootInfo);
  if (!real) return HCCL_E_NOT_FOUND;
  HcclResult rc = real(nRanks, rootInfo, rank, comm);
  if (rc == HCCL_SUCCESS && capture_enabled()) session().set_rank_hint(rank);
  return rc;
}

MSPROBE_EXPORT HcclResult HcclCommInitClusterInfo(const char *clusterInfo, uint32_t rank, HcclComm *comm) {
  auto real = MSPROBE_REAL(HcclCommInitClusterInfo);
  if (!real) return HCCL_E_NOT_FOUND;
  HcclResult rc = real(clusterInfo, rank, comm);
  if (rc == HCCL_SUCCESS && capture_enabled()) session().set_rank_hint(rank);
  return rc;
}

namespace msprobe::shim {

HookFamily hccl_hooks() {
  static const HookEntry entries[] = {MSPROBE_HOOK_ENTRY(HcclCommInitRootInfo),
                                      MSPROBE_HOOK_ENTRY(HcclCommInitClusterInfo)};
  return {entries, sizeof entries / sizeof entries[0]};
}

}  // namespace msprobe::shim
