// Reassembles CANN's dump chunks into files (cann_dump.md §1.6-1.7, §4.3), from the raw arguments of the callback
// registered with acldumpRegCallback. The chunk header is read at fixed offsets (no ACL header needed):
//   fileName char[4096] @0 (NUL-terminated), bufLen u32 @4096, isLastChunk u32 @4100, offset i64 @4104,
//   flag i32 @4112 (reserved: ignored), payload @4116; the callback's len = 4120 (sizeof) + bufLen.
// Chunks of one file arrive in order; files may interleave, so the assembly is keyed by the file name.
//
// Rules (each violation is a one-line error; nothing throws, nothing aborts):
//   - len < 4116, len != 4120 + bufLen, a fileName without NUL in its 4096 bytes or empty: the chunk is rejected;
//     when the name is readable, that file is dropped (its bytes are incomplete from then on).
//   - bufLen == 0 is accepted only on a last chunk (it closes the file); an empty chunk that is not the last is
//     rejected, but the file goes on: nothing of it was lost.
//   - offset -1 appends; an offset equal to the bytes received so far is the same thing; any other offset drops
//     the file (the producers only append, §1.7; msprobe ignores the offset, we do not guess).
//   - isLastChunk != 0 completes the file, which feed() returns.
//   - Bounds: at most max_open_files files in progress, max_file_bytes per file, max_total_bytes over all files
//     in progress. A chunk past a bound drops its file (and frees its bytes): memory never grows without bound.
//   - A dropped file's later chunks are ignored silently until its last chunk (the last max_open_files dropped names
//     are remembered; an older one's later chunks would start a new file, which then fails to decode).
//   - The bounds count payload bytes; a vector's capacity may exceed its size while it grows.
#pragma once
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace msprobe::shim::graph {

inline constexpr size_t kChunkFileNameBytes = 4096;
inline constexpr size_t kChunkBufLenOffset = 4096;
inline constexpr size_t kChunkIsLastOffset = 4100;
inline constexpr size_t kChunkOffsetOffset = 4104;
inline constexpr size_t kChunkFlagOffset = 4112;
inline constexpr size_t kChunkPayloadOffset = 4116;
inline constexpr size_t kChunkHeaderBytes = 4120;  // sizeof(acldumpChunk): what len counts besides bufLen

struct ChunkLimits {
  size_t max_open_files = 256;
  uint64_t max_file_bytes = uint64_t{4} << 30;
  uint64_t max_total_bytes = uint64_t{8} << 30;
};

struct AssembledFile {
  std::string name;  // the chunk's fileName, as given
  std::vector<unsigned char> bytes;
};

struct ChunkResult {
  std::optional<AssembledFile> file;  // set when this chunk completed a file
  std::string error;                  // set when the chunk was rejected or its file dropped
};

class ChunkAssembler {
 public:
  explicit ChunkAssembler(ChunkLimits limits = {}) : limits_(limits) {}

  // One callback: (chunk, len) as acldumpRegCallback's callback receives them. Not thread-safe (CANN calls the
  // callback from one thread, §1.7).
  ChunkResult feed(const void *chunk, int32_t len);

  // Files begun but not finished (a dump that never ended, reported at exit), in name order.
  std::vector<std::string> pending() const;
  // The same, and their bytes let go: each unfinished file is reported once, however often the dump is closed.
  std::vector<std::string> abandon_pending();
  uint64_t buffered_bytes() const { return total_; }

 private:
  ChunkResult append(const std::string &name, const unsigned char *payload, uint32_t n, int64_t offset, bool last);
  ChunkResult drop(const std::string &name, std::string why, bool last);
  void remember_dropped(const std::string &name);

  ChunkLimits limits_;
  std::map<std::string, std::vector<unsigned char>> open_;
  uint64_t total_ = 0;
  std::set<std::string> dropped_;
  std::deque<std::string> dropped_order_;  // oldest first: the set is bounded by max_open_files
};

}  // namespace msprobe::shim::graph
