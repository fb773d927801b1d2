#include "shim/device/device_allocations.h"

#include <algorithm>

namespace msprobe::shim {
namespace {

// The first allocation starting at or after `b`.
template <typename It>
It first_at_or_after(It first, It last, uint64_t b) {
  return std::lower_bound(first, last, b, [](const DeviceRange &r, uint64_t x) { return r.base < x; });
}

}  // namespace

// Removes [first, last) by moving the smaller side over it.
void DeviceAllocations::remove(DeviceRange *first, DeviceRange *last) {
  const size_t n = (size_t)(last - first);
  if (first - begin() < end() - last) {
    std::move_backward(begin(), first, last);
    head_ += n;
  } else {
    std::move(last, end(), first);
    buf_.resize(buf_.size() - n);
  }
  if (head_ == buf_.size()) {
    buf_.clear();
    head_ = 0;
  }
}

void DeviceAllocations::insert(const void *base, uint64_t size) {
  const auto b = reinterpret_cast<uint64_t>(base);
  if (size == 0 || b + size < b) return;
  const DeviceRange r{b, size};
  std::lock_guard<std::mutex> lk(mu_);
  // The usual case first: above every live allocation (nothing overlapped, nothing to move).
  if ((begin() == end() || (end() - 1)->end() <= b) && (head_ == 0 || buf_.size() < buf_.capacity())) {
    buf_.push_back(r);
    return;
  }
  // Drop every stale entry overlapping [b, b + size): the one starting before b and reaching into it, then those
  // starting inside it (the same base included); the new one takes the place of the first.
  DeviceRange *first = first_at_or_after(begin(), end(), b);
  if (first != begin() && (first - 1)->end() > b) --first;
  DeviceRange *last = first;
  while (last != end() && last->base < b + size) ++last;
  if (first != last) {
    *first = r;
    remove(first + 1, last);
    return;
  }
  // A new entry at `first`: room made on the smaller side (the front's free room first, then the back).
  if (head_ > 0 && first - begin() < end() - first) {
    std::move(begin(), first, begin() - 1);
    --head_;
    *(first - 1) = r;
    return;
  }
  if (head_ > 0 && buf_.size() == buf_.capacity()) {  // the free room at the front, reclaimed before growing
    const size_t at = (size_t)(first - begin());
    buf_.erase(buf_.begin(), buf_.begin() + (std::ptrdiff_t)head_);
    head_ = 0;
    first = begin() + at;
  }
  buf_.insert(buf_.begin() + (first - buf_.data()), r);
}

bool DeviceAllocations::erase(const void *base) {
  const auto b = reinterpret_cast<uint64_t>(base);
  std::lock_guard<std::mutex> lk(mu_);
  DeviceRange *it = first_at_or_after(begin(), end(), b);
  if (it == end() || it->base != b) return false;
  remove(it, it + 1);
  return true;
}

std::optional<DeviceRange> DeviceAllocations::find_locked(uint64_t addr) const {
  // The last allocation starting at or before addr.
  const DeviceRange *it =
      std::upper_bound(begin(), end(), addr, [](uint64_t x, const DeviceRange &r) { return x < r.base; });
  if (it == begin()) return std::nullopt;
  --it;
  if (addr - it->base >= it->size) return std::nullopt;
  return *it;
}

std::optional<DeviceRange> DeviceAllocations::find(uint64_t addr) const {
  std::lock_guard<std::mutex> lk(mu_);
  return find_locked(addr);
}

void DeviceAllocations::find_all(std::span<const uint64_t> addrs, std::span<std::optional<DeviceRange>> out) const {
  std::lock_guard<std::mutex> lk(mu_);
  for (size_t i = 0; i < addrs.size() && i < out.size(); ++i) out[i] = find_locked(addrs[i]);
}

size_t DeviceAllocations::size() const {
  std::lock_guard<std::mutex> lk(mu_);
  return buf_.size() - head_;
}

void DeviceAllocations::clear() {
  std::lock_guard<std::mutex> lk(mu_);
  buf_.clear();
  buf_.shrink_to_fit();
  head_ = 0;
}

DeviceAllocations &device_allocations() {
  static auto *table = new DeviceAllocations;  // immortal: frees may arrive from exit handlers
  return *table;
}

}  // namespace msprobe::shim
