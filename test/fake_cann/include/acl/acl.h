/* CANN stand-in: acl.h — umbrella header. */
#ifndef INC_EXTERNAL_ACL_ACL_H_
#define INC_EXTERNAL_ACL_ACL_H_

#include "acl_base.h"
#include "acl_mdl.h"
#include "acl_op.h"
#include "acl_rt.h"

#endif /* INC_EXTERNAL_ACL_ACL_H_ */
