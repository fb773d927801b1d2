// Direct calls into CANN: how a program or library linked against the CANN libraries reaches the shim's hooks.
//
// The shim exports no CANN function (shim/exports.map): the address a linked object takes of one (`&aclrtMalloc`, a
// GLOB_DAT entry the dynamic linker fills) must stay CANN's, because hosts find their CANN install by asking dladdr
// where it lives (MindSpore's GetAscendPath wants ".../latest/lib64/libascendcl.so", reference/mindspore_runtime.md
// §1.1). Calls are redirected instead, in the calling object's GOT:
//   - JUMP_SLOT entries (the PLT's) of the hooks whose family is HookReach::Linked, in every loaded object except the
//     shim, ld.so and the vDSO: the host's own calls and the CANN libraries' calls to each other (libascendcl's
//     rtMalloc, libnnopbase's rtKernelLaunchWithHandleV2), which the exported hooks used to catch too. An entry bound
//     to a definition ahead of the shim (the main program's own, another interposer preloaded before the shim) is
//     left alone, as symbol lookup would have left it; such an interposer forwarding with dlsym(RTLD_NEXT) is
//     answered with the hook (shim/hooks/dl.cpp).
//   - aclnn launch symbols (shim/aclnn/plt_redirect.h), as before.
// GLOB_DAT entries of hooked names are never written, so calls made through them are not seen: code compiled with
// -fno-plt, and on x86-64 an object that both takes a function's address and calls it (ld then routes the call
// through the GLOB_DAT entry, .plt.got). Such objects are named once each in an info message.
#pragma once

namespace msprobe::shim {

// Redirects the direct calls of every object loaded since the last call (objects already handled are left alone).
// Run when capture starts and after every dlopen; thread-safe. Never call it with capture off (MSPROBE_ENABLE=0 and
// a bad configuration patch nothing).
void redirect_linked_calls();
// The hooked CANN functions' part of it only: at load, once the configuration says capture, before the session
// exists (the aclnn wrappers are made when capture starts, with the session's filters at hand).
void redirect_calls_to_hooks();

// True when some loaded object calls or references a hooked CANN function or an aclnn function through its GOT:
// the process was started linked against CANN, and its calls must be redirected at load (shim/hooks/activation.cpp).
bool process_links_cann();

}  // namespace msprobe::shim
