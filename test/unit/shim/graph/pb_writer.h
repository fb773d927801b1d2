// A tiny protobuf (wire format) encoder for the shim/graph tests that hand-build DumpData and NodeDef messages.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace pb_test {

using Buf = std::vector<unsigned char>;

struct Pb {
  Buf b;
  Pb &varint(uint64_t v) {
    while (v >= 0x80) b.push_back(static_cast<unsigned char>(v | 0x80)), v >>= 7;
    b.push_back(static_cast<unsigned char>(v));
    return *this;
  }
  Pb &tag(uint32_t field, uint32_t wire) { return varint(uint64_t{field} << 3 | wire); }
  Pb &u64(uint32_t field, uint64_t v) { return tag(field, 0).varint(v); }
  Pb &fixed(uint32_t field, uint64_t v, int n) {
    tag(field, n == 8 ? 1 : 5);
    for (int i = 0; i < n; ++i) b.push_back(static_cast<unsigned char>(v >> (8 * i)));
    return *this;
  }
  Pb &bytes(uint32_t field, const Buf &p) {
    tag(field, 2).varint(p.size());
    b.insert(b.end(), p.begin(), p.end());
    return *this;
  }
  Pb &str(uint32_t field, const std::string &s) { return bytes(field, Buf(s.begin(), s.end())); }
  Pb &msg(uint32_t field, const Pb &m) { return bytes(field, m.b); }
  Pb &raw(const Buf &r) {
    b.insert(b.end(), r.begin(), r.end());
    return *this;
  }
};

}  // namespace pb_test
