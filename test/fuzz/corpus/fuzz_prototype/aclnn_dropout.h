Dropout
/**
 * Test fixture: Dropout mixes double, bool and int64_t by value between tensors
 * (the by-value arguments land in different register classes on x86-64).
 */
#ifndef OP_API_INC_DROPOUT_H_
#define OP_API_INC_DROPOUT_H_

#include "aclnn/aclnn_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @param [in] input
 * @param [in] p: drop probability
 * @param [in] train
 * @param [in] seed
 * @param [in] offset
 * @param [out] out
 * @param [out] maskOut: the bit mask, uint8
 */
ACLNN_API aclnnStatus aclnnDropoutGetWorkspaceSize(const aclTensor* input, double p, bool train, int64_t seed,
                                                   int64_t offset, aclTensor* out, aclTensor* maskOut,
                                                   uint64_t* workspaceSize, aclOpExecutor** executor);

ACLNN_API aclnnStatus aclnnDropout(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                   aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif
