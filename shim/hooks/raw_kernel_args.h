// What a raw kernel's launch hands the kernel, as the dump describes it: an opaque argument blob (TBE style: packed
// 64-bit device addresses, then scalars), shared by the runtime's launches (rt_kernels.cpp: rtKernelLaunch*) and the
// ACL's (acl_kernels.cpp: aclrtLaunchKernel*). An 8-byte slot pointing into a live device allocation is a raw byte
// buffer from that pointer to the allocation's end (an input, copied before the launch, and again an output, after
// it), any other slot a raw value; a blob already in device memory is itself the one input. No dtype or shape is known
// at this level (docs/capture.md).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/kernel.h"
#include "shim/capture/kernel_launch.h"
#include "shim/device/kernel_binaries.h"

namespace msprobe::shim {

// A device byte range as the one-dimensional UInt8 tensor the dump describes it as.
TensorMeta raw_bytes(uint64_t addr, uint64_t bytes);
// A 64-bit value that is no device pointer, as the dump writes it ("uint64", its decimal value).
format::ValueArg raw_address_value(uint64_t addr);

// What a launch hands the kernel: the host blob (or, on_device, a blob already in device memory) and how much of it is
// argument slots (tiling data and host inputs copied behind the slots get their slots patched; they are no slots).
struct Blob {
  const void *args = nullptr;
  uint32_t size = 0;        // argsSize
  uint32_t slot_bytes = 0;  // the leading part that holds argument slots
  bool on_device = false;
};

inline Blob plain_blob(const void *args, uint32_t size) { return Blob{args, size, size, false}; }
// The blob an rtArgsEx_t describes (an empty one for null).
Blob blob_of(const rtArgsEx_t *info);
inline Blob blob_of(const Blob &b) { return b; }

// A launch's arguments as the dump describes them: read before the real launch (the runtime copies the blob then),
// device buffers again after it.
class BlobArgs {
 public:
  explicit BlobArgs(const Blob &blob) : blob_(blob) {}
  void inputs(KernelLaunch &k);
  void outputs(KernelLaunch &k) const;

 private:
  Blob blob_;
  std::vector<RtArgSlot> slots_;
};

}  // namespace msprobe::shim
