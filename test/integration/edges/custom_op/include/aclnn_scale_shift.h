/* aclnnScaleShift: a custom op of the vendor "msprobe_test", laid out as CANN installs custom ops
 * ($ASCEND_CUSTOM_OPP_PATH/op_api/include/aclnn_scale_shift.h next to op_api/lib/libcust_opapi.so).
 * The capture shim has never heard of it: it learns the prototype from this file at run time. */
#ifndef ACLNN_SCALE_SHIFT_H_
#define ACLNN_SCALE_SHIFT_H_

#include "aclnn/acl_meta.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief Phase 1 of aclnnScaleShift: out = (flag ? -1 : 1) * 2^mode * (self * scale + other * shift).
 * Every step is exact in float64 (ldexp and negation are), so out carries the bits of scale and shift.
 * @param [in] self   float32 or float64 tensor
 * @param [in] scale  by value, double
 * @param [in] other  same shape and dtype as self
 * @param [in] shift  by value, float
 * @param [in] mode   power of two applied to the sum, in [-64, 64]
 * @param [in] flag   negate the result
 * @param [out] out   same shape and dtype as self
 */
__attribute__((visibility("default"))) aclnnStatus aclnnScaleShiftGetWorkspaceSize(
    const aclTensor *self, double scale, const aclTensor *other, float shift, int64_t mode, bool flag,
    aclTensor *out, uint64_t *workspaceSize, aclOpExecutor **executor);

/** @brief Phase 2 of aclnnScaleShift. */
__attribute__((visibility("default"))) aclnnStatus aclnnScaleShift(void *workspace, uint64_t workspaceSize,
                                                                   aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* ACLNN_SCALE_SHIFT_H_ */
