// dump.json and construct.json as journals that are valid JSON at every moment (the writer's files, not the format's
// vocabulary): begin() writes the object's opening and closing, and each append() writes its member over the closing
// and the closing again after it, in one pwrite(). So a step's files can be read while the run goes on (the tools read
// a live run's finished steps, and its current one), and a crash loses at most the entry being written (a torn write:
// format::repair_journal_text() restores a valid file).
#pragma once
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

#include "format/dump_json.h"

namespace msprobe::collector {

using format::DumpHeader;
using format::Framework;
using format::KernelEntry;

// A JSON object written as a stream of members. On disk, always:
//     <prefix, one line ending in '{'>\n<member 1>,\n<member 2>, ... ,\n<member N><suffix>
// with the suffix ("\n" + the closing braces + "\n") after the last member. Each append is one pwrite() at the
// suffix's place (the file is not buffered in user space). Not thread-safe. The destructor finishes an open journal.
class JsonJournal {
 public:
  JsonJournal() = default;
  JsonJournal(const JsonJournal &) = delete;
  JsonJournal &operator=(const JsonJournal &) = delete;
  JsonJournal(JsonJournal &&other) noexcept;
  JsonJournal &operator=(JsonJournal &&other) noexcept;
  ~JsonJournal();

  // Creates or truncates `path` (mode kFileMode) and writes `prefix` + "\n" + `suffix`: an empty object. `prefix` is
  // one line that opens the object the members go into; `suffix` closes it. Throws std::system_error.
  void begin(const std::filesystem::path &path, std::string_view prefix, std::string_view suffix);
  // One member (`"key": value`, on one line). Throws std::system_error.
  void append(std::string_view member);
  // Several members in one write().
  void append_batch(std::span<const std::string> members);
  // Closes the file (valid already); does nothing when not open.
  void finish();
  // Writes `prefix` over the prefix begin() wrote; it must be as long (one pwrite: the file stays valid JSON).
  void rewrite_prefix(std::string_view prefix);

  bool is_open() const { return fd_ >= 0; }
  uint64_t entries() const { return entries_; }
  uint64_t bytes_written() const { return bytes_; }
  const std::string &suffix() const { return suffix_; }

 private:
  // `s` at the suffix's place: the end of the last member.
  void write_at_end(std::string_view s);
  int fd_ = -1;
  uint64_t entries_ = 0, bytes_ = 0;
  std::string suffix_, pending_;
  size_t prefix_bytes_ = 0;
};

// dump.json: begin() writes the skeleton, append() one kernel entry, finish() closes it.
class DumpJsonWriter {
 public:
  void begin(const std::filesystem::path &path, const DumpHeader &header);
  void append(const KernelEntry &e);
  void finish() { journal_.finish(); }
  // The header again, as long as the one written (DumpHeader::dump_data_dir_pad keeps room for a change).
  void rewrite_header(const DumpHeader &header) { journal_.rewrite_prefix(format::dump_json_prefix(header)); }
  JsonJournal &journal() { return journal_; }

 private:
  JsonJournal journal_;
  Framework framework_ = Framework::MindSpore;
  std::string scratch_;
};

// construct.json as a journal: {kernel name: null, ...} (flat: kernels have no parent).
class ConstructJsonWriter {
 public:
  void begin(const std::filesystem::path &path) {
    journal_.begin(path, format::kConstructJsonPrefix, format::kConstructJsonSuffix);
  }
  void append(std::string_view kernel_name);
  void finish() { journal_.finish(); }
  JsonJournal &journal() { return journal_; }

 private:
  JsonJournal journal_;
  std::string scratch_;
};

}  // namespace msprobe::collector
