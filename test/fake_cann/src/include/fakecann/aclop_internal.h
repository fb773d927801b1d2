// The aclop execution engine of libascendcl, exposed to libacl_op_compiler. The compiler library must
// reach the engine through these functions and never through the public aclopExecuteV2: on a real
// machine aclopCompileAndExecute does not call aclopExecuteV2, so a tool interposing both would see a
// nested call that does not exist there.
#pragma once
#include "acl/acl_base.h"
#include "acl/acl_op.h"
#include "fakecann/export.h"

namespace fakecann::aclop {

// True when opType names an op of the built-in registry ("Add", "MatMul", ...).
FAKECANN_API bool op_registered(const char *opType);

// What aclopCompile checks: the op exists (else ACL_ERROR_OP_NOT_FOUND) and the descs and attrs fit it
// (else ACL_ERROR_INVALID_PARAM). Output descs with unknown dims (-1, or {-2}) are accepted.
FAKECANN_API aclError check(const char *opType, int numInputs, const aclTensorDesc *const inputDesc[], int numOutputs,
                            const aclTensorDesc *const outputDesc[], const aclopAttr *attr);

// Validates the call and enqueues the op's kernel on `stream`; returns an ACL error code.
// updatableOutputDesc: the same array as outputDesc, writable (V2 entry points), or nullptr. When
// given, output descs with unknown dims are rewritten to the inferred shape (dynamic-shape ops).
// caller: the return address of the aclop entry point the program called (FAKE_CANN_LAUNCH_LOG, caller.h).
FAKECANN_API aclError execute(const char *opType, int numInputs, const aclTensorDesc *const inputDesc[],
                              const aclDataBuffer *const inputs[], int numOutputs,
                              const aclTensorDesc *const outputDesc[], aclDataBuffer *const outputs[],
                              const aclopAttr *attr, aclrtStream stream, aclTensorDesc *const *updatableOutputDesc,
                              const void *caller);

}  // namespace fakecann::aclop
