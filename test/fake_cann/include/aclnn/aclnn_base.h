/* CANN stand-in: aclnn/aclnn_base.h — included by every aclnnop header. */
#ifndef OP_API_ACLNN_BASE_H_
#define OP_API_ACLNN_BASE_H_

#include "aclnn/acl_meta.h"

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY aclnnStatus aclnnInit(const char *configPath);
ACL_FUNC_VISIBILITY aclnnStatus aclnnFinalize(void);

#ifdef __cplusplus
}
#endif

#endif /* OP_API_ACLNN_BASE_H_ */
