Cast
/* Test fixture: Cast takes `const aclDataType dtype` by value. */
#ifndef OP_API_INC_CAST_H_
#define OP_API_INC_CAST_H_
#include "aclnn/aclnn_base.h"
#ifdef __cplusplus
extern "C" {
#endif
ACLNN_API aclnnStatus aclnnCastGetWorkspaceSize(const aclTensor *self, const aclDataType dtype, aclTensor *out,
                                                uint64_t *workspaceSize, aclOpExecutor **executor);
ACLNN_API aclnnStatus aclnnCast(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                aclrtStream stream);
#ifdef __cplusplus
}
#endif
#endif
