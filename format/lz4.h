// LZ4 frame format (the `lz4` command line tool's format, lz4frame.h) for MSPROBE_COMPRESS=lz4: a sink that
// compresses what is written through it, and a streaming reader for the tools and tests. liblz4 is linked
// statically (Debian's liblz4.a is position independent) and its symbols stay hidden in the shim: the host never
// sees them and the shim needs no liblz4.so.1 of the host's.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include "format/npy.h"

namespace msprobe::format {

class Lz4Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Compresses everything written through it into one LZ4 frame written to `out` (frame with a content checksum,
// and the content size when it is known up front, so that `lz4 -d` and the tools can check the file). Output goes
// to `out` in large pieces (one per 4 MiB of input). finish() ends the frame; without it the frame is incomplete.
class Lz4FrameSink final : public ByteSink {
 public:
  // content_size: the bytes that will be written (0: unknown). Throws Lz4Error.
  Lz4FrameSink(ByteSink &out, uint64_t content_size);
  ~Lz4FrameSink() override;
  Lz4FrameSink(const Lz4FrameSink &) = delete;
  Lz4FrameSink &operator=(const Lz4FrameSink &) = delete;
  void write(const void *data, size_t bytes) override;
  void finish();
  uint64_t bytes_in() const { return in_; }
  uint64_t bytes_out() const { return out_bytes_; }

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
  ByteSink &out_;
  uint64_t in_ = 0, out_bytes_ = 0;
};

// Decompresses the LZ4 frame(s) of a whole file, calling `fn` with consecutive pieces of the content. Throws
// Lz4Error naming the problem (not an lz4 frame, truncated, checksum mismatch, I/O error).
void lz4_decompress_file(const std::filesystem::path &path, const std::function<void(const void *, size_t)> &fn);
// The same over bytes in memory.
std::string lz4_decompress(std::string_view frame);
// One LZ4 frame of `data` (tests and tools).
std::string lz4_compress(std::string_view data);

}  // namespace msprobe::format
