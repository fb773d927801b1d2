// The writer side of the race check (docs/races.md): the device bytes each checked launch read or wrote, by address
// range, and the races a new launch makes with them. Two accesses race when their bytes overlap, neither is ordered
// before the other (races/clocks.h) and at least one may write (a write, or an access of unknown kind); two accesses of
// one actor are always ordered (stream order, the host's program order).
//
// What is kept: for each range, the accesses a later one may still race with. An access ordered before a new one that
// writes (or may write) the same bytes is dropped, and so is a read ordered before a new read: a later access that
// races with the dropped one races with the new one too, which is then reported instead. Launches are expected roughly
// in launch order (the collector's submission order); out of order, a race may be missed, never invented: every report
// is checked against both stamps. Not thread-safe: the collector calls it in submission order, one at a time.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "record/kernel_record.h"

namespace msprobe::races {

// What made an access, as the report names it.
struct Origin {
  std::string name;  // the kernel's name as in dump.json
  uint64_t step = 0;
  std::optional<uint32_t> rank;
  std::optional<uint64_t> stream_id;  // dump.json's launch.stream_id; nullopt: the host
  uint64_t stack_id = 0;
};

// One checked access: an argument's bytes, merged with every other argument of the launch over the same bytes (an
// in-place tensor is one read-write access named input.0 and output.0).
struct Access {
  uint64_t begin = 0, end = 0;
  record::AccessKind kind = record::AccessKind::Read;
  std::vector<std::string> tensors;  // "input.0", "output.1.2", "src", "dst"
};

// One launch as the detector keeps it while an access of it may still race.
struct Launch {
  record::LaunchStamp stamp;
  Origin origin;
  std::vector<Access> accesses;
};

// A launch's accesses from what its record carries: merged by range, labelled as dump.json names the arguments.
std::vector<Access> accesses_of(const std::vector<record::DeviceAccess> &raw);

// Two accesses that race: `earlier` (kept) and `later` (the launch being checked), and the bytes they share (from the
// first to the last byte both touch).
struct Race {
  std::shared_ptr<const Launch> earlier, later;
  uint32_t earlier_access = 0, later_access = 0;
  uint64_t begin = 0, end = 0;
};

// "write-write", "read-write", or "unknown" (an access of unknown kind with one that writes or is unknown too).
const char *race_kind(record::AccessKind a, record::AccessKind b);
bool may_write(record::AccessKind k);

class RaceDetector {
 public:
  // The races `launch` makes with the accesses kept, in the order found (one per pair of accesses); its accesses are
  // kept from now on.
  std::vector<Race> check(const std::shared_ptr<const Launch> &launch);

  // Ranges kept and accesses over them (bounded by the memory the host touches: tests and the benchmark look).
  size_t ranges() const { return segments_.size(); }
  size_t entries() const;

 private:
  struct Entry {
    std::shared_ptr<const Launch> launch;
    uint32_t access = 0;
    bool operator==(const Entry &o) const { return launch == o.launch && access == o.access; }
  };
  struct Segment {
    uint64_t end = 0;
    std::vector<Entry> entries;
  };
  using Map = std::map<uint64_t, Segment>;  // by first byte; segments never overlap

  void split_at(uint64_t at);
  void cover(uint64_t begin, uint64_t end);  // every byte of [begin, end) in a segment (empty where none was)
  void coalesce(uint64_t begin, uint64_t end);
  void look(const Segment &seg, uint64_t begin, const std::shared_ptr<const Launch> &launch, uint32_t index,
            std::vector<Race> &found) const;
  static void keep(Segment &seg, const std::shared_ptr<const Launch> &launch, uint32_t index);
  Map segments_;
};

}  // namespace msprobe::races
