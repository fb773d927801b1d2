// The built-in op registry (acl_op_executor/acl_op.cpp: libascendcl.so of CANN 8.x, libacl_op_executor.so of 9.x),
// shared by the aclop path and the model executor (libacl_mdl.so of 9.x): GE graph nodes and aclop ops are the same op
// types with the same rules and kernels, as in CANN.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "acl/acl_base.h"
#include "fakecann/acl_internal.h"
#include "fakecann/tensor_io.h"

namespace fakecann::aclop {

using Attrs = std::map<std::string, AclAttrValue>;

// One tensor argument as the descs describe it; absent = an unused optional input.
struct Arg {
  bool present = false;
  aclDataType dtype = ACL_DT_UNDEFINED;
  aclFormat format = ACL_FORMAT_ND;
  std::vector<int64_t> dims;
};

// Runs on the stream worker. Views are contiguous over the data buffers (absent inputs have data null).
using KernelFn = void (*)(const std::vector<TensorView> &in, const std::vector<TensorView> &out, const Attrs &attrs);

struct NodeCheck {
  aclError code = ACL_SUCCESS;  // ACL_ERROR_OP_NOT_FOUND or ACL_ERROR_INVALID_PARAM when refused
  std::string why;
  std::vector<std::vector<int64_t>> out_shapes;
  KernelFn kernel = nullptr;
};

// Checks a node's op type, argument counts, dtypes, shapes and attrs by the op's rules.
FAKECANN_API NodeCheck check_node(const std::string &opType, const std::vector<Arg> &in, const std::vector<Arg> &out,
                                  const Attrs &attrs);

}  // namespace fakecann::aclop
