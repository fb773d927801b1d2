// Whole reads and writes on a file descriptor, through EINTR and short counts: every file the project writes or
// reads goes through these (the shim's log keeps its own loop: shim/base sees nothing above it, and it must stay
// usable from a dying process).
#pragma once
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace msprobe::format {

// Calls `out(p, n)` (write(2) or pwrite(2) of the n bytes at p) until every byte of [data, data + bytes) went out,
// EINTR retried. False with errno set on an error.
template <typename Out>
inline bool all_out(const void *data, size_t bytes, Out out) noexcept {
  const char *p = static_cast<const char *>(data);
  while (bytes > 0) {
    const ssize_t n = out(p, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}
// Every byte of [data, data + bytes) to `fd`; `written`, when given, is increased by what did go out. Inline, as
// pwrite_all: every tensor file is written with it.
inline bool write_all(int fd, const void *data, size_t bytes, uint64_t *written = nullptr) noexcept {
  return all_out(data, bytes, [&](const char *p, size_t n) {
    const ssize_t r = ::write(fd, p, n);
    if (r > 0 && written != nullptr) *written += static_cast<uint64_t>(r);
    return r;
  });
}
// The same at file offset `offset` (pwrite): the file position does not move. Inline: the journals write every kernel's
// entry with it.
inline bool pwrite_all(int fd, const void *data, size_t bytes, uint64_t offset) noexcept {
  return all_out(data, bytes, [&](const char *p, size_t n) {
    const ssize_t r = ::pwrite(fd, p, n, static_cast<off_t>(offset));
    if (r > 0) offset += static_cast<uint64_t>(r);
    return r;
  });
}

// Up to `bytes` into `buf`, from the file position (offset < 0) or at `offset` (pread): the count read, short only
// at the end of the file; -1 with errno set on an error.
ssize_t read_full(int fd, void *buf, size_t bytes, int64_t offset = -1) noexcept;

// Writes `content` to a temporary file beside `path` and renames it over `path` (readers never see half a file).
// Throws std::system_error.
void write_file_atomic(const std::filesystem::path &path, std::string_view content);

// Appends the rest of `fd` to *out, stopping once *out holds `limit` bytes. False with errno set on an error.
bool read_to_end(int fd, std::string *out, size_t limit);

}  // namespace msprobe::format
