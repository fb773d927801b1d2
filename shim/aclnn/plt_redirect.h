// Direct (PLT) calls into aclnn from programs and libraries linked against libopapi: their GOT entries
// for aclnn launch symbols are pointed at the capture wrappers. Run at start-up and after every dlopen;
// objects already redirected are left alone. CANN's own objects are skipped, so that calls inside the runtime are
// not seen twice. They are recognised by their place, not their name: CANN moves functions between libraries and
// adds libraries (CANN 9 split libascendcl into libacl_rt, libascend_dump, libacl_mdl, libacl_op_executor), but
// every object of an install lies under its root.
#pragma once
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace msprobe::shim {

void redirect_plt_calls();

// The roots of the CANN install the process uses, as CANN's set_env.sh exports them: ASCEND_HOME_PATH,
// ASCEND_TOOLKIT_HOME, ASCEND_OPP_PATH and each ':'-separated entry of ASCEND_CUSTOM_OPP_PATH (custom op packages),
// each as given and, when it differs, resolved (a toolkit is usually reached through its `latest` link). Trailing
// slashes dropped; unset or empty variables give nothing.
std::vector<std::string> cann_roots(const std::function<const char *(const char *)> &getenv);

// True when the object at `path` (as the loader names it, or resolved) lies under one of `roots`: a whole-component
// prefix, so that an install at .../fake_cann does not claim .../fake_cann9.
bool under_cann_root(std::string_view path, const std::vector<std::string> &roots);

}  // namespace msprobe::shim
