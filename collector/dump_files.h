// The files of a dump folder, made by the writer: a tensor file under its name, or under a random one recorded in
// mapping.csv when its name is too long (format/naming.h has the rule), and mapping.csv's rows.
#pragma once
#include <filesystem>
#include <random>
#include <string>
#include <string_view>

namespace msprobe::collector {

// A file created for writing in `dir`. For a basename of at most 255 characters the file is `basename` (created
// or truncated; a symlink in its place is refused, never followed: every file the collector creates is opened
// with O_NOFOLLOW). A longer one gets a fresh random name, created with O_EXCL so it never replaces an existing file
// (retried until free), and mapping_row = "{new_name},{basename}" for the caller to append to mapping.csv.
struct CreatedFile {
  int fd = -1;              // owned by the caller (close it)
  std::string file_name;    // the name on disk, for data_name
  std::string mapping_row;  // empty unless the name was replaced
  bool renamed() const { return !mapping_row.empty(); }
};
// Throws std::invalid_argument for an unsafe basename and std::system_error when the file cannot be created.
CreatedFile create_dump_file(const std::filesystem::path &dir, std::string_view basename);
CreatedFile create_dump_file(const std::filesystem::path &dir, std::string_view basename, std::mt19937_64 &rng);

// Appends "{row}\n" to dir/mapping.csv (no header, one write() with O_APPEND, so concurrent appenders never
// interleave). Throws std::system_error.
void append_mapping_row(const std::filesystem::path &dir, std::string_view row);

}  // namespace msprobe::collector
