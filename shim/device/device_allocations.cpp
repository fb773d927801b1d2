#include "shim/device/device_allocations.h"

#include <mutex>

namespace msprobe::shim {
namespace {
constexpr size_t kSpareNodes = 64;
}  // namespace

void DeviceAllocations::drop(std::map<uint64_t, uint64_t>::iterator it) {
  auto node = live_.extract(it);
  if (spare_.size() < kSpareNodes) spare_.push_back(std::move(node));
}

void DeviceAllocations::insert(const void *base, uint64_t size) {
  const auto b = reinterpret_cast<uint64_t>(base);
  if (size == 0 || b + size < b) return;
  std::unique_lock lk(mu_);
  // Drop every stale entry overlapping [b, b + size): the one starting before b and reaching into it,
  // then those starting inside it.
  auto it = live_.lower_bound(b);
  if (it != live_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second > b) drop(prev);
  }
  while (it != live_.end() && it->first < b + size) drop(it++);
  if (spare_.empty()) {
    live_.emplace(b, size);
    return;
  }
  auto node = std::move(spare_.back());
  spare_.pop_back();
  node.key() = b;
  node.mapped() = size;
  live_.insert(std::move(node));
}

bool DeviceAllocations::erase(const void *base) {
  std::unique_lock lk(mu_);
  auto it = live_.find(reinterpret_cast<uint64_t>(base));
  if (it == live_.end()) return false;
  drop(it);
  return true;
}

std::optional<DeviceRange> DeviceAllocations::find_locked(uint64_t addr) const {
  auto it = live_.upper_bound(addr);  // first allocation starting after addr
  if (it == live_.begin()) return std::nullopt;
  --it;
  if (addr - it->first >= it->second) return std::nullopt;
  return DeviceRange{it->first, it->second};
}

std::optional<DeviceRange> DeviceAllocations::find(uint64_t addr) const {
  std::shared_lock lk(mu_);
  return find_locked(addr);
}

void DeviceAllocations::find_all(std::span<const uint64_t> addrs, std::span<std::optional<DeviceRange>> out) const {
  std::shared_lock lk(mu_);
  for (size_t i = 0; i < addrs.size() && i < out.size(); ++i) out[i] = find_locked(addrs[i]);
}

size_t DeviceAllocations::size() const {
  std::shared_lock lk(mu_);
  return live_.size();
}

void DeviceAllocations::clear() {
  std::unique_lock lk(mu_);
  live_.clear();
  spare_.clear();
}

DeviceAllocations &device_allocations() {
  static auto *table = new DeviceAllocations;  // immortal: frees may arrive from exit handlers
  return *table;
}

}  // namespace msprobe::shim
