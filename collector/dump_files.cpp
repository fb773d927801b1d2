#include "collector/dump_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>
#include <system_error>

#include "format/format.h"
#include "format/naming.h"

namespace msprobe::collector {
namespace {

std::mt19937_64 &thread_rng() {
  thread_local std::mt19937_64 rng([] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }());
  return rng;
}

}  // namespace

using format::is_safe_file_name;
using format::kFileMode;
using format::kMappingCsv;
using format::kMaxBasename;
using format::long_name_replacement;

CreatedFile create_dump_file(const std::filesystem::path &dir, std::string_view basename) {
  return create_dump_file(dir, basename, thread_rng());
}

CreatedFile create_dump_file(const std::filesystem::path &dir, std::string_view basename, std::mt19937_64 &rng) {
  if (!is_safe_file_name(basename))
    throw std::invalid_argument("create_dump_file: unsafe file name '" + std::string(basename.substr(0, 64)) + "'");
  CreatedFile f;
  if (basename.size() <= kMaxBasename) {
    f.file_name = basename;
    f.fd = ::open((dir / f.file_name).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, kFileMode);
    if (f.fd < 0) throw std::system_error(errno, std::generic_category(), "open " + (dir / f.file_name).string());
    return f;
  }
  // 10^32 names: a collision means an earlier file of this dump, so draw again rather than overwrite it.
  constexpr int kTries = 100;
  for (int i = 0; i < kTries; ++i) {
    std::string name = long_name_replacement(basename, rng);
    const int fd = ::open((dir / name).c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, kFileMode);
    if (fd >= 0) {
      f.fd = fd;
      f.mapping_row = name + ',' + std::string(basename);
      f.file_name = std::move(name);
      return f;
    }
    if (errno != EEXIST) throw std::system_error(errno, std::generic_category(), "open " + (dir / name).string());
  }
  throw std::system_error(EEXIST, std::generic_category(), "no free random name in " + dir.string());
}

void append_mapping_row(const std::filesystem::path &dir, std::string_view row) {
  const std::filesystem::path path = dir / kMappingCsv;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, kFileMode);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "open " + path.string());
  std::string line(row);
  line += '\n';
  ssize_t n;
  do n = ::write(fd, line.data(), line.size());
  while (n < 0 && errno == EINTR);
  const int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(line.size()))
    throw std::system_error(n < 0 ? err : EIO, std::generic_category(), "append " + path.string());
}

}  // namespace msprobe::collector
