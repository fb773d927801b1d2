#include "shim/hooks/raw_kernel_args.h"

#include <algorithm>

#include "shim/device/device_allocations.h"

namespace msprobe::shim {

namespace {

constexpr int32_t kAclUint8 = 4, kAclFormatNd = 2;

format::ValueArg raw_value(const RtArgSlot &s) {
  format::ValueArg v;
  v.type = "uint" + std::to_string(8 * s.bytes);
  // JSON integers of the writer are signed 64-bit: the rare larger value is written as its decimal string.
  if (s.value <= (uint64_t)INT64_MAX)
    v.value = (int64_t)s.value;
  else
    v.value = std::to_string(s.value);
  return v;
}

}  // namespace

TensorMeta raw_bytes(uint64_t addr, uint64_t bytes) {
  TensorMeta m;
  m.dtype = kAclUint8;
  m.format = kAclFormatNd;
  m.ndim = 1;
  m.shape[0] = (int64_t)bytes;
  m.strides[0] = 1;
  m.data = reinterpret_cast<void *>(addr);
  return m;
}

format::ValueArg raw_address_value(uint64_t addr) {
  RtArgSlot s;
  s.value = addr;
  return raw_value(s);
}

Blob blob_of(const rtArgsEx_t *info) {
  Blob b;
  if (info == nullptr) return b;
  b.args = info->args;
  b.size = b.slot_bytes = info->argsSize;
  b.on_device = info->isNoNeedH2DCopy != 0;
  if (info->hasTiling && info->tilingDataOffset < b.slot_bytes) b.slot_bytes = info->tilingDataOffset;
  if (info->hostInputInfoPtr != nullptr)
    for (uint16_t i = 0; i < info->hostInputInfoNum; ++i)
      if (info->hostInputInfoPtr[i].dataOffset < b.slot_bytes) b.slot_bytes = info->hostInputInfoPtr[i].dataOffset;
  return b;
}

void BlobArgs::inputs(KernelLaunch &k) {
  k.accesses_unknown();  // a slot that points into device memory may be read, written or both
  if (blob_.on_device) {
    // The host cannot read a blob in device memory: the blob itself is the one input, as bytes.
    auto addr = reinterpret_cast<uint64_t>(blob_.args);
    if (auto r = device_allocations().find(addr))
      k.input_tensor(raw_bytes(addr, std::min<uint64_t>(blob_.size, r->end() - addr)));
    return;
  }
  slots_ = scan_args_blob(blob_.args, blob_.slot_bytes, device_allocations());
  for (const RtArgSlot &s : slots_) {
    if (s.device_extent)
      k.input_tensor(raw_bytes(s.value, *s.device_extent));
    else
      k.input_value(raw_value(s));
  }
}

void BlobArgs::outputs(KernelLaunch &k) const {
  for (const RtArgSlot &s : slots_)
    if (s.device_extent) k.output_tensor(raw_bytes(s.value, *s.device_extent));
}

}  // namespace msprobe::shim
