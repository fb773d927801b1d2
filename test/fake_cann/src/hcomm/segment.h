// The shared state of one communicator across rank processes: a POSIX shared-memory file
// (/dev/shm/<name>) that every rank maps. It holds a header (join counter, barrier, "broken" flag),
// one entry per rank (the descriptor of the collective it is running) and one staging slot per rank
// through which the data moves (device memory is private to each process, as on real NPUs).
//
// Liveness without a coordinator: every rank holds an OFD write lock on byte <rank> of the file for as
// long as it is in the communicator. The kernel drops the lock when the process dies, so a peer that
// crashed is seen at once (F_OFD_GETLK) instead of after the timeout, and a file left behind by a
// crashed run (no lock held at all) is recognized as stale and replaced.
//
// The name exists only during the rendezvous: the last rank to join unlinks it, so a normal run (or
// one that crashes after init, or never calls HcclCommDestroy) leaves nothing in /dev/shm. A rank that
// gives up (HCCL_CONNECT_TIMEOUT) removes the file when it is the last one in it; files of ranks killed
// while joining are removed by the next rendezvous on the machine (no lock held in them).
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "fakecann/export.h"
#include "hccl/hccl_types.h"

namespace fakecann::hccl {

inline constexpr uint32_t kMaxRanks = 1024;

enum class CollKind : uint32_t {
  AllReduce = 1,
  Broadcast = 2,
  AllGather = 3,
  ReduceScatter = 4,
  Barrier = 5,
  Send = 6,  // on a pair's segment: the sender's descriptor (the receiver's says Recv)
  Recv = 7,
  Reduce = 8,   // the reduction reaches the root's recvBuf only
  Scatter = 9,  // the root's sendBuf holds one block per rank
};

// What a rank is running; all ranks must agree before data moves (mismatch -> error, not a hang).
struct CollDesc {
  uint32_t kind = 0, dtype = 0, op = 0, root = 0;
  uint64_t count = 0, seq = 0;
  bool operator==(const CollDesc &) const = default;
};

// Why a communicator became unusable (stored in shared memory so that every rank fails fast).
enum class Broken : uint32_t { None = 0, Timeout = 1, PeerGone = 2, Mismatch = 3, LocalFault = 4, InitAbandoned = 5 };

struct Header;  // the shared layout, private to segment.cpp

class FAKECANN_API Segment {
 public:
  using Clock = std::chrono::steady_clock;

  // Joins the rendezvous `name` as `rank` of `nranks` (creating it if this rank is first) and blocks until
  // all ranks have joined or `timeout_s` elapses (HCCL_E_TIMEOUT). `err` gets a message on failure.
  static HcclResult join(const std::string &name, uint32_t nranks, uint32_t rank, int timeout_s,
                         std::unique_ptr<Segment> *out, std::string *err);
  ~Segment();
  Segment(const Segment &) = delete;
  Segment &operator=(const Segment &) = delete;

  uint32_t rank() const { return rank_; }
  uint32_t nranks() const { return nranks_; }
  uint64_t slot_bytes() const;
  char *slot(uint32_t r) const;
  CollDesc &desc(uint32_t r) const;

  // All ranks meet here. Throws KernelError (after marking the communicator broken) on timeout, when a
  // peer is gone, or when another rank already broke the communicator. `what` names the collective.
  void barrier(int timeout_s, const std::string &what);
  // Records the first failure for every rank to see and wakes all waiters.
  void mark_broken(Broken why);
  // Throws KernelError if the communicator is broken.
  void check_usable(const std::string &what) const;
  std::string broken_text() const;

 private:
  Segment() = default;
  enum class Step { Ready, Retry, Absent, Fail };
  Step create(const std::string &path, HcclResult *res, std::string *err);
  Step open_existing(const std::string &path, HcclResult *res, std::string *err);
  enum class Wait { Changed, Timeout, Broken, PeerGone };
  Wait wait_while(std::atomic<uint32_t> &word, uint32_t seen, Clock::time_point deadline, bool watch_peers,
                  uint32_t *gone);
  int first_gone_peer() const;  // -1 if every peer still holds its lock

  Header *hdr_ = nullptr;
  void *base_ = nullptr;
  uint64_t size_ = 0;
  int fd_ = -1;
  uint32_t rank_ = 0, nranks_ = 0;
  std::string name_;
};

}  // namespace fakecann::hccl
