#include "tools/reader/csv.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "format/io.h"

namespace msprobe::tools {

std::string csv_cell(std::string_view s) {
  if (s.find_first_of(",\"\n\r") == std::string_view::npos) return std::string(s);
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string csv_row(std::span<const std::string> cells) {
  std::string out;
  for (size_t i = 0; i < cells.size(); ++i) {
    if (i) out += ',';
    out += csv_cell(cells[i]);
  }
  return out + "\n";
}

CsvRecords parse_csv(std::string_view text) {
  CsvRecords out;
  std::vector<std::string> row;
  std::string cell;
  bool quoted = false, cell_started = false;
  auto end_cell = [&] {
    row.push_back(std::move(cell));
    cell.clear();
    cell_started = false;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c != '"') {
        cell += c;
      } else if (i + 1 < text.size() && text[i + 1] == '"') {
        cell += '"';
        ++i;
      } else {
        quoted = false;
      }
      continue;
    }
    if (c == '"' && !cell_started) {
      quoted = cell_started = true;
    } else if (c == ',') {
      end_cell();
    } else if (c == '\n') {
      if (!cell.empty() && cell.back() == '\r') cell.pop_back();
      end_cell();
      out.rows.push_back(std::move(row));
      row.clear();
      out.complete = i + 1;
    } else {
      cell += c;
      cell_started = true;
    }
  }
  return out;
}

std::vector<PlainCsvLine> plain_csv_lines(std::string_view text) {
  std::vector<PlainCsvLine> out;
  size_t number = 0;
  for (size_t pos = 0; pos < text.size();) {
    const size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    ++number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    PlainCsvLine l;
    l.number = number;
    const size_t comma = line.find(',');
    l.first = line.substr(0, comma);
    if (comma != std::string_view::npos) l.rest = line.substr(comma + 1);
    out.push_back(l);
  }
  return out;
}

CsvAppender::CsvAppender(const std::filesystem::path &path, Open how) : path_(path) {
  int flags = O_WRONLY | O_CLOEXEC;
  mode_t mode = 0644;
  switch (how) {
    case Open::New: flags |= O_APPEND | O_CREAT | O_EXCL; break;
    case Open::Existing: flags |= O_APPEND; break;
    case Open::Replace:
      flags |= O_CREAT | O_TRUNC;
      mode = 0666;
      break;
  }
  fd_ = ::open(path.c_str(), flags, mode);
  if (fd_ < 0) {
    failed_ = true;
    error_ = errno;
  }
}

CsvAppender::~CsvAppender() {
  if (fd_ >= 0) ::close(fd_);
}

void CsvAppender::append(std::string_view records) {
  if (failed_ || format::write_all(fd_, records.data(), records.size())) return;
  failed_ = true;
  error_ = errno;
}

void CsvAppender::close() {
  if (fd_ < 0) return;
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0 && !failed_) {
    failed_ = true;
    error_ = errno;
  }
}

}  // namespace msprobe::tools
