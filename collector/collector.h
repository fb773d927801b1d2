// The collector: captured kernels in, files out. It knows nothing of ACL: the shim hands it, once per kernel, a
// KernelCapture (names, metadata, staged host bytes and a way to wait for them). Writer threads wait for the bytes
// and hand each kernel to the task's Retention (retention.h), which says whether it is written at once, and the
// DumpWriter (writer.h) encodes it in parallel; kernels are then committed in submission order (a small reorder
// step), so that what the writer appends is always a prefix of the truth.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "collector/retention.h"
#include "collector/writer.h"
#include "record/kernel_record.h"

namespace msprobe::collector {

using namespace msprobe::format;  // the collector speaks the format's vocabulary throughout
using namespace msprobe::record;

struct CollectorParts {
  std::unique_ptr<DumpWriter> writer;
  std::unique_ptr<Retention> retention;  // null: write_all()
  // Threads that wait for staged bytes and encode kernels in parallel (0: min(4, cores)).
  unsigned writer_threads = 0;
  // The most a flush, close or write_kept waits for the writers (MSPROBE_WRITE_WAIT_S). Past it, what is not written is
  // said, the caller goes on, and the files stay as after a crash (repair completes them); a writer stuck for good
  // (a dead file system) costs the host this once, not at every later wait.
  std::chrono::milliseconds write_wait{30000};
};

class Collector {
 public:
  explicit Collector(CollectorParts parts);
  ~Collector();
  Collector(const Collector &) = delete;
  Collector &operator=(const Collector &) = delete;

  // Queues one kernel; thread-safe, returns at once.
  void submit(record::KernelCapture kernel);
  // Returns when everything submitted before the call is committed and the stack files are up to date, or when the
  // write wait ran out (false: said on stderr). The stack files are rendered and written by a writer thread, not the
  // caller (the host's, when it synchronizes or finalizes).
  bool flush();
  // flush(), then closes every file into valid JSON (unless the writers are stuck: then the files are left as after a
  // crash). Later submits are counted and reported, not written.
  // join_writers false: the idle writer threads are left to end on their own (the process is dying: a thread ending
  // frees its malloc cache, which waits for malloc's lock, which a thread stopped in a signal handler may hold).
  void close(bool join_writers = true);
  CollectorCounters counters() const;
  // False once a wait for the writers ran out (the files are left as after a crash).
  bool complete() const;
  // Waits for everything submitted to be written (the write wait), then has the writer give the kernels without a
  // rank to `rank` (DumpWriter::adopt_rank).
  void adopt_rank(uint32_t rank);
  // The retention will write nothing more (overflow_check's and flight's limits): the launching threads stop copying.
  // One atomic load.
  bool write_limit_reached() const noexcept;
  // flight: lets go of the oldest kept kernel (its bytes are released); false when none is kept, or when it may belong
  // to the record of a kernel still being checked: the caller waits for the checks and asks again. Thread-safe; it
  // waits for no write.
  bool drop_oldest_kept();
  // flight: waits until everything submitted is checked, then writes the kept kernels as a flight record whose
  // trigger is `trigger` ("exit", "signal SIGTERM"). Nothing when none is kept or the record limit was reached.
  void write_kept(const std::string &trigger);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace msprobe::collector
