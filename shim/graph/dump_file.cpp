// decode_dump_file (dump_file.h): the header length, the DumpData protobuf through the wire reader, the tensor bytes.
#include "shim/graph/dump_file.h"

#include <cstring>

#include "shim/graph/proto_wire.h"

namespace msprobe::shim::graph {
namespace {

using Bytes = std::span<const unsigned char>;

// One OpInput/OpOutput as it is on the wire.
struct WireTensor {
  int32_t dtype = 0, format = 0, sub_format = 0;
  std::vector<uint64_t> shape, original_shape;
  uint64_t size = 0;
};

struct WireDump {
  std::string version, op_name;
  uint64_t dump_time = 0;
  std::vector<WireTensor> inputs, outputs;
};

bool fail(std::string *error, std::string text) {
  if (error) *error = one_line(std::move(text));
  return false;
}

// Shape { repeated uint64 dim = 1; }: packed (wire 2) or one varint per dim; appends (a repeated Shape merges).
bool parse_shape(Bytes msg, std::vector<uint64_t> *dims, std::string *error) {
  WireReader r(msg);
  WireField f;
  while (r.next(&f)) {
    if (f.number != 1) continue;
    if (f.wire == Wire::Varint) {
      dims->push_back(f.value);
    } else if (f.wire == Wire::Bytes) {
      for (size_t pos = 0; pos < f.bytes.size();) {
        uint64_t v = 0;
        if (!read_varint(f.bytes, &pos, &v)) return fail(error, "Shape: truncated or overlong packed dim");
        dims->push_back(v);
      }
    }
  }
  return r.error().empty() || fail(error, "Shape: " + r.error());
}

// OpInput (size 5, original_shape 6, sub_format 7) and OpOutput (size 6, original_shape 7, sub_format 8).
bool parse_tensor(Bytes msg, bool output, WireTensor *t, std::string *error) {
  const uint32_t size_field = output ? 6 : 5;
  WireReader r(msg);
  WireField f;
  while (r.next(&f)) {
    const uint32_t n = f.number;
    if (f.wire == Wire::Varint) {
      if (n == 1) t->dtype = static_cast<int32_t>(f.value);  // int32 enum: the low 32 bits, as protobuf does
      if (n == 2) t->format = static_cast<int32_t>(f.value);
      if (n == size_field) t->size = f.value;
      if (n == size_field + 2) t->sub_format = static_cast<int32_t>(f.value);
    } else if (f.wire == Wire::Bytes && (n == 3 || n == size_field + 1)) {
      if (!parse_shape(f.bytes, n == 3 ? &t->shape : &t->original_shape, error)) return false;
    }
  }
  return r.error().empty() || fail(error, std::string(output ? "OpOutput: " : "OpInput: ") + r.error());
}

bool parse_dump_data(Bytes msg, WireDump *d, std::string *error) {
  WireReader r(msg);
  WireField f;
  while (r.next(&f)) {
    if (f.wire == Wire::Varint && f.number == 2) d->dump_time = f.value;
    if (f.wire != Wire::Bytes) continue;
    const std::string text(reinterpret_cast<const char *>(f.bytes.data()), f.bytes.size());
    if (f.number == 1) d->version = text;
    if (f.number == 6) d->op_name = text;
    if (f.number == 3 || f.number == 4) {
      auto &list = f.number == 3 ? d->outputs : d->inputs;
      if (!parse_tensor(f.bytes, f.number == 3, &list.emplace_back(), error)) return false;
    }
  }
  return r.error().empty() || fail(error, "DumpData: " + r.error());
}

// Dims as int64 (msprobe's shapes), the element count; false when a dim or the product leaves int64.
bool to_shape(const std::vector<uint64_t> &in, std::vector<int64_t> *out, uint64_t *numel) {
  *numel = 1;
  for (uint64_t d : in) {
    if (d > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(*numel, d, numel)) return false;
    out->push_back(static_cast<int64_t>(d));
  }
  return *numel <= static_cast<uint64_t>(INT64_MAX);
}

DumpTensor make_tensor(const WireTensor &w, format::IoKind io, uint32_t index, Bytes bytes) {
  DumpTensor t;
  t.io = io, t.index = index;
  t.proto_dtype = w.dtype, t.dtype_name = proto_dtype_name(w.dtype), t.dtype = proto_dtype(w.dtype);
  t.proto_format = w.format, t.format_name = proto_format_name(w.format), t.sub_format = w.sub_format;
  t.size = w.size, t.bytes = bytes;
  uint64_t device_numel = 0, original_numel = 0;
  const bool shapes_ok = to_shape(w.shape, &t.device_shape, &device_numel) &&
                         to_shape(w.original_shape, &t.original_shape, &original_numel);
  t.shape = t.original_shape.empty() ? t.device_shape : t.original_shape;
  const uint64_t numel = t.original_shape.empty() ? device_numel : original_numel;
  const uint64_t element = format::element_size(t.dtype);
  if (!shapes_ok) {
    t.note = "a dim or the element count exceeds INT64_MAX";
  } else if (t.dtype == format::DType::Raw) {
    t.note = "dtype " + t.dtype_name + " is kept raw";
  } else if (!proto_format_is_plain(w.format)) {
    t.note = "device format " + t.format_name + " is not row-major (no layout conversion)";
  } else if (numel > UINT64_MAX / element || numel * element != w.size || device_numel != numel) {
    t.note = "size " + std::to_string(w.size) + " does not match the shape (" + std::to_string(numel) + " x " +
             std::to_string(element) + " bytes)";
  } else {
    t.decodable = true;
  }
  return t;
}

// Places inputs then outputs after the header; false when their sizes do not fit in the file.
bool place_tensors(const WireDump &w, Bytes data, DumpFile *out, std::string *error) {
  uint64_t at = 0;
  for (const auto *list : {&w.inputs, &w.outputs}) {
    const bool output = list == &w.outputs;
    for (size_t i = 0; i < list->size(); ++i) {
      const uint64_t size = (*list)[i].size;
      if (size > data.size() - at) {
        return fail(error, std::string(output ? "output " : "input ") + std::to_string(i) + " (" +
                               std::to_string(size) + " bytes) ends past the file's " + std::to_string(data.size()) +
                               " data bytes");
      }
      const auto io = output ? format::IoKind::Output : format::IoKind::Input;
      auto &dest = output ? out->outputs : out->inputs;
      dest.push_back(make_tensor((*list)[i], io, static_cast<uint32_t>(i), data.subspan(at, size)));
      at += size;
    }
  }
  out->trailing_bytes = data.size() - at;
  return true;
}

}  // namespace

std::optional<DumpFile> decode_dump_file(std::string_view path, std::shared_ptr<const std::vector<unsigned char>> bytes,
                                         std::string *error) {
  const std::string where = "dump file " + std::string(path) + ": ";
  std::string why;
  DumpFile out;
  out.path = path;
  if (path.ends_with(".csv")) return fail(error, where + "a statistics CSV, not a tensor dump"), std::nullopt;
  std::optional<DumpName> name = parse_dump_name(base_name(path), &why);
  if (!name) return fail(error, where + why), std::nullopt;
  out.name = std::move(*name);
  out.place = parse_dump_place(path);
  const Bytes all = bytes ? Bytes(*bytes) : Bytes();
  if (all.size() < 8) return fail(error, where + "shorter than its 8-byte header length"), std::nullopt;
  std::memcpy(&out.header_length, all.data(), 8);  // little endian (format.h asserts the host is)
  if (out.header_length > all.size() - 8) {
    return fail(error, where + "header length " + std::to_string(out.header_length) + " past the end of the " +
                           std::to_string(all.size()) + "-byte file"),
           std::nullopt;
  }
  WireDump w;
  if (!parse_dump_data(all.subspan(8, out.header_length), &w, &why)) return fail(error, where + why), std::nullopt;
  out.version = std::move(w.version), out.op_name = std::move(w.op_name), out.dump_time = w.dump_time;
  if (!place_tensors(w, all.subspan(8 + out.header_length), &out, &why)) return fail(error, where + why), std::nullopt;
  out.storage = std::move(bytes);
  return out;
}

std::optional<DumpFile> decode_dump_file(std::string_view path, std::span<const unsigned char> bytes,
                                         std::string *error) {
  return decode_dump_file(path, std::make_shared<const std::vector<unsigned char>>(bytes.begin(), bytes.end()), error);
}

}  // namespace msprobe::shim::graph
