/* CANN stand-in: acl_base.h — the umbrella of the basic types, as in CANN 9.x (runtime
 * include/external/acl/acl_base.h): the runtime's (acl_base_rt.h), the tensor descriptors (acl_base_mdl.h) and the
 * error codes. */
#ifndef INC_EXTERNAL_ACL_ACL_BASE_H_
#define INC_EXTERNAL_ACL_ACL_BASE_H_

#include "acl/acl_base_mdl.h"
#include "acl/acl_base_rt.h"
#include "acl/error_codes/ge_error_codes.h"
#include "acl/error_codes/rt_error_codes.h"

#endif /* INC_EXTERNAL_ACL_ACL_BASE_H_ */
