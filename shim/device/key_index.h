// A map from a nonzero 64-bit key (an address) to a 32-bit slot number, for tables that keep their records in a
// vector of slots: open addressing with linear probing, deletion by backward shift (no tombstones), doubling at 3/4
// full. An insert or erase is a few instructions and, once the table has grown to its working size, no allocation
// (unlike a node-based map, whose nodes made on one thread and freed on another cost the allocator's slow path).
// Not thread-safe: its owner locks.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace msprobe::shim {

class KeyIndex {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;

  // The slot of `key`, or kNone.
  uint32_t find(uint64_t key) const {
    if (size_ == 0) return kNone;
    for (size_t i = home(key);; i = (i + 1) & mask_) {
      if (entries_[i].key == key) return entries_[i].slot;
      if (entries_[i].key == 0) return kNone;
    }
  }
  // `key` (nonzero, not in the index) now names `slot`. May allocate (growth).
  void insert(uint64_t key, uint32_t slot) {
    if ((size_ + 1) * 4 > entries_.size() * 3) grow();
    place(key, slot);
    ++size_;
  }
  // Forgets `key`; its slot, or kNone.
  uint32_t erase(uint64_t key) {
    if (size_ == 0) return kNone;
    size_t i = home(key);
    for (;; i = (i + 1) & mask_) {
      if (entries_[i].key == key) break;
      if (entries_[i].key == 0) return kNone;
    }
    const uint32_t slot = entries_[i].slot;
    // Backward shift: every entry after the hole that may sit in it (its home is not between the hole and it) moves
    // back, so that no probe sequence crosses an empty entry before reaching its key.
    for (size_t j = (i + 1) & mask_;; j = (j + 1) & mask_) {
      if (entries_[j].key == 0) break;
      const size_t h = home(entries_[j].key);
      if (((j - h) & mask_) >= ((j - i) & mask_)) {
        entries_[i] = entries_[j];
        i = j;
      }
    }
    entries_[i] = Entry{};
    --size_;
    return slot;
  }
  size_t size() const { return size_; }
  void clear() {
    entries_.clear();
    size_ = 0;
    mask_ = 0;
  }
  // Calls f(key, slot) for every entry.
  template <typename F>
  void for_each(F &&f) const {
    for (const Entry &e : entries_)
      if (e.key != 0) f(e.key, e.slot);
  }

 private:
  struct Entry {
    uint64_t key = 0;
    uint32_t slot = 0;
  };
  size_t home(uint64_t key) const { return (size_t)((key * 0x9e3779b97f4a7c15ull) >> 32) & mask_; }
  void place(uint64_t key, uint32_t slot) {
    size_t i = home(key);
    while (entries_[i].key != 0) i = (i + 1) & mask_;
    entries_[i] = Entry{key, slot};
  }
  void grow() {
    std::vector<Entry> old;
    old.swap(entries_);
    entries_.resize(old.empty() ? 64 : old.size() * 2);
    mask_ = entries_.size() - 1;
    for (const Entry &e : old)
      if (e.key != 0) place(e.key, e.slot);
  }
  std::vector<Entry> entries_;
  size_t size_ = 0;
  size_t mask_ = 0;
};

}  // namespace msprobe::shim
