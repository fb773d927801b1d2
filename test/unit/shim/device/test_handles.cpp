// The handle table (shim/device/handles.h): what aclCreateTensor, aclCreateScalar, ... recorded, by object address;
// records replaced, forgotten and their slots reused; many objects; made on one thread and destroyed on another.
#include "shim/device/handles.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

using msprobe::shim::HandleMeta;
using msprobe::shim::HandleTable;
using msprobe::shim::ScalarMeta;
using msprobe::shim::TensorMeta;

namespace {

const void *at(uint64_t a) { return reinterpret_cast<const void *>(a); }

TensorMeta tensor(int64_t n, void *data) {
  TensorMeta m;
  m.dtype = 0;
  m.ndim = 1;
  m.shape[0] = n;
  m.strides[0] = 1;
  m.data = data;
  return m;
}

int64_t first_dim(const HandleTable &t, const void *h) {
  auto m = t.get(h);
  if (!m || !std::holds_alternative<TensorMeta>(*m)) return -1;
  return std::get<TensorMeta>(*m).shape[0];
}

}  // namespace

TEST(HandleTable, RecordsEachKindAndForgetsWhatIsDestroyed) {
  HandleTable t;
  t.put(at(0x1000), tensor(4, nullptr));
  ScalarMeta s;
  s.dtype = 3;
  s.raw[0] = 7;
  t.put(at(0x2000), s);
  t.put(at(0x3000), std::vector<int64_t>{1, 2, 3});
  t.put(at(0x4000), std::vector<const void *>{at(0x1000)});
  EXPECT_EQ(t.size(), 4u);
  EXPECT_EQ(first_dim(t, at(0x1000)), 4);
  EXPECT_EQ(std::get<ScalarMeta>(*t.get(at(0x2000))).raw[0], 7);
  EXPECT_EQ(std::get<std::vector<int64_t>>(*t.get(at(0x3000))), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(std::get<std::vector<const void *>>(*t.get(at(0x4000))).size(), 1u);
  EXPECT_FALSE(t.get(at(0x5000)));
  t.erase(at(0x3000));
  t.erase(at(0x5000));  // never made: nothing happens
  EXPECT_FALSE(t.get(at(0x3000)));
  EXPECT_EQ(t.size(), 3u);
}

TEST(HandleTable, AHandleMadeAgainHasItsNewRecordInAReusedSlot) {
  HandleTable t;
  t.put(at(0x1000), std::vector<int64_t>{9, 9});
  t.erase(at(0x1000));
  // The freed slot held an array: a tensor written in place over it is whole.
  t.put_with(at(0x2000), [](HandleMeta &m) {
    TensorMeta &tm = m.emplace<TensorMeta>();
    tm.ndim = 1;
    tm.shape[0] = 5;
  });
  EXPECT_EQ(first_dim(t, at(0x2000)), 5);
  EXPECT_EQ(std::get<TensorMeta>(*t.get(at(0x2000))).strides[1], 0);
  t.put(at(0x2000), tensor(6, nullptr));  // made again without a destroy seen: replaced
  EXPECT_EQ(first_dim(t, at(0x2000)), 6);
  t.set_tensor_data(at(0x2000), reinterpret_cast<void *>(0x99));
  EXPECT_EQ(std::get<TensorMeta>(*t.get(at(0x2000))).data, reinterpret_cast<void *>(0x99));
  EXPECT_EQ(t.size(), 1u);
}

TEST(HandleTable, ManyHandlesSurviveGrowthAndEveryOtherDestroy) {
  HandleTable t;
  constexpr uint64_t kN = 20000;
  for (uint64_t i = 1; i <= kN; ++i) t.put(at(i * 16), tensor((int64_t)i, nullptr));
  EXPECT_EQ(t.size(), kN);
  for (uint64_t i = 1; i <= kN; i += 2) t.erase(at(i * 16));
  EXPECT_EQ(t.size(), kN / 2);
  int wrong = 0;
  for (uint64_t i = 1; i <= kN; ++i) wrong += first_dim(t, at(i * 16)) != (i % 2 ? -1 : (int64_t)i);
  EXPECT_EQ(wrong, 0);
}

TEST(HandleTable, MadeOnOneThreadAndDestroyedOnAnother) {
  // A framework's Python thread makes the objects, its task queue reads and destroys them after phase 2 (the slots
  // the queue frees are the maker's next ones).
  HandleTable t;
  constexpr int kRounds = 50000;
  std::atomic<int> made{0}, errors{0};
  std::thread maker([&] {
    for (int i = 0; i < kRounds; ++i) {
      t.put(at(0x100000 + (uint64_t)i * 16), tensor(i, nullptr));
      made.store(i + 1, std::memory_order_release);
    }
  });
  std::thread queue([&] {
    for (int i = 0; i < kRounds; ++i) {
      while (made.load(std::memory_order_acquire) <= i) std::this_thread::yield();
      if (first_dim(t, at(0x100000 + (uint64_t)i * 16)) != i) ++errors;
      t.erase(at(0x100000 + (uint64_t)i * 16));
    }
  });
  maker.join();
  queue.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(t.size(), 0u);
}
