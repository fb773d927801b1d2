// The collector's output seam. The pipeline (collector.h) owns the queue, the writer threads and the order in which
// kernels are committed; what a kernel becomes on disk is a DumpWriter's business (msprobe's layout:
// msprobe_writer.h), and which kernels are written at all is a Retention's (retention.h). A second layout or
// transport is a second DumpWriter, with no change to the pipeline.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "record/kernel_record.h"

namespace msprobe::collector {

// What the collector did, summed over its parts (pipeline, writer, retention).
struct CollectorCounters {
  uint64_t submitted = 0, written = 0, without_data = 0, tensor_files = 0, tensor_bytes = 0, write_errors = 0;
  uint64_t after_close = 0;      // submitted after close(): reported, not written
  uint64_t overflows = 0;        // overflow_check: kernels found with NaN/Inf outputs (and written); flight: records
  uint64_t kept_high_water = 0;  // flight: most kernels kept at once
  uint64_t file_bytes = 0;       // bytes on disk for the tensor files (compressed size with lz4)
  // Most kernels prepared but waiting for an earlier one to be appended.
  uint64_t reorder_high_water = 0;
};

// A writer's encoding of one kernel, opaque to the pipeline.
struct EncodedKernel {
  virtual ~EncodedKernel() = default;
};

// One kernel on its way from a writer thread to its turn in submission order.
struct PendingKernel {
  record::KernelCapture k;
  bool have_data = true;                   // its staged bytes are valid (the Completion said so)
  std::string overflow;                    // the NaN/Inf in its outputs, when the retention looked
  std::unique_ptr<EncodedKernel> encoded;  // set by DumpWriter::encode
};

class DumpWriter {
 public:
  virtual ~DumpWriter() = default;
  // On any writer thread, in parallel with other kernels: all the work that need not wait for the kernels before
  // this one (statistics, tensor files, the entry's text). Releases the kernel's staged bytes.
  virtual void encode(PendingKernel &k) = 0;
  // In submission order, one at a time, after encode(): the kernel joins its folder.
  virtual void append(PendingKernel &k) = 0;
  // Brings the stack files up to date. Called in submission order's lock, as append().
  virtual void write_stacks() = 0;
  // MSPROBE_RACECHECK: a kernel with race facts (k.race), in submission order before its retention looks at it,
  // whether or not it is written.
  virtual void check_races(PendingKernel &k) { (void)k; }
  // Closes every folder into valid files. Later appends are not expected.
  virtual void close() = 0;
  // Adds this writer's counts.
  virtual void count(CollectorCounters &c) const = 0;
  // Kernels without a rank are `rank`'s from now on, and so are those written so far (a process's rank known only
  // after it began, shim/capture/rank_map.h). Called in submission order's lock, everything before it committed.
  virtual void adopt_rank(uint32_t rank) { (void)rank; }
};

}  // namespace msprobe::collector
