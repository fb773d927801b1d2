// Which header declares what, as in CANN 9.x (reference/cann_source.md §1): stream capture (aclmdlRI*) and the model
// dump switches are acl_rt.h's (runtime include/external/acl/acl_rt.h), not acl_mdl.h's; acl_base.h is the umbrella of
// acl_base_rt.h, acl_base_mdl.h and the error codes; two aclnn headers are named as the ops repositories name them.
// This file includes acl/acl_rt.h alone.
#include "acl/acl_rt.h"

#include <gtest/gtest.h>

#ifdef INC_EXTERNAL_ACL_ACL_MODEL_H_
#error "acl_rt.h must not need acl_mdl.h"
#endif

// ops-nn optim/apply_adam_w_v2/op_host/op_api/aclnn_apply_adam_w_v2.h, activation/log_softmax_v2/op_api/aclnn_logsoftmax.h
#if !__has_include("aclnnop/aclnn_apply_adam_w_v2.h") || __has_include("aclnnop/aclnn_apply_adam_wv2.h")
#error "ApplyAdamWV2's header is aclnn_apply_adam_w_v2.h"
#endif
#if !__has_include("aclnnop/aclnn_logsoftmax.h") || __has_include("aclnnop/aclnn_log_softmax.h")
#error "LogSoftmax's header is aclnn_logsoftmax.h"
#endif
// runtime include/external/acl/: the umbrella's parts and the error codes.
#if !__has_include("acl/acl_base_rt.h") || !__has_include("acl/acl_base_mdl.h") || \
    !__has_include("acl/error_codes/rt_error_codes.h")
#error "acl_base.h's parts are missing"
#endif

namespace {

TEST(HeaderLayout, CaptureAndDumpSwitchesAreDeclaredByAclRt) {
  aclError (*begin)(aclrtStream, aclmdlRICaptureMode) = &aclmdlRICaptureBegin;
  aclError (*end)(aclrtStream, aclmdlRI *) = &aclmdlRICaptureEnd;
  aclError (*init_dump)() = &aclmdlInitDump;
  aclError (*set_dump)(const char *) = &aclmdlSetDump;
  aclError (*finalize_dump)() = &aclmdlFinalizeDump;
  EXPECT_NE(begin, nullptr);
  EXPECT_NE(end, nullptr);
  EXPECT_NE(init_dump, nullptr);
  EXPECT_NE(set_dump, nullptr);
  EXPECT_NE(finalize_dump, nullptr);
  // rt_error_codes.h, through acl_base.h.
  EXPECT_EQ(ACL_ERROR_RT_CONTEXT_NULL, 107002);
  EXPECT_EQ(ACL_ERROR_RT_EVENT_NOT_COMPLETE, 507006);
}

}  // namespace
