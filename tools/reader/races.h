// races.json (MSPROBE_RACECHECK=1, docs/races.md): the races between streams the shim found in a rank folder, for
// summary and the report. A file cut by a killed run is read with the journal repair (the races before the cut).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tools/reader/dump_reader.h"

namespace msprobe::tools {

// One kernel of a race, as races.json names it.
struct RaceSide {
  std::string kernel, access;
  std::optional<uint64_t> stream_id;  // nullopt: the host
  std::vector<std::string> tensors, stack;
};

struct RaceEntry {
  std::string kind;  // "read-write", "write-write"
  uint64_t begin = 0, end = 0, count = 0;
  RaceSide first, second;
};

// The races of `dir`; nullopt when it has no races.json (the check was off). Throws std::runtime_error for a file
// that is not races.json's shape.
std::optional<std::vector<RaceEntry>> read_races(const RankDir &dir);

}  // namespace msprobe::tools
