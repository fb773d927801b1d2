// The device side of the data dump: after a kernel, its dump file is built in slices of at most chunk_limit()
// bytes and queued slice by slice (cann_dump.md §1.7, §3). Tensor mode: u64 header length, the DumpData
// protobuf (encoded here by hand, field numbers of dump_data.proto), the tensor bytes as they lie in device
// memory. Stats mode: OpStatsResult records, turned into CSV by the record thread.
#include <sys/time.h>

#include <cmath>
#include <cstring>

#include "fakecann/dtype.h"
#include "fakecann/dump.h"
#include "fakecann/tensor_io.h"

namespace fakecann::dump {
namespace {

// ---- a minimal protobuf (proto3) writer ----

struct Proto {
  std::vector<uint8_t> b;
  void varint(uint64_t v) {
    while (v >= 0x80) {
      b.push_back((uint8_t)(v | 0x80));
      v >>= 7;
    }
    b.push_back((uint8_t)v);
  }
  void tag(uint32_t field, uint32_t wire) { varint((uint64_t)field << 3 | wire); }
  // proto3 leaves scalar fields at their default (0, "") out of the wire.
  void u64(uint32_t field, uint64_t v) {
    if (v != 0) tag(field, 0), varint(v);
  }
  void bytes(uint32_t field, const void *p, size_t n, bool always = false) {
    if (n == 0 && !always) return;
    tag(field, 2);
    varint(n);
    b.insert(b.end(), static_cast<const uint8_t *>(p), static_cast<const uint8_t *>(p) + n);
  }
  void str(uint32_t field, const std::string &s) { bytes(field, s.data(), s.size()); }
  void message(uint32_t field, const Proto &m) { bytes(field, m.b.data(), m.b.size(), true); }
};

// Shape { repeated uint64 dim = 1; } — packed, as proto3 serializes repeated scalars.
Proto shape_message(const std::vector<int64_t> &dims) {
  Proto packed, m;
  for (int64_t d : dims) packed.varint((uint64_t)d);
  m.bytes(1, packed.b.data(), packed.b.size());
  return m;
}

// OpInput and OpOutput share data_type 1, format 2, shape 3; size, original_shape and address differ.
Proto tensor_message(const Tensor &t, bool output) {
  Proto m;
  m.u64(1, (uint64_t)proto_dtype(t.dtype));
  m.u64(2, (uint64_t)proto_format(t.format));
  m.message(3, shape_message(t.shape));
  m.u64(output ? 6 : 5, t.bytes);
  m.message(output ? 7 : 6, shape_message(t.shape));
  m.u64(output ? 9 : 8, (uint64_t)(uintptr_t)t.device);
  return m;
}

uint64_t now_us() {
  timeval tv;
  gettimeofday(&tv, nullptr);
  return (uint64_t)tv.tv_sec * 1000000u + (uint64_t)tv.tv_usec;
}

// DumpData: version 1, dump_time 2, output 3, input 4, op_name 6 (field order, as protobuf serializes).
std::vector<uint8_t> dump_data(const Kernel &k, const std::vector<Tensor> &in, const std::vector<Tensor> &out,
                               uint64_t time_us) {
  Proto m;
  m.str(1, "2.0");
  m.u64(2, time_us);
  for (const Tensor &t : out) m.message(3, tensor_message(t, true));
  for (const Tensor &t : in) m.message(4, tensor_message(t, false));
  m.str(6, k.op_name);
  return m.b;
}

// Cuts a file of known total size into chunks; the last byte goes out with isLastChunk = 1.
class Slicer {
 public:
  Slicer(std::string file, uint64_t total) : file_(std::move(file)), left_(total), limit_(chunk_limit()) {}
  void append(const void *p, uint64_t n) {
    const uint8_t *c = static_cast<const uint8_t *>(p);
    while (n > 0) {
      uint64_t take = std::min<uint64_t>(n, limit_ - buf_.size());
      buf_.insert(buf_.end(), c, c + take);
      c += take, n -= take, left_ -= take;
      if (buf_.size() == limit_ || left_ == 0) {
        push_chunk(file_, std::move(buf_), left_ == 0);
        buf_.clear();
      }
    }
  }

 private:
  std::string file_;
  uint64_t left_, limit_;
  std::vector<uint8_t> buf_;
};

std::string base_name(const Kernel &k, uint64_t time_us) {
  return sanitize(k.op_type) + "." + sanitize(k.op_name) + "." + std::to_string(k.task_id) + "." +
         std::to_string(k.stream_id) + "." + std::to_string(time_us);
}

void dump_tensors(const Config &c, const std::string &file, const Kernel &k, uint64_t time_us) {
  std::vector<Tensor> in = c.inputs ? k.inputs : std::vector<Tensor>{};
  std::vector<Tensor> out = c.outputs ? k.outputs : std::vector<Tensor>{};
  std::vector<uint8_t> header = dump_data(k, in, out, time_us);
  uint64_t total = 8 + header.size();
  for (const auto *list : {&in, &out})
    for (const Tensor &t : *list) total += t.bytes;
  Slicer s(file, total);
  uint64_t h = header.size();  // host-native (little-endian) u64
  s.append(&h, 8);
  s.append(header.data(), header.size());
  for (const auto *list : {&in, &out})
    for (const Tensor &t : *list)
      if (t.bytes > 0) s.append(device_bytes(t.device, t.bytes), t.bytes);
}

}  // namespace

int proto_dtype(aclDataType t) {
  switch (t) {
    case ACL_FLOAT: return 1;
    case ACL_FLOAT16: return 2;
    case ACL_INT8: return 3;
    case ACL_UINT8: return 4;
    case ACL_INT16: return 5;
    case ACL_UINT16: return 6;
    case ACL_INT32: return 7;
    case ACL_INT64: return 8;
    case ACL_UINT32: return 9;
    case ACL_UINT64: return 10;
    case ACL_BOOL: return 11;
    case ACL_DOUBLE: return 12;
    case ACL_STRING: return 13;
    case ACL_COMPLEX64: return 16;
    case ACL_COMPLEX128: return 17;
    case ACL_BF16: return 27;
    case ACL_INT4: return 28;
    case ACL_UINT1: return 29;
    case ACL_COMPLEX32: return 32;
    case ACL_HIFLOAT8: return 33;
    case ACL_FLOAT8_E5M2: return 34;
    case ACL_FLOAT8_E4M3FN: return 35;
    case ACL_FLOAT8_E8M0: return 36;
    case ACL_FLOAT6_E3M2: return 37;
    case ACL_FLOAT6_E2M3: return 38;
    case ACL_FLOAT4_E2M1: return 39;
    case ACL_FLOAT4_E1M2: return 40;
    default: return 0;  // DT_UNDEFINED
  }
}

const char *proto_dtype_name(int proto) {
  static const char *const names[] = {
      "DT_UNDEFINED", "DT_FLOAT",  "DT_FLOAT16",       "DT_INT8",           "DT_UINT8",     "DT_INT16",
      "DT_UINT16",    "DT_INT32",  "DT_INT64",         "DT_UINT32",         "DT_UINT64",    "DT_BOOL",
      "DT_DOUBLE",    "DT_STRING", "DT_DUAL_SUB_INT8", "DT_DUAL_SUB_UINT8", "DT_COMPLEX64", "DT_COMPLEX128"};
  if (proto >= 0 && proto < (int)(sizeof names / sizeof *names)) return names[proto];
  switch (proto) {
    case 27: return "DT_BF16";
    case 28: return "DT_INT4";
    case 29: return "DT_UINT1";
    case 32: return "DT_COMPLEX32";
    case 33: return "DT_HIFLOAT8";
    case 34: return "DT_FLOAT8_E5M2";
    case 35: return "DT_FLOAT8_E4M3FN";
    case 36: return "DT_FLOAT8_E8M0";
    case 37: return "DT_FLOAT6_E3M2";
    case 38: return "DT_FLOAT6_E2M3";
    case 39: return "DT_FLOAT4_E2M1";
    case 40: return "DT_FLOAT4_E1M2";
    default: return "DT_UNDEFINED";
  }
}

int proto_format(aclFormat f) { return f == ACL_FORMAT_UNDEFINED ? 40 : (int)f; }  // FORMAT_RESERVED

const char *proto_format_name(int proto) {
  switch (proto) {
    case 0: return "NCHW";
    case 1: return "NHWC";
    case 2: return "ND";
    case 3: return "NC1HWC0";
    case 4: return "FRACTAL_Z";
    case 12: return "NC1HWC0_C04";
    case 16: return "HWCN";
    case 27: return "NDHWC";
    case 29: return "FRACTAL_NZ";
    case 30: return "NCDHW";
    case 32: return "NDC1HWC0";
    case 33: return "FRACTAL_Z_3D";
    case 35: return "NC";
    case 47: return "NCL";
    default: return "RESERVED";
  }
}

std::string sanitize(const std::string &name) {
  std::string s = name;
  for (char &c : s)
    if (c == ' ' || c == '.' || c == '/' || c == '\\') c = '_';
  return s;
}

namespace {

int64_t float_slot(double v) {
  float f = (float)v;
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return (int64_t)bits;  // low 4 bytes
}

// Max/Min: float for floating dtypes, int64 for INT64, else int32 in the low word (cann_dump.md §3.6).
int64_t value_slot(aclDataType t, double v) {
  if (dtype_is_float(t)) return float_slot(v);
  if (t == ACL_INT64) return (int64_t)v;
  return (int64_t)(uint32_t)(int32_t)v;
}

// Statistics over the tensor's elements as the device reads them; NaNs are counted, not folded into the rest.
TensorStatsResult tensor_stats(const Tensor &t, int io, int index) {
  TensorStatsResult r{};
  r.size = (int64_t)t.bytes;
  r.dType = proto_dtype(t.dtype);
  r.format = proto_format(t.format);
  r.shapeSize = (int32_t)std::min<size_t>(t.shape.size(), 25);
  for (int i = 0; i < r.shapeSize; ++i) r.shape[i] = (uint32_t)t.shape[(size_t)i];
  r.io = io, r.index = index, r.statsLen = 7;
  const uint64_t n = dtype_size(t.dtype) ? t.bytes / dtype_size(t.dtype) : 0;
  const void *p = n ? device_bytes(t.device, t.bytes) : nullptr;
  double mx = -INFINITY, mn = INFINITY, sum = 0, sq = 0;
  int64_t nan = 0, neg = 0, pos = 0, seen = 0;
  for (uint64_t i = 0; i < n; ++i) {
    double v = load_element(p, t.dtype, i);
    if (std::isnan(v)) {
      ++nan;
      continue;
    }
    neg += v == -INFINITY, pos += v == INFINITY, ++seen;
    mx = std::max(mx, v), mn = std::min(mn, v), sum += v, sq += v * v;
  }
  if (seen == 0) mx = mn = NAN;
  r.stats[0] = value_slot(t.dtype, mx);
  r.stats[1] = value_slot(t.dtype, mn);
  r.stats[2] = float_slot(seen ? sum / (double)seen : NAN);
  r.stats[3] = nan, r.stats[4] = neg, r.stats[5] = pos;
  r.stats[6] = float_slot(std::sqrt(sq));
  return r;
}

void dump_stats(const Config &c, const std::string &file, const Kernel &k) {
  std::vector<TensorStatsResult> all;
  if (c.inputs)
    for (size_t i = 0; i < k.inputs.size(); ++i) all.push_back(tensor_stats(k.inputs[i], 0, (int)i));
  if (c.outputs)
    for (size_t i = 0; i < k.outputs.size(); ++i) all.push_back(tensor_stats(k.outputs[i], 1, (int)i));
  for (size_t first = 0; first < all.size(); first += kMaxStatsResultNum) {  // <= 10 tensors per record
    std::vector<uint8_t> rec(sizeof(OpStatsResult), 0);
    OpStatsResult r{};
    r.statItem = c.stat_items;
    r.tensorNum = (int32_t)std::min<size_t>(kMaxStatsResultNum, all.size() - first);
    for (int i = 0; i < r.tensorNum; ++i) r.stat[i] = all[first + (size_t)i];
    std::memcpy(rec.data(), &r, sizeof r);
    push_chunk(file, std::move(rec), true);
  }
}

}  // namespace

std::vector<uint8_t> op_mapping_info(const Kernel &k) { return dump_data(k, k.inputs, k.outputs, now_us()); }

void dump_kernel(const Config &c, const std::string &dir, const Kernel &k) {
  const uint64_t t = now_us();
  const std::string file = dir + "/" + base_name(k, t);
  if (c.stats)
    dump_stats(c, file + ".bin", k);
  else
    dump_tensors(c, file, k, t);
}

}  // namespace fakecann::dump
