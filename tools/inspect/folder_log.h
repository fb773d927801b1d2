// The commands that change a dump folder by folder (convert, repair) run through for_each_folder: each rank folder in
// dump order, and what the command says about it printed at once (a later folder may still fail), after its label.
#pragma once
#include <functional>
#include <span>
#include <string>

#include "tools/reader/dump_reader.h"

namespace msprobe::tools {

class FolderLog {
 public:
  explicit FolderLog(const RankDir &dir) : label_(dir.label()) {}
  const std::string &label() const { return label_; }
  // "{label}: " and the formatted line.
  void say(const char *format, ...) const __attribute__((format(printf, 2, 3)));
  // "{label}/" and the formatted line, which starts with a file of the folder.
  void say_in(const char *format, ...) const __attribute__((format(printf, 2, 3)));

 private:
  std::string label_;
};

void for_each_folder(std::span<const RankDir> dirs, const std::function<void(const RankDir &, const FolderLog &)> &act);

}  // namespace msprobe::tools
