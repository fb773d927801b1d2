/* CANN stand-in: acl_base_mdl.h — tensor descriptors (CANN 9.x: ge inc/external/acl/acl_base_mdl.h). */
#ifndef INC_EXTERNAL_ACL_ACL_BASE_MDL_H_
#define INC_EXTERNAL_ACL_ACL_BASE_MDL_H_

#include <stddef.h>
#include <stdint.h>

#include "acl/acl_base_rt.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ACL_TENSOR_SHAPE_RANGE_NUM 2
#define ACL_TENSOR_VALUE_RANGE_NUM 2
#define ACL_UNKNOWN_RANK 0xFFFFFFFFFFFFFFFE

typedef struct aclTensorDesc aclTensorDesc;

ACL_FUNC_VISIBILITY aclTensorDesc *aclCreateTensorDesc(aclDataType dataType, int numDims, const int64_t *dims,
                                                       aclFormat format);
ACL_FUNC_VISIBILITY void aclDestroyTensorDesc(const aclTensorDesc *desc);
ACL_FUNC_VISIBILITY aclDataType aclGetTensorDescType(const aclTensorDesc *desc);
ACL_FUNC_VISIBILITY aclFormat aclGetTensorDescFormat(const aclTensorDesc *desc);
ACL_FUNC_VISIBILITY size_t aclGetTensorDescSize(const aclTensorDesc *desc);
ACL_FUNC_VISIBILITY size_t aclGetTensorDescElementCount(const aclTensorDesc *desc);
ACL_FUNC_VISIBILITY size_t aclGetTensorDescNumDims(const aclTensorDesc *desc);
ACL_FUNC_VISIBILITY aclError aclGetTensorDescDimV2(const aclTensorDesc *desc, size_t index, int64_t *dimSize);
ACL_FUNC_VISIBILITY aclError aclSetTensorFormat(aclTensorDesc *desc, aclFormat format);
ACL_FUNC_VISIBILITY aclError aclSetTensorShape(aclTensorDesc *desc, int numDims, const int64_t *dims);

#ifdef __cplusplus
}
#endif

#endif /* INC_EXTERNAL_ACL_ACL_BASE_MDL_H_ */
