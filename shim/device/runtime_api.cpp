#include "shim/device/runtime_api.h"

namespace msprobe::shim::runtime {

// Constant-initialized (a name and a null pointer): usable before any constructor has run.
#define MSPROBE_DEFINE_RUNTIME_FUNCTION(name, ...) constinit Function<__VA_ARGS__> name{{#name}};
MSPROBE_RUNTIME_API(MSPROBE_DEFINE_RUNTIME_FUNCTION)
#undef MSPROBE_DEFINE_RUNTIME_FUNCTION

}  // namespace msprobe::shim::runtime
