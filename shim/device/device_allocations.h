// The live device allocations of the process (aclrtMalloc / rtMalloc minus their frees): base -> size.
// Raw runtime kernels get their arguments as an opaque blob; a 64-bit value in it is taken for a device
// pointer when it lies inside one of these allocations, and the allocation says how far its data may reach.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <shared_mutex>
#include <span>
#include <vector>

namespace msprobe::shim {

struct DeviceRange {
  uint64_t base = 0;
  uint64_t size = 0;
  uint64_t end() const { return base + size; }
  bool operator==(const DeviceRange &) const = default;
};

class DeviceAllocations {
 public:
  // A new allocation. Entries it overlaps are gone (their frees were not seen: the runtime reused the
  // memory); inserting the same base again (aclrtMalloc reporting what its inner rtMalloc already did)
  // replaces the size, so the outermost call's size wins. Empty allocations contain nothing.
  void insert(const void *base, uint64_t size);
  // The allocation starting at `base` is freed; false if none did.
  bool erase(const void *base);
  // The allocation containing `addr` (interior addresses included).
  std::optional<DeviceRange> find(uint64_t addr) const;
  // find() for many addresses under one lock; `out` has one element per address.
  void find_all(std::span<const uint64_t> addrs, std::span<std::optional<DeviceRange>> out) const;
  size_t size() const;
  void clear();

 private:
  std::optional<DeviceRange> find_locked(uint64_t addr) const;
  void drop(std::map<uint64_t, uint64_t>::iterator it);
  mutable std::shared_mutex mu_;
  std::map<uint64_t, uint64_t> live_;  // base -> size
  // Nodes of entries gone, for the next insert: allocations and frees are often made on different threads (a
  // framework's Python thread and its task queue), where a node made on one and freed on the other costs the
  // allocator's slow path every time.
  std::vector<std::map<uint64_t, uint64_t>::node_type> spare_;
};

// The process-wide table the allocation hooks keep.
DeviceAllocations &device_allocations();

}  // namespace msprobe::shim
