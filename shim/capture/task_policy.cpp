#include "shim/capture/task_policy.h"

#include "shim/config/config.h"

namespace msprobe::shim {
namespace {

// MSPROBE_FLIGHT_KERNELS=auto: as many as the ring holds, up to this many (each kept kernel's description stays on the
// host, about a kilobyte: this bounds them to tens of MB beside the budget).
constexpr uint64_t kAutoFlightKernels = 16384;

DeviceStatsSettings device_stats_settings(const Config &c, bool overflow) {
  DeviceStatsSettings d;
  d.enabled = c.device_stats;
  d.overflow = overflow;
  d.high_precision = c.precision == Precision::High;
  d.snapshot_budget = c.buffer_bytes;
  return d;
}

// Statistics come from the device's reductions unless md5 needs the bytes or the user turned it off.
std::unique_ptr<Stager> statistics_stager(const Config &c, bool overflow) {
  if (c.device_stats && c.summary_mode == SummaryMode::Statistics)
    return device_statistics(c.buffer_bytes, device_stats_settings(c, overflow));
  return host_copies(c.buffer_bytes);
}

}  // namespace

TaskPolicy make_task_policy(const Config &c, std::function<bool()> evict_oldest) {
  TaskPolicy p;
  p.dump_task = format::dump_task(c.task);
  p.saves_tensors = format::task_writes(c.task).tensor_files;
  const auto precision = c.precision;
  p.make_retention = [](std::shared_ptr<record::StackRenderer>) { return collector::write_all(); };
  switch (c.task) {
    case Task::Statistics:
      p.stager = statistics_stager(c, false);
      p.graph_dump = c.summary_mode == SummaryMode::Statistics ? GraphDump::Statistics : GraphDump::Tensors;
      break;
    case Task::Tensor:
      p.stager = host_copies(c.buffer_bytes);
      p.graph_dump = GraphDump::Tensors;
      break;
    case Task::OverflowCheck:
      p.stager = statistics_stager(c, true);
      p.graph_dump = GraphDump::Tensors;
      p.make_retention = [limit = c.overflow_nums, precision](std::shared_ptr<record::StackRenderer> stacks) {
        return collector::first_overflows(limit, precision, std::move(stacks));
      };
      break;
    case Task::Structure:
      p.stager = metadata_only();
      p.takes_data = false;
      p.graph_dump = GraphDump::Statistics;  // the cheapest: names and shapes are all it keeps
      break;
    case Task::Flight: {
      // The outputs' extremes are its check, whatever the summary mode: what it writes comes from the bytes.
      p.stager = flight_ring(c.buffer_bytes, device_stats_settings(c, false), std::move(evict_oldest));
      p.graph_dump = GraphDump::Off;
      const uint64_t keep = c.flight_kernels ? c.flight_kernels : kAutoFlightKernels;
      p.make_retention = [keep, exact = c.flight_kernels != 0, limit = c.overflow_nums,
                          precision](std::shared_ptr<record::StackRenderer> stacks) {
        return collector::flight_record(keep, exact, limit, precision, std::move(stacks));
      };
      break;
    }
  }
  return p;
}

}  // namespace msprobe::shim
