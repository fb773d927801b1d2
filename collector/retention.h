// Which kernels reach the dump, and when: the collector's half of a task's policy (the capture side's half is the
// shim's stager). The pipeline hands every kernel to examine() on a writer thread, then to commit() in submission
// order; the retention writes it (through the DumpWriter), keeps it or lets it go.
//
//   write_all()          every kernel, encoded in parallel as soon as its bytes are valid (statistics, tensor,
//                        structure tasks)
//   first_overflows(N)   only kernels with NaN/Inf in an output, the first N in submission order, each reported on
//                        stderr and marked "overflow" (overflow_check)
//   flight_record(...)   clean kernels are kept (the last N); one with NaN/Inf is written with the kept ones before
//                        it, oldest first, marked with its trigger, at most N times (the flight task)
//
// A new task needs a new Retention only if none of these fits.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "collector/writer.h"

namespace msprobe::collector {

class Retention {
 public:
  virtual ~Retention() = default;
  // On a writer thread, once the kernel's bytes are valid (or known lost): true when it is written whatever comes
  // before it, so the pipeline encodes it now, in parallel; false when its fate is decided in commit().
  virtual bool examine(PendingKernel &k) = 0;
  // In submission order, one at a time.
  virtual void commit(PendingKernel &&k, DumpWriter &writer) = 0;
  // No kernel from now on will be written (the N asked for are): the capture side stops copying. One atomic load.
  virtual bool limit_reached() const noexcept { return false; }
  // flight: lets go of the oldest kept kernel (its bytes go back to their producer); false when none is kept, or when
  // it may belong to the record of a kernel still being checked (`checks_pending`). Thread-safe; waits for no write.
  virtual bool drop_oldest_kept(bool checks_pending) { return false; }
  // flight: writes the kept kernels as a record whose trigger is `trigger` ("exit", "signal SIGTERM"). Called in
  // submission order's lock, after every submitted kernel was committed.
  virtual void write_kept(const std::string &trigger, DumpWriter &writer) {}
  // flight: what was kept and not asked for is let go (close).
  virtual void release_kept() {}
  virtual void count(CollectorCounters &c) const {}
};

// The stack renderer and precision are for the messages and checks of the two that look at outputs.
std::unique_ptr<Retention> write_all();
std::unique_ptr<Retention> first_overflows(int64_t limit, format::StatPrecision precision,
                                           std::shared_ptr<record::StackRenderer> stacks);
// keep: kernels kept; exact: the producer asked for exactly `keep` (MSPROBE_FLIGHT_KERNELS set), so the last `keep`
// are not let go while later kernels are being checked; limit: records written at most (-1: no limit).
std::unique_ptr<Retention> flight_record(uint64_t keep, bool exact, int64_t limit, format::StatPrecision precision,
                                         std::shared_ptr<record::StackRenderer> stacks);

}  // namespace msprobe::collector
