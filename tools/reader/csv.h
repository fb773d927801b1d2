// CSV as the tools write and read it: msprobe's result files (compare, replay), quoted as RFC 4180 with "\n" line
// ends, and the collector's mapping.csv, plain "{new_name},{original_name}" lines that are never quoted.
#pragma once
#include <cstddef>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace msprobe::tools {

// ---- Writing --------------------------------------------------------------------------------------------------------
// One cell, quoted (with its quotes doubled) when it holds a comma, quote or line break.
std::string csv_cell(std::string_view s);
// The cells joined by commas, ended by "\n".
std::string csv_row(std::span<const std::string> cells);

// ---- Reading --------------------------------------------------------------------------------------------------------
struct CsvRecords {
  std::vector<std::vector<std::string>> rows;  // the complete records, cells unquoted
  // Bytes up to the end of the last complete record (one ending in a line break outside quotes); text after it is
  // a record a kill cut short, and is not in `rows`.
  size_t complete = 0;
};
// Quoted cells may hold commas, line breaks and doubled quotes; a "\r" before a record's "\n" is dropped.
CsvRecords parse_csv(std::string_view text);

// One non-empty line of a plain (never quoted) CSV such as mapping.csv, without its "\r".
struct PlainCsvLine {
  size_t number = 0;                     // 1-based, counting empty lines too
  std::string_view first;                // up to the first comma; the whole line when there is none
  std::optional<std::string_view> rest;  // after the first comma, further commas included
};
// A last line without "\n" counts as a line.
std::vector<PlainCsvLine> plain_csv_lines(std::string_view text);

// ---- Appending ------------------------------------------------------------------------------------------------------
// A CSV file grown by whole records: each append() is one write(2) (continued after a short write), so a process
// killed between appends leaves whole records. Errors stick, as a stream's do: after the first failure nothing more
// is written, and failed() / error() say what went wrong; callers word the message.
class CsvAppender {
 public:
  enum class Open {
    New,       // created, and must not exist yet; mode 0644 less the umask
    Existing,  // appended to
    Replace,   // created or truncated; mode 0666 less the umask, as any std::ofstream
  };
  CsvAppender(const std::filesystem::path &path, Open how);
  ~CsvAppender();
  CsvAppender(const CsvAppender &) = delete;
  CsvAppender &operator=(const CsvAppender &) = delete;

  void append(std::string_view records);
  void close();  // a failing close(2) counts as a failure too
  bool failed() const { return failed_; }
  int error() const { return error_; }  // errno of the first failure
  const std::filesystem::path &path() const { return path_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  bool failed_ = false;
  int error_ = 0;
};

}  // namespace msprobe::tools
