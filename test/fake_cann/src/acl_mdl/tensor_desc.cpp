// Tensor descriptors (acl_base.h, acl_base_mdl.h; libascendcl.so of CANN 8.x, libacl_mdl.so of 9.x: ge
// api/acl/acl_model/types/tensor_desc_internal.cpp), live in the registry of ACL handles (acl_rt/data_buffer.cpp).
#include <vector>

#include "acl/acl_base.h"
#include "fakecann/acl_internal.h"
#include "fakecann/dtype.h"

extern "C" {

aclTensorDesc *aclCreateTensorDesc(aclDataType dataType, int numDims, const int64_t *dims, aclFormat format) {
  if (numDims < 0 || (numDims > 0 && dims == nullptr)) return nullptr;
  auto *d = new aclTensorDesc;
  d->dtype = dataType;
  d->format = format;
  d->dims.assign(dims, dims + numDims);
  fakecann::acl_handle_track(d);
  return d;
}

void aclDestroyTensorDesc(const aclTensorDesc *desc) {
  if (desc != nullptr && fakecann::acl_handle_untrack(desc)) delete desc;
}

aclDataType aclGetTensorDescType(const aclTensorDesc *desc) { return desc ? desc->dtype : ACL_DT_UNDEFINED; }
aclFormat aclGetTensorDescFormat(const aclTensorDesc *desc) { return desc ? desc->format : ACL_FORMAT_UNDEFINED; }

size_t aclGetTensorDescElementCount(const aclTensorDesc *desc) {
  if (desc == nullptr) return 0;
  size_t n = 1;
  for (int64_t d : desc->dims) {
    if (d < 0) return 0;
    n *= (size_t)d;
  }
  return n;
}

size_t aclGetTensorDescSize(const aclTensorDesc *desc) {
  return desc ? aclGetTensorDescElementCount(desc) * fakecann::dtype_size(desc->dtype) : 0;
}

size_t aclGetTensorDescNumDims(const aclTensorDesc *desc) {
  if (desc == nullptr) return 0;
  if (desc->dims.size() == 1 && desc->dims[0] == -2) return ACL_UNKNOWN_RANK;
  return desc->dims.size();
}

aclError aclGetTensorDescDimV2(const aclTensorDesc *desc, size_t index, int64_t *dimSize) {
  if (desc == nullptr || dimSize == nullptr || index >= desc->dims.size()) return ACL_ERROR_INVALID_PARAM;
  *dimSize = desc->dims[index];
  return ACL_SUCCESS;
}

aclError aclSetTensorFormat(aclTensorDesc *desc, aclFormat format) {
  if (desc == nullptr) return ACL_ERROR_INVALID_PARAM;
  desc->format = format;
  return ACL_SUCCESS;
}

aclError aclSetTensorShape(aclTensorDesc *desc, int numDims, const int64_t *dims) {
  if (desc == nullptr || numDims < 0 || (numDims > 0 && dims == nullptr)) return ACL_ERROR_INVALID_PARAM;
  desc->dims.assign(dims, dims + numDims);
  return ACL_SUCCESS;
}

}  // extern "C"
