// IPC events (runtime core/src/event/ipc_event.cc): an event made by aclrtCreateEventExWithFlag(ACL_EVENT_IPC) keeps
// its state in memory every process that opens its handle shares: 8192 slots, each a flag byte and a count of the
// record and wait tasks that use it, and the current slot. A record takes the first free slot (count 0), makes it
// current and counts itself; its task sets the slot's flag. A wait on a current slot with no tasks left (the record
// done, or none) is no task at all, else it counts itself and its task waits for the flag. A task done uncounts itself;
// the last one clears the flag. An event is recorded (query, synchronize) when its current slot has no tasks or its
// flag is set. CANN shares device memory through the driver; the stand-in shares a POSIX shared memory object named by
// the handle (its first 8 bytes: the creator's process id and a count), unlinked when the creator destroys the event.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <string>

#include "fakecann/stream.h"
#include "stream_impl.h"

namespace fakecann {

constexpr uint32_t kIpcSlots = 8192;  // IPC_EVENT_P2P_SIZE
constexpr uint32_t kIpcFlag = 0x40;   // ACL_EVENT_IPC

struct IpcShared {
  std::atomic<uint32_t> lock;
  uint32_t current;
  uint32_t users[kIpcSlots];
  std::atomic<uint8_t> flag[kIpcSlots];
};

namespace {

std::atomic<uint32_t> g_next_ipc{0};

// The shared memory's file under /dev/shm, opened with open(2) rather than shm_open(3), which lives in librt before
// glibc 2.34: the stand-in also runs on Debian 11 (scripts/test_compat.sh) without a librt dependency.
std::string shm_name(uint64_t id) {
  char name[64];
  std::snprintf(name, sizeof(name), "/dev/shm/fake_cann_ipc_event_%016llx", (unsigned long long)id);
  return name;
}

IpcShared *map_shared(uint64_t id, bool create) {
  const std::string name = shm_name(id);
  const int fd = ::open(name.c_str(), (create ? (O_RDWR | O_CREAT | O_EXCL) : O_RDWR) | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return nullptr;
  if (create && ftruncate(fd, sizeof(IpcShared)) != 0) {
    close(fd);
    ::unlink(name.c_str());
    return nullptr;
  }
  void *p = mmap(nullptr, sizeof(IpcShared), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  return p == MAP_FAILED ? nullptr : static_cast<IpcShared *>(p);  // a new object is zero-filled
}

struct Locked {
  explicit Locked(IpcShared *s) : s_(s) {
    uint32_t free = 0;
    while (!s_->lock.compare_exchange_weak(free, 1, std::memory_order_acquire)) free = 0;
  }
  ~Locked() { s_->lock.store(0, std::memory_order_release); }
  IpcShared *s_;
};

// A task of slot `i` is done: the last one clears the flag.
void unuse(IpcShared *s, uint32_t i) {
  Locked l(s);
  if (s->users[i] > 0 && --s->users[i] == 0) s->flag[i].store(0);
}

}  // namespace

Event *ipc_event_create() {
  const uint64_t id = (uint64_t)getpid() << 24 | (g_next_ipc.fetch_add(1) & 0xFFFFFF);
  IpcShared *s = map_shared(id, true);
  if (s == nullptr) return nullptr;
  Event *e = event_create(kIpcFlag, true);
  e->ipc = s;
  e->ipc_id = id;
  e->ipc_creator = true;
  return e;
}

Event *ipc_event_open(uint64_t handle) {
  IpcShared *s = handle == 0 ? nullptr : map_shared(handle, false);
  if (s == nullptr) return nullptr;
  Event *e = event_create(kIpcFlag, true);
  e->ipc = s;
  e->ipc_id = handle;
  return e;
}

uint64_t ipc_event_handle(Event *e) { return e->ipc != nullptr ? e->ipc_id : 0; }

// The mapping stays (tasks already enqueued may still use it, as the event itself stays); the creator's destroy
// removes the name, so that no process opens it any more.
void ipc_release(Event *e) {
  if (e->ipc != nullptr && e->ipc_creator) ::unlink(shm_name(e->ipc_id).c_str());
}

void ipc_record(Event *e, Stream *s) {
  IpcShared *sh = e->ipc;
  uint32_t slot;
  {
    Locked l(sh);
    slot = 0;
    while (sh->users[slot] != 0) slot = (slot + 1) % kIpcSlots;
    sh->current = slot;
    ++sh->users[slot];
  }
  stream_enqueue(
      s,
      [sh, slot] {
        sh->flag[slot].store(1);
        unuse(sh, slot);
      },
      "IPC_RECORD");
}

void ipc_wait(Event *e, Stream *s) {
  IpcShared *sh = e->ipc;
  uint32_t slot;
  {
    Locked l(sh);
    slot = sh->current;
    if (sh->users[slot] == 0) return;  // recorded already, or never: nothing to wait for
    ++sh->users[slot];
  }
  stream_enqueue(
      s,
      [sh, slot] {
        worker_wait_until([&] { return sh->flag[slot].load() != 0; });
        unuse(sh, slot);
      },
      "IPC_WAIT");
}

bool ipc_recorded(Event *e) {
  IpcShared *sh = e->ipc;
  Locked l(sh);
  return sh->users[sh->current] == 0 || sh->flag[sh->current].load() != 0;
}

void ipc_synchronize(Event *e) {
  while (!ipc_recorded(e)) usleep(100);
}

}  // namespace fakecann
