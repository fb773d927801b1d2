LayerNorm
// Test fixture: LayerNorm with a double by value and optional tensors (in and out).
#ifndef OP_API_INC_LAYER_NORM_H_
#define OP_API_INC_LAYER_NORM_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief aclnnLayerNorm phase 1.
 * @param [in] input: x.
 * @param [in] normalizedShape: the trailing dims normalized over.
 * @param [in] weightOptional: gamma, may be NULL.
 * @param [in] biasOptional: beta, may be NULL.
 * @param [in] eps: added to the variance.
 * @param [out] out: y.
 * @param [out] meanOutOptional: may be NULL.
 * @param [out] rstdOutOptional: may be NULL.
 */
ACL_FUNC_VISIBILITY aclnnStatus aclnnLayerNormGetWorkspaceSize(const aclTensor *input,
                                                               const aclIntArray *normalizedShape,
                                                               const aclTensor *weightOptional,
                                                               const aclTensor *biasOptional,
                                                               double eps,
                                                               aclTensor *out,
                                                               aclTensor *meanOutOptional,
                                                               aclTensor *rstdOutOptional,
                                                               uint64_t *workspaceSize,
                                                               aclOpExecutor **executor);

ACL_FUNC_VISIBILITY aclnnStatus aclnnLayerNorm(void *workspace, uint64_t workspaceSize,
                                               aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif
