// What the host told the runtime about each aclnn argument object: recorded when aclCreateTensor,
// aclCreateScalar, ... return, forgotten when they are destroyed. Phase 1 of an op reads its
// arguments from here (the objects are opaque to the host and to us).
#pragma once
#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <variant>
#include <vector>

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

  int64_t numel() const;
  // Smallest and largest element offsets (from data) the view touches; false for an empty view.
  bool extent(int64_t *lo, int64_t *hi) const;
};

struct ScalarMeta {
  int32_t dtype = -1;
  std::array<unsigned char, 16> raw{};
};

using HandleMeta =
    std::variant<TensorMeta, ScalarMeta, std::vector<int64_t> /*IntArray*/, std::vector<float> /*FloatArray*/,
                 std::vector<bool> /*BoolArray*/, std::vector<const void *> /*TensorList or ScalarList members*/>;

class HandleTable {
 public:
  void put(const void *handle, HandleMeta meta);
  void erase(const void *handle);
  std::optional<HandleMeta> get(const void *handle) const;
  // Updates a tracked tensor's storage address (aclSetRawTensorAddr, aclSetTensorAddr).
  void set_tensor_data(const void *handle, void *data);
  size_t size() const;

 private:
  static constexpr size_t kShards = 16;
  struct Shard {
    mutable std::mutex mu;
    std::unordered_map<const void *, HandleMeta> map;
    // Nodes of handles destroyed, for the next creation: handles are made on one thread (a framework's Python
    // thread) and destroyed on another (its task queue), where a node made on one and freed on the other costs
    // the allocator's slow path every time.
    std::vector<std::unordered_map<const void *, HandleMeta>::node_type> spare;
  };
  Shard &shard(const void *h) const { return shards_[(reinterpret_cast<uintptr_t>(h) >> 4) % kShards]; }
  mutable std::array<Shard, kShards> shards_;
};

HandleTable &handles();

}  // namespace msprobe::shim
