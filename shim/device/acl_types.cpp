#include "shim/device/acl_types.h"

namespace msprobe::shim {

using format::DType;

size_t acl_dtype_size(int32_t t) {
  switch (t) {
    case 0:
    case 3:
    case 8:
    case 33: return 4;  // FLOAT, INT32, UINT32, COMPLEX32
    case 1:
    case 6:
    case 7:
    case 27: return 2;  // FLOAT16, INT16, UINT16, BF16
    case 2:
    case 4:
    case 12: return 1;  // INT8, UINT8, BOOL
    case 9:
    case 10:
    case 11:
    case 16: return 8;   // INT64, UINT64, DOUBLE, COMPLEX64
    case 17: return 16;  // COMPLEX128
    case 34:
    case 35:
    case 36:
    case 37: return 1;  // HIFLOAT8, FLOAT8_*
    default: return 0;  // FLOAT6_*, FLOAT4_* (acl_dtype_bits), unknown
  }
}

unsigned acl_dtype_bits(int32_t t) {
  switch (t) {
    case 38:
    case 39: return 6;  // FLOAT6_E3M2, FLOAT6_E2M3
    case 40:
    case 41: return 4;  // FLOAT4_E2M1, FLOAT4_E1M2
    default: return (unsigned)(8 * acl_dtype_size(t));
  }
}

DType acl_to_dtype(int32_t t) {
  switch (t) {
    case 0: return DType::F32;
    case 1: return DType::F16;
    case 27: return DType::BF16;
    case 11: return DType::F64;
    case 2: return DType::I8;
    case 6: return DType::I16;
    case 3: return DType::I32;
    case 9: return DType::I64;
    case 4: return DType::U8;
    case 7: return DType::U16;
    case 8: return DType::U32;
    case 10: return DType::U64;
    case 12: return DType::Bool;
    case 34: return DType::HiF8;
    case 35: return DType::F8E5M2;
    case 36: return DType::F8E4M3FN;
    case 37: return DType::F8E8M0;
    case 38: return DType::F6E3M2;
    case 39: return DType::F6E2M3;
    case 40: return DType::F4E2M1;
    case 41: return DType::F4E1M2;
    default: return DType::Raw;
  }
}

std::string acl_dtype_label(int32_t t) {
  switch (t) {
    case 13: return "string";
    case 16: return "complex64";
    case 17: return "complex128";
    case 29: return "int4";
    case 30: return "uint1";
    case 33: return "complex32";
    default: return "acl_dtype_" + std::to_string(t);
  }
}

std::string acl_format_name(int32_t f) {
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
    default: return "FORMAT_" + std::to_string(f);
  }
}

}  // namespace msprobe::shim
