// A task, decided once from the configuration: how each captured tensor is taken (the stager, shim/device/stager.h),
// which kernels reach the dump (the collector's retention, collector/retention.h), and the few facts others need.
// This is the one place that decides what a task does (beyond the configuration, only the session's exit line asks
// whether a flight ran): adding a task is a stager and a retention (or existing ones), a word in the task tables and
// a case here (docs/architecture.md, "Where to change what").
//
//   task            stager                                retention            dump.json says
//   statistics      device_statistics (host_copies for    write_all            statistics
//                   md5 or MSPROBE_DEVICE_STATS=0)
//   tensor          host_copies                           write_all            tensor
//   overflow_check  device_statistics / host_copies       first_overflows      overflow_check
//   structure       metadata_only                         write_all            structure
//   flight          flight_ring                           flight_record        tensor
#pragma once
#include <functional>
#include <memory>

#include "collector/retention.h"
#include "format/format.h"
#include "shim/device/stager.h"

namespace msprobe::shim {

struct Config;

// What CANN's data dump must deliver for graph-sunk kernels (shim/capture/graph_capture.h).
enum class GraphDump : uint8_t {
  Off,         // not recorded (the flight ring has no copy of a model's tensors)
  Statistics,  // CANN's stats CSV: no tensor reaches the host
  Tensors,     // the tensors' files
};

struct TaskPolicy {
  std::unique_ptr<Stager> stager;
  // Made with the collector (the stack renderer is for its messages).
  std::function<std::unique_ptr<collector::Retention>(std::shared_ptr<record::StackRenderer>)> make_retention;
  format::Task dump_task = format::Task::Statistics;  // dump.json's "task"
  bool takes_data = true;                             // false: tensors are described only (no statistics, no file)
  bool saves_tensors = false;                         // dump_tensor_data/ is written
  GraphDump graph_dump = GraphDump::Statistics;
};

// evict_oldest: what the flight ring calls when it is full (the collector's drop_oldest_kept, once there is one).
TaskPolicy make_task_policy(const Config &config, std::function<bool()> evict_oldest);

}  // namespace msprobe::shim
