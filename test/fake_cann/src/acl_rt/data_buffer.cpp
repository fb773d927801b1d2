// Data buffers (acl_base.h; libascendcl.so of CANN 8.x, libacl_rt.so of 9.x: runtime
// src/acl/aclrt_impl/data_buffer.cpp) and the registry of live ACL handles, buffers and tensor descriptors
// (acl_mdl/tensor_desc.cpp) alike, that refuses a double destroy.
#include <mutex>
#include <set>
#include <vector>

#include "acl/acl_base.h"
#include "fakecann/acl_internal.h"

namespace {
std::mutex g_mu;
std::set<const void *> *g_live = new std::set<const void *>;  // descs and buffers, to refuse double destroy
}  // namespace

namespace fakecann {
void acl_handle_track(const void *p) {
  std::lock_guard<std::mutex> lk(g_mu);
  g_live->insert(p);
}
bool acl_handle_untrack(const void *p) {
  std::lock_guard<std::mutex> lk(g_mu);
  return g_live->erase(p) != 0;
}
bool acl_handle_live(const void *p) {
  std::lock_guard<std::mutex> lk(g_mu);
  return g_live->count(p) != 0;
}
}  // namespace fakecann

using fakecann::acl_handle_track;
using fakecann::acl_handle_untrack;

extern "C" {

aclDataBuffer *aclCreateDataBuffer(void *data, size_t size) {
  auto *b = new aclDataBuffer{data, size};
  acl_handle_track(b);
  return b;
}

aclError aclDestroyDataBuffer(const aclDataBuffer *dataBuffer) {
  if (dataBuffer == nullptr || !acl_handle_untrack(dataBuffer)) return ACL_ERROR_INVALID_PARAM;
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

}  // extern "C"
