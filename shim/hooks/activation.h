// The composition root: the one place that turns the process's environment into a running capture. The first hook
// that needs the session calls capture_enabled(), which reads the configuration, checks the dump root, builds the
// Session, installs the lifecycle (exit, signals, fork) with the session's shutdown and flush, redirects direct calls
// into CANN and aclnn (shim/hooks/linked_calls.h), and publishes the session. In a program linked against CANN the
// shim's constructor reads the configuration first, to redirect the calls that reach the hooks (activation.cpp).
// Everything below the hooks takes the session as an argument.
#pragma once

#include <string>

#include "shim/capture/session.h"

namespace msprobe::shim {

// True when the shim is configured and capturing: the one check every hook makes first. The first call loads
// the configuration (an invalid one disables the shim: every call then passes through).
bool capture_enabled();

// Whether `path` can be a dump root here: its nearest existing ancestor a directory in which a folder can be made, and
// not a symbolic link into another user's directory; else false and *why. Asked at start-up, and by the launcher
// (msprobe_shim_check_setting) before it starts a program.
bool check_dump_root(const std::string &path, std::string *why);

// The process's session; only valid when capture_enabled() returned true.
inline Session &session() { return *active_session(); }

}  // namespace msprobe::shim
