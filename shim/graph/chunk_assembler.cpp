// ChunkAssembler (chunk_assembler.h): the chunk header read by offsets, files keyed by name, bounded memory.
#include "shim/graph/chunk_assembler.h"

#include <cstring>

#include "shim/graph/dump_names.h"

namespace msprobe::shim::graph {
namespace {

template <typename T>
T load(const unsigned char *p, size_t offset) {
  T v;
  std::memcpy(&v, p + offset, sizeof v);  // the chunk may be unaligned
  return v;
}

std::string quoted(const std::string &name) { return "dump chunk of " + one_line(name) + ": "; }

}  // namespace

ChunkResult ChunkAssembler::feed(const void *chunk, int32_t len) {
  ChunkResult r;
  if (chunk == nullptr || len < static_cast<int32_t>(kChunkPayloadOffset)) {
    r.error = "dump chunk rejected: len " + std::to_string(len) + " is shorter than its 4116-byte header";
    return r;
  }
  const auto *p = static_cast<const unsigned char *>(chunk);
  const void *nul = std::memchr(p, 0, kChunkFileNameBytes);
  if (nul == nullptr || nul == p) {
    r.error = nul ? "dump chunk rejected: empty fileName" : "dump chunk rejected: fileName not NUL-terminated";
    return r;
  }
  const std::string name(reinterpret_cast<const char *>(p), static_cast<const unsigned char *>(nul) - p);
  const auto buf_len = load<uint32_t>(p, kChunkBufLenOffset);
  const bool last = load<uint32_t>(p, kChunkIsLastOffset) != 0;
  const auto offset = load<int64_t>(p, kChunkOffsetOffset);
  if (static_cast<int64_t>(len) != static_cast<int64_t>(kChunkHeaderBytes) + buf_len) {
    return drop(name, "len " + std::to_string(len) + " != 4120 + bufLen " + std::to_string(buf_len), last);
  }
  if (dropped_.count(name) != 0) {  // the rest of a file already reported
    if (last) {
      dropped_.erase(name);
      std::erase(dropped_order_, name);
    }
    return r;
  }
  if (buf_len == 0 && !last) {
    r.error = quoted(name) + "empty chunk that is not the last one (ignored)";
    return r;
  }
  return append(name, p + kChunkPayloadOffset, buf_len, offset, last);
}

ChunkResult ChunkAssembler::append(const std::string &name, const unsigned char *payload, uint32_t n, int64_t offset,
                                   bool last) {
  auto it = open_.find(name);
  if (it == open_.end()) {
    if (open_.size() >= limits_.max_open_files) {
      return drop(name, "more than " + std::to_string(limits_.max_open_files) + " dump files open at once", last);
    }
    it = open_.emplace(name, std::vector<unsigned char>{}).first;
  }
  std::vector<unsigned char> &buf = it->second;
  if (offset != -1 && offset != static_cast<int64_t>(buf.size())) {
    return drop(name,
                "offset " + std::to_string(offset) + " is not the end of the " + std::to_string(buf.size()) +
                    " bytes received (only appending is supported)",
                last);
  }
  if (buf.size() + n > limits_.max_file_bytes) {
    return drop(name, "file larger than " + std::to_string(limits_.max_file_bytes) + " bytes", last);
  }
  if (total_ + n > limits_.max_total_bytes) {
    return drop(name,
                "dump files in progress exceed the budget of " + std::to_string(limits_.max_total_bytes) + " bytes",
                last);
  }
  buf.insert(buf.end(), payload, payload + n);
  total_ += n;
  ChunkResult r;
  if (last) {
    total_ -= buf.size();
    r.file = AssembledFile{name, std::move(buf)};
    open_.erase(it);
  }
  return r;
}

// The file's bytes so far are freed; its later chunks (if this was not its last) are skipped until its last one.
ChunkResult ChunkAssembler::drop(const std::string &name, std::string why, bool last) {
  ChunkResult r;
  r.error = quoted(name) + why + "; file dropped";
  if (auto it = open_.find(name); it != open_.end()) {
    total_ -= it->second.size();
    open_.erase(it);
  }
  if (!last) remember_dropped(name);
  return r;
}

void ChunkAssembler::remember_dropped(const std::string &name) {
  if (!dropped_.insert(name).second) return;
  dropped_order_.push_back(name);
  if (dropped_order_.size() > limits_.max_open_files) {
    dropped_.erase(dropped_order_.front());
    dropped_order_.pop_front();
  }
}

std::vector<std::string> ChunkAssembler::pending() const {
  std::vector<std::string> names;
  names.reserve(open_.size());
  for (const auto &entry : open_) names.push_back(entry.first);
  return names;
}

std::vector<std::string> ChunkAssembler::abandon_pending() {
  std::vector<std::string> names = pending();
  for (const std::string &name : names) remember_dropped(name);  // a late chunk of it is not a new file
  open_.clear();
  total_ = 0;
  return names;
}

}  // namespace msprobe::shim::graph
