GeluBackward
/**
 * Test fixture: GeluBackward declares its output `const aclTensor *gradInput`; the doxygen block says [out].
 */
#ifndef OP_API_INC_GELU_BACKWARD_H_
#define OP_API_INC_GELU_BACKWARD_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief phase 1 of aclnnGeluBackward.
 * @param [in] gradOutput: the gradient flowing back.
 * @param [in] self: the forward input.
 * @param [out] gradInput: the gradient of self.
 * @param [out] workspaceSize
 * @param [out] executor
 */
ACLNN_API aclnnStatus aclnnGeluBackwardGetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                                        const aclTensor* gradInput, uint64_t* workspaceSize,
                                                        aclOpExecutor** executor);

/**
 * @brief phase 1 of aclnnGeluBackwardV2 (same file in this fixture; CANN has its own).
 * @param[out] gradInputV: documented as output without a telling name.
 */
ACLNN_API aclnnStatus aclnnGeluBackwardV2GetWorkspaceSize(const aclTensor* gradOutput, const aclTensor* self,
                                                          const char* approximate, const aclTensor* gradInputV,
                                                          uint64_t* workspaceSize, aclOpExecutor** executor);

#ifdef __cplusplus
}
#endif

#endif
