// The protobuf wire reader (proto_wire.h): bounds-checked, no allocation but the error text.
#include "shim/graph/proto_wire.h"

namespace msprobe::shim::graph {

bool read_varint(std::span<const unsigned char> in, size_t *pos, uint64_t *value) {
  uint64_t v = 0;
  for (int i = 0; i < 10; ++i) {
    if (*pos >= in.size()) return false;
    const unsigned char c = in[(*pos)++];
    if (i == 9 && c > 1) return false;  // a 64-bit value has one bit left for the 10th byte
    v |= static_cast<uint64_t>(c & 0x7f) << (7 * i);
    if ((c & 0x80) == 0) {
      *value = v;
      return true;
    }
  }
  return false;
}

bool WireReader::fail(const char *what) {
  error_ =
      std::string(what) + " at byte " + std::to_string(pos_) + " of a " + std::to_string(in_.size()) + "-byte message";
  pos_ = in_.size();
  return false;
}

bool WireReader::next(WireField *f) {
  if (pos_ >= in_.size()) return false;
  uint64_t key = 0;
  if (!read_varint(in_, &pos_, &key)) return fail("truncated or overlong field key");
  if (key >> 3 == 0 || key >> 3 > 0x1fffffff) return fail("invalid field number");
  f->number = static_cast<uint32_t>(key >> 3);
  const unsigned wire = key & 7;
  switch (wire) {
    case 0:
      if (!read_varint(in_, &pos_, &f->value)) return fail("truncated or overlong varint");
      break;
    case 1:
    case 5: {
      const size_t n = wire == 1 ? 8 : 4;
      if (in_.size() - pos_ < n) return fail("truncated fixed-width field");
      f->value = 0;
      for (size_t i = 0; i < n; ++i) f->value |= static_cast<uint64_t>(in_[pos_ + i]) << (8 * i);
      pos_ += n;
      break;
    }
    case 2: {
      uint64_t n = 0;
      if (!read_varint(in_, &pos_, &n)) return fail("truncated or overlong length");
      if (n > in_.size() - pos_) return fail("length past the end");
      f->bytes = in_.subspan(pos_, static_cast<size_t>(n));
      pos_ += static_cast<size_t>(n);
      break;
    }
    case 3:
    case 4: return fail("group wire type (not proto3)");
    default: return fail("invalid wire type");
  }
  f->wire = static_cast<Wire>(wire);
  return true;
}

}  // namespace msprobe::shim::graph
