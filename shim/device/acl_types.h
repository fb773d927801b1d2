// What the shim needs to know about ACL's enums: element types (mapped onto the collector's dtypes)
// and format names for dump.json. Values from reference/cann_abi.md §3. Inline: every captured tensor asks.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "format/format.h"

namespace msprobe::shim {

// Per aclDataType value (0..41): its element size in bits (0: unknown) and the collector dtype holding its values
// (the 8-, 6- and 4-bit floats included; Raw for complex, int4 and unknown types).
struct AclDTypeFacts {
  unsigned bits = 0;
  format::DType dtype = format::DType::Raw;
};
inline constexpr std::array<AclDTypeFacts, 42> kAclDTypes = [] {
  using format::DType;
  std::array<AclDTypeFacts, 42> t{};
  t[0] = {32, DType::F32};
  t[1] = {16, DType::F16};
  t[2] = {8, DType::I8};
  t[3] = {32, DType::I32};
  t[4] = {8, DType::U8};
  t[6] = {16, DType::I16};
  t[7] = {16, DType::U16};
  t[8] = {32, DType::U32};
  t[9] = {64, DType::I64};
  t[10] = {64, DType::U64};
  t[11] = {64, DType::F64};
  t[12] = {8, DType::Bool};
  t[16] = {64, DType::Raw};   // COMPLEX64
  t[17] = {128, DType::Raw};  // COMPLEX128
  t[27] = {16, DType::BF16};
  t[33] = {32, DType::Raw};  // COMPLEX32
  t[34] = {8, DType::HiF8};
  t[35] = {8, DType::F8E5M2};
  t[36] = {8, DType::F8E4M3FN};
  t[37] = {8, DType::F8E8M0};
  t[38] = {6, DType::F6E3M2};
  t[39] = {6, DType::F6E2M3};
  t[40] = {4, DType::F4E2M1};
  t[41] = {4, DType::F4E1M2};
  return t;
}();
constexpr AclDTypeFacts acl_dtype_facts(int32_t acl_dtype) {
  return acl_dtype >= 0 && acl_dtype < (int32_t)kAclDTypes.size() ? kAclDTypes[(size_t)acl_dtype] : AclDTypeFacts{};
}

// Element size in bits (6 for FLOAT6_*, 4 for FLOAT4_*, whose elements are packed; 0: unknown).
constexpr unsigned acl_dtype_bits(int32_t acl_dtype) { return acl_dtype_facts(acl_dtype).bits; }
// Element size of an aclDataType in bytes (0: unknown or sub-byte).
constexpr size_t acl_dtype_size(int32_t acl_dtype) {
  const unsigned bits = acl_dtype_bits(acl_dtype);
  return bits % 8 == 0 ? bits / 8 : 0;
}
constexpr size_t scalar_size(int32_t acl_dtype) { return acl_dtype_size(acl_dtype); }
// The collector dtype holding an aclDataType's values; Raw for complex, int4 and unknown types.
constexpr format::DType acl_to_dtype(int32_t acl_dtype) { return acl_dtype_facts(acl_dtype).dtype; }
// The aclDataType's own name for types the collector stores as Raw ("complex64", "int4", ...).
std::string acl_dtype_label(int32_t acl_dtype);

// CANN's name of an aclFormat ("ND", "NCHW", "FRACTAL_NZ", ...); empty for values CANN does not name.
constexpr std::string_view acl_format_known_name(int32_t f) {
  switch (f) {
    case -1: return "UNDEFINED";
    case 0: return "NCHW";
    case 1: return "NHWC";
    case 2: return "ND";
    case 3: return "NC1HWC0";
    case 4: return "FRACTAL_Z";
    case 12: return "NC1HWC0_C04";
    case 16: return "HWCN";
    case 27: return "NDHWC";
    case 29: return "FRACTAL_NZ";
    case 30: return "NCDHW";
    case 32: return "NDC1HWC0";
    case 33: return "FRACTAL_Z_3D";
    case 35: return "NC";
    case 47: return "NCL";
    default: return {};
  }
}
// "ND", "NCHW", "FRACTAL_NZ", ... ("FORMAT_<n>" for values CANN does not name).
inline std::string acl_format_name(int32_t acl_format) {
  const std::string_view known = acl_format_known_name(acl_format);
  return known.empty() ? "FORMAT_" + std::to_string(acl_format) : std::string(known);
}

}  // namespace msprobe::shim
