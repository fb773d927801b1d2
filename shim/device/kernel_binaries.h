// Raw runtime kernels (rtKernelLaunch*, runtime/kernel.h): what a launch names and what its arguments are.
//
// Names: a device binary registered with rtDevBinaryRegister / rtRegisterAllKernel is an ELF image whose
// symbols are its kernels (read with libelf); rtFunctionRegister binds a host stub address to one of them
// (kernelInfoExt = the ELF symbol name, else stubName), and a handle launch picks the kernel of its tiling
// key, the symbol `{kernel}_{tilingKey}` (Ascend C naming).
//
// Arguments: an opaque blob, TBE style (packed 64-bit device addresses, then scalars). Each 8-byte slot
// whose value lies inside a live device allocation is a device pointer; anything else is a raw value.
#pragma once
#include <cstdint>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "shim/device/device_allocations.h"

namespace msprobe::shim {

// The kernel symbols of an ELF image: defined global or weak functions and data objects, in symbol-table
// order. Empty when the bytes are not an ELF image libelf can read. Reads a private copy of the bytes.
std::vector<std::string> elf_kernel_symbols(const void *image, uint64_t length);

class KernelBinaries {
 public:
  // rtDevBinaryRegister / rtRegisterAllKernel returned `handle` for these bytes.
  void register_binary(const void *handle, const void *image, uint64_t length);
  // rtDevBinaryUnRegister: the handle and the stubs bound to it are forgotten.
  void unregister_binary(const void *handle);
  // rtFunctionRegister. `kernel_info_ext` and `stub_name` are the C strings the runtime reads.
  void register_function(const void *handle, const void *stub, const char *stub_name, const void *kernel_info_ext);

  // The kernel a stub launches; nullopt for a stub never registered (or registered before capture began).
  std::optional<std::string> stub_kernel(const void *stub) const;
  // The kernel of `tiling_key` in a registered binary: its one symbol ending in `_{tiling_key}`.
  std::optional<std::string> handle_kernel(const void *handle, uint64_t tiling_key) const;
  // The symbols read from a registered binary (empty if unknown or not ELF).
  std::vector<std::string> symbols(const void *handle) const;

 private:
  struct Binary {
    std::vector<std::string> symbols;
    std::unordered_map<uint64_t, std::string> by_tiling_key;  // keys named by exactly one symbol
  };
  struct Stub {
    const void *handle;
    std::string kernel;
  };
  mutable std::shared_mutex mu_;
  std::unordered_map<const void *, Binary> binaries_;
  std::unordered_map<const void *, Stub> stubs_;
};

// The process-wide registry the runtime hooks keep.
KernelBinaries &kernel_binaries();

// OpType of a launch whose kernel is not known (a stub or handle registered before capture began).
inline constexpr const char *kUnknownRtKernel = "UnknownRtKernel";

// One argument of a raw kernel's blob.
struct RtArgSlot {
  uint32_t offset = 0;  // bytes from the start of the blob
  uint32_t bytes = 8;   // 8, or fewer for a blob's last partial slot
  uint64_t value = 0;   // little-endian, zero-extended
  // Set when `value` points into a live device allocation: the bytes from `value` to its end.
  std::optional<uint64_t> device_extent;
};

// Splits `bytes` bytes of a host blob into 8-byte slots (the last one may be shorter) and classifies each
// against the allocation table. The caller leaves out data that is not slots (the tiling data and host
// inputs rtArgsEx_t places at the end of a blob).
std::vector<RtArgSlot> scan_args_blob(const void *blob, uint32_t bytes, const DeviceAllocations &allocations);

}  // namespace msprobe::shim
