// A minimal reader of the protobuf (proto3) wire format, for the DumpData header of CANN's dump files
// (cann_dump.md §3.2).
//
// Why hand-written rather than libprotobuf: the shim is preloaded into processes (MindSpore, torch_npu, CANN's own
// tools) that ship and load their own libprotobuf, often a different version. Linking one in would add a dependency
// and either export symbols that clash with the host's or drag a second copy of its global registry into the
// process. The schema the shim reads is a dozen fields (DumpData 1,2,3,4,6; OpInput/OpOutput 1,2,3,size,
// original_shape,sub_format; Shape 1), which a bounds-checked reader of the four wire types covers in ~100 lines.
//
// The reader never reads past its span: truncated fields, varints longer than 10 bytes (or a 10th byte above 1),
// lengths past the end, field number 0 and the group wire types (3, 4) and 6, 7 are errors.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace msprobe::shim::graph {

enum class Wire : uint8_t { Varint = 0, Fixed64 = 1, Bytes = 2, Fixed32 = 5 };

struct WireField {
  uint32_t number = 0;
  Wire wire = Wire::Varint;
  uint64_t value = 0;                    // Varint, Fixed64, Fixed32
  std::span<const unsigned char> bytes;  // Bytes: the payload, inside the reader's span
};

// Reads one varint at `*pos`, advancing it; false on truncation or an overlong encoding.
bool read_varint(std::span<const unsigned char> in, size_t *pos, uint64_t *value);

// Walks the fields of one message. next() returns false at the end of the message and on an error; error() is
// empty in the first case and says what and where in the second.
class WireReader {
 public:
  explicit WireReader(std::span<const unsigned char> message) : in_(message) {}
  bool next(WireField *field);
  const std::string &error() const { return error_; }

 private:
  bool fail(const char *what);
  std::span<const unsigned char> in_;
  size_t pos_ = 0;
  std::string error_;
};

}  // namespace msprobe::shim::graph
