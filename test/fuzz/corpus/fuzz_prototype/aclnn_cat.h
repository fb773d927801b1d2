Cat
/* Test fixture: Cat takes a tensor list. */
#ifndef OP_API_INC_CAT_H_
#define OP_API_INC_CAT_H_
#include "aclnn/aclnn_base.h"
#ifdef __cplusplus
extern "C" {
#endif
ACLNN_API aclnnStatus aclnnCatGetWorkspaceSize(const aclTensorList *tensors, int64_t dim, aclTensor *out,
                                               uint64_t *workspaceSize, aclOpExecutor **executor);
ACLNN_API aclnnStatus aclnnCat(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                               aclrtStream stream);
#ifdef __cplusplus
}
#endif
#endif
