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

#include "collector/format.h"
#include "collector/json_writer.h"
#include "collector/stats.h"

namespace msprobe::collector {

// Host bytes staged for one tensor (or several). The producer's destructor gives the memory back.
class HostBlock {
 public:
  virtual ~HostBlock() = default;
  virtual const void *data() const = 0;
  virtual uint64_t size() const = 0;
};

// Says when staged bytes are valid (for a device, an event after the copies). wait() returns false when
// they never will be (the copy failed); the kernel is then recorded without data.
class Completion {
 public:
  virtual ~Completion() = default;
  virtual bool wait() = 0;
};

// Statistics computed elsewhere (on the device, by the shim) instead of from the tensor's bytes. Read only
// after the kernel's `ready` completed; nullopt when they could not be had (the tensor then has none).
class PrecomputedStats {
 public:
  virtual ~PrecomputedStats() = default;
  virtual std::optional<TensorStats> stats() const = 0;
};

// One tensor argument: the view (shape, strides and offset in elements) over its staged bytes.
struct TensorCapture {
  DType dtype = DType::F32;
  std::optional<std::string> dtype_name;  // overrides the framework spelling (e.g. for Raw types)
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;       // elements; the view reads block[offset + sum(i_k * strides_k)]
  int64_t offset = 0;                 // elements from block->data()
  std::optional<std::string> format;  // L2 extras, as the device described the tensor
  std::optional<std::vector<int64_t>> device_stride;
  std::optional<int64_t> device_offset;
  std::shared_ptr<const HostBlock> block;  // null: metadata only (structure task, data not taken)
  // Set: the statistics written for this tensor (Max, Min, Mean, Norm, with the NaN/Inf counts for
  // overflow_check), exactly as if computed from `block`; `block` is then only read for files and md5.
  std::shared_ptr<const PrecomputedStats> device_stats;
};

struct CapturedArg;
using CapturedList = std::vector<CapturedArg>;
// One slot of input_args / output: null (absent optional tensor), a tensor, a value, or a list.
struct CapturedArg {
  std::variant<std::monostate, TensorCapture, ValueArg, CapturedList> v;
};

// Turns stack ids into frames for stack.json. The collector does not capture stacks; whoever does gives it
// one of these, called on the writer side only (symbolization is slow the first time and must stay off the
// launch path).
class StackRenderer {
 public:
  virtual ~StackRenderer() = default;
  // The id of the group `id` belongs to (stacks that render the same share one), or 0 for "no stack".
  virtual uint64_t group(uint64_t id) = 0;
  // The frames of a group's representative, innermost first, as msprobe writes them.
  virtual std::vector<std::string> frames(uint64_t group_id) = 0;
};

struct KernelCapture {
  std::string name;       // {OpType}.{OpName}.{n}, from KernelNamer
  uint64_t stack_id = 0;  // 0: no stack
  uint64_t step = 0;
  std::optional<uint32_t> rank;
  uint64_t launch_index = 0, task_id = 0, stream_id = 0, timestamp_us = 0;
  std::optional<CapturedList> inputs;   // nullopt: left out (data_mode "output")
  std::optional<CapturedList> outputs;  // nullopt: left out (data_mode "input")
  std::shared_ptr<Completion> ready;    // null: the bytes are valid already
  std::vector<std::pair<std::string, ArgValue>> extra;
};

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
  std::shared_ptr<StackRenderer> stacks;  // null: stack.json holds only {}
  // lz4: each tensor file is an LZ4 frame named {file}.lz4.
  Compression compress = Compression::Off;
  // Threads that wait for staged bytes, compute statistics and write tensor files in parallel (0: min(4, cores)).
  // dump.json / construct.json are still appended in submission order.
  unsigned writer_threads = 0;
};

struct CollectorCounters {
  uint64_t submitted = 0, written = 0, without_data = 0, tensor_files = 0, tensor_bytes = 0, write_errors = 0;
  uint64_t after_close = 0;  // submitted after close(): reported, not written
  uint64_t overflows = 0;    // overflow_check: kernels found with NaN/Inf outputs (and written)
  uint64_t file_bytes = 0;   // bytes on disk for the tensor files (compressed size with lz4)
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
  void close();
  CollectorCounters counters() const;
  const CollectorOptions &options() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Names kernels in launch order: {OpType}.{OpName}.{n}, n counting per step and rank. Thread-safe.
class KernelNamer {
 public:
  std::string name(uint64_t step, std::optional<uint32_t> rank, std::string_view op_type, std::string_view op_name);

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_ = make_impl();
  static std::shared_ptr<Impl> make_impl();
};

}  // namespace msprobe::collector
