// Decodes the statistics CSV of a stats-mode dump (cann_dump.md §3.6): `{base}.csv`, one row per tensor, header
//   Input/Output,Index,Data Size,Data Type,Format,Shape, then either the "compatible" columns
//   Max Value,Min Value,Avg Value,Count,Nan Count,Negative Inf Count,Positive Inf Count
// or Count followed by the selected ones of Max Value,Min Value,Avg Value,Nan Count,Negative Inf Count,
// Positive Inf Count,l2norm. Through the callback the text ends with a NUL (allowed). An op with more than 10
// tensors comes as several pieces under the same name, only the first with the header: StatsAssembler keeps each
// file's header for its later pieces (or pass `header` yourself).
// Cells: I/O "Input"/"Output"; Data Type "DT_FLOAT" (-> DType, Raw for others); Format "ND"; Shape "2x3" or "-";
// "NA" (the device's statistics failed) -> the value is absent. A malformed line fails the piece (line number said).
#pragma once
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "format/format.h"
#include "shim/graph/dump_names.h"

namespace msprobe::shim::graph {

struct StatsRow {
  format::IoKind io = format::IoKind::Input;
  uint32_t index = 0;
  uint64_t data_size = 0;  // bytes
  std::string dtype_name;  // "DT_FLOAT"
  format::DType dtype = format::DType::Raw;
  std::string format_name;     // "ND"
  std::vector<int64_t> shape;  // empty for "-"
  std::optional<uint64_t> count;
  std::optional<double> max, min, avg, l2norm;
  std::optional<int64_t> nan, neg_inf, pos_inf;
};

struct StatsFile {
  std::string path;
  DumpName name;  // from the base name without ".csv"
  DumpPlace place;
  std::vector<std::string> columns;  // the header in force (this piece's or the one passed in)
  bool had_header = false;           // this piece began with the header line
  std::vector<StatsRow> rows;
};

// `header`: the columns for a piece without a header line (a later piece of the same file); ignored when the text
// has its own header.
std::optional<StatsFile> decode_stats_csv(std::string_view path, std::string_view text, std::string *error,
                                          const std::vector<std::string> *header = nullptr);

// Remembers the header of the last `capacity` CSV files, so that their later pieces decode.
class StatsAssembler {
 public:
  explicit StatsAssembler(size_t capacity = 256) : capacity_(capacity) {}
  std::optional<StatsFile> feed(std::string_view path, std::string_view text, std::string *error);

 private:
  size_t capacity_;
  std::map<std::string, std::vector<std::string>, std::less<>> headers_;
  std::deque<std::string> order_;  // oldest first
};

}  // namespace msprobe::shim::graph
