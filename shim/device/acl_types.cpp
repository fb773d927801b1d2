#include "shim/device/acl_types.h"

namespace msprobe::shim {

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

}  // namespace msprobe::shim
