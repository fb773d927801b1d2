// The key of an executor torch_npu's cache keeps (shim/hooks/pta_cache.cpp reports them, the aclnn capture keeps
// calls under them): its own header, so that what is kept (op_call.h) and the capture's API (aclnn_capture.h) both
// see it without seeing each other.
#pragma once
#include <cstddef>
#include <cstdint>

namespace msprobe::shim {

// A key of torch_npu's executor cache: the 64-bit hash of SetPTAHashKey / PTAGetExecCache, or the byte
// string of SetPTACacheHashKey / PTAFindExecCache, kept as a 128-bit digest.
struct ExecCacheKey {
  enum Kind : uint8_t { None, Hash, Bytes };
  Kind kind = None;
  uint64_t a = 0, b = 0;
  static ExecCacheKey of_hash(uint64_t hash);                 // None for 0, which is never a key
  static ExecCacheKey of_bytes(const void *buf, size_t len);  // None for an empty key
  bool operator==(const ExecCacheKey &) const = default;
};

}  // namespace msprobe::shim
