// The tests' own protobuf reader for the stand-in's dump files (test_model_dump.cpp, test_op_dump.cpp): a message as
// field number -> varints or length-delimited payloads, independent of the shim's decoder it checks.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace fakecann_test {

inline uint64_t read_varint(const std::string &s, size_t &i) {
  uint64_t v = 0;
  for (int shift = 0; i < s.size(); shift += 7) {
    uint8_t c = (uint8_t)s[i++];
    v |= (uint64_t)(c & 0x7f) << shift;
    if (!(c & 0x80)) return v;
  }
  ADD_FAILURE() << "truncated varint";
  return v;
}

struct Fields {
  std::multimap<uint32_t, uint64_t> varints;
  std::multimap<uint32_t, std::string> bytes;
  std::vector<std::string> all(uint32_t f) const {
    std::vector<std::string> v;
    for (auto [it, end] = bytes.equal_range(f); it != end; ++it) v.push_back(it->second);
    return v;
  }
  uint64_t varint(uint32_t f) const { return varints.count(f) ? varints.find(f)->second : 0; }
};

inline Fields decode(const std::string &s) {
  Fields f;
  for (size_t i = 0; i < s.size();) {
    uint64_t key = read_varint(s, i);
    uint32_t field = (uint32_t)(key >> 3), wire = (uint32_t)(key & 7);
    if (wire == 0) {
      f.varints.emplace(field, read_varint(s, i));
    } else if (wire == 2) {
      uint64_t n = read_varint(s, i);
      f.bytes.emplace(field, s.substr(i, n));
      i += n;
    } else {
      ADD_FAILURE() << "unexpected wire type " << wire;
      return f;
    }
  }
  return f;
}

// A Shape message's packed dims.
inline std::vector<uint64_t> dims(const std::string &shape_msg) {
  std::vector<uint64_t> d;
  std::vector<std::string> packed = decode(shape_msg).all(1);
  for (size_t i = 0; !packed.empty() && i < packed[0].size();) d.push_back(read_varint(packed[0], i));
  return d;
}

inline std::string bytes_of(const std::vector<float> &v) {
  return std::string((const char *)v.data(), v.size() * 4);
}

}  // namespace fakecann_test
