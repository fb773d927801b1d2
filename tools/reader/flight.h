// Flight records (MSPROBE_TASK=flight): a tensor dump whose kernels carry flight_trigger. The kernels of one rank
// written for one trigger form a record; a record may span step folders, and a dump may hold several records per
// rank (MSPROBE_OVERFLOW_NUMS > 1), told apart by flight_trigger_kernel. summary and replay group them here.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tools/reader/dump_reader.h"

namespace msprobe::tools {

// A kernel written by a flight record, with what the tools report of it.
struct FlightKernel {
  size_t folder = 0;  // index of its folder in the caller's list
  std::string rank;   // rank label: "rank0", "rank"
  std::optional<uint64_t> step, launch_index;
  std::string name;
  FlightFields fields;
  // From the recorded statistics: every input tensor finite, and some output not.
  bool inputs_finite = true, output_non_finite = false;
};

// The kernel of `tensors` as a flight record lists it; nullopt when it has no flight_trigger.
std::optional<FlightKernel> flight_kernel(size_t folder, const RankDir &dir, std::string name,
                                          std::optional<uint64_t> launch_index, const FlightFields &fields,
                                          std::span<const TensorInfo> tensors);

// One record: the kernels of one rank written for one trigger, in launch order (then step).
struct FlightRecord {
  std::string rank, trigger, trigger_kernel;
  std::vector<FlightKernel> kernels;

  // The kernel named by trigger_kernel among them, null when absent (or for exit / signal).
  const FlightKernel *trigger_entry() const;
  std::vector<uint64_t> steps() const;  // sorted, unique
  size_t notes() const;                 // kernels with a flight_note
  // "overflow in Muls.TinyModel.blow_up.0", "exit", "signal SIGTERM"
  std::string trigger_text() const;
  // "launch_index 37-52" (or "?" where unknown)
  std::string launch_range_text() const;
};

// The records of `kernels` (in folder order): ranks as they first come, then each rank's records by launch order.
std::vector<FlightRecord> group_flight_records(std::vector<FlightKernel> kernels);

}  // namespace msprobe::tools
