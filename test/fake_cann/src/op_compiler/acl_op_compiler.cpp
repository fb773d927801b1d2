// libacl_op_compiler.so: aclopCompile, aclopCompileAndExecute(V2) and aclSetCompileopt.
// "Compiling" a built-in op is checking it against the registry of libascendcl; execution goes
// through fakecann::aclop::execute, never through the public aclopExecuteV2 (see aclop_internal.h).
#include "acl/acl_op_compiler.h"

#include "fakecann/aclop_internal.h"
#include "fakecann/stream.h"

namespace {

aclError check_modes(aclopEngineType engineType, aclopCompileType compileFlag) {
  if (engineType < ACL_ENGINE_SYS || engineType > ACL_ENGINE_VECTOR) {
    fakecann::set_error_message("aclop: invalid engine type");
    return ACL_ERROR_INVALID_PARAM;
  }
  if (compileFlag != ACL_COMPILE_SYS && compileFlag != ACL_COMPILE_UNREGISTERED) {
    fakecann::set_error_message("aclop: invalid compile flag");
    return ACL_ERROR_INVALID_PARAM;
  }
  return ACL_SUCCESS;
}

}  // namespace

extern "C" {

aclError aclopCompile(const char *opType, int numInputs, const aclTensorDesc *const inputDesc[], int numOutputs,
                      const aclTensorDesc *const outputDesc[], const aclopAttr *attr, aclopEngineType engineType,
                      aclopCompileType compileFlag, const char * /*opPath*/) {
  if (aclError e = check_modes(engineType, compileFlag)) return e;
  return fakecann::aclop::check(opType, numInputs, inputDesc, numOutputs, outputDesc, attr);
}

aclError aclopCompileAndExecute(const char *opType, int numInputs, const aclTensorDesc *const inputDesc[],
                                const aclDataBuffer *const inputs[], int numOutputs,
                                const aclTensorDesc *const outputDesc[], aclDataBuffer *const outputs[],
                                const aclopAttr *attr, aclopEngineType engineType, aclopCompileType compileFlag,
                                const char * /*opPath*/, aclrtStream stream) {
  if (aclError e = check_modes(engineType, compileFlag)) return e;
  return fakecann::aclop::execute(opType, numInputs, inputDesc, inputs, numOutputs, outputDesc, outputs, attr, stream,
                                  nullptr, __builtin_return_address(0));
}

aclError aclopCompileAndExecuteV2(const char *opType, int numInputs, aclTensorDesc *inputDesc[],
                                  aclDataBuffer *inputs[], int numOutputs, aclTensorDesc *outputDesc[],
                                  aclDataBuffer *outputs[], aclopAttr *attr, aclopEngineType engineType,
                                  aclopCompileType compileFlag, const char * /*opPath*/, aclrtStream stream) {
  if (aclError e = check_modes(engineType, compileFlag)) return e;
  return fakecann::aclop::execute(opType, numInputs, inputDesc, inputs, numOutputs, outputDesc, outputs, attr, stream,
                                  outputDesc, __builtin_return_address(0));
}

// Options steer the op compiler (precision mode, JIT, ...); the built-in CPU kernels have nothing to
// tune, so a valid option is accepted and has no effect.
aclError aclSetCompileopt(aclCompileOpt opt, const char *value) {
  if (value == nullptr || opt < ACL_PRECISION_MODE || opt > ACL_OP_DEBUG_OPTION) return ACL_ERROR_INVALID_PARAM;
  return ACL_SUCCESS;
}

}  // extern "C"
