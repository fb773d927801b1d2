// Device memory of the stand-in: a reserved address range the host cannot touch (PROT_NONE), with a
// private read/write alias that only the runtime's copies and kernels use. A host program (or a shim)
// that dereferences a device pointer gets SIGSEGV, as it would on a real NPU.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "fakecann/export.h"

namespace fakecann {

struct FAKECANN_API CopyCounters {
  std::atomic<uint64_t> host_to_device{0};
  std::atomic<uint64_t> device_to_host{0};
  std::atomic<uint64_t> device_to_device{0};
  std::atomic<uint64_t> host_to_host{0};
  // The part of each that a preloaded object (a tool) asked for (fakecann/caller.h).
  std::atomic<uint64_t> preloaded_host_to_device{0};
  std::atomic<uint64_t> preloaded_device_to_host{0};
  std::atomic<uint64_t> preloaded_device_to_device{0};
  std::atomic<uint64_t> preloaded_host_to_host{0};
};

// Returns a 512-byte aligned device address, or nullptr when out of device memory or size == 0.
FAKECANN_API void *device_alloc(uint64_t size);
// The same from the top of device memory: the runtime's own buffers (kernel args), kept apart from the host's
// allocations as a real runtime keeps them in its own pool, so that a buffer the host just freed is not handed
// back as a kernel's args (a kernel reading the freed buffer still faults). Freed with device_free.
FAKECANN_API void *device_alloc_high(uint64_t size);
// False when ptr is not the base of a live allocation (double free, interior or host pointer).
FAKECANN_API bool device_free(void *ptr);
// True when ptr lies inside the device address range (live or not).
FAKECANN_API bool in_device_range(const void *ptr);
// The host alias of [ptr, ptr+bytes) when that range lies inside one live allocation, else nullptr.
FAKECANN_API void *device_host_alias(const void *ptr, uint64_t bytes);
// Base and size of the live allocation containing ptr; false if none.
FAKECANN_API bool device_allocation_of(const void *ptr, void **base, uint64_t *size);
// Virtual memory (aclrtReserveMemAddress, aclrtMapMem): a reserved range is device address space taken from the free
// space but not accessible; device_map makes [ptr, ptr+size) inside a reservation a live allocation (a kernel or a
// copy may reach it), device_unmap takes it back. Each returns false for a range that does not fit.
FAKECANN_API void *device_reserve(uint64_t size, uint64_t alignment);
FAKECANN_API bool device_release(void *ptr);  // false: not a reservation, or still mapped
FAKECANN_API bool device_map(void *ptr, uint64_t size);
FAKECANN_API bool device_unmap(void *ptr, uint64_t *size);
FAKECANN_API uint64_t device_total_bytes();
FAKECANN_API uint64_t device_used_bytes();
FAKECANN_API CopyCounters &copy_counters();

}  // namespace fakecann
