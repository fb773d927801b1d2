// CANN's HCCL samples include only hccl/hccl.h and call aclrtSetDevice, aclrtMalloc ... (hccl examples/*/main.cc):
// CANN's hccl.h includes acl/acl.h (hccl include/hccl.h, and hcomm include/hccl/hccl_comm.h, which declares the
// communicator management). This file includes nothing else, so it only compiles if the stand-in's does the same.
#include "hccl/hccl.h"

#include <gtest/gtest.h>

namespace {

TEST(HeaderLayout, HcclHeaderBringsTheAclRuntimeAndCommunicatorManagement) {
  // Declared by acl/acl_rt.h, reached through hccl/hccl.h -> hccl/hccl_comm.h -> acl/acl.h.
  aclError (*set_device)(int32_t) = &aclrtSetDevice;
  aclError (*malloc_fn)(void **, size_t, aclrtMemMallocPolicy) = &aclrtMalloc;
  // Communicator management is hccl_comm.h's (hcomm), declared weak as CANN's is, collectives hccl.h's. A weak
  // function is bound only if its library is loaded: a collective's call (strong) puts libhccl in DT_NEEDED, as in
  // CANN's samples, and libhccl brings the communicators (its own on 8.x, libhcomm's on 9.x).
  EXPECT_EQ(HcclAllReduce(nullptr, nullptr, 1, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, nullptr, nullptr), HCCL_E_PTR);
  HcclResult (*root_info)(HcclRootInfo *) = &HcclGetRootInfo;
  HcclResult (*barrier)(HcclComm, aclrtStream) = &HcclBarrier;
  HcclResult (*all_reduce)(void *, void *, uint64_t, HcclDataType, HcclReduceOp, HcclComm, aclrtStream) =
      &HcclAllReduce;
  EXPECT_NE(set_device, nullptr);
  EXPECT_NE(malloc_fn, nullptr);
  EXPECT_NE(root_info, nullptr);
  EXPECT_NE(barrier, nullptr);
  EXPECT_NE(all_reduce, nullptr);
}

}  // namespace
