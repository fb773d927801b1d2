// The live device allocations of the process (aclrtMalloc / rtMalloc minus their frees): base -> size.
// Raw runtime kernels get their arguments as an opaque blob; a 64-bit value in it is taken for a device
// pointer when it lies inside one of these allocations, and the allocation says how far its data may reach.
#pragma once
#include <cstdint>
#include <mutex>
#include <optional>
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
  // The live allocations: [head_, buf_.size()) of buf_, sorted by base, none overlapping. A vector, not a node-based
  // map: the host's allocations are few (a framework's caching allocator holds hundreds of blocks, not millions) and
  // come and go mostly at either end (new blocks at higher addresses, frees in the order made or its reverse), so an
  // insert or erase is a binary search and a short move of the smaller side, with no allocation once the vector has
  // grown (a node made on the host's Python thread and freed on its task queue costs the allocator's slow path every
  // time).
  DeviceRange *begin() { return buf_.data() + head_; }
  DeviceRange *end() { return buf_.data() + buf_.size(); }
  const DeviceRange *begin() const { return buf_.data() + head_; }
  const DeviceRange *end() const { return buf_.data() + buf_.size(); }
  void remove(DeviceRange *first, DeviceRange *last);
  mutable std::mutex mu_;
  std::vector<DeviceRange> buf_;
  size_t head_ = 0;
};

// The process-wide table the allocation hooks keep.
DeviceAllocations &device_allocations();

}  // namespace msprobe::shim
