/* A custom op of the vendor "msprobe_test" whose 250-character name makes its tensor file names longer
 * than 255 characters (spec §5: such a file gets a 32-digit name and a mapping.csv row). The header's
 * own name does not follow the op name (it could not: it would be too long too), so the shim finds the
 * declaration by scanning every header. */
#ifndef ACLNN_LONG_KERNEL_H_
#define ACLNN_LONG_KERNEL_H_

#include "aclnn/acl_meta.h"

#ifdef __cplusplus
extern "C" {
#endif

/* out = self * alpha (float32 or float64, same shape). */
__attribute__((visibility("default"))) aclnnStatus
aclnnMsprobeTestVeryLongKernelNameAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijZGetWorkspaceSize(
    const aclTensor *self, double alpha, aclTensor *out, uint64_t *workspaceSize, aclOpExecutor **executor);

__attribute__((visibility("default"))) aclnnStatus
aclnnMsprobeTestVeryLongKernelNameAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijAbcdefghijZ(
    void *workspace, uint64_t workspaceSize, aclOpExecutor *executor, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* ACLNN_LONG_KERNEL_H_ */
