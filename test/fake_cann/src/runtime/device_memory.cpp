// Device memory: a PROT_NONE reservation that hands out device addresses, and a read/write alias of
// the same size at another address. Device address d maps to alias + (d - base). Only the runtime's
// copies and kernels translate; anything else dereferencing d faults.
#include <pthread.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

#include "fakecann/device.h"

namespace fakecann {
namespace {

constexpr uint64_t kAlign = 512;

struct Arena {
  char *device_base = nullptr;
  char *alias_base = nullptr;
  uint64_t size = 0;
  std::mutex mu;
  std::map<uint64_t, uint64_t> live;  // offset -> requested size
  std::map<uint64_t, uint64_t> free;  // offset -> capacity (aligned), coalesced
  std::map<uint64_t, uint64_t> reserved;  // offset -> capacity: address space of aclrtReserveMemAddress
  uint64_t used = 0;
};

uint64_t arena_size() {
  const char *gb = std::getenv("FAKE_CANN_DEVICE_MEMORY_GB");
  uint64_t g = gb ? std::strtoull(gb, nullptr, 10) : 16;
  if (g == 0 || g > 1024) g = 16;
  return g << 30;
}

Arena &arena() {
  // Leaked on purpose: device memory must outlive every static destructor that may still free.
  static Arena *a = [] {
    auto *ar = new Arena;
    ar->size = arena_size();
    void *dev = mmap(nullptr, ar->size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    void *alias = mmap(nullptr, ar->size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (dev == MAP_FAILED || alias == MAP_FAILED) {
      std::fprintf(stderr, "[fake_cann] cannot reserve %llu bytes of device memory\n", (unsigned long long)ar->size);
      ar->size = 0;
      return ar;
    }
    ar->device_base = static_cast<char *>(dev);
    ar->alias_base = static_cast<char *>(alias);
    ar->free[0] = ar->size;
    // A host may fork while a stream worker translates a device address under mu: the child would inherit the lock
    // held by a thread it does not have, and hang in its first allocation. Hold mu across fork().
    pthread_atfork([] { arena().mu.lock(); }, [] { arena().mu.unlock(); }, [] { arena().mu.unlock(); });
    return ar;
  }();
  return *a;
}

uint64_t round_up(uint64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// The live allocation containing offset `off`, or live.end().
std::map<uint64_t, uint64_t>::iterator find_live(Arena &a, uint64_t off) {
  auto it = a.live.upper_bound(off);
  if (it == a.live.begin()) return a.live.end();
  --it;
  if (off < it->first + round_up(it->second)) return it;
  return a.live.end();
}

}  // namespace

void *device_alloc(uint64_t size) {
  Arena &a = arena();
  if (size == 0 || a.size == 0) return nullptr;
  uint64_t need = round_up(size);
  std::lock_guard<std::mutex> lk(a.mu);
  for (auto it = a.free.begin(); it != a.free.end(); ++it) {  // first fit
    if (it->second < need) continue;
    uint64_t off = it->first, cap = it->second;
    a.free.erase(it);
    if (cap > need) a.free[off + need] = cap - need;
    a.live[off] = size;
    a.used += need;
    return a.device_base + off;
  }
  return nullptr;
}

void *device_alloc_high(uint64_t size) {
  Arena &a = arena();
  if (size == 0 || a.size == 0) return nullptr;
  uint64_t need = round_up(size);
  std::lock_guard<std::mutex> lk(a.mu);
  for (auto it = a.free.rbegin(); it != a.free.rend(); ++it) {  // last fit, from the block's top
    if (it->second < need) continue;
    uint64_t off = it->first + it->second - need;
    if (it->second == need)
      a.free.erase(std::next(it).base());
    else
      it->second -= need;
    a.live[off] = size;
    a.used += need;
    return a.device_base + off;
  }
  return nullptr;
}

namespace {

// Takes [off, off+cap) out of the free space (it must lie in one free block). Under a.mu.
bool take_free(Arena &a, uint64_t off, uint64_t cap) {
  auto it = a.free.upper_bound(off);
  if (it == a.free.begin()) return false;
  --it;
  const uint64_t start = it->first, len = it->second;
  if (off < start || off + cap > start + len) return false;
  a.free.erase(it);
  if (off > start) a.free[start] = off - start;
  if (off + cap < start + len) a.free[off + cap] = start + len - off - cap;
  return true;
}

// Gives [off, off+cap) back to the free space, merged with its neighbours. Under a.mu.
void give_free(Arena &a, uint64_t off, uint64_t cap) {
  auto next = a.free.lower_bound(off);
  if (next != a.free.end() && off + cap == next->first) {
    cap += next->second;
    a.free.erase(next);
  }
  auto prev = a.free.lower_bound(off);
  if (prev != a.free.begin()) {
    --prev;
    if (prev->first + prev->second == off) {
      prev->second += cap;
      return;
    }
  }
  a.free[off] = cap;
}

}  // namespace

void *device_reserve(uint64_t size, uint64_t alignment) {
  Arena &a = arena();
  if (size == 0 || a.size == 0) return nullptr;
  const uint64_t align = std::max<uint64_t>(alignment, kAlign), need = round_up(size);
  std::lock_guard<std::mutex> lk(a.mu);
  for (auto &[off, cap] : a.free) {
    const uint64_t start = (off + align - 1) / align * align;
    if (start + need > off + cap) continue;
    if (!take_free(a, start, need)) return nullptr;
    a.reserved[start] = need;
    return a.device_base + start;
  }
  return nullptr;
}

bool device_release(void *ptr) {
  Arena &a = arena();
  if (!in_device_range(ptr)) return false;
  const uint64_t off = static_cast<char *>(ptr) - a.device_base;
  std::lock_guard<std::mutex> lk(a.mu);
  auto it = a.reserved.find(off);
  if (it == a.reserved.end()) return false;
  auto live = a.live.lower_bound(off);
  if (live != a.live.end() && live->first < off + it->second) return false;  // still mapped
  give_free(a, off, it->second);
  a.reserved.erase(it);
  return true;
}

bool device_map(void *ptr, uint64_t size) {
  Arena &a = arena();
  if (size == 0 || !in_device_range(ptr)) return false;
  const uint64_t off = static_cast<char *>(ptr) - a.device_base;
  std::lock_guard<std::mutex> lk(a.mu);
  auto r = a.reserved.upper_bound(off);
  if (r == a.reserved.begin()) return false;
  --r;
  if (off < r->first || off + size > r->first + r->second) return false;  // not inside one reservation
  auto live = a.live.upper_bound(off);
  if (live != a.live.begin() && std::prev(live)->first + round_up(std::prev(live)->second) > off) return false;
  if (live != a.live.end() && live->first < off + size) return false;  // overlaps a mapping
  a.live[off] = size;
  a.used += round_up(size);
  return true;
}

bool device_unmap(void *ptr, uint64_t *size) {
  Arena &a = arena();
  if (!in_device_range(ptr)) return false;
  const uint64_t off = static_cast<char *>(ptr) - a.device_base;
  std::lock_guard<std::mutex> lk(a.mu);
  auto it = a.live.find(off);
  if (it == a.live.end()) return false;
  auto r = a.reserved.upper_bound(off);
  if (r == a.reserved.begin() || std::prev(r)->first + std::prev(r)->second <= off) return false;  // not a mapping
  if (size != nullptr) *size = it->second;
  a.used -= round_up(it->second);
  a.live.erase(it);
  return true;
}

bool device_free(void *ptr) {
  Arena &a = arena();
  if (!in_device_range(ptr)) return false;
  uint64_t off = static_cast<char *>(ptr) - a.device_base;
  std::lock_guard<std::mutex> lk(a.mu);
  auto it = a.live.find(off);
  if (it == a.live.end()) return false;
  auto r = a.reserved.upper_bound(off);
  if (r != a.reserved.begin() && std::prev(r)->first + std::prev(r)->second > off) return false;  // a mapping
  uint64_t cap = round_up(it->second);
  a.live.erase(it);
  a.used -= cap;
  // Give whole pages back to the OS so long runs do not grow without bound.
  uint64_t page = 4096, lo = (off + page - 1) / page * page, hi = (off + cap) / page * page;
  if (hi > lo) madvise(a.alias_base + lo, hi - lo, MADV_DONTNEED);
  give_free(a, off, cap);
  return true;
}

bool in_device_range(const void *ptr) {
  Arena &a = arena();
  const char *p = static_cast<const char *>(ptr);
  return a.size != 0 && p >= a.device_base && p < a.device_base + a.size;
}

void *device_host_alias(const void *ptr, uint64_t bytes) {
  Arena &a = arena();
  if (!in_device_range(ptr)) return nullptr;
  uint64_t off = static_cast<const char *>(ptr) - a.device_base;
  std::lock_guard<std::mutex> lk(a.mu);
  auto it = find_live(a, off);
  if (it == a.live.end()) return nullptr;
  if (off + bytes > it->first + it->second) return nullptr;  // beyond the requested size
  return a.alias_base + off;
}

bool device_allocation_of(const void *ptr, void **base, uint64_t *size) {
  Arena &a = arena();
  if (!in_device_range(ptr)) return false;
  uint64_t off = static_cast<const char *>(ptr) - a.device_base;
  std::lock_guard<std::mutex> lk(a.mu);
  auto it = find_live(a, off);
  if (it == a.live.end() || off >= it->first + it->second) return false;
  if (base) *base = a.device_base + it->first;
  if (size) *size = it->second;
  return true;
}

uint64_t device_total_bytes() { return arena().size; }

uint64_t device_used_bytes() {
  Arena &a = arena();
  std::lock_guard<std::mutex> lk(a.mu);
  return a.used;
}

CopyCounters &copy_counters() {
  static CopyCounters *c = new CopyCounters;
  return *c;
}

}  // namespace fakecann
