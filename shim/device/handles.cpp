#include "shim/device/handles.h"

namespace msprobe::shim {

void HandleTable::widen_range(const void *h) noexcept {
  const auto a = reinterpret_cast<uintptr_t>(h);
  uintptr_t lo = lo_.load(std::memory_order_relaxed);
  while (a < lo && !lo_.compare_exchange_weak(lo, a, std::memory_order_relaxed)) {
  }
  uintptr_t hi = hi_.load(std::memory_order_relaxed);
  while (a > hi && !hi_.compare_exchange_weak(hi, a, std::memory_order_relaxed)) {
  }
}

HandleMeta &HandleTable::Shard::slot_for(const void *handle) {
  const auto key = reinterpret_cast<uint64_t>(handle);
  if (uint32_t slot = index.find(key); slot != KeyIndex::kNone) return records[slot];
  uint32_t slot;
  if (!free.empty()) {
    slot = free.back();
    free.pop_back();
  } else {
    slot = (uint32_t)records.size();
    records.emplace_back();
  }
  index.insert(key, slot);
  return records[slot];
}

void HandleTable::erase(const void *handle) {
  Shard &s = shard(handle);
  std::lock_guard<std::mutex> lk(s.mu);
  uint32_t slot = s.index.erase(reinterpret_cast<uint64_t>(handle));
  if (slot == KeyIndex::kNone) return;
  // A tensor's or scalar's slot is left as it is for the next creation; an array's lets go of its values.
  if (!std::holds_alternative<TensorMeta>(s.records[slot]) && !std::holds_alternative<ScalarMeta>(s.records[slot]))
    s.records[slot] = ScalarMeta{};
  s.free.push_back(slot);
}

std::optional<HandleMeta> HandleTable::get(const void *handle) const {
  Shard &s = shard(handle);
  std::lock_guard<std::mutex> lk(s.mu);
  if (const HandleMeta *m = s.find(handle)) return *m;
  return std::nullopt;
}

void HandleTable::set_tensor_data(const void *handle, void *data) {
  Shard &s = shard(handle);
  std::lock_guard<std::mutex> lk(s.mu);
  if (HandleMeta *m = s.find(handle))
    if (auto *t = std::get_if<TensorMeta>(m)) t->data = data;
}

void HandleTable::set_member_data(const void *list, size_t index, void *data) {
  const void *member = nullptr;
  read(list, [&](const HandleMeta &m) {
    if (auto *v = std::get_if<std::vector<const void *>>(&m); v && index < v->size()) member = (*v)[index];
  });
  if (member != nullptr) set_tensor_data(member, data);
}

size_t HandleTable::size() const {
  size_t n = 0;
  for (auto &s : shards_) {
    std::lock_guard<std::mutex> lk(s.mu);
    n += s.index.size();
  }
  return n;
}

}  // namespace msprobe::shim
