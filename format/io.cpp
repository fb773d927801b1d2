#include "format/io.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <system_error>

#include "format/format.h"

namespace msprobe::format {

ssize_t read_full(int fd, void *buf, size_t bytes, int64_t offset) noexcept {
  char *p = static_cast<char *>(buf);
  size_t got = 0;
  while (got < bytes) {
    const ssize_t n = offset < 0 ? ::read(fd, p + got, bytes - got)
                                 : ::pread(fd, p + got, bytes - got, static_cast<off_t>(offset + (int64_t)got));
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  return static_cast<ssize_t>(got);
}

bool read_to_end(int fd, std::string *out, size_t limit) {
  while (out->size() < limit) {
    const size_t at = out->size();
    const size_t want = std::min(limit - at, std::max<size_t>(4096, at));
    out->resize(at + want);
    const ssize_t n = read_full(fd, out->data() + at, want);
    out->resize(at + (n > 0 ? static_cast<size_t>(n) : 0));
    if (n < 0) return false;
    if (static_cast<size_t>(n) < want) break;
  }
  return true;
}

void write_file_atomic(const std::filesystem::path &path, std::string_view content) {
  static std::atomic<uint64_t> serial{0};  // distinct temporaries for concurrent writers
  std::filesystem::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(serial++);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, kFileMode);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "open " + tmp.string());
  if (!write_all(fd, content.data(), content.size())) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    throw std::system_error(err, std::generic_category(), "write " + tmp.string());
  }
  if (::close(fd) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw std::system_error(err, std::generic_category(), "replace " + path.string());
  }
}

}  // namespace msprobe::format
