#include "shim/base/log.h"

#include <errno.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>

namespace msprobe::shim {
namespace {

// constinit: ready before any constructor runs, so logging works from the very first interposed call.
constinit std::atomic<int> g_level{static_cast<int>(LogLevel::Warn)};
constinit std::atomic<int> g_fd{2};

constexpr char kPrefix[] = "msprobe-shim: ";
constexpr size_t kLineMax = 1024;

const char *tag(LogLevel level) {
  switch (level) {
    case LogLevel::Warn: return "warning: ";
    case LogLevel::Debug: return "debug: ";
    default: return "";
  }
}

void write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;  // nowhere to report a failing stderr
    p += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

void set_log_level(LogLevel level) noexcept { g_level.store(static_cast<int>(level), std::memory_order_relaxed); }
LogLevel log_level() noexcept { return static_cast<LogLevel>(g_level.load(std::memory_order_relaxed)); }
bool log_enabled(LogLevel level) noexcept { return static_cast<int>(level) <= g_level.load(std::memory_order_relaxed); }
void set_log_fd(int fd) noexcept { g_fd.store(fd, std::memory_order_relaxed); }

namespace {
void emit(const char *label, const char *fmt, va_list args) noexcept {
  const int saved_errno = errno;  // logging from inside a hook must not change what the host sees in errno
  char line[kLineMax + 8];
  size_t n = 0;
  const auto append = [&](const char *s) {
    const size_t len = std::strlen(s);
    const size_t take = len < kLineMax - n ? len : kLineMax - n;
    std::memcpy(line + n, s, take);
    n += take;
  };
  append(kPrefix);
  append(label);
  const size_t body = n;
  const int want = std::vsnprintf(line + n, kLineMax - n + 1, fmt, args);
  if (want > 0) n += static_cast<size_t>(want) < kLineMax - n ? static_cast<size_t>(want) : kLineMax - n;
  if (want > 0 && static_cast<size_t>(want) > kLineMax - body) {
    std::memcpy(line + kLineMax - 3, "...", 3);
    n = kLineMax;
  }
  for (size_t i = body; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(line[i]);
    if (c < 0x20 || c == 0x7f) line[i] = ' ';
  }
  line[n++] = '\n';
  write_all(g_fd.load(std::memory_order_relaxed), line, n);
  errno = saved_errno;
}
}  // namespace

void log_message(LogLevel level, const char *fmt, va_list args) noexcept {
  if (log_enabled(level)) emit(tag(level), fmt, args);
}

#define MSPROBE_SHIM_LOG_FN(name, level)     \
  void name(const char *fmt, ...) noexcept { \
    if (!log_enabled(level)) return;         \
    va_list args;                            \
    va_start(args, fmt);                     \
    log_message(level, fmt, args);           \
    va_end(args);                            \
  }
MSPROBE_SHIM_LOG_FN(log_error, LogLevel::Error)
MSPROBE_SHIM_LOG_FN(log_warn, LogLevel::Warn)
MSPROBE_SHIM_LOG_FN(log_info, LogLevel::Info)
MSPROBE_SHIM_LOG_FN(log_debug, LogLevel::Debug)
#undef MSPROBE_SHIM_LOG_FN

void log_note(const char *fmt, ...) noexcept {
  if (!log_enabled(LogLevel::Warn)) return;
  va_list args;
  va_start(args, fmt);
  emit("", fmt, args);
  va_end(args);
}

}  // namespace msprobe::shim
