// The collector: captured kernels in, msprobe's files out. It knows nothing of ACL: the shim hands it,
// once per kernel, a KernelCapture (names, metadata, staged host bytes and a way to wait for them), and
// writer threads wait for the bytes, materialize each tensor's logical view, compute statistics and write the
// tensor files in parallel; the kernel is then appended to dump.json / construct.json of its step{N}/rank{R}
// folder in submission order (a small reorder step), so the journals on disk are always a prefix of the truth.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "record/kernel_record.h"

namespace msprobe::collector {

using namespace msprobe::format;  // the collector speaks the format's vocabulary throughout
using namespace msprobe::record;

struct CollectorOptions {
  std::filesystem::path dump_path;
  Task task = Task::Statistics;
  bool md5 = false;  // summary_mode md5: CRC-32 of each tensor's bytes
  FileFormat file_format = FileFormat::Npy;
  Framework framework = Framework::MindSpore;
  HostFramework host_framework = HostFramework::Acl;
  StatPrecision precision = StatPrecision::Low;
  bool save_tensors = false;  // write dump_tensor_data/ (tensor task; overflow_check for overflowing kernels)
  // overflow_check: only kernels with a NaN or Inf in an output are written, at most `overflow_limit` of
  // them (-1: no limit), each reported on stderr and marked with an "overflow" field.
  bool overflow_only = false;
  int64_t overflow_limit = -1;
  // flight: each kernel's outputs are checked the same way, but a clean kernel is kept (the last `flight_kernels`)
  // instead of dropped; a kernel with NaN/Inf is written with the kept ones before it, oldest first (a flight
  // record, each kernel marked with json_key::kFlightTrigger), at most `overflow_limit` times. The kept kernels' bytes
  // stay where the producer put them (its blocks) until they are written or let go.
  bool flight = false;
  uint64_t flight_kernels = 1;
  // The producer asked for exactly `flight_kernels` (MSPROBE_FLIGHT_KERNELS set): drop_oldest_kept() then refuses to
  // let go of one of the last `flight_kernels` while later kernels are still being checked (one of them may need it).
  bool flight_exact = false;
  std::shared_ptr<StackRenderer> stacks;  // null: stack.json holds only {}
  // lz4: each tensor file is an LZ4 frame named {file}.lz4.
  Compression compress = Compression::Off;
  // Threads that wait for staged bytes, compute statistics and write tensor files in parallel (0: min(4, cores)).
  // dump.json / construct.json are still appended in submission order.
  unsigned writer_threads = 0;
};

struct CollectorCounters {
  uint64_t submitted = 0, written = 0, without_data = 0, tensor_files = 0, tensor_bytes = 0, write_errors = 0;
  uint64_t after_close = 0;      // submitted after close(): reported, not written
  uint64_t overflows = 0;        // overflow_check: kernels found with NaN/Inf outputs (and written); flight: records
  uint64_t kept_high_water = 0;  // flight: most kernels kept at once
  uint64_t file_bytes = 0;       // bytes on disk for the tensor files (compressed size with lz4)
  // Most kernels prepared but waiting for an earlier one to be appended.
  uint64_t reorder_high_water = 0;
};

class Collector {
 public:
  explicit Collector(CollectorOptions options);
  ~Collector();
  Collector(const Collector &) = delete;
  Collector &operator=(const Collector &) = delete;

  // Queues one kernel; thread-safe, returns at once.
  void submit(KernelCapture kernel);
  // Returns when everything submitted before the call is on disk.
  void flush();
  // flush(), then closes every file into valid JSON. Later submits are counted and reported, not written.
  // join_writers false: the idle writer threads are left to end on their own (the process is dying: a thread ending
  // frees its malloc cache, which waits for malloc's lock, which a thread stopped in a signal handler may hold).
  void close(bool join_writers = true);
  CollectorCounters counters() const;
  const CollectorOptions &options() const;
  // overflow_check: overflow_limit kernels have been found; later ones will not be written. One atomic load, for
  // the launching threads (which then stop copying).
  bool overflow_limit_reached() const noexcept;
  // flight: lets go of the oldest kept kernel (its bytes are released); false when none is kept, or (flight_exact)
  // when it may belong to the record of a kernel still being checked: the caller waits for the checks and asks again.
  // Thread-safe; it waits for no write.
  bool drop_oldest_kept();
  // flight: waits until everything submitted is checked, then writes the kept kernels as a flight record whose
  // trigger is `trigger` ("exit", "signal SIGTERM"). Nothing when none is kept or the record limit was reached.
  void write_kept(const std::string &trigger);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace msprobe::collector
