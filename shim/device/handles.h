// What the host told the runtime about each aclnn argument object: recorded when aclCreateTensor,
// aclCreateScalar, ... return, forgotten when they are destroyed. Phase 1 of an op reads its
// arguments from here (the objects are opaque to the host and to us).
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <utility>
#include <variant>
#include <vector>

#include "shim/device/key_index.h"

namespace msprobe::shim {

constexpr int kMaxDims = 8;  // aclCreateTensor allows at most 8 view dimensions

struct TensorMeta {
  int32_t dtype = -1;   // aclDataType
  int32_t format = -1;  // aclFormat
  uint8_t ndim = 0;
  uint8_t storage_ndim = 0;
  std::array<int64_t, kMaxDims> shape{};
  std::array<int64_t, kMaxDims> strides{};  // elements
  std::array<int64_t, kMaxDims> storage{};
  int64_t offset = 0;    // elements from data
  void *data = nullptr;  // device address of the storage base

  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
  }
  // Smallest and largest element offsets (from data) the view touches; false for an empty view.
  bool extent(int64_t *lo, int64_t *hi) const {
    int64_t a = offset, b = offset;
    for (int i = 0; i < ndim; ++i) {
      if (shape[i] <= 0) return false;
      const int64_t span = (shape[i] - 1) * strides[i];
      (span > 0 ? b : a) += span;
    }
    *lo = a;
    *hi = b;
    return true;
  }
};

struct ScalarMeta {
  int32_t dtype = -1;
  std::array<unsigned char, 16> raw{};
};

using HandleMeta =
    std::variant<TensorMeta, ScalarMeta, std::vector<int64_t> /*IntArray*/, std::vector<float> /*FloatArray*/,
                 std::vector<bool> /*BoolArray*/, std::vector<const void *> /*TensorList or ScalarList members*/>;

// Thread-safe: objects are made on one thread (a framework's Python thread) and destroyed on another (its task
// queue). Recording one is a lock, a probe of a small open-addressing index and the record written in place into a
// slot the table keeps: no allocation once the table has grown to the host's working set.
class HandleTable {
 public:
  // Records `handle` with what `fill(HandleMeta &)` writes (under the shard's lock, into a slot that may hold an older
  // record of any kind: fill assigns a whole value, or emplaces one and fills it in place). `fill` must not throw.
  template <typename Fill>
  void put_with(const void *handle, Fill &&fill) {
    widen_range(handle);
    Shard &s = shard(handle);
    std::lock_guard<std::mutex> lk(s.mu);
    fill(s.slot_for(handle));
  }
  void put(const void *handle, HandleMeta meta) {
    put_with(handle, [&](HandleMeta &m) { m = std::move(meta); });
  }
  void erase(const void *handle);
  std::optional<HandleMeta> get(const void *handle) const;
  // Calls `read(const HandleMeta &)` with the record of `handle`, under its shard's lock (read must not throw or call
  // back into the table); false when there is none. Copies nothing: what read keeps is up to it.
  template <typename Read>
  bool read(const void *handle, Read &&read) const {
    Shard &s = shard(handle);
    std::lock_guard<std::mutex> lk(s.mu);
    const HandleMeta *m = s.find(handle);
    if (m != nullptr) read(*m);
    return m != nullptr;
  }
  // False when `p` cannot be a handle (outside every address ever recorded, or not 8-byte aligned): a word scanned for
  // handles (the header-less rule) is mostly stack and code addresses, which this turns away without a lock.
  bool may_hold(const void *p) const noexcept {
    const auto a = reinterpret_cast<uintptr_t>(p);
    return (a & 7) == 0 && a >= lo_.load(std::memory_order_relaxed) && a <= hi_.load(std::memory_order_relaxed);
  }
  // The record of a tensor; nullopt for an unknown handle or another kind of object.
  std::optional<TensorMeta> tensor(const void *handle) const {
    std::optional<TensorMeta> out;
    read(handle, [&](const HandleMeta &m) {
      if (auto *t = std::get_if<TensorMeta>(&m)) out = *t;
    });
    return out;
  }
  // Updates a tracked tensor's storage address (aclSetRawTensorAddr, aclSetTensorAddr).
  void set_tensor_data(const void *handle, void *data);
  // The same for member `index` of a tracked tensor list (aclSetDynamicTensorAddr).
  void set_member_data(const void *list, size_t index, void *data);
  size_t size() const;

 private:
  static constexpr size_t kShards = 16;
  struct Shard {
    mutable std::mutex mu;
    KeyIndex index;  // handle -> slot in `records`
    std::vector<HandleMeta> records;
    std::vector<uint32_t> free;  // slots of destroyed handles, for the next creation
    // The caller holds mu: the record of `handle`, a free slot's when it has none.
    HandleMeta &slot_for(const void *handle);
    HandleMeta *find(const void *handle) {
      uint32_t slot = index.find(reinterpret_cast<uint64_t>(handle));
      return slot == KeyIndex::kNone ? nullptr : &records[slot];
    }
  };
  Shard &shard(const void *h) const { return shards_[(reinterpret_cast<uintptr_t>(h) >> 4) % kShards]; }
  void widen_range(const void *h) noexcept;
  mutable std::array<Shard, kShards> shards_;
  std::atomic<uintptr_t> lo_{UINTPTR_MAX}, hi_{0};  // the span of every handle ever recorded (only grows)
};

// The process's table: made on first use, never destroyed (destroys may arrive during exit).
inline HandleTable &handles() {
  static HandleTable *t = new HandleTable;
  return *t;
}

}  // namespace msprobe::shim
