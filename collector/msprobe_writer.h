// msprobe's layout as a DumpWriter (writer.h): step{N}/rank{R}/ with dump.json and construct.json as journals in
// submission order, stack.json rewritten whole when its groups change, and dump_tensor_data/ with one npy (or bin,
// or lz4) file per tensor and mapping.csv for names too long (docs/format.md).
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>

#include "collector/writer.h"
#include "format/format.h"
#include "format/stats.h"

namespace msprobe::collector {

struct MsprobeWriterOptions {
  std::filesystem::path dump_path;
  format::Task dump_task = format::Task::Statistics;  // what dump.json's "task" says
  bool md5 = false;                                   // summary_mode md5: CRC-32 of each tensor's bytes
  format::FileFormat file_format = format::FileFormat::Npy;
  format::Framework framework = format::Framework::MindSpore;
  format::HostFramework host_framework = format::HostFramework::Acl;
  format::StatPrecision precision = format::StatPrecision::Low;
  bool save_tensors = false;                                // write dump_tensor_data/
  format::Compression compress = format::Compression::Off;  // lz4: each tensor file an LZ4 frame named {file}.lz4
  std::shared_ptr<record::StackRenderer> stacks;            // null: no stack.json groups
  std::string run_id;                                       // dump.json's "run": which run wrote it
  int64_t run_pid = 0;
  // Test seam (test/integration/crash/kill_stress.py): widens the moment between a kernel's dump.json and
  // construct.json appends, so that random SIGKILLs land in it.
  long journal_gap_us = 0;
};

std::unique_ptr<DumpWriter> msprobe_writer(MsprobeWriterOptions options);

}  // namespace msprobe::collector
