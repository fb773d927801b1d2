// The composition root: the one place that turns the process's environment into a running capture. The first hook
// that needs the session calls capture_enabled(), which reads the configuration, checks the dump root, builds the
// Session, installs the lifecycle (exit, signals, fork) with the session's shutdown and flush, redirects direct calls
// into CANN and aclnn (shim/hooks/linked_calls.h), and publishes the session. In a program linked against CANN the
// shim's constructor reads the configuration first, to redirect the calls that reach the hooks (activation.cpp).
// Everything below the hooks takes the session as an argument.
#pragma once

#include "shim/capture/session.h"

namespace msprobe::shim {

// True when the shim is configured and capturing: the one check every hook makes first. The first call loads
// the configuration (an invalid one disables the shim: every call then passes through).
bool capture_enabled();

// The process's session; only valid when capture_enabled() returned true.
inline Session &session() { return *active_session(); }

}  // namespace msprobe::shim
