ApplyAdamWV2
/**
 * Test fixture: ApplyAdamWV2 updates four tensors in place (Ref, one optional) and takes floats by value.
 */
#ifndef OP_API_INC_APPLY_ADAM_W_V2_H_
#define OP_API_INC_APPLY_ADAM_W_V2_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

ACLNN_API aclnnStatus aclnnApplyAdamWV2GetWorkspaceSize(
  aclTensor *varRef,
  aclTensor *mRef,
  aclTensor *vRef,
  aclTensor *maxGradNormOptionalRef,
  const aclTensor *grad,
  const aclTensor *step,
  float lr,
  float beta1,
  float beta2,
  float weightDecay,
  float eps,
  bool amsgrad,
  bool maximize,
  uint64_t *workspaceSize,
  aclOpExecutor **executor);

ACLNN_API aclnnStatus aclnnApplyAdamWV2(
  void *workspace,
  uint64_t workspaceSize,
  aclOpExecutor *executor,
  aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif
