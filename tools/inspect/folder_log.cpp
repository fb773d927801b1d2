#include "tools/inspect/folder_log.h"

#include <cstdarg>
#include <cstdio>

namespace msprobe::tools {

namespace {
void print_line(const std::string &label, const char *separator, const char *format, va_list args) {
  std::printf("%s%s", label.c_str(), separator);
  std::vprintf(format, args);
  std::printf("\n");
}
}  // namespace

void FolderLog::say(const char *format, ...) const {
  va_list args;
  va_start(args, format);
  print_line(label_, ": ", format, args);
  va_end(args);
}

void FolderLog::say_in(const char *format, ...) const {
  va_list args;
  va_start(args, format);
  print_line(label_, "/", format, args);
  va_end(args);
}

void for_each_folder(std::span<const RankDir> dirs,
                     const std::function<void(const RankDir &, const FolderLog &)> &act) {
  for (const RankDir &d : dirs) act(d, FolderLog(d));
}

}  // namespace msprobe::tools
