#include "shim/aclnn/op_call.h"

#include "shim/base/hash.h"

namespace msprobe::shim {

OpCall::OpCall(const OpCall &) = default;
OpCall &OpCall::operator=(const OpCall &) = default;
OpCall &OpCall::operator=(OpCall &&) noexcept = default;

void CallTable::put(const void *ex, OpCall call) {
  std::lock_guard<std::mutex> lk(mu_);
  call.serial = ++serial_;
  if (auto it = calls_.find(ex); it != calls_.end()) {
    it->second = std::move(call);
  } else if (!spare_.empty()) {
    auto node = std::move(spare_.back());
    spare_.pop_back();
    node.key() = ex;
    node.mapped() = std::move(call);
    calls_.insert(std::move(node));
  } else {
    calls_.emplace(ex, std::move(call));
  }
  size_.store(calls_.size(), std::memory_order_relaxed);
}

bool CallTable::contains(const void *ex) {
  if (size_.load(std::memory_order_relaxed) == 0) return false;
  std::lock_guard<std::mutex> lk(mu_);
  return calls_.count(ex) != 0;
}

std::optional<OpCall> CallTable::get(const void *ex) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = calls_.find(ex);
  if (it == calls_.end()) return std::nullopt;
  return it->second;
}

void CallTable::erase(const void *ex) {
  std::lock_guard<std::mutex> lk(mu_);
  if (auto it = calls_.find(ex); it != calls_.end()) drop(it);
  size_.store(calls_.size(), std::memory_order_relaxed);
}

void CallTable::erase_if(const void *ex, uint64_t serial) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = calls_.find(ex);
  if (it != calls_.end() && it->second.serial == serial) drop(it);
  size_.store(calls_.size(), std::memory_order_relaxed);
}

void CallTable::replace_undecoded(const void *ex, const OpCall &decoded) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = calls_.find(ex);
  if (it == calls_.end() || it->second.serial != decoded.serial || it->second.decoded()) return;
  const bool repeatable = it->second.repeatable;
  it->second = decoded;
  it->second.repeatable = repeatable;
}

void CallTable::drop(Map::iterator it) {
  auto node = calls_.extract(it);
  if (spare_.size() < kSpareNodes) spare_.push_back(std::move(node));
}

void KeptCalls::put(const ExecCacheKey &key, const OpCall &call) {
  std::lock_guard<std::mutex> lk(mu_);
  if (calls_.size() >= kLimit && calls_.find(key) == calls_.end()) calls_.clear();
  calls_.insert_or_assign(key, call);
}

std::optional<OpCall> KeptCalls::get(const ExecCacheKey &key) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = calls_.find(key);
  if (it == calls_.end()) return std::nullopt;
  return it->second;
}

void bind_cached_tensor(OpCall &c, size_t index, void *addr) {
  for (CallParam &p : c.params) {
    if (!is_tensor_kind(p.kind) || !p.present) continue;
    if (index < p.tensors.size()) {
      p.tensors[index].data = addr;
      if (index < p.handles.size()) p.handles[index] = nullptr;  // the address is the cache's now, not the handle's
      return;
    }
    index -= p.tensors.size();
  }
}

ExecCacheKey ExecCacheKey::of_hash(uint64_t hash) { return hash == 0 ? ExecCacheKey{} : ExecCacheKey{Hash, hash, 0}; }

ExecCacheKey ExecCacheKey::of_bytes(const void *buf, size_t len) {
  if (buf == nullptr || len == 0) return {};
  // Two 64-bit FNV-1a digests from independent offsets: a collision of both is as likely as of a 128-bit hash.
  return {Bytes, fnv1a64(buf, len), fnv1a64(buf, len, kFnv1aOffset ^ (len * 0x9e3779b97f4a7c15ull))};
}

}  // namespace msprobe::shim
