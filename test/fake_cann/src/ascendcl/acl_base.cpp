// libascendcl.so: tensor descriptors and data buffers (acl_base.h).
#include <mutex>
#include <set>
#include <vector>

#include "acl/acl_base.h"
#include "fakecann/acl_internal.h"
#include "fakecann/dtype.h"

namespace {
std::mutex g_mu;
std::set<const void *> *g_live = new std::set<const void *>;  // descs and buffers, to refuse double destroy

void track(const void *p) {
  std::lock_guard<std::mutex> lk(g_mu);
  g_live->insert(p);
}
bool untrack(const void *p) {
  std::lock_guard<std::mutex> lk(g_mu);
  return g_live->erase(p) != 0;
}
}  // namespace

namespace fakecann {
bool acl_handle_live(const void *p) {
  std::lock_guard<std::mutex> lk(g_mu);
  return g_live->count(p) != 0;
}
}  // namespace fakecann

extern "C" {

aclDataBuffer *aclCreateDataBuffer(void *data, size_t size) {
  auto *b = new aclDataBuffer{data, size};
  track(b);
  return b;
}

aclError aclDestroyDataBuffer(const aclDataBuffer *dataBuffer) {
  if (dataBuffer == nullptr || !untrack(dataBuffer)) return ACL_ERROR_INVALID_PARAM;
  delete dataBuffer;
  return ACL_SUCCESS;
}

aclError aclUpdateDataBuffer(aclDataBuffer *dataBuffer, void *data, size_t size) {
  if (dataBuffer == nullptr || !fakecann::acl_handle_live(dataBuffer)) return ACL_ERROR_INVALID_PARAM;
  dataBuffer->data = data;
  dataBuffer->size = size;
  return ACL_SUCCESS;
}

void *aclGetDataBufferAddr(const aclDataBuffer *dataBuffer) { return dataBuffer ? dataBuffer->data : nullptr; }
uint32_t aclGetDataBufferSize(const aclDataBuffer *dataBuffer) {
  return dataBuffer ? (uint32_t)dataBuffer->size : 0;
}
size_t aclGetDataBufferSizeV2(const aclDataBuffer *dataBuffer) { return dataBuffer ? dataBuffer->size : 0; }
// data_buffer.cpp aclDataTypeSizeImpl: a byte for the sub-byte INT4 and UINT1 and the 8-bit floats, nothing for
// STRING and UNDEFINED, 8 for every type it does not list (FLOAT6, FLOAT4): not the stand-in's element sizes.
size_t aclDataTypeSize(aclDataType dataType) {
  switch (dataType) {
    case ACL_STRING: case ACL_DT_UNDEFINED: return 0;
    case ACL_UINT1: case ACL_INT4: case ACL_BOOL: case ACL_INT8: case ACL_UINT8: case ACL_HIFLOAT8:
    case ACL_FLOAT8_E5M2: case ACL_FLOAT8_E4M3FN: case ACL_FLOAT8_E8M0: return 1;
    case ACL_FLOAT16: case ACL_INT16: case ACL_UINT16: case ACL_BF16: return 2;
    case ACL_FLOAT: case ACL_INT32: case ACL_UINT32: case ACL_COMPLEX32: return 4;
    case ACL_COMPLEX128: return 16;
    default: return 8;
  }
}

aclTensorDesc *aclCreateTensorDesc(aclDataType dataType, int numDims, const int64_t *dims, aclFormat format) {
  if (numDims < 0 || (numDims > 0 && dims == nullptr)) return nullptr;
  auto *d = new aclTensorDesc;
  d->dtype = dataType;
  d->format = format;
  d->dims.assign(dims, dims + numDims);
  track(d);
  return d;
}

void aclDestroyTensorDesc(const aclTensorDesc *desc) {
  if (desc != nullptr && untrack(desc)) delete desc;
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
