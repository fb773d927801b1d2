#include "shim/graph/aicpu_task.h"

#include <cstring>

#include "shim/graph/proto_wire.h"

namespace msprobe::shim::graph {
namespace {

constexpr size_t kHeadBytes = 20;
constexpr size_t kMaxDims = 64;  // far above any real rank: a NodeDef with more is not believed

uint32_t u32_at(std::span<const unsigned char> b, size_t at) {
  uint32_t v;
  std::memcpy(&v, b.data() + at, 4);
  return v;
}

bool parse_shape(std::span<const unsigned char> msg, std::vector<int64_t> *shape) {
  WireReader r(msg);
  WireField f;
  while (r.next(&f)) {
    if (f.number != 2 || f.wire != Wire::Bytes) continue;  // Dim
    int64_t size = 0;
    WireReader d(f.bytes);
    WireField df;
    while (d.next(&df))
      if (df.number == 1 && df.wire == Wire::Varint) size = (int64_t)df.value;
    if (!d.error().empty() || shape->size() >= kMaxDims) return false;
    shape->push_back(size);
  }
  return r.error().empty();
}

bool parse_tensor(std::span<const unsigned char> msg, AicpuTensor *t) {
  WireReader r(msg);
  WireField f;
  while (r.next(&f)) {
    if (f.number == 1 && f.wire == Wire::Bytes && !parse_shape(f.bytes, &t->shape)) return false;
    if (f.number == 2 && f.wire == Wire::Varint) t->dtype = (int32_t)(uint32_t)f.value;
  }
  return r.error().empty();
}

}  // namespace

std::optional<AicpuTask> parse_aicpu_args(std::span<const unsigned char> blob) {
  if (blob.size() < kHeadBytes) return std::nullopt;
  const uint64_t io = u32_at(blob, 4);
  if (io > (blob.size() - kHeadBytes) / 8) return std::nullopt;
  AicpuTask task;
  for (uint64_t i = 0; i < io; ++i) {
    uint64_t a;
    std::memcpy(&a, blob.data() + kHeadBytes + 8 * i, 8);
    task.io_addrs.push_back(a);
  }
  const size_t at = kHeadBytes + 8 * io;
  if (at + 4 > blob.size()) {
    task.why_undescribed = "no NodeDef behind the io addresses";
    return task;
  }
  const uint32_t len = u32_at(blob, at);
  if (len > blob.size() - at - 4) {
    task.why_undescribed = "the NodeDef runs past the args";
    return task;
  }
  std::vector<AicpuTensor> inputs, outputs;
  std::string op;
  WireReader r(blob.subspan(at + 4, len));
  WireField f;
  bool ok = true;
  while (ok && r.next(&f)) {
    if (f.wire != Wire::Bytes) continue;
    if (f.number == 2) {
      op.assign(reinterpret_cast<const char *>(f.bytes.data()), f.bytes.size());
    } else if (f.number == 4 || f.number == 5) {
      AicpuTensor t;
      ok = parse_tensor(f.bytes, &t);
      (f.number == 4 ? inputs : outputs).push_back(std::move(t));
    }
  }
  if (!ok || !r.error().empty()) {
    task.why_undescribed = "the NodeDef is not a valid protobuf";
    return task;
  }
  task.op = std::move(op);
  if (inputs.size() + outputs.size() != io) {
    task.why_undescribed = "the NodeDef describes " + std::to_string(inputs.size() + outputs.size()) + " tensors for " +
                           std::to_string(io) + " io addresses";
    return task;
  }
  for (size_t i = 0; i < inputs.size(); ++i) inputs[i].addr = task.io_addrs[i];
  for (size_t i = 0; i < outputs.size(); ++i) outputs[i].addr = task.io_addrs[inputs.size() + i];
  task.inputs = std::move(inputs);
  task.outputs = std::move(outputs);
  task.described = true;
  return task;
}

}  // namespace msprobe::shim::graph
