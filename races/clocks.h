// Happens-before between a process's streams and its host, as CANN orders them, kept as vector clocks: the launching
// side of the race check (docs/races.md). Actor 0 is the host (every host thread: one participant, so that what
// threads order among themselves by their own means never looks like a race); each stream is an actor from its first
// use on. Every launch onto a stream is stamped with that stream's next epoch and the clock it runs with:
//
//   launch / async copy on S   S learns the host's past (it was enqueued after it), then S ticks    -> the stamp
//   record(E, S)               E's clock = S's (a wait on E orders after everything enqueued on S before it)
//   wait(S, E)                 S learns E's clock as last recorded (an event never recorded orders nothing)
//   synchronize S / E / device what the host learns once the call returned: taken before it, learnt after it
//   synchronous copy, memset   the host ticks: an access of the host's own, ordered before its later launches
//
// The writer side (races/detector.h) compares stamps: an access is ordered before another when the other's clock has
// reached its epoch on its actor. Thread-safe (one mutex, held for a few loads and stores); nothing here calls out.
#pragma once
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "record/kernel_record.h"

namespace msprobe::races {

using VectorClock = std::vector<uint64_t>;  // [actor] -> the latest epoch of that actor known

// Each component of `into` the larger of its own and `from`'s.
void join(VectorClock &into, const VectorClock &from);
// The access stamped `a` happened before the one stamped `b`: the same actor (stream order, the host's program
// order), or b's clock has reached a's epoch on a's actor. Unstamped (epoch 0): never.
bool ordered_before(const record::LaunchStamp &a, const record::LaunchStamp &b);

class StreamClocks {
 public:
  static constexpr uint32_t kHost = 0;

  // A kernel, asynchronous copy or memset enqueued on `stream` now.
  record::LaunchStamp launch(const void *stream);
  // An access the host makes itself now (a synchronous copy or memset).
  record::LaunchStamp host_access();
  // aclrtRecordEvent(event, stream), aclrtStreamWaitEvent(stream, event).
  void record(const void *event, const void *stream);
  void wait(const void *stream, const void *event);
  // What a synchronization gives the host, taken before the call: a stream's work so far, an event's latest record,
  // every stream's (the device). host_learns() it once the call said the work is done.
  VectorClock of_stream(const void *stream);
  VectorClock of_event(const void *event) const;
  VectorClock of_device() const;
  void host_learns(const VectorClock &clock);

  // For tests and the report: the actor a stream has (made on first use).
  uint32_t actor_of(const void *stream);

 private:
  uint32_t actor_locked(const void *stream);
  mutable std::mutex mu_;
  std::unordered_map<const void *, uint32_t> actors_;
  std::vector<VectorClock> clocks_{VectorClock(1, 0)};  // [actor]; [kHost] the host's
  std::unordered_map<const void *, VectorClock> events_;  // event -> clock at its latest record
};

}  // namespace msprobe::races
