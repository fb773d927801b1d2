#include "shim/device/handles.h"

namespace msprobe::shim {

int64_t TensorMeta::numel() const {
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= shape[i];
  return n;
}

bool TensorMeta::extent(int64_t *lo, int64_t *hi) const {
  int64_t a = offset, b = offset;
  for (int i = 0; i < ndim; ++i) {
    if (shape[i] <= 0) return false;
    int64_t span = (shape[i] - 1) * strides[i];
    (span > 0 ? b : a) += span;
  }
  *lo = a;
  *hi = b;
  return true;
}

namespace {
constexpr size_t kSpareNodes = 64;  // per shard
}  // namespace

void HandleTable::put(const void *handle, HandleMeta meta) {
  Shard &s = shard(handle);
  std::lock_guard<std::mutex> lk(s.mu);
  if (auto it = s.map.find(handle); it != s.map.end()) {
    it->second = std::move(meta);
  } else if (!s.spare.empty()) {
    auto node = std::move(s.spare.back());
    s.spare.pop_back();
    node.key() = handle;
    node.mapped() = std::move(meta);
    s.map.insert(std::move(node));
  } else {
    s.map.emplace(handle, std::move(meta));
  }
}

void HandleTable::erase(const void *handle) {
  Shard &s = shard(handle);
  std::lock_guard<std::mutex> lk(s.mu);
  auto node = s.map.extract(handle);
  if (!node.empty() && s.spare.size() < kSpareNodes) s.spare.push_back(std::move(node));
}

std::optional<HandleMeta> HandleTable::get(const void *handle) const {
  Shard &s = shard(handle);
  std::lock_guard<std::mutex> lk(s.mu);
  auto it = s.map.find(handle);
  if (it == s.map.end()) return std::nullopt;
  return it->second;
}

void HandleTable::set_tensor_data(const void *handle, void *data) {
  Shard &s = shard(handle);
  std::lock_guard<std::mutex> lk(s.mu);
  auto it = s.map.find(handle);
  if (it != s.map.end())
    if (auto *t = std::get_if<TensorMeta>(&it->second)) t->data = data;
}

size_t HandleTable::size() const {
  size_t n = 0;
  for (auto &s : shards_) {
    std::lock_guard<std::mutex> lk(s.mu);
    n += s.map.size();
  }
  return n;
}

HandleTable &handles() {
  static HandleTable *t = new HandleTable;  // immortal: destroys may arrive during exit
  return *t;
}

}  // namespace msprobe::shim
