Add
/**
 * Copyright (c) msprobe-shim test fixture. Written in the style of the CANN 8.x op_api headers:
 * license block, include guard, doxygen per function, visibility macro, multi-line declarations.
 * A mention such as aclnnAddGetWorkspaceSize(self, other) in a comment must not confuse the parser.
 */
#ifndef OP_API_INC_ADD_H_
#define OP_API_INC_ADD_H_

#include "aclnn/aclnn_base.h"
#include "aclnn_util.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief First phase of aclnnAdd: computes the workspace size.
 * out = self + alpha * other
 * @param [in] self: first operand, a device aclTensor.
 * @param [in] other: second operand, broadcastable to self.
 * @param [in] alpha: the scale of other.
 * @param [out] out: the result.
 * @param [out] workspaceSize: workspace bytes to allocate on the device.
 * @param [out] executor: the op executor.
 * @return aclnnStatus
 */
ACLNN_API aclnnStatus aclnnAddGetWorkspaceSize(const aclTensor* self, const aclTensor* other,
                                               const aclScalar* alpha, aclTensor* out,
                                               uint64_t* workspaceSize, aclOpExecutor** executor);

/**
 * @brief Second phase of aclnnAdd.
 */
ACLNN_API aclnnStatus aclnnAdd(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                               aclrtStream stream);

/**
 * @brief aclnnAdds: out = self + alpha * other, other a scalar.
 */
ACLNN_API aclnnStatus aclnnAddsGetWorkspaceSize(const aclTensor* self, const aclScalar* other,
                                                const aclScalar* alpha, aclTensor* out,
                                                uint64_t* workspaceSize, aclOpExecutor** executor);

ACLNN_API aclnnStatus aclnnAdds(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                aclrtStream stream);

/**
 * @brief aclnnInplaceAdd: selfRef += alpha * other.
 * @param [in] selfRef: updated in place.   (doxygen says [in]; the Ref suffix is what counts)
 */
ACLNN_API aclnnStatus aclnnInplaceAddGetWorkspaceSize(
    const aclTensor* selfRef,   // in and out
    const aclTensor* other,
    const aclScalar* alpha,
    uint64_t* workspaceSize,
    aclOpExecutor** executor);

ACLNN_API aclnnStatus aclnnInplaceAdd(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor,
                                      aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif  // OP_API_INC_ADD_H_
