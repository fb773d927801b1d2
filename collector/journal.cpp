#include "collector/journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>
#include <system_error>
#include <utility>

#include "format/io.h"

namespace msprobe::collector {

JsonJournal::JsonJournal(JsonJournal &&o) noexcept
    : fd_(std::exchange(o.fd_, -1)), entries_(o.entries_), bytes_(o.bytes_), suffix_(std::move(o.suffix_)) {}

JsonJournal &JsonJournal::operator=(JsonJournal &&o) noexcept {
  if (this != &o) {
    try {
      finish();
    } catch (...) {
    }
    fd_ = std::exchange(o.fd_, -1);
    entries_ = o.entries_;
    bytes_ = o.bytes_;
    suffix_ = std::move(o.suffix_);
  }
  return *this;
}

JsonJournal::~JsonJournal() {
  try {
    finish();
  } catch (...) {  // a destructor must not throw; the file stays repairable
  }
}

void JsonJournal::write_at_end(std::string_view s) {
  // bytes_ counts the members' bytes only: the suffix after them is written again with each append.
  if (!format::pwrite_all(fd_, s.data(), s.size(), bytes_))
    throw std::system_error(errno, std::generic_category(), "journal write");
  bytes_ += s.size() - suffix_.size();
}

void JsonJournal::begin(const std::filesystem::path &path, std::string_view prefix, std::string_view suffix) {
  finish();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, format::kFileMode);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "open " + path.string());
  fd_ = fd;
  entries_ = 0;
  bytes_ = 0;
  suffix_ = suffix;
  prefix_bytes_ = prefix.size();
  std::string head(prefix);
  head += '\n';
  head += suffix;
  write_at_end(head);
}

void JsonJournal::append(std::string_view member) {
  if (fd_ < 0) throw std::logic_error("JsonJournal::append before begin");
  pending_.assign(entries_ == 0 ? "" : ",\n");  // separator, member and suffix in one write, the buffer reused
  pending_ += member;
  pending_ += suffix_;
  write_at_end(pending_);
  ++entries_;
}

void JsonJournal::append_batch(std::span<const std::string> members) {
  if (fd_ < 0) throw std::logic_error("JsonJournal::append_batch before begin");
  pending_.clear();
  for (size_t i = 0; i < members.size(); ++i) {
    if (entries_ + i != 0) pending_ += ",\n";
    pending_ += members[i];
  }
  pending_ += suffix_;
  write_at_end(pending_);
  entries_ += members.size();
}

void JsonJournal::rewrite_prefix(std::string_view prefix) {
  if (fd_ < 0 || prefix.size() != prefix_bytes_)
    throw std::logic_error("JsonJournal::rewrite_prefix of another length");
  if (!format::pwrite_all(fd_, prefix.data(), prefix.size(), 0))
    throw std::system_error(errno, std::generic_category(), "journal rewrite");
}

void JsonJournal::finish() {
  if (fd_ < 0) return;
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) throw std::system_error(errno, std::generic_category(), "journal close");
}

void DumpJsonWriter::begin(const std::filesystem::path &path, const DumpHeader &header) {
  framework_ = header.framework;
  journal_.begin(path, format::dump_json_prefix(header), format::kDumpJsonSuffix);
}

void DumpJsonWriter::append(const KernelEntry &e) {
  scratch_.clear();
  format::append_kernel_entry(scratch_, e, framework_);
  journal_.append(scratch_);
}

void ConstructJsonWriter::append(std::string_view kernel_name) {
  journal_.append(format::construct_json_member(kernel_name));
}

}  // namespace msprobe::collector
