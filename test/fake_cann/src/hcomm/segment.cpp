// Rendezvous, barrier and liveness of a communicator's shared segment (see segment.h).
#include "segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>

#include "fakecann/stream.h"

namespace fakecann::hccl {

namespace {

using namespace std::chrono_literals;

constexpr uint32_t kMagic = 0x4c434348;  // "HCCL"
constexpr uint32_t kVersion = 1;
// Lock byte that keeps joiners and stale-file reapers apart (rank r's liveness lock is byte r).
constexpr off_t kGuardByte = kMaxRanks;
constexpr const char *kShmDir = "/dev/shm/";

static_assert(std::atomic<uint32_t>::is_always_lock_free, "shared-memory atomics must be lock-free");

struct alignas(64) RankEntry {
  std::atomic<uint32_t> joined{0};
  int32_t pid = 0;
  CollDesc desc;
};

uint64_t round_up(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

void futex_wait(std::atomic<uint32_t> *word, uint32_t seen, std::chrono::nanoseconds timeout) {
  timespec ts{static_cast<time_t>(timeout.count() / 1000000000), static_cast<long>(timeout.count() % 1000000000)};
  // Not FUTEX_PRIVATE: the word lives in memory shared with other processes.
  syscall(SYS_futex, reinterpret_cast<uint32_t *>(word), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

void futex_wake(std::atomic<uint32_t> *word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t *>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// Open-file-description locks: owned by the fd (not the process), released when the process dies.
int ofd_lock(int fd, short type, off_t start, bool wait) {
  struct flock fl {};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = start;
  fl.l_len = 1;
  int r;
  do {
    r = fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl);
  } while (r != 0 && wait && errno == EINTR);
  return r;
}

// True if another open file description holds a lock in [start, start+len).
bool locked_by_other(int fd, off_t start, off_t len) {
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = start;
  fl.l_len = len;
  if (fcntl(fd, F_OFD_GETLK, &fl) != 0) return true;  // cannot tell: assume alive
  return fl.l_type != F_UNLCK;
}

bool names_this_file(const std::string &path, int fd) {
  struct stat a {
  }, b{};
  return stat(path.c_str(), &a) == 0 && fstat(fd, &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev;
}

// Removes `path` if it is still the file `ino` and nobody is in it any more.
void reap_if_abandoned(const std::string &path, ino_t ino) {
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return;
  struct stat st {};
  if (fstat(fd, &st) == 0 && st.st_ino == ino && ofd_lock(fd, F_WRLCK, kGuardByte, false) == 0) {
    if (!locked_by_other(fd, 0, kMaxRanks) && names_this_file(path, fd)) unlink(path.c_str());
  }
  close(fd);  // drops the guard lock
}

// Rendezvous files of runs killed while joining (SIGKILL leaves no chance to clean up) are removed by
// the next rendezvous on the machine: nobody holds a lock in them any more.
void sweep_abandoned() {
  DIR *d = opendir(kShmDir);
  if (d == nullptr) return;
  while (dirent *e = readdir(d)) {
    std::string n = e->d_name;
    if (n.rfind("fakehccl-", 0) != 0) continue;
    std::string path = kShmDir + n;
    if (size_t t = n.find(".tmp"); t != std::string::npos) {  // "<name>.tmp<pid>.<n>": half-built by <pid>
      long pid = std::strtol(n.c_str() + t + 4, nullptr, 10);
      if (pid > 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH) unlink(path.c_str());
      continue;
    }
    struct stat st {};
    if (stat(path.c_str(), &st) == 0) reap_if_abandoned(path, st.st_ino);
  }
  closedir(d);
}

uint64_t choose_slot_bytes(uint32_t nranks) {
  // Bounded total staging (tmpfs pages are reserved up front with fallocate).
  uint64_t s = std::clamp<uint64_t>((32ull << 20) / nranks, 64ull << 10, 4ull << 20);
  if (const char *e = std::getenv("FAKE_HCCL_SLOT_BYTES")) {  // stand-in knob: tests force chunking
    uint64_t v = std::strtoull(e, nullptr, 10);
    if (v > 0) s = v;
  }
  // ReduceScatter stages one element per rank per chunk at least.
  return round_up(std::max<uint64_t>(s, 16ull * nranks), 64);
}

std::string errno_text(const char *what) { return std::string(what) + ": " + std::strerror(errno); }

}  // namespace

struct alignas(64) Header {
  uint32_t magic = 0, version = 0, nranks = 0, reserved = 0;
  uint64_t slot_bytes = 0, entries_offset = 0, data_offset = 0, total_bytes = 0;
  alignas(64) std::atomic<uint32_t> joined_count{0};
  std::atomic<uint32_t> complete{0};
  std::atomic<uint32_t> broken{0};  // (Broken << 16) | rank that broke it; 0 while usable
  alignas(64) std::atomic<uint32_t> bar_arrived{0};
  alignas(64) std::atomic<uint32_t> bar_gen{0};
};

namespace {

RankEntry *entries(Header *h) { return reinterpret_cast<RankEntry *>(reinterpret_cast<char *>(h) + h->entries_offset); }

}  // namespace

Segment::~Segment() {
  if (base_ != nullptr) munmap(base_, size_);
  if (fd_ >= 0) close(fd_);  // releases this rank's liveness lock
}

uint64_t Segment::slot_bytes() const { return hdr_->slot_bytes; }
char *Segment::slot(uint32_t r) const {
  return static_cast<char *>(base_) + hdr_->data_offset + (uint64_t)r * hdr_->slot_bytes;
}
CollDesc &Segment::desc(uint32_t r) const { return entries(hdr_)[r].desc; }

Segment::Step Segment::create(const std::string &path, HcclResult *res, std::string *err) {
  // Built under a private name and published with link(), so a visible rendezvous file is always
  // complete and already holds the creator's liveness lock.
  static std::atomic<uint64_t> counter{0};
  std::string tmp = path + ".tmp" + std::to_string(getpid()) + "." + std::to_string(counter.fetch_add(1));
  fd_ = open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd_ < 0) {
    *err = errno_text("cannot create the rendezvous file");
    *res = HCCL_E_SYSCALL;
    return Step::Fail;
  }
  uint64_t slot = choose_slot_bytes(nranks_);
  uint64_t entries_off = round_up(sizeof(Header), 64);
  uint64_t data_off = round_up(entries_off + nranks_ * sizeof(RankEntry), 4096);
  size_ = data_off + nranks_ * slot;
  auto fail = [&](HcclResult r, const std::string &msg) {
    *err = msg;
    *res = r;
    unlink(tmp.c_str());
    return Step::Fail;
  };
  if (int e = posix_fallocate(fd_, 0, (off_t)size_); e != 0)
    return fail(HCCL_E_MEMORY, std::string("cannot reserve shared memory: ") + std::strerror(e));
  base_ = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (base_ == MAP_FAILED) {
    base_ = nullptr;
    return fail(HCCL_E_MEMORY, errno_text("cannot map shared memory"));
  }
  hdr_ = new (base_) Header;
  hdr_->magic = kMagic;
  hdr_->version = kVersion;
  hdr_->nranks = nranks_;
  hdr_->slot_bytes = slot;
  hdr_->entries_offset = entries_off;
  hdr_->data_offset = data_off;
  hdr_->total_bytes = size_;
  for (uint32_t r = 0; r < nranks_; ++r) new (&entries(hdr_)[r]) RankEntry;
  if (ofd_lock(fd_, F_WRLCK, rank_, false) != 0) return fail(HCCL_E_SYSCALL, errno_text("cannot lock"));
  if (link(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    unlink(tmp.c_str());
    if (e == EEXIST) return Step::Retry;  // another rank published first: join theirs
    *err = std::string("cannot publish the rendezvous file: ") + std::strerror(e);
    *res = HCCL_E_SYSCALL;
    return Step::Fail;
  }
  unlink(tmp.c_str());
  return Step::Ready;
}

Segment::Step Segment::open_existing(const std::string &path, HcclResult *res, std::string *err) {
  fd_ = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd_ < 0) {
    if (errno == ENOENT) return Step::Absent;
    *err = errno_text("cannot open the rendezvous file");
    *res = HCCL_E_SYSCALL;
    return Step::Fail;
  }
  struct stat st {};
  if (fstat(fd_, &st) != 0 || (uint64_t)st.st_size < sizeof(Header)) {
    *err = "'" + path + "' is not a rendezvous file of this HCCL";
    *res = HCCL_E_INTERNAL;
    return Step::Fail;
  }
  size_ = (uint64_t)st.st_size;
  base_ = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (base_ == MAP_FAILED) {
    base_ = nullptr;
    *err = errno_text("cannot map shared memory");
    *res = HCCL_E_MEMORY;
    return Step::Fail;
  }
  hdr_ = static_cast<Header *>(base_);
  if (hdr_->magic != kMagic || hdr_->version != kVersion || hdr_->total_bytes != size_) {
    *err = "'" + path + "' is not a rendezvous file of this HCCL";
    *res = HCCL_E_INTERNAL;
    return Step::Fail;
  }
  // Stale check: with the guard held exclusively, no joiner can be between "looked" and "locked".
  if (ofd_lock(fd_, F_WRLCK, kGuardByte, false) == 0) {
    if (!locked_by_other(fd_, 0, kMaxRanks)) {  // every rank in it is gone: left by a crashed run
      if (names_this_file(path, fd_)) unlink(path.c_str());
      return Step::Retry;  // the destructor drops the guard
    }
    ofd_lock(fd_, F_RDLCK, kGuardByte, false);  // atomic downgrade: let other joiners in
  } else {
    ofd_lock(fd_, F_RDLCK, kGuardByte, true);  // a reaper or joiners hold it; wait for the reaper
  }
  if (hdr_->nranks != nranks_) {
    *err = "the rendezvous has " + std::to_string(hdr_->nranks) +
           " ranks but this rank was given nRanks=" + std::to_string(nranks_);
    *res = HCCL_E_PARA;
    return Step::Fail;
  }
  if (ofd_lock(fd_, F_WRLCK, rank_, false) != 0) {
    *err = "rank " + std::to_string(rank_) + " is already taken by a live process";
    *res = HCCL_E_PARA;
    return Step::Fail;
  }
  bool current = names_this_file(path, fd_);  // not reaped or replaced while we looked
  ofd_lock(fd_, F_UNLCK, kGuardByte, false);
  return current ? Step::Ready : Step::Retry;
}

HcclResult Segment::join(const std::string &name, uint32_t nranks, uint32_t rank, int timeout_s,
                         std::unique_ptr<Segment> *out, std::string *err) {
  const std::string path = kShmDir + name;
  sweep_abandoned();
  const auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
  std::unique_ptr<Segment> s;
  for (int attempt = 0;; ++attempt) {
    if (attempt > 0) {
      if (Clock::now() >= deadline) {
        *err = "could not enter the rendezvous " + path + " within " + std::to_string(timeout_s) + " s";
        return HCCL_E_TIMEOUT;
      }
      std::this_thread::sleep_for(1ms);
    }
    s.reset(new Segment);
    s->name_ = name;
    s->rank_ = rank;
    s->nranks_ = nranks;
    HcclResult res = HCCL_SUCCESS;
    Step step = s->open_existing(path, &res, err);
    if (step == Step::Absent) {
      s.reset(new Segment);
      s->name_ = name;
      s->rank_ = rank;
      s->nranks_ = nranks;
      step = s->create(path, &res, err);
    }
    if (step == Step::Fail) return res;
    if (step == Step::Ready) break;
  }

  Header *h = s->hdr_;
  struct stat st {};
  fstat(s->fd_, &st);
  auto abandon = [&](const std::string &msg) {
    *err = msg;
    s.reset();  // drops our liveness lock, so the last one out can remove the file
    reap_if_abandoned(path, st.st_ino);
    return HCCL_E_TIMEOUT;
  };
  if (h->broken.load() != 0) return abandon("the rendezvous was already abandoned: " + s->broken_text());
  RankEntry &me = entries(h)[rank];
  uint32_t expected = 0;
  if (!me.joined.compare_exchange_strong(expected, 1)) {
    *err = "rank " + std::to_string(rank) + " has already joined this communicator";
    return HCCL_E_PARA;
  }
  me.pid = (int32_t)getpid();
  if (h->joined_count.fetch_add(1, std::memory_order_acq_rel) + 1 == nranks) {
    // Everyone has the file open: the name is no longer needed (and must not outlive the run).
    if (names_this_file(path, s->fd_)) unlink(path.c_str());
    h->complete.store(1, std::memory_order_release);
    futex_wake(&h->complete);
  } else {
    switch (s->wait_while(h->complete, 0, deadline, false, nullptr)) {
      case Wait::Changed: break;
      case Wait::Broken: return abandon("the rendezvous was abandoned: " + s->broken_text());
      default: {
        uint32_t joined = h->joined_count.load();
        s->mark_broken(Broken::InitAbandoned);
        return abandon("only " + std::to_string(joined) + " of " + std::to_string(nranks) + " ranks joined within " +
                       std::to_string(timeout_s) + " s (HCCL_CONNECT_TIMEOUT)");
      }
    }
  }
  *out = std::move(s);
  return HCCL_SUCCESS;
}

Segment::Wait Segment::wait_while(std::atomic<uint32_t> &word, uint32_t seen, Clock::time_point deadline,
                                  bool watch_peers, uint32_t *gone) {
  auto next_peer_check = Clock::now() + 20ms;
  for (int spin = 0;; ++spin) {
    if (word.load(std::memory_order_acquire) != seen) return Wait::Changed;
    if (hdr_->broken.load(std::memory_order_acquire) != 0) return Wait::Broken;
    if (spin < 64) continue;  // a short spin: peers often arrive within microseconds
    auto now = Clock::now();
    if (now >= deadline) return Wait::Timeout;
    if (watch_peers && now >= next_peer_check) {
      next_peer_check = now + 50ms;
      if (int r = first_gone_peer(); r >= 0) {
        // A peer that completed the barrier and then left is not a failure.
        if (word.load(std::memory_order_acquire) != seen) return Wait::Changed;
        *gone = (uint32_t)r;
        return Wait::PeerGone;
      }
    }
    futex_wait(&word, seen, std::min<std::chrono::nanoseconds>(deadline - now, 20ms));
  }
}

int Segment::first_gone_peer() const {
  for (uint32_t r = 0; r < nranks_; ++r)
    if (r != rank_ && !locked_by_other(fd_, r, 1)) return (int)r;
  return -1;
}

void Segment::barrier(int timeout_s, const std::string &what) {
  check_usable(what);
  uint32_t gen = hdr_->bar_gen.load(std::memory_order_acquire);
  if (hdr_->bar_arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == nranks_) {
    hdr_->bar_arrived.store(0, std::memory_order_relaxed);
    hdr_->bar_gen.fetch_add(1, std::memory_order_release);
    futex_wake(&hdr_->bar_gen);
    return;
  }
  uint32_t gone = 0;
  switch (wait_while(hdr_->bar_gen, gen, Clock::now() + std::chrono::seconds(timeout_s), true, &gone)) {
    case Wait::Changed: return;
    case Wait::Timeout:
      mark_broken(Broken::Timeout);
      throw KernelError(what + ": rank " + std::to_string(rank_) + " waited more than " + std::to_string(timeout_s) +
                        " s for its peers (HCCL_EXEC_TIMEOUT)");
    case Wait::PeerGone: {
      int pid = entries(hdr_)[gone].pid;
      mark_broken(Broken::PeerGone);
      throw KernelError(what + ": peer rank " + std::to_string(gone) + " (pid " + std::to_string(pid) +
                        ") left the communicator or died");
    }
    case Wait::Broken: break;
  }
  throw KernelError(what + ": " + broken_text());
}

void Segment::mark_broken(Broken why) {
  uint32_t expected = 0;
  hdr_->broken.compare_exchange_strong(expected, ((uint32_t)why << 16) | rank_);
  futex_wake(&hdr_->bar_gen);
  futex_wake(&hdr_->complete);
}

void Segment::check_usable(const std::string &what) const {
  if (hdr_->broken.load(std::memory_order_acquire) != 0) throw KernelError(what + ": " + broken_text());
}

std::string Segment::broken_text() const {
  uint32_t b = hdr_->broken.load();
  std::string who = "rank " + std::to_string(b & 0xffff);
  switch ((Broken)(b >> 16)) {
    case Broken::None: return "communicator usable";
    case Broken::Timeout: return "communicator broken: " + who + " timed out waiting for its peers";
    case Broken::PeerGone: return "communicator broken: " + who + " saw a peer leave or die";
    case Broken::Mismatch: return "communicator broken: ranks issued different collectives";
    case Broken::LocalFault: return "communicator broken: a collective failed on " + who;
    case Broken::InitAbandoned: return "communicator broken: " + who + " gave up waiting for the others to join";
  }
  return "communicator broken";
}

}  // namespace fakecann::hccl
