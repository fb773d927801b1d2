// What the shim needs to know about ACL's enums: element types (mapped onto the collector's dtypes)
// and format names for dump.json. Values from reference/cann_abi.md §3.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "format/format.h"

namespace msprobe::shim {

// Element size of an aclDataType in bytes (0: unknown or sub-byte).
size_t acl_dtype_size(int32_t acl_dtype);
// Element size in bits (6 for FLOAT6_*, 4 for FLOAT4_*, whose elements are packed; 0: unknown).
unsigned acl_dtype_bits(int32_t acl_dtype);
inline size_t scalar_size(int32_t acl_dtype) { return acl_dtype_size(acl_dtype); }
// The collector dtype holding an aclDataType's values (the 8-, 6- and 4-bit floats included); Raw for complex, int4
// and unknown types.
format::DType acl_to_dtype(int32_t acl_dtype);
// The aclDataType's own name for types the collector stores as Raw ("complex64", "int4", ...).
std::string acl_dtype_label(int32_t acl_dtype);
// "ND", "NCHW", "FRACTAL_NZ", ... ("FORMAT_<n>" for values CANN does not name).
std::string acl_format_name(int32_t acl_format);

}  // namespace msprobe::shim
