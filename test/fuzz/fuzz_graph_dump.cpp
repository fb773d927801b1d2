// libFuzzer target: the graph dump's decoding half (shim/graph), and the AI CPU argument blocks' parser on the same bytes: ChunkAssembler fed with chunks cut from the input,
// then decode_dump_file / decode_stats_csv (through StatsAssembler) on what it completes, and both decoders on the
// input directly. Input: byte 0 = flags, byte 1 = chunk-size seed, the rest = the file's content (a seed is two
// bytes + a real stand-in dump file or stats CSV). Flags:
//   1 the file is a stats CSV (name ends .csv)     2 offsets given explicitly (= bytes so far) instead of -1
//   4 one chunk gets a wrong offset               8 one chunk gets a wrong len
//   16 a second file's chunks interleave          32 tight limits (1 open file, max bytes = half the file)
//   64 the content is one raw callback chunk (its own 4120-byte header) instead
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "shim/graph/aicpu_task.h"
#include "shim/graph/chunk_assembler.h"
#include "shim/graph/dump_file.h"
#include "shim/graph/stats_csv.h"

namespace {

using namespace msprobe::shim::graph;
using Buf = std::vector<unsigned char>;

const std::string kDump = "/dump/20260101120000/0/toy/1/0/Add.block_add.0.3.1760000000000000";

Buf chunk(const std::string &name, const unsigned char *p, uint32_t n, bool last, int64_t offset) {
  Buf c(kChunkHeaderBytes + n, 0);
  std::memcpy(c.data(), name.data(), name.size());
  const uint32_t l = last ? 1 : 0;
  std::memcpy(&c[kChunkBufLenOffset], &n, 4);
  std::memcpy(&c[kChunkIsLastOffset], &l, 4);
  std::memcpy(&c[kChunkOffsetOffset], &offset, 8);
  if (n) std::memcpy(&c[kChunkPayloadOffset], p, n);
  return c;
}

// What a decoded file must satisfy whatever the input: the spans inside the storage, the sizes adding up.
void check(const DumpFile &f) {
  const auto &s = *f.storage;
  uint64_t sum = 0;
  for (const auto *list : {&f.inputs, &f.outputs})
    for (const DumpTensor &t : *list) {
      if (t.bytes.size() != t.size || t.bytes.data() < s.data() ||
          t.bytes.data() + t.bytes.size() > s.data() + s.size())
        std::abort();
      uint64_t numel = 1;
      for (int64_t d : t.shape) numel *= static_cast<uint64_t>(d);
      if (t.decodable &&
          (t.dtype == msprobe::format::DType::Raw || numel * msprobe::format::element_size(t.dtype) != t.size))
        std::abort();
      sum += t.size;
    }
  if (8 + f.header_length + sum + f.trailing_bytes != s.size()) std::abort();
}

void decode(const AssembledFile &file, StatsAssembler &stats) {
  std::string error;
  if (file.name.ends_with(".csv")) {
    (void)stats.feed(file.name, std::string_view(reinterpret_cast<const char *>(file.bytes.data()), file.bytes.size()),
                     &error);
    return;
  }
  auto bytes = std::make_shared<const Buf>(file.bytes);
  if (auto f = decode_dump_file(file.name, bytes, &error)) check(*f);
}

void feed(ChunkAssembler &a, const Buf &c, int32_t len, const Buf &expect, bool clean, StatsAssembler &stats) {
  ChunkResult r = a.feed(c.data(), len);
  if (clean && !r.error.empty()) std::abort();  // nothing injected: no error allowed
  if (!r.file) return;
  if (clean && r.file->bytes != expect) std::abort();
  decode(*r.file, stats);
}

void chunked(uint8_t flags, uint8_t seed, const Buf &content) {
  const std::string name = flags & 1 ? kDump + ".csv" : kDump;
  const bool clean = (flags & (4 | 8 | 32)) == 0;
  ChunkLimits limits;
  if (flags & 32) limits = ChunkLimits{1, content.size() / 2, content.size()};
  ChunkAssembler a(limits);
  StatsAssembler stats;
  const size_t step = 1 + seed % 97;
  size_t pos = 0, k = 0;
  do {
    const size_t n = std::min(step + k % 3, content.size() - pos);
    const bool last = pos + n == content.size();
    int64_t offset = flags & 2 ? static_cast<int64_t>(pos) : -1;
    if ((flags & 4) && k == 1) offset = static_cast<int64_t>(pos) + 1;
    Buf c = chunk(name, content.data() + pos, static_cast<uint32_t>(n), last, offset);
    const int32_t len = static_cast<int32_t>(c.size()) - ((flags & 8) && k == 2 ? 4 : 0);
    feed(a, c, len, content, clean, stats);
    if (flags & 16) {  // another file, the content reversed, interleaved
      Buf rev(content.rbegin() + static_cast<std::ptrdiff_t>(content.size() - pos - n),
              content.rbegin() + static_cast<std::ptrdiff_t>(content.size() - pos));
      feed(a, chunk(name + "_2", rev.data(), static_cast<uint32_t>(rev.size()), last, -1),
           static_cast<int32_t>(kChunkHeaderBytes + rev.size()), Buf(content.rbegin(), content.rend()), false, stats);
    }
    pos += n, ++k;
  } while (pos < content.size());
  if (clean && !(flags & 16) && !a.pending().empty()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2 || size > (size_t{1} << 20)) return 0;
  const uint8_t flags = data[0], seed = data[1];
  const Buf content(data + 2, data + size);
  std::string error;
  if (flags & 64) {  // the input's own chunk header
    ChunkAssembler a;
    StatsAssembler stats;
    ChunkResult r = a.feed(content.data(), static_cast<int32_t>(content.size()));
    if (r.file) decode(*r.file, stats);
    return 0;
  }
  if (auto f = decode_dump_file(kDump, std::span<const unsigned char>(content), &error)) check(*f);
  // The same bytes as an AI CPU launch's argument block (head, io addresses, NodeDef: aicpu_task.h).
  if (auto t = parse_aicpu_args(std::span<const unsigned char>(content)))
    if (t->described && t->inputs.size() + t->outputs.size() != t->io_addrs.size()) std::abort();
  (void)decode_stats_csv(kDump + ".csv",
                         std::string_view(reinterpret_cast<const char *>(content.data()), content.size()), &error);
  if (!content.empty()) chunked(flags, seed, content);
  return 0;
}
