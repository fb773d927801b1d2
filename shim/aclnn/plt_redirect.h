// Direct (PLT) calls into aclnn from programs and libraries linked against libopapi: their GOT entries
// for aclnn launch symbols are pointed at the capture wrappers. Run at start-up and after every dlopen;
// objects already redirected are left alone. The CANN libraries themselves are skipped, so that calls
// inside the runtime are not seen twice.
#pragma once

namespace msprobe::shim {

void redirect_plt_calls();

}  // namespace msprobe::shim
