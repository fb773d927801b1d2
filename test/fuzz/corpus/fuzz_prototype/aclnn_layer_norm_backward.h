LayerNormBackward
/* Test fixture: LayerNormBackward's incoming gradient is called gradOut and is an input. */
#ifndef OP_API_INC_LAYER_NORM_BACKWARD_H_
#define OP_API_INC_LAYER_NORM_BACKWARD_H_
#include "aclnn/aclnn_base.h"
#ifdef __cplusplus
extern "C" {
#endif
ACLNN_API aclnnStatus aclnnLayerNormBackwardGetWorkspaceSize(
    const aclTensor *gradOut, const aclTensor *input, const aclIntArray *normalizedShape, const aclTensor *mean,
    const aclTensor *rstd, const aclTensor *weightOptional, const aclTensor *biasOptional,
    const aclBoolArray *outputMask, aclTensor *gradInputOut, aclTensor *gradWeightOut, aclTensor *gradBiasOut,
    uint64_t *workspaceSize, aclOpExecutor **executor);
ACLNN_API aclnnStatus aclnnLayerNormBackward(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor,
                                             aclrtStream stream);
#ifdef __cplusplus
}
#endif
#endif
