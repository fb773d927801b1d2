// Diagnostics of the shim: one line per call on stderr, prefixed `msprobe-shim: `.
//
// Safe anywhere in someone else's process: before the configuration is loaded (the level starts at Warn and is a
// constant-initialized atomic, so there is no global constructor), from any thread, inside interposed calls. A call
// formats into a stack buffer and issues one write(2) to fd 2: no allocation, no stdio lock, errno preserved, and a
// message filtered out by the level costs one relaxed atomic load. Control characters in the formatted text become
// spaces, so every call prints exactly one line (long messages are cut at ~1 KiB and end with "...").
//
// Line format: `msprobe-shim: <text>` for error and info, `msprobe-shim: warning: <text>`, `msprobe-shim: debug:
// <text>`.
#pragma once
#include <cstdarg>

namespace msprobe::shim {

// Ordered by verbosity: a level shows itself and everything before it. Error is always shown.
enum class LogLevel : int { Error = 0, Warn = 1, Info = 2, Debug = 3 };

void set_log_level(LogLevel level) noexcept;
LogLevel log_level() noexcept;
bool log_enabled(LogLevel level) noexcept;

void log_message(LogLevel level, const char *fmt, va_list args) noexcept;
void log_error(const char *fmt, ...) noexcept __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) noexcept __attribute__((format(printf, 1, 2)));
void log_info(const char *fmt, ...) noexcept __attribute__((format(printf, 1, 2)));
void log_debug(const char *fmt, ...) noexcept __attribute__((format(printf, 1, 2)));
// What the user asked for and should see without asking (an outcome, a filter that matched nothing): shown from the
// default level (warn) on, as `msprobe-shim: <text>` (no "warning:": nothing went wrong).
void log_note(const char *fmt, ...) noexcept __attribute__((format(printf, 1, 2)));

// Where the lines go (default 2). Tests point it at a pipe or file; not meant for the product.
void set_log_fd(int fd) noexcept;

}  // namespace msprobe::shim
