#pragma once
// The references the host holds on ACL and on each device (shim/hooks/runtime.cpp says why the shim counts them): the
// device hooks add them, the runtime hooks drop them.
#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace msprobe::shim {

inline constexpr int32_t kAclReference = -1;  // the key of ACL's own count beside the devices'

// The references the host holds, by device (kAclReference: aclInit's). Made on first use and never destroyed: hooks run
// after exit handlers.
class References {
 public:
  void add(int32_t key) {
    std::lock_guard<std::mutex> lk(mu_);
    ++counts_[key];
  }
  void set(int32_t key, uint64_t n) {
    std::lock_guard<std::mutex> lk(mu_);
    counts_[key] = n;
  }
  // Whether dropping one reference now ends it (the last one, or none seen).
  bool last(int32_t key) {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = counts_.find(key);
    return it == counts_.end() || it->second <= 1;
  }
  void drop(int32_t key) {
    std::lock_guard<std::mutex> lk(mu_);
    if (auto it = counts_.find(key); it != counts_.end() && it->second > 0) --it->second;
  }

 private:
  std::mutex mu_;
  std::unordered_map<int32_t, uint64_t> counts_;
};

inline References &references() {
  static References *r = new References;
  return *r;
}

}  // namespace msprobe::shim
