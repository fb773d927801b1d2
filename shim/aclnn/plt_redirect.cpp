#include "shim/aclnn/plt_redirect.h"

#include <cstring>
#include <string_view>

#include "shim/aclnn/aclnn_capture.h"
#include "shim/base/got_patch.h"
#include "shim/base/symbols.h"

namespace msprobe::shim {
namespace {

// The CANN libraries call each other (and themselves) directly; those calls are the runtime's business,
// not launches by the host.
bool is_cann_library(const char *path) {
  std::string_view p(path ? path : "");
  std::string_view base = p.substr(p.rfind('/') == std::string_view::npos ? 0 : p.rfind('/') + 1);
  for (std::string_view lib : {"libopapi.so", "libnnopbase.so", "libascendcl.so", "libruntime.so", "libhccl.so",
                               "libacl_op_compiler.so", "libcust_opapi.so", "libhcomm.so"})
    if (base.rfind(lib, 0) == 0) return true;
  return base.rfind("libopapi_", 0) == 0 || base.rfind("libaclnn_", 0) == 0;
}

}  // namespace

void redirect_plt_calls() {
  PatchOptions options;
  options.skip = is_cann_library;
  options.wants = [](const char *name) { return std::strncmp(name, "aclnn", 5) == 0; };
  options.resolve = [](const char *name) { return find_original(name); };
  patch_got(
      [](const char *name, void *current) -> void * {
        if (current == nullptr) return nullptr;
        return aclnn_capture().wrap_symbol(name, current);
      },
      options);
}

}  // namespace msprobe::shim
