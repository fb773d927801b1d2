// The concrete aclTensorDesc, aclDataBuffer and aclopAttr of libascendcl (opaque in the public
// headers), shared by acl_base.cpp, acl_op.cpp and libacl_op_compiler.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "acl/acl_base.h"
#include "fakecann/export.h"

struct aclDataBuffer {
  void *data;
  size_t size;
};

struct aclTensorDesc {
  aclDataType dtype;
  aclFormat format;
  std::vector<int64_t> dims;
};

using AclAttrValue = std::variant<bool, int64_t, float, std::string, aclDataType, std::vector<int64_t>,
                                  std::vector<float>, std::vector<uint8_t>>;

struct aclopAttr {
  std::map<std::string, AclAttrValue> values;
};

namespace fakecann {
// The live ACL handles (data buffers, tensor descriptors): made, destroyed (false if not live), alive.
FAKECANN_API void acl_handle_track(const void *p);
FAKECANN_API bool acl_handle_untrack(const void *p);
FAKECANN_API bool acl_handle_live(const void *p);
}  // namespace fakecann
