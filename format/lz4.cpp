#include "format/lz4.h"

#include <fcntl.h>
#include <lz4frame.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "format/io.h"

namespace msprobe::format {
namespace {

// Input fed to LZ4F_compressUpdate at a time: one 4 MiB block, so each call emits one large piece.
constexpr size_t kInChunk = size_t{4} << 20;

[[noreturn]] void fail(const std::string &what, size_t code) {
  throw Lz4Error("lz4: " + what + ": " + LZ4F_getErrorName(code));
}

// Small files get small blocks: the context's buffers are sized by the block size, and most tensors are small.
LZ4F_blockSizeID_t block_size_for(uint64_t content_size) {
  if (content_size == 0) return LZ4F_max4MB;  // unknown
  if (content_size <= (64u << 10)) return LZ4F_max64KB;
  if (content_size <= (256u << 10)) return LZ4F_max256KB;
  if (content_size <= (1u << 20)) return LZ4F_max1MB;
  return LZ4F_max4MB;
}

LZ4F_preferences_t preferences(uint64_t content_size) {
  LZ4F_preferences_t p;
  std::memset(&p, 0, sizeof p);
  p.frameInfo.blockSizeID = block_size_for(content_size);
  p.frameInfo.blockMode = LZ4F_blockIndependent;
  p.frameInfo.contentChecksumFlag = LZ4F_contentChecksumEnabled;
  p.frameInfo.contentSize = content_size;
  p.compressionLevel = 0;  // the fast default: the writer must keep up with the device
  return p;
}

}  // namespace

struct Lz4FrameSink::Ctx {
  LZ4F_cctx *cctx = nullptr;
  LZ4F_preferences_t prefs;
  size_t in_chunk = kInChunk;
  std::unique_ptr<char[]> buf;  // not zero-filled: it is only written into
  size_t cap = 0;
  bool finished = false;
  ~Ctx() {
    if (cctx) LZ4F_freeCompressionContext(cctx);
  }
};

Lz4FrameSink::Lz4FrameSink(ByteSink &out, uint64_t content_size) : ctx_(std::make_unique<Ctx>()), out_(out) {
  ctx_->prefs = preferences(content_size);
  if (size_t r = LZ4F_createCompressionContext(&ctx_->cctx, LZ4F_VERSION); LZ4F_isError(r))
    fail("cannot create a compression context", r);
  if (content_size != 0 && content_size < kInChunk) ctx_->in_chunk = static_cast<size_t>(content_size);
  ctx_->cap = LZ4F_compressBound(ctx_->in_chunk, &ctx_->prefs) + LZ4F_HEADER_SIZE_MAX;
  ctx_->buf.reset(new char[ctx_->cap]);
  const size_t n = LZ4F_compressBegin(ctx_->cctx, ctx_->buf.get(), ctx_->cap, &ctx_->prefs);
  if (LZ4F_isError(n)) fail("cannot begin a frame", n);
  out_.write(ctx_->buf.get(), n);
  out_bytes_ += n;
}

Lz4FrameSink::~Lz4FrameSink() = default;

void Lz4FrameSink::write(const void *data, size_t bytes) {
  const auto *p = static_cast<const char *>(data);
  while (bytes > 0) {
    const size_t n = bytes < ctx_->in_chunk ? bytes : ctx_->in_chunk;
    const size_t r = LZ4F_compressUpdate(ctx_->cctx, ctx_->buf.get(), ctx_->cap, p, n, nullptr);
    if (LZ4F_isError(r)) fail("compression failed", r);
    if (r > 0) out_.write(ctx_->buf.get(), r);
    out_bytes_ += r;
    in_ += n;
    p += n;
    bytes -= n;
  }
}

void Lz4FrameSink::finish() {
  if (ctx_->finished) return;
  const size_t r = LZ4F_compressEnd(ctx_->cctx, ctx_->buf.get(), ctx_->cap, nullptr);
  if (LZ4F_isError(r)) fail("cannot end the frame", r);
  out_.write(ctx_->buf.get(), r);
  out_bytes_ += r;
  ctx_->finished = true;
}

namespace {

// Feeds `next(buf, cap)` (returns bytes read, 0 at the end) through a decompression context.
void decompress_stream(const std::function<size_t(char *, size_t)> &next,
                       const std::function<void(const void *, size_t)> &fn) {
  LZ4F_dctx *dctx = nullptr;
  if (size_t r = LZ4F_createDecompressionContext(&dctx, LZ4F_VERSION); LZ4F_isError(r))
    fail("cannot create a decompression context", r);
  struct Free {
    LZ4F_dctx *d;
    ~Free() { LZ4F_freeDecompressionContext(d); }
  } guard{dctx};
  constexpr size_t kIn = size_t{1} << 20, kOut = size_t{4} << 20;
  std::unique_ptr<char[]> in(new char[kIn]), out(new char[kOut]);  // not zero-filled: many files are small
  size_t hint = 1;                                                 // 0 once a frame is complete
  bool any = false;
  for (;;) {
    const size_t got = next(in.get(), kIn);
    if (got == 0) break;
    if (!any && (got < 4 || std::memcmp(in.get(), "\x04\x22\x4d\x18", 4) != 0))
      throw Lz4Error("lz4: not a valid lz4 frame (no LZ4 frame magic at the start)");
    any = true;
    size_t pos = 0;
    while (pos < got) {
      size_t src = got - pos, dst = kOut;
      hint = LZ4F_decompress(dctx, out.get(), &dst, in.get() + pos, &src, nullptr);
      if (LZ4F_isError(hint)) fail("not a valid lz4 frame", hint);
      if (dst > 0) fn(out.get(), dst);
      pos += src;
    }
  }
  // Output may still be pending inside the context after the input ran out.
  for (;;) {
    size_t src = 0, dst = kOut;
    const size_t h = LZ4F_decompress(dctx, out.get(), &dst, nullptr, &src, nullptr);
    if (LZ4F_isError(h)) fail("not a valid lz4 frame", h);
    if (dst == 0) break;
    fn(out.get(), dst);
    hint = h;
  }
  if (!any) throw Lz4Error("lz4: empty file (not an lz4 frame)");
  if (hint != 0) throw Lz4Error("lz4: the frame is truncated (cut short while being written?)");
}

}  // namespace

void lz4_decompress_file(const std::filesystem::path &path, const std::function<void(const void *, size_t)> &fn) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Lz4Error("lz4: cannot open " + path.string() + ": " + std::strerror(errno));
  struct Close {
    int fd;
    ~Close() { ::close(fd); }
  } guard{fd};
  decompress_stream(
      [fd](char *buf, size_t cap) -> size_t {
        const ssize_t r = read_full(fd, buf, cap);
        if (r < 0) throw Lz4Error(std::string("lz4: read error: ") + std::strerror(errno));
        return static_cast<size_t>(r);
      },
      fn);
}

std::string lz4_decompress(std::string_view frame) {
  std::string out;
  size_t pos = 0;
  decompress_stream(
      [&](char *buf, size_t cap) {
        const size_t n = std::min(cap, frame.size() - pos);
        std::memcpy(buf, frame.data() + pos, n);
        pos += n;
        return n;
      },
      [&](const void *p, size_t n) { out.append(static_cast<const char *>(p), n); });
  return out;
}

std::string lz4_compress(std::string_view data) {
  StringSink s;
  Lz4FrameSink z(s, data.size());
  z.write(data.data(), data.size());
  z.finish();
  return s.str();
}

}  // namespace msprobe::format
